/* MultiHeadAttentionWrapper (chapter 3.6.1; see attn/multi_head_attention.h):
 * num_heads CausalAttention heads run in turn, outputs concatenated. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attention_core.h"
#include "attn/multi_head_attention.h"
#include "base/buffers.h"

attn_status attn_mha_wrapper_init(attn_mha_wrapper *m, int d_in, int d_out, int context_length,
                                  double dropout, int num_heads, int qkv_bias, attn_rng *rng,
                                  attn_error *err) {
    memset(m, 0, sizeof *m);
    if (d_in <= 0)
        return attn_fail(err, ATTN_ERR_INVALID_ARG,
                         "MultiHeadAttentionWrapper: d_in must be > 0, got %d", d_in);
    if (d_out <= 0)
        return attn_fail(err, ATTN_ERR_INVALID_ARG,
                         "MultiHeadAttentionWrapper: d_out must be > 0, got %d", d_out);
    if (context_length <= 0)
        return attn_fail(err, ATTN_ERR_INVALID_ARG,
                         "MultiHeadAttentionWrapper: context_length must be > 0, got %d",
                         context_length);
    if (num_heads <= 0)
        return attn_fail(err, ATTN_ERR_INVALID_ARG,
                         "MultiHeadAttentionWrapper: num_heads must be > 0, got %d", num_heads);
    attn_status st = attn_check_dropout(dropout, "MultiHeadAttentionWrapper", err);
    if (st != ATTN_OK) return st;
    m->heads = calloc((size_t)num_heads, sizeof *m->heads);
    if (!m->heads)
        return attn_fail(err, ATTN_ERR_NOMEM, "out of memory allocating %d heads", num_heads);
    m->d_in = d_in;
    m->d_out = d_out;
    m->context_length = context_length;
    m->num_heads = num_heads;
    m->qkv_bias = qkv_bias ? 1 : 0;
    m->dropout = dropout;
    /* Heads are built one after the other, as nn.ModuleList([...]) does. */
    for (int h = 0; h < num_heads; h++) {
        st = attn_causal_attention_init(&m->heads[h], d_in, d_out, context_length, dropout,
                                        qkv_bias, rng, err);
        if (st != ATTN_OK) {
            attn_mha_wrapper_free(m);
            return st;
        }
    }
    return ATTN_OK;
}

void attn_mha_wrapper_free(attn_mha_wrapper *m) {
    if (m->heads)
        for (int h = 0; h < m->num_heads; h++)
            attn_causal_attention_free(&m->heads[h]);
    free(m->heads);
    memset(m, 0, sizeof *m);
}

attn_status attn_mha_wrapper_params(attn_mha_wrapper *m, const char *prefix, attn_param_list *list,
                                    attn_error *err) {
    for (int h = 0; h < m->num_heads; h++) {
        char p[ATTN_PARAM_NAME_MAX];
        int n = snprintf(p, sizeof p, "%sheads.%d.", prefix ? prefix : "", h);
        if (n < 0 || (size_t)n >= sizeof p)
            return attn_fail(err, ATTN_ERR_INVALID_ARG, "parameter prefix '%s' is too long",
                             prefix ? prefix : "");
        attn_status st = attn_causal_attention_params(&m->heads[h], p, list, err);
        if (st != ATTN_OK) return st;
    }
    return ATTN_OK;
}

/* The wrapper cache's own buffers (each head's cache is its own), listed
 * once: heads caches and the (B T, d_out) concatenation. */
static int cache_buffers(attn_mha_wrapper_cache *cache, size_t heads, size_t n, attn_bufs_op op) {
    const attn_buf t[] = {ATTN_BUF(cache->heads, heads), ATTN_BUF(cache->head_out, n)};
    return ATTN_BUFS(t, op);
}

attn_status attn_mha_wrapper_cache_init(attn_mha_wrapper_cache *cache, const attn_mha_wrapper *m,
                                        int B, int T, attn_error *err) {
    memset(cache, 0, sizeof *cache);
    if (B <= 0 || T <= 0)
        return attn_fail(err, ATTN_ERR_INVALID_ARG,
                         "MultiHeadAttentionWrapper cache needs B, T > 0 (got %d, %d)", B, T);
    if (cache_buffers(cache, (size_t)m->num_heads, (size_t)B * (size_t)T * (size_t)m->d_out,
                      ATTN_BUFS_ALLOC) != 0)
        return attn_fail(err, ATTN_ERR_NOMEM, "out of memory allocating the wrapper cache");
    cache->B = B;
    cache->T = T;
    cache->num_heads = m->num_heads;
    cache->d_out = m->d_out;
    for (int h = 0; h < m->num_heads; h++) {
        attn_status st = attn_attention_cache_init(&cache->heads[h], B, T, 1, m->d_out, err);
        if (st != ATTN_OK) {
            attn_mha_wrapper_cache_free(cache);
            return st;
        }
    }
    return ATTN_OK;
}

void attn_mha_wrapper_cache_free(attn_mha_wrapper_cache *cache) {
    if (cache->heads)
        for (int h = 0; h < cache->num_heads; h++)
            attn_attention_cache_free(&cache->heads[h]);
    cache_buffers(cache, 0, 0, ATTN_BUFS_FREE);
    memset(cache, 0, sizeof *cache);
}

static attn_status check_cache(const attn_mha_wrapper *m, int B, int T,
                               const attn_mha_wrapper_cache *cache, attn_error *err) {
    if (!cache || cache->B != B || cache->T != T || cache->num_heads != m->num_heads ||
        cache->d_out != m->d_out)
        return attn_fail(err, ATTN_ERR_SHAPE,
                         "MultiHeadAttentionWrapper: cache was made for (B %d, T %d, heads %d, "
                         "d_out %d), not (B %d, T %d, heads %d, d_out %d)",
                         cache ? cache->B : 0, cache ? cache->T : 0, cache ? cache->num_heads : 0,
                         cache ? cache->d_out : 0, B, T, m->num_heads, m->d_out);
    return ATTN_OK;
}

attn_status attn_mha_wrapper_forward(const attn_mha_wrapper *m, const float *x, int B, int T,
                                     float *out, const attn_forward_mode *mode,
                                     attn_mha_wrapper_cache *cache, attn_error *err) {
    attn_status st = check_cache(m, B, T, cache, err);
    if (st != ATTN_OK) return st;
    const size_t N = (size_t)B * (size_t)T, d = (size_t)m->d_out, H = (size_t)m->num_heads;
    for (size_t h = 0; h < H; h++) {
        attn_attention_cache *c = &cache->heads[h];
        /* Head h draws its dropout mask now: head 0's mask first, as torch.cat([head(x)...]). */
        st = attn_causal_attention_forward(&m->heads[h], x, B, T, c->context, mode, c, err);
        if (st != ATTN_OK) return st;
        for (size_t n = 0; n < N; n++)
            memcpy(out + n * H * d + h * d, c->context + n * d, d * sizeof(float));
    }
    return ATTN_OK;
}

attn_status attn_mha_wrapper_backward(attn_mha_wrapper *m, const float *x, int B, int T,
                                      const float *d_out, float *dx, attn_mha_wrapper_cache *cache,
                                      attn_error *err) {
    attn_status st = check_cache(m, B, T, cache, err);
    if (st != ATTN_OK) return st;
    const size_t N = (size_t)B * (size_t)T, d = (size_t)m->d_out, H = (size_t)m->num_heads;
    for (size_t h = 0; h < H; h++) {
        for (size_t n = 0; n < N; n++) /* this head's slice of d_out */
            memcpy(cache->head_out + n * d, d_out + n * H * d + h * d, d * sizeof(float));
        st = attn_causal_attention_backward(&m->heads[h], x, B, T, cache->head_out, dx,
                                            &cache->heads[h], err);
        if (st != ATTN_OK) return st;
    }
    return ATTN_OK;
}
