/* The presets, in one table (presets.c): a model (attn_gpt_config_preset)
 * and the training recipe that goes with it (attn_train_preset). */
#ifndef ATTN_SRC_PRESETS_H
#define ATTN_SRC_PRESETS_H

#include <stddef.h>
#include <stdint.h>

#include "attn/engine.h"
#include "attn/gpt.h"
#include "attn/optim.h"
#include "attn/tokenizer.h"

/* The recipe fields that differ between presets; the rest are shared
 * (train_config.c: AdamW beta1 0.9, eps 1e-8, weight decay 0.1, clip 1.0,
 * seed 1337, torch-cpu dropout, no accumulation). */
typedef struct attn_preset_recipe {
    int batch_size;
    int64_t max_steps;
    double learning_rate, min_lr;
    int64_t warmup_steps;
    double beta2;
    int64_t eval_interval;
    int eval_iters;
    int64_t log_interval;
    attn_lr_schedule lr_schedule;  /* 0: cosine */
    double time_budget;            /* 0: none */
    attn_tokenizer_kind tokenizer; /* 0: char */
    int no_grad_clip;              /* 1: grad_clip 0 (the book's chapter 5 does not clip) */
    uint64_t seed;                 /* 0: 1337 */
    int book_loader;               /* 1: loader "book", the chapter-5 DataLoader (train.h) */
} attn_preset_recipe;

typedef struct attn_preset {
    const char *name;
    attn_gpt_config model;
    attn_preset_recipe recipe;
    attn_precision precision; /* its products where the CPU can (attn_train_preset_precision) */
} attn_preset;

/* The row named name, or NULL. */
const attn_preset *attn_preset_find(const char *name);

/* "seed004, shakespeare-char, ..." into buf (for messages). */
void attn_preset_list(char *buf, size_t cap);

#endif
