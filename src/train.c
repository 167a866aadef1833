/* Training loop pieces, checkpoints and resume (see attn/train.h). */
#define _POSIX_C_SOURCE 200809L /* sigaction, clock_gettime, mkdtemp */

#include "attn/train.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "attn/checkpoint.h"
#include "attn/fileio.h"
#include "attn/safetensors.h"
#include "train_accum.h"
#include "train_device.h"

#define PATH_BUF 4096

/* ------------------------------------------------------------ configs */

/* Training recipes of the presets (the model side is attn_gpt_config_preset). */
typedef struct {
    const char *name;
    int batch_size;
    int64_t max_steps;
    double learning_rate, min_lr;
    int64_t warmup_steps;
    double beta2;
    int64_t eval_interval;
    int eval_iters;
    int64_t log_interval;
} train_recipe;

static const train_recipe RECIPES[] = {
    /* nanoGPT README's CPU run of config/train_shakespeare_char.py. */
    {"nanogpt-cpu", 12, 2000, 1e-3, 1e-4, 100, 0.99, 250, 20, 10},
    /* Sized for `make run`: about 90 s on two cores (3 layers), val loss
     * ~1.76, which samples as recognisable play text. */
    {"tiny", 12, 2000, 2e-3, 2e-4, 50, 0.99, 250, 10, 50},
    /* nanoGPT's config/train_shakespeare_char.py (GPU recipe). */
    {"shakespeare-char", 64, 5000, 1e-3, 1e-4, 100, 0.99, 250, 200, 10},
    /* seed004: a GPT-2-small-like width; conservative lr. */
    {"seed004", 16, 5000, 3e-4, 3e-5, 200, 0.95, 500, 20, 10},
};

attn_status attn_train_preset(const char *name, attn_gpt_config *model, attn_train_config *t,
                              attn_error *err) {
    attn_status st = attn_gpt_config_preset(name, model, err);
    if (st) return st;
    const train_recipe *r = NULL;
    for (size_t i = 0; i < sizeof RECIPES / sizeof RECIPES[0] && !r; i++)
        if (strcmp(name, RECIPES[i].name) == 0) r = &RECIPES[i];
    if (!r) return attn_fail(err, ATTN_ERR_NOT_FOUND, "preset '%s' has no training recipe", name);
    memset(t, 0, sizeof *t);
    t->beta1 = 0.9;
    t->beta2 = r->beta2;
    t->eps = 1e-8;
    t->weight_decay = 0.1;
    t->grad_clip = 1.0;
    t->seed = 1337;
    t->dropout_stream = ATTN_STREAM_TORCH_CPU;
    t->grad_accum = 1;
    t->batch_size = r->batch_size;
    t->max_steps = r->max_steps;
    t->learning_rate = r->learning_rate;
    t->min_lr = r->min_lr;
    t->warmup_steps = r->warmup_steps;
    t->eval_interval = r->eval_interval;
    t->eval_iters = r->eval_iters;
    t->log_interval = r->log_interval;
    return ATTN_OK;
}

static attn_status json_int(const cJSON *v, const char *key, int64_t min, int64_t *out,
                            attn_error *err) {
    if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble) ||
        fabs(v->valuedouble) > 9.007199254740992e15)
        return attn_fail(err, ATTN_ERR_INVALID_ARG, "config key '%s' must be an integer", key);
    if (v->valuedouble < (double)min)
        return attn_fail(err, ATTN_ERR_INVALID_ARG,
                         "config key '%s' must be >= %" PRId64 " (got %g)", key, min,
                         v->valuedouble);
    *out = (int64_t)v->valuedouble;
    return ATTN_OK;
}

static attn_status json_num(const cJSON *v, const char *key, double *out, attn_error *err) {
    if (!cJSON_IsNumber(v))
        return attn_fail(err, ATTN_ERR_INVALID_ARG, "config key '%s' must be a number", key);
    *out = v->valuedouble;
    return ATTN_OK;
}

attn_status attn_train_config_set_key(attn_train_config *c, const char *key, const cJSON *v,
                                      attn_error *err) {
    int64_t i = 0;
    attn_status st;
#define INT_KEY(name, field, min, cast)                                                            \
    if (strcmp(key, name) == 0) {                                                                  \
        if ((st = json_int(v, key, min, &i, err))) return st;                                      \
        c->field = (cast)i;                                                                        \
        return ATTN_OK;                                                                            \
    }
#define NUM_KEY(name, field)                                                                       \
    if (strcmp(key, name) == 0) return json_num(v, key, &c->field, err);
    INT_KEY("batch_size", batch_size, 1, int)
    INT_KEY("max_steps", max_steps, 1, int64_t)
    INT_KEY("max_iters", max_steps, 1, int64_t)
    NUM_KEY("learning_rate", learning_rate)
    NUM_KEY("lr", learning_rate)
    NUM_KEY("min_lr", min_lr)
    INT_KEY("warmup_steps", warmup_steps, 0, int64_t)
    INT_KEY("warmup_iters", warmup_steps, 0, int64_t)
    INT_KEY("lr_decay_steps", lr_decay_steps, 0, int64_t)
    INT_KEY("lr_decay_iters", lr_decay_steps, 0, int64_t)
    NUM_KEY("beta1", beta1)
    NUM_KEY("beta2", beta2)
    NUM_KEY("eps", eps)
    NUM_KEY("weight_decay", weight_decay)
    NUM_KEY("grad_clip", grad_clip)
    INT_KEY("eval_interval", eval_interval, 1, int64_t)
    INT_KEY("eval_iters", eval_iters, 1, int)
    INT_KEY("log_interval", log_interval, 1, int64_t)
    INT_KEY("checkpoint_interval", checkpoint_interval, 0, int64_t)
    INT_KEY("seed", seed, 0, uint64_t)
    INT_KEY("grad_accum", grad_accum, 1, int)
    INT_KEY("gradient_accumulation_steps", grad_accum, 1, int)
#undef INT_KEY
#undef NUM_KEY
    if (strcmp(key, "dropout_stream") == 0) {
        if (!cJSON_IsString(v) || attn_dropout_stream_parse(v->valuestring, &c->dropout_stream))
            return attn_fail(err, ATTN_ERR_INVALID_ARG,
                             "config key 'dropout_stream' must be \"torch-cpu\" or \"torch-mkl\"");
        return ATTN_OK;
    }
    return attn_fail(err, ATTN_ERR_NOT_FOUND, "unknown config key '%s'", key);
}

attn_status attn_train_config_apply_json(attn_gpt_config *model, attn_train_config *train,
                                         const char *json_text, const char *name, int *vocab_given,
                                         attn_error *err) {
    cJSON *root = cJSON_Parse(json_text);
    if (!root || !cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return attn_fail(err, ATTN_ERR_FORMAT, "%s: not a JSON object", name);
    }
    attn_status st = ATTN_OK;
    double head_size = -1;
    for (const cJSON *it = root->child; it; it = it->next) {
        if (strcmp(it->string, "head_size") == 0) {
            if ((st = json_num(it, it->string, &head_size, err))) break;
            continue;
        }
        st = attn_gpt_config_set_key(model, it->string, it, err);
        if (st == ATTN_ERR_NOT_FOUND) st = attn_train_config_set_key(train, it->string, it, err);
        if (st == ATTN_ERR_NOT_FOUND) {
            attn_fail(err, st, "%s: unknown config key '%s'", name, it->string);
            break;
        }
        if (st) break;
        if (vocab_given &&
            (strcmp(it->string, "vocab_size") == 0 || strcmp(it->string, "vocabulary_size") == 0))
            *vocab_given = 1;
    }
    cJSON_Delete(root);
    if (st) return st;
    if (head_size >= 0 && model->n_heads > 0 &&
        (model->emb_dim % model->n_heads != 0 || head_size != model->emb_dim / model->n_heads))
        return attn_fail(err, ATTN_ERR_INVALID_ARG,
                         "%s: head_size %g does not equal emb_dim %d / n_heads %d", name, head_size,
                         model->emb_dim, model->n_heads);
    return ATTN_OK;
}

attn_status attn_train_config_validate(const attn_train_config *c, attn_error *err) {
    if (c->batch_size < 1)
        return attn_fail(err, ATTN_ERR_INVALID_ARG, "batch size must be >= 1 (got %d)",
                         c->batch_size);
    if (c->max_steps < 1)
        return attn_fail(err, ATTN_ERR_INVALID_ARG, "steps must be >= 1 (got %" PRId64 ")",
                         c->max_steps);
    if (!(c->learning_rate > 0) || !isfinite(c->learning_rate) || !(c->min_lr >= 0) ||
        c->min_lr > c->learning_rate)
        return attn_fail(err, ATTN_ERR_INVALID_ARG,
                         "learning rate must be > 0 and min_lr in [0, lr] (got %g, %g)",
                         c->learning_rate, c->min_lr);
    if (c->warmup_steps < 0 || c->lr_decay_steps < 0)
        return attn_fail(err, ATTN_ERR_INVALID_ARG, "warmup/decay steps must be >= 0");
    if (!(c->beta1 >= 0 && c->beta1 < 1 && c->beta2 >= 0 && c->beta2 < 1))
        return attn_fail(err, ATTN_ERR_INVALID_ARG, "betas must be in [0, 1) (got %g, %g)",
                         c->beta1, c->beta2);
    if (!(c->eps > 0) || !(c->weight_decay >= 0) || !(c->grad_clip >= 0))
        return attn_fail(err, ATTN_ERR_INVALID_ARG,
                         "eps must be > 0, weight_decay and grad_clip >= 0");
    if (c->eval_interval < 1 || c->eval_iters < 1 || c->log_interval < 1 ||
        c->checkpoint_interval < 0)
        return attn_fail(err, ATTN_ERR_INVALID_ARG,
                         "eval_interval, eval_iters and log_interval must be >= 1, "
                         "checkpoint_interval >= 0");
    if (c->grad_accum < 0)
        return attn_fail(err, ATTN_ERR_INVALID_ARG, "grad_accum must be >= 1 (got %d)",
                         c->grad_accum);
    return ATTN_OK;
}

char *attn_train_config_to_json(const attn_train_config *c) {
    cJSON *o = cJSON_CreateObject();
    if (!o) return NULL;
    cJSON_AddNumberToObject(o, "batch_size", c->batch_size);
    cJSON_AddNumberToObject(o, "max_steps", (double)c->max_steps);
    cJSON_AddNumberToObject(o, "learning_rate", c->learning_rate);
    cJSON_AddNumberToObject(o, "min_lr", c->min_lr);
    cJSON_AddNumberToObject(o, "warmup_steps", (double)c->warmup_steps);
    cJSON_AddNumberToObject(o, "lr_decay_steps", (double)c->lr_decay_steps);
    cJSON_AddNumberToObject(o, "beta1", c->beta1);
    cJSON_AddNumberToObject(o, "beta2", c->beta2);
    cJSON_AddNumberToObject(o, "eps", c->eps);
    cJSON_AddNumberToObject(o, "weight_decay", c->weight_decay);
    cJSON_AddNumberToObject(o, "grad_clip", c->grad_clip);
    cJSON_AddNumberToObject(o, "eval_interval", (double)c->eval_interval);
    cJSON_AddNumberToObject(o, "eval_iters", c->eval_iters);
    cJSON_AddNumberToObject(o, "log_interval", (double)c->log_interval);
    cJSON_AddNumberToObject(o, "checkpoint_interval", (double)c->checkpoint_interval);
    cJSON_AddNumberToObject(o, "seed", (double)c->seed);
    cJSON_AddStringToObject(o, "dropout_stream", attn_dropout_stream_name(c->dropout_stream));
    /* Only when used, so that earlier checkpoints keep their config text. */
    if (c->grad_accum > 1) cJSON_AddNumberToObject(o, "grad_accum", c->grad_accum);
    char *s = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return s;
}

/* ------------------------------------------------------------ trainer */

static uint64_t fnv1a(const char *s, size_t n) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)s[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

void attn_trainer_free(attn_trainer *tr) {
    attn_cuda_gpt_free(tr->gpu);
    attn_tokenizer_free(&tr->tok);
    free(tr->ids);
    attn_sampler_free(&tr->sampler);
    attn_gpt_acts_free(&tr->acts);
    attn_gpt_free(&tr->model);
    attn_adamw_free(&tr->opt);
    free(tr->xb);
    free(tr->yb);
    free(tr->hist);
    free(tr->evals);
    attn_train_accum_free(tr);
    memset(tr, 0, sizeof *tr);
}

attn_status attn_trainer_init(attn_trainer *tr, const attn_gpt_config *mcfg,
                              const attn_train_config *tcfg, int vocab_given, const char *text,
                              size_t n, attn_error *err) {
    memset(tr, 0, sizeof *tr);
    attn_status st = attn_train_config_validate(tcfg, err);
    if (st) return st;
    if (n == 0) return attn_fail(err, ATTN_ERR_INVALID_ARG, "the corpus is empty");
    tr->mcfg = *mcfg;
    tr->tcfg = *tcfg;
    if ((st = attn_tokenizer_train(&tr->tok, text, n, err))) goto fail;
    if (vocab_given && mcfg->vocab_size != tr->tok.vocab_size) {
        st = attn_fail(err, ATTN_ERR_INVALID_ARG,
                       "config vocab_size %d does not match the corpus's %d distinct characters",
                       mcfg->vocab_size, tr->tok.vocab_size);
        goto fail;
    }
    tr->mcfg.vocab_size = tr->tok.vocab_size;
    if ((st = attn_gpt_config_validate(&tr->mcfg, err))) goto fail;
    size_t count = 0;
    if ((st = attn_utf8_count(text, n, &count, err))) goto fail;
    tr->ids = malloc(count * sizeof *tr->ids);
    if (!tr->ids) {
        st = attn_fail(err, ATTN_ERR_NOMEM, "out of memory for %zu token ids", count);
        goto fail;
    }
    if ((st = attn_tokenizer_encode(&tr->tok, text, n, tr->ids, &tr->n_ids, err))) goto fail;
    tr->text_bytes = n;
    tr->text_hash = fnv1a(text, n);
    const int T = tr->mcfg.context_length;
    size_t split = attn_split_point(tr->n_ids);
    if (split < (size_t)T + 1 || tr->n_ids - split < (size_t)T + 1) {
        st = attn_fail(err, ATTN_ERR_INVALID_ARG,
                       "the corpus has %zu characters: its training split (%zu) and validation "
                       "split (%zu) must each hold at least context_length + 1 = %d",
                       tr->n_ids, split, tr->n_ids - split, T + 1);
        goto fail;
    }
    attn_dataset_init(&tr->train, tr->ids, split, T, NULL);
    attn_dataset_init(&tr->val, tr->ids + split, tr->n_ids - split, T, NULL);
    if ((st = attn_sampler_init(&tr->sampler, attn_dataset_len(&tr->train), tcfg->seed + 1, err)))
        goto fail;
    attn_rng_seed(&tr->model_rng, tcfg->seed);
    attn_rng_seed(&tr->eval_rng, tcfg->seed + 2);
    if ((st = attn_gpt_init(&tr->model, &tr->mcfg, &tr->model_rng, err))) goto fail;
    if ((st = attn_gpt_acts_init(&tr->acts, &tr->model, tcfg->batch_size, T, err))) goto fail;
    attn_adamw_config ac = {tcfg->beta1, tcfg->beta2, tcfg->eps, tcfg->weight_decay};
    if ((st = attn_adamw_init(&tr->opt, attn_gpt_params(&tr->model), &ac, err))) goto fail;
    size_t bt = (size_t)tcfg->batch_size * (size_t)T;
    tr->xb = malloc(bt * sizeof *tr->xb);
    tr->yb = malloc(bt * sizeof *tr->yb);
    if (!tr->xb || !tr->yb) {
        st = attn_fail(err, ATTN_ERR_NOMEM, "out of memory for batches");
        goto fail;
    }
    if ((st = attn_train_accum_setup(tr, err))) goto fail;
    return ATTN_OK;
fail:
    attn_trainer_free(tr);
    return st;
}

static attn_status push_hist(attn_trainer *tr, const attn_train_record *r, attn_error *err) {
    if (tr->n_hist == tr->cap_hist) {
        size_t cap = tr->cap_hist ? tr->cap_hist * 2 : 1024;
        attn_train_record *h = realloc(tr->hist, cap * sizeof *h);
        if (!h) return attn_fail(err, ATTN_ERR_NOMEM, "out of memory for the loss history");
        tr->hist = h;
        tr->cap_hist = cap;
    }
    tr->hist[tr->n_hist++] = *r;
    return ATTN_OK;
}

static attn_status push_eval(attn_trainer *tr, const attn_eval_record *r, attn_error *err) {
    if (tr->n_evals && tr->evals[tr->n_evals - 1].step == r->step) {
        tr->evals[tr->n_evals - 1] = *r;
        return ATTN_OK;
    }
    if (tr->n_evals == tr->cap_evals) {
        size_t cap = tr->cap_evals ? tr->cap_evals * 2 : 64;
        attn_eval_record *e = realloc(tr->evals, cap * sizeof *e);
        if (!e) return attn_fail(err, ATTN_ERR_NOMEM, "out of memory for the loss history");
        tr->evals = e;
        tr->cap_evals = cap;
    }
    tr->evals[tr->n_evals++] = *r;
    return ATTN_OK;
}

attn_status attn_trainer_step(attn_trainer *tr, attn_train_record *rec, attn_error *err) {
    const attn_train_config *c = &tr->tcfg;
    const int B = c->batch_size, T = tr->mcfg.context_length;
    int64_t decay = c->lr_decay_steps ? c->lr_decay_steps : c->max_steps;
    double lr = attn_lr_cosine(tr->step, c->warmup_steps, decay, c->learning_rate, c->min_lr);
    float loss = 0;
    attn_status st;
    if (attn_train_accum_active(tr)) {
        if (tr->gpu)
            return attn_fail(err, ATTN_ERR_INVALID_ARG,
                             "gradient accumulation and MPI ranks run on the CPU engine only");
        /* Several micro-batches (and/or ranks): train_accum.c. */
        if ((st = attn_train_accum_grads(tr, &loss, err))) return st;
    } else {
        attn_sampler_next_batch(&tr->sampler, &tr->train, B, tr->xb, tr->yb);
        if (tr->gpu) return attn_trainer_device_step(tr, lr, rec, err); /* train_device.c */
        attn_gpt_zero_grad(&tr->model);
        attn_forward_mode mode = {1, &tr->model_rng, c->dropout_stream};
        st = attn_gpt_forward(&tr->model, tr->xb, tr->yb, B, T, &mode, &tr->acts, &loss, err);
        if (st) return st;
        if (!isfinite(loss))
            return attn_fail(err, ATTN_ERR_STATE,
                             "training loss is %g at step %" PRId64 " (diverged)", (double)loss,
                             tr->step + 1);
        if ((st = attn_gpt_backward(&tr->model, &tr->acts, 1.0f, err))) return st;
    }
    const attn_param_list *params = attn_gpt_params(&tr->model);
    double norm = attn_clip_grad_norm(params, c->grad_clip);
    if ((st = attn_adamw_step(&tr->opt, params, lr, err))) return st;
    return attn_trainer_record_step(tr, loss, lr, norm, rec, err);
}

attn_status attn_trainer_record_step(attn_trainer *tr, float loss, double lr, double norm,
                                     attn_train_record *rec, attn_error *err) {
    tr->step++;
    attn_train_record r = {tr->step, loss, (float)lr, (float)norm};
    attn_status st = push_hist(tr, &r, err);
    if (st) return st;
    if (rec) *rec = r;
    return ATTN_OK;
}

attn_status attn_trainer_evaluate(attn_trainer *tr, attn_eval_record *rec, attn_error *err) {
    const int B = tr->tcfg.batch_size, T = tr->mcfg.context_length;
    float means[2];
    const attn_token_dataset *splits[2] = {&tr->train, &tr->val};
    const size_t n_it = (size_t)tr->tcfg.eval_iters;
    size_t lo, hi; /* this rank's share of the batches (all of them alone) */
    attn_dist_block(tr->dist, n_it, &lo, &hi);
    for (int s = 0; s < 2; s++) {
        double sum = 0;
        for (size_t i = 0; i < n_it; i++) {
            attn_dataset_random_batch(splits[s], &tr->eval_rng, B, tr->xb, tr->yb);
            if (i < lo || i >= hi) continue;
            attn_status st = tr->gpu ? attn_trainer_device_eval(tr, &tr->eval_loss[i], err)
                                     : attn_gpt_forward(&tr->model, tr->xb, tr->yb, B, T, NULL,
                                                        &tr->acts, &tr->eval_loss[i], err);
            if (st) return st;
        }
        attn_status st = attn_dist_allgather(tr->dist, tr->eval_loss, n_it, err);
        if (st) return st;
        for (size_t i = 0; i < n_it; i++)
            sum += tr->eval_loss[i];
        means[s] = (float)(sum / tr->tcfg.eval_iters);
    }
    attn_eval_record r = {tr->step, means[0], means[1]};
    attn_status st = push_eval(tr, &r, err);
    if (st) return st;
    if (rec) *rec = r;
    return ATTN_OK;
}

/* ------------------------------------------------------ serialisation */

#define RNG_WORDS (ATTN_MT_N + 6)

static void rng_pack(const attn_rng *r, uint32_t *w) {
    memcpy(w, r->mt, sizeof r->mt);
    w[ATTN_MT_N] = r->index;
    w[ATTN_MT_N + 1] = (uint32_t)r->seed;
    w[ATTN_MT_N + 2] = (uint32_t)(r->seed >> 32);
    w[ATTN_MT_N + 3] = (uint32_t)r->has_next_double_normal;
    uint64_t bits;
    memcpy(&bits, &r->next_double_normal, sizeof bits);
    w[ATTN_MT_N + 4] = (uint32_t)bits;
    w[ATTN_MT_N + 5] = (uint32_t)(bits >> 32);
}

static int rng_unpack(attn_rng *r, const uint32_t *w) {
    if (w[ATTN_MT_N] > ATTN_MT_N) return -1;
    memcpy(r->mt, w, sizeof r->mt);
    r->index = w[ATTN_MT_N];
    r->seed = (uint64_t)w[ATTN_MT_N + 1] | (uint64_t)w[ATTN_MT_N + 2] << 32;
    r->has_next_double_normal = (int)w[ATTN_MT_N + 3];
    uint64_t bits = (uint64_t)w[ATTN_MT_N + 4] | (uint64_t)w[ATTN_MT_N + 5] << 32;
    memcpy(&r->next_double_normal, &bits, sizeof bits);
    return 0;
}

static int join(char *out, const char *dir, const char *file) {
    int k = snprintf(out, PATH_BUF, "%s/%s", dir, file);
    return k < 0 || k >= PATH_BUF ? -1 : 0;
}

/* {"model": {...}, "train": {...}} as a compact string (malloc'd). */
static char *full_config_json(const attn_trainer *tr, attn_error *err) {
    char *m = NULL, *t = NULL, *out = NULL;
    if (attn_gpt_config_to_json(&tr->mcfg, &m, err)) return NULL;
    t = attn_train_config_to_json(&tr->tcfg);
    if (t) {
        size_t len = strlen(m) + strlen(t) + 32;
        out = malloc(len);
        if (out) snprintf(out, len, "{\"model\":%s,\"train\":%s}", m, t);
    }
    if (!out) attn_fail(err, ATTN_ERR_NOMEM, "out of memory for the config JSON");
    free(m);
    free(t);
    return out;
}

attn_status attn_trainer_save(const attn_trainer *tr, const char *dir, attn_error *err) {
    char path[ATTN_CKPT_PATH_MAX];
    attn_ckpt_txn txn; /* both files commit together (attn/checkpoint.h) */
    txn.tmp[0] = '\0';
    const attn_param_list *params = attn_gpt_params(&tr->model);
    const int np = params->count;
    attn_status st = ATTN_OK;
    char *full = NULL, *mjson = NULL, *vocab = NULL;
    attn_st_entry *e = calloc((size_t)(2 * np + 16), sizeof *e);
    char(*names)[ATTN_PARAM_NAME_MAX + 16] = calloc((size_t)(2 * np), sizeof *names);
    int64_t *shapes = calloc((size_t)(16), sizeof *shapes);
    int64_t *hsteps = malloc((tr->n_hist + 1) * sizeof *hsteps);
    float *hvals = malloc((tr->n_hist + 1) * 3 * sizeof *hvals);
    int64_t *esteps = malloc((tr->n_evals + 1) * sizeof *esteps);
    float *evals = malloc((tr->n_evals + 1) * 2 * sizeof *evals);
    uint32_t rngw[2][RNG_WORDS];
    if (tr->gpu && (st = attn_trainer_device_sync(tr, err))) goto done; /* GPU -> host */
    if (!e || !names || !shapes || !hsteps || !hvals || !esteps || !evals) {
        st = attn_fail(err, ATTN_ERR_NOMEM, "out of memory writing a checkpoint");
        goto done;
    }
    int k = 0;
    for (int i = 0; i < np; i++) {
        const attn_param *p = &params->items[i];
        for (int which = 0; which < 2; which++) {
            char *nm = names[2 * i + which];
            snprintf(nm, ATTN_PARAM_NAME_MAX + 16, "%s.%s", which ? "exp_avg_sq" : "exp_avg",
                     p->name);
            e[k].name = nm;
            e[k].dtype = "F32";
            e[k].ndim = p->ndim;
            e[k].shape = p->shape;
            e[k].data = (which ? tr->opt.v : tr->opt.m) + tr->opt.offset[i];
            e[k].nbytes = p->numel * sizeof(float);
            k++;
        }
    }
    rng_pack(&tr->model_rng, rngw[0]);
    rng_pack(&tr->eval_rng, rngw[1]);
    shapes[0] = RNG_WORDS;
    e[k++] = (attn_st_entry){"rng.model", "U32", 1, &shapes[0], rngw[0], sizeof rngw[0]};
    e[k++] = (attn_st_entry){"rng.eval", "U32", 1, &shapes[0], rngw[1], sizeof rngw[1]};
    const size_t nh = tr->n_hist, ne = tr->n_evals;
    if (nh) {
        for (size_t i = 0; i < nh; i++) {
            hsteps[i] = tr->hist[i].step;
            hvals[3 * i] = tr->hist[i].loss;
            hvals[3 * i + 1] = tr->hist[i].lr;
            hvals[3 * i + 2] = tr->hist[i].grad_norm;
        }
        shapes[1] = (int64_t)nh;
        shapes[2] = (int64_t)nh;
        shapes[3] = 3;
        e[k++] = (attn_st_entry){"history.step", "I64", 1, &shapes[1], hsteps, nh * 8};
        e[k++] = (attn_st_entry){"history.loss_lr_norm", "F32", 2, &shapes[2], hvals, nh * 12};
    }
    if (ne) {
        for (size_t i = 0; i < ne; i++) {
            esteps[i] = tr->evals[i].step;
            evals[2 * i] = tr->evals[i].train_loss;
            evals[2 * i + 1] = tr->evals[i].val_loss;
        }
        shapes[4] = (int64_t)ne;
        shapes[5] = (int64_t)ne;
        shapes[6] = 2;
        e[k++] = (attn_st_entry){"evals.step", "I64", 1, &shapes[4], esteps, ne * 8};
        e[k++] = (attn_st_entry){"evals.train_val", "F32", 2, &shapes[5], evals, ne * 8};
    }
    full = full_config_json(tr, err);
    if (!full) {
        st = err ? err->code : ATTN_ERR_NOMEM;
        goto done;
    }
    char step_s[32], adam_s[32], epoch_s[32], cursor_s[32], bytes_s[32], hash_s[32];
    snprintf(step_s, sizeof step_s, "%" PRId64, tr->step);
    snprintf(adam_s, sizeof adam_s, "%" PRId64, tr->opt.step);
    snprintf(epoch_s, sizeof epoch_s, "%" PRIu64, tr->sampler.epoch);
    snprintf(cursor_s, sizeof cursor_s, "%zu", tr->sampler.cursor);
    snprintf(bytes_s, sizeof bytes_s, "%zu", tr->text_bytes);
    snprintf(hash_s, sizeof hash_s, "%016" PRIx64, tr->text_hash);
    attn_st_kv smeta[] = {{"format", "attn-train-state"},
                          {"step", step_s},
                          {"config", full},
                          {"adamw_step", adam_s},
                          {"sampler_epoch", epoch_s},
                          {"sampler_cursor", cursor_s},
                          {"corpus_bytes", bytes_s},
                          {"corpus_fnv1a", hash_s},
                          {"corpus_path", tr->corpus_path ? tr->corpus_path : ""}};
    if ((st = attn_ckpt_begin(&txn, dir, tr->step, err)) ||
        (st = attn_ckpt_file(&txn, ATTN_CKPT_STATE, path, err)))
        goto done;
    if ((st =
             attn_safetensors_write(path, e, k, smeta, (int)(sizeof smeta / sizeof smeta[0]), err)))
        goto done;
    if ((st = attn_gpt_config_to_json(&tr->mcfg, &mjson, err))) goto done;
    vocab = attn_tokenizer_vocab_string(&tr->tok);
    if (!vocab) {
        st = attn_fail(err, ATTN_ERR_NOMEM, "out of memory writing a checkpoint");
        goto done;
    }
    attn_st_kv mmeta[] = {
        {"format", "attn-gpt"}, {"config", mjson}, {"vocabulary", vocab}, {"step", step_s}};
    if ((st = attn_ckpt_file(&txn, ATTN_CKPT_MODEL, path, err)) ||
        (st = attn_safetensors_write_params(path, params, mmeta, 4, err)))
        goto done;
    st = attn_ckpt_commit(&txn, err);
done:
    attn_ckpt_abort(&txn); /* no-op once committed */
    free(e);
    free(names);
    free(shapes);
    free(hsteps);
    free(hvals);
    free(esteps);
    free(evals);
    free(full);
    free(mjson);
    free(vocab);
    return st;
}

static int parse_u64(const char *s, uint64_t *out) {
    if (!s || !*s) return -1;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end) return -1;
    *out = v;
    return 0;
}

static attn_status read_state_config(const attn_safetensors *st, const char *path,
                                     attn_gpt_config *mcfg, attn_train_config *tcfg,
                                     attn_error *err) {
    const char *fmt = attn_safetensors_meta(st, "format");
    const char *cfg = attn_safetensors_meta(st, "config");
    if (!fmt || strcmp(fmt, "attn-train-state") != 0 || !cfg)
        return attn_fail(err, ATTN_ERR_FORMAT, "%s is not an attn training state", path);
    cJSON *root = cJSON_Parse(cfg);
    const cJSON *m = root ? cJSON_GetObjectItemCaseSensitive(root, "model") : NULL;
    const cJSON *t = root ? cJSON_GetObjectItemCaseSensitive(root, "train") : NULL;
    attn_status s = ATTN_OK;
    if (!cJSON_IsObject(m) || !cJSON_IsObject(t)) {
        s = attn_fail(err, ATTN_ERR_FORMAT, "%s: config metadata is malformed", path);
        goto out;
    }
    memset(mcfg, 0, sizeof *mcfg);
    memset(tcfg, 0, sizeof *tcfg);
    tcfg->grad_accum = 1; /* absent in checkpoints that never accumulated */
    for (const cJSON *it = m->child; it && !s; it = it->next)
        s = attn_gpt_config_set_key(mcfg, it->string, it, err);
    for (const cJSON *it = t->child; it && !s; it = it->next)
        s = attn_train_config_set_key(tcfg, it->string, it, err);
    if (!s) s = attn_gpt_config_validate(mcfg, err);
    if (!s) s = attn_train_config_validate(tcfg, err);
    if (s) {
        char msg[ATTN_ERROR_MSG_MAX];
        snprintf(msg, sizeof msg, "%s", err ? err->msg : "");
        s = attn_fail(err, ATTN_ERR_FORMAT, "%s: bad config metadata: %s", path, msg);
    }
out:
    cJSON_Delete(root);
    return s;
}

attn_status attn_trainer_read_config(const char *dir, attn_gpt_config *mcfg,
                                     attn_train_config *tcfg, char **corpus_path, attn_error *err) {
    char path[PATH_BUF], live[ATTN_CKPT_PATH_MAX];
    attn_status rs = attn_ckpt_resolve(dir, live, err);
    if (rs) return rs;
    if (join(path, live, ATTN_CKPT_STATE))
        return attn_fail(err, ATTN_ERR_IO, "checkpoint directory path is too long");
    attn_safetensors st;
    attn_status s = attn_safetensors_read(path, &st, err);
    if (s) return s;
    s = read_state_config(&st, path, mcfg, tcfg, err);
    if (!s && corpus_path) {
        const char *cp = attn_safetensors_meta(&st, "corpus_path");
        *corpus_path = NULL;
        if (cp && *cp) {
            *corpus_path = malloc(strlen(cp) + 1);
            if (*corpus_path) strcpy(*corpus_path, cp);
        }
    }
    attn_safetensors_free(&st);
    return s;
}

/* Name the first key whose value differs between two JSON objects. */
static void config_diff(const char *a, const char *b, char *out, size_t size) {
    cJSON *ja = cJSON_Parse(a), *jb = cJSON_Parse(b);
    snprintf(out, size, "the configuration");
    if (ja && jb) {
        for (const cJSON *sect = ja->child; sect; sect = sect->next) {
            const cJSON *other = cJSON_GetObjectItemCaseSensitive(jb, sect->string);
            for (const cJSON *it = sect->child; it && other; it = it->next) {
                const cJSON *o = cJSON_GetObjectItemCaseSensitive(other, it->string);
                char *pa = cJSON_PrintUnformatted(it);
                char *pb = o ? cJSON_PrintUnformatted(o) : NULL;
                int differ = !pb || strcmp(pa, pb) != 0;
                if (differ)
                    snprintf(out, size, "%s (checkpoint %s, now %s)", it->string, pa,
                             pb ? pb : "absent");
                free(pa);
                free(pb);
                if (differ) goto done;
            }
        }
    }
done:
    cJSON_Delete(ja);
    cJSON_Delete(jb);
}

static attn_status load_f32(const attn_safetensors *st, const char *path, const char *name,
                            float *dst, size_t numel, attn_error *err) {
    const attn_st_tensor *t = attn_safetensors_find(st, name);
    if (!t) return attn_fail(err, ATTN_ERR_NOT_FOUND, "%s: tensor '%s' is missing", path, name);
    if (strcmp(t->dtype, "F32") != 0 || t->numel != numel)
        return attn_fail(err, ATTN_ERR_SHAPE, "%s: tensor '%s' should be F32 with %zu values", path,
                         name, numel);
    memcpy(dst, t->data, numel * sizeof(float));
    return ATTN_OK;
}

attn_status attn_trainer_resume(attn_trainer *tr, const char *dir, attn_error *err) {
    char path[PATH_BUF], mpath[PATH_BUF], live[ATTN_CKPT_PATH_MAX];
    /* Both files from the one live checkpoint, whatever a writer does next. */
    attn_status rs = attn_ckpt_resolve(dir, live, err);
    if (rs) return rs;
    if (join(path, live, ATTN_CKPT_STATE) || join(mpath, live, ATTN_CKPT_MODEL))
        return attn_fail(err, ATTN_ERR_IO, "checkpoint directory path is too long");
    attn_safetensors st, ms;
    memset(&ms, 0, sizeof ms);
    attn_status s = attn_safetensors_read(path, &st, err);
    if (s) return s;
    attn_gpt_config mc;
    attn_train_config tc;
    char *now = NULL, *then = NULL;
    if ((s = read_state_config(&st, path, &mc, &tc, err))) goto out;
    /* Compare canonical forms so any differing key is caught. */
    {
        attn_trainer tmp = *tr;
        tmp.mcfg = mc;
        tmp.tcfg = tc;
        /* Only how often to print and save may change on resume. */
        tmp.tcfg.log_interval = tr->tcfg.log_interval;
        tmp.tcfg.checkpoint_interval = tr->tcfg.checkpoint_interval;
        then = full_config_json(&tmp, err);
        now = full_config_json(tr, err);
        if (!then || !now) {
            s = attn_fail(err, ATTN_ERR_NOMEM, "out of memory comparing configs");
            goto out;
        }
        if (strcmp(then, now) != 0) {
            char what[256];
            config_diff(then, now, what, sizeof what);
            s = attn_fail(err, ATTN_ERR_INVALID_ARG, "cannot resume %s with a different config: %s",
                          dir, what);
            goto out;
        }
    }
    uint64_t step, adam_step, epoch, cursor, bytes;
    const char *hash = attn_safetensors_meta(&st, "corpus_fnv1a");
    if (parse_u64(attn_safetensors_meta(&st, "step"), &step) ||
        parse_u64(attn_safetensors_meta(&st, "adamw_step"), &adam_step) ||
        parse_u64(attn_safetensors_meta(&st, "sampler_epoch"), &epoch) ||
        parse_u64(attn_safetensors_meta(&st, "sampler_cursor"), &cursor) ||
        parse_u64(attn_safetensors_meta(&st, "corpus_bytes"), &bytes) || !hash) {
        s = attn_fail(err, ATTN_ERR_FORMAT, "%s: step/sampler/corpus metadata missing or bad",
                      path);
        goto out;
    }
    char hash_now[32];
    snprintf(hash_now, sizeof hash_now, "%016" PRIx64, tr->text_hash);
    if (bytes != tr->text_bytes || strcmp(hash, hash_now) != 0) {
        s = attn_fail(err, ATTN_ERR_INVALID_ARG,
                      "cannot resume %s: it was trained on a different corpus (%" PRIu64
                      " bytes, now %zu)",
                      dir, bytes, tr->text_bytes);
        goto out;
    }
    if ((s = attn_safetensors_read(mpath, &ms, err))) goto out;
    uint64_t mstep;
    if (parse_u64(attn_safetensors_meta(&ms, "step"), &mstep) || mstep != step) {
        s = attn_fail(err, ATTN_ERR_FORMAT, "%s and %s are from different steps", mpath, path);
        goto out;
    }
    const attn_param_list *params = attn_gpt_params(&tr->model);
    if ((s = attn_safetensors_to_params(&ms, mpath, params, err))) goto out;
    char name[ATTN_PARAM_NAME_MAX + 16];
    for (int i = 0; i < params->count; i++) {
        const attn_param *p = &params->items[i];
        snprintf(name, sizeof name, "exp_avg.%s", p->name);
        if ((s = load_f32(&st, path, name, tr->opt.m + tr->opt.offset[i], p->numel, err))) goto out;
        snprintf(name, sizeof name, "exp_avg_sq.%s", p->name);
        if ((s = load_f32(&st, path, name, tr->opt.v + tr->opt.offset[i], p->numel, err))) goto out;
    }
    const char *rn[2] = {"rng.model", "rng.eval"};
    attn_rng *rr[2] = {&tr->model_rng, &tr->eval_rng};
    for (int i = 0; i < 2; i++) {
        const attn_st_tensor *t = attn_safetensors_find(&st, rn[i]);
        uint32_t w[RNG_WORDS];
        if (!t || strcmp(t->dtype, "U32") != 0 || t->numel != RNG_WORDS) {
            s = attn_fail(err, ATTN_ERR_FORMAT, "%s: generator state '%s' missing or bad", path,
                          rn[i]);
            goto out;
        }
        memcpy(w, t->data, sizeof w);
        if (rng_unpack(rr[i], w)) {
            s = attn_fail(err, ATTN_ERR_FORMAT, "%s: generator state '%s' is corrupt", path, rn[i]);
            goto out;
        }
    }
    if ((s = attn_sampler_restore(&tr->sampler, epoch, (size_t)cursor, err))) goto out;
    /* History (absent when the run stopped before its first step). */
    const attn_st_tensor *hs = attn_safetensors_find(&st, "history.step");
    const attn_st_tensor *hv = attn_safetensors_find(&st, "history.loss_lr_norm");
    tr->n_hist = 0;
    if (hs && hv && hs->numel * 3 == hv->numel && !strcmp(hs->dtype, "I64") &&
        !strcmp(hv->dtype, "F32")) {
        for (size_t i = 0; i < hs->numel; i++) {
            attn_train_record r;
            int64_t stp;
            float v[3];
            memcpy(&stp, (const char *)hs->data + 8 * i, 8);
            memcpy(v, (const char *)hv->data + 12 * i, 12);
            r.step = stp;
            r.loss = v[0];
            r.lr = v[1];
            r.grad_norm = v[2];
            if ((s = push_hist(tr, &r, err))) goto out;
        }
    }
    const attn_st_tensor *es = attn_safetensors_find(&st, "evals.step");
    const attn_st_tensor *ev = attn_safetensors_find(&st, "evals.train_val");
    tr->n_evals = 0;
    if (es && ev && es->numel * 2 == ev->numel && !strcmp(es->dtype, "I64") &&
        !strcmp(ev->dtype, "F32")) {
        for (size_t i = 0; i < es->numel; i++) {
            attn_eval_record r;
            float v[2];
            memcpy(&r.step, (const char *)es->data + 8 * i, 8);
            memcpy(v, (const char *)ev->data + 8 * i, 8);
            r.train_loss = v[0];
            r.val_loss = v[1];
            if ((s = push_eval(tr, &r, err))) goto out;
        }
    }
    tr->opt.step = (int64_t)adam_step;
    tr->step = (int64_t)step;
out:
    free(now);
    free(then);
    attn_safetensors_free(&st);
    attn_safetensors_free(&ms);
    return s;
}

/* ------------------------------------------------------ loss.csv / svg */

static attn_status buf_printf(char **buf, size_t *len, size_t *cap, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;

static attn_status buf_printf(char **buf, size_t *len, size_t *cap, const char *fmt, ...) {
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int k = vsnprintf(*buf ? *buf + *len : NULL, *buf ? *cap - *len : 0, fmt, ap);
        va_end(ap);
        if (k < 0) return ATTN_ERR_IO;
        if (*buf && *len + (size_t)k < *cap) {
            *len += (size_t)k;
            return ATTN_OK;
        }
        size_t ncap = (*cap ? *cap * 2 : 4096) + (size_t)k;
        char *nb = realloc(*buf, ncap);
        if (!nb) return ATTN_ERR_NOMEM;
        *buf = nb;
        *cap = ncap;
    }
}

static attn_status write_csv(const attn_trainer *tr, const char *path, attn_error *err) {
    char *buf = NULL;
    size_t len = 0, cap = 0;
    attn_status s = buf_printf(&buf, &len, &cap, "step,loss,lr,grad_norm,train_loss,val_loss\n");
    size_t e = 0;
    for (size_t i = 0; !s && (i < tr->n_hist || e < tr->n_evals);) {
        int64_t hstep = i < tr->n_hist ? tr->hist[i].step : INT64_MAX;
        int64_t estep = e < tr->n_evals ? tr->evals[e].step : INT64_MAX;
        int64_t step = hstep < estep ? hstep : estep;
        s = buf_printf(&buf, &len, &cap, "%" PRId64 ",", step);
        if (!s && hstep == step) {
            const attn_train_record *r = &tr->hist[i++];
            s = buf_printf(&buf, &len, &cap, "%.9g,%.9g,%.9g,", (double)r->loss, (double)r->lr,
                           (double)r->grad_norm);
        } else if (!s) {
            s = buf_printf(&buf, &len, &cap, ",,,");
        }
        if (!s && estep == step) {
            const attn_eval_record *r = &tr->evals[e++];
            s = buf_printf(&buf, &len, &cap, "%.9g,%.9g\n", (double)r->train_loss,
                           (double)r->val_loss);
        } else if (!s) {
            s = buf_printf(&buf, &len, &cap, ",\n");
        }
    }
    if (s)
        s = attn_fail(err, s, "out of memory formatting %s", path);
    else
        s = attn_file_write_atomic(path, buf, len, err);
    free(buf);
    return s;
}

/* A self-contained SVG line chart: batch loss (thin), eval train/val (bold). */
static attn_status write_svg(const attn_trainer *tr, const char *path, attn_error *err) {
    const double W = 800, H = 450, L = 70, R = 20, TOP = 40, BOT = 50;
    double x_max = (double)tr->tcfg.max_steps, y_min = INFINITY, y_max = -INFINITY;
    for (size_t i = 0; i < tr->n_hist; i++) {
        double v = tr->hist[i].loss;
        if (isfinite(v)) y_min = fmin(y_min, v), y_max = fmax(y_max, v);
    }
    for (size_t i = 0; i < tr->n_evals; i++) {
        double a = tr->evals[i].train_loss, b = tr->evals[i].val_loss;
        if (isfinite(a)) y_min = fmin(y_min, a), y_max = fmax(y_max, a);
        if (isfinite(b)) y_min = fmin(y_min, b), y_max = fmax(y_max, b);
    }
    if (!isfinite(y_min)) y_min = 0, y_max = 1;
    y_min = floor(y_min * 2) / 2;
    y_max = ceil(y_max * 2) / 2;
    if (y_max <= y_min) y_max = y_min + 0.5;
    if (x_max < 1) x_max = 1;
#define SX(x) (L + (W - L - R) * (double)(x) / x_max)
#define SY(y) (TOP + (H - TOP - BOT) * (1.0 - ((double)(y)-y_min) / (y_max - y_min)))
    char *buf = NULL;
    size_t len = 0, cap = 0;
    attn_status s =
        buf_printf(&buf, &len, &cap,
                   "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%g\" height=\"%g\" "
                   "viewBox=\"0 0 %g %g\" font-family=\"sans-serif\" font-size=\"12\">\n"
                   "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n"
                   "<text x=\"%g\" y=\"24\" text-anchor=\"middle\" font-size=\"15\">attn train: "
                   "cross-entropy loss</text>\n",
                   W, H, W, H, W / 2);
    /* Grid and ticks: 5 on each axis. */
    for (int i = 0; i <= 5 && !s; i++) {
        double yv = y_min + (y_max - y_min) * i / 5, xv = x_max * i / 5;
        s = buf_printf(&buf, &len, &cap,
                       "<line x1=\"%g\" y1=\"%.1f\" x2=\"%g\" y2=\"%.1f\" stroke=\"#ddd\"/>\n"
                       "<text x=\"%g\" y=\"%.1f\" text-anchor=\"end\">%.2f</text>\n"
                       "<line x1=\"%.1f\" y1=\"%g\" x2=\"%.1f\" y2=\"%g\" stroke=\"#ddd\"/>\n"
                       "<text x=\"%.1f\" y=\"%g\" text-anchor=\"middle\">%.0f</text>\n",
                       L, SY(yv), W - R, SY(yv), L - 6, SY(yv) + 4, yv, SX(xv), TOP, SX(xv),
                       H - BOT, SX(xv), H - BOT + 18, xv);
    }
    if (!s)
        s = buf_printf(&buf, &len, &cap,
                       "<rect x=\"%g\" y=\"%g\" width=\"%g\" height=\"%g\" fill=\"none\" "
                       "stroke=\"#333\"/>\n"
                       "<text x=\"%g\" y=\"%g\" text-anchor=\"middle\">step</text>\n"
                       "<text x=\"16\" y=\"%g\" text-anchor=\"middle\" "
                       "transform=\"rotate(-90 16 %g)\">loss</text>\n",
                       L, TOP, W - L - R, H - TOP - BOT, (L + W - R) / 2, H - 10,
                       (TOP + H - BOT) / 2, (TOP + H - BOT) / 2);
    if (!s && tr->n_hist) {
        s = buf_printf(&buf, &len, &cap,
                       "<polyline fill=\"none\" stroke=\"#9ecae1\" stroke-width=\"1\" points=\"");
        for (size_t i = 0; i < tr->n_hist && !s; i++)
            if (isfinite(tr->hist[i].loss))
                s = buf_printf(&buf, &len, &cap, "%.1f,%.1f ", SX(tr->hist[i].step),
                               SY(tr->hist[i].loss));
        if (!s) s = buf_printf(&buf, &len, &cap, "\"/>\n");
    }
    const char *colors[2] = {"#08519c", "#e6550d"};
    for (int which = 0; which < 2 && !s && tr->n_evals; which++) {
        s = buf_printf(&buf, &len, &cap,
                       "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\" points=\"",
                       colors[which]);
        for (size_t i = 0; i < tr->n_evals && !s; i++) {
            float v = which ? tr->evals[i].val_loss : tr->evals[i].train_loss;
            s = buf_printf(&buf, &len, &cap, "%.1f,%.1f ", SX(tr->evals[i].step), SY(v));
        }
        if (!s) s = buf_printf(&buf, &len, &cap, "\"/>\n");
        for (size_t i = 0; i < tr->n_evals && !s; i++) {
            float v = which ? tr->evals[i].val_loss : tr->evals[i].train_loss;
            s = buf_printf(&buf, &len, &cap,
                           "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"%s\"/>\n",
                           SX(tr->evals[i].step), SY(v), colors[which]);
        }
    }
    /* Legend. */
    const char *labels[3] = {"batch loss", "train loss (eval)", "val loss (eval)"};
    const char *lc[3] = {"#9ecae1", "#08519c", "#e6550d"};
    for (int i = 0; i < 3 && !s; i++)
        s = buf_printf(&buf, &len, &cap,
                       "<line x1=\"%g\" y1=\"%g\" x2=\"%g\" y2=\"%g\" stroke=\"%s\" "
                       "stroke-width=\"3\"/><text x=\"%g\" y=\"%g\">%s</text>\n",
                       W - R - 170, TOP + 16 + 18.0 * i, W - R - 145, TOP + 16 + 18.0 * i, lc[i],
                       W - R - 138, TOP + 20 + 18.0 * i, labels[i]);
    if (!s) s = buf_printf(&buf, &len, &cap, "</svg>\n");
#undef SX
#undef SY
    if (s)
        s = attn_fail(err, s, "out of memory formatting %s", path);
    else
        s = attn_file_write_atomic(path, buf, len, err);
    free(buf);
    return s;
}

attn_status attn_trainer_write_loss_files(const attn_trainer *tr, const char *dir,
                                          attn_error *err) {
    char path[PATH_BUF];
    if (join(path, dir, "loss.csv"))
        return attn_fail(err, ATTN_ERR_IO, "output directory path is too long");
    attn_status s = write_csv(tr, path, err);
    if (s) return s;
    join(path, dir, "loss.svg");
    return write_svg(tr, path, err);
}

/* ------------------------------------------------------ loading a model */

attn_status attn_gpt_load_checkpoint(const char *path, attn_gpt *m, attn_tokenizer *tok,
                                     int64_t *step, attn_error *err) {
    char file[PATH_BUF];
    struct stat sb;
    memset(m, 0, sizeof *m);
    memset(tok, 0, sizeof *tok);
    if (stat(path, &sb) != 0)
        return attn_fail(err, ATTN_ERR_IO, "checkpoint %s: %s", path, strerror(errno));
    if (S_ISDIR(sb.st_mode)) {
        if (join(file, path, ATTN_CKPT_MODEL))
            return attn_fail(err, ATTN_ERR_IO, "checkpoint path is too long");
    } else {
        snprintf(file, sizeof file, "%s", path);
    }
    attn_safetensors st;
    attn_status s = attn_safetensors_read(file, &st, err);
    if (s) return s;
    const char *cfg_text = attn_safetensors_meta(&st, "config");
    const char *vocab = attn_safetensors_meta(&st, "vocabulary");
    if (!cfg_text || !vocab) {
        s = attn_fail(err, ATTN_ERR_FORMAT,
                      "%s is not an attn GPT checkpoint (no config/vocabulary metadata)", file);
        goto out;
    }
    attn_gpt_config cfg;
    memset(&cfg, 0, sizeof cfg);
    if ((s = attn_gpt_config_set_json(&cfg, cfg_text, err))) {
        char msg[ATTN_ERROR_MSG_MAX];
        snprintf(msg, sizeof msg, "%s", err ? err->msg : "");
        s = attn_fail(err, ATTN_ERR_FORMAT, "%s: bad config metadata: %s", file, msg);
        goto out;
    }
    if ((s = attn_tokenizer_from_vocab(tok, vocab, strlen(vocab), err))) goto out;
    if (tok->vocab_size != cfg.vocab_size) {
        s = attn_fail(err, ATTN_ERR_FORMAT,
                      "%s: vocabulary has %d characters but the config says vocab_size %d", file,
                      tok->vocab_size, cfg.vocab_size);
        goto out;
    }
    if ((s = attn_gpt_init(m, &cfg, NULL, err))) goto out;
    if ((s = attn_safetensors_to_params(&st, file, attn_gpt_params(m), err))) {
        char msg[ATTN_ERROR_MSG_MAX];
        snprintf(msg, sizeof msg, "%s", err ? err->msg : "");
        s = attn_fail(err, s, "checkpoint tensors do not fit its config: %s", msg);
        goto out;
    }
    uint64_t stp = 0;
    if (step) *step = parse_u64(attn_safetensors_meta(&st, "step"), &stp) ? -1 : (int64_t)stp;
out:
    attn_safetensors_free(&st);
    if (s) {
        attn_gpt_free(m);
        attn_tokenizer_free(tok);
    }
    return s;
}
