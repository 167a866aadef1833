/* attn/cost.h — what a model's arithmetic costs: one rule for all of attn.
 *
 * The floating-point operations (a multiply-add is 2) that the training
 * plan (`attn train --dry-run`), `attn bench train|mha`, bench/step_floor.c
 * and the final exact evaluation's rule all count, so their GFLOP/s and
 * floors agree:
 *   - a product with a weight matrix of R x C elements costs 2 R C per
 *     token forward; a training step adds its two backward products (dx and
 *     dW): 3x. Every weight matrix counts (Q, K and V at their own widths, so
 *     grouped-query's are smaller; SwiGLU's three matrices), and the output
 *     head too when it is the token embedding (tied); embedding lookups,
 *     biases, norms and activations do not.
 *   - causal attention: query i meets min(i + 1, window) keys (window 0:
 *     all i + 1): QK^T and AV cost 4 head_dim per pair and head, forward;
 *     its backward (the scores again, then dV, dP, dQ and dK) 2.5x more:
 *     3.5x for a step. The causal half is counted, never the full square.
 * Memory is attn/memory_plan.h's. */
#ifndef ATTN_COST_H
#define ATTN_COST_H

#include "attn/gpt.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Query-key pairs of a causal sequence of T tokens with window (0: none):
 * sum over i < T of min(i + 1, window). */
double attn_causal_pairs(double T, double window);

typedef struct attn_gpt_flops {
    double matmul;    /* the weight products, forward */
    double attention; /* QK^T and AV, forward, the causal half */
} attn_gpt_flops;

/* A forward of B sequences of T tokens through a model of cfg. */
attn_gpt_flops attn_gpt_flops_forward(const attn_gpt_config *cfg, double B, double T);

/* One training step on B sequences of T tokens: 3 matmul + 3.5 attention. */
double attn_gpt_flops_step(const attn_gpt_config *cfg, double B, double T);

/* The same with an output layer head_width wide, not vocab_size (a
 * classifier's head: n_classes). */
double attn_gpt_flops_step_head(const attn_gpt_config *cfg, double head_width, double B, double T);

/* The same with the backward stopped above the lowest frozen_blocks blocks
 * (a frozen set: they run forward only, 1x; the rest and the head 3x and
 * 3.5x): at most, as a frozen tensor's weight gradient is not computed
 * either. */
double attn_gpt_flops_step_frozen(const attn_gpt_config *cfg, double head_width, double B, double T,
                                  int frozen_blocks);

/* One MultiHeadAttention (d_in = d_out = D, n_heads, n_kv_heads 0: n_heads,
 * window 0: none) on B sequences of T tokens; backward: forward and
 * backward (3x projections, 3.5x attention). */
double attn_mha_flops(double B, double T, double D, int n_heads, int n_kv_heads, double window,
                      int backward);
/* The fused attention kernel alone (attn_mha_flops less the projections). */
double attn_attention_flops(double B, double T, double D, double window, int backward);

#ifdef __cplusplus
}
#endif
#endif
