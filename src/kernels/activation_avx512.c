/* SwiGLU rows on AVX-512 (see activation_kernels.h). Compiled for AVX-512 by
 * the pragma whatever the build flags; only called after attn_simd_resolve
 * chose AVX-512. No FMA: each product and sum rounds as the scalar loop's. */
#include "activation_kernels.h"

#if defined(__x86_64__) && defined(__GNUC__)
#pragma GCC target("avx512f,avx512dq,avx512vl,avx2,fma")
#include <immintrin.h>

#include "exp_avx512.h"

static inline __mmask16 tail_mask(size_t n) {
    return n >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << n) - 1u);
}

/* 1 / (1 + exp(-a)); exp of a large -a is inf and the quotient 0. */
static inline __m512 sigmoid16(__m512 a) {
    const __m512 one = _mm512_set1_ps(1.0f);
    const __m512 e = attn_exp16(_mm512_sub_ps(_mm512_setzero_ps(), a));
    return _mm512_div_ps(one, _mm512_add_ps(one, e));
}

void attn_swiglu_pair_avx512(const float *a, const float *b, float *y, size_t n) {
    for (size_t i = 0; i < n; i += 16) {
        const __mmask16 k = tail_mask(n - i);
        const __m512 va = _mm512_maskz_loadu_ps(k, a + i), vb = _mm512_maskz_loadu_ps(k, b + i);
        _mm512_mask_storeu_ps(y + i, k, _mm512_mul_ps(_mm512_mul_ps(va, sigmoid16(va)), vb));
    }
}

void attn_swiglu_grad_avx512(const float *a, const float *b, const float *d, float *da, float *db,
                             size_t n) {
    const __m512 one = _mm512_set1_ps(1.0f);
    for (size_t i = 0; i < n; i += 16) {
        const __mmask16 k = tail_mask(n - i);
        const __m512 va = _mm512_maskz_loadu_ps(k, a + i), vb = _mm512_maskz_loadu_ps(k, b + i);
        const __m512 vd = _mm512_maskz_loadu_ps(k, d + i);
        const __m512 s = sigmoid16(va), silu = _mm512_mul_ps(va, s);
        /* d silu / da = s (1 + a (1 - s)) */
        const __m512 g =
            _mm512_mul_ps(s, _mm512_add_ps(one, _mm512_mul_ps(va, _mm512_sub_ps(one, s))));
        const __m512 ga = _mm512_mul_ps(_mm512_mul_ps(vd, vb), g);
        _mm512_mask_storeu_ps(da + i, k, _mm512_add_ps(_mm512_maskz_loadu_ps(k, da + i), ga));
        _mm512_mask_storeu_ps(
            db + i, k, _mm512_add_ps(_mm512_maskz_loadu_ps(k, db + i), _mm512_mul_ps(vd, silu)));
    }
}
#else
typedef int attn_activation_avx512_unavailable; /* keep the translation unit non-empty */
#endif
