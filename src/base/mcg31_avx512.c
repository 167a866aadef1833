/* MCG31 mask rows on AVX-512 (see mcg31.h): eight 64-bit lanes per vector,
 * each state x a^j one multiply from its block's start. Compiled for
 * AVX-512 by the pragma; only called after attn_simd_resolve chose it. */
#include "mcg31.h"

#if defined(__x86_64__) && defined(__GNUC__)
#pragma GCC target("avx512f,avx512bw,avx512vl")
#include <immintrin.h>

/* a b mod m per 64-bit lane, a and b in [1, m - 1] in the low halves. The
 * first fold leaves at most 2^32 - 2, so the second at most m; m itself would
 * mean a b = 0 (mod m), which a prime m rules out: no final subtraction. */
static inline __m512i mul8(__m512i a, __m512i b) {
    const __m512i m = _mm512_set1_epi64(ATTN_MCG31_M);
    __m512i p = _mm512_mul_epu32(a, b);
    p = _mm512_add_epi64(_mm512_and_si512(p, m), _mm512_srli_epi64(p, 31));
    return _mm512_add_epi64(_mm512_and_si512(p, m), _mm512_srli_epi64(p, 31));
}

/* Bit j of the result: x a^j < thr, j < 64. */
static inline uint64_t block_bits(uint32_t x, uint32_t thr, const __m512i apow[8]) {
    const __m512i vx = _mm512_set1_epi64(x), vt = _mm512_set1_epi64(thr);
    uint64_t bits = 0;
    for (int k = 0; k < 8; k++)
        bits |= (uint64_t)_mm512_cmplt_epu64_mask(mul8(vx, apow[k]), vt) << (8 * k);
    return bits;
}

static inline void load_apow(__m512i apow[8]) {
    for (int k = 0; k < 8; k++)
        apow[k] =
            _mm512_cvtepu32_epi64(_mm256_loadu_si256((const __m256i *)(attn_mcg31_apow + 8 * k)));
}

void attn_mcg31_keep_avx512(uint32_t x, uint32_t thr, uint8_t *keep, size_t n) {
    __m512i apow[8];
    load_apow(apow);
    const __m512i one = _mm512_set1_epi8(1);
    for (size_t i = 0; i < n; i += ATTN_MCG31_BLOCK) {
        const size_t m = n - i;
        const __mmask64 tail = m >= 64 ? ~(__mmask64)0 : (((__mmask64)1 << m) - 1);
        _mm512_mask_storeu_epi8(keep + i, tail,
                                _mm512_maskz_mov_epi8(block_bits(x, thr, apow), one));
        x = attn_mcg31_mul(x, attn_mcg31_apow[ATTN_MCG31_BLOCK]);
    }
}

void attn_mcg31_mult_avx512(uint32_t x, uint32_t thr, float scale, float *mult, size_t n) {
    __m512i apow[8];
    load_apow(apow);
    const __m512 vs = _mm512_set1_ps(scale);
    for (size_t i = 0; i < n; i += ATTN_MCG31_BLOCK) {
        const uint64_t bits = block_bits(x, thr, apow);
        for (size_t g = 0; g < ATTN_MCG31_BLOCK && i + g < n; g += 16) {
            const size_t m = n - i - g;
            const __mmask16 tail = m >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << m) - 1u);
            _mm512_mask_storeu_ps(mult + i + g, tail,
                                  _mm512_maskz_mov_ps((__mmask16)(bits >> g), vs));
        }
        x = attn_mcg31_mul(x, attn_mcg31_apow[ATTN_MCG31_BLOCK]);
    }
}
#endif
