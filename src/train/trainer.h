/* The trainer's state (attn/train.h keeps it opaque): the train/ folder's
 * files, and tests, read it here. */
#ifndef ATTN_SRC_TRAINER_H
#define ATTN_SRC_TRAINER_H

#include "attn/token_file.h"
#include "attn/train.h"

/* From this vocabulary size on, the trainer's activations are lean
 * (attn_gpt_acts_init_lean: the output layer fused, no B x T x V logits). */
#define ATTN_TRAIN_LEAN_VOCAB ATTN_GPT_LEAN_VOCAB

struct attn_trainer {
    attn_gpt_config mcfg;
    attn_train_config tcfg;
    attn_tokenizer tok;
    int32_t *ids; /* the corpus's ids in memory (text given), else NULL */
    size_t n_ids;
    attn_token_file tok_train, tok_val; /* or its token files (a corpus file, gpt2) */
    size_t text_bytes;
    uint64_t text_hash;
    attn_token_dataset train, val; /* views of ids or of the token files */
    attn_sampler sampler;
    attn_rng model_rng, eval_rng;
    attn_gpt model;
    attn_gpt_acts acts;
    attn_adamw opt;
    int64_t step;
    int32_t *xb, *yb;
    attn_train_record *hist;
    size_t n_hist, cap_hist;
    attn_eval_record *evals;
    size_t n_evals, cap_evals;
    const char *corpus_path;   /* borrowed; recorded in the training state when set */
    struct attn_cuda_gpt *gpu; /* non-NULL: steps and evaluations run on the GPU */
    attn_dist *dist;           /* borrowed; NULL = one process (attn_trainer_set_dist) */
    /* grad_accum > 1 or several ranks (train_accum.c): the micro-batches'
     * gradient blocks, the model's own first (bound at each step), then
     * those of n_gblocks - 1 more, of its layout (gblock_numel floats). */
    float **gblocks;
    int n_gblocks;
    size_t gblock_numel;
    float *mb_loss;   /* grad_accum micro-batch losses */
    float *eval_loss; /* eval_iters batch losses */
    /* time_budget's clock: the run's wall time so far (steps, evaluations,
     * saves; checkpointed, so a resumed run goes on counting), and the share
     * of the budget spent when the next step begins (its LR follows it). */
    double elapsed_s, progress;
    /* A dry run's trainer: configs, tokenizer, corpus and the checkpoint's
     * checks (headers only), with no model, optimizer or activations. */
    int plan_only;
    /* The book's data order (train_book.c), NULL: the sampler's. */
    struct attn_book_order *book;
    /* attn_trainer_run's events while it runs (NULL otherwise), and the
     * evaluation in progress (train_eval.c): where it stands, when it
     * began, the forwards of its parts (attn_eval_part's order), whether a
     * stop abandoned it. */
    const attn_trainer_events *ev;
    attn_eval_progress eval_now;
    double eval_t0;
    size_t eval_parts[3];
    int eval_stopped;
    /* attn_trainer_run's checkpoint writer (train_writer.h; NULL outside a
     * run): attn_trainer_step's update waits for the save it writes. */
    struct train_writer *writer;
    /* ATTN_TRAIN_CKPT_AUTO_S, set by init (a test may shorten it). */
    double ckpt_auto_s;
};

/* In place, for a trainer the caller holds (attn_trainer_create allocates
 * one and calls this); attn_trainer_release frees what it holds. */
attn_status attn_trainer_init(attn_trainer *tr, const attn_gpt_config *mcfg,
                              const attn_train_config *tcfg, int vocab_given, const char *text,
                              size_t n, attn_error *err);
attn_status attn_trainer_init_vocab(attn_trainer *tr, const attn_gpt_config *mcfg,
                                    const attn_train_config *tcfg, int vocab_given,
                                    const char *vocab, const char *text, size_t n, attn_error *err);
attn_status attn_trainer_init_tok(attn_trainer *tr, const attn_gpt_config *mcfg,
                                  const attn_train_config *tcfg, int vocab_given,
                                  const attn_tokenizer *tok, const char *text, size_t n,
                                  attn_error *err);
void attn_trainer_release(attn_trainer *tr);

/* attn_trainer_create(_vocab, _tok) (tok and vocab NULL: the corpus's), or with plan_only
 * a planning trainer (above) that can be resumed and started from a
 * checkpoint (checks only) but not stepped. text NULL: the corpus is the
 * file at path: a gpt2 run maps its cached token files
 * (attn_trainer_corpus_file), a char run reads it whole. */
attn_status attn_trainer_create_ex(attn_trainer **out, const attn_gpt_config *mcfg,
                                   const attn_train_config *tcfg, int vocab_given,
                                   const attn_tokenizer *tok, const char *vocab, const char *text,
                                   size_t n, const char *path, int plan_only, attn_error *err);

/* train_corpus.c: the corpus's splits into tr->train / tr->val, and its
 * size and hash. From text in memory (the tokenizer's ids, owned), or from
 * the file at path through token files in the cache folder
 * (attn_token_cache_dir; gpt2 only): a planning trainer counts the tokens
 * and neither reads nor writes a cache. */
/* ---- checkpoints (train_checkpoint.c) -------------------------------------- */

/* attn_trainer_save with a gate: the model file is written while, gate
 * given, gate(user, &abort) is waited for; the training state is then
 * written once, from the trainer it returns (the same step and weights: the
 * evaluation that ran meanwhile recorded), or from tr where it returns
 * NULL; abort set gives the checkpoint up (removed, nothing committed;
 * ATTN_OK). */
typedef const attn_trainer *(*attn_trainer_save_gate)(void *user, int *abort);
attn_status attn_trainer_save_gated(const attn_trainer *tr, const char *dir,
                                    attn_trainer_save_gate gate, void *user, attn_error *err);

/* A run's best/ (dir): the model alone (no training state: best/ is for
 * generating, exporting and fine-tuning, not resuming), its file hard-linked
 * from run's live checkpoint when that is this step's (a 124M model's
 * weights are not written twice), else written. */
attn_status attn_trainer_save_best(const attn_trainer *tr, const char *dir, const char *run,
                                   attn_error *err);
attn_status attn_trainer_corpus_text(attn_trainer *tr, const char *text, size_t n, attn_error *err);
attn_status attn_trainer_corpus_file(attn_trainer *tr, const char *path, int plan_only,
                                     attn_error *err);

/* ---- the book's chapter-5 run (train_book.c, train_book.h) ----------------
 *
 * Book mode (training key "loader": "book" on the trainer's own splits,
 * attn_trainer_create_book, or attn_trainer_set_book_data with other
 * splits) replaces the sampler and the sampled evaluation with
 * gpt_train.py's DataLoaders, drawn from the model generator (the one
 * dropout draws from, as the book's one global generator), and every
 * parameter decays in AdamW (the book passes model.parameters()). The
 * caller's configs give the rest of the book's recipe: seed 123, constant
 * lr (min_lr = learning_rate, warmup 0), grad_clip 0, eval_interval =
 * eval_freq, eval_iters = eval_iter, max_steps = epochs *
 * attn_trainer_book_batches. attn_trainer_run then evaluates after the steps
 * the book does (global step s = tr->step - 1 with s % eval_interval == 0),
 * no evaluation before the first step and no final one, and calls on_epoch
 * after each epoch's last step. CPU only. */

/* Switch a fresh trainer (step 0) to the book's data order over these
 * token ids (copied; the train / val splits of the corpus, e.g. the GPT-2
 * BPE of its first 90% of characters and of the rest). The trainer's own
 * corpus split stays unused. */
attn_status attn_trainer_set_book_data(attn_trainer *tr, const int32_t *train_ids, size_t n_train,
                                       const int32_t *val_ids, size_t n_val, attn_error *err);

/* A book-mode trainer without a tokenizer or corpus text: the model is
 * mcfg as given (vocab_size included), initialised from tcfg->seed. */
attn_status attn_trainer_create_book(attn_trainer **out, const attn_gpt_config *mcfg,
                                     const attn_train_config *tcfg, const int32_t *train_ids,
                                     size_t n_train, const int32_t *val_ids, size_t n_val,
                                     attn_error *err);

/* Training batches per epoch (0 outside book mode), and the 1-based epoch
 * of the last step taken (1 before any). */
int64_t attn_trainer_book_batches(const attn_trainer *tr);
int64_t attn_trainer_book_epoch(const attn_trainer *tr);

/* generate_and_print_sample's ids: prompt (n ids) then max_new greedy
 * tokens, each from the last context_length tokens, into out (n + max_new). */
attn_status attn_trainer_book_sample(const attn_trainer *tr, const int32_t *prompt, size_t n,
                                     int max_new, int32_t *out, attn_error *err);

/* train_book.c's pieces that train.c calls. */
/* The book's order over the trainer's splits (tr->train, tr->val as they are). */
attn_status attn_trainer_book_attach(attn_trainer *tr, attn_error *err);
/* The same over copies of these ids (checked against the vocabulary),
 * which become the trainer's splits. */
attn_status attn_trainer_book_attach_ids(attn_trainer *tr, const int32_t *train_ids, size_t n_train,
                                         const int32_t *val_ids, size_t n_val, attn_error *err);
void attn_trainer_book_decay_all(attn_trainer *tr);

/* A dry run's trainer (plan_only) has no model to step, evaluate or save:
 * ATTN_ERR_STATE saying so; ATTN_OK for any other (train.c). */
attn_status attn_trainer_planning(const attn_trainer *tr, attn_error *err);

/* ---- the evaluations (train_eval.c, eval_windows.c) ------------------------ */

/* The exact loss of ds (attn_gpt_loss_dataset) with tick(user, batch,
 * batches) before each batch of windows and after the last: nonzero before
 * a batch abandons the pass (ATTN_ERR_STATE). */
attn_status attn_gpt_loss_dataset_ticked(attn_gpt *m, attn_gpt_acts *acts,
                                         const attn_token_dataset *ds, double *loss, size_t *count,
                                         int (*tick)(void *user, size_t batch, size_t batches),
                                         void *user, attn_error *err);

#endif
