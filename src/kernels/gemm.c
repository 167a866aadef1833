/* attn_sgemm: OpenBLAS sgemm split over OpenMP threads (see attn/gemm.h). */
#include "attn/gemm.h"

#include <cblas.h>
#include <omp.h>

#include "attn/cpu.h"

static void one_call(int trans_a, int trans_b, int M, int N, int K, float alpha, const float *A,
                     int lda, const float *B, int ldb, float beta, float *C, int ldc) {
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
                trans_b ? CblasTrans : CblasNoTrans, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

void attn_sgemm(int threads, int trans_a, int trans_b, int M, int N, int K, float alpha,
                const float *A, int lda, const float *B, int ldb, float beta, float *C, int ldc) {
    if (M <= 0 || N <= 0) return;
    if (threads <= 0) threads = attn_default_threads();
    /* Small products, OpenBLAS threading itself, or already inside a
     * parallel region: one call. */
    if (threads == 1 || openblas_get_num_threads() > 1 || omp_in_parallel() ||
        (double)M * N * K < 4.0e6) {
        one_call(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
        return;
    }
    /* Split the longer side of C into one block per thread (multiples of 16
     * so every block keeps whole vectors). */
    const int split_m = M >= N;
    const int len = split_m ? M : N;
    const int step = ((len + threads - 1) / threads + 15) / 16 * 16;
    const int nblocks = (len + step - 1) / step;
#pragma omp parallel for num_threads(threads) schedule(static, 1)
    for (int b = 0; b < nblocks; b++) {
        const int lo = b * step, n = len - lo < step ? len - lo : step;
        if (split_m) {
            const float *a = trans_a ? A + lo : A + (long)lo * lda;
            one_call(trans_a, trans_b, n, N, K, alpha, a, lda, B, ldb, beta, C + (long)lo * ldc,
                     ldc);
        } else {
            const float *b2 = trans_b ? B + (long)lo * ldb : B + lo;
            one_call(trans_a, trans_b, M, n, K, alpha, A, lda, b2, ldb, beta, C + lo, ldc);
        }
    }
}
