/* The trainer's GPU path (train_device.c), called from train.c. */
#ifndef ATTN_TRAIN_DEVICE_H
#define ATTN_TRAIN_DEVICE_H

#include "attn/cuda.h"
#include "attn/train.h"
#include "trainer.h"

/* Forward (training mode), backward, clip, AdamW on the GPU for the batch in
 * tr->xb / tr->yb at learning rate lr; the step's loss and gradient norm out
 * (train.c records the step). */
attn_status attn_trainer_device_step(attn_trainer *tr, double lr, float *loss, double *norm,
                                     attn_error *err);
/* Eval-mode loss of the batch in tr->xb / tr->yb on the GPU. */
attn_status attn_trainer_device_eval(attn_trainer *tr, float *loss, attn_error *err);
/* Copy weights and AdamW moments from the GPU into tr->model / tr->opt. */
attn_status attn_trainer_device_sync(const attn_trainer *tr, attn_error *err);

#endif
