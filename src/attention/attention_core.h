/* attention_core.h — internal: scaled dot-product attention over (batch, head)
 * blocks, shared by every chapter-3 module. Not part of the public API.
 *
 * Q, K, V and the output are (B, T, ld) row-major with head h occupying
 * columns [h * hd, (h + 1) * hd) — the layout a Linear(d_in, heads * hd)
 * produces, so the heads are read in place (no transpose copies). */
#ifndef ATTN_ATTENTION_CORE_H
#define ATTN_ATTENTION_CORE_H

#include <stddef.h>
#include <stdint.h>

#include "attn/attention.h"
#include "attn/causal_attention.h"
#include "attn/dropout.h"
#include "attn/linear.h"
#include "attn/param.h"
#include "attn/status.h"

typedef struct attn_core_shape {
    int B, T, heads, hd; /* ld = heads * hd */
    int causal;          /* mask j > i with -inf before scaling */
    /* NULL: the book's attention (causal as above); else the call's variants
     * (attn/attention.h): K and V are then (B, T, kv_heads * hd), query head
     * h reading kv head h / (heads / kv_heads), and the scores go through
     * attn_score. q and k arrive already QK-normed and rotated. */
    const attn_attention_spec *spec;
} attn_core_shape;

/* weights (B, heads, T, T) = softmax(masked(Q K^T) / sqrt(hd)); then, when
 * mode->training && p > 0, one keep mask over the whole weights tensor in
 * memory order into keep, dropped = weights * keep / (1 - p) (otherwise
 * dropped = weights and *dropout_applied = 0); out = dropped V.
 * Fails only when dropout is needed and mode->rng is NULL. */
attn_status attn_core_forward(const attn_core_shape *s, const float *Q, const float *K,
                              const float *V, float *weights, float *dropped, uint8_t *keep,
                              int *dropout_applied, double p, const attn_forward_mode *mode,
                              float *out, attn_error *err);

/* Overwrites dQ (B, T, ld), dK, dV (B, T, kv_heads * hd) with the gradients of out w.r.t. Q, K, V
 * given d_out (B, T, ld). scratch holds 2 * T * T floats. keep is used only
 * when dropout_applied. */
void attn_core_backward(const attn_core_shape *s, const float *Q, const float *K, const float *V,
                        const float *weights, const float *dropped, const uint8_t *keep,
                        int dropout_applied, double p, const float *d_out, float *dQ, float *dK,
                        float *dV, float *scratch);

/* Element counts of an attention cache's buffers (attn/causal_attention.h);
 * 0: none. */
typedef struct attn_cache_sizes {
    size_t qkv;          /* queries, keys, values and their gradients */
    size_t context;      /* context, d_context */
    size_t weights;      /* attn_weights, dropped_weights, keep */
    size_t scratch;      /* the backward's dP and dS */
    size_t q_raw, k_raw; /* QK-norm's inputs (d_raw: q_raw's count) */
    size_t q_rstd, k_rstd;
    int huge_context; /* context, d_context from attn_alloc_huge (the fused path) */
} attn_cache_sizes;

/* The reference path's counts for (B, T, heads, d_out), no QK-norm. */
attn_cache_sizes attn_cache_sizes_reference(int B, int T, int heads, int d_out);

/* cache (zeroed first) for (B, T, heads, d_out) with buffers of s's counts;
 * on failure nothing stays allocated. */
attn_status attn_attention_cache_alloc(attn_attention_cache *cache, int B, int T, int heads,
                                       int d_out, const attn_cache_sizes *s, attn_error *err);

/* Validate a dropout rate: finite and in [0, 1). what names the module. */
attn_status attn_check_dropout(double p, const char *what, attn_error *err);

/* Adds "<prefix>W_query.weight", "<prefix>W_query.bias", ... for W_key and
 * W_value in that (state_dict) order, the three weights one group (an arena
 * keeps them adjacent). Shared by v2, CausalAttention and MHA. */
attn_status attn_qkv_params(attn_linear *q, attn_linear *k, attn_linear *v, const char *prefix,
                            attn_param_list *list, attn_error *err);

#endif
