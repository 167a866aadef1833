/* attn_sgemm (attn/gemm.h) against a naive triple loop: every transpose
 * combination, odd sizes, beta 0 and 1, split over 1-3 OpenMP threads with
 * OpenBLAS single-threaded (the blocked path) and multi-threaded (one call). */
#include <cblas.h>
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>

#include "attn/gemm.h"
#include "attn/rng.h"

static void naive(int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda,
                  const float *B, int ldb, float beta, double *C, int ldc) {
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double s = 0;
            for (int k = 0; k < K; k++)
                s += (double)(ta ? A[k * lda + i] : A[i * lda + k]) *
                     (double)(tb ? B[j * ldb + k] : B[k * ldb + j]);
            C[i * ldc + j] = alpha * s + beta * C[i * ldc + j];
        }
}

static void check(int blas_threads) {
    openblas_set_num_threads(blas_threads);
    static const int sizes[][3] = {{300, 70, 200}, {70, 301, 190}, {257, 255, 65}, {5, 3, 2}};
    attn_rng rng;
    attn_rng_seed(&rng, 5);
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
        for (int ta = 0; ta < 2; ta++)
            for (int tb = 0; tb < 2; tb++)
                for (int threads = 1; threads <= 3; threads++) {
                    const int M = sizes[s][0], N = sizes[s][1], K = sizes[s][2];
                    const int lda = ta ? M + 1 : K + 2, ldb = tb ? K + 3 : N + 1, ldc = N + 4;
                    float *A = malloc(sizeof(float) * (size_t)(ta ? K : M) * lda);
                    float *B = malloc(sizeof(float) * (size_t)(tb ? N : K) * ldb);
                    float *C = malloc(sizeof(float) * (size_t)M * ldc);
                    double *R = malloc(sizeof(double) * (size_t)M * ldc);
                    attn_rng_uniform(&rng, A, (size_t)(ta ? K : M) * lda, -1, 1);
                    attn_rng_uniform(&rng, B, (size_t)(tb ? N : K) * ldb, -1, 1);
                    attn_rng_uniform(&rng, C, (size_t)M * ldc, -1, 1);
                    for (size_t i = 0; i < (size_t)M * ldc; i++)
                        R[i] = C[i];
                    const float beta = threads == 2 ? 0.0f : 1.0f;
                    attn_sgemm(threads, ta, tb, M, N, K, 0.5f, A, lda, B, ldb, beta, C, ldc);
                    naive(ta, tb, M, N, K, 0.5f, A, lda, B, ldb, beta, R, ldc);
                    double worst = 0;
                    for (int i = 0; i < M; i++)
                        for (int j = 0; j < N; j++)
                            worst = fmax(worst, fabs(C[i * ldc + j] - R[i * ldc + j]));
                    cr_expect(worst < 1e-4, "M%d N%d K%d ta%d tb%d threads %d blas %d: err %g", M,
                              N, K, ta, tb, threads, blas_threads, worst);
                    free(A);
                    free(B);
                    free(C);
                    free(R);
                }
}

Test(gemm, split_over_openmp_threads) {
    check(1);
}

Test(gemm, one_call_when_openblas_threads_itself) {
    check(2);
}
