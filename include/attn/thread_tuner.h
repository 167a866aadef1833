/* attn/thread_tuner.h — an adaptive thread count for training.
 *
 * On a machine other jobs keep busy, one thread can beat two: every so often
 * the tuner times PROBE steps on the count in use, then PROBE on the other one
 * (1 or max) and keeps the faster when it wins by 5%. While the choice stands
 * the probes space out (250, 500, ... up to 2000 steps apart), so on a quiet
 * machine they cost about 1% (bench/results-perfgen-2026-11-23.txt).
 *
 * The tuner only decides; the caller runs each step with the count the last
 * call returned (e.g. omp_set_num_threads). Use it only where results do not
 * depend on the thread count (attn's fp32 CPU path), so that switching never
 * changes a run's numbers. */
#ifndef ATTN_THREAD_TUNER_H
#define ATTN_THREAD_TUNER_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct attn_thread_tuner {
    int max;           /* the larger count (all cores) */
    int cur;           /* the count chosen so far */
    int64_t steps_one; /* steps that ran on one thread, probes included */
    int64_t interval;  /* steps between probes now */
    /* probe state */
    int phase, k;
    int64_t next;
    double t_cur, t_alt;
} attn_thread_tuner;

/* max >= 2 threads to choose from (with max < 2 it never probes); starts on
 * max. */
void attn_thread_tuner_init(attn_thread_tuner *t, int max);

/* After step `step` took step_s seconds: the thread count the next step
 * should run with. */
int attn_thread_tuner_step(attn_thread_tuner *t, int64_t step, double step_s);

#ifdef __cplusplus
}
#endif
#endif
