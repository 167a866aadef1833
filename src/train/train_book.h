/* The book's data order (chapter 5, gpt_train.py) as a trainer mode: the
 * DataLoader of GPTDatasetV1 windows, its RandomSampler epochs and the draws
 * they take from the one global generator (tests/fixtures/book_ch05/README.md).
 *
 * Windows: window k is ids[kT .. kT+T) with targets one to the right, for
 * kT in range(0, n - T, T) (stride = context_length). An epoch is
 * iter(train_loader): its base seed, then the RandomSampler's seed (two
 * attn_rng_int64 of the model generator, the one dropout draws from), then
 * randperm(windows) under that seed, cut into batches of batch_size
 * (drop_last). An evaluation is evaluate_model(eval_iter = eval_iters):
 * a fresh train iterator (base seed + sampler seed: 4 words) whose first
 * eval_iters batches give the train loss, then a fresh val iterator (base
 * seed: 2 words) whose first eval_iters batches in order give the val loss;
 * each loss is the mean of per-batch mean losses, summed in double. */
#ifndef ATTN_SRC_TRAIN_BOOK_H
#define ATTN_SRC_TRAIN_BOOK_H

#include <stddef.h>
#include <stdint.h>

#include "attn/dataset.h"
#include "attn/rng.h"
#include "attn/status.h"

typedef struct attn_book_order {
    int32_t *owned; /* ids given to attn_trainer_set_book_data (copied), else NULL:
                       the trainer's own splits */
    size_t n_train, n_val;
    int T, B;
    size_t windows, val_windows;     /* GPTDatasetV1 lengths */
    size_t batches;                  /* training batches per epoch (drop_last) */
    int64_t epoch;                   /* epochs begun (1-based number of the current one) */
    size_t pos;                      /* batches taken from the current epoch */
    int64_t base_seed, sampler_seed; /* the current epoch's iterator draws */
    size_t *perm;                    /* windows: the current epoch's order */
    size_t *scratch;                 /* windows: an evaluation's fresh order */
} attn_book_order;

/* GPTDatasetV1(ids[0..n), max_length = stride = T): its number of windows. */
size_t attn_book_windows(size_t n, int T);

/* Size the order for splits of n_train and n_val tokens; fails when the
 * training split has fewer than B windows or the val split none. */
attn_status attn_book_order_init(attn_book_order *o, size_t n_train, size_t n_val, int T, int B,
                                 attn_error *err);
void attn_book_order_free(attn_book_order *o);

/* iter(train_loader) with its first next(): the base seed and the sampler
 * seed from rng, and perm = randperm(windows, seed). */
void attn_book_iterator(attn_rng *rng, size_t windows, int64_t *base_seed, int64_t *sampler_seed,
                        size_t *perm);

/* The next training batch of train (a new epoch first when the current one
 * is used up or none has begun) into x, y (B * T each). */
attn_status attn_book_next_batch(attn_book_order *o, attn_rng *rng, const attn_token_dataset *train,
                                 int32_t *x, int32_t *y, attn_error *err);

/* Windows win[0..B) of ds (window k starts at token kT) into x, y. */
attn_status attn_book_fill(const attn_token_dataset *ds, const size_t *win, int B, int T,
                           int32_t *x, int32_t *y, attn_error *err);

/* A generator as ATTN_BOOK_RNG_WORDS words (a checkpoint's tensor), and back
 * (-1: words no generator packs). */
#define ATTN_BOOK_RNG_WORDS (ATTN_MT_N + 6)
void attn_book_rng_pack(const attn_rng *r, uint32_t *w);
int attn_book_rng_unpack(attn_rng *r, const uint32_t *w);

#endif
