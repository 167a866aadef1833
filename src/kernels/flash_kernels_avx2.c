/* AVX2 + FMA micro-kernels for the fused attention (see flash_kernels.h).
 * Compiled for AVX2 by the pragma below whatever the build flags; only called
 * after __builtin_cpu_supports("avx2") and ("fma") said yes. */
#include "flash_kernels.h"

#if defined(__x86_64__) && defined(__GNUC__)
#pragma GCC target("avx2,fma")
#include <immintrin.h>

#define MR 6 /* rows of C per register block */
#define NV 2 /* 8-float vectors per block: 6 x 2 = 12 of the 16 ymm registers */

static inline __m256i tail_mask(int n) {
    const __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), idx);
}

static inline __attribute__((always_inline)) void
block(const int mr, const int nv, int K, const float *A, ptrdiff_t rsa, ptrdiff_t csa,
      const float *B, ptrdiff_t ldb, float *C, ptrdiff_t ldc, int accumulate, const float *rs,
      __m256i last) {
    const __m256i full = _mm256_set1_epi32(-1);
    __m256 c[MR][NV];
#pragma GCC unroll 8
    for (int r = 0; r < mr; r++)
#pragma GCC unroll 8
        for (int v = 0; v < nv; v++)
            c[r][v] = accumulate
                          ? _mm256_maskload_ps(C + r * ldc + 8 * v, v == nv - 1 ? last : full)
                          : _mm256_setzero_ps();
    if (rs) /* rescale the running output as it is loaded */
#pragma GCC unroll 8
        for (int r = 0; r < mr; r++)
#pragma GCC unroll 8
            for (int v = 0; v < nv; v++)
                c[r][v] = _mm256_mul_ps(c[r][v], _mm256_set1_ps(rs[r]));
    for (int k = 0; k < K; k++) {
        __m256 b[NV];
        const float *bk = B + k * ldb;
#pragma GCC unroll 8
        for (int v = 0; v < nv; v++)
            b[v] = _mm256_maskload_ps(bk + 8 * v, v == nv - 1 ? last : full);
        const float *ak = A + k * csa;
#pragma GCC unroll 8
        for (int r = 0; r < mr; r++) {
            const __m256 a = _mm256_broadcast_ss(ak + r * rsa);
#pragma GCC unroll 8
            for (int v = 0; v < nv; v++)
                c[r][v] = _mm256_fmadd_ps(a, b[v], c[r][v]);
        }
    }
#pragma GCC unroll 8
    for (int r = 0; r < mr; r++)
#pragma GCC unroll 8
        for (int v = 0; v < nv; v++)
            _mm256_maskstore_ps(C + r * ldc + 8 * v, v == nv - 1 ? last : full, c[r][v]);
}

#define BLOCK_CASE(mr, nv)                                                                         \
    case (mr)*8 + (nv):                                                                            \
        block(mr, nv, K, a, rsa, csa, b, ldb, c, ldc, accumulate, rs, last);                       \
        break;
#define BLOCK_ROW(mr) BLOCK_CASE(mr, 1) BLOCK_CASE(mr, 2)

static void gemm_avx2(int M, int N, int K, const float *A, ptrdiff_t rsa, ptrdiff_t csa,
                      const float *B, ptrdiff_t ldb, float *C, ptrdiff_t ldc, int accumulate,
                      const float *row_scale) {
    for (int n0 = 0; n0 < N; n0 += 8 * NV) {
        const int nn = N - n0 < 8 * NV ? N - n0 : 8 * NV;
        const int nv = (nn + 7) / 8;
        const __m256i last = tail_mask(nn - 8 * (nv - 1));
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

/* exp(x) (Cody-Waite reduction + Cephes' expf polynomial, ~1 ulp); x < -87
 * (and -inf) gives exactly 0, x above ln(FLT_MAX) (and +inf) gives +inf and
 * NaN stays NaN, as expf does: every SIMD path agrees with the generic one. */
static inline __m256 exp8(__m256 x) {
    const __m256 lo = _mm256_set1_ps(-87.0f), hi = _mm256_set1_ps(88.7228317f);
    const __m256 ok = _mm256_cmp_ps(x, lo, _CMP_GE_OQ);
    const __m256 big = _mm256_cmp_ps(x, hi, _CMP_GT_OQ);
    const __m256 nan = _mm256_cmp_ps(x, x, _CMP_UNORD_Q);
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
    /* p * 2^n as p * 2^a * 2^b, a + b = n: n reaches 128 near ln(FLT_MAX),
     * one factor 2^128 is not a float. */
    const __m256i ni = _mm256_cvtps_epi32(n);
    const __m256i na = _mm256_srai_epi32(ni, 1), nb = _mm256_sub_epi32(ni, na);
    const __m256i bias = _mm256_set1_epi32(127);
    const __m256 ea = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(na, bias), 23));
    const __m256 eb = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(nb, bias), 23));
    __m256 y = _mm256_and_ps(ok, _mm256_mul_ps(_mm256_mul_ps(p, ea), eb));
    y = _mm256_blendv_ps(y, _mm256_set1_ps(__builtin_inff()), big);
    return _mm256_blendv_ps(y, _mm256_add_ps(x0, x0), nan); /* NaN in, NaN out */
}

static void softmax_cols_avx2(float *st, int nk, int ncols, ptrdiff_t ld, float *m, float *l,
                              float *alpha, float scale) {
    const __m256 vscale = _mm256_set1_ps(scale);
    const __m256 ninf = _mm256_set1_ps(-__builtin_inff());
    for (int c = 0; c < ncols; c += 8) {
        __m256 mt = ninf;
        /* max_ps returns its second operand when one is NaN: as fmaxf, a NaN
         * score does not become the maximum (it turns its column NaN below). */
        for (int r = 0; r < nk; r++)
            mt = _mm256_max_ps(_mm256_loadu_ps(st + r * ld + c), mt);
        const __m256 mo = _mm256_loadu_ps(m + c);
        const __m256 mn = _mm256_max_ps(mt, mo);
        /* Columns still fully masked shift by 0 so everything stays 0. */
        const __m256 shift = _mm256_andnot_ps(_mm256_cmp_ps(mn, ninf, _CMP_EQ_OQ), mn);
        const __m256 al = exp8(_mm256_mul_ps(_mm256_sub_ps(mo, shift), vscale));
        __m256 sum = _mm256_setzero_ps();
        for (int r = 0; r < nk; r++) {
            float *s = st + r * ld + c;
            const __m256 p = exp8(_mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(s), shift), vscale));
            _mm256_storeu_ps(s, p);
            sum = _mm256_add_ps(sum, p);
        }
        _mm256_storeu_ps(alpha + c, al);
        _mm256_storeu_ps(l + c, _mm256_fmadd_ps(_mm256_loadu_ps(l + c), al, sum));
        _mm256_storeu_ps(m + c, mn);
    }
}

static void exp_row_avx2(const float *s, float *p, int n, float scale, float shift) {
    const __m256 vscale = _mm256_set1_ps(scale), vshift = _mm256_set1_ps(shift);
    for (int j = 0; j < n; j += 8) {
        const __m256i k = tail_mask(n - j);
        /* Unfused, rounded as the generic s * scale - shift. */
        const __m256 x = _mm256_sub_ps(_mm256_mul_ps(_mm256_maskload_ps(s + j, k), vscale), vshift);
        _mm256_maskstore_ps(p + j, k, exp8(x));
    }
}

static void pack_t_avx2(const float *src, ptrdiff_t ld, int rows, int cols, float *dst,
                        ptrdiff_t ldd) {
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols; c++)
            dst[c * ldd + r] = src[r * ld + c];
}

static void ds_row_avx2(const float *p, float *ds, const float *mult, int n, float D, float scale) {
    if (mult)
        for (int j = 0; j < n; j++)
            ds[j] = p[j] * (ds[j] * mult[j] - D) * scale;
    else
        for (int j = 0; j < n; j++)
            ds[j] = p[j] * (ds[j] - D) * scale;
}

const attn_flash_kernels attn_flash_kernels_avx2 = {
    .name = "avx2",
    .gemm = gemm_avx2,
    .softmax_cols = softmax_cols_avx2,
    .exp_row = exp_row_avx2,
    .ds_row = ds_row_avx2,
    .pack_t = pack_t_avx2,
};
#else
typedef int attn_flash_avx2_unavailable; /* keep the translation unit non-empty */
#endif
