/* The book's FeedForward: Linear(C, 4C), GELU, Linear(4C, C) (see attn/feedforward.h). */
#include "attn/feedforward.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn/gelu.h"
#include "linear_step.h"

/* The activation between the two Linears: the book's GELU (tanh). The
 * forward, backward and step all go through these two. */
static void act_forward(const float *x, float *y, size_t n) {
    attn_gelu_forward(x, y, n);
}

static void act_backward_inplace(const float *x, float *d, size_t n) {
    attn_gelu_backward_inplace(x, d, n);
}

attn_status attn_feedforward_init(attn_feedforward *ff, int C, attn_rng *rng, attn_error *err) {
    memset(ff, 0, sizeof *ff);
    if (C <= 0)
        return attn_fail(err, ATTN_ERR_INVALID_ARG, "feedforward: emb_dim %d must be >= 1", C);
    ff->C = C;
    ff->hidden = 4 * C;
    /* nn.Sequential builds layers.0 then layers.2: that is the draw order. */
    attn_status s = attn_linear_init(&ff->fc1, C, ff->hidden, 1, rng, err);
    if (s == ATTN_OK) s = attn_linear_init(&ff->fc2, ff->hidden, C, 1, rng, err);
    if (s != ATTN_OK) attn_feedforward_free(ff);
    return s;
}

void attn_feedforward_free(attn_feedforward *ff) {
    attn_linear_free(&ff->fc1);
    attn_linear_free(&ff->fc2);
}

attn_status attn_feedforward_params(attn_feedforward *ff, const char *prefix, attn_param_list *list,
                                    attn_error *err) {
    char p[ATTN_PARAM_NAME_MAX];
    snprintf(p, sizeof p, "%slayers.0.", prefix ? prefix : "");
    attn_status s = attn_linear_params(&ff->fc1, p, list, err);
    if (s != ATTN_OK) return s;
    snprintf(p, sizeof p, "%slayers.2.", prefix ? prefix : "");
    return attn_linear_params(&ff->fc2, p, list, err);
}

attn_status attn_feedforward_cache_init(attn_feedforward_cache *cache, const attn_feedforward *ff,
                                        size_t N, attn_error *err) {
    memset(cache, 0, sizeof *cache);
    const size_t n = N * (size_t)ff->hidden;
    cache->h = malloc(n * sizeof(float));
    cache->g = malloc(n * sizeof(float));
    if (!cache->h || !cache->g) {
        attn_feedforward_cache_free(cache);
        return attn_fail(err, ATTN_ERR_NOMEM, "feedforward: out of memory for a %zu-row cache", N);
    }
    cache->N = N;
    return ATTN_OK;
}

void attn_feedforward_cache_free(attn_feedforward_cache *cache) {
    free(cache->h);
    free(cache->g);
    memset(cache, 0, sizeof *cache);
}

void attn_feedforward_forward(const attn_feedforward *ff, const float *x, float *y, size_t N,
                              attn_feedforward_cache *cache) {
    attn_linear_forward(&ff->fc1, x, cache->h, N);
    act_forward(cache->h, cache->g, N * (size_t)ff->hidden);
    attn_linear_forward(&ff->fc2, cache->g, y, N);
}

void attn_feedforward_backward(attn_feedforward *ff, const float *x, const float *dy, float *dx,
                               size_t N, const attn_feedforward_cache *cache, float *d_hidden) {
    const size_t nh = N * (size_t)ff->hidden;
    memset(d_hidden, 0, nh * sizeof(float));
    attn_linear_backward(&ff->fc2, cache->g, dy, d_hidden, N);
    act_backward_inplace(cache->h, d_hidden, nh);
    attn_linear_backward(&ff->fc1, x, d_hidden, dx, N);
}

void attn_feedforward_step(const attn_feedforward *ff, const uint16_t *w_bf16, const float *x,
                           float *hidden, float *y) {
    const int H = ff->hidden;
    const uint16_t *w2 = w_bf16 ? w_bf16 + (size_t)H * (size_t)ff->C : NULL;
    /* fc1 then the activation on the same rows, while they are in cache. */
#pragma omp for schedule(static)
    for (int r = 0; r < H; r += ATTN_STEP_ROWS) {
        const int r1 = r + ATTN_STEP_ROWS < H ? r + ATTN_STEP_ROWS : H;
        attn_linear_rows(&ff->fc1, w_bf16, x, hidden, r, r1);
        act_forward(hidden + r, hidden + r, (size_t)(r1 - r));
    }
    attn_linear_step(&ff->fc2, w2, hidden, y);
}

size_t attn_feedforward_bf16_numel(const attn_feedforward *ff) {
    return 2 * (size_t)ff->hidden * (size_t)ff->C;
}

void attn_feedforward_bf16_copy(const attn_feedforward *ff, uint16_t *w) {
    w += attn_linear_bf16_copy(&ff->fc1, w);
    attn_linear_bf16_copy(&ff->fc2, w);
}
