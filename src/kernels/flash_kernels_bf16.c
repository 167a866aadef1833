/* AVX512-BF16 micro-kernels for the fused attention in bf16 (see
 * flash_kernels.h). CMake compiles this file alone with -mavx512bf16 and
 * friends; it is only called after attn_precision_check(BF16) said yes. */
#include "flash_kernels.h"

#if defined(__x86_64__) && defined(__GNUC__) && defined(__AVX512BF16__)
#include <immintrin.h>
#include <string.h>

#define MR 6 /* rows of C per register block */
#define NV 4 /* 16-float vectors of C per register block: 6 x 4 = 24 accumulators */

static inline __mmask16 tail_mask(int n) {
    return n >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << n) - 1u);
}

/* One mr x (nv * 16) block of C over K2 pairs: vdpbf16ps adds a2(i, p) .
 * b2(p, n) (two products each) into the fp32 accumulators. */
static inline __attribute__((always_inline)) void
block(const int mr, const int nv, int K2, const uint32_t *A, ptrdiff_t rsa, ptrdiff_t csa,
      const uint32_t *B, ptrdiff_t ldb, float *C, ptrdiff_t ldc, int accumulate, const float *rs,
      __mmask16 last) {
    __m512 c[MR][NV];
#pragma GCC unroll 8
    for (int r = 0; r < mr; r++)
#pragma GCC unroll 8
        for (int v = 0; v < nv; v++)
            c[r][v] = accumulate
                          ? _mm512_maskz_loadu_ps(v == nv - 1 ? last : 0xFFFF, C + r * ldc + 16 * v)
                          : _mm512_setzero_ps();
    if (rs) /* rescale the running output as it is loaded */
#pragma GCC unroll 8
        for (int r = 0; r < mr; r++)
#pragma GCC unroll 8
            for (int v = 0; v < nv; v++)
                c[r][v] = _mm512_mul_ps(c[r][v], _mm512_set1_ps(rs[r]));
    for (int p = 0; p < K2; p++) {
        __m512bh b[NV];
        const uint32_t *bp = B + p * ldb;
#pragma GCC unroll 8
        for (int v = 0; v < nv; v++)
            b[v] = (__m512bh)_mm512_maskz_loadu_epi32(v == nv - 1 ? last : 0xFFFF, bp + 16 * v);
        const uint32_t *ap = A + p * csa;
#pragma GCC unroll 8
        for (int r = 0; r < mr; r++) {
            int w; /* the pair as written (bf16 rows alias it) */
            memcpy(&w, ap + r * rsa, sizeof w);
            const __m512bh a = (__m512bh)_mm512_set1_epi32(w);
#pragma GCC unroll 8
            for (int v = 0; v < nv; v++)
                c[r][v] = _mm512_dpbf16_ps(c[r][v], a, b[v]);
        }
    }
#pragma GCC unroll 8
    for (int r = 0; r < mr; r++)
#pragma GCC unroll 8
        for (int v = 0; v < nv; v++)
            _mm512_mask_storeu_ps(C + r * ldc + 16 * v, v == nv - 1 ? last : 0xFFFF, c[r][v]);
}

#define BLOCK_CASE(mr, nv)                                                                         \
    case (mr)*8 + (nv):                                                                            \
        block(mr, nv, K2, a, rsa, csa, b, ldb, c, ldc, accumulate, rs, last);                      \
        break;
#define BLOCK_ROW(mr) BLOCK_CASE(mr, 1) BLOCK_CASE(mr, 2) BLOCK_CASE(mr, 3) BLOCK_CASE(mr, 4)

static void gemm_bf16(int M, int N, int K2, const uint32_t *A, ptrdiff_t rsa, ptrdiff_t csa,
                      const uint32_t *B, ptrdiff_t ldb, float *C, ptrdiff_t ldc, int accumulate,
                      const float *row_scale) {
    for (int n0 = 0; n0 < N; n0 += 16 * NV) {
        const int nn = N - n0 < 16 * NV ? N - n0 : 16 * NV;
        const int nv = (nn + 15) / 16;
        const __mmask16 last = tail_mask(nn - 16 * (nv - 1));
        for (int m0 = 0; m0 < M; m0 += MR) {
            const int mr = M - m0 < MR ? M - m0 : MR;
            const uint32_t *a = A + m0 * rsa;
            const uint32_t *b = B + n0;
            float *c = C + m0 * ldc + n0;
            const float *rs = accumulate && row_scale ? row_scale + m0 : NULL;
            switch (mr * 8 + nv) {
                BLOCK_ROW(1)
                BLOCK_ROW(2)
                BLOCK_ROW(3)
                BLOCK_ROW(4)
                BLOCK_ROW(5)
                BLOCK_ROW(6)
            default: break;
            }
        }
    }
}

/* 16 floats (masked) to 16 bf16, nearest even. */
static inline __m256i cvt16(const float *src, __mmask16 k) {
    return (__m256i)_mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(k, src));
}

static void cvt_rows_bf16(const float *src, ptrdiff_t ld, int rows, int cols, uint16_t *dst,
                          ptrdiff_t ldd) {
    const int cols2 = (cols + 1) & ~1; /* an odd row ends in a zero pad */
    for (int r = 0; r < rows; r++) {
        const float *s = src + r * ld;
        uint16_t *d = dst + r * ldd;
        for (int c = 0; c < cols2; c += 16) {
            const __mmask16 k = tail_mask(cols - c), kd = tail_mask(cols2 - c);
            _mm256_mask_storeu_epi16(d + c, kd, cvt16(s + c, k));
        }
    }
}

/* Rows 2p and 2p+1 interleaved: lanes (a0, b0, a1, b1, ...). */
static void pack_rows_interleave_bf16(const float *src, ptrdiff_t ld, int rows, int cols,
                                      uint32_t *dst, ptrdiff_t ldd) {
    const __m512i idx = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24,
                                         8, 23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
    for (int p = 0; 2 * p < rows; p++) {
        const float *s0 = src + 2 * p * ld;
        const float *s1 = 2 * p + 1 < rows ? s0 + ld : NULL;
        uint32_t *d = dst + p * ldd;
        for (int c = 0; c < cols; c += 16) {
            const __mmask16 k = tail_mask(cols - c);
            const __m512 a = _mm512_maskz_loadu_ps(k, s0 + c);
            const __m512 b = s1 ? _mm512_maskz_loadu_ps(k, s1 + c) : _mm512_setzero_ps();
            const __m512i ab = (__m512i)_mm512_cvtne2ps_pbh(b, a); /* a0..a15 b0..b15 */
            _mm512_mask_storeu_epi32(d + c, k, _mm512_permutexvar_epi16(idx, ab));
        }
    }
}

/* dst[p * ldd + r] = (src[r][2p], src[r][2p+1]): 16 rows at a time, each
 * pair gathered as one 64-bit element. */
static void pack_pairs_t_bf16(const float *src, ptrdiff_t ld, int rows, int cols, uint32_t *dst,
                              ptrdiff_t ldd) {
    const int full = cols / 2, odd = cols & 1;
    int r0 = 0;
    if (ld <= (ptrdiff_t)(0x7fffffff / 16)) {
        const __m256i i8 = _mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7),
                                              _mm256_set1_epi32((int)ld));
        const __m512i i16 = _mm512_mullo_epi32(
            _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
            _mm512_set1_epi32((int)ld));
        for (; r0 + 16 <= rows; r0 += 16) {
            const float *s = src + r0 * ld;
            for (int p = 0; p < full; p++) {
                const __m512 lo = _mm512_castpd_ps(_mm512_i32gather_pd(i8, s + 2 * p, 4));
                const __m512 hi = _mm512_castpd_ps(_mm512_i32gather_pd(i8, s + 8 * ld + 2 * p, 4));
                _mm512_storeu_si512(dst + p * ldd + r0, (__m512i)_mm512_cvtne2ps_pbh(hi, lo));
            }
            if (odd) {
                const __m512 x = _mm512_i32gather_ps(i16, s + 2 * full, 4);
                _mm512_storeu_si512(dst + full * ldd + r0,
                                    _mm512_cvtepu16_epi32((__m256i)_mm512_cvtneps_pbh(x)));
            }
        }
    }
    /* The last rows: through a 16-float row conversion each. */
    uint16_t row[32];
    for (int r = r0; r < rows; r++)
        for (int c = 0; c < cols; c += 32) {
            const int n = cols - c < 32 ? cols - c : 32;
            _mm256_storeu_si256((__m256i *)row, cvt16(src + r * ld + c, tail_mask(n)));
            _mm256_storeu_si256((__m256i *)(row + 16),
                                cvt16(src + r * ld + c + 16, tail_mask(n > 16 ? n - 16 : 0)));
            for (int q = 0; 2 * q < n; q++)
                dst[(c / 2 + q) * ldd + r] =
                    (uint32_t)row[2 * q] | (2 * q + 1 < n ? (uint32_t)row[2 * q + 1] << 16 : 0u);
        }
}

const attn_flash_bf16_kernels attn_flash_kernels_bf16 = {
    .name = "avx512-bf16",
    .gemm = gemm_bf16,
    .cvt_rows = cvt_rows_bf16,
    .pack_rows_interleave = pack_rows_interleave_bf16,
    .pack_pairs_t = pack_pairs_t_bf16,
};
#else
typedef int attn_flash_bf16_unavailable; /* keep the translation unit non-empty */
#endif
