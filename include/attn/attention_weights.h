/* attn/attention_weights.h — read the attention weights a forward pass used.
 *
 * Shapes: weights (num_heads, T, T) for one batch row b; weights[h][i][j] is
 * how much query position i attends to key position j: the causal softmax of
 * the scaled scores, before dropout (so a training-mode forward gives the
 * same weights as an eval-mode one), 0 above the diagonal.
 *
 * Nothing is recomputed outside the forward's own code: the REFERENCE path
 * keeps the (B, heads, T, T) weights in its cache and they are copied; the
 * FUSED path (the default, used by training and `attn forward gpt`) never
 * stores them, so they are rebuilt from the Q, K and per-row log-sum-exp it
 * saved for its backward, with the kernels the backward uses
 * (attn_flash_weights). The cache is only read: calling these between a
 * forward and its backward changes neither the logits nor the gradients. */
#ifndef ATTN_ATTENTION_WEIGHTS_H
#define ATTN_ATTENTION_WEIGHTS_H

#include "attn/multi_head_attention.h"

#ifdef __cplusplus
extern "C" {
#endif

/* After attn_mha_forward(m, ..., cache): weights of batch row b into
 * weights (num_heads * T * T floats). ATTN_ERR_STATE when the cache holds
 * no forward of m's path; ATTN_ERR_INVALID_ARG for b outside [0, B). */
attn_status attn_mha_attention_weights(const attn_mha *m, const attn_attention_cache *cache, int b,
                                       float *weights, attn_error *err);

/* A GPT's layers: attn_gpt_attention_weights (attn/gpt.h). */

#ifdef __cplusplus
}
#endif
#endif
