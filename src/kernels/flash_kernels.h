/* Internal: the per-ISA micro-kernels behind attn/flash_attention.h.
 *
 * Each instruction set provides the same small table; flash_attention.c picks
 * one at run time. Matrices are row-major float32 with explicit strides. */
#ifndef ATTN_FLASH_KERNELS_H
#define ATTN_FLASH_KERNELS_H

#include <stddef.h>
#include <stdint.h>

/* Buffers handed to kernels are padded to a multiple of this many floats. */
#define ATTN_FLASH_PAD 16

typedef struct attn_flash_kernels {
    const char *name;
    /* C (M, N) = [C +] A (M, K) B (K, N) with A(i, k) = A[i * rsa + k * csa],
     * B(k, n) = B[k * ldb + n], C(i, n) = C[i * ldc + n]; accumulate != 0
     * adds to C, first multiplying row i of C by row_scale[i] when row_scale
     * is not NULL (the online-softmax rescale, fused into the load of C). A
     * may be read transposed (rsa = 1), B rows must be unit stride. */
    void (*gemm)(int M, int N, int K, const float *A, ptrdiff_t rsa, ptrdiff_t csa, const float *B,
                 ptrdiff_t ldb, float *C, ptrdiff_t ldc, int accumulate, const float *row_scale);
    /* Online-softmax step on a transposed score tile st (nk rows = keys,
     * columns = queries, row stride ld). For each column c < ncols (ncols and
     * the arrays padded to ATTN_FLASH_PAD; extra columns are computed and
     * ignored): mt = max_r st[r][c]; mn = max(m[c], mt); alpha[c] =
     * exp((m[c] - mn) * scale); st[r][c] = exp((st[r][c] - mn) * scale);
     * l[c] = l[c] * alpha[c] + sum_r st[r][c]; m[c] = mn. -inf scores give 0;
     * a column that is -inf so far keeps m = -inf, l = 0, alpha = 0. */
    void (*softmax_cols)(float *st, int nk, int ncols, ptrdiff_t ld, float *m, float *l,
                         float *alpha, float scale);
    /* p[j] = exp(s[j] * scale - shift) for j < n (in place allowed). */
    void (*exp_row)(const float *s, float *p, int n, float scale, float shift);
    /* ds[j] = p[j] * ((mult ? ds[j] * mult[j] : ds[j]) - D) * scale, j < n:
     * the softmax backward of one row, ds holding dP on entry. */
    void (*ds_row)(const float *p, float *ds, const float *mult, int n, float D, float scale);
    /* dst[c * ldd + r] = src[r * ld + c] for r < rows, c < cols (transpose a
     * tile of strided rows into columns). */
    void (*pack_t)(const float *src, ptrdiff_t ld, int rows, int cols, float *dst, ptrdiff_t ldd);
} attn_flash_kernels;

/* The bf16 path (AVX512-BF16 only): operands rounded to bf16, products
 * accumulated in fp32 by vdpbf16ps. A "pair" is a uint32 holding two bf16
 * along the reduction axis (element 2p in the low half, 2p + 1 in the high
 * half; an odd length ends in a zero). */
typedef struct attn_flash_bf16_kernels {
    const char *name;
    /* C (M, N) = [C +] sum_p A2(i, p) B2(p, n) over K2 pairs, with A2(i, p) =
     * A[i * rsa + p * csa], B2(p, n) = B[p * ldb + n]; accumulate and
     * row_scale as attn_flash_kernels.gemm. */
    void (*gemm)(int M, int N, int K2, const uint32_t *A, ptrdiff_t rsa, ptrdiff_t csa,
                 const uint32_t *B, ptrdiff_t ldb, float *C, ptrdiff_t ldc, int accumulate,
                 const float *row_scale);
    /* dst[r * ldd + c] = bf16(src[r * ld + c]), c < cols, then one zero when
     * cols is odd: rows of pairs along c. */
    void (*cvt_rows)(const float *src, ptrdiff_t ld, int rows, int cols, uint16_t *dst,
                     ptrdiff_t ldd);
    /* dst[p * ldd + c] = (src[2p][c], src[2p + 1][c]) for c < cols: pairs
     * along the rows (an odd last row pairs with zero). */
    void (*pack_rows_interleave)(const float *src, ptrdiff_t ld, int rows, int cols, uint32_t *dst,
                                 ptrdiff_t ldd);
    /* dst[p * ldd + r] = (src[r][2p], src[r][2p + 1]) for r < rows: pairs
     * along c, transposed. */
    void (*pack_pairs_t)(const float *src, ptrdiff_t ld, int rows, int cols, uint32_t *dst,
                         ptrdiff_t ldd);
} attn_flash_bf16_kernels;

/* AMX (flash_kernels_amx.c): 1 when the CPU has AMX-BF16 and the OS gave
 * this process the tile state (asked for on the first call); then
 * attn_flash_gemm_amx is the bf16 gemm above on tiles (edges and other
 * layouts through attn_flash_kernels_bf16's), within rounding of it. */
int attn_flash_amx_usable(void);
void attn_flash_gemm_amx(int M, int N, int K2, const uint32_t *A, ptrdiff_t rsa, ptrdiff_t csa,
                         const uint32_t *B, ptrdiff_t ldb, float *C, ptrdiff_t ldc, int accumulate,
                         const float *row_scale);

extern const attn_flash_kernels attn_flash_kernels_generic;
#if defined(__x86_64__) && defined(__GNUC__)
#define ATTN_FLASH_HAVE_X86 1
extern const attn_flash_kernels attn_flash_kernels_avx2;
extern const attn_flash_kernels attn_flash_kernels_avx512;
extern const attn_flash_bf16_kernels attn_flash_kernels_bf16;
#endif

#endif
