/* attn/self_attention.h — self-attention with trainable weights (chapter 3.4).
 *
 * One sequence x (T, d_in) -> context vectors (T, d_out):
 *   queries = x Wq, keys = x Wk, values = x Wv          (T, d_out) each
 *   attn_weights = softmax(queries keys^T / sqrt(d_out)) (T, T), no mask
 *   context = attn_weights values                         (T, d_out)
 *
 * SelfAttention_v1 holds raw (d_in, d_out) parameters drawn with torch.rand
 * in the order W_query, W_key, W_value; SelfAttention_v2 holds three
 * nn.Linear(d_in, d_out, bias=qkv_bias) layers in the same order. */
#ifndef ATTN_SELF_ATTENTION_H
#define ATTN_SELF_ATTENTION_H

#include "attn/linear.h"
#include "attn/param.h"
#include "attn/rng.h"
#include "attn/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct attn_sa_v1 {
    int d_in, d_out;
    float *W_query, *W_key, *W_value; /* (d_in, d_out) each */
    float *grad_W_query, *grad_W_key, *grad_W_value;
} attn_sa_v1;

typedef struct attn_sa_v2 {
    int d_in, d_out, qkv_bias;
    attn_linear W_query, W_key, W_value;
} attn_sa_v2;

/* What forward saves for backward (caller-owned workspace for T tokens). */
typedef struct attn_sa_cache {
    int T, d_out;
    float *queries, *keys, *values; /* (T, d_out) */
    float *attn_weights;            /* (T, T), after softmax */
    /* Backward scratch (written by backward, so no allocation there). */
    float *d_queries, *d_keys, *d_values; /* (T, d_out) */
    float *scratch;                       /* 2 * T * T   */
} attn_sa_cache;

attn_status attn_sa_cache_init(attn_sa_cache *cache, int T, int d_out, attn_error *err);
void attn_sa_cache_free(attn_sa_cache *cache);

/* rng != NULL: torch.manual_seed-compatible init; rng == NULL: zeros. */
attn_status attn_sa_v1_init(attn_sa_v1 *m, int d_in, int d_out, attn_rng *rng, attn_error *err);
void attn_sa_v1_free(attn_sa_v1 *m);
/* Names "W_query", "W_key", "W_value", each (d_in, d_out). */
attn_status attn_sa_v1_params(attn_sa_v1 *m, const char *prefix, attn_param_list *list,
                              attn_error *err);
attn_status attn_sa_v1_forward(const attn_sa_v1 *m, const float *x, int T, float *context,
                               attn_sa_cache *cache, attn_error *err);
/* The backward rule (every attn backward; docs/library.md#conventions):
 * it adds (+=) into dx and into the parameter gradients, never overwrites;
 * the caller zeroes them first. */

/* Accumulates parameter gradients, and dx (T, d_in) += ... when dx != NULL. */
attn_status attn_sa_v1_backward(attn_sa_v1 *m, const float *x, int T, const float *d_context,
                                float *dx, const attn_sa_cache *cache, attn_error *err);

attn_status attn_sa_v2_init(attn_sa_v2 *m, int d_in, int d_out, int qkv_bias, attn_rng *rng,
                            attn_error *err);
void attn_sa_v2_free(attn_sa_v2 *m);
/* Names "W_query.weight" (d_out, d_in), "W_query.bias", ... */
attn_status attn_sa_v2_params(attn_sa_v2 *m, const char *prefix, attn_param_list *list,
                              attn_error *err);
attn_status attn_sa_v2_forward(const attn_sa_v2 *m, const float *x, int T, float *context,
                               attn_sa_cache *cache, attn_error *err);
/* As v1's: parameter gradients (and the biases') and dx (T, d_in) +=, dx
 * may be NULL. */
attn_status attn_sa_v2_backward(attn_sa_v2 *m, const float *x, int T, const float *d_context,
                                float *dx, const attn_sa_cache *cache, attn_error *err);

/* The chapter's weight transfer: v1.W = v2.W.weight^T for Q, K and V, so v1
 * computes what v2 does. v2 must have no bias; v1 must be initialised with
 * the same d_in and d_out. */
attn_status attn_sa_v1_from_v2(attn_sa_v1 *v1, const attn_sa_v2 *v2, attn_error *err);

#ifdef __cplusplus
}
#endif
#endif
