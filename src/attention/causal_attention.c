/* CausalAttention (chapter 3.5; see attn/causal_attention.h) and the
 * attention cache shared with MultiHeadAttention. */
#include "attn/causal_attention.h"

#include <stdlib.h>
#include <string.h>

#include "attention_core.h"
#include "base/buffers.h"
#include "mha_fused.h"

/* The cache's buffers, listed once (the fused state is its own). */
static int cache_buffers(attn_attention_cache *c, const attn_cache_sizes *s, attn_bufs_op op) {
    const attn_buf_kind ctx = s->huge_context ? ATTN_BUF_HUGE : ATTN_BUF_ZEROED;
    const attn_buf t[] = {
        ATTN_BUF(c->queries, s->qkv),
        ATTN_BUF(c->keys, s->qkv),
        ATTN_BUF(c->values, s->qkv),
        ATTN_BUF(c->attn_weights, s->weights),
        ATTN_BUF(c->dropped_weights, s->weights),
        ATTN_BUF(c->keep, s->weights),
        ATTN_BUF_KIND(c->context, s->context, ctx),
        ATTN_BUF(c->d_queries, s->qkv),
        ATTN_BUF(c->d_keys, s->qkv),
        ATTN_BUF(c->d_values, s->qkv),
        ATTN_BUF_KIND(c->d_context, s->context, ctx),
        ATTN_BUF(c->scratch, s->scratch),
        ATTN_BUF(c->q_raw, s->q_raw),
        ATTN_BUF(c->k_raw, s->k_raw),
        ATTN_BUF(c->d_raw, s->q_raw),
        ATTN_BUF(c->q_rstd, s->q_rstd),
        ATTN_BUF(c->k_rstd, s->k_rstd),
    };
    return ATTN_BUFS(t, op);
}

attn_cache_sizes attn_cache_sizes_reference(int B, int T, int heads, int d_out) {
    const size_t n = (size_t)B * (size_t)T * (size_t)d_out, tt = (size_t)T * (size_t)T;
    const attn_cache_sizes s = {n, n, (size_t)B * (size_t)heads * tt, 2 * tt, 0, 0, 0, 0, 0};
    return s;
}

attn_status attn_attention_cache_alloc(attn_attention_cache *cache, int B, int T, int heads,
                                       int d_out, const attn_cache_sizes *s, attn_error *err) {
    memset(cache, 0, sizeof *cache);
    if (B <= 0 || T <= 0 || heads <= 0 || d_out <= 0)
        return attn_fail(err, ATTN_ERR_INVALID_ARG,
                         "attention cache needs B, T, heads, d_out > 0 (got %d, %d, %d, %d)", B, T,
                         heads, d_out);
    cache->B = cache->B_max = B;
    cache->T = cache->T_max = T;
    cache->heads = heads;
    cache->d_out = d_out;
    if (cache_buffers(cache, s, ATTN_BUFS_ALLOC) != 0)
        return attn_fail(err, ATTN_ERR_NOMEM,
                         "out of memory allocating an attention cache for B = %d, T = %d", B, T);
    return ATTN_OK;
}

attn_status attn_attention_cache_init(attn_attention_cache *cache, int B, int T, int heads,
                                      int d_out, attn_error *err) {
    const attn_cache_sizes s = attn_cache_sizes_reference(B, T, heads, d_out);
    return attn_attention_cache_alloc(cache, B, T, heads, d_out, &s, err);
}

void attn_attention_cache_free(attn_attention_cache *cache) {
    const attn_cache_sizes none = {0};
    cache_buffers(cache, &none, ATTN_BUFS_FREE);
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
