/* ReLU^2 and SwiGLU (see attn/activation.h). */
#include "attn/activation.h"

#include <math.h>

#include "activation_kernels.h"
#include "attn/flash_attention.h"
#include "parallel.h"

/* The SwiGLU rows run on AVX-512 when attn_simd_resolve picks it (ATTN_SIMD
 * can force the generic loops); the choice is per call, never per chunk, so
 * every element of a call takes the same arithmetic at any thread count. */
static int swiglu_avx512(void) {
#if defined(__x86_64__) && defined(__GNUC__)
    return attn_simd_resolve(ATTN_SIMD_AUTO) == ATTN_SIMD_AVX512;
#else
    return 0;
#endif
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
        relu2_chunk(x + o, y + o, n - o < ATTN_PAR_CHUNK ? n - o : ATTN_PAR_CHUNK);
    }
}

void attn_relu2_backward_inplace(const float *x, float *d, size_t n) {
#pragma omp parallel for schedule(static) if (n >= ATTN_PAR_MIN)
    for (size_t i = 0; i < n; i++)
        d[i] *= x[i] > 0.0f ? 2.0f * x[i] : 0.0f;
}

static void swiglu_pair_generic(const float *a, const float *b, float *y, size_t n) {
    for (size_t i = 0; i < n; i++)
        y[i] = a[i] * sigmoid(a[i]) * b[i];
}

static void swiglu_pair_with(int avx512, const float *a, const float *b, float *y, size_t n) {
#if defined(__x86_64__) && defined(__GNUC__)
    if (avx512) {
        attn_swiglu_pair_avx512(a, b, y, n);
        return;
    }
#endif
    (void)avx512;
    swiglu_pair_generic(a, b, y, n);
}

void attn_swiglu_pair(const float *a, const float *b, float *y, size_t n) {
    swiglu_pair_with(swiglu_avx512(), a, b, y, n);
}

void attn_swiglu_forward(const float *h, float *y, size_t N, size_t H) {
    const long rows = (long)N;
    const int avx512 = swiglu_avx512();
#pragma omp parallel for schedule(static) if (N * H >= ATTN_PAR_MIN)
    for (long r = 0; r < rows; r++) {
        const float *hr = h + (size_t)r * 2 * H;
        swiglu_pair_with(avx512, hr, hr + H, y + (size_t)r * H, H);
    }
}

void attn_swiglu_backward(const float *h, const float *dy, float *dh, size_t N, size_t H) {
    const long rows = (long)N;
    const int avx512 = swiglu_avx512();
    (void)avx512; /* only x86 has the AVX-512 rows */
#pragma omp parallel for schedule(static) if (N * H >= ATTN_PAR_MIN)
    for (long r = 0; r < rows; r++) {
        const float *a = h + (size_t)r * 2 * H, *b = a + H, *d = dy + (size_t)r * H;
        float *da = dh + (size_t)r * 2 * H, *db = da + H;
#if defined(__x86_64__) && defined(__GNUC__)
        if (avx512) {
            attn_swiglu_grad_avx512(a, b, d, da, db, H);
            continue;
        }
#endif
        for (size_t i = 0; i < H; i++) {
            const float s = sigmoid(a[i]), silu = a[i] * s;
            /* d silu / da = s (1 + a (1 - s)) */
            da[i] += d[i] * b[i] * (s * (1.0f + a[i] * (1.0f - s)));
            db[i] += d[i] * silu;
        }
    }
}
