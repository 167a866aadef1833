/* MultiHeadAttention with weight splits (chapter 3.6.2; see
 * attn/multi_head_attention.h). The (B, T, d_out) projections are read as
 * (B, T, heads, head_dim) in place; the core writes the context back in the
 * same layout, which is exactly transpose(1, 2).contiguous().view(b, T, d_out). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attention_core.h"
#include "attn/engine_ops.h"
#include "attn/multi_head_attention.h"
#include "base/buffers.h"
#include "mha_fused.h"

/* The module's own buffers, listed once: W_query, W_key and W_value (and
 * their gradients) as one (d_out + 2 kv_dim, d_in) block each, so that the
 * fused path multiplies by the three in one product, in place. */
static int mha_buffers(attn_mha *m, size_t n, attn_bufs_op op) {
    const attn_buf t[] = {
        ATTN_BUF_KIND(m->w_qkv, n, ATTN_BUF_STREAMED),
        ATTN_BUF(m->grad_w_qkv, n),
    };
    return ATTN_BUFS(t, op);
}

attn_status attn_mha_init(attn_mha *m, int d_in, int d_out, int context_length, double dropout,
                          int num_heads, int qkv_bias, attn_rng *rng, attn_error *err) {
    const attn_attention_spec spec =
        attn_attention_book(num_heads, num_heads > 0 ? d_out / num_heads : 0, dropout);
    return attn_mha_init_spec(m, d_in, d_out, context_length, &spec, qkv_bias, rng, err);
}

/* m's sizes and variants from the arguments, checked; no memory yet. */
static attn_status mha_setup(attn_mha *m, int d_in, int d_out, int context_length,
                             const attn_attention_spec *spec, int qkv_bias, attn_error *err) {
    memset(m, 0, sizeof *m);
    const int num_heads = spec->heads;
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
    m->spec = *spec;
    m->spec.head_dim = d_out / num_heads;
    m->spec.kv_heads = attn_attention_kv_heads(spec);
    attn_status st = attn_attention_check(&m->spec, "MultiHeadAttention", err);
    if (st != ATTN_OK) return st;
    m->d_in = d_in;
    m->d_out = d_out;
    m->context_length = context_length;
    m->num_heads = num_heads;
    m->head_dim = d_out / num_heads;
    m->kv_dim = m->spec.kv_heads * m->head_dim;
    m->qkv_bias = qkv_bias ? 1 : 0;
    m->dropout = spec->dropout;
    return ATTN_OK;
}

attn_status attn_mha_init_spec(attn_mha *m, int d_in, int d_out, int context_length,
                               const attn_attention_spec *spec, int qkv_bias, attn_rng *rng,
                               attn_error *err) {
    attn_status st = mha_setup(m, d_in, d_out, context_length, spec, qkv_bias, err);
    if (st != ATTN_OK) return st;
    const size_t din = (size_t)d_in, q = (size_t)d_out * din, kv = (size_t)m->kv_dim * din;
    if (mha_buffers(m, q + 2 * kv, ATTN_BUFS_ALLOC) != 0)
        return attn_fail(err, ATTN_ERR_NOMEM, "MultiHeadAttention: out of memory for its weights");
    float *w = m->w_qkv, *g = m->grad_w_qkv;
    if ((st = attn_linear_init_into(&m->W_query, d_in, d_out, qkv_bias, rng, w, g, err)) !=
            ATTN_OK ||
        (st = attn_linear_init_into(&m->W_key, d_in, m->kv_dim, qkv_bias, rng, w + q, g + q,
                                    err)) != ATTN_OK ||
        (st = attn_linear_init_into(&m->W_value, d_in, m->kv_dim, qkv_bias, rng, w + q + kv,
                                    g + q + kv, err)) != ATTN_OK ||
        (st = attn_linear_init(&m->out_proj, d_out, d_out, 1, rng, err)) != ATTN_OK ||
        (m->spec.qk_norm &&
         ((st = attn_norm_init(&m->q_norm, m->head_dim, ATTN_NORM_RMSNORM, err)) != ATTN_OK ||
          (st = attn_norm_init(&m->k_norm, m->head_dim, ATTN_NORM_RMSNORM, err)) != ATTN_OK))) {
        attn_mha_free(m);
        return st;
    }
    return ATTN_OK;
}

attn_status attn_mha_init_view(attn_mha *m, int d_in, int d_out, int context_length,
                               const attn_attention_spec *spec, int qkv_bias, attn_error *err) {
    attn_status st = mha_setup(m, d_in, d_out, context_length, spec, qkv_bias, err);
    if (st == ATTN_OK) st = attn_linear_init_view(&m->W_query, d_in, d_out, qkv_bias, err);
    if (st == ATTN_OK) st = attn_linear_init_view(&m->W_key, d_in, m->kv_dim, qkv_bias, err);
    if (st == ATTN_OK) st = attn_linear_init_view(&m->W_value, d_in, m->kv_dim, qkv_bias, err);
    if (st == ATTN_OK) st = attn_linear_init_view(&m->out_proj, d_out, d_out, 1, err);
    if (st == ATTN_OK && m->spec.qk_norm)
        st = attn_norm_init_view(&m->q_norm, m->head_dim, ATTN_NORM_RMSNORM, err);
    if (st == ATTN_OK && m->spec.qk_norm)
        st = attn_norm_init_view(&m->k_norm, m->head_dim, ATTN_NORM_RMSNORM, err);
    return st;
}

void attn_mha_free(attn_mha *m) {
    attn_linear_free(&m->W_query);
    attn_linear_free(&m->W_key);
    attn_linear_free(&m->W_value);
    attn_linear_free(&m->out_proj);
    attn_layernorm_free(&m->q_norm);
    attn_layernorm_free(&m->k_norm);
    mha_buffers(m, 0, ATTN_BUFS_FREE);
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
    st = attn_linear_params(&m->out_proj, p, list, err);
    if (st != ATTN_OK || !m->spec.qk_norm) return st;
    static const char *const part[2] = {"q_norm.", "k_norm."};
    attn_layernorm *norm[2] = {&m->q_norm, &m->k_norm};
    for (int i = 0; i < 2 && st == ATTN_OK; i++) {
        snprintf(p, sizeof p, "%s%s", prefix ? prefix : "", part[i]);
        st = attn_layernorm_params(norm[i], p, list, err);
    }
    return st;
}

/* forward: (B, T) within what the cache was made for; backward: the shape
 * of the forward it differentiates (cache->B, T). */
static attn_status check_call(const attn_mha *m, int B, int T, const attn_attention_cache *cache,
                              int forward, attn_error *err) {
    if (B <= 0 || T <= 0)
        return attn_fail(err, ATTN_ERR_SHAPE,
                         "MultiHeadAttention: B and T must be > 0 (got %d, %d)", B, T);
    if (T > m->context_length)
        return attn_fail(err, ATTN_ERR_SHAPE,
                         "MultiHeadAttention: sequence length T = %d exceeds context_length = %d",
                         T, m->context_length);
    if (!cache || cache->heads != m->num_heads || cache->d_out != m->d_out ||
        (forward && (B > cache->B_max || T > cache->T_max)))
        return attn_fail(err, ATTN_ERR_SHAPE,
                         "MultiHeadAttention: cache was made for (B %d, T %d, heads %d, d_out %d), "
                         "not (B %d, T %d, heads %d, d_out %d)",
                         cache ? cache->B_max : 0, cache ? cache->T_max : 0,
                         cache ? cache->heads : 0, cache ? cache->d_out : 0, B, T, m->num_heads,
                         m->d_out);
    if (!forward && (B != cache->B || T != cache->T))
        return attn_fail(err, ATTN_ERR_SHAPE,
                         "MultiHeadAttention: backward of (B %d, T %d) after a forward of (B %d, "
                         "T %d)",
                         B, T, cache->B, cache->T);
    return ATTN_OK;
}

/* The forward's check; the cache then holds a forward of (B, T). */
static attn_status forward_shape(const attn_mha *m, int B, int T, attn_attention_cache *cache,
                                 attn_error *err) {
    attn_status st = check_call(m, B, T, cache, 1, err);
    if (st == ATTN_OK) {
        cache->B = B;
        cache->T = T;
    }
    return st;
}

attn_status attn_mha_forward(const attn_mha *m, const float *x, int B, int T, float *out,
                             const attn_forward_mode *mode, attn_attention_cache *cache,
                             attn_error *err) {
    attn_status st = forward_shape(m, B, T, cache, err);
    if (st != ATTN_OK) return st;
    if (m->path == ATTN_MHA_FUSED)
        return attn_mha_fused_forward(NULL, m, x, B, T, out, mode, cache, err);
    if (!cache->attn_weights)
        return attn_fail(err, ATTN_ERR_STATE,
                         "MultiHeadAttention: the reference path needs a cache from "
                         "attn_attention_cache_init");
    if (m->spec.qk_norm && !cache->q_raw)
        return attn_fail(err, ATTN_ERR_STATE,
                         "MultiHeadAttention: qk_norm needs a cache from attn_mha_cache_init");
    const size_t N = (size_t)B * (size_t)T;
    attn_linear_forward(&m->W_query, x, cache->queries, N);
    attn_linear_forward(&m->W_key, x, cache->keys, N);
    attn_linear_forward(&m->W_value, x, cache->values, N);
    const attn_attention_spec *sp = &m->spec;
    if (sp->qk_norm) { /* each head's row of head_dim is one RMSNorm row */
        memcpy(cache->q_raw, cache->queries, N * (size_t)m->d_out * sizeof(float));
        memcpy(cache->k_raw, cache->keys, N * (size_t)m->kv_dim * sizeof(float));
        attn_layernorm_forward(&m->q_norm, cache->q_raw, cache->queries, NULL, cache->q_rstd,
                               N * (size_t)m->num_heads);
        attn_layernorm_forward(&m->k_norm, cache->k_raw, cache->keys, NULL, cache->k_rstd,
                               N * (size_t)sp->kv_heads);
    }
    attn_rope_apply(sp, cache->queries, N, T, (size_t)m->d_out, m->num_heads, 0, 0);
    attn_rope_apply(sp, cache->keys, N, T, (size_t)m->kv_dim, sp->kv_heads, 0, 0);
    const attn_core_shape s = {B, T, m->num_heads, m->head_dim, 1, sp};
    st = attn_core_forward(&s, cache->queries, cache->keys, cache->values, cache->attn_weights,
                           cache->dropped_weights, cache->keep, &cache->dropout_applied, m->dropout,
                           mode, cache->context, err);
    if (st != ATTN_OK) return st;
    attn_linear_forward(&m->out_proj, cache->context, out, N);
    return ATTN_OK;
}

attn_status attn_mha_backward(attn_mha *m, const float *x, int B, int T, const float *d_out,
                              float *dx, const attn_attention_cache *cache, attn_error *err) {
    attn_status st = check_call(m, B, T, cache, 0, err);
    if (st != ATTN_OK) return st;
    if (m->path == ATTN_MHA_FUSED)
        return attn_mha_fused_backward(NULL, m, x, B, T, d_out, dx, cache, err);
    if (!cache->attn_weights)
        return attn_fail(err, ATTN_ERR_STATE,
                         "MultiHeadAttention: the reference path needs a cache from "
                         "attn_attention_cache_init");
    const size_t N = (size_t)B * (size_t)T;
    memset(cache->d_context, 0, N * (size_t)m->d_out * sizeof(float));
    attn_linear_backward(&m->out_proj, cache->context, d_out, cache->d_context, N);
    const attn_attention_spec *sp = &m->spec;
    const attn_core_shape s = {B, T, m->num_heads, m->head_dim, 1, sp};
    attn_core_backward(&s, cache->queries, cache->keys, cache->values, cache->attn_weights,
                       cache->dropped_weights, cache->keep, cache->dropout_applied, m->dropout,
                       cache->d_context, cache->d_queries, cache->d_keys, cache->d_values,
                       cache->scratch);
    attn_rope_apply(sp, cache->d_queries, N, T, (size_t)m->d_out, m->num_heads, 0, 1);
    attn_rope_apply(sp, cache->d_keys, N, T, (size_t)m->kv_dim, sp->kv_heads, 0, 1);
    const float *dq = cache->d_queries, *dk = cache->d_keys;
    if (sp->qk_norm) { /* through the norms, into d_raw (q's, then k's) */
        memset(cache->d_raw, 0, N * (size_t)m->d_out * sizeof(float));
        attn_layernorm_backward(&m->q_norm, cache->q_raw, NULL, cache->q_rstd, cache->d_queries,
                                cache->d_raw, N * (size_t)m->num_heads);
        attn_linear_backward(&m->W_query, x, cache->d_raw, dx, N);
        memset(cache->d_raw, 0, N * (size_t)m->kv_dim * sizeof(float));
        attn_layernorm_backward(&m->k_norm, cache->k_raw, NULL, cache->k_rstd, cache->d_keys,
                                cache->d_raw, N * (size_t)sp->kv_heads);
        dk = cache->d_raw;
    } else {
        attn_linear_backward(&m->W_query, x, dq, dx, N);
    }
    attn_linear_backward(&m->W_key, x, dk, dx, N);
    attn_linear_backward(&m->W_value, x, cache->d_values, dx, N);
    return ATTN_OK;
}

/* The ops run the fused path only: the reference path is the module's own. */
static attn_status check_ops_call(const attn_engine *e, const attn_mha *m, int B, int T,
                                  const attn_attention_cache *cache, int forward, attn_error *err) {
    attn_status st = check_call(m, B, T, cache, forward, err);
    if (st == ATTN_OK && m->path != ATTN_MHA_FUSED)
        st = attn_fail(err, ATTN_ERR_INVALID_ARG,
                       "MultiHeadAttention: engine %s runs the fused path, not the reference one",
                       e->name);
    return st;
}

attn_status attn_mha_forward_ops(const attn_engine *e, const attn_mha *m, const float *x, int B,
                                 int T, float *out, const attn_forward_mode *mode,
                                 attn_attention_cache *cache, attn_error *err) {
    attn_status st = check_ops_call(e, m, B, T, cache, 1, err);
    if (st != ATTN_OK) return st;
    cache->B = B;
    cache->T = T;
    return attn_mha_fused_forward(e, m, x, B, T, out, mode, cache, err);
}

attn_status attn_mha_backward_ops(const attn_engine *e, attn_mha *m, const float *x, int B, int T,
                                  const float *d_out, float *dx, const attn_attention_cache *cache,
                                  attn_error *err) {
    attn_status st = check_ops_call(e, m, B, T, cache, 0, err);
    return st == ATTN_OK ? attn_mha_fused_backward(e, m, x, B, T, d_out, dx, cache, err) : st;
}

attn_status attn_mha_cache_init_any(attn_attention_cache *cache, const attn_mha *m, int B, int T,
                                    attn_error *err) {
    attn_cache_sizes s = attn_cache_sizes_reference(B, T, m->num_heads, m->d_out);
    if (m->spec.qk_norm) { /* QK-norm's inputs, 1/rms per head row, the gradient through it */
        const size_t N = (size_t)B * (size_t)T;
        s.q_raw = N * (size_t)m->d_out;
        s.k_raw = N * (size_t)m->kv_dim;
        s.q_rstd = N * (size_t)m->num_heads;
        s.k_rstd = N * (size_t)m->spec.kv_heads;
    }
    return attn_attention_cache_alloc(cache, B, T, m->num_heads, m->d_out, &s, err);
}

attn_status attn_mha_cache_init(attn_attention_cache *cache, const attn_mha *m, int B, int T,
                                attn_error *err) {
    if (m->path == ATTN_MHA_REFERENCE) return attn_mha_cache_init_any(cache, m, B, T, err);
    memset(cache, 0, sizeof *cache);
    if (B <= 0 || T <= 0)
        return attn_fail(err, ATTN_ERR_INVALID_ARG, "attention cache needs B, T > 0 (got %d, %d)",
                         B, T);
    /* Only what the fused path reads: no (B, heads, T, T) buffers. */
    attn_cache_sizes s = {0};
    s.context = (size_t)B * (size_t)T * (size_t)m->d_out;
    s.huge_context = 1;
    return attn_attention_cache_alloc(cache, B, T, m->num_heads, m->d_out, &s, err);
}
