/* MultiHeadAttention with weight splits (chapter 3.6.2; see
 * attn/multi_head_attention.h). The (B, T, d_out) projections are read as
 * (B, T, heads, head_dim) in place; the core writes the context back in the
 * same layout, which is exactly transpose(1, 2).contiguous().view(b, T, d_out). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc_huge.h"
#include "attention_core.h"
#include "attn/multi_head_attention.h"
#include "mha_fused.h"

attn_status attn_mha_init(attn_mha *m, int d_in, int d_out, int context_length, double dropout,
                          int num_heads, int qkv_bias, attn_rng *rng, attn_error *err) {
    memset(m, 0, sizeof *m);
    if (d_in <= 0)
        return attn_fail(err, ATTN_ERR_INVALID_ARG, "MultiHeadAttention: d_in must be > 0, got %d",
                         d_in);
    if (d_out <= 0)
        return attn_fail(err, ATTN_ERR_INVALID_ARG, "MultiHeadAttention: d_out must be > 0, got %d",
                         d_out);
    if (context_length <= 0)
        return attn_fail(err, ATTN_ERR_INVALID_ARG,
                         "MultiHeadAttention: context_length must be > 0, got %d", context_length);
    if (num_heads <= 0)
        return attn_fail(err, ATTN_ERR_INVALID_ARG,
                         "MultiHeadAttention: num_heads must be > 0, got %d", num_heads);
    if (d_out % num_heads != 0)
        return attn_fail(err, ATTN_ERR_INVALID_ARG,
                         "MultiHeadAttention: d_out (%d) must be divisible by num_heads (%d)",
                         d_out, num_heads);
    attn_status st = attn_check_dropout(dropout, "MultiHeadAttention", err);
    if (st != ATTN_OK) return st;
    m->d_in = d_in;
    m->d_out = d_out;
    m->context_length = context_length;
    m->num_heads = num_heads;
    m->head_dim = d_out / num_heads;
    m->qkv_bias = qkv_bias ? 1 : 0;
    m->dropout = dropout;
    if ((st = attn_linear_init(&m->W_query, d_in, d_out, qkv_bias, rng, err)) != ATTN_OK ||
        (st = attn_linear_init(&m->W_key, d_in, d_out, qkv_bias, rng, err)) != ATTN_OK ||
        (st = attn_linear_init(&m->W_value, d_in, d_out, qkv_bias, rng, err)) != ATTN_OK ||
        (st = attn_linear_init(&m->out_proj, d_out, d_out, 1, rng, err)) != ATTN_OK) {
        attn_mha_free(m);
        return st;
    }
    return ATTN_OK;
}

void attn_mha_free(attn_mha *m) {
    attn_linear_free(&m->W_query);
    attn_linear_free(&m->W_key);
    attn_linear_free(&m->W_value);
    attn_linear_free(&m->out_proj);
}

attn_status attn_mha_params(attn_mha *m, const char *prefix, attn_param_list *list,
                            attn_error *err) {
    attn_status st = attn_qkv_params(&m->W_query, &m->W_key, &m->W_value, prefix, list, err);
    if (st != ATTN_OK) return st;
    char p[ATTN_PARAM_NAME_MAX];
    int n = snprintf(p, sizeof p, "%sout_proj.", prefix ? prefix : "");
    if (n < 0 || (size_t)n >= sizeof p)
        return attn_fail(err, ATTN_ERR_INVALID_ARG, "parameter prefix '%s' is too long",
                         prefix ? prefix : "");
    return attn_linear_params(&m->out_proj, p, list, err);
}

static attn_status check_call(const attn_mha *m, int B, int T, const attn_attention_cache *cache,
                              attn_error *err) {
    if (B <= 0 || T <= 0)
        return attn_fail(err, ATTN_ERR_SHAPE,
                         "MultiHeadAttention: B and T must be > 0 (got %d, %d)", B, T);
    if (T > m->context_length)
        return attn_fail(err, ATTN_ERR_SHAPE,
                         "MultiHeadAttention: sequence length T = %d exceeds context_length = %d",
                         T, m->context_length);
    if (!cache || cache->B != B || cache->T != T || cache->heads != m->num_heads ||
        cache->d_out != m->d_out)
        return attn_fail(err, ATTN_ERR_SHAPE,
                         "MultiHeadAttention: cache was made for (B %d, T %d, heads %d, d_out %d), "
                         "not (B %d, T %d, heads %d, d_out %d)",
                         cache ? cache->B : 0, cache ? cache->T : 0, cache ? cache->heads : 0,
                         cache ? cache->d_out : 0, B, T, m->num_heads, m->d_out);
    return ATTN_OK;
}

attn_status attn_mha_forward(const attn_mha *m, const float *x, int B, int T, float *out,
                             const attn_forward_mode *mode, attn_attention_cache *cache,
                             attn_error *err) {
    attn_status st = check_call(m, B, T, cache, err);
    if (st != ATTN_OK) return st;
    if (m->path == ATTN_MHA_FUSED) return attn_mha_fused_forward(m, x, B, T, out, mode, cache, err);
    if (!cache->attn_weights)
        return attn_fail(err, ATTN_ERR_STATE,
                         "MultiHeadAttention: the reference path needs a cache from "
                         "attn_attention_cache_init");
    const size_t N = (size_t)B * (size_t)T;
    attn_linear_forward(&m->W_query, x, cache->queries, N);
    attn_linear_forward(&m->W_key, x, cache->keys, N);
    attn_linear_forward(&m->W_value, x, cache->values, N);
    const attn_core_shape s = {B, T, m->num_heads, m->head_dim, 1};
    st = attn_core_forward(&s, cache->queries, cache->keys, cache->values, cache->attn_weights,
                           cache->dropped_weights, cache->keep, &cache->dropout_applied, m->dropout,
                           mode, cache->context, err);
    if (st != ATTN_OK) return st;
    attn_linear_forward(&m->out_proj, cache->context, out, N);
    return ATTN_OK;
}

attn_status attn_mha_backward(attn_mha *m, const float *x, int B, int T, const float *d_out,
                              float *dx, const attn_attention_cache *cache, attn_error *err) {
    attn_status st = check_call(m, B, T, cache, err);
    if (st != ATTN_OK) return st;
    if (m->path == ATTN_MHA_FUSED)
        return attn_mha_fused_backward(m, x, B, T, d_out, dx, cache, err);
    if (!cache->attn_weights)
        return attn_fail(err, ATTN_ERR_STATE,
                         "MultiHeadAttention: the reference path needs a cache from "
                         "attn_attention_cache_init");
    const size_t N = (size_t)B * (size_t)T;
    memset(cache->d_context, 0, N * (size_t)m->d_out * sizeof(float));
    attn_linear_backward(&m->out_proj, cache->context, d_out, cache->d_context, N);
    const attn_core_shape s = {B, T, m->num_heads, m->head_dim, 1};
    attn_core_backward(&s, cache->queries, cache->keys, cache->values, cache->attn_weights,
                       cache->dropped_weights, cache->keep, cache->dropout_applied, m->dropout,
                       cache->d_context, cache->d_queries, cache->d_keys, cache->d_values,
                       cache->scratch);
    attn_linear_backward(&m->W_query, x, cache->d_queries, dx, N);
    attn_linear_backward(&m->W_key, x, cache->d_keys, dx, N);
    attn_linear_backward(&m->W_value, x, cache->d_values, dx, N);
    return ATTN_OK;
}

attn_status attn_mha_cache_init(attn_attention_cache *cache, const attn_mha *m, int B, int T,
                                attn_error *err) {
    if (m->path == ATTN_MHA_REFERENCE)
        return attn_attention_cache_init(cache, B, T, m->num_heads, m->d_out, err);
    memset(cache, 0, sizeof *cache);
    if (B <= 0 || T <= 0)
        return attn_fail(err, ATTN_ERR_INVALID_ARG, "attention cache needs B, T > 0 (got %d, %d)",
                         B, T);
    const size_t n = (size_t)B * (size_t)T * (size_t)m->d_out;
    cache->B = B;
    cache->T = T;
    cache->heads = m->num_heads;
    cache->d_out = m->d_out;
    /* Only what the fused path reads: no (B, heads, T, T) buffers. */
    cache->context = attn_alloc_huge(n * sizeof(float));
    cache->d_context = attn_alloc_huge(n * sizeof(float));
    if (!cache->context || !cache->d_context) {
        attn_attention_cache_free(cache);
        return attn_fail(err, ATTN_ERR_NOMEM,
                         "out of memory allocating an attention cache for B = %d, T = %d", B, T);
    }
    return ATTN_OK;
}
