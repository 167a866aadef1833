/* Gradient accumulation and data-parallel steps of the trainer (internal;
 * see attn/train.h and attn/dist.h). */
#ifndef ATTN_SRC_TRAIN_ACCUM_H
#define ATTN_SRC_TRAIN_ACCUM_H

#include "attn/train.h"
#include "trainer.h"

/* Buffers for tr->tcfg.grad_accum micro-batches split over tr->dist's
 * ranks, and the evaluation's per-batch losses. */
attn_status attn_train_accum_setup(attn_trainer *tr, attn_error *err);
void attn_train_accum_free(attn_trainer *tr);

/* 1 when a step takes several micro-batches or runs over several ranks. */
int attn_train_accum_active(const attn_trainer *tr);

/* The step's gradient (mean over the micro-batches, summed in order) into
 * the model's parameter grads on every rank, and the mean loss. */
attn_status attn_train_accum_grads(attn_trainer *tr, float *loss, attn_error *err);

#endif
