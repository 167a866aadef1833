/* attn/cross_entropy.h — F.cross_entropy(logits.flatten(0,1), targets)
 * with mean reduction, fused with the softmax backward.
 *
 * logits (N, V) float, targets (N) in [0, V):
 *   loss = mean_n (logsumexp(logits[n]) - logits[n, targets[n]])
 *   dlogits[n] = (softmax(logits[n]) - onehot(targets[n])) * dloss / N */
#ifndef ATTN_CROSS_ENTROPY_H
#define ATTN_CROSS_ENTROPY_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Returns the mean loss (accumulated in double); lse (N) receives each row's
 * log-sum-exp when non-NULL (backward uses it). Targets must be valid. */
float attn_cross_entropy_forward(const float *logits, const int32_t *targets, float *lse, size_t N,
                                 size_t V);

/* The row sums of forward added, in forward's order, into *total (forward
 * is this from 0, divided by N): rows taken in chunks whose sizes are
 * multiples of 32 add up to forward's total over all of them, bit for bit. */
void attn_cross_entropy_accumulate(const float *logits, const int32_t *targets, float *lse,
                                   size_t N, size_t V, double *total);

/* backward's values written over the logits: logits (N, V) becomes
 * (exp(logits - lse) - onehot) * scale, scale = dloss / (the whole batch's
 * rows): the same numbers backward adds to zeroed dlogits, with no second
 * (N, V) buffer (the fused output layer, attn_gpt_forward_backward). */
void attn_cross_entropy_backward_inplace(float *logits, const int32_t *targets, const float *lse,
                                         float scale, size_t N, size_t V);

/* The same values written into dlogits (N, V), a buffer of the caller's
 * (it may be logits itself: backward_inplace is this). */
void attn_cross_entropy_grad(const float *logits, const int32_t *targets, const float *lse,
                             float scale, float *dlogits, size_t N, size_t V);

/* The backward rule (every attn backward; docs/library.md#conventions):
 * it adds (+=) into dx and into the parameter gradients, never overwrites;
 * the caller zeroes them first. */

/* dlogits (N, V) += (exp(logits - lse) - onehot) * dloss / N. */
void attn_cross_entropy_backward(const float *logits, const int32_t *targets, const float *lse,
                                 float dloss, float *dlogits, size_t N, size_t V);

#ifdef __cplusplus
}
#endif
#endif
