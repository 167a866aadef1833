/* Internal: MultiHeadAttention's fused path (see attn/multi_head_attention.h,
 * ATTN_MHA_FUSED). Not part of the public API. */
#ifndef ATTN_MHA_FUSED_H
#define ATTN_MHA_FUSED_H

#include "attn/flash_attention.h"
#include "attn/multi_head_attention.h"

/* Lives in attn_attention_cache.fused; sized for one (module, B, T). */
typedef struct attn_mha_fused_state {
    int B, T, d_in, d_out, heads, qkv_bias;
    float *w_qkv;  /* (3 d_out, d_in): W_query, W_key, W_value rows, refreshed each forward */
    float *b_qkv;  /* (3 d_out) or NULL */
    float *qkv;    /* (B, T, 3 d_out): queries | keys | values per token */
    float *d_qkv;  /* same, gradients */
    float *lse;    /* (B, heads, T) */
    float *dw_qkv; /* (3 d_out, d_in) weight gradients (bf16 engine only; made on first use) */
    attn_flash_dropout drop;
    attn_flash_workspace ws;
} attn_mha_fused_state;

void attn_mha_fused_state_free(attn_mha_fused_state *st);

attn_status attn_mha_fused_forward(const attn_mha *m, const float *x, int B, int T, float *out,
                                   const attn_forward_mode *mode, attn_attention_cache *cache,
                                   attn_error *err);
attn_status attn_mha_fused_backward(attn_mha *m, const float *x, int B, int T, const float *d_out,
                                    float *dx, const attn_attention_cache *cache, attn_error *err);

#endif
