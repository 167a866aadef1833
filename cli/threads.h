/* threads.h — the commands' one thread pool (see attn/gemm.h). */
#ifndef ATTN_CLI_THREADS_H
#define ATTN_CLI_THREADS_H

#include "options.h"

/* threads > 0: OpenMP runs that many, and OMP_NUM_THREADS says so too, since
 * attn_default_threads() (the fused kernels' default) reads it; <= 0 keeps
 * the default. OpenBLAS gets blas_threads (1 = inside attn's pool). */
void cli_use_threads(int threads, int blas_threads);

/* The `--threads N` row every command that computes has (a long long field
 * at offset; 0 when not given = the default). */
#define CLI_THREADS_MAX 4096
#define CLI_THREADS_OPTION(offset)                                                                 \
    {                                                                                              \
        "threads", CLI_INT, "N", (offset), 1, CLI_THREADS_MAX,                                     \
            .help = "OpenMP threads (default: OMP_NUM_THREADS, else the\n"                         \
                    "CPUs this process may use)"                                                   \
    }

#endif
