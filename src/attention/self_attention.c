/* SelfAttention_v1 / SelfAttention_v2 (chapter 3.4; see attn/self_attention.h). */
#include "attn/self_attention.h"

#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attention_core.h"
#include "base/buffers.h"

/* The cache's buffers, listed once: n = T d_out, tt = T T. */
static int sa_cache_buffers(attn_sa_cache *c, size_t n, size_t tt, attn_bufs_op op) {
    const attn_buf t[] = {
        ATTN_BUF(c->queries, n),       ATTN_BUF(c->keys, n),         ATTN_BUF(c->values, n),
        ATTN_BUF(c->attn_weights, tt), ATTN_BUF(c->d_queries, n),    ATTN_BUF(c->d_keys, n),
        ATTN_BUF(c->d_values, n),      ATTN_BUF(c->scratch, 2 * tt),
    };
    return ATTN_BUFS(t, op);
}

attn_status attn_sa_cache_init(attn_sa_cache *cache, int T, int d_out, attn_error *err) {
    memset(cache, 0, sizeof *cache);
    if (T <= 0 || d_out <= 0)
        return attn_fail(err, ATTN_ERR_INVALID_ARG,
                         "self-attention cache needs T > 0 and d_out > 0 (got T = %d, d_out = %d)",
                         T, d_out);
    cache->T = T;
    cache->d_out = d_out;
    if (sa_cache_buffers(cache, (size_t)T * (size_t)d_out, (size_t)T * (size_t)T,
                         ATTN_BUFS_ALLOC) != 0) {
        memset(cache, 0, sizeof *cache);
        return attn_fail(err, ATTN_ERR_NOMEM, "out of memory allocating a cache for T = %d", T);
    }
    return ATTN_OK;
}

void attn_sa_cache_free(attn_sa_cache *cache) {
    sa_cache_buffers(cache, 0, 0, ATTN_BUFS_FREE);
    memset(cache, 0, sizeof *cache);
}

static attn_status check_dims(const char *what, int d_in, int d_out, attn_error *err) {
    if (d_in <= 0 || d_out <= 0)
        return attn_fail(err, ATTN_ERR_INVALID_ARG, "%s: d_in and d_out must be > 0 (got %d, %d)",
                         what, d_in, d_out);
    return ATTN_OK;
}

static attn_status check_call(const char *what, int T, int d_out, const attn_sa_cache *cache,
                              attn_error *err) {
    if (T <= 0) return attn_fail(err, ATTN_ERR_SHAPE, "%s: T must be > 0, got %d", what, T);
    if (!cache || cache->T != T || cache->d_out != d_out)
        return attn_fail(err, ATTN_ERR_SHAPE,
                         "%s: cache was made for T = %d, d_out = %d but the call has T = %d, "
                         "d_out = %d",
                         what, cache ? cache->T : 0, cache ? cache->d_out : 0, T, d_out);
    return ATTN_OK;
}

/* Runs the shared core on the projections already in the cache. */
static void sa_core_forward(const attn_sa_cache *c, int T, int d_out, float *context) {
    const attn_core_shape s = {1, T, 1, d_out, 0, NULL};
    int applied = 0;
    /* No dropout and no mode: cannot fail. */
    (void)attn_core_forward(&s, c->queries, c->keys, c->values, c->attn_weights, c->attn_weights,
                            NULL, &applied, 0.0, NULL, context, NULL);
}

static void sa_core_backward(const attn_sa_cache *c, int T, int d_out, const float *d_context) {
    const attn_core_shape s = {1, T, 1, d_out, 0, NULL};
    attn_core_backward(&s, c->queries, c->keys, c->values, c->attn_weights, c->attn_weights, NULL,
                       0, 0.0, d_context, c->d_queries, c->d_keys, c->d_values, c->scratch);
}

/* ---- SelfAttention_v1 ---------------------------------------------------- */

/* v1's weights and their gradients, listed once: n = d_in d_out each. */
static int sa_v1_buffers(attn_sa_v1 *m, size_t n, attn_bufs_op op) {
    const attn_buf t[] = {
        ATTN_BUF(m->W_query, n),      ATTN_BUF(m->W_key, n),      ATTN_BUF(m->W_value, n),
        ATTN_BUF(m->grad_W_query, n), ATTN_BUF(m->grad_W_key, n), ATTN_BUF(m->grad_W_value, n),
    };
    return ATTN_BUFS(t, op);
}

attn_status attn_sa_v1_init(attn_sa_v1 *m, int d_in, int d_out, attn_rng *rng, attn_error *err) {
    memset(m, 0, sizeof *m);
    attn_status st = check_dims("SelfAttention_v1", d_in, d_out, err);
    if (st != ATTN_OK) return st;
    const size_t n = (size_t)d_in * (size_t)d_out;
    m->d_in = d_in;
    m->d_out = d_out;
    if (sa_v1_buffers(m, n, ATTN_BUFS_ALLOC) != 0) {
        memset(m, 0, sizeof *m);
        return attn_fail(err, ATTN_ERR_NOMEM, "out of memory allocating SelfAttention_v1");
    }
    if (rng) { /* torch.rand(d_in, d_out) three times, in the constructor's order */
        attn_rng_rand(rng, m->W_query, n);
        attn_rng_rand(rng, m->W_key, n);
        attn_rng_rand(rng, m->W_value, n);
    }
    return ATTN_OK;
}

void attn_sa_v1_free(attn_sa_v1 *m) {
    sa_v1_buffers(m, 0, ATTN_BUFS_FREE);
    memset(m, 0, sizeof *m);
}

attn_status attn_sa_v1_params(attn_sa_v1 *m, const char *prefix, attn_param_list *list,
                              attn_error *err) {
    const int64_t shape[2] = {m->d_in, m->d_out};
    /* views: attn_module_bind points the fields at a caller's tensors */
    float **data[3] = {&m->W_query, &m->W_key, &m->W_value};
    float **grad[3] = {&m->grad_W_query, &m->grad_W_key, &m->grad_W_value};
    const char *names[3] = {"W_query", "W_key", "W_value"};
    attn_status s = ATTN_OK;
    for (int i = 0; i < 3 && s == ATTN_OK; i++)
        s = attn_param_list_add_view(list, prefix, names[i], data[i], grad[i], 2, shape,
                                     ATTN_ROLE_MATRIX, 0, err);
    return s;
}

/* y (T, d_out) = x (T, d_in) W (d_in, d_out) */
static void project(const float *x, const float *W, float *y, int T, int d_in, int d_out) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, d_out, d_in, 1.0f, x, d_in, W, d_out,
                0.0f, y, d_out);
}

/* dW += x^T dy; dx += dy W^T (when dx != NULL). */
static void project_backward(const float *x, const float *W, const float *dy, float *dW, float *dx,
                             int T, int d_in, int d_out) {
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, d_in, d_out, T, 1.0f, x, d_in, dy, d_out,
                1.0f, dW, d_out);
    if (dx)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, d_in, d_out, 1.0f, dy, d_out, W,
                    d_out, 1.0f, dx, d_in);
}

attn_status attn_sa_v1_forward(const attn_sa_v1 *m, const float *x, int T, float *context,
                               attn_sa_cache *cache, attn_error *err) {
    attn_status st = check_call("SelfAttention_v1", T, m->d_out, cache, err);
    if (st != ATTN_OK) return st;
    project(x, m->W_query, cache->queries, T, m->d_in, m->d_out);
    project(x, m->W_key, cache->keys, T, m->d_in, m->d_out);
    project(x, m->W_value, cache->values, T, m->d_in, m->d_out);
    sa_core_forward(cache, T, m->d_out, context);
    return ATTN_OK;
}

attn_status attn_sa_v1_backward(attn_sa_v1 *m, const float *x, int T, const float *d_context,
                                float *dx, const attn_sa_cache *cache, attn_error *err) {
    attn_status st = check_call("SelfAttention_v1", T, m->d_out, cache, err);
    if (st != ATTN_OK) return st;
    sa_core_backward(cache, T, m->d_out, d_context);
    project_backward(x, m->W_query, cache->d_queries, m->grad_W_query, dx, T, m->d_in, m->d_out);
    project_backward(x, m->W_key, cache->d_keys, m->grad_W_key, dx, T, m->d_in, m->d_out);
    project_backward(x, m->W_value, cache->d_values, m->grad_W_value, dx, T, m->d_in, m->d_out);
    return ATTN_OK;
}

/* ---- SelfAttention_v2 ---------------------------------------------------- */

attn_status attn_sa_v2_init(attn_sa_v2 *m, int d_in, int d_out, int qkv_bias, attn_rng *rng,
                            attn_error *err) {
    memset(m, 0, sizeof *m);
    attn_status st = check_dims("SelfAttention_v2", d_in, d_out, err);
    if (st != ATTN_OK) return st;
    m->d_in = d_in;
    m->d_out = d_out;
    m->qkv_bias = qkv_bias ? 1 : 0;
    if ((st = attn_linear_init(&m->W_query, d_in, d_out, qkv_bias, rng, err)) != ATTN_OK ||
        (st = attn_linear_init(&m->W_key, d_in, d_out, qkv_bias, rng, err)) != ATTN_OK ||
        (st = attn_linear_init(&m->W_value, d_in, d_out, qkv_bias, rng, err)) != ATTN_OK) {
        attn_sa_v2_free(m);
        return st;
    }
    return ATTN_OK;
}

void attn_sa_v2_free(attn_sa_v2 *m) {
    attn_linear_free(&m->W_query);
    attn_linear_free(&m->W_key);
    attn_linear_free(&m->W_value);
    memset(m, 0, sizeof *m);
}

attn_status attn_qkv_params(attn_linear *q, attn_linear *k, attn_linear *v, const char *prefix,
                            attn_param_list *list, attn_error *err) {
    attn_linear *layers[3] = {q, k, v};
    const char *names[3] = {"W_query.", "W_key.", "W_value."};
    const int group = attn_param_list_new_group(list); /* one product reads the three */
    for (int i = 0; i < 3; i++) {
        char full[ATTN_PARAM_NAME_MAX];
        int n = snprintf(full, sizeof full, "%s%s", prefix ? prefix : "", names[i]);
        if (n < 0 || (size_t)n >= sizeof full)
            return attn_fail(err, ATTN_ERR_INVALID_ARG, "parameter prefix '%s' is too long",
                             prefix ? prefix : "");
        const int at = list->count;
        attn_status s = attn_linear_params(layers[i], full, list, err);
        if (s != ATTN_OK) return s;
        list->items[at].group = group;
    }
    return ATTN_OK;
}

attn_status attn_sa_v2_params(attn_sa_v2 *m, const char *prefix, attn_param_list *list,
                              attn_error *err) {
    return attn_qkv_params(&m->W_query, &m->W_key, &m->W_value, prefix, list, err);
}

attn_status attn_sa_v2_forward(const attn_sa_v2 *m, const float *x, int T, float *context,
                               attn_sa_cache *cache, attn_error *err) {
    attn_status st = check_call("SelfAttention_v2", T, m->d_out, cache, err);
    if (st != ATTN_OK) return st;
    attn_linear_forward(&m->W_query, x, cache->queries, (size_t)T);
    attn_linear_forward(&m->W_key, x, cache->keys, (size_t)T);
    attn_linear_forward(&m->W_value, x, cache->values, (size_t)T);
    sa_core_forward(cache, T, m->d_out, context);
    return ATTN_OK;
}

attn_status attn_sa_v2_backward(attn_sa_v2 *m, const float *x, int T, const float *d_context,
                                float *dx, const attn_sa_cache *cache, attn_error *err) {
    attn_status st = check_call("SelfAttention_v2", T, m->d_out, cache, err);
    if (st != ATTN_OK) return st;
    sa_core_backward(cache, T, m->d_out, d_context);
    attn_linear_backward(&m->W_query, x, cache->d_queries, dx, (size_t)T);
    attn_linear_backward(&m->W_key, x, cache->d_keys, dx, (size_t)T);
    attn_linear_backward(&m->W_value, x, cache->d_values, dx, (size_t)T);
    return ATTN_OK;
}

static void transpose_into(float *dst, const float *src, int rows, int cols) {
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols; c++)
            dst[(size_t)c * (size_t)rows + (size_t)r] = src[(size_t)r * (size_t)cols + (size_t)c];
}

attn_status attn_sa_v1_from_v2(attn_sa_v1 *v1, const attn_sa_v2 *v2, attn_error *err) {
    if (v2->qkv_bias)
        return attn_fail(err, ATTN_ERR_INVALID_ARG,
                         "cannot transfer SelfAttention_v2 weights with qkv_bias to "
                         "SelfAttention_v1, which has no bias");
    if (v1->d_in != v2->d_in || v1->d_out != v2->d_out || !v1->W_query)
        return attn_fail(err, ATTN_ERR_SHAPE,
                         "SelfAttention_v1 (d_in %d, d_out %d) does not match SelfAttention_v2 "
                         "(d_in %d, d_out %d)",
                         v1->d_in, v1->d_out, v2->d_in, v2->d_out);
    /* v2 weights are (d_out, d_in); v1 holds (d_in, d_out). */
    transpose_into(v1->W_query, v2->W_query.weight, v2->d_out, v2->d_in);
    transpose_into(v1->W_key, v2->W_key.weight, v2->d_out, v2->d_in);
    transpose_into(v1->W_value, v2->W_value.weight, v2->d_out, v2->d_in);
    return ATTN_OK;
}
