/* SwiGLU rows on AVX2 + FMA (see activation_kernels.h): the AVX-512
 * kernel's steps on 8 floats, so the same bits (attn_exp8 is attn_exp16 bit
 * for bit). Compiled for AVX2 by the pragma whatever the build flags; only
 * called after attn_simd_resolve chose AVX2. No FMA outside exp: each
 * product and sum rounds as the scalar loop's. The tails go through
 * vectors on the stack (AMD's masked stores are slow). */
#include "activation_kernels.h"

#if defined(__x86_64__) && defined(__GNUC__)
#pragma GCC target("avx2,fma")
#include <immintrin.h>
#include <string.h>

#include "exp_avx2.h"

/* 1 / (1 + exp(-a)); exp of a large -a is inf and the quotient 0. */
static inline __m256 sigmoid8(__m256 a) {
    const __m256 one = _mm256_set1_ps(1.0f);
    const __m256 e = attn_exp8(_mm256_sub_ps(_mm256_setzero_ps(), a));
    return _mm256_div_ps(one, _mm256_add_ps(one, e));
}

static inline void pair8(const float *a, const float *b, float *y) {
    const __m256 va = _mm256_loadu_ps(a);
    _mm256_storeu_ps(y, _mm256_mul_ps(_mm256_mul_ps(va, sigmoid8(va)), _mm256_loadu_ps(b)));
}

void attn_swiglu_pair_avx2(const float *a, const float *b, float *y, size_t n) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        pair8(a + i, b + i, y + i);
    if (i < n) {
        float ta[8] = {0}, tb[8] = {0}, ty[8];
        memcpy(ta, a + i, (n - i) * sizeof(float));
        memcpy(tb, b + i, (n - i) * sizeof(float));
        pair8(ta, tb, ty);
        memcpy(y + i, ty, (n - i) * sizeof(float));
    }
}

static inline void grad8(const float *a, const float *b, const float *d, float *da, float *db) {
    const __m256 one = _mm256_set1_ps(1.0f);
    const __m256 va = _mm256_loadu_ps(a), vb = _mm256_loadu_ps(b), vd = _mm256_loadu_ps(d);
    const __m256 s = sigmoid8(va), silu = _mm256_mul_ps(va, s);
    /* d silu / da = s (1 + a (1 - s)) */
    const __m256 g = _mm256_mul_ps(s, _mm256_add_ps(one, _mm256_mul_ps(va, _mm256_sub_ps(one, s))));
    const __m256 ga = _mm256_mul_ps(_mm256_mul_ps(vd, vb), g);
    _mm256_storeu_ps(da, _mm256_add_ps(_mm256_loadu_ps(da), ga));
    _mm256_storeu_ps(db, _mm256_add_ps(_mm256_loadu_ps(db), _mm256_mul_ps(vd, silu)));
}

void attn_swiglu_grad_avx2(const float *a, const float *b, const float *d, float *da, float *db,
                           size_t n) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        grad8(a + i, b + i, d + i, da + i, db + i);
    if (i < n) {
        float t[5][8] = {{0}};
        const size_t k = (n - i) * sizeof(float);
        memcpy(t[0], a + i, k);
        memcpy(t[1], b + i, k);
        memcpy(t[2], d + i, k);
        memcpy(t[3], da + i, k);
        memcpy(t[4], db + i, k);
        grad8(t[0], t[1], t[2], t[3], t[4]);
        memcpy(da + i, t[3], k);
        memcpy(db + i, t[4], k);
    }
}
#else
typedef int attn_activation_avx2_unavailable; /* keep the translation unit non-empty */
#endif
