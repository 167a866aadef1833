/* train_history.h — the loss history a train_state.safetensors holds
 * (history.step I64 (n), history.loss_lr_norm F32 (n, 3), evals.step I64
 * (m), evals.train_val F32 (m, 2), evals.val_exact F32 (m) when an
 * evaluation was exact), decoded in one place for resume and
 * attn info. A missing or malformed pair reads as an empty history. */
#ifndef ATTN_SRC_TRAIN_HISTORY_H
#define ATTN_SRC_TRAIN_HISTORY_H

#include <stddef.h>

#include "attn/safetensors.h"
#include "attn/train.h"

typedef struct train_history {
    const attn_st_tensor *step, *loss_lr_norm;   /* per training step */
    const attn_st_tensor *eval_step, *train_val; /* per evaluation */
    const attn_st_tensor *val_exact;             /* F32 (m), NAN where none; NULL: none */
    size_t n_steps, n_evals;
} train_history;

void train_history_find(const attn_safetensors *st, train_history *h);
/* Record i < n_steps / evaluation i < n_evals. */
void train_history_step(const train_history *h, size_t i, attn_train_record *r);
void train_history_eval(const train_history *h, size_t i, attn_eval_record *r);

#endif
