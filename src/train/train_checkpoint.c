/* The trainer's checkpoint I/O (see attn/train.h): save, resume, the configs
 * a checkpoint was trained with, fine-tuning from one. A training state's
 * tensors and metadata are each one table below, read by save and resume
 * alike, so an entry is added in one place. */
#define _POSIX_C_SOURCE 200809L

#include <cjson/cJSON.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "attn/checkpoint.h"
#include "attn/fileio.h"
#include "attn/safetensors.h"
#include "attn/train.h"
#include "attn/weights_format.h"
#include "io/checkpoint_fit.h"
#include "train_book.h"
#include "train_device.h"
#include "train_history.h"
#include "trainer.h"

#define PATH_BUF 4096
#define STATE_FORMAT "attn-train-state"
#define RNG_WORDS ATTN_BOOK_RNG_WORDS

/* ------------------------------------------------------------ the tables */

/* What counts a tensor's rows: a parameter's values, a generator's words,
 * the steps of the loss history, the evaluations. */
typedef enum { PER_PARAM, GENERATOR, HISTORY, EVALS } state_rows;

/* When a tensor is written, and what a reader does without it: ALWAYS,
 * else an error; IF_ROWS (its rows are not 0), the tensors of its rows are
 * read whole or not at all (an empty history); IF_EXACT (an evaluation was
 * exact), a history without exact losses. */
typedef enum { ALWAYS, IF_ROWS, IF_EXACT } state_when;

/* A training state's tensors in the file's layout: the optimizer's moments
 * are the trainer's own arrays (parameter i at opt.offset[i]); the
 * generators are packed (attn_book_rng_pack); the history is tr->hist and tr->evals by
 * column. */
typedef struct state_image {
    void *exp_avg, *exp_avg_sq;
    void *rng_model, *rng_eval;
    void *hist_step, *hist_vals;              /* step; loss, lr, grad_norm */
    void *eval_step, *eval_vals, *eval_exact; /* step; train, val; exact (NAN: none) */
    size_t n_hist, n_evals;
    int any_exact;
    uint32_t rng_words[2][RNG_WORDS];
} state_image;

typedef struct state_tensor {
    const char *name;  /* PER_PARAM: <name>.<parameter> */
    const char *dtype; /* F32, U32 or I64 */
    state_rows rows;
    int cols; /* 0: one dimension (rows), else (rows, cols) */
    state_when when;
    size_t at; /* where its values are: offsetof(state_image, ...) */
} state_tensor;

enum {
    T_EXP_AVG,
    T_EXP_AVG_SQ,
    T_RNG_MODEL,
    T_RNG_EVAL,
    T_HIST_STEP,
    T_HIST_VALS,
    T_EVAL_STEP,
    T_EVAL_VALS,
    T_EVAL_EXACT,
    T_COUNT
};
_Static_assert(T_COUNT == TRAIN_STATE_TENSORS, "train_history.h counts the table's tensors");

/* A kind's IF_ROWS tensors come first: the first sets the rows a reader
 * expects. */
static const state_tensor STATE_TENSORS[T_COUNT] = {
    [T_EXP_AVG] = {"exp_avg", "F32", PER_PARAM, 0, ALWAYS, offsetof(state_image, exp_avg)},
    [T_EXP_AVG_SQ] = {"exp_avg_sq", "F32", PER_PARAM, 0, ALWAYS, offsetof(state_image, exp_avg_sq)},
    [T_RNG_MODEL] = {"rng.model", "U32", GENERATOR, 0, ALWAYS, offsetof(state_image, rng_model)},
    [T_RNG_EVAL] = {"rng.eval", "U32", GENERATOR, 0, ALWAYS, offsetof(state_image, rng_eval)},
    [T_HIST_STEP] = {"history.step", "I64", HISTORY, 0, IF_ROWS, offsetof(state_image, hist_step)},
    [T_HIST_VALS] = {"history.loss_lr_norm", "F32", HISTORY, 3, IF_ROWS,
                     offsetof(state_image, hist_vals)},
    [T_EVAL_STEP] = {"evals.step", "I64", EVALS, 0, IF_ROWS, offsetof(state_image, eval_step)},
    [T_EVAL_VALS] = {"evals.train_val", "F32", EVALS, 2, IF_ROWS, offsetof(state_image, eval_vals)},
    [T_EVAL_EXACT] = {"evals.val_exact", "F32", EVALS, 0, IF_EXACT,
                      offsetof(state_image, eval_exact)},
};

/* The metadata, in the order written: an integer in [0, max] (max 0: a
 * string); when: W_BUDGET only for a time-budgeted run (elapsed_s,
 * time_budget's clock), W_BOOK only in the book's data order (its epoch,
 * the batches taken from it and its iterator's seeds; the permutation is
 * randperm of the sampler seed again), so other runs' states are the same
 * bytes run to run. */
enum {
    M_FORMAT,
    M_STEP,
    M_CONFIG,
    M_ADAMW_STEP,
    M_SAMPLER_EPOCH,
    M_SAMPLER_CURSOR,
    M_CORPUS_BYTES,
    M_CORPUS_FNV1A,
    M_CORPUS_PATH,
    M_ELAPSED_S,
    M_BOOK_EPOCH,
    M_BOOK_POS,
    M_BOOK_BASE_SEED,
    M_BOOK_SAMPLER_SEED,
    M_COUNT
};

enum { W_ALWAYS, W_BUDGET, W_BOOK };

static const struct state_meta {
    const char *key;
    uint64_t max;
    int when;
} STATE_META[M_COUNT] = {
    [M_FORMAT] = {"format", 0, 0},
    [M_STEP] = {"step", INT64_MAX, 0},
    [M_CONFIG] = {"config", 0, 0},
    [M_ADAMW_STEP] = {"adamw_step", INT64_MAX, 0},
    [M_SAMPLER_EPOCH] = {"sampler_epoch", UINT64_MAX, 0},
    [M_SAMPLER_CURSOR] = {"sampler_cursor", SIZE_MAX, 0},
    [M_CORPUS_BYTES] = {"corpus_bytes", SIZE_MAX, 0},
    [M_CORPUS_FNV1A] = {"corpus_fnv1a", 0, 0},
    [M_CORPUS_PATH] = {"corpus_path", 0, 0},
    [M_ELAPSED_S] = {"elapsed_s", 0, W_BUDGET},
    [M_BOOK_EPOCH] = {"book_epoch", INT64_MAX, W_BOOK},
    [M_BOOK_POS] = {"book_batches_taken", SIZE_MAX, W_BOOK},
    [M_BOOK_BASE_SEED] = {"book_base_seed", INT64_MAX, W_BOOK},
    [M_BOOK_SAMPLER_SEED] = {"book_sampler_seed", INT64_MAX, W_BOOK},
};

/* Whether row i belongs in tr's state. */
static int meta_applies(const attn_trainer *tr, int i) {
    return STATE_META[i].when == W_ALWAYS ||
           (STATE_META[i].when == W_BUDGET && tr->tcfg.time_budget > 0) ||
           (STATE_META[i].when == W_BOOK && tr->book);
}

/* Where t's values are in im. */
static void *image_at(const state_image *im, const state_tensor *t) {
    return *(void *const *)((const char *)im + t->at);
}

/* Rows of a tensor of t's kind (PER_PARAM: parameter p's values). */
static size_t image_rows(const state_image *im, const state_tensor *t, const attn_param *p) {
    switch (t->rows) {
    case PER_PARAM: return p->numel;
    case GENERATOR: return RNG_WORDS;
    case HISTORY: return im->n_hist;
    case EVALS: return im->n_evals;
    }
    return 0;
}

/* Whether save writes t (not for PER_PARAM ones: they are always). */
static int written(const state_image *im, const state_tensor *t) {
    if (t->when == ALWAYS) return 1;
    return image_rows(im, t, NULL) && (t->when == IF_ROWS || im->any_exact);
}

/* ------------------------------------------------------------ generators */

/* ------------------------------------------------------------ the image */

static void image_free(state_image *im) {
    free(im->hist_step);
    free(im->hist_vals);
    free(im->eval_step);
    free(im->eval_vals);
    free(im->eval_exact);
}

/* The trainer's state in the file's layout (image_free after). */
static attn_status image_pack(const attn_trainer *tr, state_image *im, attn_error *err) {
    memset(im, 0, sizeof *im);
    const size_t nh = tr->n_hist, ne = tr->n_evals;
    im->exp_avg = tr->opt.m;
    im->exp_avg_sq = tr->opt.v;
    attn_book_rng_pack(&tr->model_rng, im->rng_words[0]);
    attn_book_rng_pack(&tr->eval_rng, im->rng_words[1]);
    im->rng_model = im->rng_words[0];
    im->rng_eval = im->rng_words[1];
    int64_t *hs = im->hist_step = malloc((nh + 1) * sizeof *hs);
    float *hv = im->hist_vals = malloc((nh + 1) * 3 * sizeof *hv);
    int64_t *es = im->eval_step = malloc((ne + 1) * sizeof *es);
    float *ev = im->eval_vals = malloc((ne + 1) * 2 * sizeof *ev);
    float *ex = im->eval_exact = malloc((ne + 1) * sizeof *ex);
    if (!hs || !hv || !es || !ev || !ex) {
        image_free(im);
        return attn_fail(err, ATTN_ERR_NOMEM, "out of memory writing a checkpoint");
    }
    for (size_t i = 0; i < nh; i++) {
        hs[i] = tr->hist[i].step;
        hv[3 * i] = tr->hist[i].loss;
        hv[3 * i + 1] = tr->hist[i].lr;
        hv[3 * i + 2] = tr->hist[i].grad_norm;
    }
    for (size_t i = 0; i < ne; i++) {
        es[i] = tr->evals[i].step;
        ev[2 * i] = tr->evals[i].train_loss;
        ev[2 * i + 1] = tr->evals[i].val_loss;
        ex[i] = tr->evals[i].val_exact;
        im->any_exact |= !isnan(ex[i]);
    }
    im->n_hist = nh;
    im->n_evals = ne;
    return ATTN_OK;
}

/* ------------------------------------------------------------ saving */

/* The tensors to write: the table's (PER_PARAM: one per parameter). */
typedef struct state_entries {
    attn_st_entry *e;
    char (*names)[ATTN_PARAM_NAME_MAX + 16];
    int64_t shapes[T_COUNT][2];
    int count;
} state_entries;

static attn_status collect_entries(const attn_param_list *params, const size_t *offset,
                                   const state_image *im, state_entries *out, attn_error *err) {
    const int np = params->count;
    size_t n_named = 1;
    for (int r = 0; r < T_COUNT; r++)
        n_named += STATE_TENSORS[r].rows == PER_PARAM ? (size_t)np : 0;
    out->e = calloc(n_named + T_COUNT, sizeof *out->e);
    out->names = calloc(n_named, sizeof *out->names);
    if (!out->e || !out->names)
        return attn_fail(err, ATTN_ERR_NOMEM, "out of memory writing a checkpoint");
    int k = 0, n = 0;
    for (int r = 0; r < T_COUNT; r++) {
        const state_tensor *t = &STATE_TENSORS[r];
        const size_t esz = attn_st_dtype_size(t->dtype);
        const char *data = image_at(im, t);
        for (int i = 0; t->rows == PER_PARAM && i < np; i++) {
            const attn_param *p = &params->items[i];
            snprintf(out->names[n], sizeof out->names[n], "%s.%s", t->name, p->name);
            out->e[k++] = (attn_st_entry){.name = out->names[n++],
                                          .dtype = t->dtype,
                                          .ndim = p->ndim,
                                          .shape = p->shape,
                                          .data = data + offset[i] * esz,
                                          .nbytes = p->numel * esz};
        }
        if (t->rows == PER_PARAM || !written(im, t)) continue;
        const size_t rows = image_rows(im, t, NULL), cols = t->cols ? (size_t)t->cols : 1;
        out->shapes[r][0] = (int64_t)rows;
        out->shapes[r][1] = t->cols;
        out->e[k++] = (attn_st_entry){.name = t->name,
                                      .dtype = t->dtype,
                                      .ndim = t->cols ? 2 : 1,
                                      .shape = out->shapes[r],
                                      .data = data,
                                      .nbytes = rows * cols * esz};
    }
    out->count = k;
    return ATTN_OK;
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

/* The metadata to write, in STATE_META's order (free config after). */
typedef struct state_meta_values {
    char num[M_COUNT][40];
    char *config;
    attn_st_kv kv[M_COUNT];
    int count;
} state_meta_values;

static attn_status meta_values(const attn_trainer *tr, state_meta_values *mv, attn_error *err) {
    if (!(mv->config = full_config_json(tr, err))) return err ? err->code : ATTN_ERR_NOMEM;
    char(*num)[40] = mv->num;
    snprintf(num[M_STEP], sizeof num[0], "%" PRId64, tr->step);
    snprintf(num[M_ADAMW_STEP], sizeof num[0], "%" PRId64, tr->opt.step);
    snprintf(num[M_SAMPLER_EPOCH], sizeof num[0], "%" PRIu64, tr->sampler.epoch);
    snprintf(num[M_SAMPLER_CURSOR], sizeof num[0], "%zu", tr->sampler.cursor);
    snprintf(num[M_CORPUS_BYTES], sizeof num[0], "%zu", tr->text_bytes);
    snprintf(num[M_CORPUS_FNV1A], sizeof num[0], "%016" PRIx64, tr->text_hash);
    snprintf(num[M_ELAPSED_S], sizeof num[0], "%.17g", tr->elapsed_s);
    if (tr->book) {
        snprintf(num[M_BOOK_EPOCH], sizeof num[0], "%" PRId64, tr->book->epoch);
        snprintf(num[M_BOOK_POS], sizeof num[0], "%zu", tr->book->pos);
        snprintf(num[M_BOOK_BASE_SEED], sizeof num[0], "%" PRId64, tr->book->base_seed);
        snprintf(num[M_BOOK_SAMPLER_SEED], sizeof num[0], "%" PRId64, tr->book->sampler_seed);
    }
    const char *value[M_COUNT] = {[M_FORMAT] = STATE_FORMAT,
                                  [M_CONFIG] = mv->config,
                                  [M_CORPUS_PATH] = tr->corpus_path ? tr->corpus_path : ""};
    mv->count = 0;
    for (int i = 0; i < M_COUNT; i++)
        if (meta_applies(tr, i))
            mv->kv[mv->count++] = (attn_st_kv){STATE_META[i].key, value[i] ? value[i] : num[i]};
    return ATTN_OK;
}

/* model.safetensors: the weights, the model's config and tokenizer. */
static attn_status write_model(attn_ckpt_txn *txn, const attn_trainer *tr, attn_error *err) {
    char path[ATTN_CKPT_PATH_MAX], *mjson = NULL, *owned = NULL, step[32];
    snprintf(step, sizeof step, "%" PRId64, tr->step);
    attn_status s = attn_gpt_config_to_json(&tr->mcfg, &mjson, err);
    if (s) return s;
    attn_st_kv meta[3 + ATTN_CKPT_TOKENIZER_META_MAX] = {{"format", "attn-gpt"}, {"config", mjson}};
    int n_tok = 0;
    s = attn_ckpt_tokenizer_meta(&tr->tok, meta + 2, &n_tok, &owned, err);
    meta[2 + n_tok] = (attn_st_kv){"step", step};
    if (!s) s = attn_ckpt_file(txn, ATTN_CKPT_MODEL, path, err);
    if (!s)
        s = attn_safetensors_write_params(path, attn_gpt_params(&tr->model), meta, 3 + n_tok, err);
    free(mjson);
    free(owned);
    return s;
}

/* train_state.safetensors: the moments, generators, history, metadata. */
static attn_status write_state(attn_ckpt_txn *txn, const attn_trainer *tr, attn_error *err) {
    char path[ATTN_CKPT_PATH_MAX];
    state_image im;
    state_entries se = {0};
    state_meta_values mv = {0};
    attn_status s = image_pack(tr, &im, err);
    if (!s) s = collect_entries(attn_gpt_params(&tr->model), tr->opt.offset, &im, &se, err);
    if (!s) s = meta_values(tr, &mv, err);
    if (!s) s = attn_ckpt_file(txn, ATTN_CKPT_STATE, path, err);
    if (!s) s = attn_safetensors_write(path, se.e, se.count, mv.kv, mv.count, err);
    image_free(&im);
    free(se.e);
    free(se.names);
    free(mv.config);
    return s;
}

/* The model file's write on a thread of its own, beside the state's: a
 * plain thread, not an OpenMP team, since a save may run on the run's
 * writer thread, where a team of its own would leave more OpenMP threads
 * than cores and the step's team would sleep between its regions. */
typedef struct model_job {
    attn_ckpt_txn *txn;
    const attn_trainer *tr;
    attn_status s;
    attn_error err;
} model_job;

static void *model_main(void *arg) {
    model_job *j = arg;
    j->s = write_model(j->txn, j->tr, &j->err);
    return NULL;
}

attn_status attn_trainer_save_gated(const attn_trainer *tr, const char *dir,
                                    attn_trainer_save_gate gate, void *user, attn_error *err) {
    if (tr->plan_only)
        return attn_fail(err, ATTN_ERR_STATE, "a dry run's trainer has no weights to save");
    attn_ckpt_txn txn; /* both files commit together (attn/checkpoint.h) */
    txn.tmp[0] = '\0';
    attn_status s = tr->gpu ? attn_trainer_device_sync(tr, err) : ATTN_OK; /* GPU -> host */
    if (!s) s = attn_ckpt_begin(&txn, dir, tr->step, err);
    int abort = 0;
    if (!s) {
        /* The two files at once: a 124M model's 2 GB checkpoint is bound by
         * the kernel's copy into the page cache and the fsync's wait, each
         * one thread's (5.2 s one after the other, 3.6 s together). A gated
         * save writes the model meanwhile and the state once, after the
         * gate: the evaluation's record is in the state alone. */
        model_job mj = {&txn, tr, ATTN_OK, {0}};
        pthread_t t;
        const int both = pthread_create(&t, NULL, model_main, &mj) == 0;
        if (!both) model_main(&mj);
        const attn_trainer *again = gate ? gate(user, &abort) : NULL;
        if (!abort) s = write_state(&txn, again ? again : tr, err);
        if (both) pthread_join(t, NULL);
        if (!s && mj.s) {
            s = mj.s;
            if (err) *err = mj.err;
        }
    }
    if (!s && !abort) s = attn_ckpt_commit(&txn, err);
    attn_ckpt_abort(&txn); /* no-op once committed */
    return s;
}

attn_status attn_trainer_save(const attn_trainer *tr, const char *dir, attn_error *err) {
    return attn_trainer_save_gated(tr, dir, NULL, NULL, err);
}

attn_status attn_trainer_save_best(const attn_trainer *tr, const char *dir, const char *run,
                                   attn_error *err) {
    char src[ATTN_CKPT_PATH_MAX];
    attn_ckpt_txn txn;
    txn.tmp[0] = '\0';
    attn_error ignored;
    int64_t step = -1;
    attn_status s = tr->gpu ? attn_trainer_device_sync(tr, err) : ATTN_OK;
    if (!s) s = attn_ckpt_begin(&txn, dir, tr->step, err);
    if (s) return s;
    /* Only the live checkpoint of this very step is shared; anything else
     * (no link support, a checkpoint of another step) is written anew. */
    const int linked = !attn_ckpt_resolve(run, src, &ignored) && attn_ckpt_exists(run, &step) &&
                       step == tr->step && !attn_ckpt_link(&txn, ATTN_CKPT_MODEL, src, &ignored);
    if (!linked) s = write_model(&txn, tr, err);
    if (!s) s = attn_ckpt_commit(&txn, err);
    attn_ckpt_abort(&txn);
    return s;
}

/* ------------------------------------------------------------ reading */

/* t's tensor name (PER_PARAM: parameter p's) in st when it has t's dtype
 * and numel values; *found says whether the name is there at all. */
static const attn_st_tensor *find_tensor(const attn_safetensors *st, const char *name,
                                         const state_tensor *t, size_t numel, int *found) {
    const attn_st_tensor *x = attn_safetensors_find(st, name);
    if (found) *found = x != NULL;
    return x && !strcmp(x->dtype, t->dtype) && x->numel == numel ? x : NULL;
}

/* The rows of kind rows in st: its IF_ROWS tensors whole (the rows the
 * first has, their dtypes) or none (0 rows); its IF_EXACT ones where they
 * fit. */
static size_t find_rows(const attn_safetensors *st, state_rows rows, const attn_st_tensor **t) {
    size_t n = 0;
    int first = 1;
    for (int r = 0; r < T_COUNT; r++) {
        const state_tensor *d = &STATE_TENSORS[r];
        if (d->rows != rows) continue;
        const size_t cols = d->cols ? (size_t)d->cols : 1;
        const attn_st_tensor *x = attn_safetensors_find(st, d->name);
        if (first && x) n = x->numel / cols;
        first = 0;
        t[r] = find_tensor(st, d->name, d, n * cols, NULL);
        if (!t[r] && d->when == IF_ROWS) {
            for (int q = 0; q < T_COUNT; q++)
                if (STATE_TENSORS[q].rows == rows) t[q] = NULL;
            return 0;
        }
    }
    return n;
}

void train_history_find(const attn_safetensors *st, train_history *h) {
    memset(h, 0, sizeof *h);
    h->n_steps = find_rows(st, HISTORY, h->t);
    h->n_evals = find_rows(st, EVALS, h->t);
}

/* memcpy: safetensors data carries no alignment promise. */
static void col_get(const train_history *h, int r, size_t i, void *dst) {
    const state_tensor *t = &STATE_TENSORS[r];
    const size_t row = attn_st_dtype_size(t->dtype) * (t->cols ? (size_t)t->cols : 1);
    memcpy(dst, (const char *)h->t[r]->data + row * i, row);
}

void train_history_step(const train_history *h, size_t i, attn_train_record *r) {
    float v[3];
    col_get(h, T_HIST_STEP, i, &r->step);
    col_get(h, T_HIST_VALS, i, v);
    r->loss = v[0];
    r->lr = v[1];
    r->grad_norm = v[2];
}

void train_history_eval(const train_history *h, size_t i, attn_eval_record *r) {
    float v[2];
    col_get(h, T_EVAL_STEP, i, &r->step);
    col_get(h, T_EVAL_VALS, i, v);
    r->train_loss = v[0];
    r->val_loss = v[1];
    r->val_exact = NAN;
    if (h->t[T_EVAL_EXACT]) col_get(h, T_EVAL_EXACT, i, &r->val_exact);
}

static attn_status read_state_config(const attn_safetensors *st, const char *path,
                                     attn_gpt_config *mcfg, attn_train_config *tcfg,
                                     attn_error *err) {
    const char *fmt = attn_safetensors_meta(st, STATE_META[M_FORMAT].key);
    const char *cfg = attn_safetensors_meta(st, STATE_META[M_CONFIG].key);
    if (!fmt || strcmp(fmt, STATE_FORMAT) != 0 || !cfg)
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

/* path = the live checkpoint's training state; a checkpoint of the model
 * alone (a run's best/) has none: it is not a run to continue. */
static attn_status state_path(const char *dir, const char *live, char *path, attn_error *err) {
    if (attn_path_join(path, PATH_BUF, live, ATTN_CKPT_STATE))
        return attn_fail(err, ATTN_ERR_IO, "checkpoint directory path is too long");
    if (access(path, F_OK) != 0 && errno == ENOENT)
        return attn_fail(err, ATTN_ERR_INVALID_ARG,
                         "%s holds a model alone, no training state (a run's best/): it cannot be "
                         "resumed; --init-from %s starts a new run from its weights",
                         dir, dir);
    return ATTN_OK;
}

attn_status attn_trainer_read_config(const char *dir, attn_gpt_config *mcfg,
                                     attn_train_config *tcfg, char **corpus_path, attn_error *err) {
    char path[PATH_BUF], live[ATTN_CKPT_PATH_MAX];
    attn_status rs = attn_ckpt_resolve(dir, live, err);
    if (!rs) rs = state_path(dir, live, path, err);
    if (rs) return rs;
    attn_safetensors st; /* the header: configs, shapes and the corpus, not the moments */
    attn_status s = attn_safetensors_read_header(path, &st, err);
    if (s) return s;
    s = read_state_config(&st, path, mcfg, tcfg, err);
    /* The caller allocates a trainer of this config: the optimizer state
     * it saved must have that shape. */
    if (!s) s = attn_ckpt_fit_config(mcfg, &st, "exp_avg.", path, err);
    if (!s && corpus_path) {
        const char *cp = attn_safetensors_meta(&st, STATE_META[M_CORPUS_PATH].key);
        *corpus_path = NULL;
        if (cp && *cp) {
            *corpus_path = malloc(strlen(cp) + 1);
            if (*corpus_path) strcpy(*corpus_path, cp);
        }
    }
    attn_safetensors_free(&st);
    return s;
}

/* ------------------------------------------------------------ resuming */

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

/* The checkpoint's configs (mc, tc) are the run's. Compared as canonical
 * forms so any differing key is caught. */
static attn_status check_config(const attn_trainer *tr, const char *dir, const attn_gpt_config *mc,
                                const attn_train_config *tc, attn_error *err) {
    attn_trainer then_tr = *tr, now_tr = *tr;
    then_tr.mcfg = *mc;
    then_tr.tcfg = *tc;
    /* Only how often to print and save, how long to train and the final
     * evaluation may change on resume; the LR schedule must stay the same, so lr_decay_steps is
     * compared as the horizon it stands for (attn_train_config_extend pins
     * it). */
    attn_train_config *t = &then_tr.tcfg;
    t->log_interval = tr->tcfg.log_interval;
    t->checkpoint_interval = tr->tcfg.checkpoint_interval;
    t->final_eval = tr->tcfg.final_eval; /* how the run ends, not its steps */
    if (!t->lr_decay_steps) t->lr_decay_steps = t->max_steps;
    t->max_steps = tr->tcfg.max_steps;
    if (!now_tr.tcfg.lr_decay_steps) now_tr.tcfg.lr_decay_steps = now_tr.tcfg.max_steps;
    char *then = full_config_json(&then_tr, err), *now = full_config_json(&now_tr, err);
    attn_status s = ATTN_OK;
    if (!then || !now) {
        s = attn_fail(err, ATTN_ERR_NOMEM, "out of memory comparing configs");
    } else if (strcmp(then, now) != 0) {
        char what[256];
        config_diff(then, now, what, sizeof what);
        s = attn_fail(err, ATTN_ERR_INVALID_ARG, "cannot resume %s with a different config: %s",
                      dir, what);
    }
    free(now);
    free(then);
    return s;
}

/* The integer metadata (STATE_META's with a max, in its order) into v, and
 * the run's step and corpus checked against them. */
static attn_status check_meta(const attn_trainer *tr, const attn_safetensors *st, const char *path,
                              const char *dir, uint64_t *v, attn_error *err) {
    for (int i = 0; i < M_COUNT; i++) {
        attn_status s = STATE_META[i].max && meta_applies(tr, i)
                            ? attn_safetensors_meta_u64(st, path, STATE_META[i].key,
                                                        STATE_META[i].max, &v[i], err)
                            : ATTN_OK;
        if (s) return s;
    }
    const char *hash = attn_safetensors_meta(st, STATE_META[M_CORPUS_FNV1A].key);
    if (!hash)
        return attn_fail(err, ATTN_ERR_FORMAT, "%s: metadata '%s' is missing", path,
                         STATE_META[M_CORPUS_FNV1A].key);
    if ((int64_t)v[M_STEP] > tr->tcfg.max_steps)
        return attn_fail(err, ATTN_ERR_INVALID_ARG,
                         "cannot resume %s: it is at step %" PRIu64 ", beyond max_steps %" PRId64,
                         dir, v[M_STEP], tr->tcfg.max_steps);
    char hash_now[32];
    snprintf(hash_now, sizeof hash_now, "%016" PRIx64, tr->text_hash);
    if (v[M_CORPUS_BYTES] != tr->text_bytes || strcmp(hash, hash_now) != 0)
        return attn_fail(err, ATTN_ERR_INVALID_ARG,
                         "cannot resume %s: it was trained on a different corpus (%" PRIu64
                         " bytes, now %zu)",
                         dir, v[M_CORPUS_BYTES], tr->text_bytes);
    return ATTN_OK;
}

/* The weights from the model file of the same step (both files finite). */
static attn_status read_weights(attn_trainer *tr, const attn_safetensors *st, const char *path,
                                const char *mpath, uint64_t step, attn_error *err) {
    attn_safetensors ms;
    attn_status s = attn_safetensors_read(mpath, &ms, err);
    if (s) return s;
    uint64_t mstep;
    if (!(s = attn_safetensors_meta_u64(&ms, mpath, "step", INT64_MAX, &mstep, err)) &&
        mstep != step)
        s = attn_fail(err, ATTN_ERR_FORMAT, "%s and %s are from different steps", mpath, path);
    if (!s) s = attn_ckpt_check_finite(&ms, "", mpath, err);
    if (!s) s = attn_ckpt_check_finite(st, "exp_avg", path, err);
    if (!s) s = attn_safetensors_to_params(&ms, mpath, attn_gpt_params(&tr->model), err);
    attn_safetensors_free(&ms);
    return s;
}

/* One ALWAYS tensor (PER_PARAM: parameter i's) into the image. */
static attn_status read_tensor(const attn_safetensors *st, const char *path, const state_tensor *t,
                               const attn_param *p, size_t at, state_image *im, attn_error *err) {
    char name[ATTN_PARAM_NAME_MAX + 16];
    snprintf(name, sizeof name, p ? "%s.%s" : "%s", t->name, p ? p->name : "");
    const size_t numel = image_rows(im, t, p) * (t->cols ? (size_t)t->cols : 1);
    int found;
    const attn_st_tensor *x = find_tensor(st, name, t, numel, &found);
    if (!x && t->rows == GENERATOR)
        return attn_fail(err, ATTN_ERR_FORMAT, "%s: generator state '%s' missing or bad", path,
                         name);
    if (!found) return attn_fail(err, ATTN_ERR_NOT_FOUND, "%s: tensor '%s' is missing", path, name);
    if (!x)
        return attn_fail(err, ATTN_ERR_SHAPE, "%s: tensor '%s' should be %s with %zu values", path,
                         name, t->dtype, numel);
    const size_t esz = attn_st_dtype_size(t->dtype);
    memcpy((char *)image_at(im, t) + at * esz, x->data, numel * esz);
    return ATTN_OK;
}

/* The ALWAYS tensors: the moments straight into the optimizer, parameter
 * by parameter; the generators unpacked. */
static attn_status read_tensors(attn_trainer *tr, const attn_safetensors *st, const char *path,
                                attn_error *err) {
    state_image im = {.exp_avg = tr->opt.m, .exp_avg_sq = tr->opt.v};
    im.rng_model = im.rng_words[0];
    im.rng_eval = im.rng_words[1];
    const attn_param_list *params = attn_gpt_params(&tr->model);
    attn_status s = ATTN_OK;
    for (int i = 0; i < params->count && !s; i++)
        for (int r = 0; r < T_COUNT && !s; r++)
            if (STATE_TENSORS[r].rows == PER_PARAM)
                s = read_tensor(st, path, &STATE_TENSORS[r], &params->items[i], tr->opt.offset[i],
                                &im, err);
    for (int r = 0; r < T_COUNT && !s; r++)
        if (STATE_TENSORS[r].when == ALWAYS && STATE_TENSORS[r].rows != PER_PARAM)
            s = read_tensor(st, path, &STATE_TENSORS[r], NULL, 0, &im, err);
    if (s) return s;
    attn_rng *rng[2] = {&tr->model_rng, &tr->eval_rng};
    for (int i = 0; i < 2; i++)
        if (attn_book_rng_unpack(rng[i], im.rng_words[i]))
            return attn_fail(err, ATTN_ERR_FORMAT, "%s: generator state '%s' is corrupt", path,
                             STATE_TENSORS[T_RNG_MODEL + i].name);
    return ATTN_OK;
}

/* The loss history (absent when the run stopped before its first step). */
static attn_status read_history(attn_trainer *tr, const attn_safetensors *st, attn_error *err) {
    train_history h;
    train_history_find(st, &h);
    tr->n_hist = 0;
    attn_status s = ATTN_OK;
    for (size_t i = 0; i < h.n_steps && !s; i++) {
        attn_train_record r;
        train_history_step(&h, i, &r);
        s = train_history_push(tr, &r, err);
    }
    tr->n_evals = 0;
    for (size_t i = 0; i < h.n_evals && !s; i++) {
        attn_eval_record r;
        train_history_eval(&h, i, &r);
        s = train_history_push_eval(tr, &r, err);
    }
    return s;
}

/* time_budget's clock (absent in older checkpoints: 0). */
static attn_status read_elapsed(attn_trainer *tr, const attn_safetensors *st, const char *path,
                                attn_error *err) {
    const char *key = STATE_META[M_ELAPSED_S].key, *el = attn_safetensors_meta(st, key);
    tr->elapsed_s = 0;
    if (!el) return ATTN_OK;
    char *end = NULL;
    const double v = strtod(el, &end);
    if (end == el || *end || !isfinite(v) || v < 0)
        return attn_fail(err, ATTN_ERR_FORMAT, "%s: metadata '%s' is not a time ('%s')", path, key,
                         el);
    tr->elapsed_s = v;
    return ATTN_OK;
}

/* The book's loader where the run left it: the epoch's order again from
 * its sampler seed. */
static attn_status restore_book(attn_book_order *o, const uint64_t *meta, const char *path,
                                attn_error *err) {
    if (meta[M_BOOK_POS] > o->batches || (meta[M_BOOK_EPOCH] == 0 && meta[M_BOOK_POS] != 0))
        return attn_fail(err, ATTN_ERR_FORMAT, "%s: %s %" PRIu64 " is outside its epoch of %zu",
                         path, STATE_META[M_BOOK_POS].key, meta[M_BOOK_POS], o->batches);
    o->epoch = (int64_t)meta[M_BOOK_EPOCH];
    o->pos = (size_t)meta[M_BOOK_POS];
    o->base_seed = (int64_t)meta[M_BOOK_BASE_SEED];
    o->sampler_seed = (int64_t)meta[M_BOOK_SAMPLER_SEED];
    if (o->epoch > 0) attn_randperm((uint64_t)o->sampler_seed, o->perm, o->windows);
    return ATTN_OK;
}

attn_status attn_trainer_resume(attn_trainer *tr, const char *dir, attn_error *err) {
    char path[PATH_BUF], mpath[PATH_BUF], live[ATTN_CKPT_PATH_MAX];
    /* Both files from the one live checkpoint, whatever a writer does next. */
    attn_status s = attn_ckpt_resolve(dir, live, err);
    if (!s) s = state_path(dir, live, path, err);
    if (s) return s;
    if (attn_path_join(mpath, PATH_BUF, live, ATTN_CKPT_MODEL))
        return attn_fail(err, ATTN_ERR_IO, "checkpoint directory path is too long");
    attn_safetensors st; /* planning: the header's checks, nothing read into the model */
    const int plan = tr->plan_only;
    if ((s = plan ? attn_safetensors_read_header(path, &st, err)
                  : attn_safetensors_read(path, &st, err)))
        return s;
    attn_gpt_config mc;
    attn_train_config tc;
    uint64_t meta[M_COUNT] = {0};
    if (!s) s = read_state_config(&st, path, &mc, &tc, err);
    if (!s) s = check_config(tr, dir, &mc, &tc, err);
    if (!s) s = check_meta(tr, &st, path, dir, meta, err);
    if (!s && !plan) s = read_weights(tr, &st, path, mpath, meta[M_STEP], err);
    if (!s && !plan) s = read_tensors(tr, &st, path, err);
    if (!s)
        s = attn_sampler_restore(&tr->sampler, meta[M_SAMPLER_EPOCH],
                                 (size_t)meta[M_SAMPLER_CURSOR], err);
    if (!s && !plan) s = read_history(tr, &st, err);
    if (!s && tr->book) s = restore_book(tr->book, meta, path, err);
    if (!s) {
        tr->opt.step = (int64_t)meta[M_ADAMW_STEP];
        tr->step = (int64_t)meta[M_STEP];
        s = read_elapsed(tr, &st, path, err);
    }
    attn_safetensors_free(&st);
    return s;
}

/* ------------------------------------------------------------ fine-tuning */

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
    attn_gpt src = {0};
    attn_gpt_config cfg;
    attn_tokenizer tok;
    /* Planning reads an attn checkpoint's header only; other programs'
     * GPT-2 files are read whole (their shapes are their tensors'). */
    attn_weights_format fmt;
    attn_status s = attn_weights_detect(dir, &fmt, err);
    const int header = tr->plan_only && fmt == ATTN_WEIGHTS_ATTN;
    if (!s)
        s = header ? attn_gpt_checkpoint_config(dir, &cfg, &tok, NULL, err)
                   : attn_gpt_open(dir, NULL, &src, &tok, NULL, NULL, err);
    if (s) return s;
    const attn_gpt_config *a = header ? &cfg : &src.cfg, *b = &tr->mcfg;
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
    } else if (!attn_tokenizer_same(&tok, &tr->tok)) {
        s = attn_fail(err, ATTN_ERR_INVALID_ARG,
                      "%s: its tokenizer (%s) differs from this trainer's (%s): the token ids "
                      "would not match (start the trainer with the checkpoint's tokenizer)",
                      dir, attn_tokenizer_kind_name(tok.kind),
                      attn_tokenizer_kind_name(tr->tok.kind));
    } else if (!tr->plan_only) {
        const attn_param_list *from = attn_gpt_params(&src), *to = attn_gpt_params(&tr->model);
        for (int i = 0; i < to->count; i++)
            memcpy(to->items[i].data, from->items[i].data, to->items[i].numel * sizeof(float));
    }
    attn_gpt_free(&src);
    attn_tokenizer_free(&tok);
    return s;
}
