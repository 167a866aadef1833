/* Memory-bandwidth floor for the KV-cache GEMV: one streaming read of a
 * buffer far larger than the L3 (AVX-512 loads, 4 accumulators), on 1 and
 * 2 threads; best of N passes. Build and run:
 *   gcc -O2 -fopenmp -mavx512f bench/membw.c -o /tmp/membw && /tmp/membw [MB] [passes] */
#define _DEFAULT_SOURCE
#include <immintrin.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

static double now(void) {
    return omp_get_wtime();
}

static float read_range(const float *p, size_t n) {
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    for (size_t i = 0; i + 64 <= n; i += 64) {
        a0 = _mm512_add_ps(a0, _mm512_load_ps(p + i));
        a1 = _mm512_add_ps(a1, _mm512_load_ps(p + i + 16));
        a2 = _mm512_add_ps(a2, _mm512_load_ps(p + i + 32));
        a3 = _mm512_add_ps(a3, _mm512_load_ps(p + i + 48));
    }
    return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
}

/* The same with a software prefetch PF bytes ahead. */
static float read_pf(const float *p, size_t n, size_t pf) {
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    for (size_t i = 0; i + 64 <= n; i += 64) {
        _mm_prefetch((const char *)(p + i) + pf, _MM_HINT_T0);
        _mm_prefetch((const char *)(p + i) + pf + 64, _MM_HINT_T0);
        _mm_prefetch((const char *)(p + i) + pf + 128, _MM_HINT_T0);
        _mm_prefetch((const char *)(p + i) + pf + 192, _MM_HINT_T0);
        a0 = _mm512_add_ps(a0, _mm512_load_ps(p + i));
        a1 = _mm512_add_ps(a1, _mm512_load_ps(p + i + 16));
        a2 = _mm512_add_ps(a2, _mm512_load_ps(p + i + 32));
        a3 = _mm512_add_ps(a3, _mm512_load_ps(p + i + 48));
    }
    return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
}

/* S interleaved streams (S parts of the range read at once). */
static float read_streams(const float *p, size_t n, int S) {
    size_t q = n / (size_t)S;
    q -= q % 16;
    __m512 a[16];
    for (int s = 0; s < S; s++)
        a[s] = _mm512_setzero_ps();
    for (size_t i = 0; i + 16 <= q; i += 16)
        for (int s = 0; s < S; s++)
            a[s] = _mm512_add_ps(a[s], _mm512_load_ps(p + (size_t)s * q + i));
    __m512 t = a[0];
    for (int s = 1; s < S; s++)
        t = _mm512_add_ps(t, a[s]);
    return _mm512_reduce_add_ps(t);
}

int main(int argc, char **argv) {
    size_t mb = argc > 1 ? (size_t)atol(argv[1]) : 284;
    int passes = argc > 2 ? atoi(argv[2]) : 10;
    size_t n = mb * 1024 * 1024 / sizeof(float);
    n -= n % (64 * 64);
    /* HUGE=1: the buffer on 2 MiB transparent huge pages (one TLB entry per
     * 2 MiB instead of per 4 KiB). */
    const size_t al = (size_t)2 << 20;
    float *p = aligned_alloc(al, (n * sizeof(float) + al - 1) / al * al);
    if (!p) return 1;
    const char *huge = getenv("HUGE");
    if (huge && atoi(huge)) madvise(p, (n * sizeof(float) + al - 1) / al * al, MADV_HUGEPAGE);
    printf("# %zu MB, %s pages\n", mb, huge && atoi(huge) ? "2 MiB (THP)" : "4 KiB");
    for (size_t i = 0; i < n; i++)
        p[i] = (float)(i & 7);
    volatile float sink = 0;
    const char *names[] = {"plain",    "prefetch1k", "prefetch4k", "2streams",
                           "4streams", "8streams",   "12streams"};
    for (int v = 0; v < 7; v++)
        for (int t = 1; t <= 2; t++) {
            double best = 1e30;
            for (int r = 0; r < passes; r++) {
                double t0 = now();
#pragma omp parallel num_threads(t) reduction(+ : sink)
                {
                    int id = omp_get_thread_num(), nt = omp_get_num_threads();
                    size_t chunk = n / (size_t)nt;
                    const float *q = p + (size_t)id * chunk;
                    sink += v == 0   ? read_range(q, chunk)
                            : v == 1 ? read_pf(q, chunk, 1024)
                            : v == 2 ? read_pf(q, chunk, 4096)
                                     : read_streams(q, chunk,
                                                    v == 3   ? 2
                                                    : v == 4 ? 4
                                                    : v == 5 ? 8
                                                             : 12);
                }
                double dt = now() - t0;
                if (dt < best) best = dt;
            }
            printf("%-10s threads=%d bytes=%zu best_s=%.4f GB/s=%.2f\n", names[v], t,
                   n * sizeof(float), best, (double)n * sizeof(float) / best / 1e9);
        }
    free(p);
    return 0;
}
