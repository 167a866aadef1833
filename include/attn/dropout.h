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
#include "attn/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* How a forward pass runs: eval (no dropout) or training (dropout drawn from
 * rng using stream). Passed to every module forward that has dropout; a
 * NULL mode means eval in every one of them. */
typedef struct attn_forward_mode {
    int training;
    attn_rng *rng; /* required when training and some dropout p > 0 */
    attn_dropout_stream stream;
} attn_forward_mode;

/* Draw keep[i] in {0, 1} for n elements; consumes exactly what PyTorch's
 * bernoulli_(1 - p) consumes: 2 draws per element (torch-cpu) or 1 draw in
 * all (torch-mkl). With ATTN_STREAM_GIVEN, rng is the rng member of an
 * attn_dropout_given and the next n elements of its masks are taken. */
void attn_dropout_mask(attn_rng *rng, attn_dropout_stream stream, double p, uint8_t *keep,
                       size_t n);

/* Masks given by the caller instead of drawn: for a binding whose own
 * framework draws them (attn.torch draws them with PyTorch's generator as
 * nn.Dropout does, so they match the book's modules on any PyTorch build).
 *
 *     attn_dropout_given g;
 *     attn_dropout_given_init(&g, keep, n);      // n bytes, 1 = kept
 *     attn_forward_mode mode = {1, &g.rng, ATTN_STREAM_GIVEN};
 *     ... a forward with &mode ...
 *     attn_dropout_given_check(&g, &err);        // it took exactly n
 *
 * Every dropout of that forward takes the next elements of keep, in the
 * order and number it would have drawn them (PyTorch's: each dropped tensor
 * whole, in memory order, in the order the forward applies them; nothing
 * when p == 0 or in eval mode). Past the end of keep the rest is kept: a
 * short buffer is reported by the check, never read beyond. */
typedef struct attn_dropout_given {
    attn_rng rng; /* first, so mode.rng = &g.rng leads back to g; never drawn from */
    const uint8_t *keep;
    size_t n;      /* elements in keep */
    size_t wanted; /* elements the forward asked for so far (those past n were kept) */
} attn_dropout_given;

void attn_dropout_given_init(attn_dropout_given *g, const uint8_t *keep, size_t n);

/* Take the next n elements into keep (the ATTN_STREAM_GIVEN draw). */
void attn_dropout_given_take(attn_dropout_given *g, uint8_t *keep, size_t n);

/* ATTN_OK when the forward took exactly g->n elements; else ATTN_ERR_SHAPE
 * naming how many it took and how many were given. */
attn_status attn_dropout_given_check(const attn_dropout_given *g, attn_error *err);

/* The factor kept values are multiplied by: 1.0f / (float)(1 - p). */
float attn_dropout_scale(double p);

/* y = x * keep * scale (in place allowed). */
void attn_dropout_apply(const float *x, const uint8_t *keep, double p, float *y, size_t n);

/* The backward rule (every attn backward; docs/library.md#conventions):
 * it adds (+=) into dx and into the parameter gradients, never overwrites;
 * the caller zeroes them first. */

/* dx += dy * keep * scale. */
void attn_dropout_backward(const float *dy, const uint8_t *keep, double p, float *dx, size_t n);

#ifdef __cplusplus
}
#endif
#endif
