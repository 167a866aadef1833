/* attn/softmax.h — softmax over the last dimension of a (rows, cols) array.
 *
 * The stable form subtracts each row's max before exp, so large scores give
 * no overflow; rows that are all -inf (fully masked) give all zeros rather
 * than NaN. The naive form is the chapter's exp(x) / sum(exp(x)). */
#ifndef ATTN_SOFTMAX_H
#define ATTN_SOFTMAX_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

void attn_softmax_forward(const float *x, float *y, size_t rows, size_t cols);
void attn_softmax_naive(const float *x, float *y, size_t rows, size_t cols);

/* The backward rule (every attn backward; docs/library.md#conventions):
 * it adds (+=) into dx and into the parameter gradients, never overwrites;
 * the caller zeroes them first. */

/* Given y = softmax(x) and dy, accumulates dx += y * (dy - sum(dy * y)). */
void attn_softmax_backward(const float *y, const float *dy, float *dx, size_t rows, size_t cols);

#ifdef __cplusplus
}
#endif
#endif
