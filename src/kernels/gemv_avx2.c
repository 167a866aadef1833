/* AVX2 + FMA matrix-vector products (see gemv.h), in the AVX-512 kernel's
 * order: its four 16-lane accumulators as eight 8-lane ones, the same
 * 64-element chunks, the same tail (16 at a time, zeros past the row) and
 * _mm512_reduce_add_ps's tree at the end, so a row's sum is the AVX-512
 * kernel's bit for bit. One sequence at a time (16 registers hold one
 * sequence's eight sums); its row stays in L1 for the next. Compiled for
 * AVX2 by the pragma whatever the build flags; only called after
 * attn_simd_supported(ATTN_SIMD_AVX2) said yes. */
#include "gemv.h"

#ifdef ATTN_GEMV_AVX512
#pragma GCC target("avx2,fma")
#include <immintrin.h>
#include <string.h>

static inline __m256 load_w(const float *w) {
    return _mm256_loadu_ps(w);
}

/* 8 bf16 widened exactly: the upper halves of 8 fp32. */
static inline __m256 load_w16(const uint16_t *w) {
    const __m128i h = _mm_loadu_si128((const __m128i *)(const void *)w);
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

/* The sum of a 16-lane accumulator held as (lo, hi), as
 * _mm512_reduce_add_ps adds it: halves, then quarters, then pairs. */
static inline float reduce16(__m256 lo, __m256 hi) {
    const __m256 t3 = _mm256_add_ps(hi, lo);
    const __m128 t6 = _mm_add_ps(_mm256_extractf128_ps(t3, 1), _mm256_castps256_ps128(t3));
    const __m128 t8 = _mm_add_ps(t6, _mm_shuffle_ps(t6, t6, _MM_SHUFFLE(1, 0, 3, 2)));
    return _mm_cvtss_f32(t8) + _mm_cvtss_f32(_mm_shuffle_ps(t8, t8, 1));
}

/* sum_i w[i] x[i] over in elements; a[k][h]: lanes 8h..8h+7 of the AVX-512
 * kernel's accumulator k. The last < 16 go through zero-padded stack
 * copies, as its masked loads give zeros (0 * 0 adds +0: the same sums). */
#define GEMV_DOT(T, LOAD)                                                                          \
    static inline float dot_##T(const T *w, const float *x, int in) {                              \
        __m256 a[4][2];                                                                            \
        for (int k = 0; k < 4; k++)                                                                \
            a[k][0] = a[k][1] = _mm256_setzero_ps();                                               \
        int i = 0;                                                                                 \
        for (; i + 64 <= in; i += 64)                                                              \
            for (int k = 0; k < 4; k++)                                                            \
                for (int h = 0; h < 2; h++) {                                                      \
                    const int at = i + 16 * k + 8 * h;                                             \
                    a[k][h] = _mm256_fmadd_ps(LOAD(w + at), _mm256_loadu_ps(x + at), a[k][h]);     \
                }                                                                                  \
        for (; i + 16 <= in; i += 16)                                                              \
            for (int h = 0; h < 2; h++)                                                            \
                a[0][h] =                                                                          \
                    _mm256_fmadd_ps(LOAD(w + i + 8 * h), _mm256_loadu_ps(x + i + 8 * h), a[0][h]); \
        if (i < in) {                                                                              \
            T tw[16];                                                                              \
            float tx[16];                                                                          \
            memset(tw, 0, sizeof tw);                                                              \
            memset(tx, 0, sizeof tx);                                                              \
            memcpy(tw, w + i, (size_t)(in - i) * sizeof(T));                                       \
            memcpy(tx, x + i, (size_t)(in - i) * sizeof(float));                                   \
            for (int h = 0; h < 2; h++)                                                            \
                a[0][h] = _mm256_fmadd_ps(LOAD(tw + 8 * h), _mm256_loadu_ps(tx + 8 * h), a[0][h]); \
        }                                                                                          \
        __m256 t[2];                                                                               \
        for (int h = 0; h < 2; h++)                                                                \
            t[h] =                                                                                 \
                _mm256_add_ps(_mm256_add_ps(a[0][h], a[1][h]), _mm256_add_ps(a[2][h], a[3][h]));   \
        return reduce16(t[0], t[1]);                                                               \
    }

GEMV_DOT(float, load_w)
GEMV_DOT(uint16_t, load_w16)

void attn_gemv_f32_avx2(const float *W, const float *b, const float *x, size_t ldx, float *y,
                        size_t ldy, int n, int in, int r0, int r1) {
    for (int o = r0; o < r1; o++) {
        const float *w = W + (size_t)o * (size_t)in, bo = b ? b[o] : 0.0f;
        for (int s = 0; s < n; s++)
            y[(size_t)s * ldy + (size_t)o] = bo + dot_float(w, x + (size_t)s * ldx, in);
    }
}

void attn_gemv_bf16_avx2(const uint16_t *W, const float *b, const float *x, size_t ldx, float *y,
                         size_t ldy, int n, int in, int r0, int r1) {
    for (int o = r0; o < r1; o++) {
        const uint16_t *w = W + (size_t)o * (size_t)in;
        const float bo = b ? b[o] : 0.0f;
        for (int s = 0; s < n; s++)
            y[(size_t)s * ldy + (size_t)o] = bo + dot_uint16_t(w, x + (size_t)s * ldx, in);
    }
}

/* Round to nearest even as attn_f32_to_bf16_scalar, 8 at a time. */
void attn_f32_to_bf16_avx2(const float *x, uint16_t *y, size_t n) {
    const __m256i one = _mm256_set1_epi32(1), half = _mm256_set1_epi32(0x7fff);
    const __m256i abs = _mm256_set1_epi32(0x7fffffff), inf = _mm256_set1_epi32(0x7f800000);
    const __m256i quiet = _mm256_set1_epi32(0x40);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256i u = _mm256_loadu_si256((const __m256i *)(const void *)(x + i));
        const __m256i hi = _mm256_srli_epi32(u, 16);
        __m256i r = _mm256_add_epi32(u, _mm256_add_epi32(half, _mm256_and_si256(hi, one)));
        r = _mm256_srli_epi32(r, 16);
        /* NaN (|u| > inf as signed ints: |u| < 2^31): kept quiet */
        const __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, abs), inf);
        r = _mm256_blendv_epi8(r, _mm256_or_si256(hi, quiet), nan);
        /* 8 x 32 -> 8 x 16 (values < 2^16: no saturation), lanes in order */
        const __m128i p =
            _mm_packus_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256(r, 1));
        _mm_storeu_si128((__m128i *)(void *)(y + i), p);
    }
    if (i < n) attn_f32_to_bf16_scalar(x + i, y + i, n - i);
}

#else
typedef int attn_gemv_avx2_unavailable; /* keep the translation unit non-empty */
#endif
