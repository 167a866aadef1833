/* The library through opaque handles and flat calls (see attn/handles.h):
 * each function unpacks its numbers into the typed API and runs it. */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include "attn/handles.h"

#include <cblas.h>
#include <cjson/cJSON.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "attn/attention_weights.h"
#include "attn/checkpoint.h"
#include "attn/dropout.h"
#include "attn/engine.h"
#include "attn/fileio.h"
#include "attn/finetune.h"
#include "attn/flash_attention.h"
#include "attn/generate.h"
#include "attn/gpt.h"
#include "attn/runlock.h"
#include "attn/tokenizer.h"
#include "attn/train.h"
#include "attn/train_setup.h"
#include "attn/viz.h"
#include "attn/weights_format.h"
#include "base/alloc_huge.h"

void attn_h_free(void *p) {
    free(p);
}

void attn_h_collapse_huge(void *p, size_t bytes) {
    attn_collapse_huge(p, bytes);
}

void *attn_h_alloc_huge(size_t bytes) {
    return attn_alloc_huge(bytes ? bytes : 1);
}

/* attn's one thread pool for the length of a call (attn/gemm.h): OpenBLAS
 * at one thread, so attn_sgemm splits the products over attn's OpenMP
 * threads instead of two pools fighting over the cores; the caller's
 * setting is restored after. */
static int blas_one(void) {
    const int before = openblas_get_num_threads();
    if (before != 1) openblas_set_num_threads(1);
    return before;
}

static void blas_restore(int before) {
    if (before != 1) openblas_set_num_threads(before);
}

/* ------------------------------------------------------------ generators */

attn_rng *attn_h_rng_create(uint64_t seed) {
    attn_rng *rng = malloc(sizeof *rng);
    if (rng) attn_rng_seed(rng, seed);
    return rng;
}

void attn_h_rng_free(attn_rng *rng) {
    free(rng);
}

/* ------------------------------------------------------------ parameters */

static const attn_param *param_at(const attn_param_list *l, int i) {
    return l && i >= 0 && i < l->count ? &l->items[i] : NULL;
}

int attn_h_param_count(const attn_param_list *l) {
    return l ? l->count : 0;
}

const char *attn_h_param_name(const attn_param_list *l, int i) {
    const attn_param *p = param_at(l, i);
    return p ? p->name : NULL;
}

float *attn_h_param_data(const attn_param_list *l, int i) {
    const attn_param *p = param_at(l, i);
    return p ? p->data : NULL;
}

float *attn_h_param_grad(const attn_param_list *l, int i) {
    const attn_param *p = param_at(l, i);
    return p ? p->grad : NULL;
}

int attn_h_param_shape(const attn_param_list *l, int i, int64_t *shape) {
    const attn_param *p = param_at(l, i);
    if (!p) return -1;
    for (int d = 0; d < ATTN_PARAM_MAX_DIMS; d++)
        shape[d] = d < p->ndim ? p->shape[d] : 1;
    return p->ndim;
}

/* --------------------------------------------------------------- modules */

attn_status attn_h_module_create(const char *kind, int d_in, int d_out, int num_heads,
                                 int context_length, double dropout, int qkv_bias, attn_rng *rng,
                                 attn_module **out, attn_error *err) {
    *out = NULL;
    attn_module_config c = {.d_in = d_in,
                            .d_out = d_out,
                            .num_heads = num_heads,
                            .context_length = context_length,
                            .dropout = dropout,
                            .qkv_bias = qkv_bias};
    if (attn_module_kind_parse(kind, &c.kind) != 0) {
        char names[256] = "";
        size_t used = 0;
        for (int i = 0; i < ATTN_MODULE_KIND_COUNT && used < sizeof names; i++)
            used += (size_t)snprintf(names + used, sizeof names - used, "%s%s", i ? ", " : "",
                                     attn_module_kind_name((attn_module_kind)i));
        return attn_fail(err, ATTN_ERR_INVALID_ARG, "unknown module kind '%s' (one of %s)",
                         kind ? kind : "(null)", names);
    }
    return attn_module_create(&c, rng, out, err);
}

size_t attn_h_module_mask_numel(const attn_module *m, int B, int T) {
    const attn_module_config *c = attn_module_get_config(m);
    const attn_module_kind_info *k = attn_module_kind_get(c->kind);
    if (!(k->uses & ATTN_MODULE_USES_DROPOUT) || !(c->dropout > 0.0) || B <= 0 || T <= 0) return 0;
    const size_t tt = (size_t)B * (size_t)T * (size_t)T;
    switch (c->kind) {
    case ATTN_MODULE_MHA_WRAPPER:
    case ATTN_MODULE_MHA: return (size_t)c->num_heads * tt;
    case ATTN_MODULE_SEED004_MHA:
        return (size_t)c->num_heads * tt + (size_t)B * (size_t)T * (size_t)c->d_in;
    default: return tt;
    }
}

attn_status attn_h_module_forward(attn_module *m, const float *x, int B, int T, float *y,
                                  int training, attn_rng *rng, int stream, const uint8_t *keep,
                                  size_t n_keep, attn_error *err) {
    if (!m || !x || !y) return attn_fail(err, ATTN_ERR_INVALID_ARG, "module forward: NULL array");
    attn_forward_mode mode = {training != 0, rng, (attn_dropout_stream)stream};
    if (!training || !keep) {
        if (training && stream != ATTN_STREAM_TORCH_CPU && stream != ATTN_STREAM_TORCH_MKL)
            return attn_fail(err, ATTN_ERR_INVALID_ARG,
                             "module forward: stream %d is not torch-cpu (0) or torch-mkl (1)",
                             stream);
        const int blas = blas_one();
        const attn_status s = attn_module_forward(m, x, B, T, y, &mode, err);
        blas_restore(blas);
        return s;
    }
    attn_dropout_given *g = malloc(sizeof *g);
    if (!g) return attn_fail(err, ATTN_ERR_NOMEM, "module forward: out of memory");
    attn_dropout_given_init(g, keep, n_keep);
    mode.rng = &g->rng;
    mode.stream = ATTN_STREAM_GIVEN;
    const int blas = blas_one();
    attn_status s = attn_module_forward(m, x, B, T, y, &mode, err);
    blas_restore(blas);
    if (s == ATTN_OK) s = attn_dropout_given_check(g, err);
    free(g);
    return s;
}

attn_status attn_h_module_backward(attn_module *m, const float *x, int B, int T, const float *dy,
                                   float *dx, attn_error *err) {
    if (!m || !x || !dy) return attn_fail(err, ATTN_ERR_INVALID_ARG, "module backward: NULL array");
    if (B <= 0 || T <= 0)
        return attn_fail(err, ATTN_ERR_SHAPE, "module backward: B and T must be > 0");
    const int blas = blas_one();
    const attn_status s = attn_module_backward(m, x, dy, dx, err);
    blas_restore(blas);
    return s;
}

/* ------------------------------------------- fused causal attention (SDPA) */

/* q, k, v (B, H, T, D) contiguous are the kernel's (B', T, H', D) views with
 * B' = B * H and H' = 1: row (b', t) at (b' * T + t) * D. */
typedef struct sdpa_call {
    attn_flash_problem pb;
    attn_flash_dropout drop;
    attn_flash_options opt;
    float *q_scaled; /* a scaled copy of q when scale is not 1 / sqrt(D) */
    float q_factor;  /* q_scaled = q * q_factor */
} sdpa_call;

static attn_status sdpa_setup(sdpa_call *c, int B, int H, int T, int D, const float *q,
                              const float *k, const float *v, float *o, float *lse, float scale,
                              double p, const uint8_t *keep_bits, int precision, int threads,
                              attn_error *err) {
    memset(c, 0, sizeof *c);
    if (B <= 0 || H <= 0 || T <= 0 || D <= 0)
        return attn_fail(err, ATTN_ERR_SHAPE,
                         "attention: B, H, T and D must be positive (got %d, %d, %d, %d)", B, H, T,
                         D);
    if (!(p >= 0.0 && p < 1.0))
        return attn_fail(err, ATTN_ERR_INVALID_ARG, "attention: dropout_p %g is outside [0, 1)", p);
    if (p > 0.0 && !keep_bits)
        return attn_fail(err, ATTN_ERR_INVALID_ARG, "attention: dropout %g needs a mask", p);
    if (precision != ATTN_PRECISION_FP32 && precision != ATTN_PRECISION_BF16)
        return attn_fail(err, ATTN_ERR_INVALID_ARG, "attention: precision %d is not fp32 or bf16",
                         precision);
    attn_status s = attn_precision_check((attn_precision)precision, err);
    if (s) return s;
    const size_t n = (size_t)B * (size_t)H * (size_t)T * (size_t)D;
    const float def = 1.0f / sqrtf((float)D);
    if (scale > 0.0f && scale != def) {
        c->q_factor = scale / def;
        c->q_scaled = malloc(n * sizeof(float));
        if (!c->q_scaled)
            return attn_fail(err, ATTN_ERR_NOMEM, "attention: out of memory for a scaled q");
        for (size_t i = 0; i < n; i++)
            c->q_scaled[i] = q[i] * c->q_factor;
        q = c->q_scaled;
    }
    if (p > 0.0) {
        c->drop.p = p;
        c->drop.stream = ATTN_STREAM_GIVEN;
        c->drop.B = B * H;
        c->drop.H = 1;
        c->drop.T = T;
        c->drop.bits = (uint8_t *)keep_bits; /* borrowed: never freed here */
    }
    c->opt.threads = threads;
    c->opt.precision = (attn_precision)precision;
    const attn_flash_problem pb = {.B = B * H,
                                   .T = T,
                                   .H = 1,
                                   .head_dim = D,
                                   .q = q,
                                   .k = k,
                                   .v = v,
                                   .ld_q = (size_t)D,
                                   .ld_k = (size_t)D,
                                   .ld_v = (size_t)D,
                                   .o = o,
                                   .ld_o = (size_t)D,
                                   .lse = lse,
                                   .dropout = p > 0.0 ? &c->drop : NULL};
    c->pb = pb;
    return ATTN_OK;
}

attn_status attn_h_sdpa_forward(int B, int H, int T, int D, const float *q, const float *k,
                                const float *v, float scale, double p, const uint8_t *keep_bits,
                                int precision, int threads, float *o, float *lse, attn_error *err) {
    if (!q || !k || !v || !o || !lse)
        return attn_fail(err, ATTN_ERR_INVALID_ARG, "attention forward: NULL array");
    sdpa_call c;
    attn_status s =
        sdpa_setup(&c, B, H, T, D, q, k, v, o, lse, scale, p, keep_bits, precision, threads, err);
    attn_flash_workspace ws = {0};
    if (s == ATTN_OK) s = attn_flash_forward(&c.pb, &c.opt, &ws, err);
    attn_flash_workspace_free(&ws);
    free(c.q_scaled);
    return s;
}

attn_status attn_h_sdpa_backward(int B, int H, int T, int D, const float *q, const float *k,
                                 const float *v, const float *o, const float *lse, float scale,
                                 double p, const uint8_t *keep_bits, int precision, int threads,
                                 const float *d_o, float *dq, float *dk, float *dv,
                                 attn_error *err) {
    if (!q || !k || !v || !o || !lse || !d_o || !dq || !dk || !dv)
        return attn_fail(err, ATTN_ERR_INVALID_ARG, "attention backward: NULL array");
    sdpa_call c;
    attn_status s = sdpa_setup(&c, B, H, T, D, q, k, v, (float *)o, (float *)lse, scale, p,
                               keep_bits, precision, threads, err);
    if (s) return s;
    const size_t n = (size_t)B * (size_t)H * (size_t)T * (size_t)D;
    /* The kernel accumulates into its dq; with a scaled q that is a zeroed
     * scratch, added in times f = d(q * f) / dq. */
    float *dq_scaled = NULL;
    if (c.q_scaled && !(dq_scaled = calloc(n, sizeof(float)))) {
        free(c.q_scaled);
        return attn_fail(err, ATTN_ERR_NOMEM, "attention backward: out of memory");
    }
    const size_t ld = (size_t)D;
    const attn_flash_grads g = {d_o, ld, dq_scaled ? dq_scaled : dq, dk, dv, ld, ld, ld};
    attn_flash_workspace ws = {0};
    s = attn_flash_backward(&c.pb, &g, &c.opt, &ws, err);
    attn_flash_workspace_free(&ws);
    if (s == ATTN_OK && dq_scaled)
        for (size_t i = 0; i < n; i++)
            dq[i] += dq_scaled[i] * c.q_factor;
    free(dq_scaled);
    free(c.q_scaled);
    return s;
}

/* ------------------------------------------------------------------- GPT */

struct attn_h_gpt {
    attn_gpt model;
    attn_tokenizer tok;
    int64_t step;
    attn_gpt_acts acts; /* for the last (B, T) asked; remade when it changes */
    int have_acts;
    attn_classifier_info info; /* a fine-tuned run's (info.task NULL: a language model) */
};

attn_status attn_h_gpt_load(const char *path, attn_h_gpt **out, attn_error *err) {
    return attn_h_gpt_load_weights(path, 0, out, err);
}

/* A fine-tuned run (attn/finetune.h): a classifier as trained (its
 * adapters kept, as attn classify runs it); an instruct run's adapters
 * merged, as attn generate runs it. */
static attn_status finetuned_open(const char *path, attn_h_gpt *g, attn_error *err) {
    attn_status s = attn_finetuned_load(path, &g->model, &g->tok, &g->info, err);
    if (s || g->info.n_classes > 0 || g->info.lora_rank <= 0) return s;
    attn_gpt merged;
    s = attn_gpt_merge_lora(&merged, &g->model, g->info.lora_alpha / (float)g->info.lora_rank, err);
    attn_gpt_free(&g->model);
    if (s) {
        attn_tokenizer_free(&g->tok);
        return s;
    }
    g->model = merged;
    return ATTN_OK;
}

attn_status attn_h_gpt_load_weights(const char *path, int n_heads, attn_h_gpt **out,
                                    attn_error *err) {
    *out = NULL;
    if (!path) return attn_fail(err, ATTN_ERR_INVALID_ARG, "GPT: no checkpoint path given");
    if (n_heads < 0) return attn_fail(err, ATTN_ERR_INVALID_ARG, "GPT: n_heads must be >= 1");
    attn_h_gpt *g = calloc(1, sizeof *g);
    if (!g) return attn_fail(err, ATTN_ERR_NOMEM, "GPT: out of memory");
    char task[16] = "lm";
    attn_model_task(path, task, NULL); /* unreadable: attn_gpt_open says why */
    attn_status s;
    if (strcmp(task, "lm") != 0) {
        s = finetuned_open(path, g, err);
    } else {
        const attn_gpt_open_options o = {.n_heads = n_heads};
        s = attn_gpt_open(path, &o, &g->model, &g->tok, NULL, &g->step, err);
    }
    if (s) {
        free(g);
        return s;
    }
    *out = g;
    return ATTN_OK;
}

void attn_h_gpt_free(attn_h_gpt *g) {
    if (!g) return;
    if (g->have_acts) attn_gpt_acts_free(&g->acts);
    attn_gpt_free(&g->model);
    attn_tokenizer_free(&g->tok);
    free(g);
}

/* "task" ("lm", "classify", "instruct") and a fine-tuned run's info. */
static void finetuned_json(cJSON *o, const attn_classifier_info *in) {
    cJSON_AddStringToObject(o, "task", in->task ? in->task : "lm");
    if (!in->task) return;
    if (in->n_classes > 0) {
        cJSON_AddNumberToObject(o, "n_classes", in->n_classes);
        cJSON_AddNumberToObject(o, "max_len", in->max_len);
    }
    cJSON_AddNumberToObject(o, "lora_rank", in->lora_rank);
    cJSON_AddNumberToObject(o, "lora_alpha", in->lora_alpha);
    if (in->trainable) cJSON_AddStringToObject(o, "trainable", in->trainable);
}

char *attn_h_gpt_info_json(const attn_h_gpt *g) {
    char *cfg = NULL, *vocab = attn_tokenizer_vocab_string(&g->tok), *out = NULL;
    attn_error err;
    cJSON *o = cJSON_CreateObject(), *c = NULL;
    if (attn_gpt_config_to_json(&g->model.cfg, &cfg, &err) == ATTN_OK) c = cJSON_Parse(cfg);
    if (o && c && (vocab || g->tok.kind != ATTN_TOKENIZER_CHAR)) {
        cJSON_AddItemToObject(o, "config", c);
        c = NULL; /* o owns it */
        cJSON_AddStringToObject(o, "tokenizer", attn_tokenizer_kind_name(g->tok.kind));
        if (vocab) cJSON_AddStringToObject(o, "vocabulary", vocab); /* char only */
        cJSON_AddNumberToObject(o, "step", (double)g->step);
        cJSON_AddNumberToObject(o, "n_params", (double)attn_gpt_num_params(&g->model));
        finetuned_json(o, &g->info);
        out = cJSON_PrintUnformatted(o);
    }
    cJSON_Delete(c);
    cJSON_Delete(o);
    free(cfg);
    free(vocab);
    return out;
}

attn_status attn_h_gpt_encode(const attn_h_gpt *g, const char *text, size_t n, int allow_special,
                              int64_t *ids, size_t cap, size_t *n_ids, attn_error *err) {
    if (!g || (!text && n) || (!ids && cap))
        return attn_fail(err, ATTN_ERR_INVALID_ARG, "GPT encode: NULL argument");
    int32_t *tmp = malloc((cap ? cap : 1) * sizeof *tmp);
    if (!tmp) return attn_fail(err, ATTN_ERR_NOMEM, "GPT encode: out of memory");
    attn_status s =
        attn_tokenizer_encode_ex(&g->tok, text ? text : "", n, allow_special, tmp, cap, n_ids, err);
    for (size_t i = 0; !s && i < *n_ids; i++)
        ids[i] = tmp[i];
    free(tmp);
    return s;
}

attn_status attn_h_gpt_decode(const attn_h_gpt *g, const int64_t *ids, size_t n, char *out,
                              size_t cap, size_t *len, attn_error *err) {
    if (!g || (!ids && n)) return attn_fail(err, ATTN_ERR_INVALID_ARG, "GPT decode: NULL argument");
    *len = 0;
    size_t need = 0;
    for (size_t i = 0; i < n; i++) {
        char tmp[4];
        size_t k;
        const int32_t id = ids[i] >= 0 && ids[i] < INT32_MAX ? (int32_t)ids[i] : -1;
        const char *b = attn_tokenizer_token(&g->tok, id, tmp, &k);
        if (!b)
            return attn_fail(err, ATTN_ERR_INVALID_ARG, "decode: id %lld is outside [0, %d)",
                             (long long)ids[i], g->tok.vocab_size);
        if (out && need + k <= cap) memcpy(out + need, b, k);
        need += k;
    }
    *len = need;
    if (out && need > cap)
        return attn_fail(err, ATTN_ERR_INVALID_ARG, "decode: needs %zu bytes, the buffer has %zu",
                         need, cap);
    return ATTN_OK;
}

const attn_param_list *attn_h_gpt_params(const attn_h_gpt *g) {
    return attn_gpt_params(&g->model);
}

attn_status attn_h_gpt_write(const attn_h_gpt *g, const char *path, const attn_st_kv *meta,
                             int n_meta, attn_error *err) {
    if (n_meta < 0 || n_meta > 16 || (n_meta && !meta))
        return attn_fail(err, ATTN_ERR_INVALID_ARG, "GPT.save: %d metadata entries", n_meta);
    attn_st_kv kv[16 + ATTN_CKPT_TOKENIZER_META_MAX];
    memcpy(kv, meta, sizeof *kv * (size_t)n_meta);
    int n_tok = 0;
    char *owned = NULL;
    attn_status s = attn_ckpt_tokenizer_meta(&g->tok, kv + n_meta, &n_tok, &owned, err);
    if (!s)
        s = attn_safetensors_write_params(path, attn_gpt_params(&g->model), kv, n_meta + n_tok,
                                          err);
    free(owned);
    return s;
}

static attn_status gpt_acts(attn_h_gpt *g, int B, int T, attn_error *err) {
    if (B <= 0 || T <= 0 || T > g->model.cfg.context_length)
        return attn_fail(err, ATTN_ERR_SHAPE,
                         "GPT: ids must be (B, T) with B >= 1 and 1 <= T <= context_length = %d "
                         "(got B = %d, T = %d)",
                         g->model.cfg.context_length, B, T);
    /* kept for any smaller batch (the book's collate varies T) */
    attn_status s = attn_gpt_acts_reserve(&g->acts, &g->model, B, T, 0, err);
    g->have_acts = g->acts.blocks != NULL;
    return s;
}

attn_status attn_h_gpt_forward(attn_h_gpt *g, const int64_t *ids, const int64_t *targets, int B,
                               int T, float *logits, float *loss, attn_error *err) {
    if (!g || !ids) return attn_fail(err, ATTN_ERR_INVALID_ARG, "GPT forward: NULL array");
    if (g->info.n_classes > 0 && (logits || targets))
        return attn_fail(err, ATTN_ERR_INVALID_ARG,
                         "GPT forward: a classifier of %d classes has no language head (classify "
                         "runs it)",
                         g->info.n_classes);
    attn_status s = gpt_acts(g, B, T, err);
    if (s) return s;
    float l = NAN;
    const int blas = blas_one();
    s = attn_gpt_forward_i64(&g->model, ids, targets, B, T, NULL, &g->acts, &l, err);
    blas_restore(blas);
    if (s) return s;
    if (logits)
        memcpy(logits, g->acts.logits,
               (size_t)B * (size_t)T * (size_t)g->model.cfg.vocab_size * sizeof(float));
    if (loss) *loss = targets ? l : NAN;
    return ATTN_OK;
}

attn_status attn_h_gpt_attention(attn_h_gpt *g, const int64_t *ids, int T, float *weights,
                                 attn_error *err) {
    if (!g || !ids || !weights)
        return attn_fail(err, ATTN_ERR_INVALID_ARG, "GPT attention: NULL array");
    attn_status s = attn_h_gpt_forward(g, ids, NULL, 1, T, NULL, NULL, err);
    const size_t per = (size_t)g->model.cfg.n_heads * (size_t)T * (size_t)T;
    for (int l = 0; s == ATTN_OK && l < g->model.cfg.n_layers; l++)
        s = attn_gpt_attention_weights(&g->model, &g->acts, l, 0, weights + (size_t)l * per, err);
    return s;
}

attn_status attn_h_gpt_classify(attn_h_gpt *g, const char *text, size_t n, int *label,
                                double *probs, int n_probs, attn_error *err) {
    if (!g || (!text && n) || !label || !probs)
        return attn_fail(err, ATTN_ERR_INVALID_ARG, "classify: NULL argument");
    const attn_classifier_info *in = &g->info;
    if (in->n_classes <= 0)
        return attn_fail(err, ATTN_ERR_INVALID_ARG,
                         "classify: this model is not a classifier (task %s): attn train --task "
                         "classify makes one",
                         in->task ? in->task : "lm");
    if (n_probs != in->n_classes)
        return attn_fail(err, ATTN_ERR_SHAPE, "classify: room for %d probabilities, not %d",
                         n_probs, in->n_classes);
    const int L = in->max_len;
    int32_t *row = malloc((size_t)L * sizeof *row);
    float *lg = malloc((size_t)n_probs * sizeof *lg);
    attn_status s = row && lg ? ATTN_OK : attn_fail(err, ATTN_ERR_NOMEM, "classify: out of memory");
    if (!s) s = attn_class_text_row(&g->tok, text, n, L, row, err);
    int32_t no_label = 0; /* the logits read no label; the loader's fill copies one */
    attn_class_data d = {.n = 1, .max_len = L, .ids = row, .labels = &no_label};
    const int blas = blas_one();
    if (!s) s = attn_classify_logits(&g->model, &d, 0, 1, lg, err);
    blas_restore(blas);
    if (!s) *label = attn_class_softmax(lg, n_probs, probs);
    free(row);
    free(lg);
    return s;
}

attn_status attn_h_generator_create(const attn_h_gpt *g, double temperature, int top_k,
                                    double top_p, uint64_t seed, const char *stop, int window,
                                    attn_generator **out, attn_error *err) {
    return attn_h_generator_create_precision(g, temperature, top_k, top_p, seed, stop, window,
                                             ATTN_PRECISION_FP32, out, err);
}

attn_status attn_h_generator_create_precision(const attn_h_gpt *g, double temperature, int top_k,
                                              double top_p, uint64_t seed, const char *stop,
                                              int window, int precision, attn_generator **out,
                                              attn_error *err) {
    *out = NULL;
    if (!g) return attn_fail(err, ATTN_ERR_INVALID_ARG, "generator: no model");
    if (g->info.n_classes > 0)
        return attn_fail(err, ATTN_ERR_INVALID_ARG,
                         "generate: a classifier of %d classes has no language head (classify "
                         "runs it)",
                         g->info.n_classes);
    if (precision != ATTN_PRECISION_FP32 && precision != ATTN_PRECISION_BF16)
        return attn_fail(err, ATTN_ERR_INVALID_ARG, "generator: precision %d is not fp32 or bf16",
                         precision);
    attn_generate_options o;
    attn_generate_options_default(&o);
    o.temperature = temperature;
    o.top_k = top_k;
    o.top_p = top_p;
    o.seed = seed;
    o.stop = stop;
    o.window_keep = window;
    o.precision = (attn_precision)precision;
    attn_generator *gen = calloc(1, sizeof *gen);
    if (!gen) return attn_fail(err, ATTN_ERR_NOMEM, "generator: out of memory");
    attn_status s = attn_generator_init(gen, &g->model, &g->tok, &o, err);
    if (s) {
        free(gen);
        return s;
    }
    *out = gen;
    return ATTN_OK;
}

attn_status attn_h_generator_next(attn_generator *gen, int32_t *id, char *out, size_t cap,
                                  size_t *len, attn_error *err) {
    if (!gen) return attn_fail(err, ATTN_ERR_INVALID_ARG, "generator: NULL");
    const char *b;
    size_t k;
    attn_status s = attn_generator_next_token(gen, id, &b, &k, err);
    if (s) return s;
    if (k > cap)
        return attn_fail(err, ATTN_ERR_INVALID_ARG, "generator: a token of %zu bytes, room for %zu",
                         k, cap);
    if (out) memcpy(out, b, k);
    if (len) *len = k;
    return ATTN_OK;
}

int attn_h_generator_stopped(const attn_generator *gen) {
    return gen ? gen->stopped : 0;
}

void attn_h_generator_free(attn_generator *gen) {
    if (!gen) return;
    attn_generator_free(gen);
    free(gen);
}

attn_status attn_h_viz_html(attn_h_gpt *g, const char *prompt, size_t n, int generate,
                            double temperature, int top_k, uint64_t seed, const char *source,
                            char **html, size_t *len, attn_error *err) {
    *html = NULL;
    if (!g || !prompt) return attn_fail(err, ATTN_ERR_INVALID_ARG, "viz: no model or prompt");
    attn_viz_options o;
    attn_viz_options_default(&o);
    o.generate = generate;
    o.temperature = temperature;
    o.top_k = top_k;
    o.seed = seed;
    attn_viz_data d;
    const int blas = blas_one();
    attn_status s = attn_viz_compute(&g->model, &g->tok, prompt, n, &o, source, &d, err);
    blas_restore(blas);
    if (s) return s;
    s = attn_viz_html(&d, html, len, err);
    attn_viz_data_free(&d);
    return s;
}

/* -------------------------------------------------------------- training */

typedef struct train_hooks {
    attn_h_train_callback cb;
    void *user;
    int stop;
} train_hooks;

static int hook_should_stop(void *user, const attn_trainer *tr) {
    (void)tr;
    return ((train_hooks *)user)->stop;
}

static void hook_on_step(void *user, const attn_trainer *tr, const attn_train_progress *p) {
    train_hooks *h = user;
    if (h->cb && h->cb(h->user, 0, attn_trainer_steps(tr), attn_trainer_train_config(tr)->max_steps,
                       (double)p->rec.loss, (double)p->rec.lr, p->tokens_per_s))
        h->stop = 1;
}

static void hook_on_eval(void *user, const attn_trainer *tr, const attn_eval_record *ev) {
    train_hooks *h = user;
    if (h->cb && h->cb(h->user, 1, ev->step, attn_trainer_train_config(tr)->max_steps,
                       (double)ev->train_loss, (double)attn_eval_val(ev), 0.0))
        h->stop = 1;
}

/* keys_json's training keys into the request (strings stay owned by json). */
static attn_status request_keys(attn_train_request *rq, const cJSON *json, attn_error *err) {
    if (!cJSON_IsObject(json))
        return attn_fail(err, ATTN_ERR_INVALID_ARG, "training keys: not a JSON object");
    for (const cJSON *it = json->child; it; it = it->next) {
        const int i = attn_train_key_find(it->string);
        if (i < 0)
            return attn_fail(err, ATTN_ERR_NOT_FOUND,
                             "unknown training key '%s' (model keys go in the config)", it->string);
        const attn_train_key *k = attn_train_key_at(i);
        attn_train_value v = {0, 0.0, NULL};
        if (k->type == ATTN_TKEY_CHOICE) {
            if (!cJSON_IsString(it))
                return attn_fail(err, ATTN_ERR_INVALID_ARG, "training key '%s' takes a string",
                                 it->string);
            v.s = it->valuestring;
        } else {
            if (!cJSON_IsNumber(it) && !cJSON_IsBool(it))
                return attn_fail(err, ATTN_ERR_INVALID_ARG, "training key '%s' takes a number",
                                 it->string);
            const double d = cJSON_IsBool(it) ? (double)cJSON_IsTrue(it) : it->valuedouble;
            if (k->type == ATTN_TKEY_INT && (d != floor(d) || fabs(d) > 9e18))
                return attn_fail(err, ATTN_ERR_INVALID_ARG,
                                 "training key '%s' takes an integer (got %g)", it->string, d);
            v.i = (int64_t)d;
            v.d = d;
        }
        attn_train_request_set(rq, i, v);
    }
    return ATTN_OK;
}

/* The run as attn train makes it (cli/cmd_train.c), for one process: the
 * same library steps (resolve, claim, attn_train_start, run); a run that
 * fails before it saves takes back the folder it made. */
static attn_status train_run(const attn_train_request *rq, attn_run_lock *lock, attn_trainer **trp,
                             train_hooks *hooks, int *stopped, char *out_abs, int *request_error,
                             attn_error *err) {
    attn_train_setup *su = calloc(1, sizeof *su);
    attn_train_claim *cl = calloc(1, sizeof *cl);
    char *text = NULL;
    size_t n = 0;
    int claimed = 0;
    attn_trainer *tr = NULL;
    attn_status s = su && cl ? ATTN_OK : attn_fail(err, ATTN_ERR_NOMEM, "train: out of memory");
    /* A run to continue is locked before its checkpoint is read. */
    if (!s && rq->resume && rq->out && access(rq->out, F_OK) == 0) {
        s = attn_train_claim_dir(rq->out, "attn.train (Python)", 1, 0, NULL, lock, cl, err);
        if (s) *request_error = cl->request_error;
        claimed = 1;
    }
    if (!s) {
        s = attn_train_resolve(rq, su, err);
        if (s) *request_error = su->request_error;
    }
    if (!s && !claimed) {
        s = attn_train_claim_dir(su->out, "attn.train (Python)", rq->resume, rq->force,
                                 rq->init_from, lock, cl, err);
        if (s) *request_error = cl->request_error;
    }
    if (!s) snprintf(out_abs, ATTN_TRAIN_PATH_MAX, "%s", cl->out_abs);
    /* gpt2: attn_train_start maps the corpus's token files (text NULL) */
    const int whole = !s && su->train.tokenizer != ATTN_TOKENIZER_GPT2;
    if (whole) s = attn_file_read_all(su->data, 0, (void **)&text, &n, err);
    if (whole && !s && n == 0)
        s = attn_fail(err, ATTN_ERR_INVALID_ARG, "the corpus %s is empty", su->data);
    if (!s) s = attn_train_start(&tr, rq, su, text, n, err);
    free(text);
    /* loss.csv/svg may be a step behind the checkpoint: redo them. */
    if (!s && rq->resume) s = attn_trainer_write_loss_files(tr, su->out, err);
    if (!s) {
        const attn_trainer_events ev = {.user = hooks,
                                        .should_stop = hook_should_stop,
                                        .on_step = hook_on_step,
                                        .on_eval = hook_on_eval};
        attn_train_result res;
        s = attn_trainer_run(tr, su->out, rq->resume, &ev, &res, err);
        if (!s) *stopped = res.stopped;
    }
    if (tr) attn_trainer_set_corpus_path(tr, NULL); /* su->data goes next */
    *trp = tr;
    if (cl) attn_train_claim_release(cl, lock, s != ATTN_OK);
    free(su);
    free(cl);
    return s;
}

attn_status attn_h_train(const char *preset, const char *config, const char *data, const char *out,
                         const char *init_from, const char *keys_json, int resume, int force,
                         attn_h_train_callback cb, void *user, int64_t *step, int *stopped,
                         char *out_abs, int *request_error, attn_error *err) {
    int req = 0, stop = 0;
    int64_t reached = 0;
    char where[ATTN_TRAIN_PATH_MAX] = "";
    attn_train_request rq;
    attn_train_request_init(&rq);
    rq.preset = preset;
    rq.config = config;
    rq.data = data;
    rq.out = out;
    rq.init_from = init_from;
    rq.resume = resume != 0;
    rq.force = force != 0;
    attn_status s = ATTN_OK;
    if (resume && !out)
        s = attn_fail(err, ATTN_ERR_INVALID_ARG, "resume needs out (the run to continue)");
    else if (resume && (force || init_from))
        s = attn_fail(err, ATTN_ERR_INVALID_ARG,
                      "resume continues a run; force and init_from start one: give one of them");
    if (s) req = 1;
    cJSON *keys = NULL;
    if (!s && keys_json) {
        keys = cJSON_Parse(keys_json);
        s = keys ? request_keys(&rq, keys, err)
                 : attn_fail(err, ATTN_ERR_INVALID_ARG, "training keys: not valid JSON");
        if (s) req = 1;
    }
    if (!s) {
        attn_trainer *tr = NULL;
        attn_run_lock lock = {.fd = -1};
        train_hooks hooks = {cb, user, 0};
        const int blas = blas_one();
        s = train_run(&rq, &lock, &tr, &hooks, &stop, where, &req, err);
        blas_restore(blas);
        if (tr) reached = attn_trainer_steps(tr);
        attn_trainer_free(tr);
        attn_run_lock_release(&lock);
    }
    cJSON_Delete(keys);
    if (step) *step = reached;
    if (stopped) *stopped = stop;
    if (out_abs) snprintf(out_abs, ATTN_TRAIN_PATH_MAX, "%s", where);
    if (request_error) *request_error = s ? req : 0;
    return s;
}

/* ------------------------------------------------------------------ misc */

void attn_h_set_threads(int threads, int blas_threads) {
    if (threads > 0) {
        /* As the attn program sets them (cli/threads.c): the variable is
         * what the kernels' attn_default_threads() reads. */
        char n[16];
        snprintf(n, sizeof n, "%d", threads);
        setenv("OMP_NUM_THREADS", n, 1);
        omp_set_num_threads(threads);
    }
    if (blas_threads > 0) openblas_set_num_threads(blas_threads);
}

int attn_h_get_threads(void) {
    return omp_get_max_threads();
}
