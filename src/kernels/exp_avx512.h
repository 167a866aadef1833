/* Internal: exp(x) on 16 floats, shared by the AVX-512 kernels. Include it
 * after the file's AVX-512 target pragma (or -mavx512f), with <immintrin.h>. */
#ifndef ATTN_EXP_AVX512_H
#define ATTN_EXP_AVX512_H

/* exp(x) (Cody-Waite reduction + Cephes' expf polynomial, ~1 ulp); x < -87
 * (and -inf) gives exactly 0, x above ln(FLT_MAX) (and +inf) gives +inf and
 * NaN stays NaN, as expf does: every SIMD path agrees with the generic one. */
static inline __m512 attn_exp16(__m512 x) {
    const __m512 lo = _mm512_set1_ps(-87.0f), hi = _mm512_set1_ps(88.7228317f);
    const __mmask16 ok = _mm512_cmp_ps_mask(x, lo, _CMP_GE_OQ);
    const __mmask16 big = _mm512_cmp_ps_mask(x, hi, _CMP_GT_OQ);
    const __mmask16 nan = _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
    const __m512 x0 = x;
    x = _mm512_min_ps(_mm512_max_ps(x, lo), hi);
    const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
    __m512 p = _mm512_set1_ps(1.9875691500e-4f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
    const __m512 r2 = _mm512_mul_ps(r, r);
    p = _mm512_fmadd_ps(p, r2, _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
    __m512 y = _mm512_maskz_scalef_ps(ok, p, n); /* p * 2^n */
    y = _mm512_mask_mov_ps(y, big, _mm512_set1_ps(__builtin_inff()));
    return _mm512_mask_add_ps(y, nan, x0, x0); /* NaN in, (quiet) NaN out */
}

#endif
