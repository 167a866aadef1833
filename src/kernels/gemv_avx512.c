/* AVX-512 matrix-vector products (see gemv.h): 4 x 16 fp32 lanes per row,
 * added up at the end. Compiled for
 * AVX-512 by the pragma whatever the build flags; only called after
 * attn_cpu_has(ATTN_CPU_AVX512_BW) said yes. */
#include "gemv.h"

#ifdef ATTN_GEMV_AVX512
#pragma GCC target("avx512f,avx512bw,avx512vl,avx2,fma")
#include <immintrin.h>

static inline __mmask16 tail(int n) {
    return (__mmask16)((1u << n) - 1u);
}

static inline __m512 load_w(const float *w, __mmask16 m) {
    return _mm512_maskz_loadu_ps(m, w);
}

static inline __m512 load_w16(const uint16_t *w, __mmask16 m) {
    const __m256i h = _mm256_maskz_loadu_epi16(m, w);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

/* One row at a time (one sequential stream: measured faster than four
 * interleaved rows here), four accumulators to hide the FMA latency. */
#define GEMV_BODY(T, LOAD)                                                                         \
    for (int o = r0; o < r1; o++) {                                                                \
        const T *w = W + (size_t)o * (size_t)in;                                                   \
        __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;                                \
        int i = 0;                                                                                 \
        for (; i + 64 <= in; i += 64) {                                                            \
            a0 = _mm512_fmadd_ps(LOAD(w + i, 0xFFFF), _mm512_loadu_ps(x + i), a0);                 \
            a1 = _mm512_fmadd_ps(LOAD(w + i + 16, 0xFFFF), _mm512_loadu_ps(x + i + 16), a1);       \
            a2 = _mm512_fmadd_ps(LOAD(w + i + 32, 0xFFFF), _mm512_loadu_ps(x + i + 32), a2);       \
            a3 = _mm512_fmadd_ps(LOAD(w + i + 48, 0xFFFF), _mm512_loadu_ps(x + i + 48), a3);       \
        }                                                                                          \
        for (; i < in; i += 16) {                                                                  \
            const __mmask16 m = in - i >= 16 ? (__mmask16)0xFFFF : tail(in - i);                   \
            a0 = _mm512_fmadd_ps(LOAD(w + i, m), _mm512_maskz_loadu_ps(m, x + i), a0);             \
        }                                                                                          \
        const __m512 s = _mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3));              \
        y[o] = (b ? b[o] : 0.0f) + _mm512_reduce_add_ps(s);                                        \
    }

void attn_gemv_f32_avx512(const float *W, const float *b, const float *x, float *y, int in, int r0,
                          int r1) {
    GEMV_BODY(float, load_w)
}

void attn_gemv_bf16_avx512(const uint16_t *W, const float *b, const float *x, float *y, int in,
                           int r0, int r1) {
    GEMV_BODY(uint16_t, load_w16)
}

void attn_f32_to_bf16_avx512(const float *x, uint16_t *y, size_t n) {
    const __m512i one = _mm512_set1_epi32(1), half = _mm512_set1_epi32(0x7fff);
    const __m512i abs = _mm512_set1_epi32(0x7fffffff), inf = _mm512_set1_epi32(0x7f800000);
    const __m512i quiet = _mm512_set1_epi32(0x40);
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m512i u = _mm512_loadu_si512((const void *)(x + i));
        const __m512i hi = _mm512_srli_epi32(u, 16);
        __m512i r = _mm512_add_epi32(u, _mm512_add_epi32(half, _mm512_and_si512(hi, one)));
        r = _mm512_srli_epi32(r, 16);
        const __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, abs), inf);
        r = _mm512_mask_mov_epi32(r, nan, _mm512_or_si512(hi, quiet));
        _mm256_storeu_si256((__m256i *)(y + i), _mm512_cvtepi32_epi16(r));
    }
    if (i < n) attn_f32_to_bf16_scalar(x + i, y + i, n - i);
}

#endif
