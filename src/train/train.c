/* The trainer: init, one step, evaluation, checkpoint save and resume (see
 * attn/train.h); configs in train_config.c, the loop in train_loop.c, the
 * loss report in train_report.c. */
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
#include "io/checkpoint_fit.h"
#include "train_accum.h"
#include "train_device.h"
#include "train_history.h"

#define PATH_BUF 4096

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

/* attn_trainer_init(_vocab): the vocabulary is vocab's (a UTF-8 string of
 * its characters in id order) or, vocab NULL, the corpus's. */
static attn_status trainer_init(attn_trainer *tr, const attn_gpt_config *mcfg,
                                const attn_train_config *tcfg, int vocab_given, const char *vocab,
                                const char *text, size_t n, attn_error *err) {
    memset(tr, 0, sizeof *tr);
    attn_status st = attn_train_config_validate(tcfg, err);
    if (st) return st;
    if (n == 0) return attn_fail(err, ATTN_ERR_INVALID_ARG, "the corpus is empty");
    tr->mcfg = *mcfg;
    tr->tcfg = *tcfg;
    if (vocab) {
        if ((st = attn_tokenizer_from_vocab(&tr->tok, vocab, strlen(vocab), err))) goto fail;
    } else if ((st = attn_tokenizer_train(&tr->tok, text, n, err))) {
        goto fail;
    }
    if (vocab_given && mcfg->vocab_size != tr->tok.vocab_size) {
        st = attn_fail(err, ATTN_ERR_INVALID_ARG,
                       vocab ? "config vocab_size %d does not match the vocabulary's %d characters"
                             : "config vocab_size %d does not match the corpus's %d distinct "
                               "characters",
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

attn_status attn_trainer_init(attn_trainer *tr, const attn_gpt_config *mcfg,
                              const attn_train_config *tcfg, int vocab_given, const char *text,
                              size_t n, attn_error *err) {
    return trainer_init(tr, mcfg, tcfg, vocab_given, NULL, text, n, err);
}

attn_status attn_trainer_init_vocab(attn_trainer *tr, const attn_gpt_config *mcfg,
                                    const attn_train_config *tcfg, int vocab_given,
                                    const char *vocab, const char *text, size_t n,
                                    attn_error *err) {
    if (!vocab) {
        memset(tr, 0, sizeof *tr);
        return attn_fail(err, ATTN_ERR_INVALID_ARG, "no vocabulary given");
    }
    return trainer_init(tr, mcfg, tcfg, vocab_given, vocab, text, n, err);
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

double attn_train_lr(const attn_train_config *c, int64_t step, double progress) {
    const int64_t decay = c->lr_decay_steps ? c->lr_decay_steps : c->max_steps;
    const double hi = c->learning_rate, lo = c->min_lr;
    if (c->time_budget <= 0 && c->lr_schedule == ATTN_LR_COSINE)
        return attn_lr_cosine(step, c->warmup_steps, decay, hi, lo);
    if (step < c->warmup_steps) return hi * (double)(step + 1) / (double)(c->warmup_steps + 1);
    double f = c->time_budget > 0 ? progress : (double)step / (double)(decay > 0 ? decay : 1);
    f = f < 0 ? 0 : f > 1 ? 1 : f;
    if (c->lr_schedule == ATTN_LR_COSINE)
        return lo + 0.5 * (1.0 + cos(3.14159265358979323846 * f)) * (hi - lo);
    const double start = 1.0 - ATTN_WSD_COOLDOWN; /* WSD: flat, then linear */
    return f <= start ? hi : hi + (lo - hi) * (f - start) / ATTN_WSD_COOLDOWN;
}

/* Count a finished step and push its record. */
static attn_status record_step(attn_trainer *tr, float loss, double lr, double norm,
                               attn_train_record *rec, attn_error *err) {
    tr->step++;
    attn_train_record r = {tr->step, loss, (float)lr, (float)norm};
    attn_status st = push_hist(tr, &r, err);
    if (st) return st;
    if (rec) *rec = r;
    return ATTN_OK;
}

attn_status attn_trainer_step(attn_trainer *tr, attn_train_record *rec, attn_error *err) {
    const attn_train_config *c = &tr->tcfg;
    const int B = c->batch_size, T = tr->mcfg.context_length;
    double lr = attn_train_lr(c, tr->step, tr->progress);
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
        if (tr->gpu) { /* train_device.c */
            double norm = 0;
            if ((st = attn_trainer_device_step(tr, lr, &loss, &norm, err))) return st;
            return record_step(tr, loss, lr, norm, rec, err);
        }
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
    return record_step(tr, loss, lr, norm, rec, err);
}


/* The sampled estimate of split s (0 train, 1 val): eval_iters random
 * batches (drawn on every rank, split over the ranks). */
static attn_status sampled_loss(attn_trainer *tr, int s, float *mean, attn_error *err) {
    const int B = tr->tcfg.batch_size, T = tr->mcfg.context_length;
    const attn_token_dataset *split = s ? &tr->val : &tr->train;
    const size_t n_it = (size_t)tr->tcfg.eval_iters;
    size_t lo, hi; /* this rank's share of the batches (all of them alone) */
    attn_dist_block(tr->dist, n_it, &lo, &hi);
    for (size_t i = 0; i < n_it; i++) {
        attn_dataset_random_batch(split, &tr->eval_rng, B, tr->xb, tr->yb);
        if (i < lo || i >= hi) continue;
        attn_status st = tr->gpu ? attn_trainer_device_eval(tr, &tr->eval_loss[i], err)
                                 : attn_gpt_forward(&tr->model, tr->xb, tr->yb, B, T, NULL,
                                                    &tr->acts, &tr->eval_loss[i], err);
        if (st) return st;
    }
    attn_status st = attn_dist_allgather(tr->dist, tr->eval_loss, n_it, err);
    if (st) return st;
    double sum = 0;
    for (size_t i = 0; i < n_it; i++)
        sum += tr->eval_loss[i];
    *mean = (float)(sum / tr->tcfg.eval_iters);
    return ATTN_OK;
}

/* The exact val loss (every rank computes it whole: it is deterministic, and
 * the ranks hold the same weights). */
static attn_status exact_val(attn_trainer *tr, float *out, attn_error *err) {
    attn_status st = tr->gpu ? attn_trainer_device_sync(tr, err) : ATTN_OK;
    double loss = 0;
    if (!st)
        st = attn_gpt_loss_windows(&tr->model, &tr->acts, tr->val.ids, tr->val.n_ids, &loss, NULL,
                                   err);
    if (!st) *out = (float)loss;
    return st;
}

static attn_status evaluate(attn_trainer *tr, int sampled_val, int exact, attn_eval_record *rec,
                            attn_error *err) {
    attn_eval_record r = {tr->step, NAN, NAN, NAN};
    attn_status st = sampled_loss(tr, 0, &r.train_loss, err);
    if (!st && sampled_val) st = sampled_loss(tr, 1, &r.val_loss, err);
    if (!st && exact) st = exact_val(tr, &r.val_exact, err);
    if (!st) st = push_eval(tr, &r, err);
    if (st) return st;
    if (rec) *rec = r;
    return ATTN_OK;
}

attn_status attn_trainer_evaluate(attn_trainer *tr, attn_eval_record *rec, attn_error *err) {
    const int exact = tr->tcfg.eval_mode == ATTN_EVAL_EXACT;
    return evaluate(tr, !exact, exact, rec, err);
}

attn_status attn_trainer_evaluate_final(attn_trainer *tr, attn_eval_record *rec, attn_error *err) {
    return evaluate(tr, tr->tcfg.eval_mode != ATTN_EVAL_EXACT, 1, rec, err);
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
    float *evals = malloc((tr->n_evals + 1) * 3 * sizeof *evals);
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
        /* The exact val losses, when any evaluation took one (NAN where not). */
        int any_exact = 0;
        for (size_t i = 0; i < ne; i++) {
            evals[2 * ne + i] = tr->evals[i].val_exact;
            any_exact |= !isnan(tr->evals[i].val_exact);
        }
        shapes[7] = (int64_t)ne;
        if (any_exact)
            e[k++] =
                (attn_st_entry){"evals.val_exact", "F32", 1, &shapes[7], evals + 2 * ne, ne * 4};
    }
    full = full_config_json(tr, err);
    if (!full) {
        st = err ? err->code : ATTN_ERR_NOMEM;
        goto done;
    }
    char step_s[32], adam_s[32], epoch_s[32], cursor_s[32], bytes_s[32], hash_s[32], el_s[40];
    snprintf(step_s, sizeof step_s, "%" PRId64, tr->step);
    snprintf(adam_s, sizeof adam_s, "%" PRId64, tr->opt.step);
    snprintf(epoch_s, sizeof epoch_s, "%" PRIu64, tr->sampler.epoch);
    snprintf(cursor_s, sizeof cursor_s, "%zu", tr->sampler.cursor);
    snprintf(bytes_s, sizeof bytes_s, "%zu", tr->text_bytes);
    snprintf(hash_s, sizeof hash_s, "%016" PRIx64, tr->text_hash);
    snprintf(el_s, sizeof el_s, "%.17g", tr->elapsed_s);
    attn_st_kv smeta[] = {{"format", "attn-train-state"},
                          {"step", step_s},
                          {"config", full},
                          {"adamw_step", adam_s},
                          {"sampler_epoch", epoch_s},
                          {"sampler_cursor", cursor_s},
                          {"corpus_bytes", bytes_s},
                          {"corpus_fnv1a", hash_s},
                          {"corpus_path", tr->corpus_path ? tr->corpus_path : ""},
                          {"elapsed_s", el_s}};
    if ((st = attn_ckpt_begin(&txn, dir, tr->step, err)) ||
        (st = attn_ckpt_file(&txn, ATTN_CKPT_STATE, path, err)))
        goto done;
    if ((st =
             /* elapsed_s (the last entry) only for a time-budgeted run: other
              * runs' states stay the same bytes run to run. */
         attn_safetensors_write(
             path, e, k, smeta,
             (int)(sizeof smeta / sizeof smeta[0]) - (tr->tcfg.time_budget > 0 ? 0 : 1), err)))
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
    if (attn_path_join(path, PATH_BUF, live, ATTN_CKPT_STATE))
        return attn_fail(err, ATTN_ERR_IO, "checkpoint directory path is too long");
    attn_safetensors st;
    attn_status s = attn_safetensors_read(path, &st, err);
    if (s) return s;
    s = read_state_config(&st, path, mcfg, tcfg, err);
    /* The caller allocates a trainer of this config: the optimizer state
     * it saved must have that shape. */
    if (!s) s = attn_ckpt_fit_config(mcfg, &st, "exp_avg.", path, err);
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
        /* A key only now has (a variant key the checkpoint left at the book's). */
        for (const cJSON *sect = jb->child; sect; sect = sect->next) {
            const cJSON *other = cJSON_GetObjectItemCaseSensitive(ja, sect->string);
            for (const cJSON *it = sect->child; it && other; it = it->next) {
                if (cJSON_GetObjectItemCaseSensitive(other, it->string)) continue;
                char *pb = cJSON_PrintUnformatted(it);
                snprintf(out, size, "%s (checkpoint absent, now %s)", it->string, pb ? pb : "?");
                free(pb);
                goto done;
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
    if (attn_path_join(path, PATH_BUF, live, ATTN_CKPT_STATE) || attn_path_join(mpath, PATH_BUF, live, ATTN_CKPT_MODEL))
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
        /* Only how often to print and save, and how long to train, may
         * change on resume; the LR schedule must stay the same, so
         * lr_decay_steps is compared as the horizon it stands for
         * (attn_train_config_extend pins it). */
        tmp.tcfg.log_interval = tr->tcfg.log_interval;
        tmp.tcfg.checkpoint_interval = tr->tcfg.checkpoint_interval;
        if (!tmp.tcfg.lr_decay_steps) tmp.tcfg.lr_decay_steps = tmp.tcfg.max_steps;
        tmp.tcfg.max_steps = tr->tcfg.max_steps;
        attn_trainer cur = *tr;
        if (!cur.tcfg.lr_decay_steps) cur.tcfg.lr_decay_steps = cur.tcfg.max_steps;
        then = full_config_json(&tmp, err);
        now = full_config_json(&cur, err);
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
    if ((s = attn_safetensors_meta_u64(&st, path, "step", INT64_MAX, &step, err)) ||
        (s = attn_safetensors_meta_u64(&st, path, "adamw_step", INT64_MAX, &adam_step, err)) ||
        (s = attn_safetensors_meta_u64(&st, path, "sampler_epoch", UINT64_MAX, &epoch, err)) ||
        (s = attn_safetensors_meta_u64(&st, path, "sampler_cursor", SIZE_MAX, &cursor, err)) ||
        (s = attn_safetensors_meta_u64(&st, path, "corpus_bytes", SIZE_MAX, &bytes, err)))
        goto out;
    if (!hash) {
        s = attn_fail(err, ATTN_ERR_FORMAT, "%s: metadata 'corpus_fnv1a' is missing", path);
        goto out;
    }
    if ((int64_t)step > tr->tcfg.max_steps) {
        s = attn_fail(err, ATTN_ERR_INVALID_ARG,
                      "cannot resume %s: it is at step %" PRIu64 ", beyond max_steps %" PRId64, dir,
                      step, tr->tcfg.max_steps);
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
    if ((s = attn_safetensors_meta_u64(&ms, mpath, "step", INT64_MAX, &mstep, err))) goto out;
    if (mstep != step) {
        s = attn_fail(err, ATTN_ERR_FORMAT, "%s and %s are from different steps", mpath, path);
        goto out;
    }
    const attn_param_list *params = attn_gpt_params(&tr->model);
    if ((s = attn_ckpt_check_finite(&ms, "", mpath, err)) ||
        (s = attn_ckpt_check_finite(&st, "exp_avg", path, err)) ||
        (s = attn_safetensors_to_params(&ms, mpath, params, err)))
        goto out;
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
    train_history h;
    train_history_find(&st, &h);
    tr->n_hist = 0;
    for (size_t i = 0; i < h.n_steps; i++) {
        attn_train_record r;
        train_history_step(&h, i, &r);
        if ((s = push_hist(tr, &r, err))) goto out;
    }
    tr->n_evals = 0;
    for (size_t i = 0; i < h.n_evals; i++) {
        attn_eval_record r;
        train_history_eval(&h, i, &r);
        if ((s = push_eval(tr, &r, err))) goto out;
    }
    tr->opt.step = (int64_t)adam_step;
    tr->step = (int64_t)step;
    /* time_budget's clock (absent in older checkpoints: 0). */
    const char *el = attn_safetensors_meta(&st, "elapsed_s");
    tr->elapsed_s = 0;
    if (el) {
        char *end = NULL;
        const double v = strtod(el, &end);
        if (end == el || *end || !isfinite(v) || v < 0) {
            s = attn_fail(err, ATTN_ERR_FORMAT, "%s: metadata 'elapsed_s' is not a time ('%s')",
                          path, el);
            goto out;
        }
        tr->elapsed_s = v;
    }
out:
    free(now);
    free(then);
    attn_safetensors_free(&st);
    attn_safetensors_free(&ms);
    return s;
}

/* The variant keys of a (the checkpoint's model) and b (the run's) agree. */
static attn_status same_variant(const char *dir, const attn_gpt_config *a, const attn_gpt_config *b,
                                attn_error *err) {
    for (int i = ATTN_GPT_KEY_VARIANT0; i < ATTN_GPT_KEY_VARIANT0 + ATTN_GPT_KEY_VARIANTS; i++) {
        char va[64], vb[64];
        attn_gpt_key_value(a, i, va, sizeof va);
        attn_gpt_key_value(b, i, vb, sizeof vb);
        if (strcmp(va, vb) != 0)
            return attn_fail(err, ATTN_ERR_INVALID_ARG, "%s: its model has %s %s, this run's %s",
                             dir, attn_gpt_key_at(i)->name, va, vb);
    }
    return ATTN_OK;
}

attn_status attn_trainer_init_from(attn_trainer *tr, const char *dir, attn_error *err) {
    if (tr->step != 0 || tr->gpu)
        return attn_fail(err, ATTN_ERR_STATE,
                         "--init-from: weights load into a fresh CPU trainer only");
    attn_gpt src;
    attn_tokenizer tok;
    attn_status s = attn_gpt_load_checkpoint(dir, &src, &tok, NULL, err);
    if (s) return s;
    const attn_gpt_config *a = &src.cfg, *b = &tr->mcfg;
    if (a->vocab_size != b->vocab_size || a->context_length != b->context_length ||
        a->emb_dim != b->emb_dim || a->n_heads != b->n_heads || a->n_layers != b->n_layers ||
        a->qkv_bias != b->qkv_bias) {
        s = attn_fail(err, ATTN_ERR_INVALID_ARG,
                      "%s: its model (vocab %d, ctx %d, emb %d, %d heads, %d layers, qkv_bias %d) "
                      "differs from this run's (vocab %d, ctx %d, emb %d, %d heads, %d layers, "
                      "qkv_bias %d)",
                      dir, a->vocab_size, a->context_length, a->emb_dim, a->n_heads, a->n_layers,
                      a->qkv_bias, b->vocab_size, b->context_length, b->emb_dim, b->n_heads,
                      b->n_layers, b->qkv_bias);
    } else if ((s = same_variant(dir, a, b, err))) {
        /* named there */
    } else if (memcmp(tok.chars, tr->tok.chars, (size_t)tok.vocab_size * sizeof *tok.chars)) {
        s = attn_fail(err, ATTN_ERR_INVALID_ARG,
                      "%s: its vocabulary differs from this trainer's (same size, other "
                      "characters): the token ids would not match (start the trainer with the "
                      "checkpoint's vocabulary: attn_trainer_init_vocab)",
                      dir);
    } else {
        const attn_param_list *from = attn_gpt_params(&src), *to = attn_gpt_params(&tr->model);
        for (int i = 0; i < to->count; i++)
            memcpy(to->items[i].data, from->items[i].data, to->items[i].numel * sizeof(float));
    }
    attn_gpt_free(&src);
    attn_tokenizer_free(&tok);
    return s;
}
