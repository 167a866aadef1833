/* Internal: exp(x) on 8 floats, shared by the AVX2 kernels. Include it
 * after the file's AVX2 target pragma (or -mavx2 -mfma), with <immintrin.h>. */
#ifndef ATTN_EXP_AVX2_H
#define ATTN_EXP_AVX2_H

/* exp(x) (Cody-Waite reduction + Cephes' expf polynomial, ~1 ulp); x < -87
 * (and -inf) gives exactly 0, x above ln(FLT_MAX) (and +inf) gives +inf and
 * NaN stays NaN, as expf does: every SIMD path agrees with the generic one.
 * Bit for bit attn_exp16 (exp_avx512.h) on every float: the same steps, the
 * scaling by 2^n exact in both. */
static inline __m256 attn_exp8(__m256 x) {
    const __m256 lo = _mm256_set1_ps(-87.0f), hi = _mm256_set1_ps(88.7228317f);
    const __m256 ok = _mm256_cmp_ps(x, lo, _CMP_GE_OQ);
    const __m256 special = _mm256_cmp_ps(x, hi, _CMP_NLE_UQ); /* above hi, or NaN */
    const __m256 x0 = x;
    x = _mm256_min_ps(_mm256_max_ps(x, lo), hi);
    const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 p = _mm256_set1_ps(1.9875691500e-4f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
    const __m256 r2 = _mm256_mul_ps(r, r);
    p = _mm256_fmadd_ps(p, r2, _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    /* p * 2^n by adding n to p's exponent: exact, as a product by 2^n would
     * be. On the clamped range it stays normal: n = 128 only with p < 1, n =
     * -126 only with p > 1. */
    const __m256i e = _mm256_slli_epi32(_mm256_cvtps_epi32(n), 23);
    __m256 y = _mm256_castsi256_ps(_mm256_add_epi32(_mm256_castps_si256(p), e));
    y = _mm256_and_ps(ok, y);
    /* +inf above hi; NaN in, (quiet) NaN out */
    return _mm256_blendv_ps(y, _mm256_mul_ps(x0, _mm256_set1_ps(__builtin_inff())), special);
}

#endif
