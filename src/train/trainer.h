/* The trainer's state (attn/train.h keeps it opaque): the train/ folder's
 * files, and tests, read it here. */
#ifndef ATTN_SRC_TRAINER_H
#define ATTN_SRC_TRAINER_H

#include "attn/train.h"

/* From this vocabulary size on, the trainer's activations are lean
 * (attn_gpt_acts_init_lean: the output layer fused, no B x T x V logits). */
#define ATTN_TRAIN_LEAN_VOCAB 1024

struct attn_trainer {
    attn_gpt_config mcfg;
    attn_train_config tcfg;
    attn_tokenizer tok;
    int32_t *ids;
    size_t n_ids;
    size_t text_bytes;
    uint64_t text_hash;
    attn_token_dataset train, val;
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
    float **gflat;             /* n_gflat flat gradients (grad_accum > 1; train_accum.c) */
    int n_gflat;
    float *mb_loss;   /* grad_accum micro-batch losses */
    float *eval_loss; /* eval_iters batch losses */
    /* time_budget's clock: the run's wall time so far (steps, evaluations,
     * saves; checkpointed, so a resumed run goes on counting), and the share
     * of the budget spent when the next step begins (its LR follows it). */
    double elapsed_s, progress;
    /* A dry run's trainer: configs, tokenizer, corpus and the checkpoint's
     * checks (headers only), with no model, optimizer or activations. */
    int plan_only;
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
 * checkpoint (checks only) but not stepped. */
attn_status attn_trainer_create_ex(attn_trainer **out, const attn_gpt_config *mcfg,
                                   const attn_train_config *tcfg, int vocab_given,
                                   const attn_tokenizer *tok, const char *vocab, const char *text,
                                   size_t n, int plan_only, attn_error *err);

#endif
