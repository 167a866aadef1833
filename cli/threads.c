/* The commands' thread pool (see threads.h). */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include "threads.h"

#include <cblas.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>

void cli_use_threads(int threads, int blas_threads) {
    if (threads > 0) {
        char n[16];
        snprintf(n, sizeof n, "%d", threads);
        setenv("OMP_NUM_THREADS", n, 1);
        omp_set_num_threads(threads);
    }
    openblas_set_num_threads(blas_threads);
}
