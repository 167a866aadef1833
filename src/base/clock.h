/* clock.h — the monotonic clock the library times steps and MPI with. */
#ifndef ATTN_SRC_CLOCK_H
#define ATTN_SRC_CLOCK_H

#include <time.h>

static inline double attn_now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

#endif
