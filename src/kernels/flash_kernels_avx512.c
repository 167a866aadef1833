/* AVX-512 micro-kernels for the fused attention (see flash_kernels.h).
 * Compiled for AVX-512 by the pragma below whatever the build flags; only
 * called after __builtin_cpu_supports("avx512f") said yes. */
#include "flash_kernels.h"

#if defined(__x86_64__) && defined(__GNUC__)
#pragma GCC target("avx512f,avx512dq,avx512vl,avx2,fma")
#include <immintrin.h>

#include "exp_avx512.h"

#define MR 6 /* rows of C per register block */
#define NV 4 /* 16-float vectors of C per register block: 6 x 4 = 24 accumulators */

static inline __mmask16 tail_mask(int n) {
    return n >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << n) - 1u);
}

/* One mr x (nv * 16) block of C; mr and nv are constants after inlining so
 * the accumulators live in registers. `last` masks the final vector. */
static inline __attribute__((always_inline)) void
block(const int mr, const int nv, int K, const float *A, ptrdiff_t rsa, ptrdiff_t csa,
      const float *B, ptrdiff_t ldb, float *C, ptrdiff_t ldc, int accumulate, const float *rs,
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
    for (int k = 0; k < K; k++) {
        __m512 b[NV];
        const float *bk = B + k * ldb;
#pragma GCC unroll 8
        for (int v = 0; v < nv; v++)
            b[v] = _mm512_maskz_loadu_ps(v == nv - 1 ? last : 0xFFFF, bk + 16 * v);
        const float *ak = A + k * csa;
#pragma GCC unroll 8
        for (int r = 0; r < mr; r++) {
            const __m512 a = _mm512_set1_ps(ak[r * rsa]);
#pragma GCC unroll 8
            for (int v = 0; v < nv; v++)
                c[r][v] = _mm512_fmadd_ps(a, b[v], c[r][v]);
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
        block(mr, nv, K, a, rsa, csa, b, ldb, c, ldc, accumulate, rs, last);                       \
        break;
#define BLOCK_ROW(mr) BLOCK_CASE(mr, 1) BLOCK_CASE(mr, 2) BLOCK_CASE(mr, 3) BLOCK_CASE(mr, 4)

static void gemm_avx512(int M, int N, int K, const float *A, ptrdiff_t rsa, ptrdiff_t csa,
                        const float *B, ptrdiff_t ldb, float *C, ptrdiff_t ldc, int accumulate,
                        const float *row_scale) {
    for (int n0 = 0; n0 < N; n0 += 16 * NV) {
        const int nn = N - n0 < 16 * NV ? N - n0 : 16 * NV;
        const int nv = (nn + 15) / 16;
        const __mmask16 last = tail_mask(nn - 16 * (nv - 1));
        for (int m0 = 0; m0 < M; m0 += MR) {
            const int mr = M - m0 < MR ? M - m0 : MR;
            const float *a = A + m0 * rsa;
            const float *b = B + n0;
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

static void softmax_cols_avx512(float *st, int nk, int ncols, ptrdiff_t ld, float *m, float *l,
                                float *alpha, float scale) {
    const __m512 vscale = _mm512_set1_ps(scale);
    const __m512 ninf = _mm512_set1_ps(-__builtin_inff());
    for (int c = 0; c < ncols; c += 16) {
        __m512 mt = ninf;
        /* max_ps returns its second operand when one is NaN: as fmaxf, a NaN
         * score does not become the maximum (it turns its column NaN below). */
        for (int r = 0; r < nk; r++)
            mt = _mm512_max_ps(_mm512_loadu_ps(st + r * ld + c), mt);
        const __m512 mo = _mm512_loadu_ps(m + c);
        const __m512 mn = _mm512_max_ps(mt, mo);
        /* Columns still fully masked shift by 0 so everything stays 0. */
        const __m512 shift =
            _mm512_mask_blend_ps(_mm512_cmp_ps_mask(mn, ninf, _CMP_EQ_OQ), mn, _mm512_setzero_ps());
        const __m512 al = attn_exp16(_mm512_mul_ps(_mm512_sub_ps(mo, shift), vscale));
        __m512 sum = _mm512_setzero_ps();
        for (int r = 0; r < nk; r++) {
            float *s = st + r * ld + c;
            /* (s - shift) * scale, not a fused s * scale - shift * scale: for
             * huge scores the fused form is far from 0 at the maximum (its
             * rounding differs from shift * scale's), exp overflows, NaN. */
            const __m512 p =
                attn_exp16(_mm512_mul_ps(_mm512_sub_ps(_mm512_loadu_ps(s), shift), vscale));
            _mm512_storeu_ps(s, p);
            sum = _mm512_add_ps(sum, p);
        }
        _mm512_storeu_ps(alpha + c, al);
        _mm512_storeu_ps(l + c, _mm512_fmadd_ps(_mm512_loadu_ps(l + c), al, sum));
        _mm512_storeu_ps(m + c, mn);
    }
}

static void exp_row_avx512(const float *s, float *p, int n, float scale, float shift) {
    const __m512 vscale = _mm512_set1_ps(scale), vshift = _mm512_set1_ps(shift);
    for (int j = 0; j < n; j += 16) {
        const __mmask16 k = tail_mask(n - j);
        /* Unfused, rounded as the generic s * scale - shift. */
        const __m512 x =
            _mm512_sub_ps(_mm512_mul_ps(_mm512_maskz_loadu_ps(k, s + j), vscale), vshift);
        _mm512_mask_storeu_ps(p + j, k, attn_exp16(x));
    }
}

/* 16 rows at a time: one gather per column collects them into a vector. */
static void pack_t_avx512(const float *src, ptrdiff_t ld, int rows, int cols, float *dst,
                          ptrdiff_t ldd) {
    int r0 = 0;
    if (ld <= (ptrdiff_t)(0x7fffffff / 16)) {
        const __m512i idx = _mm512_mullo_epi32(
            _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
            _mm512_set1_epi32((int)ld));
        for (; r0 + 16 <= rows; r0 += 16)
            for (int c = 0; c < cols; c++)
                _mm512_storeu_ps(dst + c * ldd + r0,
                                 _mm512_i32gather_ps(idx, src + r0 * ld + c, 4));
    }
    for (int r = r0; r < rows; r++)
        for (int c = 0; c < cols; c++)
            dst[c * ldd + r] = src[r * ld + c];
}

static void ds_row_avx512(const float *p, float *ds, const float *mult, int n, float D,
                          float scale) {
    const __m512 vd = _mm512_set1_ps(D), vs = _mm512_set1_ps(scale);
    for (int j = 0; j < n; j += 16) {
        const __mmask16 k = tail_mask(n - j);
        __m512 d = _mm512_maskz_loadu_ps(k, ds + j);
        if (mult) d = _mm512_mul_ps(d, _mm512_maskz_loadu_ps(k, mult + j));
        d = _mm512_mul_ps(_mm512_mul_ps(_mm512_maskz_loadu_ps(k, p + j), _mm512_sub_ps(d, vd)), vs);
        _mm512_mask_storeu_ps(ds + j, k, d);
    }
}

const attn_flash_kernels attn_flash_kernels_avx512 = {
    .name = "avx512",
    .gemm = gemm_avx512,
    .softmax_cols = softmax_cols_avx512,
    .exp_row = exp_row_avx512,
    .ds_row = ds_row_avx512,
    .pack_t = pack_t_avx512,
};
#else
typedef int attn_flash_avx512_unavailable; /* keep the translation unit non-empty */
#endif
