/* CausalAttention (chapter 3.5; see attn/causal_attention.h) and the
 * attention cache shared with MultiHeadAttention. */
#include "attn/causal_attention.h"

#include <stdlib.h>
#include <string.h>

#include "attention_core.h"
#include "mha_fused.h"

attn_status attn_attention_cache_init(attn_attention_cache *cache, int B, int T, int heads,
                                      int d_out, attn_error *err) {
    memset(cache, 0, sizeof *cache);
    if (B <= 0 || T <= 0 || heads <= 0 || d_out <= 0)
        return attn_fail(err, ATTN_ERR_INVALID_ARG,
                         "attention cache needs B, T, heads, d_out > 0 (got %d, %d, %d, %d)", B, T,
                         heads, d_out);
    const size_t n = (size_t)B * (size_t)T * (size_t)d_out;
    const size_t nw = (size_t)B * (size_t)heads * (size_t)T * (size_t)T;
    cache->B = B;
    cache->T = T;
    cache->heads = heads;
    cache->d_out = d_out;
    cache->queries = malloc(n * sizeof(float));
    cache->keys = malloc(n * sizeof(float));
    cache->values = malloc(n * sizeof(float));
    cache->attn_weights = malloc(nw * sizeof(float));
    cache->dropped_weights = malloc(nw * sizeof(float));
    cache->keep = malloc(nw);
    cache->context = malloc(n * sizeof(float));
    cache->d_queries = malloc(n * sizeof(float));
    cache->d_keys = malloc(n * sizeof(float));
    cache->d_values = malloc(n * sizeof(float));
    cache->d_context = malloc(n * sizeof(float));
    cache->scratch = malloc(2 * (size_t)T * (size_t)T * sizeof(float));
    if (!cache->queries || !cache->keys || !cache->values || !cache->attn_weights ||
        !cache->dropped_weights || !cache->keep || !cache->context || !cache->d_queries ||
        !cache->d_keys || !cache->d_values || !cache->d_context || !cache->scratch) {
        attn_attention_cache_free(cache);
        return attn_fail(err, ATTN_ERR_NOMEM,
                         "out of memory allocating an attention cache for B = %d, T = %d", B, T);
    }
    return ATTN_OK;
}

void attn_attention_cache_free(attn_attention_cache *cache) {
    free(cache->q_raw);
    free(cache->k_raw);
    free(cache->d_raw);
    free(cache->q_rstd);
    free(cache->k_rstd);
    free(cache->queries);
    free(cache->keys);
    free(cache->values);
    free(cache->attn_weights);
    free(cache->dropped_weights);
    free(cache->keep);
    free(cache->context);
    free(cache->d_queries);
    free(cache->d_keys);
    free(cache->d_values);
    free(cache->d_context);
    free(cache->scratch);
    attn_mha_fused_state_free(cache->fused);
    memset(cache, 0, sizeof *cache);
}

attn_status attn_causal_attention_init(attn_causal_attention *m, int d_in, int d_out,
                                       int context_length, double dropout, int qkv_bias,
                                       attn_rng *rng, attn_error *err) {
    memset(m, 0, sizeof *m);
    if (d_in <= 0)
        return attn_fail(err, ATTN_ERR_INVALID_ARG, "CausalAttention: d_in must be > 0, got %d",
                         d_in);
    if (d_out <= 0)
        return attn_fail(err, ATTN_ERR_INVALID_ARG, "CausalAttention: d_out must be > 0, got %d",
                         d_out);
    if (context_length <= 0)
        return attn_fail(err, ATTN_ERR_INVALID_ARG,
                         "CausalAttention: context_length must be > 0, got %d", context_length);
    attn_status st = attn_check_dropout(dropout, "CausalAttention", err);
    if (st != ATTN_OK) return st;
    m->d_in = d_in;
    m->d_out = d_out;
    m->context_length = context_length;
    m->qkv_bias = qkv_bias ? 1 : 0;
    m->dropout = dropout;
    if ((st = attn_linear_init(&m->W_query, d_in, d_out, qkv_bias, rng, err)) != ATTN_OK ||
        (st = attn_linear_init(&m->W_key, d_in, d_out, qkv_bias, rng, err)) != ATTN_OK ||
        (st = attn_linear_init(&m->W_value, d_in, d_out, qkv_bias, rng, err)) != ATTN_OK) {
        attn_causal_attention_free(m);
        return st;
    }
    return ATTN_OK;
}

void attn_causal_attention_free(attn_causal_attention *m) {
    attn_linear_free(&m->W_query);
    attn_linear_free(&m->W_key);
    attn_linear_free(&m->W_value);
}

attn_status attn_causal_attention_params(attn_causal_attention *m, const char *prefix,
                                         attn_param_list *list, attn_error *err) {
    return attn_qkv_params(&m->W_query, &m->W_key, &m->W_value, prefix, list, err);
}

static attn_status check_call(const attn_causal_attention *m, int B, int T,
                              const attn_attention_cache *cache, attn_error *err) {
    if (B <= 0 || T <= 0)
        return attn_fail(err, ATTN_ERR_SHAPE, "CausalAttention: B and T must be > 0 (got %d, %d)",
                         B, T);
    if (T > m->context_length)
        return attn_fail(err, ATTN_ERR_SHAPE,
                         "CausalAttention: sequence length T = %d exceeds context_length = %d", T,
                         m->context_length);
    if (!cache || cache->B != B || cache->T != T || cache->heads != 1 || cache->d_out != m->d_out)
        return attn_fail(err, ATTN_ERR_SHAPE,
                         "CausalAttention: cache was made for (B %d, T %d, heads %d, d_out %d), "
                         "not (B %d, T %d, heads 1, d_out %d)",
                         cache ? cache->B : 0, cache ? cache->T : 0, cache ? cache->heads : 0,
                         cache ? cache->d_out : 0, B, T, m->d_out);
    return ATTN_OK;
}

attn_status attn_causal_attention_forward(const attn_causal_attention *m, const float *x, int B,
                                          int T, float *context, const attn_forward_mode *mode,
                                          attn_attention_cache *cache, attn_error *err) {
    attn_status st = check_call(m, B, T, cache, err);
    if (st != ATTN_OK) return st;
    const size_t N = (size_t)B * (size_t)T;
    attn_linear_forward(&m->W_query, x, cache->queries, N);
    attn_linear_forward(&m->W_key, x, cache->keys, N);
    attn_linear_forward(&m->W_value, x, cache->values, N);
    const attn_core_shape s = {B, T, 1, m->d_out, 1, NULL};
    st = attn_core_forward(&s, cache->queries, cache->keys, cache->values, cache->attn_weights,
                           cache->dropped_weights, cache->keep, &cache->dropout_applied, m->dropout,
                           mode, cache->context, err);
    if (st != ATTN_OK) return st;
    if (context != cache->context)
        memcpy(context, cache->context, N * (size_t)m->d_out * sizeof(float));
    return ATTN_OK;
}

attn_status attn_causal_attention_backward(attn_causal_attention *m, const float *x, int B, int T,
                                           const float *d_context, float *dx,
                                           const attn_attention_cache *cache, attn_error *err) {
    attn_status st = check_call(m, B, T, cache, err);
    if (st != ATTN_OK) return st;
    const size_t N = (size_t)B * (size_t)T;
    const attn_core_shape s = {B, T, 1, m->d_out, 1, NULL};
    attn_core_backward(&s, cache->queries, cache->keys, cache->values, cache->attn_weights,
                       cache->dropped_weights, cache->keep, cache->dropout_applied, m->dropout,
                       d_context, cache->d_queries, cache->d_keys, cache->d_values, cache->scratch);
    attn_linear_backward(&m->W_query, x, cache->d_queries, dx, N);
    attn_linear_backward(&m->W_key, x, cache->d_keys, dx, N);
    attn_linear_backward(&m->W_value, x, cache->d_values, dx, N);
    return ATTN_OK;
}
