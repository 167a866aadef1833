/* The cross-entropy's rows on AVX-512 (see ce_kernels.h). Compiled for
 * AVX-512 by the pragma whatever the build flags; only called after
 * attn_simd_resolve chose AVX-512. No FMA: each product and sum rounds as
 * the C loop's. */
#include "ce_kernels.h"

#if defined(__x86_64__) && defined(__GNUC__)
#pragma GCC target("avx512f,avx512dq,avx512vl,avx2,fma")
#include <immintrin.h>

#include "exp_avx512.h"

static inline __mmask16 tail_mask(size_t n) {
    return n >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << n) - 1u);
}

float attn_ce_max_avx512(const float *row, size_t V) {
    __m512 m = _mm512_set1_ps(row[0]);
    for (size_t v = 0; v < V; v += 16)
        m = _mm512_mask_max_ps(m, tail_mask(V - v), m,
                               _mm512_maskz_loadu_ps(tail_mask(V - v), row + v));
    return _mm512_reduce_max_ps(m);
}

double attn_ce_sumexp_avx512(const float *row, size_t V, float mx) {
    const __m512 shift = _mm512_set1_ps(mx);
    __m512d lo = _mm512_setzero_pd(), hi = _mm512_setzero_pd(); /* lanes 0-7, 8-15 */
    for (size_t v = 0; v < V; v += 16) {
        const __mmask16 k = tail_mask(V - v);
        const __m512 x = _mm512_maskz_loadu_ps(k, row + v);
        const __m512 e = _mm512_maskz_mov_ps(k, attn_exp16(_mm512_sub_ps(x, shift)));
        lo = _mm512_add_pd(lo, _mm512_cvtps_pd(_mm512_castps512_ps256(e)));
        hi = _mm512_add_pd(
            hi, _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(e), 1))));
    }
    double lane[ATTN_CE_LANES];
    _mm512_storeu_pd(lane, lo);
    _mm512_storeu_pd(lane + 8, hi);
    double s = 0.0;
    for (int j = 0; j < ATTN_CE_LANES; j++)
        s += lane[j];
    return s;
}

void attn_ce_grad_row_avx512(const float *x, float *d, size_t V, float lse, float scale, int add) {
    const __m512 shift = _mm512_set1_ps(lse), sc = _mm512_set1_ps(scale);
    for (size_t v = 0; v < V; v += 16) {
        const __mmask16 k = tail_mask(V - v);
        const __m512 g =
            _mm512_mul_ps(attn_exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, x + v), shift)), sc);
        const __m512 base = add ? _mm512_maskz_loadu_ps(k, d + v) : _mm512_setzero_ps();
        _mm512_mask_storeu_ps(d + v, k, _mm512_add_ps(base, g));
    }
}
#else
typedef int attn_ce_avx512_unavailable; /* keep the translation unit non-empty */
#endif
