/* Portable C micro-kernels for the fused attention (see flash_kernels.h):
 * the fallback on any CPU and the path tests use to check the SIMD ones. */
#include <math.h>

#include "flash_kernels.h"

static void gemm_generic(int M, int N, int K, const float *A, ptrdiff_t rsa, ptrdiff_t csa,
                         const float *B, ptrdiff_t ldb, float *C, ptrdiff_t ldc, int accumulate,
                         const float *row_scale) {
    for (int i = 0; i < M; i++) {
        float *c = C + i * ldc;
        if (!accumulate)
            for (int n = 0; n < N; n++)
                c[n] = 0.0f;
        else if (row_scale)
            for (int n = 0; n < N; n++)
                c[n] *= row_scale[i];
        /* a * b + c with one rounding, as the SIMD paths' fused multiply-add
         * (the float product is exact in double): a product beyond FLT_MAX
         * then overflows as it does there, to the sign of the sum so far,
         * instead of becoming +inf + -inf = NaN. */
        for (int k = 0; k < K; k++) {
            const double a = A[i * rsa + k * csa];
            const float *b = B + k * ldb;
            for (int n = 0; n < N; n++)
                c[n] = (float)(a * (double)b[n] + (double)c[n]);
        }
    }
}

static void softmax_cols_generic(float *st, int nk, int ncols, ptrdiff_t ld, float *m, float *l,
                                 float *alpha, float scale) {
    for (int c = 0; c < ncols; c++) {
        float mt = -INFINITY;
        for (int r = 0; r < nk; r++)
            mt = fmaxf(mt, st[r * ld + c]);
        const float mn = fmaxf(m[c], mt);
        /* A column still fully masked keeps everything at zero. */
        const float shift = mn == -INFINITY ? 0.0f : mn;
        alpha[c] = expf((m[c] - shift) * scale);
        float sum = 0.0f;
        for (int r = 0; r < nk; r++) {
            const float p = expf((st[r * ld + c] - shift) * scale);
            st[r * ld + c] = p;
            sum += p;
        }
        l[c] = l[c] * alpha[c] + sum;
        m[c] = mn;
    }
}

static void exp_row_generic(const float *s, float *p, int n, float scale, float shift) {
    for (int j = 0; j < n; j++)
        p[j] = expf(s[j] * scale - shift);
}

static void pack_t_generic(const float *src, ptrdiff_t ld, int rows, int cols, float *dst,
                           ptrdiff_t ldd) {
    for (int r = 0; r < rows; r++) /* rows in order: they stream from memory */
        for (int c = 0; c < cols; c++)
            dst[c * ldd + r] = src[r * ld + c];
}

static void ds_row_generic(const float *p, float *ds, const float *mult, int n, float D,
                           float scale) {
    if (mult)
        for (int j = 0; j < n; j++)
            ds[j] = p[j] * (ds[j] * mult[j] - D) * scale;
    else
        for (int j = 0; j < n; j++)
            ds[j] = p[j] * (ds[j] - D) * scale;
}

const attn_flash_kernels attn_flash_kernels_generic = {
    .name = "generic",
    .gemm = gemm_generic,
    .softmax_cols = softmax_cols_generic,
    .exp_row = exp_row_generic,
    .ds_row = ds_row_generic,
    .pack_t = pack_t_generic,
};
