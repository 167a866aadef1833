/* attn train --task classify|instruct for a binding (attn_h_finetune,
 * attn/handles.h): its keys read as the attn program's options, the
 * library's fine-tuning calls (attn/finetune.h), and the run folder the
 * program writes (attn/finetune_run.h: RUN/model.safetensors, its
 * checkpoints, RUN/log.csv, instruct's samples and RUN/responses.json). */
#include <cblas.h>
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn/checkpoint.h"
#include "attn/engine.h"
#include "attn/fileio.h"
#include "attn/finetune.h"
#include "attn/finetune_run.h"
#include "attn/handles.h"
#include "attn/lora.h"
#include "attn/train.h"
#include "attn/weights_format.h"

typedef struct ft_request {
    const char *task, *init_from, *data, *val, *out, *precision;
    int n_heads, trainable_given, lora_given, resume;
    long long limit;
    attn_classify_config cfg;
} ft_request;

/* The run's events to the caller (RUN/log.csv is the folder's,
 * attn/finetune_run.h). */
typedef struct ft_run {
    attn_h_finetune_callback cb;
    void *user;
    double lr; /* the run's (constant, as the book's AdamW) */
} ft_run;

/* ---------------------------------------------------------------- keys */

/* The training keys the fine-tuning tasks read (attn train's options of
 * the same names), then their own. */
static const char *const shared_keys[] = {"batch_size",    "learning_rate", "beta1",
                                          "beta2",         "eps",           "weight_decay",
                                          "eval_interval", "eval_iters",    "seed"};
#define N_SHARED ((int)(sizeof shared_keys / sizeof shared_keys[0]))

static void set_shared(attn_classify_config *c, int k, double d) {
    switch (k) {
    case 0: c->batch_size = (int)d; break;
    case 1: c->lr = d; break;
    case 2: c->beta1 = d; break;
    case 3: c->beta2 = d; break;
    case 4: c->eps = d; break;
    case 5: c->weight_decay = d; break;
    case 6: c->eval_freq = (int)d; break;
    case 7: c->eval_iter = (int)d; break;
    default: c->seed = (uint64_t)d; break;
    }
}

/* d within [lo, hi] (open ends as told), an integer when integral. */
static attn_status in_range(const char *name, double d, double lo, double hi, int lo_open,
                            int integral, attn_error *err) {
    if (!isfinite(d) || d < lo || (lo_open && d == lo) || d > hi || (integral && d != floor(d)))
        return attn_fail(err, ATTN_ERR_INVALID_ARG, "%s must be %s %s %g and at most %g (got %g)",
                         name, integral ? "an integer" : "a number", lo_open ? ">" : ">=", lo, hi,
                         d);
    return ATTN_OK;
}

static attn_status string_key(ft_request *rq, const char *name, const cJSON *it, attn_error *err) {
    if (!cJSON_IsString(it)) return attn_fail(err, ATTN_ERR_INVALID_ARG, "%s takes a string", name);
    const char *v = it->valuestring;
    if (strcmp(name, "precision") == 0) {
        attn_precision p;
        rq->precision = v;
        return attn_precision_parse(v, &p, err);
    }
    const char *const *names = attn_trainable_set_names();
    for (int i = 0; names[i]; i++)
        if (strcmp(v, names[i]) == 0) {
            rq->cfg.trainable = (attn_trainable_set)i;
            rq->trainable_given = 1;
            return ATTN_OK;
        }
    return attn_fail(err, ATTN_ERR_INVALID_ARG,
                     "trainable must be all, last-block or head (got '%s')", v);
}

/* One key of keys_json into rq. */
static attn_status one_key(ft_request *rq, const cJSON *it, attn_error *err) {
    const char *name = it->string;
    const int instruct = strcmp(rq->task, "instruct") == 0;
    if (strcmp(name, "trainable") == 0 || strcmp(name, "precision") == 0)
        return string_key(rq, name, it, err);
    if (!cJSON_IsNumber(it) && !cJSON_IsBool(it))
        return attn_fail(err, ATTN_ERR_INVALID_ARG, "%s takes a number", name);
    const double d = cJSON_IsBool(it) ? (double)cJSON_IsTrue(it) : it->valuedouble;
    for (int k = 0; k < N_SHARED; k++)
        if (strcmp(name, shared_keys[k]) == 0) {
            const attn_train_key *t = attn_train_key_at(attn_train_key_find(name));
            attn_status s =
                in_range(name, d, t->lo, t->hi, t->lo_open, t->type == ATTN_TKEY_INT, err);
            if (!s) set_shared(&rq->cfg, k, d);
            return s;
        }
    attn_status s = ATTN_ERR_NOT_FOUND;
    if (strcmp(name, "epochs") == 0 && !(s = in_range(name, d, 1, 1e6, 0, 1, err)))
        rq->cfg.epochs = (int)d;
    else if (strcmp(name, "lora_rank") == 0 &&
             !(s = in_range(name, d, 1, ATTN_LORA_MAX_RANK, 0, 1, err)))
        rq->cfg.lora_rank = (int)d, rq->lora_given = 1;
    else if (strcmp(name, "lora_alpha") == 0 && !(s = in_range(name, d, 0, 1e6, 1, 0, err)))
        rq->cfg.lora_alpha = (float)d;
    else if (strcmp(name, "resume") == 0 && !(s = in_range(name, d, 0, 1, 0, 1, err)))
        rq->resume = (int)d;
    else if (strcmp(name, "n_heads") == 0 && !(s = in_range(name, d, 1, 4096, 0, 1, err)))
        rq->n_heads = (int)d;
    else if (instruct && strcmp(name, "limit") == 0 && !(s = in_range(name, d, 1, 1e15, 0, 1, err)))
        rq->limit = (long long)d;
    else if (instruct && strcmp(name, "mask_prompt") == 0 &&
             !(s = in_range(name, d, 0, 1, 0, 1, err)))
        rq->cfg.mask_prompt = (int)d;
    if (s == ATTN_ERR_NOT_FOUND)
        return attn_fail(err, ATTN_ERR_INVALID_ARG,
                         "%s does not apply to task %s (docs/finetuning.md names its keys)", name,
                         rq->task);
    return s;
}

/* The request of attn_h_finetune's arguments, checked before anything is
 * read. */
static attn_status make_request(ft_request *rq, const char *keys_json, attn_error *err) {
    const int instruct = strcmp(rq->task, "instruct") == 0;
    if (!instruct && strcmp(rq->task, "classify") != 0)
        return attn_fail(err, ATTN_ERR_INVALID_ARG, "task must be classify or instruct (got '%s')",
                         rq->task);
    rq->cfg = instruct ? attn_instruct_defaults() : attn_classify_defaults();
    rq->cfg.lora_alpha = 16; /* attn train's --lora-alpha */
    const char *missing = !rq->init_from ? "init_from (the model to fine-tune)"
                          : !rq->data    ? "data (the training set)"
                          : !rq->out     ? "out (a new folder)"
                                         : NULL;
    if (missing) return attn_fail(err, ATTN_ERR_INVALID_ARG, "task %s needs %s", rq->task, missing);
    if (instruct && rq->val)
        return attn_fail(err, ATTN_ERR_INVALID_ARG,
                         "val does not apply to task instruct (its data file is split)");
    cJSON *keys = keys_json ? cJSON_Parse(keys_json) : NULL;
    attn_status s = keys_json && !cJSON_IsObject(keys)
                        ? attn_fail(err, ATTN_ERR_INVALID_ARG, "training keys: not a JSON object")
                        : ATTN_OK;
    for (const cJSON *it = keys ? keys->child : NULL; !s && it; it = it->next)
        s = one_key(rq, it, err);
    if (!s && rq->precision) rq->precision = strcmp(rq->precision, "bf16") == 0 ? "bf16" : "fp32";
    cJSON_Delete(keys);
    if (!s && rq->trainable_given && rq->lora_given)
        s = attn_fail(err, ATTN_ERR_INVALID_ARG,
                      "trainable and lora_rank: with adapters only they train (appendix E); give "
                      "one of them");
    return s;
}

/* ---------------------------------------------------------- the events */

static void ev_eval(void *user, int epoch, int64_t step, double tl, double vl) {
    ft_run *r = user;
    if (r->cb) r->cb(r->user, ATTN_H_FT_EVAL, epoch, step, tl, vl, NULL);
}

static void ev_epoch(void *user, int epoch, double ta, double va) {
    ft_run *r = user;
    if (r->cb) r->cb(r->user, ATTN_H_FT_ACCURACY, epoch, -1, ta, va, NULL);
}

static void ev_step(void *user, int64_t step, float loss) {
    ft_run *r = user;
    if (r->cb) r->cb(r->user, ATTN_H_FT_STEP, 0, step, (double)loss, r->lr, NULL);
}

static void ev_initial(void *user, double tl, double vl) {
    ft_run *r = user;
    if (r->cb) r->cb(r->user, ATTN_H_FT_INITIAL, 0, 0, tl, vl, NULL);
}

static void ev_sample(void *user, int epoch, const char *line) {
    ft_run *r = user;
    if (r->cb) r->cb(r->user, ATTN_H_FT_SAMPLE, epoch, -1, NAN, NAN, line);
}

/* ------------------------------------------------------------ the folder */

/* Train m in rq->out (attn/finetune_run.h: claimed, checkpointed, resumed,
 * RUN/log.csv), then the caller's final event. */
static attn_status run_in_folder(const ft_request *rq, attn_gpt *m, const attn_tokenizer *tok,
                                 const attn_classifier_info *info, const attn_finetune_sets *sets,
                                 const attn_classify_events *ev, ft_run *r, int64_t *steps,
                                 attn_error *err) {
    char who[ATTN_CKPT_PATH_MAX + 64];
    snprintf(who, sizeof who, "attn.train(task=\"%s\", out=\"%s\")", rq->task, rq->out);
    attn_finetune_folder f;
    attn_status s =
        attn_finetune_folder_open(&f, rq->out, who, rq->resume, rq->init_from, tok, info, err);
    if (s) return s;
    attn_classify_result res;
    s = attn_finetune_folder_train(&f, m, sets, &rq->cfg, ev, &res, err);
    if (!s) s = attn_finetune_folder_finish(&f, m, sets, err);
    if (!s) *steps = res.steps;
    if (!s && sets->train && r->cb)
        r->cb(r->user, ATTN_H_FT_FINAL, rq->cfg.epochs, res.steps, res.final_train_acc,
              res.final_val_acc, NULL);
    attn_finetune_folder_close(&f, s != ATTN_OK);
    return s;
}

/* ------------------------------------------------------------- the runs */

static const char *trainable_name(const attn_classify_config *c) {
    return c->lora_rank ? "adapters" : attn_trainable_set_names()[c->trainable];
}

/* The model of base for rq's task, at its precision. */
static attn_status make_model(const ft_request *rq, const attn_gpt *base, int n_classes,
                              attn_gpt *m, attn_error *err) {
    attn_precision prec = ATTN_PRECISION_FP32;
    if (rq->precision) attn_precision_parse(rq->precision, &prec, err);
    attn_status s = attn_classifier_from(m, base, n_classes, &rq->cfg, err);
    if (!s && prec != ATTN_PRECISION_FP32 && (s = attn_gpt_set_precision(m, prec, err)))
        attn_gpt_free(m);
    return s;
}

static attn_status run_classify(const ft_request *rq, const attn_gpt *base,
                                const attn_tokenizer *tok, ft_run *r, int64_t *steps,
                                attn_error *err) {
    attn_class_data tr, va;
    memset(&va, 0, sizeof va);
    attn_status s = attn_class_data_read(rq->data, tok, 0, base->cfg.context_length, &tr, err);
    if (s) return s;
    if (rq->val &&
        (s = attn_class_data_read(rq->val, tok, tr.max_len, base->cfg.context_length, &va, err))) {
        attn_class_data_free(&tr);
        return s;
    }
    if ((tr.truncated || va.truncated) && r->cb)
        r->cb(r->user, ATTN_H_FT_TRUNCATED, 0, tr.max_len, (double)tr.truncated,
              (double)va.truncated, NULL);
    const int n_classes = (tr.max_label > va.max_label ? tr.max_label : va.max_label) + 1;
    attn_gpt m;
    s = make_model(rq, base, n_classes, &m, err);
    if (!s) {
        const attn_classify_events ev = {r, ev_eval, ev_epoch, ev_step, NULL, NULL, NULL};
        const attn_classifier_info info = {n_classes,         tr.max_len,
                                           rq->cfg.lora_rank, rq->cfg.lora_alpha,
                                           "classify",        trainable_name(&rq->cfg)};
        const attn_finetune_sets sets = {&tr, &va, NULL, NULL, NULL};
        s = run_in_folder(rq, &m, tok, &info, &sets, &ev, r, steps, err);
        attn_gpt_free(&m);
    }
    attn_class_data_free(&tr);
    attn_class_data_free(&va);
    return s;
}

static attn_status run_instruct(const ft_request *rq, const attn_gpt *base,
                                const attn_tokenizer *tok, ft_run *r, int64_t *steps,
                                attn_error *err) {
    attn_instruct_data all, set[3];
    attn_status s = attn_instruct_data_read(rq->data, tok, &all, err);
    if (s) return s;
    size_t first[3], count[3];
    attn_instruct_split(all.n, (size_t)rq->limit, first, count);
    for (int k = 0; !s && k < 3; k++)
        s = attn_instruct_view(&all, first[k], count[k], &set[k], err);
    if (!s && count[0] < (size_t)rq->cfg.batch_size)
        s = attn_fail(err, ATTN_ERR_INVALID_ARG,
                      "%s: the training split has %zu entries, fewer than one batch of %d (the "
                      "book's loader drops the last partial batch)",
                      rq->data, count[0], rq->cfg.batch_size);
    attn_gpt m;
    if (!s && !(s = make_model(rq, base, 0, &m, err))) {
        const attn_classify_events ev = {r, ev_eval, NULL, ev_step, ev_initial, NULL, ev_sample};
        const attn_classifier_info info = {
            0,          m.cfg.context_length,    rq->cfg.lora_rank, rq->cfg.lora_alpha,
            "instruct", trainable_name(&rq->cfg)};
        const attn_finetune_sets sets = {NULL, NULL, &set[0], &set[2], &set[1]};
        s = run_in_folder(rq, &m, tok, &info, &sets, &ev, r, steps, err);
        attn_gpt_free(&m);
    }
    attn_instruct_data_free(&all);
    return s;
}

/* The base model, checked to be a language model (or an instruct run's). */
static attn_status open_base(const ft_request *rq, attn_gpt *base, attn_tokenizer *tok,
                             attn_error *err) {
    char task[16];
    if (attn_model_task(rq->init_from, task, err) == ATTN_OK && strcmp(task, "lm") != 0 &&
        strcmp(task, "instruct") != 0)
        return attn_fail(err, ATTN_ERR_INVALID_ARG,
                         "task %s: %s is a model of task %s; init_from takes a language model",
                         rq->task, rq->init_from, task);
    const attn_gpt_open_options open = {.n_heads = rq->n_heads};
    return attn_gpt_open(rq->init_from, &open, base, tok, NULL, NULL, err);
}

attn_status attn_h_finetune(const char *task, const char *init_from, const char *data,
                            const char *val, const char *out, const char *keys_json,
                            attn_h_finetune_callback cb, void *user, int64_t *steps,
                            int *request_error, attn_error *err) {
    ft_request rq = {
        .task = task ? task : "", .init_from = init_from, .data = data, .val = val, .out = out};
    int64_t done = 0;
    int req = 1;
    attn_status s = make_request(&rq, keys_json, err);
    if (!s && attn_finetune_check_out(out, rq.task, rq.resume, "", err)) s = ATTN_ERR_INVALID_ARG;
    attn_gpt base;
    attn_tokenizer tok;
    if (!s) {
        req = 0;
        s = open_base(&rq, &base, &tok, err);
    }
    if (!s) {
        ft_run r = {cb, user, rq.cfg.lr};
        const int before = openblas_get_num_threads(); /* attn's threads only (attn/gemm.h) */
        if (before != 1) openblas_set_num_threads(1);
        s = strcmp(rq.task, "instruct") == 0 ? run_instruct(&rq, &base, &tok, &r, &done, err)
                                             : run_classify(&rq, &base, &tok, &r, &done, err);
        if (before != 1) openblas_set_num_threads(before);
        attn_gpt_free(&base);
        attn_tokenizer_free(&tok);
    }
    if (steps) *steps = done;
    if (request_error) *request_error = s ? req : 0;
    return s;
}
