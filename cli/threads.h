/* threads.h — the commands' one thread pool (see attn/gemm.h). */
#ifndef ATTN_CLI_THREADS_H
#define ATTN_CLI_THREADS_H

/* threads > 0: OpenMP runs that many, and OMP_NUM_THREADS says so too, since
 * attn_default_threads() (the fused kernels' default) reads it; <= 0 keeps
 * the default. OpenBLAS gets blas_threads (1 = inside attn's pool). */
void cli_use_threads(int threads, int blas_threads);

#endif
