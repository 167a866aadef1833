/* attn/gelu.h — the book's GELU (tanh approximation, chapter 4.3):
 *   gelu(x) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))). */
#ifndef ATTN_GELU_H
#define ATTN_GELU_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* tanh(u) as GELU computes it: a vectorisable exp-based form, within a few
 * 1e-7 relative of tanhf (exposed for tests). */
float attn_tanhf(float u);

/* y = gelu(x) for n elements (in place allowed). */
void attn_gelu_forward(const float *x, float *y, size_t n);

/* y16 = gelu(x) rounded to bf16 (nearest even), n elements: the bf16
 * engine's input to the next product, made in the same pass. */
void attn_gelu_forward_bf16(const float *x, uint16_t *y16, size_t n);

/* The backward rule (every attn backward; docs/library.md#conventions):
 * it adds (+=) into dx and into the parameter gradients, never overwrites;
 * the caller zeroes them first. Exception: the _inplace form, whose
 * one buffer holds dy on entry and dx on return. */

/* dx += gelu'(x) * dy for n elements (x is the forward input). */
void attn_gelu_backward(const float *x, const float *dy, float *dx, size_t n);

/* d = gelu'(x) * d in place (d holds dy on entry, dx on return). */
void attn_gelu_backward_inplace(const float *x, float *d, size_t n);

#ifdef __cplusplus
}
#endif
#endif
