/* attn/attention.h — one description of an attention call, and the math
 * every path shares for it (issue 20): the score transform (scale, soft-cap,
 * ALiBi bias, causal / sliding-window mask), rotary positions on q and k,
 * the grouped-query head mapping and QK-norm. A new variant is a field here
 * and its few lines in src/attention/attention_core.c; the reference attention
 * (attention_core.h), the one-token KV step (mha_step.c) and the
 * MultiHeadAttention module call these.
 *
 * For query position i, key position j, query head h (kv head h / group,
 * group = heads / kv_heads):
 *   s     = (q_i . k_j) / sqrt(head_dim)              (the book's division)
 *   s     = softcap * tanh(s / softcap)                when softcap > 0
 *   s     = s - slope_h * (i - j)                      ALiBi
 *   s     = -inf when j > i (causal) or i - j >= window (window > 0)
 *   w     = softmax_j(s), out_i = sum_j w_ij v_j
 * q and k, per head, before the dot product:
 *   qk_norm: x = scale * x / sqrt(mean(x^2) + 1e-5)    (RMSNorm over head_dim)
 *   RoPE:    the first rot = 2 floor(rope_fraction head_dim / 2) dims are
 *            rotated in GPT-NeoX's half layout: pairs (x[d], x[d + rot/2]),
 *            angle pos * theta^(-2d / rot); the rest pass through.
 * ALiBi slopes (Press et al. 2022): for n a power of two, 2^(-8 (h+1) / n);
 * otherwise the slopes of the power of two m below n, then every other slope
 * of 2m for the remaining n - m heads. */
#ifndef ATTN_ATTENTION_H
#define ATTN_ATTENTION_H

#include <stddef.h>

#include "attn/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Positions inside attention (a learned table, the book's, is outside it). */
typedef enum attn_positions {
    ATTN_POSITIONS_NONE = 0, /* the book's attention: no position term */
    ATTN_POSITIONS_ROPE,     /* rotary q and k */
    ATTN_POSITIONS_ALIBI     /* linear distance bias on the scores */
} attn_positions;

typedef struct attn_attention_spec {
    int heads;    /* query heads */
    int kv_heads; /* key/value heads, dividing heads; 0: heads */
    int head_dim; /* dims per head */
    int causal;   /* mask keys after the query */
    int window;   /* a query sees its last window keys (itself included); 0: all */
    attn_positions positions;
    double rope_theta;    /* 0: 10000 */
    double rope_fraction; /* rotated share of head_dim, (0, 1]; 0: 1 */
    int qk_norm;          /* RMSNorm over each head's q and k (learnable scale) */
    double softcap;       /* 0: off */
    double dropout;       /* on the attention weights, in training */
} attn_attention_spec;

/* The book's MultiHeadAttention: causal, no variant. */
attn_attention_spec attn_attention_book(int heads, int head_dim, double dropout);

/* 1 when s computes exactly the book's attention (no variant field set). */
int attn_attention_is_book(const attn_attention_spec *s);

/* kv_heads as used (0 reads as heads). */
int attn_attention_kv_heads(const attn_attention_spec *s);

/* The key/value head query head h reads: h / (heads / kv_heads), each run of
 * heads / kv_heads consecutive query heads sharing one (grouped-query). The
 * one mapping of the reference, fused and one-token step paths. */
int attn_attention_kv_head(const attn_attention_spec *s, int h);

/* Checks the fields (kv_heads divides heads, window needs causal, ranges);
 * what names the caller in the message. */
attn_status attn_attention_check(const attn_attention_spec *s, const char *what, attn_error *err);

/* Rotated dims per head (even; 0 without RoPE). */
int attn_rope_dims(const attn_attention_spec *s);

/* Head h's ALiBi slope among heads. */
float attn_alibi_slope(int heads, int h);

/* The score of (i, j) from the raw dot product q_i . k_j (the transform
 * above); -INFINITY when masked. slope: head h's ALiBi slope (ignored
 * otherwise). */
float attn_score(const attn_attention_spec *s, float dot, float slope, int i, int j);

/* d score / d dot at an unmasked (i, j), from the same raw dot product. */
float attn_score_grad(const attn_attention_spec *s, float dot);

/* 1 when key j is masked for query i. */
int attn_score_masked(const attn_attention_spec *s, int i, int j);

/* Rotates, in place, n_heads heads of head_dim floats at x + h * head_dim of
 * rows r < rows (row stride ld), row r at position pos0 + r % T. inverse: the
 * transposed rotation (the backward of RoPE). No-op without RoPE. */
void attn_rope_apply(const attn_attention_spec *s, float *x, size_t rows, int T, size_t ld,
                     int n_heads, int pos0, int inverse);

#ifdef __cplusplus
}
#endif
#endif
