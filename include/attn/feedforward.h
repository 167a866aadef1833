/* attn/feedforward.h — the book's FeedForward (chapter 4.3):
 *   nn.Sequential(Linear(C, 4C), GELU(), Linear(4C, C))
 * x (N, C) -> y (N, C). Parameters "layers.0.weight" (4C, C),
 * "layers.0.bias" (4C), "layers.2.weight" (C, 4C), "layers.2.bias" (C),
 * drawn in that order as nn.Linear does. */
#ifndef ATTN_FEEDFORWARD_H
#define ATTN_FEEDFORWARD_H

#include <stddef.h>
#include <stdint.h>

#include "attn/linear.h"
#include "attn/param.h"
#include "attn/rng.h"
#include "attn/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct attn_feedforward {
    int C, hidden;   /* hidden = 4 C */
    attn_linear fc1; /* layers.0 */
    attn_linear fc2; /* layers.2 */
} attn_feedforward;

/* Saved activations for N rows. */
typedef struct attn_feedforward_cache {
    size_t N;
    float *h; /* (N, 4C) fc1 output (GELU input) */
    float *g; /* (N, 4C) GELU output (fc2 input) */
} attn_feedforward_cache;

attn_status attn_feedforward_init(attn_feedforward *ff, int C, attn_rng *rng, attn_error *err);
void attn_feedforward_free(attn_feedforward *ff);
attn_status attn_feedforward_params(attn_feedforward *ff, const char *prefix, attn_param_list *list,
                                    attn_error *err);

attn_status attn_feedforward_cache_init(attn_feedforward_cache *cache, const attn_feedforward *ff,
                                        size_t N, attn_error *err);
void attn_feedforward_cache_free(attn_feedforward_cache *cache);

/* y (N, C); N must not exceed cache->N. */
void attn_feedforward_forward(const attn_feedforward *ff, const float *x, float *y, size_t N,
                              attn_feedforward_cache *cache);
/* Accumulates parameter grads and dx (N, C) += ... (dx may be NULL).
 * d_hidden is (N, 4C) scratch, overwritten. */
void attn_feedforward_backward(attn_feedforward *ff, const float *x, const float *dy, float *dx,
                               size_t N, const attn_feedforward_cache *cache, float *d_hidden);

/* One row (generation): y (C) = forward of x (C), hidden (4C) scratch,
 * through the matrix-vector kernels; w_bf16 NULL (the fp32 weights) or
 * attn_feedforward_bf16_copy's values. Equals a row of
 * attn_feedforward_forward to a few ulps. Splits its rows with OpenMP
 * worksharing: call it from every thread of a team, or from one thread
 * outside any team. */
void attn_feedforward_step(const attn_feedforward *ff, const uint16_t *w_bf16, const float *x,
                           float *hidden, float *y);

/* bf16 weights for the step: layers.0 (4C, C) then layers.2 (C, 4C), rounded
 * to nearest even, back to back. */
size_t attn_feedforward_bf16_numel(const attn_feedforward *ff);
void attn_feedforward_bf16_copy(const attn_feedforward *ff, uint16_t *w);

#ifdef __cplusplus
}
#endif
#endif
