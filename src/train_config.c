/* Training configs: the presets' recipes, JSON keys, range checks (see
 * attn/train.h). */
#include <cjson/cJSON.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn/train.h"

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

void attn_train_config_extend(attn_train_config *c, const attn_train_config *saved,
                              int64_t max_steps) {
    if (max_steps != saved->max_steps && c->lr_decay_steps == 0)
        c->lr_decay_steps = saved->lr_decay_steps ? saved->lr_decay_steps : saved->max_steps;
    c->max_steps = max_steps;
}
