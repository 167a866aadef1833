/* The trainer: init and one step (see attn/train.h); evaluations in
 * train_eval.c, checkpoints in train_checkpoint.c, configs in
 * train_config.c, the loop in train_loop.c, the loss report in
 * train_report.c. */
#define _POSIX_C_SOURCE 200809L /* sigaction, clock_gettime, mkdtemp */

#include "attn/train.h"
#include "trainer.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn/fileio.h"
#include "train_accum.h"
#include "train_book.h"
#include "train_device.h"
#include "train_history.h"
#include "train_writer.h"

/* ------------------------------------------------------------ trainer */

void attn_trainer_release(attn_trainer *tr) {
    train_writer_close(tr, NULL); /* a run's, if it is still open */
    attn_cuda_gpt_free(tr->gpu);
    attn_tokenizer_free(&tr->tok);
    free(tr->ids);
    attn_token_file_close(&tr->tok_train);
    attn_token_file_close(&tr->tok_val);
    attn_sampler_free(&tr->sampler);
    attn_gpt_acts_free(&tr->acts);
    attn_gpt_free(&tr->model);
    attn_adamw_free(&tr->opt);
    free(tr->xb);
    free(tr->yb);
    free(tr->hist);
    free(tr->evals);
    attn_train_accum_free(tr);
    if (tr->book) attn_book_order_free(tr->book);
    free(tr->book);
    memset(tr, 0, sizeof *tr);
}

/* The run's tokenizer: given (a checkpoint's), vocab's characters, GPT-2's
 * files, or the corpus's characters. */
static attn_status init_tokenizer(attn_trainer *tr, const attn_tokenizer *given, const char *vocab,
                                  const char *text, size_t n, attn_error *err) {
    const attn_tokenizer_kind want = tr->tcfg.tokenizer;
    if (given) {
        if (given->kind != want)
            return attn_fail(err, ATTN_ERR_INVALID_ARG,
                             "the checkpoint's tokenizer is %s but the config says tokenizer %s",
                             attn_tokenizer_kind_name(given->kind), attn_tokenizer_kind_name(want));
        return attn_tokenizer_copy(&tr->tok, given, err);
    }
    if (want == ATTN_TOKENIZER_GPT2) {
        if (vocab)
            return attn_fail(err, ATTN_ERR_INVALID_ARG,
                             "a character vocabulary was given but the config says tokenizer gpt2");
        return attn_tokenizer_gpt2(&tr->tok, NULL, err);
    }
    if (vocab) return attn_tokenizer_from_vocab(&tr->tok, vocab, strlen(vocab), err);
    return attn_tokenizer_train(&tr->tok, text, n, err);
}

/* After the splits: the generators, model, workspace and optimizer (a
 * planning trainer stops before the model). On failure the caller
 * releases tr. */
static attn_status trainer_setup(attn_trainer *tr, int plan_only, attn_error *err) {
    const attn_train_config *tcfg = &tr->tcfg;
    const int T = tr->mcfg.context_length;
    attn_status st;
    /* GPT-2 runs may be large: their order is computed, not stored. */
    const size_t windows = attn_dataset_len(&tr->train);
    if ((st = tr->tok.kind == ATTN_TOKENIZER_GPT2
                  ? attn_sampler_init_computed(&tr->sampler, windows, tcfg->seed + 1, err)
                  : attn_sampler_init(&tr->sampler, windows, tcfg->seed + 1, err)))
        return st;
    attn_rng_seed(&tr->model_rng, tcfg->seed);
    attn_rng_seed(&tr->eval_rng, tcfg->seed + 2);
    if ((tr->plan_only = plan_only)) return ATTN_OK;
    if ((st = attn_gpt_init(&tr->model, &tr->mcfg, &tr->model_rng, err))) return st;
    /* At a large vocabulary the output layer runs fused (no B x T x V
     * logits); the char models keep the plain path and its bits. */
    if ((st = tr->mcfg.vocab_size >= ATTN_TRAIN_LEAN_VOCAB
                  ? attn_gpt_acts_init_lean(&tr->acts, &tr->model, tcfg->batch_size, T, err)
                  : attn_gpt_acts_init(&tr->acts, &tr->model, tcfg->batch_size, T, err)))
        return st;
    attn_adamw_config ac = {tcfg->beta1, tcfg->beta2, tcfg->eps, tcfg->weight_decay};
    if ((st = attn_adamw_init(&tr->opt, attn_gpt_params(&tr->model), &ac, err))) return st;
    size_t bt = (size_t)tcfg->batch_size * (size_t)T;
    tr->xb = malloc(bt * sizeof *tr->xb);
    tr->yb = malloc(bt * sizeof *tr->yb);
    if (!tr->xb || !tr->yb) return attn_fail(err, ATTN_ERR_NOMEM, "out of memory for batches");
    return attn_train_accum_setup(tr, err);
}

/* loader "book" on the trainer's own corpus: its train and val token splits
 * (a caller with other splits, e.g. the book's 90% of characters under a
 * BPE, replaces them with attn_trainer_set_book_data). */
static attn_status book_from_corpus(attn_trainer *tr, attn_error *err) {
    attn_status st = attn_trainer_book_attach(tr, err);
    if (!st) attn_trainer_book_decay_all(tr);
    return st;
}

/* Where the corpus comes from: text in memory, or (text NULL) the file. */
typedef struct corpus_src {
    const char *text;
    size_t n;
    const char *path;
} corpus_src;

static attn_status vocab_mismatch(const attn_trainer *tr, const attn_gpt_config *mcfg,
                                  const char *vocab, attn_error *err) {
    return attn_fail(err, ATTN_ERR_INVALID_ARG,
                     tr->tok.kind == ATTN_TOKENIZER_GPT2
                         ? "config vocab_size %d does not match the gpt2 tokenizer's %d tokens"
                     : vocab ? "config vocab_size %d does not match the vocabulary's %d characters"
                             : "config vocab_size %d does not match the corpus's %d distinct "
                               "characters",
                     mcfg->vocab_size, tr->tok.vocab_size);
}

/* A char run's corpus file is read whole (its vocabulary is the text's). */
static attn_status read_text(const corpus_src *c, corpus_src *out, char **owned, attn_error *err) {
    *out = *c;
    if (!c->text && !c->path) return attn_fail(err, ATTN_ERR_INVALID_ARG, "no corpus given");
    if (!c->text) {
        attn_status st = attn_file_read_all(c->path, 0, (void **)owned, &out->n, err);
        if (st) return st;
        out->text = *owned;
    }
    if (out->n == 0) return attn_fail(err, ATTN_ERR_INVALID_ARG, "the corpus is empty");
    return ATTN_OK;
}

/* attn_trainer_init(_vocab, _tok): the tokenizer is given's (a copy),
 * vocab's characters (a UTF-8 string in id order) or, both NULL, the
 * config's kind: GPT-2's files or the corpus's characters. */
static attn_status trainer_init(attn_trainer *tr, const attn_gpt_config *mcfg,
                                const attn_train_config *tcfg, int vocab_given,
                                const attn_tokenizer *given, const char *vocab, const corpus_src *c,
                                int plan_only, attn_error *err) {
    memset(tr, 0, sizeof *tr);
    tr->ckpt_auto_s = ATTN_TRAIN_CKPT_AUTO_S;
    attn_status st = attn_train_config_validate(tcfg, err);
    if (st) return st;
    tr->mcfg = *mcfg;
    tr->tcfg = *tcfg;
    corpus_src src = *c;
    char *owned = NULL;
    const int mapped = !c->text && tcfg->tokenizer == ATTN_TOKENIZER_GPT2;
    if (!mapped && (st = read_text(c, &src, &owned, err))) goto fail;
    if ((st = init_tokenizer(tr, given, vocab, src.text, src.n, err))) goto fail;
    if (vocab_given && mcfg->vocab_size != tr->tok.vocab_size) {
        st = vocab_mismatch(tr, mcfg, vocab, err);
        goto fail;
    }
    tr->mcfg.vocab_size = tr->tok.vocab_size;
    if ((st = attn_gpt_config_validate(&tr->mcfg, err))) goto fail;
    st = mapped ? attn_trainer_corpus_file(tr, c->path, plan_only, err)
                : attn_trainer_corpus_text(tr, src.text, src.n, err);
    free(owned);
    owned = NULL;
    if (st) goto fail;
    if ((st = trainer_setup(tr, plan_only, err))) goto fail;
    if (tcfg->loader == ATTN_LOADER_BOOK && (st = book_from_corpus(tr, err))) goto fail;
    return ATTN_OK;
fail:
    free(owned);
    attn_trainer_release(tr);
    return st;
}

attn_status attn_trainer_init(attn_trainer *tr, const attn_gpt_config *mcfg,
                              const attn_train_config *tcfg, int vocab_given, const char *text,
                              size_t n, attn_error *err) {
    return trainer_init(tr, mcfg, tcfg, vocab_given, NULL, NULL, &(corpus_src){text, n, NULL}, 0,
                        err);
}

attn_status attn_trainer_init_vocab(attn_trainer *tr, const attn_gpt_config *mcfg,
                                    const attn_train_config *tcfg, int vocab_given,
                                    const char *vocab, const char *text, size_t n,
                                    attn_error *err) {
    if (!vocab) {
        memset(tr, 0, sizeof *tr);
        return attn_fail(err, ATTN_ERR_INVALID_ARG, "no vocabulary given");
    }
    return trainer_init(tr, mcfg, tcfg, vocab_given, NULL, vocab, &(corpus_src){text, n, NULL}, 0,
                        err);
}

attn_status attn_trainer_init_tok(attn_trainer *tr, const attn_gpt_config *mcfg,
                                  const attn_train_config *tcfg, int vocab_given,
                                  const attn_tokenizer *tok, const char *text, size_t n,
                                  attn_error *err) {
    if (!tok) {
        memset(tr, 0, sizeof *tr);
        return attn_fail(err, ATTN_ERR_INVALID_ARG, "no tokenizer given");
    }
    return trainer_init(tr, mcfg, tcfg, vocab_given, tok, NULL, &(corpus_src){text, n, NULL}, 0,
                        err);
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
    attn_status st = train_history_push(tr, &r, err);
    if (st) return st;
    if (rec) *rec = r;
    return ATTN_OK;
}

attn_status attn_trainer_planning(const attn_trainer *tr, attn_error *err) {
    return tr->plan_only ? attn_fail(err, ATTN_ERR_STATE,
                                     "a dry run's trainer plans the run and does not train")
                         : ATTN_OK;
}

attn_status attn_trainer_step(attn_trainer *tr, attn_train_record *rec, attn_error *err) {
    if (attn_trainer_planning(tr, err)) return ATTN_ERR_STATE;
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
        /* A failed read (a token file changed under the run) ends the step
         * before the model changes: the last checkpoint stays the run's. */
        st = tr->book
                 ? attn_book_next_batch(tr->book, &tr->model_rng, &tr->train, tr->xb, tr->yb, err)
                 : attn_sampler_next_batch(&tr->sampler, &tr->train, B, tr->xb, tr->yb, err);
        if (st) return st;
        if (tr->gpu) { /* train_device.c */
            double norm = 0;
            if ((st = attn_trainer_device_step(tr, lr, &loss, &norm, err))) return st;
            return record_step(tr, loss, lr, norm, rec, err);
        }
        attn_gpt_zero_grad_deferred(&tr->model);
        attn_forward_mode mode = {1, &tr->model_rng, c->dropout_stream};
        st = attn_gpt_forward_backward(&tr->model, tr->xb, tr->yb, B, T, &mode, &tr->acts, 1.0f,
                                       &loss, err);
        if (st) return st;
        if (!isfinite(loss))
            return attn_fail(err, ATTN_ERR_STATE,
                             "training loss is %g at step %" PRId64 " (diverged)", (double)loss,
                             tr->step + 1);
    }
    /* The update changes the weights and moments a checkpoint may still be
     * writing (train_writer.h): it waits for that write. */
    if ((st = train_writer_release(tr, err))) return st;
    const attn_param_list *params = attn_gpt_params(&tr->model);
    /* clip_grad_norm_ then AdamW, in one pass over the gradients: the clip
     * factor is applied as the update reads them. */
    const double norm = attn_grad_norm(params);
    const attn_engine *e = &tr->model.engine;
    if ((st = e->ops->adamw_step(e, &tr->opt, params, lr, attn_clip_coef(norm, c->grad_clip), err)))
        return st;
    return record_step(tr, loss, lr, norm, rec, err);
}

/* ---- the public, opaque trainer ------------------------------------------ */

attn_status attn_trainer_create_ex(attn_trainer **out, const attn_gpt_config *mcfg,
                                   const attn_train_config *tcfg, int vocab_given,
                                   const attn_tokenizer *tok, const char *vocab, const char *text,
                                   size_t n, const char *path, int plan_only, attn_error *err) {
    *out = NULL;
    attn_trainer *tr = calloc(1, sizeof *tr);
    if (!tr) return attn_fail(err, ATTN_ERR_NOMEM, "out of memory for a trainer");
    const corpus_src c = {text, n, text ? NULL : path};
    attn_status st = trainer_init(tr, mcfg, tcfg, vocab_given, tok, vocab, &c, plan_only, err);
    if (st) {
        free(tr);
        return st;
    }
    *out = tr;
    return ATTN_OK;
}

attn_status attn_trainer_create_book(attn_trainer **out, const attn_gpt_config *mcfg,
                                     const attn_train_config *tcfg, const int32_t *train_ids,
                                     size_t n_train, const int32_t *val_ids, size_t n_val,
                                     attn_error *err) {
    *out = NULL;
    attn_trainer *tr = calloc(1, sizeof *tr);
    if (!tr) return attn_fail(err, ATTN_ERR_NOMEM, "out of memory for a trainer");
    tr->mcfg = *mcfg;
    tr->tcfg = *tcfg;
    tr->tcfg.loader = ATTN_LOADER_BOOK;
    attn_status st = attn_train_config_validate(tcfg, err);
    if (!st) st = attn_gpt_config_validate(&tr->mcfg, err);
    if (!st) st = attn_trainer_book_attach_ids(tr, train_ids, n_train, val_ids, n_val, err);
    if (!st) st = trainer_setup(tr, 0, err);
    if (st) {
        attn_trainer_free(tr);
        return st;
    }
    attn_trainer_book_decay_all(tr);
    *out = tr;
    return ATTN_OK;
}

attn_status attn_trainer_create(attn_trainer **out, const attn_gpt_config *mcfg,
                                const attn_train_config *tcfg, int vocab_given, const char *text,
                                size_t n, attn_error *err) {
    return attn_trainer_create_ex(out, mcfg, tcfg, vocab_given, NULL, NULL, text, n, NULL, 0, err);
}

attn_status attn_trainer_create_vocab(attn_trainer **out, const attn_gpt_config *mcfg,
                                      const attn_train_config *tcfg, int vocab_given,
                                      const char *vocab, const char *text, size_t n,
                                      attn_error *err) {
    if (!vocab) {
        *out = NULL;
        return attn_fail(err, ATTN_ERR_INVALID_ARG, "no vocabulary given");
    }
    return attn_trainer_create_ex(out, mcfg, tcfg, vocab_given, NULL, vocab, text, n, NULL, 0, err);
}

attn_status attn_trainer_create_tok(attn_trainer **out, const attn_gpt_config *mcfg,
                                    const attn_train_config *tcfg, int vocab_given,
                                    const attn_tokenizer *tok, const char *text, size_t n,
                                    attn_error *err) {
    if (!tok) {
        *out = NULL;
        return attn_fail(err, ATTN_ERR_INVALID_ARG, "no tokenizer given");
    }
    return attn_trainer_create_ex(out, mcfg, tcfg, vocab_given, tok, NULL, text, n, NULL, 0, err);
}

const attn_tokenizer *attn_trainer_tokenizer(const attn_trainer *tr) {
    return &tr->tok;
}

void attn_trainer_free(attn_trainer *tr) {
    if (!tr) return;
    attn_trainer_release(tr);
    free(tr);
}

int64_t attn_trainer_steps(const attn_trainer *tr) {
    return tr->step;
}
const attn_gpt_config *attn_trainer_model_config(const attn_trainer *tr) {
    return &tr->mcfg;
}
const attn_train_config *attn_trainer_train_config(const attn_trainer *tr) {
    return &tr->tcfg;
}
const attn_gpt *attn_trainer_model(const attn_trainer *tr) {
    return &tr->model;
}
const attn_eval_record *attn_trainer_evals(const attn_trainer *tr, size_t *n) {
    *n = tr->n_evals;
    return tr->evals;
}
const attn_train_record *attn_trainer_history(const attn_trainer *tr, size_t *n) {
    *n = tr->n_hist;
    return tr->hist;
}
const attn_dist *attn_trainer_dist(const attn_trainer *tr) {
    return tr->dist;
}
size_t attn_trainer_corpus_bytes(const attn_trainer *tr) {
    return tr->text_bytes;
}
void attn_trainer_split_tokens(const attn_trainer *tr, size_t *train, size_t *val) {
    *train = tr->train.n_ids;
    *val = tr->val.n_ids;
}
const attn_token_file *attn_trainer_token_file(const attn_trainer *tr, int split) {
    const attn_token_file *f = split ? &tr->tok_val : &tr->tok_train;
    return f->is_open ? f : NULL;
}
void attn_trainer_set_corpus_path(attn_trainer *tr, const char *path) {
    tr->corpus_path = path;
}
void attn_trainer_add_elapsed(attn_trainer *tr, double seconds) {
    tr->elapsed_s += seconds;
}
