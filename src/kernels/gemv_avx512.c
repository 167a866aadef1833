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

/* One weight row at a time (one sequential stream: measured faster than
 * four interleaved rows here; a software prefetch 1 or 2 KiB ahead gained
 * nothing at 124M either), four accumulators per sequence to hide the FMA
 * latency. A row's chunk is loaded (and widened) once for up to four
 * sequences; each sequence's sum runs in the same order whatever the
 * batch, so a batch of n equals n single products bit for bit. S is a
 * constant where this is inlined: the loops over s unroll into registers. */
#define GEMV_ROW(T, LOAD)                                                                          \
    static inline __attribute__((always_inline)) void row_##T(                                     \
        const T *w, const float *x, size_t ldx, int S, int in, float *out) {                       \
        __m512 a[4][4];                                                                            \
        for (int s = 0; s < S; s++)                                                                \
            a[s][0] = a[s][1] = a[s][2] = a[s][3] = _mm512_setzero_ps();                           \
        int i = 0;                                                                                 \
        for (; i + 64 <= in; i += 64) {                                                            \
            for (int k = 0; k < 4; k++) {                                                          \
                const __m512 wk = LOAD(w + i + 16 * k, 0xFFFF);                                    \
                for (int s = 0; s < S; s++)                                                        \
                    a[s][k] =                                                                      \
                        _mm512_fmadd_ps(wk, _mm512_loadu_ps(x + s * ldx + i + 16 * k), a[s][k]);   \
            }                                                                                      \
        }                                                                                          \
        for (; i < in; i += 16) {                                                                  \
            const __mmask16 m = in - i >= 16 ? (__mmask16)0xFFFF : tail(in - i);                   \
            const __m512 wk = LOAD(w + i, m);                                                      \
            for (int s = 0; s < S; s++)                                                            \
                a[s][0] = _mm512_fmadd_ps(wk, _mm512_maskz_loadu_ps(m, x + s * ldx + i), a[s][0]); \
        }                                                                                          \
        for (int s = 0; s < S; s++)                                                                \
            out[s] = _mm512_reduce_add_ps(                                                         \
                _mm512_add_ps(_mm512_add_ps(a[s][0], a[s][1]), _mm512_add_ps(a[s][2], a[s][3])));  \
    }

GEMV_ROW(float, load_w)
GEMV_ROW(uint16_t, load_w16)

/* Rows [r0, r1) for n sequences, four at a time (the row stays in L1). */
#define GEMV_BODY(T)                                                                               \
    for (int o = r0; o < r1; o++) {                                                                \
        const T *w = W + (size_t)o * (size_t)in;                                                   \
        const float bo = b ? b[o] : 0.0f;                                                          \
        for (int s0 = 0; s0 < n; s0 += 4) {                                                        \
            float d[4];                                                                            \
            const float *xs = x + (size_t)s0 * ldx;                                                \
            switch (n - s0) {                                                                      \
            case 1: row_##T(w, xs, ldx, 1, in, d); break;                                          \
            case 2: row_##T(w, xs, ldx, 2, in, d); break;                                          \
            case 3: row_##T(w, xs, ldx, 3, in, d); break;                                          \
            default: row_##T(w, xs, ldx, 4, in, d); break;                                         \
            }                                                                                      \
            for (int s = s0; s < n && s < s0 + 4; s++)                                             \
                y[(size_t)s * ldy + (size_t)o] = bo + d[s - s0];                                   \
        }                                                                                          \
    }

void attn_gemv_f32_avx512(const float *W, const float *b, const float *x, size_t ldx, float *y,
                          size_t ldy, int n, int in, int r0, int r1) {
    GEMV_BODY(float)
}

void attn_gemv_bf16_avx512(const uint16_t *W, const float *b, const float *x, size_t ldx, float *y,
                           size_t ldy, int n, int in, int r0, int r1) {
    GEMV_BODY(uint16_t)
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
