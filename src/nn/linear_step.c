/* One-row Linear products for the KV-cached step (see linear_step.h). */
#include "linear_step.h"

#include "base/alloc_huge.h"

void attn_linear_step_ld(const attn_linear *l, const uint16_t *w, const float *x, size_t ldx,
                         float *y, size_t ldy, int n, int wait) {
    const int out = l->out_features;
    if (wait) {
#pragma omp for schedule(static)
        for (int r = 0; r < out; r += ATTN_STEP_ROWS)
            attn_linear_rows_n(l, w, x, ldx, y, ldy, n, r,
                               r + ATTN_STEP_ROWS < out ? r + ATTN_STEP_ROWS : out);
    } else {
#pragma omp for schedule(static) nowait
        for (int r = 0; r < out; r += ATTN_STEP_ROWS)
            attn_linear_rows_n(l, w, x, ldx, y, ldy, n, r,
                               r + ATTN_STEP_ROWS < out ? r + ATTN_STEP_ROWS : out);
    }
}

void attn_linear_step_n(const attn_linear *l, const uint16_t *w, const float *x, size_t ldx,
                        float *y, int n) {
    attn_linear_step_ld(l, w, x, ldx, y, (size_t)l->out_features, n, 1);
}

size_t attn_linear_bf16_move(const attn_linear *l, uint16_t *w) {
    const size_t n = (size_t)l->out_features * (size_t)l->in_features, chunk = (size_t)1 << 18;
    const size_t page = 1024; /* floats: the page a chunk's start may share with the last */
    for (size_t i = 0; i < n; i += chunk) {
        const size_t k = n - i < chunk ? n - i : chunk, from = i > page ? i - page : 0;
        attn_f32_to_bf16(l->weight + i, w + i, k);
        attn_release_pages(l->weight + from, (i + k - from) * sizeof(float));
    }
    return n;
}

int attn_linear_weight_within(const attn_linear *l, const float *lo, size_t n) {
    const size_t k = (size_t)l->out_features * (size_t)l->in_features;
    const float *p = l->weight;
    return lo && p >= lo && k <= n && (size_t)(p - lo) <= n - k;
}

size_t attn_linear_bf16_copy(const attn_linear *l, uint16_t *w) {
    const size_t n = (size_t)l->out_features * (size_t)l->in_features;
    attn_f32_to_bf16(l->weight, w, n);
    return n;
}
