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

enum { PROBE = 4, FIRST = 50, BASE = 250, MAX_INTERVAL = 2000 };

void cli_tuner_init(cli_thread_tuner *t, int max) {
    *t = (cli_thread_tuner){.max = max, .cur = max, .next = FIRST, .interval = BASE};
}

void cli_tuner_step(cli_thread_tuner *t, int64_t step, double step_s) {
    if (t->max < 2) return;
    const int other = t->cur == 1 ? t->max : 1;
    if ((t->phase == 2 ? other : t->cur) == 1) t->steps_one++;
    if (t->phase == 0) {
        if (step >= t->next) t->phase = 1, t->k = 0, t->t_cur = 0.0;
        return;
    }
    if (t->phase == 1) {
        t->t_cur += step_s;
        if (++t->k < PROBE) return;
        cli_use_threads(other, 1);
        t->phase = 2, t->k = 0, t->t_alt = 0.0;
        return;
    }
    /* The first step on the other count starts its threads: not counted. */
    if (t->k++ > 0) t->t_alt += step_s;
    if (t->k <= PROBE) return;
    if (t->t_alt < 0.95 * t->t_cur) {
        t->cur = other;
        t->interval = BASE;
    } else {
        cli_use_threads(t->cur, 1);
        t->interval = t->interval * 2 < MAX_INTERVAL ? t->interval * 2 : MAX_INTERVAL;
    }
    t->phase = 0;
    t->next = step + t->interval;
}
