/* AVX2 + FMA micro-kernels for the fused attention (see flash_kernels.h).
 * Compiled for AVX2 by the pragma below whatever the build flags; only called
 * after __builtin_cpu_supports("avx2") and ("fma") said yes. */
#include "flash_kernels.h"

#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__)
#pragma GCC target("avx2,fma")
#include <immintrin.h>

#include "exp_avx2.h"

#define MR 6  /* rows of C per register block */
#define NV 2  /* 8-float vectors per block: 6 x 2 = 12 of the 16 ymm registers */
#define NC 64 /* columns a row block sweeps before the next: B's K x 64 stays in L1 */

static inline __m256i tail_mask(int n) {
    const __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), idx);
}

/* One mr x (nv * 8) block of C; mr, nv and tail are constants after inlining
 * so the 12 accumulators, 2 B vectors, the A broadcast and (tail blocks only)
 * the last vector's mask fit the 16 registers without a spill: full vectors
 * load and store unmasked. A's rows are read through two bases 3 rows apart,
 * two pointer steps a k. */
static inline __attribute__((always_inline)) void
block(const int mr, const int nv, const int tail, int K, const float *A, ptrdiff_t rsa,
      ptrdiff_t csa, const float *B, ptrdiff_t ldb, float *C, ptrdiff_t ldc, int accumulate,
      const float *rs, __m256i last) {
#define LOADV(p, v) (tail && (v) == nv - 1 ? _mm256_maskload_ps((p), last) : _mm256_loadu_ps(p))
    __m256 c[MR][NV];
#pragma GCC unroll 8
    for (int r = 0; r < mr; r++)
#pragma GCC unroll 8
        for (int v = 0; v < nv; v++)
            c[r][v] = accumulate ? LOADV(C + r * ldc + 8 * v, v) : _mm256_setzero_ps();
    if (rs) /* rescale the running output as it is loaded */
#pragma GCC unroll 8
        for (int r = 0; r < mr; r++)
#pragma GCC unroll 8
            for (int v = 0; v < nv; v++)
                c[r][v] = _mm256_mul_ps(c[r][v], _mm256_set1_ps(rs[r]));
    const float *a0 = A, *a3 = mr > 3 ? A + 3 * rsa : A;
    for (int k = 0; k < K; k++, a0 += csa, a3 += csa, B += ldb) {
        __m256 b[NV];
#pragma GCC unroll 8
        for (int v = 0; v < nv; v++)
            b[v] = LOADV(B + 8 * v, v);
#pragma GCC unroll 8
        for (int r = 0; r < mr; r++) {
            const __m256 a = _mm256_broadcast_ss(r < 3 ? a0 + r * rsa : a3 + (r - 3) * rsa);
#pragma GCC unroll 8
            for (int v = 0; v < nv; v++)
                c[r][v] = _mm256_fmadd_ps(a, b[v], c[r][v]);
        }
    }
#pragma GCC unroll 8
    for (int r = 0; r < mr; r++)
#pragma GCC unroll 8
        for (int v = 0; v < nv; v++) {
            if (tail && v == nv - 1)
                _mm256_maskstore_ps(C + r * ldc + 8 * v, last, c[r][v]);
            else
                _mm256_storeu_ps(C + r * ldc + 8 * v, c[r][v]);
        }
#undef LOADV
}

#define BLOCK_CASE(mr, nv, tail)                                                                   \
    case ((mr)*4 + (nv)) * 2 + (tail):                                                             \
        block(mr, nv, tail, K, a, rsa, csa, b, ldb, c, ldc, accumulate, rs, last);                 \
        break;
#define BLOCK_ROW(mr)                                                                              \
    BLOCK_CASE(mr, 1, 0) BLOCK_CASE(mr, 1, 1) BLOCK_CASE(mr, 2, 0) BLOCK_CASE(mr, 2, 1)

/* Row blocks outer, column blocks inner within NC columns: the 6 A rows a
 * block reads (strided rows of K or Q, which alias in L1) stay in L1 while B
 * is swept. Every C entry is the same k-ordered sum in any block order. */
static void gemm_avx2(int M, int N, int K, const float *A, ptrdiff_t rsa, ptrdiff_t csa,
                      const float *B, ptrdiff_t ldb, float *C, ptrdiff_t ldc, int accumulate,
                      const float *row_scale) {
    for (int n1 = 0; n1 < N; n1 += NC) {
        const int n1end = N - n1 < NC ? N : n1 + NC;
        for (int m0 = 0; m0 < M; m0 += MR) {
            const int mr = M - m0 < MR ? M - m0 : MR;
            const float *a = A + m0 * rsa;
            const float *rs = accumulate && row_scale ? row_scale + m0 : NULL;
            for (int n0 = n1; n0 < n1end; n0 += 8 * NV) {
                const int nn = n1end - n0 < 8 * NV ? n1end - n0 : 8 * NV;
                const int nv = (nn + 7) / 8, tail = nn % 8 != 0;
                const __m256i last = tail_mask(nn - 8 * (nv - 1));
                const float *b = B + n0;
                float *c = C + m0 * ldc + n0;
                switch ((mr * 4 + nv) * 2 + tail) {
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
}

/* Columns [c, c + 8 nv) of softmax_cols; nv (1 or 2) is a constant after
 * inlining: two vectors a row give the loops two independent chains, and
 * a pass over the rows serves 16 columns, as one AVX-512 vector does. */
static inline __attribute__((always_inline)) void softmax_block(const int nv, float *st, int nk,
                                                                ptrdiff_t ld, float *m, float *l,
                                                                float *alpha, __m256 vscale) {
    const __m256 ninf = _mm256_set1_ps(-__builtin_inff());
    __m256 mt[2] = {ninf, ninf}, shift[2], sum[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
    /* max_ps returns its second operand when one is NaN: as fmaxf, a NaN
     * score does not become the maximum (it turns its column NaN below). */
    for (int r = 0; r < nk; r++)
        for (int v = 0; v < nv; v++)
            mt[v] = _mm256_max_ps(_mm256_loadu_ps(st + r * ld + 8 * v), mt[v]);
    for (int v = 0; v < nv; v++) {
        const __m256 mo = _mm256_loadu_ps(m + 8 * v);
        const __m256 mn = _mm256_max_ps(mt[v], mo);
        /* Columns still fully masked shift by 0 so everything stays 0. */
        shift[v] = _mm256_andnot_ps(_mm256_cmp_ps(mn, ninf, _CMP_EQ_OQ), mn);
        _mm256_storeu_ps(alpha + 8 * v,
                         attn_exp8(_mm256_mul_ps(_mm256_sub_ps(mo, shift[v]), vscale)));
        _mm256_storeu_ps(m + 8 * v, mn);
    }
    for (int r = 0; r < nk; r++)
        for (int v = 0; v < nv; v++) {
            float *x = st + r * ld + 8 * v;
            const __m256 p =
                attn_exp8(_mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(x), shift[v]), vscale));
            _mm256_storeu_ps(x, p);
            sum[v] = _mm256_add_ps(sum[v], p);
        }
    for (int v = 0; v < nv; v++)
        _mm256_storeu_ps(l + 8 * v, _mm256_fmadd_ps(_mm256_loadu_ps(l + 8 * v),
                                                    _mm256_loadu_ps(alpha + 8 * v), sum[v]));
}

static void softmax_cols_avx2(float *st, int nk, int ncols, ptrdiff_t ld, float *m, float *l,
                              float *alpha, float scale) {
    const __m256 vscale = _mm256_set1_ps(scale);
    int c = 0;
    for (; c + 16 <= ncols; c += 16)
        softmax_block(2, st + c, nk, ld, m + c, l + c, alpha + c, vscale);
    for (; c < ncols; c += 8) /* ncols is a multiple of 8 (ATTN_FLASH_PAD) */
        softmax_block(1, st + c, nk, ld, m + c, l + c, alpha + c, vscale);
}

/* x[j] = exp(s[j] * scale - shift) for 8 floats (unfused, rounded as the
 * generic s * scale - shift). */
static inline void exp8_row(const float *s, float *p, __m256 vscale, __m256 vshift) {
    _mm256_storeu_ps(p,
                     attn_exp8(_mm256_sub_ps(_mm256_mul_ps(_mm256_loadu_ps(s), vscale), vshift)));
}

/* Whole vectors, then the tail through a vector on the stack: AMD's masked
 * stores are slow (microcoded), so the hot loops have none. */
static void exp_row_avx2(const float *s, float *p, int n, float scale, float shift) {
    const __m256 vscale = _mm256_set1_ps(scale), vshift = _mm256_set1_ps(shift);
    int j = 0;
    for (; j + 8 <= n; j += 8)
        exp8_row(s + j, p + j, vscale, vshift);
    if (j < n) {
        float t[8] = {0};
        memcpy(t, s + j, (size_t)(n - j) * sizeof(float));
        exp8_row(t, t, vscale, vshift);
        memcpy(p + j, t, (size_t)(n - j) * sizeof(float));
    }
}

/* dst (8 x 8 at d, row stride ldd) = the transpose of 8 rows at s (stride ld). */
static inline __attribute__((always_inline)) void transpose8(const float *s, ptrdiff_t ld, float *d,
                                                             ptrdiff_t ldd) {
    __m256 r[8], t[8];
    for (int i = 0; i < 8; i++)
        r[i] = _mm256_loadu_ps(s + i * ld);
    for (int i = 0; i < 8; i += 2) {
        t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
    }
    for (int i = 0; i < 8; i += 4) {
        r[i] = _mm256_shuffle_ps(t[i], t[i + 2], 0x44);
        r[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], 0xEE);
        r[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0x44);
        r[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0xEE);
    }
    for (int i = 0; i < 4; i++) {
        _mm256_storeu_ps(d + i * ldd, _mm256_permute2f128_ps(r[i], r[i + 4], 0x20));
        _mm256_storeu_ps(d + (i + 4) * ldd, _mm256_permute2f128_ps(r[i], r[i + 4], 0x31));
    }
}

/* 8 x 8 blocks through registers; the ragged edges one value at a time. */
static void pack_t_avx2(const float *src, ptrdiff_t ld, int rows, int cols, float *dst,
                        ptrdiff_t ldd) {
    const int r8 = rows / 8 * 8, c8 = cols / 8 * 8;
    for (int r = 0; r < r8; r += 8)
        for (int c = 0; c < c8; c += 8)
            transpose8(src + r * ld + c, ld, dst + c * ldd + r, ldd);
    for (int r = 0; r < rows; r++)
        for (int c = r < r8 ? c8 : 0; c < cols; c++)
            dst[c * ldd + r] = src[r * ld + c];
}

/* ds = p (ds [* mult] - D) scale on 8 floats, unfused as the generic. */
static inline void ds8(const float *p, float *ds, const float *mult, __m256 vd, __m256 vs) {
    __m256 d = _mm256_loadu_ps(ds);
    if (mult) d = _mm256_mul_ps(d, _mm256_loadu_ps(mult));
    _mm256_storeu_ps(ds,
                     _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(p), _mm256_sub_ps(d, vd)), vs));
}

static void ds_row_avx2(const float *p, float *ds, const float *mult, int n, float D, float scale) {
    const __m256 vd = _mm256_set1_ps(D), vs = _mm256_set1_ps(scale);
    int j = 0;
    for (; j + 8 <= n; j += 8)
        ds8(p + j, ds + j, mult ? mult + j : NULL, vd, vs);
    if (j < n) { /* the tail on the stack, as exp_row_avx2 */
        float tp[8] = {0}, td[8] = {0}, tm[8] = {0};
        const size_t b = (size_t)(n - j) * sizeof(float);
        memcpy(tp, p + j, b);
        memcpy(td, ds + j, b);
        if (mult) memcpy(tm, mult + j, b);
        ds8(tp, td, mult ? tm : NULL, vd, vs);
        memcpy(ds + j, td, b);
    }
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
