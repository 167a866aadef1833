/* A GPT whose parameters live in the caller's memory (attn/handles.h,
 * attn_h_bgpt_*): attn.torch.GPTModel runs attn's model on the torch
 * tensors' storage, so no weight is copied per call. The model is made with
 * its arena (attn/param.h: lazily zeroed, its pages never touched), then
 * its table points every tensor's views at the caller's arrays
 * (attn_param_list_bind). */
#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attn/cross_entropy.h"
#include "attn/dropout.h"
#include "attn/gpt.h"
#include "attn/gpt_family.h"
#include "attn/handles.h"
#include "attn/rng.h"

struct attn_h_bgpt {
    attn_gpt model;
    attn_gpt_acts acts[2]; /* [0] plain (logits out; small losses), [1] lean (large losses) */
    int have_acts[2];
    int lean;             /* the loss path's activations: -1 by size, 0 plain, 1 lean */
    attn_gpt_kv_cache kv; /* the cached forward's (attn_h_bgpt_kv_forward), once used */
    int have_kv;
    int32_t *ids32; /* the ids (and targets) as int32, ids32_cap of them: kept */
    size_t ids32_cap;
};

attn_status attn_h_bgpt_create_built(const char *config_json, int head_width, int head_bias,
                                     int n_lora, const char *const *lora_linear,
                                     const int *lora_rank, const float *lora_alpha,
                                     attn_h_bgpt **out, attn_error *err) {
    *out = NULL;
    if (n_lora < 0 || (n_lora && (!lora_linear || !lora_rank || !lora_alpha)))
        return attn_fail(err, ATTN_ERR_INVALID_ARG, "GPT: %d adapters without their arrays",
                         n_lora);
    attn_gpt_config cfg = {0};
    attn_status s = config_json ? attn_gpt_config_set_json(&cfg, config_json, err)
                                : attn_fail(err, ATTN_ERR_INVALID_ARG, "GPT: no config given");
    if (s != ATTN_OK) return s;
    attn_gpt_lora_site *sites = n_lora ? calloc((size_t)n_lora, sizeof *sites) : NULL;
    attn_h_bgpt *g = calloc(1, sizeof *g);
    if (!g || (n_lora && !sites)) {
        free(g);
        free(sites);
        return attn_fail(err, ATTN_ERR_NOMEM, "GPT: out of memory");
    }
    for (int i = 0; i < n_lora; i++)
        sites[i] = (attn_gpt_lora_site){lora_linear[i], lora_rank[i], lora_alpha[i]};
    const attn_gpt_build opts = {.head_width = head_width,
                                 .head_bias = head_bias != 0,
                                 .n_lora_sites = n_lora,
                                 .lora_sites = sites};
    s = attn_gpt_init_family(&g->model, &cfg, NULL, &opts, NULL, err);
    free(sites);
    if (s != ATTN_OK) {
        free(g);
        return s;
    }
    g->lean = -1;
    *out = g;
    return ATTN_OK;
}

attn_status attn_h_bgpt_create(const char *config_json, attn_h_bgpt **out, attn_error *err) {
    return attn_h_bgpt_create_built(config_json, 0, 0, 0, NULL, NULL, NULL, out, err);
}

attn_status attn_h_bgpt_set_trainable(attn_h_bgpt *g, const uint8_t *trainable, int n,
                                      attn_error *err) {
    attn_param_list *L = &g->model.params;
    if (n != L->count || !trainable)
        return attn_fail(err, ATTN_ERR_SHAPE, "GPT set_trainable: %d flags given, the model has %d",
                         n, L->count);
    return attn_param_list_set_trainable_each(L, trainable, err);
}

void attn_h_bgpt_free(attn_h_bgpt *g) {
    if (!g) return;
    for (int a = 0; a < 2; a++)
        if (g->have_acts[a]) attn_gpt_acts_free(&g->acts[a]);
    if (g->have_kv) attn_gpt_kv_free(&g->kv);
    free(g->ids32);
    attn_gpt_free(&g->model); /* its arena; the caller's arrays stay the caller's */
    free(g);
}

const attn_param_list *attn_h_bgpt_params(const attn_h_bgpt *g) {
    return attn_gpt_params(&g->model);
}

attn_status attn_h_bgpt_set_precision(attn_h_bgpt *g, int precision, attn_error *err) {
    if (precision != ATTN_PRECISION_FP32 && precision != ATTN_PRECISION_BF16)
        return attn_fail(err, ATTN_ERR_INVALID_ARG, "GPT: precision %d is not fp32 (0) or bf16 (1)",
                         precision);
    return attn_gpt_set_precision(&g->model, (attn_precision)precision, err);
}

attn_status attn_h_bgpt_bind(attn_h_bgpt *g, float *const *data, float *const *grad, int n,
                             attn_error *err) {
    attn_param_list *L = &g->model.params;
    if (n != L->count || !data)
        return attn_fail(err, ATTN_ERR_SHAPE,
                         "GPT bind: %d parameter arrays given, the model has %d", n, L->count);
    for (int i = 0; i < n; i++)
        if (!data[i])
            return attn_fail(err, ATTN_ERR_INVALID_ARG, "GPT bind: no array for %s",
                             L->items[i].name);
    attn_param_list_bind(L, data, grad);
    return ATTN_OK;
}

void attn_h_bgpt_set_lean(attn_h_bgpt *g, int lean) {
    g->lean = lean < 0 ? -1 : lean != 0;
}

size_t attn_h_bgpt_mask_numel(const attn_h_bgpt *g, int B, int T) {
    const attn_gpt_config *c = &g->model.cfg;
    if (!(c->drop_rate > 0.0) || B <= 0 || T <= 0) return 0;
    const size_t btc = (size_t)B * (size_t)T * (size_t)c->emb_dim;
    const size_t att = (size_t)B * (size_t)c->n_heads * (size_t)T * (size_t)T;
    return btc + (size_t)c->n_layers * (att + 2 * btc);
}

/* The loss path keeps (B, T, V) logits and their gradient in C (plain
 * activations: one product per head pass) up to this size, and runs the
 * lean head in 128-row chunks past it (each chunk adds into the whole head
 * gradient: more memory traffic, no (B, T, V) tensor). */
#define PLAIN_LOSS_MAX_BYTES ((size_t)512 << 20)

static int lean_loss(const attn_h_bgpt *g, int B, int T) {
    if (g->lean >= 0) return g->lean;
    const size_t n = (size_t)B * (size_t)T * (size_t)g->model.cfg.vocab_size;
    return n > PLAIN_LOSS_MAX_BYTES / (2 * sizeof(float));
}

/* (B, T) checked by the caller (bgpt_forward_check). */
static attn_status bgpt_acts(attn_h_bgpt *g, int lean, int B, int T, attn_error *err) {
    /* kept for any smaller batch (the book's collate varies T) */
    attn_status s = attn_gpt_acts_reserve(&g->acts[lean], &g->model, B, T, lean, err);
    g->have_acts[lean] = g->acts[lean].blocks != NULL;
    return s;
}

/* attn_gpt_forward_backward takes int32 ids (the forward has an int64 twin). */
/* ids in [0, bound); targets (ignore 1) also ATTN_IGNORE_INDEX. */
static attn_status to_i32(int64_t bound, int ignore, const int64_t *src, int32_t *dst, size_t n,
                          const char *what, attn_error *err) {
    for (size_t i = 0; i < n; i++) {
        if ((src[i] < 0 || src[i] >= bound) && !(ignore && src[i] == ATTN_IGNORE_INDEX))
            return attn_fail(err, ATTN_ERR_INVALID_ARG, "%s %lld at index %zu is outside [0, %lld)",
                             what, (long long)src[i], i, (long long)bound);
        dst[i] = (int32_t)src[i];
    }
    return ATTN_OK;
}

/* g's int32 buffer of at least n: grown, never shrunk (a training loop's
 * batches reuse it), NULL when out of memory. */
static int32_t *ids32(attn_h_bgpt *g, size_t n) {
    if (n > g->ids32_cap) {
        free(g->ids32);
        g->ids32_cap = 0;
        if (!(g->ids32 = malloc(n * sizeof *g->ids32))) return NULL;
        g->ids32_cap = n;
    }
    return g->ids32;
}

/* The loss path: the loss, and with grads its gradients (+=). */
static attn_status loss_step(attn_h_bgpt *g, attn_gpt_acts *a, const int64_t *ids,
                             const int64_t *targets, int B, int T, const attn_forward_mode *mode,
                             int grads, float *loss, attn_error *err) {
    if (!grads) return attn_gpt_forward_i64(&g->model, ids, targets, B, T, mode, a, loss, err);
    const size_t N = (size_t)B * (size_t)T;
    int32_t *buf = ids32(g, 2 * N);
    if (!buf) return attn_fail(err, ATTN_ERR_NOMEM, "GPT: out of memory");
    attn_status s = to_i32(g->model.cfg.vocab_size, 0, ids, buf, N, "token id", err);
    if (s == ATTN_OK)
        s = to_i32(attn_gpt_head_width(&g->model), 1, targets, buf + N, N, "target", err);
    if (s == ATTN_OK)
        s = attn_gpt_forward_backward(&g->model, buf, buf + N, B, T, mode, a, 1.0f, loss, err);
    return s;
}

static attn_status run_forward(attn_h_bgpt *g, const int64_t *ids, const int64_t *targets, int B,
                               int T, const attn_forward_mode *mode, int grads, float *logits,
                               float *loss, attn_error *err) {
    attn_gpt_acts *a = &g->acts[lean_loss(g, B, T) && !logits];
    if (!logits) return loss_step(g, a, ids, targets, B, T, mode, grads, loss, err);
    float *own = a->logits; /* the logits land straight in the caller's array */
    a->logits = logits;
    attn_status s = attn_gpt_forward_i64(&g->model, ids, targets, B, T, mode, a, loss, err);
    a->logits = own;
    return s;
}

/* The checks and the C call shared by the two forwards: mode NULL for
 * evaluation. */
static attn_status bgpt_forward(attn_h_bgpt *g, const int64_t *ids, const int64_t *targets, int B,
                                int T, const attn_forward_mode *mode, int grads, float *logits,
                                float *loss, attn_error *err) {
    const int blas = openblas_get_num_threads();
    if (blas != 1) openblas_set_num_threads(1); /* attn's one pool (handles.h) */
    float l = NAN;
    attn_status s = run_forward(g, ids, targets, B, T, mode, grads, logits, &l, err);
    if (blas != 1) openblas_set_num_threads(blas);
    if (loss) *loss = targets ? l : NAN;
    return s;
}

static attn_status bgpt_forward_check(attn_h_bgpt *g, const int64_t *ids, const int64_t *targets,
                                      int B, int T, int grads, const float *logits,
                                      attn_error *err) {
    if (!g) return attn_fail(err, ATTN_ERR_INVALID_ARG, "GPT forward: NULL model");
    /* the shape first: an empty batch's ids are often a NULL pointer */
    attn_status s = attn_gpt_check_shape(&g->model.cfg, B, T, err);
    if (s != ATTN_OK) return s;
    if (!ids || (!logits && !targets))
        return attn_fail(err, ATTN_ERR_INVALID_ARG,
                         "GPT forward: needs ids, and logits or targets (the loss)");
    if (grads && logits)
        return attn_fail(err, ATTN_ERR_INVALID_ARG,
                         "GPT forward: grads come with the loss path (logits NULL); the logits "
                         "path's come from attn_h_bgpt_backward_logits");
    return bgpt_acts(g, lean_loss(g, B, T) && !logits, B, T, err);
}

attn_status attn_h_bgpt_forward(attn_h_bgpt *g, const int64_t *ids, const int64_t *targets, int B,
                                int T, int training, const uint8_t *keep, size_t n_keep, int grads,
                                float *logits, float *loss, attn_error *err) {
    attn_status s = bgpt_forward_check(g, ids, targets, B, T, grads, logits, err);
    if (s != ATTN_OK) return s;
    const size_t need = training ? attn_h_bgpt_mask_numel(g, B, T) : 0;
    if (need && (!keep || n_keep != need))
        return attn_fail(err, ATTN_ERR_SHAPE,
                         "GPT forward: training with dropout takes %zu mask bytes, got %zu", need,
                         keep ? n_keep : 0);
    attn_dropout_given *dg = malloc(sizeof *dg);
    if (!dg) return attn_fail(err, ATTN_ERR_NOMEM, "GPT forward: out of memory");
    attn_dropout_given_init(dg, keep, need);
    const attn_forward_mode mode = {training != 0, &dg->rng, ATTN_STREAM_GIVEN};
    s = bgpt_forward(g, ids, targets, B, T, training ? &mode : NULL, grads, logits, loss, err);
    if (s == ATTN_OK && training) s = attn_dropout_given_check(dg, err);
    free(dg);
    return s;
}

/* rng from torch.get_rng_state()'s bytes, or a message naming the call. */
static attn_status torch_rng(attn_rng *rng, const uint8_t *state, size_t len, const char *what,
                             attn_error *err) {
    if (attn_rng_from_torch_state(rng, state, len) != 0)
        return attn_fail(err, ATTN_ERR_INVALID_ARG,
                         "%s: not a PyTorch CPU generator state (%zu bytes; "
                         "torch.get_rng_state() gives %d)",
                         what, len, ATTN_TORCH_RNG_STATE_BYTES);
    return ATTN_OK;
}

attn_status attn_h_bgpt_forward_drawn(attn_h_bgpt *g, const int64_t *ids, const int64_t *targets,
                                      int B, int T, uint8_t *torch_state, size_t state_len,
                                      int grads, float *logits, float *loss, attn_error *err) {
    attn_status s = bgpt_forward_check(g, ids, targets, B, T, grads, logits, err);
    if (s != ATTN_OK) return s;
    attn_rng rng;
    if ((s = torch_rng(&rng, torch_state, state_len, "GPT forward", err))) return s;
    const attn_forward_mode mode = {1, &rng, ATTN_STREAM_TORCH_CPU};
    s = bgpt_forward(g, ids, targets, B, T, &mode, grads, logits, loss, err);
    if (s == ATTN_OK) attn_rng_to_torch_state(&rng, torch_state, state_len);
    return s;
}

attn_status attn_h_torch_bernoulli(uint8_t *torch_state, size_t state_len, double keep,
                                   uint8_t *out, size_t n, attn_error *err) {
    attn_rng rng;
    if (!out && n) return attn_fail(err, ATTN_ERR_INVALID_ARG, "bernoulli: NULL output");
    if (!(keep >= 0 && keep <= 1))
        return attn_fail(err, ATTN_ERR_INVALID_ARG, "bernoulli: p must be in [0, 1] (got %g)",
                         keep);
    attn_status s = torch_rng(&rng, torch_state, state_len, "bernoulli", err);
    if (s != ATTN_OK) return s;
    attn_rng_keep_mask(&rng, keep, out, n, 0);
    attn_rng_to_torch_state(&rng, torch_state, state_len);
    return ATTN_OK;
}

attn_status attn_h_bgpt_backward_logits(attn_h_bgpt *g, const float *d_logits, int B, int T,
                                        attn_error *err) {
    if (!g || !d_logits) return attn_fail(err, ATTN_ERR_INVALID_ARG, "GPT backward: NULL array");
    if (!g->have_acts[0] || g->acts[0].B != B || g->acts[0].T != T)
        return attn_fail(err, ATTN_ERR_STATE,
                         "GPT backward: no logits forward of (B, T) = (%d, %d) to differentiate", B,
                         T);
    const int blas = openblas_get_num_threads();
    if (blas != 1) openblas_set_num_threads(1);
    attn_status s = attn_gpt_backward_logits(&g->model, &g->acts[0], d_logits, err);
    if (blas != 1) openblas_set_num_threads(blas);
    return s;
}

/* The cache for B sequences: made on first use, made again for another B
 * while empty; B differing from a filled cache's is refused. */
static attn_status kv_ready(attn_h_bgpt *g, int B, int T, attn_error *err) {
    attn_gpt_kv_cache *c = &g->kv;
    if (g->have_kv && c->len > 0 && c->batch != B)
        return attn_fail(err, ATTN_ERR_SHAPE,
                         "GPT cached forward: the KV cache holds %d sequences of %d tokens, the "
                         "ids have %d sequences (reset the cache first)",
                         c->batch, c->len, B);
    if (g->have_kv && T > c->capacity - c->len)
        return attn_fail(err, ATTN_ERR_STATE,
                         "GPT cached forward: the KV cache holds %d tokens, %d more exceed "
                         "context_length %d (reset the cache first)",
                         c->len, T, c->capacity);
    if (g->have_kv && c->batch == B) return ATTN_OK;
    if (g->have_kv) attn_gpt_kv_free(c);
    g->have_kv = 0;
    attn_status s = attn_gpt_kv_init_batch(c, &g->model, B, err);
    if (s == ATTN_OK) g->have_kv = 1;
    return s;
}

attn_status attn_h_bgpt_kv_forward(attn_h_bgpt *g, const int64_t *ids, int B, int T, float *logits,
                                   attn_error *err) {
    if (!g || !ids || !logits)
        return attn_fail(err, ATTN_ERR_INVALID_ARG, "GPT cached forward: NULL model or array");
    attn_status s = attn_gpt_check_shape(&g->model.cfg, B, T, err);
    if (s == ATTN_OK) s = kv_ready(g, B, T, err);
    if (s != ATTN_OK) return s;
    const size_t n = (size_t)B * (size_t)T;
    int32_t *buf = ids32(g, n);
    if (!buf) return attn_fail(err, ATTN_ERR_NOMEM, "GPT cached forward: out of memory");
    if ((s = to_i32(g->model.cfg.vocab_size, 0, ids, buf, n, "token id", err))) return s;
    return attn_gpt_kv_feed_batch(&g->model, &g->kv, buf, T, logits, err);
}

void attn_h_bgpt_kv_reset(attn_h_bgpt *g) {
    if (g && g->have_kv) attn_gpt_kv_reset(&g->kv);
}

int attn_h_bgpt_kv_len(const attn_h_bgpt *g) {
    return g && g->have_kv ? g->kv.len : 0;
}
