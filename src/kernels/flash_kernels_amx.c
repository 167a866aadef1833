/* The fused attention's bf16 products on AMX tiles (see flash_kernels.h).
 * CMake compiles this file alone with -mamx-tile -mamx-bf16 (and the
 * AVX512-BF16 flags); it runs only after attn_flash_amx_usable() said yes.
 *
 * One TDPBF16PS multiplies a 16 x 16-pair tile of A by a 16-pair x 16 tile of
 * B into a 16 x 16 fp32 tile: 8192 multiply-adds, against 32 for one
 * vdpbf16ps. The pair layout of flash_kernels.h is the tiles' own (B's rows
 * of pairs are AMX's "VNNI" layout), so the operands load as they are. The
 * 16-aligned part of C goes through the tiles when K2 is a multiple of 16
 * (A's rows are transposed into a copy first when A holds its pairs down
 * the columns); the edges, and every other call, take the AVX512-BF16
 * kernel. Both add exact bf16
 * products in fp32, in different orders: within rounding of each other. */
#define _DEFAULT_SOURCE /* syscall */
#include "flash_kernels.h"

#include "attn/cpu.h"

#if defined(__x86_64__) && defined(__GNUC__) && defined(__AMX_BF16__) && defined(__AMX_TILE__)
#include <immintrin.h>
#include <stdint.h>

/* The kernel exists in this build; attn/cpu.h says whether the CPU and OS
 * allow it. */
int attn_flash_amx_usable(void) {
    return attn_cpu_has(ATTN_CPU_AMX_BF16);
}

/* Palette 1: tile 0 C (16 x 16 fp32), 1 A (16 rows x 16 pairs), 2 B
 * (16 pair rows x 16 columns); 64 bytes a row each. */
typedef struct __attribute__((packed, aligned(64))) tile_config {
    uint8_t palette_id, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} tile_config;

/* In-register transpose of 16 rows of 16 32-bit values (bit patterns moved,
 * never computed on): after stage b, rows i and i + b (i & b == 0) have
 * swapped their off-diagonal b-wide blocks; stages 8, 4, 2, 1 make the
 * whole transpose. Stage s's permute indices: row i's lane l is x's lane l
 * or y's lane l - b (LO); row i + b's is x's lane l + b or y's lane l (HI),
 * y's lanes numbered from 16. */
#define LO(b, l) (((l) & (b)) ? 16 + (l) - (b) : (l))
#define HI(b, l) (((l) & (b)) ? 16 + (l) : (l) + (b))
#define ROW(F, b)                                                                                  \
    {                                                                                              \
        F(b, 0), F(b, 1), F(b, 2), F(b, 3), F(b, 4), F(b, 5), F(b, 6), F(b, 7), F(b, 8), F(b, 9),  \
            F(b, 10), F(b, 11), F(b, 12), F(b, 13), F(b, 14), F(b, 15)                             \
    }
static const int32_t PERM_LO[4][16] = {ROW(LO, 8), ROW(LO, 4), ROW(LO, 2), ROW(LO, 1)};
static const int32_t PERM_HI[4][16] = {ROW(HI, 8), ROW(HI, 4), ROW(HI, 2), ROW(HI, 1)};
#undef ROW
#undef HI
#undef LO

static inline void transpose16(__m512 r[16]) {
    for (int s = 0; s < 4; s++) {
        const int b = 8 >> s;
        const __m512i lo = _mm512_loadu_si512(PERM_LO[s]), hi = _mm512_loadu_si512(PERM_HI[s]);
        for (int i = 0; i < 16; i++) {
            if (i & b) continue;
            const __m512 x = r[i], y = r[i + b];
            r[i] = _mm512_permutex2var_ps(x, lo, y);
            r[i + b] = _mm512_permutex2var_ps(x, hi, y);
        }
    }
}

/* The most pairs a transposed A block may have (its copy is on the stack). */
#define MAX_K2_T 256

void attn_flash_gemm_amx(int M, int N, int K2, const uint32_t *A, ptrdiff_t rsa, ptrdiff_t csa,
                         const uint32_t *B, ptrdiff_t ldb, float *C, ptrdiff_t ldc, int accumulate,
                         const float *row_scale) {
    const attn_flash_bf16_kernels *avx = &attn_flash_kernels_bf16;
    const int M16 = M & ~15, N16 = N & ~15;
    /* A with its pairs down the columns (rsa == 1) is transposed into rows
     * 16 at a time, below; other strides take the AVX-512 kernel. */
    const int a_t = csa != 1;
    if ((a_t && (rsa != 1 || K2 > MAX_K2_T)) || K2 % 16 != 0 || M16 == 0 || N16 == 0) {
        avx->gemm(M, N, K2, A, rsa, csa, B, ldb, C, ldc, accumulate, row_scale);
        return;
    }
    if (accumulate && row_scale) /* rescale the running output first */
        for (int i = 0; i < M16; i++) {
            const __m512 s = _mm512_set1_ps(row_scale[i]);
            for (int n = 0; n < N16; n += 16)
                _mm512_storeu_ps(C + i * ldc + n,
                                 _mm512_mul_ps(s, _mm512_loadu_ps(C + i * ldc + n)));
        }
    tile_config cfg = {0};
    cfg.palette_id = 1;
    for (int t = 0; t < 3; t++)
        cfg.rows[t] = 16, cfg.colsb[t] = 64;
    _tile_loadconfig(&cfg);
    uint32_t at[16 * MAX_K2_T] __attribute__((aligned(64)));
    for (int m0 = 0; m0 < M16; m0 += 16) {
        const uint32_t *a = A + m0 * rsa; /* rows m0.. of A, pairs along */
        ptrdiff_t lda = rsa;
        if (a_t) { /* at[ii * K2 + p] = A2(m0 + ii, p) */
            for (int p0 = 0; p0 < K2; p0 += 16) {
                __m512 r[16];
                for (int p = 0; p < 16; p++)
                    r[p] = _mm512_loadu_ps((const float *)(A + m0 + (p0 + p) * csa));
                transpose16(r);
                for (int ii = 0; ii < 16; ii++)
                    _mm512_storeu_ps((float *)(at + ii * K2 + p0), r[ii]);
            }
            a = at, lda = K2;
        }
        for (int n0 = 0; n0 < N16; n0 += 16) {
            float *c = C + m0 * ldc + n0;
            if (accumulate)
                _tile_loadd(0, c, ldc * (ptrdiff_t)sizeof(float));
            else
                _tile_zero(0);
            for (int p0 = 0; p0 < K2; p0 += 16) {
                _tile_loadd(1, a + p0, lda * (ptrdiff_t)sizeof(uint32_t));
                _tile_loadd(2, B + p0 * ldb + n0, ldb * (ptrdiff_t)sizeof(uint32_t));
                _tile_dpbf16ps(0, 1, 2);
            }
            _tile_stored(0, c, ldc * (ptrdiff_t)sizeof(float));
        }
    }
    _tile_release();
    /* The edges: the columns past N16 of the first M16 rows, then the rows
     * past M16 (each scales its own rows when asked). */
    if (N16 < N)
        avx->gemm(M16, N - N16, K2, A, rsa, csa, B + N16, ldb, C + N16, ldc, accumulate, row_scale);
    if (M16 < M)
        avx->gemm(M - M16, N, K2, A + M16 * rsa, rsa, csa, B, ldb, C + M16 * ldc, ldc, accumulate,
                  row_scale ? row_scale + M16 : NULL);
}

#else
int attn_flash_amx_usable(void) {
    return 0;
}
void attn_flash_gemm_amx(int M, int N, int K2, const uint32_t *A, ptrdiff_t rsa, ptrdiff_t csa,
                         const uint32_t *B, ptrdiff_t ldb, float *C, ptrdiff_t ldc, int accumulate,
                         const float *row_scale) {
    (void)M, (void)N, (void)K2, (void)A, (void)rsa, (void)csa, (void)B, (void)ldb, (void)C;
    (void)ldc, (void)accumulate, (void)row_scale; /* never called: not usable here */
}
#endif
