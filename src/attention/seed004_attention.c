/* Seed 004's AttentionHead and MultiHeadAttention (see attn/seed004_attention.h). */
#include "attn/seed004_attention.h"

#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attention_core.h"
#include "attn/softmax.h"
#include "base/buffers.h"

static attn_status check_rate(double p, const char *what, attn_error *err) {
    if (!(p >= 0.0 && p < 1.0))
        return attn_fail(err, ATTN_ERR_INVALID_ARG, "%s: dropout_rate must be in [0, 1), got %g",
                         what, p);
    return ATTN_OK;
}

/* ------------------------------------------------------------ AttentionHead */

attn_status attn_seed004_head_init(attn_seed004_head *h, int embedding_dim, int head_size,
                                   int context_size, double dropout_rate, int use_bias,
                                   attn_rng *rng, attn_error *err) {
    memset(h, 0, sizeof *h);
    if (embedding_dim <= 0 || head_size <= 0 || context_size <= 0)
        return attn_fail(err, ATTN_ERR_INVALID_ARG,
                         "AttentionHead: embedding_dim, head_size and context_size must be > 0 "
                         "(got %d, %d, %d)",
                         embedding_dim, head_size, context_size);
    attn_status s = check_rate(dropout_rate, "AttentionHead", err);
    if (s != ATTN_OK) return s;
    h->embedding_dim = embedding_dim;
    h->head_size = head_size;
    h->context_size = context_size;
    h->use_bias = use_bias ? 1 : 0;
    h->dropout_rate = dropout_rate;
    /* Constructor order: Q_weights, K_weights, V_weights. */
    s = attn_linear_init(&h->Q_weights, embedding_dim, head_size, h->use_bias, rng, err);
    if (s == ATTN_OK)
        s = attn_linear_init(&h->K_weights, embedding_dim, head_size, h->use_bias, rng, err);
    if (s == ATTN_OK)
        s = attn_linear_init(&h->V_weights, embedding_dim, head_size, h->use_bias, rng, err);
    if (s != ATTN_OK) attn_seed004_head_free(h);
    return s;
}

void attn_seed004_head_free(attn_seed004_head *h) {
    attn_linear_free(&h->Q_weights);
    attn_linear_free(&h->K_weights);
    attn_linear_free(&h->V_weights);
}

attn_status attn_seed004_head_params(attn_seed004_head *h, const char *prefix,
                                     attn_param_list *list, attn_error *err) {
    const char *pre = prefix ? prefix : "";
    const char *names[3] = {"Q_weights.", "K_weights.", "V_weights."};
    attn_linear *layers[3] = {&h->Q_weights, &h->K_weights, &h->V_weights};
    for (int i = 0; i < 3; i++) {
        char p[ATTN_PARAM_NAME_MAX];
        int n = snprintf(p, sizeof p, "%s%s", pre, names[i]);
        if (n < 0 || (size_t)n >= sizeof p)
            return attn_fail(err, ATTN_ERR_INVALID_ARG, "parameter prefix '%s' is too long", pre);
        attn_status s = attn_linear_params(layers[i], p, list, err);
        if (s != ATTN_OK) return s;
    }
    return ATTN_OK;
}

/* A head's cache buffers, listed once: nq = B T head_size, nw = B T T;
 * d_weights is also the attention core's backward scratch, 2 (T, T). */
static int head_cache_buffers(attn_seed004_head_cache *c, size_t nq, size_t nw, size_t scratch,
                              attn_bufs_op op) {
    const attn_buf t[] = {
        ATTN_BUF(c->Q, nq),       ATTN_BUF(c->K, nq),
        ATTN_BUF(c->V, nq),       ATTN_BUF(c->dQ, nq),
        ATTN_BUF(c->dK, nq),      ATTN_BUF(c->dV, nq),
        ATTN_BUF(c->weights, nw), ATTN_BUF(c->dropped, nw),
        ATTN_BUF(c->keep, nw),    ATTN_BUF(c->d_weights, nw > scratch ? nw : scratch),
    };
    return ATTN_BUFS(t, op);
}

void attn_seed004_head_cache_free(attn_seed004_head_cache *c) {
    head_cache_buffers(c, 0, 0, 0, ATTN_BUFS_FREE);
    memset(c, 0, sizeof *c);
}

attn_status attn_seed004_head_cache_init(attn_seed004_head_cache *c, const attn_seed004_head *h,
                                         int B, int T, attn_error *err) {
    memset(c, 0, sizeof *c);
    if (B <= 0 || T <= 0)
        return attn_fail(err, ATTN_ERR_SHAPE, "AttentionHead: B and T must be > 0 (got %d, %d)", B,
                         T);
    const size_t nq = (size_t)B * (size_t)T * (size_t)h->head_size;
    const size_t tt = (size_t)T * (size_t)T;
    if (head_cache_buffers(c, nq, (size_t)B * tt, 2 * tt, ATTN_BUFS_ALLOC) != 0)
        return attn_fail(err, ATTN_ERR_NOMEM, "AttentionHead: out of memory for a (%d, %d) cache",
                         B, T);
    c->B = B;
    c->T = T;
    c->head_size = h->head_size;
    return ATTN_OK;
}

static attn_status head_check(const attn_seed004_head *h, int B, int T,
                              const attn_seed004_head_cache *c, attn_error *err) {
    if (B <= 0 || T <= 0)
        return attn_fail(err, ATTN_ERR_SHAPE, "AttentionHead: B and T must be > 0 (got %d, %d)", B,
                         T);
    if (T > h->context_size)
        return attn_fail(err, ATTN_ERR_SHAPE,
                         "AttentionHead: sequence length %d exceeds context_size %d", T,
                         h->context_size);
    if (!c || c->B != B || c->T != T || c->head_size != h->head_size)
        return attn_fail(err, ATTN_ERR_SHAPE,
                         "AttentionHead: cache was made for (B %d, T %d), not (B %d, T %d)",
                         c ? c->B : 0, c ? c->T : 0, B, T);
    return ATTN_OK;
}

attn_status attn_seed004_head_forward(const attn_seed004_head *h, const float *x, int B, int T,
                                      float *out, const attn_forward_mode *mode,
                                      attn_seed004_head_cache *c, attn_error *err) {
    attn_status s = head_check(h, B, T, c, err);
    if (s != ATTN_OK) return s;
    const double p = h->dropout_rate;
    const int drop = mode && mode->training && p > 0.0;
    if (drop && !mode->rng)
        return attn_fail(err, ATTN_ERR_INVALID_ARG,
                         "AttentionHead: training with dropout %g needs a generator", p);
    const size_t N = (size_t)B * (size_t)T;
    attn_linear_forward(&h->Q_weights, x, c->Q, N);
    attn_linear_forward(&h->K_weights, x, c->K, N);
    attn_linear_forward(&h->V_weights, x, c->V, N);
    /* One causal head: the attention core's (seed 004 masks, then divides by
     * K.shape[-1] ** 0.5 as a float32 scalar: the core's order). */
    const attn_core_shape cs = {B, T, 1, h->head_size, 1, NULL};
    return attn_core_forward(&cs, c->Q, c->K, c->V, c->weights, c->dropped, c->keep,
                             &c->dropout_applied, p, mode, out, err);
}

attn_status attn_seed004_head_backward(attn_seed004_head *h, const float *x, int B, int T,
                                       const float *d_out, float *dx, attn_seed004_head_cache *c,
                                       attn_error *err) {
    attn_status s = head_check(h, B, T, c, err);
    if (s != ATTN_OK) return s;
    const size_t N = (size_t)B * (size_t)T;
    const attn_core_shape cs = {B, T, 1, h->head_size, 1, NULL};
    attn_core_backward(&cs, c->Q, c->K, c->V, c->weights, c->dropped, c->keep, c->dropout_applied,
                       h->dropout_rate, d_out, c->dQ, c->dK, c->dV, c->d_weights);
    attn_linear_backward(&h->Q_weights, x, c->dQ, dx, N);
    attn_linear_backward(&h->K_weights, x, c->dK, dx, N);
    attn_linear_backward(&h->V_weights, x, c->dV, dx, N);
    return ATTN_OK;
}

/* ------------------------------------------------------- MultiHeadAttention */

attn_status attn_seed004_mha_init(attn_seed004_mha *m, int embedding_dim, int heads_num,
                                  int context_size, double dropout_rate, int use_bias,
                                  attn_rng *rng, attn_error *err) {
    memset(m, 0, sizeof *m);
    if (embedding_dim <= 0 || heads_num <= 0 || context_size <= 0)
        return attn_fail(err, ATTN_ERR_INVALID_ARG,
                         "MultiHeadAttention (seed 004): embedding_dim, heads_num and "
                         "context_size must be > 0 (got %d, %d, %d)",
                         embedding_dim, heads_num, context_size);
    if (embedding_dim % heads_num != 0)
        return attn_fail(err, ATTN_ERR_INVALID_ARG,
                         "MultiHeadAttention (seed 004): embedding_dim %d must be divisible by "
                         "heads_num %d",
                         embedding_dim, heads_num);
    attn_status s = check_rate(dropout_rate, "MultiHeadAttention (seed 004)", err);
    if (s != ATTN_OK) return s;
    m->embedding_dim = embedding_dim;
    m->heads_num = heads_num;
    m->head_size = embedding_dim / heads_num;
    m->context_size = context_size;
    m->use_bias = use_bias ? 1 : 0;
    m->dropout_rate = dropout_rate;
    m->heads = calloc((size_t)heads_num, sizeof *m->heads);
    if (!m->heads) return attn_fail(err, ATTN_ERR_NOMEM, "out of memory for %d heads", heads_num);
    for (int i = 0; i < heads_num && s == ATTN_OK; i++)
        s = attn_seed004_head_init(&m->heads[i], embedding_dim, m->head_size, context_size,
                                   dropout_rate, use_bias, rng, err);
    /* nn.Linear(E, E): bias on, whatever use_bias says. */
    if (s == ATTN_OK) s = attn_linear_init(&m->linear, embedding_dim, embedding_dim, 1, rng, err);
    if (s != ATTN_OK) attn_seed004_mha_free(m);
    return s;
}

void attn_seed004_mha_free(attn_seed004_mha *m) {
    if (m->heads)
        for (int i = 0; i < m->heads_num; i++)
            attn_seed004_head_free(&m->heads[i]);
    free(m->heads);
    m->heads = NULL;
    attn_linear_free(&m->linear);
}

attn_status attn_seed004_mha_params(attn_seed004_mha *m, const char *prefix, attn_param_list *list,
                                    attn_error *err) {
    const char *pre = prefix ? prefix : "";
    char p[ATTN_PARAM_NAME_MAX];
    for (int i = 0; i < m->heads_num; i++) {
        int n = snprintf(p, sizeof p, "%sheads.%d.", pre, i);
        if (n < 0 || (size_t)n >= sizeof p)
            return attn_fail(err, ATTN_ERR_INVALID_ARG, "parameter prefix '%s' is too long", pre);
        attn_status s = attn_seed004_head_params(&m->heads[i], p, list, err);
        if (s != ATTN_OK) return s;
    }
    int n = snprintf(p, sizeof p, "%slinear.", pre);
    if (n < 0 || (size_t)n >= sizeof p)
        return attn_fail(err, ATTN_ERR_INVALID_ARG, "parameter prefix '%s' is too long", pre);
    return attn_linear_params(&m->linear, p, list, err);
}

/* The MHA cache's own buffers (each head's are its own), listed once: N = B T
 * rows, E = embedding_dim, hs = head_size. */
static int mha_cache_buffers(attn_seed004_mha_cache *c, size_t heads, size_t N, size_t E, size_t hs,
                             attn_bufs_op op) {
    const attn_buf t[] = {
        ATTN_BUF(c->heads, heads),    ATTN_BUF(c->head_out, N * hs), ATTN_BUF(c->d_head, N * hs),
        ATTN_BUF(c->concat, N * E),   ATTN_BUF(c->proj, N * E),      ATTN_BUF(c->d_proj, N * E),
        ATTN_BUF(c->d_concat, N * E), ATTN_BUF(c->keep, N * E),
    };
    return ATTN_BUFS(t, op);
}

void attn_seed004_mha_cache_free(attn_seed004_mha_cache *c) {
    if (c->heads)
        for (int i = 0; i < c->n_heads; i++)
            attn_seed004_head_cache_free(&c->heads[i]);
    mha_cache_buffers(c, 0, 0, 0, 0, ATTN_BUFS_FREE);
    memset(c, 0, sizeof *c);
}

attn_status attn_seed004_mha_cache_init(attn_seed004_mha_cache *c, const attn_seed004_mha *m, int B,
                                        int T, attn_error *err) {
    memset(c, 0, sizeof *c);
    if (B <= 0 || T <= 0)
        return attn_fail(err, ATTN_ERR_SHAPE,
                         "MultiHeadAttention (seed 004): B and T must be > 0 (got %d, %d)", B, T);
    if (mha_cache_buffers(c, (size_t)m->heads_num, (size_t)B * (size_t)T, (size_t)m->embedding_dim,
                          (size_t)m->head_size, ATTN_BUFS_ALLOC) != 0)
        return attn_fail(err, ATTN_ERR_NOMEM, "out of memory for a (%d, %d) cache", B, T);
    c->n_heads = m->heads_num;
    for (int i = 0; i < m->heads_num; i++) {
        attn_status s = attn_seed004_head_cache_init(&c->heads[i], &m->heads[i], B, T, err);
        if (s != ATTN_OK) {
            attn_seed004_mha_cache_free(c);
            return s;
        }
    }
    c->B = B;
    c->T = T;
    return ATTN_OK;
}

static attn_status mha_check(const attn_seed004_mha *m, int B, int T,
                             const attn_seed004_mha_cache *c, attn_error *err) {
    if (!c || c->B != B || c->T != T || c->n_heads != m->heads_num)
        return attn_fail(err, ATTN_ERR_SHAPE,
                         "MultiHeadAttention (seed 004): cache was made for (B %d, T %d), not "
                         "(B %d, T %d)",
                         c ? c->B : 0, c ? c->T : 0, B, T);
    if (T > m->context_size)
        return attn_fail(err, ATTN_ERR_SHAPE,
                         "MultiHeadAttention (seed 004): sequence length %d exceeds "
                         "context_size %d",
                         T, m->context_size);
    return ATTN_OK;
}

attn_status attn_seed004_mha_forward(const attn_seed004_mha *m, const float *x, int B, int T,
                                     float *out, const attn_forward_mode *mode,
                                     attn_seed004_mha_cache *c, attn_error *err) {
    attn_status s = mha_check(m, B, T, c, err);
    if (s != ATTN_OK) return s;
    const size_t N = (size_t)B * (size_t)T, E = (size_t)m->embedding_dim;
    const size_t hs = (size_t)m->head_size;
    const double p = m->dropout_rate;
    for (int i = 0; i < m->heads_num; i++) {
        s = attn_seed004_head_forward(&m->heads[i], x, B, T, c->head_out, mode, &c->heads[i], err);
        if (s != ATTN_OK) return s;
        for (size_t n = 0; n < N; n++) /* torch.cat(heads_outputs, dim=-1) */
            memcpy(c->concat + n * E + (size_t)i * hs, c->head_out + n * hs, hs * sizeof(float));
    }
    attn_linear_forward(&m->linear, c->concat, c->proj, N);
    c->dropout_applied = mode && mode->training && p > 0.0;
    if (c->dropout_applied) {
        attn_dropout_mask(mode->rng, mode->stream, p, c->keep, N * E);
        attn_dropout_apply(c->proj, c->keep, p, out, N * E);
    } else {
        memcpy(out, c->proj, N * E * sizeof(float));
    }
    return ATTN_OK;
}

attn_status attn_seed004_mha_backward(attn_seed004_mha *m, const float *x, int B, int T,
                                      const float *d_out, float *dx, attn_seed004_mha_cache *c,
                                      attn_error *err) {
    attn_status s = mha_check(m, B, T, c, err);
    if (s != ATTN_OK) return s;
    const size_t N = (size_t)B * (size_t)T, E = (size_t)m->embedding_dim;
    const size_t hs = (size_t)m->head_size;
    if (c->dropout_applied) {
        memset(c->d_proj, 0, N * E * sizeof(float));
        attn_dropout_backward(d_out, c->keep, m->dropout_rate, c->d_proj, N * E);
    } else {
        memcpy(c->d_proj, d_out, N * E * sizeof(float));
    }
    memset(c->d_concat, 0, N * E * sizeof(float));
    attn_linear_backward(&m->linear, c->concat, c->d_proj, c->d_concat, N);
    for (int i = 0; i < m->heads_num; i++) {
        for (size_t n = 0; n < N; n++)
            memcpy(c->d_head + n * hs, c->d_concat + n * E + (size_t)i * hs, hs * sizeof(float));
        s = attn_seed004_head_backward(&m->heads[i], x, B, T, c->d_head, dx, &c->heads[i], err);
        if (s != ATTN_OK) return s;
    }
    return ATTN_OK;
}
