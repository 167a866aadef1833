/* attn/causal_attention.h — CausalAttention (chapter 3.5).
 *
 * Batched x (B, T, d_in) -> context (B, T, d_out), T <= context_length:
 *   queries/keys/values = Linear(x)                     (B, T, d_out)
 *   scores = queries keys^T, masked_fill(triu(1), -inf) (B, T, T)
 *   attn_weights = softmax(scores / sqrt(d_out))
 *   attn_weights = dropout(attn_weights)      (training only)
 *   context = attn_weights values
 * Parameters are created as the book's constructor does: W_query, W_key,
 * W_value, each nn.Linear(d_in, d_out, bias=qkv_bias). */
#ifndef ATTN_CAUSAL_ATTENTION_H
#define ATTN_CAUSAL_ATTENTION_H

#include <stdint.h>

#include "attn/dropout.h"
#include "attn/linear.h"
#include "attn/param.h"
#include "attn/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct attn_causal_attention {
    int d_in, d_out, context_length, qkv_bias;
    double dropout;
    attn_linear W_query, W_key, W_value;
} attn_causal_attention;

/* Saved activations for one (B, T) shape; heads = 1 for CausalAttention,
 * num_heads for MultiHeadAttention (weights are then (B, heads, T, T)).
 * MultiHeadAttention's forward runs any B <= B_max, T <= T_max on it (the
 * first B*T rows, laid out for that (B, T)) and sets B, T: its backward
 * and the weights' read-out need that shape. The other modules run exactly
 * (B_max, T_max). */
typedef struct attn_attention_cache {
    int B, T, heads, d_out;
    int B_max, T_max;               /* what it was made for */
    float *queries, *keys, *values; /* (B, T, d_out) projections           */
    float *attn_weights;            /* (B, heads, T, T) softmax output     */
    float *dropped_weights;         /* same, after dropout (== weights when no dropout) */
    uint8_t *keep;                  /* same shape dropout keep-mask        */
    int dropout_applied;            /* whether the last forward used dropout */
    float *context;                 /* (B, T, d_out) heads concatenated, before any out_proj */
    /* Backward scratch, written by backward (the cache is const there only in
     * the sense that forward's saved activations are not changed): */
    float *d_queries, *d_keys, *d_values; /* (B, T, d_out) */
    float *d_context; /* (B, T, d_out) grad at context (MHA: after out_proj^T) */
    float *scratch;   /* 2 * T * T per-(b, head) dP and dS */
    /* MultiHeadAttention with qk_norm (attn_mha_cache_init): q and k before
     * the norm, 1/rms per head row, and the gradient through the norm. */
    float *q_raw, *k_raw, *d_raw, *q_rstd, *k_rstd;
    /* MultiHeadAttention's fused path (packed QKV, LSE, dropout state,
     * workspace); NULL until that path first runs. Freed with the cache. */
    struct attn_mha_fused_state *fused;
} attn_attention_cache;

attn_status attn_attention_cache_init(attn_attention_cache *cache, int B, int T, int heads,
                                      int d_out, attn_error *err);
void attn_attention_cache_free(attn_attention_cache *cache);

/* Fails with a message when d_in/d_out/context_length <= 0 or dropout is
 * outside [0, 1). rng != NULL: PyTorch-compatible init; NULL: zeros. */
attn_status attn_causal_attention_init(attn_causal_attention *m, int d_in, int d_out,
                                       int context_length, double dropout, int qkv_bias,
                                       attn_rng *rng, attn_error *err);
void attn_causal_attention_free(attn_causal_attention *m);
attn_status attn_causal_attention_params(attn_causal_attention *m, const char *prefix,
                                         attn_param_list *list, attn_error *err);

/* Fails when T > context_length or the cache was made for another shape.
 * mode NULL = eval (no dropout). */
attn_status attn_causal_attention_forward(const attn_causal_attention *m, const float *x, int B,
                                          int T, float *context, const attn_forward_mode *mode,
                                          attn_attention_cache *cache, attn_error *err);
/* The backward rule (every attn backward; docs/library.md#conventions):
 * it adds (+=) into dx and into the parameter gradients, never overwrites;
 * the caller zeroes them first. */

/* Accumulates parameter gradients, and dx (B, T, d_in) += ... when dx != NULL. */
attn_status attn_causal_attention_backward(attn_causal_attention *m, const float *x, int B, int T,
                                           const float *d_context, float *dx,
                                           const attn_attention_cache *cache, attn_error *err);

#ifdef __cplusplus
}
#endif
#endif
