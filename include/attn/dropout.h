/* attn/dropout.h — nn.Dropout on attention weights, with PyTorch's masks.
 *
 * A mask is drawn for every element in memory order (masked-out causal
 * positions included, as PyTorch draws for the whole tensor), from the given
 * generator and stream (see attn/rng.h). Kept values are multiplied by
 * scale = 1.0f / (float)(1 - p), dropped ones become 0. p is a double because
 * PyTorch keeps it as a Python float and compares draws against 1 - p in
 * double precision. */
#ifndef ATTN_DROPOUT_H
#define ATTN_DROPOUT_H

#include <stddef.h>
#include <stdint.h>

#include "attn/rng.h"

#ifdef __cplusplus
extern "C" {
#endif

/* How a forward pass runs: eval (no dropout) or training (dropout drawn from
 * rng using stream). Passed to every module forward that has dropout. */
typedef struct attn_forward_mode {
    int training;
    attn_rng *rng; /* required when training and some dropout p > 0 */
    attn_dropout_stream stream;
} attn_forward_mode;

/* Draw keep[i] in {0, 1} for n elements; consumes exactly what PyTorch's
 * bernoulli_(1 - p) consumes: 2 draws per element (torch-cpu) or 1 draw in
 * all (torch-mkl). */
void attn_dropout_mask(attn_rng *rng, attn_dropout_stream stream, double p, uint8_t *keep,
                       size_t n);

/* The factor kept values are multiplied by: 1.0f / (float)(1 - p). */
float attn_dropout_scale(double p);

/* y = x * keep * scale (in place allowed). */
void attn_dropout_apply(const float *x, const uint8_t *keep, double p, float *y, size_t n);

/* dx += dy * keep * scale. */
void attn_dropout_backward(const float *dy, const uint8_t *keep, double p, float *dx, size_t n);

#ifdef __cplusplus
}
#endif
#endif
