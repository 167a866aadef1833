/* ReLU^2 and SwiGLU (see attn/activation.h). */
#include "attn/activation.h"

#include <math.h>

#include "attn/cpu.h"
#include "attn/gelu.h"
#include "base/parallel.h"
#include "kernels/activation_kernels.h"

int attn_act_width(attn_act act, int hidden) {
    return act == ATTN_ACT_SWIGLU ? 2 * hidden : hidden;
}

void attn_act_forward(attn_act act, const float *x, float *y, size_t N, size_t hidden) {
    const size_t n = N * hidden;
    switch (act) {
    case ATTN_ACT_GELU: attn_gelu_forward(x, y, n); break;
    case ATTN_ACT_RELU2: attn_relu2_forward(x, y, n); break;
    case ATTN_ACT_SWIGLU: attn_swiglu_forward(x, y, N, hidden); break;
    }
}

void attn_act_forward_bf16(attn_act act, const float *x, uint16_t *y16, size_t N, size_t hidden) {
    if (act == ATTN_ACT_GELU) attn_gelu_forward_bf16(x, y16, N * hidden);
}

void attn_act_backward(attn_act act, const float *x, float *dy, float *dx, size_t N,
                       size_t hidden) {
    const size_t n = N * hidden;
    switch (act) {
    case ATTN_ACT_GELU:
        if (dx == dy)
            attn_gelu_backward_inplace(x, dx, n);
        else
            attn_gelu_backward(x, dy, dx, n);
        break;
    case ATTN_ACT_RELU2:
        if (dx == dy)
            attn_relu2_backward_inplace(x, dx, n);
        else
            attn_relu2_backward(x, dy, dx, n);
        break;
    case ATTN_ACT_SWIGLU: attn_swiglu_backward(x, dy, dx, N, hidden); break;
    }
}

/* silu(a) = a sigmoid(a); expf of a large -a is inf, and a / inf = -0. */
static inline float sigmoid(float a) {
    return 1.0f / (1.0f + expf(-a));
}

static void relu2_chunk(const float *x, float *y, size_t n) {
    for (size_t i = 0; i < n; i++) {
        const float r = x[i] > 0.0f ? x[i] : 0.0f;
        y[i] = r * r;
    }
}

void attn_relu2_forward(const float *x, float *y, size_t n) {
    /* Small inputs (one token while generating) skip the OpenMP runtime. */
    if (n < ATTN_PAR_MIN) {
        relu2_chunk(x, y, n);
        return;
    }
    const long chunks = (long)((n + ATTN_PAR_CHUNK - 1) / ATTN_PAR_CHUNK);
#pragma omp parallel for schedule(static)
    for (long c = 0; c < chunks; c++) {
        const size_t o = (size_t)c * ATTN_PAR_CHUNK;
        relu2_chunk(x + o, y + o, attn_par_piece(n, c));
    }
}

void attn_relu2_backward_inplace(const float *x, float *d, size_t n) {
#pragma omp parallel for schedule(static) if (n >= ATTN_PAR_MIN)
    for (size_t i = 0; i < n; i++)
        d[i] *= x[i] > 0.0f ? 2.0f * x[i] : 0.0f;
}

void attn_relu2_backward(const float *x, const float *dy, float *dx, size_t n) {
#pragma omp parallel for schedule(static) if (n >= ATTN_PAR_MIN)
    for (size_t i = 0; i < n; i++)
        dx[i] += (x[i] > 0.0f ? 2.0f * x[i] : 0.0f) * dy[i];
}

static void swiglu_pair_generic(const float *a, const float *b, float *y, size_t n) {
    for (size_t i = 0; i < n; i++)
        y[i] = a[i] * sigmoid(a[i]) * b[i];
}

static void swiglu_grad_generic(const float *a, const float *b, const float *d, float *da,
                                float *db, size_t n) {
    for (size_t i = 0; i < n; i++) {
        const float s = sigmoid(a[i]), silu = a[i] * s;
        /* d silu / da = s (1 + a (1 - s)) */
        da[i] += d[i] * b[i] * (s * (1.0f + a[i] * (1.0f - s)));
        db[i] += d[i] * silu;
    }
}

/* SwiGLU's row functions for one instruction set (activation_kernels.h). */
typedef struct swiglu_rows {
    void (*pair)(const float *a, const float *b, float *y, size_t n);
    void (*grad)(const float *a, const float *b, const float *d, float *da, float *db, size_t n);
} swiglu_rows;

/* AVX-512 or AVX2 (the same bits) when attn_simd_resolve picks it (ATTN_SIMD
 * can force the generic loops); chosen per call, never per chunk, so every
 * element of a call takes the same arithmetic at any thread count. */
static const swiglu_rows *swiglu_pick(void) {
    static const swiglu_rows generic = {swiglu_pair_generic, swiglu_grad_generic};
#if defined(__x86_64__) && defined(__GNUC__)
    static const swiglu_rows avx512 = {attn_swiglu_pair_avx512, attn_swiglu_grad_avx512};
    static const swiglu_rows avx2 = {attn_swiglu_pair_avx2, attn_swiglu_grad_avx2};
    const attn_simd s = attn_simd_resolve(ATTN_SIMD_AUTO);
    if (s == ATTN_SIMD_AVX512) return &avx512;
    if (s == ATTN_SIMD_AVX2) return &avx2;
#endif
    return &generic;
}

void attn_swiglu_pair(const float *a, const float *b, float *y, size_t n) {
    swiglu_pick()->pair(a, b, y, n);
}

void attn_swiglu_forward(const float *h, float *y, size_t N, size_t H) {
    const long rows = (long)N;
    const swiglu_rows *k = swiglu_pick();
#pragma omp parallel for schedule(static) if (N * H >= ATTN_PAR_MIN)
    for (long r = 0; r < rows; r++) {
        const float *hr = h + (size_t)r * 2 * H;
        k->pair(hr, hr + H, y + (size_t)r * H, H);
    }
}

void attn_swiglu_backward(const float *h, const float *dy, float *dh, size_t N, size_t H) {
    const long rows = (long)N;
    const swiglu_rows *k = swiglu_pick();
#pragma omp parallel for schedule(static) if (N * H >= ATTN_PAR_MIN)
    for (long r = 0; r < rows; r++) {
        const float *a = h + (size_t)r * 2 * H;
        float *da = dh + (size_t)r * 2 * H;
        k->grad(a, a + H, dy + (size_t)r * H, da, da + H, H);
    }
}
