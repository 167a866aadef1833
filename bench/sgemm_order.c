/* How OpenBLAS sums a product, by its bits: whether a hand-written small
 * GEMM could replace it for nanogpt-cpu's shapes without changing attn's
 * fp32 results. For each shape, cblas_sgemm (1 thread) against C = sum over
 * k of a_ik b_kj as one in-order chain of FMAs from 0, and against two such
 * chains over K's halves added. A count of 0 means that order, to the bit.
 * Build and run (OPENBLAS_CORETYPE picks the kernels, e.g. Haswell):
 *   gcc -O2 -std=c11 bench/sgemm_order.c -o /tmp/sgemm_order -lopenblas -lm
 *   /tmp/sgemm_order; OPENBLAS_CORETYPE=Haswell /tmp/sgemm_order */
#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

char *openblas_get_corename(void);

static float next(unsigned *s) {
    *s = *s * 1103515245u + 12345u;
    return (float)((*s >> 8) & 0xffff) / 32768.0f - 1.0f;
}

/* In-order FMA chains over [0, split) and [split, K), the second added. */
static float chained(const float *A, const float *B, int N, int K, int i, int j, int split) {
    float c = 0.0f, d = 0.0f;
    for (int k = 0; k < split; k++)
        c = fmaf(A[(long)i * K + k], B[(long)k * N + j], c);
    for (int k = split; k < K; k++)
        d = fmaf(A[(long)i * K + k], B[(long)k * N + j], d);
    return split < K ? c + d : c;
}

static long mismatches(const float *A, const float *B, const float *C, int M, int N, int K,
                       int split) {
    long bad = 0;
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            const float r = chained(A, B, N, K, i, j, split);
            bad += memcmp(&r, &C[(long)i * N + j], sizeof r) != 0;
        }
    return bad;
}

int main(void) {
    /* M N K of nanogpt-cpu's step (768 tokens, 128 wide, 4 heads): the
     * forward products, the input gradients, the weight gradients. */
    static const int shapes[][3] = {{768, 384, 128}, {768, 512, 128}, {768, 65, 128},
                                    {768, 128, 512}, {384, 128, 768}, {128, 512, 768}};
    openblas_set_num_threads(1);
    printf("OpenBLAS core: %s\n", openblas_get_corename());
    printf("%5s %5s %5s %10s %16s %16s\n", "M", "N", "K", "elements", "in-order chain",
           "two half chains");
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        const int M = shapes[s][0], N = shapes[s][1], K = shapes[s][2];
        float *A = malloc(sizeof(float) * (size_t)M * K),
              *B = malloc(sizeof(float) * (size_t)K * N);
        float *C = calloc((size_t)M * N, sizeof(float));
        if (!A || !B || !C) return 1;
        unsigned seed = 7;
        for (long i = 0; i < (long)M * K; i++)
            A[i] = next(&seed);
        for (long i = 0; i < (long)K * N; i++)
            B[i] = next(&seed);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, N, K, 1.0f, A, K, B, N, 0.0f, C,
                    N);
        printf("%5d %5d %5d %10ld %16ld %16ld\n", M, N, K, (long)M * N,
               mismatches(A, B, C, M, N, K, K), mismatches(A, B, C, M, N, K, K / 2));
        free(A);
        free(B);
        free(C);
    }
    return 0;
}
