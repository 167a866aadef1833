/* attn/gemm.h — row-major sgemm spread over attn's OpenMP threads.
 *
 * OpenBLAS (pthreads build) keeps its own thread pool whose workers spin for
 * a while after each call; alternating it with OpenMP regions (the fused
 * attention kernel) makes the two pools fight over the cores. attn therefore
 * runs one pool: when OpenBLAS is set to one thread (openblas_set_num_threads(1)
 * or OPENBLAS_NUM_THREADS=1, as the attn program does), attn_sgemm splits C
 * into blocks over OpenMP threads, each a single-threaded OpenBLAS call. When
 * OpenBLAS has several threads of its own, attn_sgemm is one plain call. */
#ifndef ATTN_GEMM_H
#define ATTN_GEMM_H

#ifdef __cplusplus
extern "C" {
#endif

/* C (M, N) = alpha op(A) op(B) + beta C, all row-major; trans_a / trans_b
 * non-zero mean A is stored (K, M) / B is stored (N, K). threads <= 0:
 * attn_default_threads() (attn/flash_attention.h). */
void attn_sgemm(int threads, int trans_a, int trans_b, int M, int N, int K, float alpha,
                const float *A, int lda, const float *B, int ldb, float beta, float *C, int ldc);

#ifdef __cplusplus
}
#endif
#endif
