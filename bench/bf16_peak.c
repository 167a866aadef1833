/* The machine's measured multiply-add peak, to set oneDNN's bf16 GEMM rate
 * against: back-to-back independent vdpbf16ps (64 FLOP each: 16 lanes x 2
 * bf16 products x 2) and vfmadd231ps (32 FLOP) on zmm registers, on 1 and 2
 * threads, best of 3 passes. Not part of the build:
 *   gcc -O2 -fopenmp -mavx512f -mavx512bf16 bench/bf16_peak.c -o /tmp/bf16_peak
 *   /tmp/bf16_peak                      # prints GFLOP/s lines */
#include <immintrin.h>
#include <omp.h>
#include <stdio.h>

/* Ten accumulators: more than latency x throughput, so the loop runs at the
 * unit's throughput. */
#define BODY(OP)                                                                                   \
    __asm__ volatile(OP " %10,%10,%0\n" OP " %10,%10,%1\n" OP " %10,%10,%2\n" OP                   \
                        " %10,%10,%3\n" OP " %10,%10,%4\n" OP " %10,%10,%5\n" OP                   \
                        " %10,%10,%6\n" OP " %10,%10,%7\n" OP " %10,%10,%8\n" OP " %10,%10,%9\n"   \
                     : "+v"(c0), "+v"(c1), "+v"(c2), "+v"(c3), "+v"(c4), "+v"(c5), "+v"(c6),       \
                       "+v"(c7), "+v"(c8), "+v"(c9)                                                \
                     : "v"(a))

static float run(long iters, int bf16) {
    __m512 c0 = _mm512_setzero_ps(), c1 = c0, c2 = c0, c3 = c0, c4 = c0, c5 = c0, c6 = c0, c7 = c0,
           c8 = c0, c9 = c0;
    /* bf16 pairs (1, 1) / the float 1.0039: normal numbers, no overflow */
    const __m512 a = _mm512_castsi512_ps(_mm512_set1_epi32(0x3f803f80));
    for (long k = 0; k < iters; k++) {
        if (bf16)
            BODY("vdpbf16ps");
        else
            BODY("vfmadd231ps");
    }
    const __m512 s = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(c0, c1), _mm512_add_ps(c2, c3)),
                                   _mm512_add_ps(_mm512_add_ps(c4, c5), _mm512_add_ps(c6, c7)));
    return _mm512_reduce_add_ps(_mm512_add_ps(s, _mm512_add_ps(c8, c9)));
}

int main(void) {
    const long iters = 20000000;
    for (int bf16 = 1; bf16 >= 0; bf16--)
        for (int th = 1; th <= 2; th++) {
            double best = 0;
            float sink = 0;
            for (int pass = 0; pass < 3; pass++) {
                const double t0 = omp_get_wtime();
#pragma omp parallel num_threads(th) reduction(+ : sink)
                sink += run(iters, bf16);
                const double t = omp_get_wtime() - t0;
                const double gf = (double)iters * 10 * (bf16 ? 64 : 32) * th / t * 1e-9;
                if (gf > best) best = gf;
            }
            printf("case=peak op=%s threads=%d gflops=%.1f (sink %g)\n",
                   bf16 ? "vdpbf16ps" : "vfmadd231ps", th, best, (double)sink);
        }
    return 0;
}
