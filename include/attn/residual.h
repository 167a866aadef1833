/* attn/residual.h — dropout + residual add, as the book's TransformerBlock
 * does it: x = drop_shortcut(f(x)) + shortcut.
 * Dropout masks come from attn/dropout.h (PyTorch's streams). */
#ifndef ATTN_RESIDUAL_H
#define ATTN_RESIDUAL_H

#include <stddef.h>
#include <stdint.h>

#include "attn/dropout.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Whether mode asks for dropout with rate p (training and p > 0). */
int attn_dropout_active(const attn_forward_mode *mode, double p);

/* out = dropout(f) + shortcut over n elements. When dropout is active a
 * mask is drawn into keep (n) from mode's generator/stream and returns 1;
 * otherwise keep is untouched and returns 0 (always with mode NULL = eval).
 * out may alias shortcut. */
int attn_residual_dropout_forward(const float *f, const float *shortcut, float *out, uint8_t *keep,
                                  double p, const attn_forward_mode *mode, size_t n);

/* The backward rule (every attn backward; docs/library.md#conventions):
 * it adds (+=) into dx and into the parameter gradients, never overwrites;
 * the caller zeroes them first. */

/* df += d(out)/d(f) * dout (masked and scaled when dropped == 1). The
 * shortcut's gradient is dout itself (the caller keeps it). */
void attn_residual_dropout_backward(const float *dout, const uint8_t *keep, double p, int dropped,
                                    float *df, size_t n);

/* In place x = dropout(x) (drop_emb); same return as above. */
int attn_dropout_forward_inplace(float *x, uint8_t *keep, double p, const attn_forward_mode *mode,
                                 size_t n);

/* Its backward, in place (the exception to the rule: dx is both the
 * output's gradient and the input's): dx = keep ? dx / (1 - p) : 0. */
void attn_dropout_backward_inplace(float *dx, const uint8_t *keep, double p, size_t n);

/* x += y over n elements on the calling thread, no parallel region (the
 * one-token step's residual adds, smaller than a region's cost). */
void attn_add(float *x, const float *y, size_t n);

#ifdef __cplusplus
}
#endif
#endif
