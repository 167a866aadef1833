/* The book's FeedForward: Linear(C, 4C), GELU, Linear(4C, C), or another
 * activation (see attn/feedforward.h). */
#include "attn/feedforward.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn/engine_ops.h"
#include "attn/gelu.h"
#include "base/buffers.h"
#include "base/parallel.h"
#include "linear_on.h"
#include "linear_step.h"

static void act_fwd(const attn_engine *e, const attn_feedforward *ff, const float *h, float *g,
                    uint16_t *g16, size_t N) {
    if (e)
        e->ops->activation_forward(e, ff->act, h, g, g16, N, ff->hidden);
    else if (g16)
        attn_act_forward_bf16(ff->act, h, g16, N, (size_t)ff->hidden);
    else
        attn_act_forward(ff->act, h, g, N, (size_t)ff->hidden);
}

/* dh from dg: in place (dh == dg) for the element-wise ones; SwiGLU adds
 * into a zeroed dh of its own. */
static void act_bwd(const attn_engine *e, const attn_feedforward *ff, const float *h, float *dg,
                    float *dh, size_t N) {
    if (e)
        e->ops->activation_backward(e, ff->act, h, dg, dh, N, ff->hidden);
    else
        attn_act_backward(ff->act, h, dg, dh, N, (size_t)ff->hidden);
}

/* One token's hidden units [r0, r1) in place, on the calling thread. */
static void act_step(const attn_feedforward *ff, float *hidden, int r0, int r1) {
    const size_t n = (size_t)(r1 - r0);
    switch (ff->act) {
    case ATTN_ACT_GELU: attn_gelu_forward(hidden + r0, hidden + r0, n); break;
    case ATTN_ACT_RELU2: attn_relu2_forward(hidden + r0, hidden + r0, n); break;
    case ATTN_ACT_SWIGLU:
        attn_swiglu_pair(hidden + r0, hidden + ff->hidden + r0, hidden + r0, n);
        break;
    }
}

int attn_feedforward_hidden(int C, attn_act act) {
    return act == ATTN_ACT_SWIGLU ? 8 * ((C + 2) / 3) : 4 * C;
}

attn_status attn_feedforward_init(attn_feedforward *ff, int C, attn_rng *rng, attn_error *err) {
    return attn_feedforward_init_act(ff, C, ATTN_ACT_GELU, rng, err);
}

/* ff's sizes for C and act; view: its Linears without memory, else made
 * and drawn from rng (nn.Sequential builds layers.0 then layers.2: that is
 * the draw order). */
static attn_status ff_make(attn_feedforward *ff, int C, attn_act act, int view, attn_rng *rng,
                           attn_error *err) {
    memset(ff, 0, sizeof *ff);
    if (C <= 0)
        return attn_fail(err, ATTN_ERR_INVALID_ARG, "feedforward: emb_dim %d must be >= 1", C);
    if (act != ATTN_ACT_GELU && act != ATTN_ACT_RELU2 && act != ATTN_ACT_SWIGLU)
        return attn_fail(err, ATTN_ERR_INVALID_ARG, "feedforward: unknown activation %d", (int)act);
    ff->C = C;
    ff->act = act;
    ff->hidden = attn_feedforward_hidden(C, act);
    const int width = act == ATTN_ACT_SWIGLU ? 2 * ff->hidden : ff->hidden; /* [gate | value] */
    attn_status s = view ? attn_linear_init_view(&ff->fc1, C, width, 1, err)
                         : attn_linear_init(&ff->fc1, C, width, 1, rng, err);
    if (s == ATTN_OK)
        s = view ? attn_linear_init_view(&ff->fc2, ff->hidden, C, 1, err)
                 : attn_linear_init(&ff->fc2, ff->hidden, C, 1, rng, err);
    if (s != ATTN_OK) attn_feedforward_free(ff);
    return s;
}

attn_status attn_feedforward_init_act(attn_feedforward *ff, int C, attn_act act, attn_rng *rng,
                                      attn_error *err) {
    return ff_make(ff, C, act, 0, rng, err);
}

attn_status attn_feedforward_init_view(attn_feedforward *ff, int C, attn_act act, attn_error *err) {
    return ff_make(ff, C, act, 1, NULL, err);
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

/* The cache's buffers, listed once: N rows of fc1's output (h) and of the
 * activation's (g), and the bf16 operands x16 and g16 (only when bf16: made
 * at the first forward on the bf16 engine). */
static int cache_buffers(attn_feedforward_cache *cache, const attn_feedforward *ff, size_t N,
                         int bf16, attn_bufs_op op) {
    const size_t h = ff && !bf16 ? N * (size_t)ff->fc1.out_features : 0;
    const size_t g = ff && !bf16 ? N * (size_t)ff->hidden : 0;
    const size_t x16 = ff && bf16 ? N * (size_t)ff->C : 0;
    const size_t g16 = ff && bf16 ? N * (size_t)ff->hidden : 0;
    const attn_buf t[] = {ATTN_BUF(cache->h, h), ATTN_BUF(cache->g, g),
                          ATTN_BUF_KIND(cache->x16, x16, ATTN_BUF_HUGE),
                          ATTN_BUF_KIND(cache->g16, g16, ATTN_BUF_HUGE)};
    return ATTN_BUFS(t, op);
}

attn_status attn_feedforward_cache_init(attn_feedforward_cache *cache, const attn_feedforward *ff,
                                        size_t N, attn_error *err) {
    memset(cache, 0, sizeof *cache);
    if (cache_buffers(cache, ff, N, 0, ATTN_BUFS_ALLOC) != 0)
        return attn_fail(err, ATTN_ERR_NOMEM, "feedforward: out of memory for a %zu-row cache", N);
    cache->N = N;
    return ATTN_OK;
}

void attn_feedforward_cache_free(attn_feedforward_cache *cache) {
    cache_buffers(cache, NULL, 0, 0, ATTN_BUFS_FREE);
    memset(cache, 0, sizeof *cache);
}

/* bf16 GELU: each product's operand rounded once and kept for its backward
 * (fc2's in GELU's pass) rather than rounded again there; the same bits
 * either way. The cache's bf16 buffers are made on the first such forward. */
static int keeps_bf16(const attn_feedforward *ff, attn_feedforward_cache *cache, size_t N,
                      int bf16) {
    return bf16 && ff->act == ATTN_ACT_GELU && N <= cache->N && !ff->fc1.lora &&
           !ff->fc2.lora && /* an adapter reads fp32 inputs */
           (cache->g16 || cache_buffers(cache, ff, cache->N, 1, ATTN_BUFS_ALLOC) == 0);
}

static void ff_forward(const attn_engine *e, const attn_feedforward *ff, const float *x, float *y,
                       size_t N, attn_feedforward_cache *cache) {
    const int bf16 = e ? e->precision == ATTN_PRECISION_BF16 : ff->fc1.bf16 && ff->fc2.bf16;
    cache->g_in_bf16 = keeps_bf16(ff, cache, N, bf16);
    if (cache->g_in_bf16) {
        attn_linear_forward_on(e, &ff->fc1, x, cache->x16, cache->h, N);
        act_fwd(e, ff, cache->h, NULL, cache->g16, N);
        attn_linear_forward_on(e, &ff->fc2, NULL, cache->g16, y, N);
        return;
    }
    attn_linear_forward_on(e, &ff->fc1, x, NULL, cache->h, N);
    act_fwd(e, ff, cache->h, cache->g, NULL, N);
    attn_linear_forward_on(e, &ff->fc2, cache->g, NULL, y, N);
}

void attn_feedforward_forward(const attn_feedforward *ff, const float *x, float *y, size_t N,
                              attn_feedforward_cache *cache) {
    ff_forward(NULL, ff, x, y, N, cache);
}

void attn_feedforward_forward_ops(const attn_engine *e, const attn_feedforward *ff, const float *x,
                                  float *y, size_t N, attn_feedforward_cache *cache) {
    ff_forward(e, ff, x, y, N, cache);
}

size_t attn_feedforward_scratch(const attn_feedforward *ff) {
    return (size_t)ff->hidden * (ff->act == ATTN_ACT_SWIGLU ? 3 : 1);
}

static void ff_backward(const attn_engine *e, attn_feedforward *ff, const float *x, const float *dy,
                        float *dx, size_t N, const attn_feedforward_cache *cache, float *d_hidden) {
    /* SwiGLU: dh (N, 2H) first, then dg (N, H); else one (N, hidden) in place. */
    float *dh = d_hidden;
    float *dg = ff->act == ATTN_ACT_SWIGLU ? d_hidden + N * 2 * (size_t)ff->hidden : d_hidden;
    if (cache->g_in_bf16) { /* dg written, not added to: no clearing */
        attn_linear_backward_on(e, &ff->fc2, NULL, cache->g16, dy, dg, 0.0f, N);
        act_bwd(e, ff, cache->h, dg, dh, N);
        attn_linear_backward_on(e, &ff->fc1, NULL, cache->x16, dh, dx, 1.0f, N);
        return;
    }
    attn_par_zero(d_hidden, N * attn_feedforward_scratch(ff));
    attn_linear_backward_on(e, &ff->fc2, cache->g, NULL, dy, dg, 1.0f, N);
    act_bwd(e, ff, cache->h, dg, dh, N);
    attn_linear_backward_on(e, &ff->fc1, x, NULL, dh, dx, 1.0f, N);
}

void attn_feedforward_backward(attn_feedforward *ff, const float *x, const float *dy, float *dx,
                               size_t N, const attn_feedforward_cache *cache, float *d_hidden) {
    ff_backward(NULL, ff, x, dy, dx, N, cache, d_hidden);
}

void attn_feedforward_backward_ops(const attn_engine *e, attn_feedforward *ff, const float *x,
                                   const float *dy, float *dx, size_t N,
                                   const attn_feedforward_cache *cache, float *d_hidden) {
    ff_backward(e, ff, x, dy, dx, N, cache, d_hidden);
}

void attn_feedforward_step(const attn_feedforward *ff, const uint16_t *w_bf16, const float *x,
                           float *hidden, float *y) {
    attn_feedforward_step_batch(ff, w_bf16, 1, x, hidden, y);
}

void attn_feedforward_step_batch(const attn_feedforward *ff, const uint16_t *w_bf16, int n,
                                 const float *x, float *hidden, float *y) {
    const int H = ff->hidden, C = ff->C, W1 = ff->fc1.out_features;
    const uint16_t *w2 = w_bf16 ? w_bf16 + (size_t)W1 * (size_t)C : NULL;
    if (ff->act == ATTN_ACT_SWIGLU) {
        /* A gate row and its value row are H rows apart: all of fc1 first. */
        attn_linear_step_n(&ff->fc1, w_bf16, x, (size_t)C, hidden, n);
        attn_feedforward_act_step(ff, hidden, n);
    } else {
        /* fc1 then the activation on the same rows, while they are in cache. */
#pragma omp for schedule(static)
        for (int r = 0; r < H; r += ATTN_STEP_ROWS) {
            const int r1 = r + ATTN_STEP_ROWS < H ? r + ATTN_STEP_ROWS : H;
            attn_linear_rows_n(&ff->fc1, w_bf16, x, (size_t)C, hidden, (size_t)W1, n, r, r1);
            for (int s = 0; s < n; s++)
                act_step(ff, hidden + (size_t)s * (size_t)W1, r, r1);
        }
    }
    attn_linear_step_n(&ff->fc2, w2, hidden, (size_t)W1, y, n);
}

void attn_feedforward_act_step(const attn_feedforward *ff, float *hidden, int n) {
    const int H = ff->hidden;
    const size_t W1 = (size_t)ff->fc1.out_features;
    /* The chunks of ATTN_STEP_ROWS the fused loop above and
     * attn_linear_step_ld take, statically split as theirs (a vector
     * kernel's tail falls where it falls there; a thread activates the
     * rows of fc1 it wrote). */
#pragma omp for schedule(static)
    for (int r = 0; r < H; r += ATTN_STEP_ROWS)
        for (int s = 0; s < n; s++)
            act_step(ff, hidden + (size_t)s * W1, r,
                     r + ATTN_STEP_ROWS < H ? r + ATTN_STEP_ROWS : H);
}

size_t attn_feedforward_bf16_numel(const attn_feedforward *ff) {
    return (size_t)ff->fc1.out_features * (size_t)ff->fc1.in_features +
           (size_t)ff->fc2.out_features * (size_t)ff->fc2.in_features;
}

void attn_feedforward_bf16_copy(const attn_feedforward *ff, uint16_t *w) {
    w += attn_linear_bf16_copy(&ff->fc1, w);
    attn_linear_bf16_copy(&ff->fc2, w);
}
