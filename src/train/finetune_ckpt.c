/* A fine-tuned model written (attn_finetuned_write) and a fine-tuning run's
 * checkpoints (attn/finetune.h's attn_finetune_ckpt), with the history of
 * what the run reported (ft_report):
 * attn/checkpoint.h's ckpt-<step> folders and latest link, the model as
 * attn_finetuned_write writes it, the loop's state in a training-state file
 * of its own layout (below). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn/checkpoint.h"
#include "attn/fileio.h"
#include "attn/safetensors.h"
#include "finetune_loop.h"
#include "train_book.h"

/* train_state.safetensors of a fine-tuning run: tensors exp_avg and
 * exp_avg_sq (F32, AdamW's moments), rng (U32, the generator), perm (U64,
 * the epoch's order), history (F64, FT_H_COLS a report), samples (U8, the
 * instruct samples' lines, each ended by '\n'; only when there are any:
 * older checkpoints have none and replay none); metadata format, step,
 * task, data (the digest), settings and the loop's integers. */
#define FT_STATE_FORMAT "attn-train-state"
#define META_MAX (8 + ATTN_CKPT_TOKENIZER_META_MAX)

/* ------------------------------------------------------------ the model */

attn_status attn_classifier_save(const char *dir, const attn_gpt *m, const attn_tokenizer *tok,
                                 const attn_classifier_info *info, attn_error *err) {
    char path[ATTN_CKPT_PATH_MAX];
    if (attn_path_join(path, sizeof path, dir, ATTN_CKPT_MODEL))
        return attn_fail(err, ATTN_ERR_IO, "the run folder's path is too long");
    return attn_finetuned_write(path, m, tok, info, err);
}

attn_status attn_finetuned_write(const char *path, const attn_gpt *m, const attn_tokenizer *tok,
                                 const attn_classifier_info *info, attn_error *err) {
    char classes[16], max_len[16], rank[16], alpha[32];
    char *cfg = NULL, *owned = NULL;
    attn_status s = attn_gpt_check_fp32(m, "writing the model", err);
    if (!s) s = attn_gpt_config_to_json(&m->cfg, &cfg, err);
    if (s) return s;
    snprintf(classes, sizeof classes, "%d", info->n_classes);
    snprintf(max_len, sizeof max_len, "%d", info->max_len);
    snprintf(rank, sizeof rank, "%d", info->lora_rank);
    snprintf(alpha, sizeof alpha, "%.9g", (double)info->lora_alpha);
    attn_st_kv kv[META_MAX] = {
        {"format", "attn-gpt"}, {"task", info->task ? info->task : "classify"},
        {"config", cfg},        {"n_classes", classes},
        {"max_len", max_len},   {"lora_rank", rank},
        {"lora_alpha", alpha},  {"trainable", NULL}};
    int n = 7, nt = 0;
    if (info->trainable) kv[n++].value = info->trainable;
    s = attn_ckpt_tokenizer_meta(tok, kv + n, &nt, &owned, err);
    if (!s) s = attn_safetensors_write_params(path, attn_gpt_params(m), kv, n + nt, err);
    free(cfg);
    free(owned);
    return s;
}

/* ------------------------------------------------------------ the run */

_Static_assert(sizeof(size_t) == sizeof(uint64_t), "perm is written as U64");

attn_status ft_report(ft_run *r, int kind, int epoch, int64_t step, double a, double b,
                      attn_error *err) {
    if (r->n_hist == r->cap_hist) { /* once per evaluation, not per step */
        const size_t cap = r->cap_hist ? 2 * r->cap_hist : 64;
        double *h = realloc(r->hist, cap * FT_H_COLS * sizeof *h);
        if (!h) return attn_fail(err, ATTN_ERR_NOMEM, "out of memory for the run's history");
        r->hist = h;
        r->cap_hist = cap;
    }
    double *rec = r->hist + r->n_hist++ * FT_H_COLS;
    rec[0] = kind;
    rec[1] = epoch;
    rec[2] = (double)step;
    rec[3] = a;
    rec[4] = b;
    const attn_classify_events *ev = r->ev;
    if (!ev) return ATTN_OK;
    if (kind == FT_H_INITIAL && ev->on_initial) ev->on_initial(ev->user, a, b);
    if (kind == FT_H_EVAL && ev->on_eval) ev->on_eval(ev->user, epoch, step, a, b);
    if (kind == FT_H_EPOCH && ev->on_epoch) ev->on_epoch(ev->user, epoch, a, b);
    return ATTN_OK;
}

attn_status ft_report_sample(ft_run *r, int epoch, int64_t step, const char *line,
                             attn_error *err) {
    const size_t off = r->samples.len, len = strlen(line);
    attn_text_putn(&r->samples, line, len);
    attn_text_putn(&r->samples, "\n", 1);
    if (r->samples.oom) return attn_fail(err, ATTN_ERR_NOMEM, "out of memory for the samples");
    /* kept before the event, as ft_report keeps the others */
    attn_status s = ft_report(r, FT_H_SAMPLE, epoch, step, (double)off, (double)len, err);
    const attn_classify_events *ev = r->ev;
    if (!s && ev && ev->on_sample_line) ev->on_sample_line(ev->user, epoch, line);
    return s;
}

/* Everything a resume must find the same but the data: "key=value ...". */
static void settings_text(const ft_run *r, char *buf, size_t cap) {
    const attn_classify_config *c = r->c;
    snprintf(buf, cap,
             "batch_size=%d epochs=%d eval_freq=%d eval_iter=%d lr=%.17g weight_decay=%.17g "
             "beta1=%.17g beta2=%.17g eps=%.17g seed=%" PRIu64 " trainable=%d lora_rank=%d "
             "lora_alpha=%.9g mask_prompt=%d precision=%d",
             c->batch_size, c->epochs, c->eval_freq, c->eval_iter, c->lr, c->weight_decay, c->beta1,
             c->beta2, c->eps, c->seed, c->lora_rank ? 3 : (int)c->trainable, c->lora_rank,
             (double)c->lora_alpha, c->mask_prompt, (int)r->m->precision);
}

/* The loop's integers, in this order, as metadata. */
static const char *const int_keys[] = {"step",         "epoch",      "pos",      "seen",
                                       "sampler_seed", "epoch_done", "finished", "adam_step"};
enum { N_INTS = 8 };

static void state_ints(const ft_run *r, int64_t v[N_INTS]) {
    const ft_state *st = &r->st;
    const int64_t w[N_INTS] = {st->step,         st->epoch,      (int64_t)st->pos, st->seen,
                               st->sampler_seed, st->epoch_done, st->finished,     r->opt.step};
    memcpy(v, w, sizeof w);
}

static attn_status write_state(const ft_run *r, const char *path, attn_error *err) {
    char settings[512], digest[24], nums[N_INTS][24];
    settings_text(r, settings, sizeof settings);
    snprintf(digest, sizeof digest, "%016" PRIx64, r->data_digest);
    attn_st_kv kv[4 + N_INTS] = {
        {"format", FT_STATE_FORMAT}, {"task", r->task}, {"data", digest}, {"settings", settings}};
    int64_t v[N_INTS];
    state_ints(r, v);
    for (int i = 0; i < N_INTS; i++) {
        /* the sampler seed is a torch int64: kept as its bits */
        snprintf(nums[i], sizeof nums[i], "%" PRIu64, (uint64_t)v[i]);
        kv[4 + i] = (attn_st_kv){int_keys[i], nums[i]};
    }
    uint32_t words[ATTN_BOOK_RNG_WORDS];
    attn_book_rng_pack(&r->rng, words);
    const int64_t total = (int64_t)r->opt.total, rw = ATTN_BOOK_RNG_WORDS,
                  n = (int64_t)r->t->n[FT_TRAIN], hs[2] = {(int64_t)r->n_hist, FT_H_COLS},
                  ns = (int64_t)r->samples.len;
    attn_st_entry e[6] = {
        {"rng", "U32", 1, &rw, words, sizeof words},
        {"perm", "U64", 1, &n, r->perm, (size_t)n * sizeof(uint64_t)},
        {"history", "F64", 2, hs, r->hist, r->n_hist * FT_H_COLS * sizeof(double)},
        {"exp_avg", "F32", 1, &total, r->opt.m, r->opt.total * sizeof(float)},
        {"exp_avg_sq", "F32", 1, &total, r->opt.v, r->opt.total * sizeof(float)},
        {"samples", "U8", 1, &ns, r->samples.s, r->samples.len}};
    /* no samples, no tensor: a classify run's state as it was */
    return attn_safetensors_write(path, e, ns ? 6 : 5, kv, 4 + N_INTS, err);
}

attn_status ft_save(ft_run *r, attn_error *err) {
    const attn_finetune_ckpt *ck = r->c->ckpt;
    if (!ck) return ATTN_OK;
    attn_ckpt_txn t;
    char path[ATTN_CKPT_PATH_MAX];
    attn_status s = attn_ckpt_begin(&t, ck->dir, r->st.step, err);
    if (s) return s;
    if (!(s = attn_ckpt_file(&t, ATTN_CKPT_MODEL, path, err)))
        s = attn_finetuned_write(path, r->m, ck->tok, ck->info, err);
    if (!s && !(s = attn_ckpt_file(&t, ATTN_CKPT_STATE, path, err))) s = write_state(r, path, err);
    if (s) {
        attn_ckpt_abort(&t);
        return s;
    }
    return attn_ckpt_commit(&t, err);
}

/* ------------------------------------------------------------ resuming */

/* The first item of want ("key=value", in settings_text's order) that
 * differs from have's, both values, into out. */
static void first_diff(const char *have, const char *want, char *out, size_t cap) {
    while (*have && *want) {
        const size_t kh = strcspn(have, " "), kw = strcspn(want, " ");
        if (kh != kw || memcmp(have, want, kw) != 0) {
            snprintf(out, cap, "%.*s, the run's %.*s", (int)(kw < 100 ? kw : 100), want,
                     (int)(kh < 100 ? kh : 100), have);
            return;
        }
        have += kh + (have[kh] == ' ');
        want += kw + (want[kw] == ' ');
    }
    snprintf(out, cap, "%.200s", want);
}

/* The checkpoint is this run's: its task, data and settings. */
static attn_status check_identity(const ft_run *r, const attn_safetensors *st, const char *dir,
                                  attn_error *err) {
    const char *fmt = attn_safetensors_meta(st, "format"),
               *task = attn_safetensors_meta(st, "task");
    const char *data = attn_safetensors_meta(st, "data"),
               *set = attn_safetensors_meta(st, "settings");
    if (!fmt || strcmp(fmt, FT_STATE_FORMAT) != 0 || !task || !data || !set)
        return attn_fail(err, ATTN_ERR_INVALID_ARG,
                         "%s holds no fine-tuning run's checkpoint (attn train --task lm's "
                         "runs resume with --task lm)",
                         dir);
    if (strcmp(task, r->task) != 0)
        return attn_fail(err, ATTN_ERR_INVALID_ARG,
                         "%s is a --task %s run: --resume continues it with the command that "
                         "started it, not --task %s",
                         dir, task, r->task);
    char digest[24], settings[512], diff[256];
    snprintf(digest, sizeof digest, "%016" PRIx64, r->data_digest);
    if (strcmp(data, digest) != 0)
        return attn_fail(err, ATTN_ERR_INVALID_ARG,
                         "%s was trained on other data: --resume continues it with the --data "
                         "(and --val, --limit) that started it",
                         dir);
    settings_text(r, settings, sizeof settings);
    if (strcmp(set, settings) == 0) return ATTN_OK;
    first_diff(set, settings, diff, sizeof diff);
    return attn_fail(err, ATTN_ERR_INVALID_ARG,
                     "%s was started with other settings: %s; --resume continues it with the "
                     "command that started it",
                     dir, diff);
}

/* A tensor of dtype and numel (rows of cols when cols > 0). */
static const attn_st_tensor *tensor(const attn_safetensors *st, const char *path, const char *name,
                                    const char *dtype, size_t numel, int cols, attn_error *err) {
    const attn_st_tensor *t = attn_safetensors_find(st, name);
    const int ok = t && strcmp(t->dtype, dtype) == 0 &&
                   (cols ? t->ndim == 2 && t->shape[1] == cols : t->numel == numel);
    if (!ok) attn_fail(err, ATTN_ERR_FORMAT, "%s: no %s tensor of the run's shape", path, name);
    return ok ? t : NULL;
}

/* The loop's integers of the file into st and *adam_step. */
static attn_status read_ints(const attn_safetensors *f, const char *path, ft_state *st,
                             int64_t *adam_step, attn_error *err) {
    uint64_t v[N_INTS];
    for (int i = 0; i < N_INTS; i++) {
        attn_status s = attn_safetensors_meta_u64(f, path, int_keys[i], UINT64_MAX, &v[i], err);
        if (s) return s;
    }
    st->step = (int64_t)v[0];
    st->epoch = (int)v[1];
    st->pos = (size_t)v[2];
    st->seen = (int64_t)v[3];
    st->sampler_seed = (int64_t)v[4];
    st->epoch_done = (int)v[5];
    st->finished = (int)v[6];
    *adam_step = (int64_t)v[7];
    return ATTN_OK;
}

/* Sample record q's line in text (nt bytes, its lines' '\n' made NULs
 * by the caller's copy), or NULL when q points outside a line. */
static const char *sample_at(const double *q, const char *text, size_t nt) {
    const double off = q[3], len = q[4];
    if (!(off >= 0 && len >= 0 && off + len < (double)nt)) return NULL;
    const size_t o = (size_t)off, l = (size_t)len;
    return o == off && l == len && text[o + l] == '\0' && !memchr(text + o, '\0', l) ? text + o
                                                                                     : NULL;
}

/* Report the history again (kept anew; the samples' lines from text, nt
 * bytes) and the result as it stood. */
static attn_status replay(ft_run *r, const double *h, size_t n, const char *text, size_t nt,
                          const char *path, attn_error *err) {
    attn_classify_result *res = r->res;
    attn_status s = ATTN_OK;
    for (size_t i = 0; !s && i < n; i++) {
        const double *q = h + i * FT_H_COLS;
        const int kind = (int)q[0];
        if (kind == FT_H_EPOCH) res->train_acc = q[3], res->val_acc = q[4];
        if (kind == FT_H_FINAL) res->final_train_acc = q[3], res->final_val_acc = q[4];
        if (kind != FT_H_SAMPLE) {
            s = ft_report(r, kind, (int)q[1], (int64_t)q[2], q[3], q[4], err);
            continue;
        }
        const char *line = sample_at(q, text, nt);
        s = line ? ft_report_sample(r, (int)q[1], (int64_t)q[2], line, err)
                 : attn_fail(err, ATTN_ERR_FORMAT, "%s: a sample outside its samples", path);
    }
    res->steps = r->st.step;
    res->examples_seen = r->st.seen;
    res->resumed_step = r->st.step;
    res->resumed_epoch = r->st.epoch;
    res->finished = r->st.finished;
    return s;
}

/* The samples tensor's lines, '\n' made NUL, malloc'd into *text (nt
 * bytes; none: an empty text, an older checkpoint's). */
static attn_status sample_text(const attn_safetensors *f, const char *path, char **text, size_t *nt,
                               attn_error *err) {
    const attn_st_tensor *t = attn_safetensors_find(f, "samples");
    *nt = t ? t->numel : 0;
    if (t && (strcmp(t->dtype, "U8") != 0 || t->ndim != 1))
        return attn_fail(err, ATTN_ERR_FORMAT, "%s: samples is not a U8 vector", path);
    if (!(*text = malloc(*nt + 1))) return attn_fail(err, ATTN_ERR_NOMEM, "out of memory");
    if (t) memcpy(*text, t->data, *nt);
    for (size_t i = 0; i < *nt; i++)
        (*text)[i] = (*text)[i] == '\n' ? '\0' : (*text)[i];
    return ATTN_OK;
}

/* AdamW's moments of the trainable tensors from the file's m, v: a frozen
 * one's are zeros there and stay untouched here (the memory plan counts
 * the trainable ones' alone, attn_mem_run_of_model). */
static void restore_moments(ft_run *r, const void *m, const void *v) {
    const attn_param_list *L = attn_gpt_params(r->m);
    for (int i = 0; i < L->count; i++) {
        if (!L->items[i].trainable) continue;
        const size_t at = r->opt.offset[i], bytes = L->items[i].numel * sizeof(float);
        memcpy(r->opt.m + at, (const char *)m + at * sizeof(float), bytes);
        memcpy(r->opt.v + at, (const char *)v + at * sizeof(float), bytes);
    }
}

/* The state file's tensors into r, after the model's weights. */
static attn_status restore(ft_run *r, const attn_safetensors *f, const char *path, const char *live,
                           attn_error *err) {
    const attn_st_tensor *tm, *tv, *tr, *tp, *th;
    const size_t n = r->t->n[FT_TRAIN];
    if (!(tm = tensor(f, path, "exp_avg", "F32", r->opt.total, 0, err)) ||
        !(tv = tensor(f, path, "exp_avg_sq", "F32", r->opt.total, 0, err)) ||
        !(tr = tensor(f, path, "rng", "U32", ATTN_BOOK_RNG_WORDS, 0, err)) ||
        !(tp = tensor(f, path, "perm", "U64", n, 0, err)) ||
        !(th = tensor(f, path, "history", "F64", 0, FT_H_COLS, err)))
        return err->code;
    uint32_t words[ATTN_BOOK_RNG_WORDS];
    memcpy(words, tr->data, sizeof words);
    size_t *perm = malloc((n ? n : 1) * sizeof *perm);
    double *hist = malloc((th->numel ? th->numel : 1) * sizeof *hist);
    attn_status s = perm && hist ? ATTN_OK : attn_fail(err, ATTN_ERR_NOMEM, "out of memory");
    if (!s) {
        memcpy(perm, tp->data, n * sizeof *perm);
        memcpy(hist, th->data, th->numel * sizeof *hist);
    }
    for (size_t i = 0; !s && i < n; i++)
        if (perm[i] >= n) s = attn_fail(err, ATTN_ERR_FORMAT, "%s: a bad order", path);
    if (!s && attn_book_rng_unpack(&r->rng, words))
        s = attn_fail(err, ATTN_ERR_FORMAT, "%s: a bad generator", path);
    char model[ATTN_CKPT_PATH_MAX];
    if (!s && attn_path_join(model, sizeof model, live, ATTN_CKPT_MODEL))
        s = attn_fail(err, ATTN_ERR_IO, "%s: the path is too long", live);
    char *text = NULL;
    size_t nt = 0;
    if (!s) s = sample_text(f, path, &text, &nt, err);
    if (!s) s = attn_safetensors_load_params(model, attn_gpt_params(r->m), err);
    if (!s) {
        restore_moments(r, tm->data, tv->data);
        memcpy(r->perm, perm, n * sizeof *perm);
        s = replay(r, hist, (size_t)th->shape[0], text, nt, path, err);
    }
    free(text);
    free(perm);
    free(hist);
    return s;
}

attn_status ft_resume(ft_run *r, attn_error *err) {
    const attn_finetune_ckpt *ck = r->c->ckpt;
    r->res->resumed_step = -1;
    if (!ck || !ck->resume) return ATTN_OK;
    char live[ATTN_CKPT_PATH_MAX], path[ATTN_CKPT_PATH_MAX];
    attn_status s = attn_ckpt_resolve(ck->dir, live, err);
    if (s) return s;
    if (attn_path_join(path, sizeof path, live, ATTN_CKPT_STATE))
        return attn_fail(err, ATTN_ERR_IO, "%s: the path is too long", live);
    attn_safetensors f;
    if ((s = attn_safetensors_read(path, &f, err))) return s;
    ft_state st;
    int64_t adam_step = 0;
    s = check_identity(r, &f, ck->dir, err);
    if (!s) s = read_ints(&f, path, &st, &adam_step, err);
    if (!s && (st.epoch > r->c->epochs || st.pos > r->t->n[FT_TRAIN] / (size_t)r->B))
        s = attn_fail(err, ATTN_ERR_FORMAT, "%s: epoch %d, batch %zu lie outside the run", path,
                      st.epoch, st.pos);
    if (!s && !ck->check_only) {
        r->st = st;
        r->opt.step = adam_step;
        s = restore(r, &f, path, live, err);
    }
    attn_safetensors_free(&f);
    return s;
}
