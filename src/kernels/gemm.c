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

/* OpenBLAS picks its kernel (and with it the rounding) by a call's shape:
 * its small-matrix kernel sums all of K in registers, its blocked one adds
 * K in chunks into C. So C is cut into blocks whose shapes depend on the
 * product alone, never on the thread count, and every thread count (1, 2,
 * ... or a caller's parallel region) computes the same blocks: the same
 * bits. At most BLOCKS blocks along the longer side of C, multiples of 16
 * (whole vectors), at least 64 long. Each block packs all of the operand
 * along the other side, so fewer blocks pack less: 4 still share out over
 * two threads (and around a core another process is using), where 8
 * packed GPT-2's (256, 3072) input gradients 8 times, more than the
 * weights themselves (the 124M fp32 step 0.65 -> 0.63 s). */
#define BLOCKS 4

static void block(int trans_a, int trans_b, int split_m, int lo, int n, int M, int N, int K,
                  float alpha, const float *A, int lda, const float *B, int ldb, float beta,
                  float *C, int ldc) {
    if (split_m) {
        const float *a = trans_a ? A + lo : A + (long)lo * lda;
        one_call(trans_a, trans_b, n, N, K, alpha, a, lda, B, ldb, beta, C + (long)lo * ldc, ldc);
    } else {
        const float *b = trans_b ? B + (long)lo * ldb : B + lo;
        one_call(trans_a, trans_b, M, n, K, alpha, A, lda, b, ldb, beta, C + lo, ldc);
    }
}

void attn_sgemm(int threads, int trans_a, int trans_b, int M, int N, int K, float alpha,
                const float *A, int lda, const float *B, int ldb, float beta, float *C, int ldc) {
    if (M <= 0 || N <= 0) return;
    /* Small products, or OpenBLAS threading itself (the user's choice): one
     * call, whatever the thread count. */
    if ((double)M * N * K < 4.0e6 || openblas_get_num_threads() > 1) {
        one_call(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
        return;
    }
    if (threads <= 0) threads = attn_default_threads();
    const int split_m = M >= N;
    const int len = split_m ? M : N;
    int step = ((len + BLOCKS - 1) / BLOCKS + 15) / 16 * 16;
    if (step < 64) step = 64;
    const int nblocks = (len + step - 1) / step;
    if (threads == 1 || nblocks == 1 || omp_in_parallel()) {
        for (int b = 0; b < nblocks; b++) {
            const int lo = b * step, n = len - lo < step ? len - lo : step;
            block(trans_a, trans_b, split_m, lo, n, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
        }
        return;
    }
#pragma omp parallel for num_threads(threads) schedule(dynamic, 1)
    for (int b = 0; b < nblocks; b++) {
        const int lo = b * step, n = len - lo < step ? len - lo : step;
        block(trans_a, trans_b, split_m, lo, n, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    }
}
