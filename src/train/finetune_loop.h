/* The fine-tuning tasks' one training loop (attn/finetune.h): the book's
 * train_classifier_simple and train_model_simple are the same loop (epochs
 * of the shuffled training loader, AdamW, evaluate_model every eval_freq
 * steps from step 0) with a different batch, loss position and end of
 * epoch. A task says how rows become a batch (fill), how many of a batch's
 * rows it got right (classify), and what ends an epoch; the loop owns the
 * generator, the loaders' order, the optimizer and the checkpoints. */
#ifndef ATTN_SRC_TRAIN_FINETUNE_LOOP_H
#define ATTN_SRC_TRAIN_FINETUNE_LOOP_H

#include <stddef.h>
#include <stdint.h>

#include "attn/finetune.h"
#include "attn/optim.h"
#include "attn/rng.h"

enum { FT_TRAIN = 0, FT_VAL = 1 };

typedef struct ft_run ft_run;

typedef struct ft_task {
    void *user;
    size_t n[2]; /* rows of the training and val sets */
    /* rows[0..n) (n <= B) of a set into x, y (B rows of *T, the batch's
     * length): the rows past n copies of the first, their targets all
     * ATTN_IGNORE_INDEX (a short last batch: they count nowhere). */
    void (*fill)(void *user, int set, const size_t *rows, size_t n, int B, int32_t *x, int32_t *y,
                 int *T);
    /* Right predictions among the batch's first n rows (may be NULL). */
    size_t (*right)(void *user, const attn_gpt_acts *a, int set, const size_t *rows, size_t n);
    /* After an epoch: the accuracies (classify) or a sample (instruct). */
    attn_status (*end_epoch)(ft_run *r, int epoch, attn_error *err);
} ft_task;

/* Where a run stands: what a checkpoint holds beyond the model and AdamW. */
typedef struct ft_state {
    int64_t step;        /* optimizer steps done */
    int epoch;           /* the epoch under way (1-based; 0: none begun) */
    size_t pos;          /* its batches taken */
    int64_t seen;        /* examples (classify) or tokens (instruct) seen */
    int64_t sampler_seed; /* the epoch's RandomSampler seed: perm = randperm of it */
    int epoch_done;      /* the epoch's end (end_epoch) ran */
} ft_state;

struct ft_run {
    attn_gpt *m;
    const ft_task *t;
    const attn_classify_config *c;
    const attn_classify_events *ev;
    attn_classify_result *res;
    attn_rng rng;
    attn_adamw opt;
    ft_state st;
    int B, T;          /* the activations' shape */
    int T_max;         /* the longest batch */
    int32_t *x, *y;    /* (B, T_max) */
    attn_gpt_acts acts;
    size_t *perm, *scratch, *ident; /* n[FT_TRAIN], n[FT_TRAIN], max(n) */
};

/* Check the config and allocate (T_max: the longest batch a fill makes);
 * training 0: passes only (no optimizer). */
attn_status ft_run_init(ft_run *r, attn_gpt *m, const ft_task *t, int T_max,
                        const attn_classify_config *c, const attn_classify_events *ev,
                        attn_classify_result *res, int training, attn_error *err);
void ft_run_free(ft_run *r);

/* evaluate_model: a fresh train iterator (its two draws) and a fresh val
 * one (one draw), each over num_batches (0: all) batches; want_acc:
 * calc_accuracy_loader, else calc_loss_loader. */
attn_status ft_measure(ft_run *r, int want_acc, int num_batches, double *tr, double *va,
                       attn_error *err);

/* The epochs from where r->st stands (a fresh run: the generator seeded,
 * nothing done). */
attn_status ft_epochs(ft_run *r, attn_error *err);

/* calc_loss_loader / calc_accuracy_loader over set's rows order[0..) (n of
 * them), num_batches (0: all) batches. */
attn_status ft_loader(ft_run *r, int set, const size_t *order, size_t n, int want_acc,
                      int num_batches, double *out, attn_error *err);

#endif
