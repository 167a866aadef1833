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
#include "attn/text.h"

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
    int64_t step;         /* optimizer steps done */
    int epoch;            /* the epoch under way (1-based; 0: none begun) */
    size_t pos;           /* its batches taken */
    int64_t seen;         /* examples (classify) or tokens (instruct) seen */
    int64_t sampler_seed; /* the epoch's RandomSampler seed: perm = randperm of it */
    int epoch_done;       /* the epoch's end (end_epoch) ran */
    int finished;         /* the run's end ran (its last checkpoint) */
} ft_state;

/* What the events reported, kept for the checkpoints (a resume reports
 * them again): kind, epoch, step, then the two values (a sample: its
 * line's offset and length in the run's samples). */
enum {
    FT_H_INITIAL = 0,
    FT_H_EVAL = 1,
    FT_H_EPOCH = 2,
    FT_H_FINAL = 3,
    FT_H_SAMPLE = 4,
    FT_H_COLS = 5
};

struct ft_run {
    attn_gpt *m;
    const ft_task *t;
    const attn_classify_config *c;
    const attn_classify_events *ev;
    attn_classify_result *res;
    attn_rng rng;
    attn_adamw opt;
    ft_state st;
    int B;                          /* the batch size */
    int T_max;                      /* the longest batch */
    int32_t *x, *y;                 /* (B, T_max) */
    attn_gpt_acts acts;             /* (B, T_max), made once: every batch runs on it */
    size_t *perm, *scratch, *ident; /* n[FT_TRAIN], n[FT_TRAIN], max(n) */
    /* checkpoints (c->ckpt): what a resume must find the same */
    const char *task;     /* "classify", "instruct" */
    uint64_t data_digest; /* the sets' rows, as the task fills them */
    double *hist;         /* n_hist records of FT_H_COLS */
    size_t n_hist, cap_hist;
    attn_text samples; /* the FT_H_SAMPLE lines, each ended by '\n' */
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

/* Report an event (kind FT_H_*) through r->ev and keep it for the
 * checkpoints. */
attn_status ft_report(ft_run *r, int kind, int epoch, int64_t step, double a, double b,
                      attn_error *err);

/* Report an epoch's sample line (no '\n' in it) through
 * r->ev->on_sample_line and keep it for the checkpoints. */
attn_status ft_report_sample(ft_run *r, int epoch, int64_t step, const char *line, attn_error *err);

/* FNV-1a of n bytes, continuing h (start: FT_DIGEST0): the data's digest. */
#define FT_DIGEST0 0xcbf29ce484222325ull
uint64_t ft_digest(uint64_t h, const void *p, size_t n);

/* With c->ckpt->resume: r as the live checkpoint of c->ckpt->dir left it
 * (the model, AdamW, the generator, the order, r->st, the history reported
 * again through the events); a checkpoint of another task, data or settings
 * is ATTN_ERR_INVALID_ARG. Without: nothing. (finetune_ckpt.c) */
attn_status ft_resume(ft_run *r, attn_error *err);

/* A checkpoint of r as it stands (no c->ckpt: nothing). */
attn_status ft_save(ft_run *r, attn_error *err);

/* The epochs from where r->st stands (a fresh run: the generator seeded,
 * nothing done). */
attn_status ft_epochs(ft_run *r, attn_error *err);

/* calc_loss_loader / calc_accuracy_loader over set's rows order[0..) (n of
 * them), num_batches (0: all) batches. */
attn_status ft_loader(ft_run *r, int set, const size_t *order, size_t n, int want_acc,
                      int num_batches, double *out, attn_error *err);

#endif
