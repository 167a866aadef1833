/* Internal: MultiHeadAttention's fused path (see attn/multi_head_attention.h,
 * ATTN_MHA_FUSED). Not part of the public API. */
#ifndef ATTN_MHA_FUSED_H
#define ATTN_MHA_FUSED_H

#include <stdint.h>

#include "attn/flash_attention.h"
#include "attn/multi_head_attention.h"

/* Lives in attn_attention_cache.fused; sized for one module at the
 * cache's (B_max, T_max), run at the last forward's (B, T) <= them: every
 * (B, T, ...) and (B, heads, T) buffer below is laid out for that (B, T). */
typedef struct attn_mha_fused_state {
    int B, T, d_in, d_out, heads, qkv_bias;
    int B_max, T_max;
    int kv_dim;    /* kv_heads * head_dim; the packed width is d3 = d_out + 2 kv_dim */
    float *w_qkv;  /* (d3, d_in): W_query, W_key, W_value rows packed each forward, when they
                      are not adjacent in the module (made on first use) */
    float *b_qkv;  /* (d3) or NULL */
    float *qkv;    /* (B, T, d3): queries | keys | values per token, as the kernel reads them
                      (QK-normed and rotated) */
    float *d_qkv;  /* same, gradients */
    float *lse;    /* (B, heads, T) */
    float *dw_qkv; /* (d3, d_in) weight gradients (bf16 engine only; made on first use) */
    /* bf16 engine: the two products' inputs rounded once in the forward and
     * kept for the backward (made on first use): x16 (B T, d_in) the layer's
     * input, ctx16 (B T, d_out) out_proj's; kept16 says the last forward
     * made them. */
    uint16_t *x16, *ctx16;
    int kept16;
    /* Variants (attn/attention.h) around the kernel: */
    float *raw;    /* qk_norm: (B T, d_out + kv_dim) q | k before the norm */
    float *rstd;   /* qk_norm: (B T, heads + kv_heads) 1/rms per head row */
    float *d_raw;  /* qk_norm: (B T, d_out + kv_dim) gradient through the norm */
    float *kv_x;   /* grouped-query: (B T, 2 d_out) K | V repeated per query head */
    float *d_kv_x; /* same, gradients */
    attn_flash_dropout drop;
    attn_flash_workspace ws;
} attn_mha_fused_state;

void attn_mha_fused_state_free(attn_mha_fused_state *st);

/* The kernel's problem after a fused forward on cache (attention_weights.c
 * recomputes the weights from it). */
attn_flash_problem attn_mha_fused_problem(const attn_mha *m, attn_mha_fused_state *st,
                                          attn_attention_cache *cache, int B, int T);

/* The fused path as a sequence: the QKV product, the core, out_proj, on
 * engine e's ops (linear_qkv, attention_core, linear; attn/engine_ops.h)
 * or, e NULL, on the kernels below (attn_mha_forward's own path). */
struct attn_engine;
attn_status attn_mha_fused_forward(const struct attn_engine *e, const attn_mha *m, const float *x,
                                   int B, int T, float *out, const attn_forward_mode *mode,
                                   attn_attention_cache *cache, attn_error *err);
attn_status attn_mha_fused_backward(const struct attn_engine *e, attn_mha *m, const float *x, int B,
                                    int T, const float *d_out, float *dx,
                                    const attn_attention_cache *cache, attn_error *err);

/* The parts on the kernels: the CPU engine's linear_qkv and attention_core
 * ops (their description in attn/engine_ops.h). The packed product makes
 * the cache's fused state for (m, B, T); the others need it. */
attn_status attn_mha_qkv_forward(const attn_mha *m, const float *x, int B, int T,
                                 attn_attention_cache *cache, attn_error *err);
attn_status attn_mha_qkv_backward(attn_mha *m, const float *x, float *dx, int B, int T,
                                  const attn_attention_cache *cache, attn_error *err);
attn_status attn_mha_core_forward(const attn_mha *m, int B, int T, const attn_forward_mode *mode,
                                  attn_attention_cache *cache, attn_error *err);
attn_status attn_mha_core_backward(attn_mha *m, int B, int T, const attn_attention_cache *cache,
                                   attn_error *err);

#endif
