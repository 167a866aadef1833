/* The cross-entropy's rows on AVX2 + FMA (see ce_kernels.h): the AVX-512
 * kernels' steps on two 8-float halves, so the same bits (attn_exp8 is
 * attn_exp16 bit for bit; the 16 double lanes add in the same order).
 * Compiled for AVX2 by the pragma whatever the build flags; only called
 * after attn_simd_resolve chose AVX2. No FMA outside exp. */
#include "ce_kernels.h"

#if defined(__x86_64__) && defined(__GNUC__)
#pragma GCC target("avx2,fma")
#include <immintrin.h>
#include <string.h>

#include "exp_avx2.h"

/* The last v < 16 columns of row as 16 floats, the rest `fill`: the tail
 * without masked loads (slow on AMD). */
static inline void tail16(const float *row, size_t n, float fill, float t[16]) {
    for (int j = 0; j < 16; j++)
        t[j] = fill;
    memcpy(t, row, n * sizeof(float));
}

float attn_ce_max_avx2(const float *row, size_t V) {
    __m256 m = _mm256_set1_ps(row[0]);
    size_t v = 0;
    for (; v + 8 <= V; v += 8) /* max(m, x): as the AVX-512 kernel's operand order */
        m = _mm256_max_ps(m, _mm256_loadu_ps(row + v));
    float t[16], lane[8];
    tail16(row + v, V - v, row[0], t);
    m = _mm256_max_ps(m, _mm256_loadu_ps(t));
    _mm256_storeu_ps(lane, m);
    float mx = lane[0];
    for (int j = 1; j < 8; j++)
        mx = lane[j] > mx ? lane[j] : mx;
    return mx;
}

/* Lanes j, j + 1, ... j + 3 of e (floats) widened and added to acc. */
static inline void add_lanes(__m256d acc[4], __m256 e0, __m256 e1) {
    acc[0] = _mm256_add_pd(acc[0], _mm256_cvtps_pd(_mm256_castps256_ps128(e0)));
    acc[1] = _mm256_add_pd(acc[1], _mm256_cvtps_pd(_mm256_extractf128_ps(e0, 1)));
    acc[2] = _mm256_add_pd(acc[2], _mm256_cvtps_pd(_mm256_castps256_ps128(e1)));
    acc[3] = _mm256_add_pd(acc[3], _mm256_cvtps_pd(_mm256_extractf128_ps(e1, 1)));
}

double attn_ce_sumexp_avx2(const float *row, size_t V, float mx) {
    const __m256 shift = _mm256_set1_ps(mx);
    __m256d acc[4] = {_mm256_setzero_pd(), _mm256_setzero_pd(), _mm256_setzero_pd(),
                      _mm256_setzero_pd()}; /* lanes 0-3, 4-7, 8-11, 12-15 */
    size_t v = 0;
    for (; v + 16 <= V; v += 16)
        add_lanes(acc, attn_exp8(_mm256_sub_ps(_mm256_loadu_ps(row + v), shift)),
                  attn_exp8(_mm256_sub_ps(_mm256_loadu_ps(row + v + 8), shift)));
    if (v < V) { /* -inf past the row: exp 0, a lane plus 0 is the lane */
        float t[16];
        tail16(row + v, V - v, -__builtin_inff(), t);
        add_lanes(acc, attn_exp8(_mm256_sub_ps(_mm256_loadu_ps(t), shift)),
                  attn_exp8(_mm256_sub_ps(_mm256_loadu_ps(t + 8), shift)));
    }
    double lane[ATTN_CE_LANES];
    for (int q = 0; q < 4; q++)
        _mm256_storeu_pd(lane + 4 * q, acc[q]);
    double s = 0.0;
    for (int j = 0; j < ATTN_CE_LANES; j++)
        s += lane[j];
    return s;
}

static inline __m256 grad8(const float *x, const float *d, __m256 shift, __m256 sc, int add) {
    const __m256 g = _mm256_mul_ps(attn_exp8(_mm256_sub_ps(_mm256_loadu_ps(x), shift)), sc);
    return _mm256_add_ps(add ? _mm256_loadu_ps(d) : _mm256_setzero_ps(), g);
}

void attn_ce_grad_row_avx2(const float *x, float *d, size_t V, float lse, float scale, int add) {
    const __m256 shift = _mm256_set1_ps(lse), sc = _mm256_set1_ps(scale);
    size_t v = 0;
    for (; v + 8 <= V; v += 8)
        _mm256_storeu_ps(d + v, grad8(x + v, d + v, shift, sc, add));
    if (v < V) {
        float tx[16], td[16];
        tail16(x + v, V - v, 0.0f, tx);
        tail16(d + v, V - v, 0.0f, td);
        _mm256_storeu_ps(td, grad8(tx, td, shift, sc, add));
        memcpy(d + v, td, (V - v) * sizeof(float));
    }
}
#else
typedef int attn_ce_avx2_unavailable; /* keep the translation unit non-empty */
#endif
