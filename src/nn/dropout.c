/* Dropout masks drawn as PyTorch draws them (see attn/dropout.h, attn/rng.h). */
#include "attn/dropout.h"

#include <omp.h>
#include <string.h>

#include "base/mcg31.h"
#include "base/parallel.h"

void attn_dropout_mask(attn_rng *rng, attn_dropout_stream stream, double p, uint8_t *keep,
                       size_t n) {
    const double keep_prob = 1.0 - p;
    if (stream == ATTN_STREAM_GIVEN) {
        /* rng is the first member of an attn_dropout_given (C11 6.7.2.1). */
        attn_dropout_given_take((attn_dropout_given *)(void *)rng, keep, n);
        return;
    }
    if (stream == ATTN_STREAM_TORCH_MKL) {
        /* One 32-bit draw seeds the MCG31 stream for the whole tensor. */
        attn_mcg31_keep(attn_mcg31_seed(attn_rng_u32(rng)), attn_mcg31_threshold(p), keep, n);
        return;
    }
    attn_rng_keep_mask(rng, keep_prob, keep, n, 0);
}

float attn_dropout_scale(double p) {
    return 1.0f / (float)(1.0 - p);
}

/* Element-wise, so split over threads when large and not already inside a
 * parallel region (the attention cores call these per head). */
void attn_dropout_apply(const float *x, const uint8_t *keep, double p, float *y, size_t n) {
    const float scale = attn_dropout_scale(p);
#pragma omp parallel for schedule(static) if (n >= ATTN_PAR_MIN && !omp_in_parallel())
    for (size_t i = 0; i < n; i++)
        y[i] = keep[i] ? x[i] * scale : 0.0f;
}

void attn_dropout_backward(const float *dy, const uint8_t *keep, double p, float *dx, size_t n) {
    const float scale = attn_dropout_scale(p);
#pragma omp parallel for schedule(static) if (n >= ATTN_PAR_MIN && !omp_in_parallel())
    for (size_t i = 0; i < n; i++)
        if (keep[i]) dx[i] += dy[i] * scale;
}

void attn_dropout_given_init(attn_dropout_given *g, const uint8_t *keep, size_t n) {
    memset(g, 0, sizeof *g);
    g->keep = keep;
    g->n = keep ? n : 0;
}

void attn_dropout_given_take(attn_dropout_given *g, uint8_t *keep, size_t n) {
    const size_t used = g->wanted < g->n ? g->wanted : g->n;
    const size_t left = g->n - used, k = n < left ? n : left;
    for (size_t i = 0; i < k; i++)
        keep[i] = g->keep[used + i] != 0;
    if (k < n) memset(keep + k, 1, n - k);
    g->wanted += n;
}

attn_status attn_dropout_given_check(const attn_dropout_given *g, attn_error *err) {
    if (g->wanted != g->n)
        return attn_fail(err, ATTN_ERR_SHAPE,
                         "dropout masks: the forward takes %zu mask elements, %zu were given",
                         g->wanted, g->n);
    return ATTN_OK;
}
