/* attn/cross_entropy.h — F.cross_entropy(logits.flatten(0,1), targets,
 * ignore_index=-100) with mean reduction, fused with the softmax backward.
 *
 * logits (N, V) float, targets (N) in [0, V) or ATTN_IGNORE_INDEX; the
 * counted rows are those whose target is not ignored, K of them:
 *   loss = mean over counted n of (logsumexp(logits[n]) - logits[n, targets[n]])
 *   dlogits[n] = (softmax(logits[n]) - onehot(targets[n])) * dloss / K,
 *                0 for an ignored row.
 * K = 0 gives a NaN loss (0/0), as PyTorch does, and no gradient. With no
 * ignored row K = N: the same bits as before the ignore index existed. */
#ifndef ATTN_CROSS_ENTROPY_H
#define ATTN_CROSS_ENTROPY_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A target that contributes no loss and no gradient (PyTorch's default
 * ignore_index): chapter 7's padding, chapter 6's every-position-but-the-last. */
#define ATTN_IGNORE_INDEX (-100)

/* The counted rows: targets[n] != ATTN_IGNORE_INDEX. */
size_t attn_cross_entropy_count(const int32_t *targets, size_t N);

/* Returns the mean loss over the counted rows (accumulated in double); lse
 * (N) receives each counted row's log-sum-exp when non-NULL (backward uses
 * it; an ignored row's is 0). Targets must be valid. */
float attn_cross_entropy_forward(const float *logits, const int32_t *targets, float *lse, size_t N,
                                 size_t V);

/* The row sums of forward added, in forward's order, into *total (forward
 * is this from 0, divided by the count; ignored rows add nothing): rows taken in chunks whose sizes
 * are multiples of 32 add up to forward's total over all of them, bit for bit. */
void attn_cross_entropy_accumulate(const float *logits, const int32_t *targets, float *lse,
                                   size_t N, size_t V, double *total);

/* backward's values written over the logits: logits (N, V) becomes
 * (exp(logits - lse) - onehot) * scale, scale = dloss / (the whole batch's
 * counted rows), zeros for an ignored row: the same numbers backward adds to zeroed dlogits, with
 * no second (N, V) buffer (the fused output layer, attn_gpt_forward_backward). */
void attn_cross_entropy_backward_inplace(float *logits, const int32_t *targets, const float *lse,
                                         float scale, size_t N, size_t V);

/* The same values written into dlogits (N, V), a buffer of the caller's
 * (it may be logits itself: backward_inplace is this). */
void attn_cross_entropy_grad(const float *logits, const int32_t *targets, const float *lse,
                             float scale, float *dlogits, size_t N, size_t V);

/* The backward rule (every attn backward; docs/library.md#conventions):
 * it adds (+=) into dx and into the parameter gradients, never overwrites;
 * the caller zeroes them first. */

/* dlogits (N, V) += (exp(logits - lse) - onehot) * dloss / K (the count);
 * ignored rows unchanged. */
void attn_cross_entropy_backward(const float *logits, const int32_t *targets, const float *lse,
                                 float dloss, float *dlogits, size_t N, size_t V);

#ifdef __cplusplus
}
#endif
#endif
