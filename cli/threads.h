/* threads.h — the commands' one thread pool (see attn/gemm.h). */
#ifndef ATTN_CLI_THREADS_H
#define ATTN_CLI_THREADS_H

#include <stdint.h>

/* threads > 0: OpenMP runs that many, and OMP_NUM_THREADS says so too, since
 * attn_default_threads() (the fused kernels' default) reads it; <= 0 keeps
 * the default. OpenBLAS gets blas_threads (1 = inside attn's pool). */
void cli_use_threads(int threads, int blas_threads);

/* An adaptive thread count for training: every so often it times PROBE steps
 * on the count in use, then PROBE on the other one (1 or max) and keeps the
 * faster (by 5%). On a machine other jobs keep busy one thread can beat two
 * (bench/results-perfgen-2026-11-23.txt); on a quiet one the probes cost
 * about 1% (their interval doubles, up to 2000 steps, while the choice
 * stands). Only where the results do not depend on the thread count (the
 * fp32 CPU path), so switching never changes a run's numbers. */
typedef struct {
    int max, cur, phase, k;
    int64_t next, interval, steps_one;
    double t_cur, t_alt;
} cli_thread_tuner;

/* max >= 2 threads to choose from; starts on max. */
void cli_tuner_init(cli_thread_tuner *t, int max);
/* After each step with its seconds; may change the count for the next one. */
void cli_tuner_step(cli_thread_tuner *t, int64_t step, double step_s);

#endif
