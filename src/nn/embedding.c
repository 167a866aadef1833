/* nn.Embedding (see attn/embedding.h). */
#include "attn/embedding.h"

#include <stdlib.h>
#include <string.h>

#include "base/buffers.h"
#include "base/parallel.h"

/* The table and its gradient, listed once: n floats each. */
static int embedding_buffers(attn_embedding *e, size_t n, attn_bufs_op op) {
    const attn_buf t[] = {ATTN_BUF(e->weight, n), ATTN_BUF(e->grad_weight, n)};
    return ATTN_BUFS(t, op);
}

attn_status attn_embedding_init_view(attn_embedding *e, int num_embeddings, int dim,
                                     attn_error *err) {
    memset(e, 0, sizeof *e);
    if (num_embeddings <= 0 || dim <= 0)
        return attn_fail(err, ATTN_ERR_INVALID_ARG,
                         "embedding: num_embeddings %d and dim %d must be >= 1", num_embeddings,
                         dim);
    e->num_embeddings = num_embeddings;
    e->dim = dim;
    e->views = 1;
    return ATTN_OK;
}

void attn_embedding_draw(attn_rng *rng, float *values, size_t n) {
    attn_rng_normal(rng, values, n, 0.0f, 1.0f);
}

attn_status attn_embedding_init(attn_embedding *e, int num_embeddings, int dim, attn_rng *rng,
                                attn_error *err) {
    attn_status s = attn_embedding_init_view(e, num_embeddings, dim, err);
    if (s != ATTN_OK) return s;
    e->views = 0;
    const size_t n = (size_t)num_embeddings * (size_t)dim;
    if (embedding_buffers(e, n, ATTN_BUFS_ALLOC) != 0) {
        memset(e, 0, sizeof *e);
        return attn_fail(err, ATTN_ERR_NOMEM, "embedding: out of memory for %zu floats", n);
    }
    if (rng) attn_embedding_draw(rng, e->weight, n);
    return ATTN_OK;
}

void attn_embedding_free(attn_embedding *e) {
    if (!e->views) embedding_buffers(e, 0, ATTN_BUFS_FREE);
    memset(e, 0, sizeof *e);
}

attn_status attn_embedding_params(attn_embedding *e, const char *prefix, attn_param_list *list,
                                  attn_error *err) {
    const int64_t shape[2] = {e->num_embeddings, e->dim};
    return attn_param_list_add_view(list, prefix, "weight", &e->weight, &e->grad_weight, 2, shape,
                                    ATTN_ROLE_EMBEDDING, 0, err);
}

attn_status attn_embedding_check_ids(const attn_embedding *e, const int32_t *ids, size_t N,
                                     attn_error *err) {
    for (size_t i = 0; i < N; i++)
        if (ids[i] < 0 || ids[i] >= e->num_embeddings)
            return attn_fail(err, ATTN_ERR_INVALID_ARG,
                             "token id %ld at index %zu is outside [0, %d)", (long)ids[i], i,
                             e->num_embeddings);
    return ATTN_OK;
}

void attn_embedding_forward(const attn_embedding *e, const int32_t *ids, float *out, size_t N) {
    const size_t D = (size_t)e->dim;
    for (size_t i = 0; i < N; i++)
        memcpy(out + i * D, e->weight + (size_t)ids[i] * D, D * sizeof(float));
}

void attn_embedding_forward_add(const attn_embedding *e, const int32_t *ids, float *out, size_t N) {
    const size_t D = (size_t)e->dim;
    for (size_t i = 0; i < N; i++) {
        const float *w = e->weight + (size_t)ids[i] * D;
        float *o = out + i * D;
        for (size_t d = 0; d < D; d++)
            o[d] += w[d];
    }
}

void attn_embedding_backward(attn_embedding *e, const int32_t *ids, const float *dout, size_t N) {
    const size_t D = (size_t)e->dim;
    if (!e->grad_weight) return; /* frozen */
    /* Serial: ids repeat, so rows of grad_weight are shared. */
    for (size_t i = 0; i < N; i++) {
        float *g = e->grad_weight + (size_t)ids[i] * D;
        const float *d = dout + i * D;
        for (size_t j = 0; j < D; j++)
            g[j] += d[j];
    }
}

/* Row r of x += weight[pos0 + r % T]. */
static void add_position(const attn_embedding *e, float *x, size_t r, int T, int pos0) {
    const size_t C = (size_t)e->dim, t = (size_t)pos0 + r % (size_t)T;
    float *row = x + r * C;
    const float *pe = e->weight + t * C;
    for (size_t k = 0; k < C; k++)
        row[k] += pe[k];
}

void attn_embedding_add_positions(const attn_embedding *e, float *x, size_t N, int T, int pos0) {
    const long rows = (long)N;
    /* Not even a one-thread region for a generated token. */
    if (N * (size_t)e->dim < ATTN_PAR_MIN) {
        for (long r = 0; r < rows; r++)
            add_position(e, x, (size_t)r, T, pos0);
        return;
    }
#pragma omp parallel for schedule(static)
    for (long r = 0; r < rows; r++)
        add_position(e, x, (size_t)r, T, pos0);
}

void attn_embedding_add_positions_backward(attn_embedding *e, const float *dx, size_t N, int T) {
    const size_t C = (size_t)e->dim, Tz = (size_t)T;
    /* Serial, rows in order: each table row sums N / T rows in one order. */
    for (size_t r = 0; e->grad_weight && r < N; r++) {
        float *g = e->grad_weight + (r % Tz) * C;
        const float *d = dx + r * C;
        for (size_t k = 0; k < C; k++)
            g[k] += d[k];
    }
}
