/* train_history.h — the loss history: the trainer's records (pushed by a
 * step, an evaluation and a resume: train_history.c) and a training
 * state's (history.step I64 (n), history.loss_lr_norm F32 (n, 3),
 * evals.step I64 (m), evals.train_val F32 (m, 2), evals.val_exact F32 (m)
 * when an evaluation was exact), found by the state's table
 * (train_checkpoint.c) in one place for resume and attn info. A missing or
 * malformed pair reads as an empty history. */
#ifndef ATTN_SRC_TRAIN_HISTORY_H
#define ATTN_SRC_TRAIN_HISTORY_H

#include <stddef.h>

#include "attn/safetensors.h"
#include "attn/train.h"
#include "trainer.h"

/* Append r to tr->hist (growing it). */
attn_status train_history_push(attn_trainer *tr, const attn_train_record *r, attn_error *err);
/* Append r to tr->evals; an evaluation at the last one's step replaces it. */
attn_status train_history_push_eval(attn_trainer *tr, const attn_eval_record *r, attn_error *err);

/* The tensors of a training state (train_checkpoint.c's table). */
#define TRAIN_STATE_TENSORS 9

typedef struct train_history {
    const attn_st_tensor *t[TRAIN_STATE_TENSORS]; /* by the table's rows; NULL: none */
    size_t n_steps, n_evals;
} train_history;

void train_history_find(const attn_safetensors *st, train_history *h);
/* Record i < n_steps / evaluation i < n_evals (val_exact NAN where none). */
void train_history_step(const train_history *h, size_t i, attn_train_record *r);
void train_history_eval(const train_history *h, size_t i, attn_eval_record *r);

#endif
