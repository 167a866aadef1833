/* The machine's measured multiply-add peak, to set oneDNN's bf16 GEMM rate
 * against: back-to-back independent vdpbf16ps (64 FLOP each: 16 lanes x 2
 * bf16 products x 2) and vfmadd231ps (32 FLOP) on zmm registers, on 1 and 2
 * threads, best of 3 passes. Not part of the build:
 *   gcc -O2 -fopenmp -mavx512f bench/bf16_peak.c -o /tmp/bf16_peak
 *   /tmp/bf16_peak                      # prints GFLOP/s lines */
#include <immintrin.h>
#include <omp.h>
#include <stdio.h>

/* Sixteen accumulators, zmm0-15 (the operand in a higher register): more than latency x
 * throughput on the cores seen here, so the loop runs at the unit's
 * throughput. Ten were too few on Zen 5, whose vdpbf16ps has a latency of
 * 6 at 2 a cycle: they measured 834 GFLOP/s on 2 threads against 1010. */
#define ACC(OP, R) OP " %g0, %g0, %%zmm" #R "\n\t"
#define BODY(OP)                                                                                   \
    __asm__ volatile(ACC(OP, 0) ACC(OP, 1) ACC(OP, 2) ACC(OP, 3) ACC(OP, 4) ACC(OP, 5) ACC(OP, 6)  \
                         ACC(OP, 7) ACC(OP, 8) ACC(OP, 9) ACC(OP, 10) ACC(OP, 11) ACC(OP, 12)      \
                             ACC(OP, 13) ACC(OP, 14) ACC(OP, 15)                                   \
                     :                                                                             \
                     : "v"(a)                                                                      \
                     : "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8",     \
                       "xmm9", "xmm10", "xmm11", "xmm12", "xmm13", "xmm14", "xmm15")
#define ACCUMULATORS 16

static void run(long iters, int bf16) {
    /* bf16 pairs (1, 1) / the float 1.0039: normal numbers */
    const __m512 a = _mm512_castsi512_ps(_mm512_set1_epi32(0x3f803f80));
    for (long k = 0; k < iters; k++) {
        if (bf16)
            BODY("vdpbf16ps");
        else
            BODY("vfmadd231ps");
    }
}

int main(void) {
    const long iters = 20000000;
    for (int bf16 = 1; bf16 >= 0; bf16--)
        for (int th = 1; th <= 2; th++) {
            double best = 0;
            for (int pass = 0; pass < 3; pass++) {
                const double t0 = omp_get_wtime();
#pragma omp parallel num_threads(th)
                run(iters, bf16);
                const double t = omp_get_wtime() - t0;
                const double gf = (double)iters * ACCUMULATORS * (bf16 ? 64 : 32) * th / t * 1e-9;
                if (gf > best) best = gf;
            }
            printf("case=peak op=%s threads=%d gflops=%.1f\n", bf16 ? "vdpbf16ps" : "vfmadd231ps",
                   th, best);
        }
    return 0;
}
