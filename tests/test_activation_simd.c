/* SwiGLU's AVX-512 rows against the scalar loops and a double reference:
 * forward and backward, every tail length, the edges of exp (|a| near 88,
 * infinities, NaN), and 1 thread == 2 threads bit for bit. The SIMD rows
 * differ from the scalar ones only in exp (attn_exp16, ~1 ulp), so they
 * must agree to a few ulp. Skipped where the CPU has no AVX-512. */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include <criterion/criterion.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "attn/activation.h"
#include "attn/flash_attention.h"
#include "attn/rng.h"

/* Forward and backward of N rows of width H with the SIMD path ATTN_SIMD names. */
static void run(const char *simd, const float *h, const float *dy, float *y, float *dh, size_t N,
                size_t H) {
    setenv("ATTN_SIMD", simd, 1);
    attn_swiglu_forward(h, y, N, H);
    memset(dh, 0, N * 2 * H * sizeof *dh);
    attn_swiglu_backward(h, dy, dh, N, H);
    unsetenv("ATTN_SIMD");
}

static double silu_d(double a) {
    return a / (1.0 + exp(-a));
}

/* |got - want| <= ulps * eps * |want|, or both below 1e-30 (a float silu
 * of a < -88 is 0: exp(-a) overflows, as it does in expf). */
static int close_to(float got, double want, double ulps) {
    if (isnan(want)) return isnan(got);
    if (isinf(want)) return got == (float)want;
    return fabs((double)got - want) <= ulps * 0x1p-23 * fabs(want) + 1e-30;
}

Test(activation_simd, swiglu_rows_match_scalar_and_double) {
    if (!attn_simd_supported(ATTN_SIMD_AVX512)) cr_skip_test("no AVX-512 on this CPU");
    attn_rng rng;
    attn_rng_seed(&rng, 5);
    for (size_t H = 1; H <= 40; H++) {
        const size_t N = 3, n = N * H;
        float *h = malloc(2 * n * sizeof *h), *dy = malloc(n * sizeof *dy);
        float *y0 = malloc(n * sizeof *y0), *y1 = malloc(n * sizeof *y1);
        float *d0 = malloc(2 * n * sizeof *d0), *d1 = malloc(2 * n * sizeof *d1);
        attn_rng_uniform(&rng, h, 2 * n, -12.0f, 12.0f);
        attn_rng_uniform(&rng, dy, n, -2.0f, 2.0f);
        /* exp's edges in the gate half of row 0 */
        const float edge[] = {88.0f,   -88.0f,   88.8f,     -88.8f, 87.0f, -87.0f, 200.0f,
                              -200.0f, INFINITY, -INFINITY, 0.0f,   -0.0f, NAN};
        for (size_t i = 0; i < H && i < sizeof edge / sizeof edge[0]; i++)
            h[i] = edge[i];
        run("generic", h, dy, y0, d0, N, H);
        run("avx512", h, dy, y1, d1, N, H);
        for (size_t r = 0; r < N; r++)
            for (size_t i = 0; i < H; i++) {
                const size_t o = r * H + i;
                const float a = h[r * 2 * H + i], b = h[r * 2 * H + H + i];
                const double want = silu_d(a) * (double)b;
                cr_assert(close_to(y1[o], (double)y0[o], 4) || (isnan(y0[o]) && isnan(y1[o])),
                          "H %zu row %zu col %zu: a %g b %g simd %.9g scalar %.9g", H, r, i, a, b,
                          y1[o], y0[o]);
                if (isfinite(a))
                    cr_assert(close_to(y1[o], want, 8), "H %zu: a %g b %g simd %.9g double %.9g", H,
                              a, b, y1[o], want);
                for (int half = 0; half < 2; half++) {
                    const size_t g = r * 2 * H + (size_t)half * H + i;
                    cr_assert(d1[g] == d0[g] ||
                                  fabs((double)d1[g] - d0[g]) <= 1e-6 * fmax(fabs(d0[g]), 1e-6) ||
                                  (isnan(d0[g]) && isnan(d1[g])),
                              "H %zu grad %d col %zu: a %g simd %.9g scalar %.9g", H, half, i, a,
                              d1[g], d0[g]);
                }
            }
        free(h), free(dy), free(y0), free(y1), free(d0), free(d1);
    }
}

/* Rows split over threads: each element's arithmetic is the same, so the
 * results are equal bit for bit at 1 and 2 threads (both paths). */
Test(activation_simd, swiglu_equal_at_one_and_two_threads) {
    enum { N = 256, H = 344 }; /* the speedrun preset's rows, above the split threshold */
    attn_rng rng;
    attn_rng_seed(&rng, 6);
    float *h = malloc(2 * N * H * sizeof *h), *dy = malloc(N * H * sizeof *dy);
    float *y[2], *d[2];
    attn_rng_uniform(&rng, h, 2 * N * H, -6.0f, 6.0f);
    attn_rng_uniform(&rng, dy, N * H, -1.0f, 1.0f);
    const char *paths[] = {"generic", "avx512"};
    for (int p = 0; p < 2; p++) {
        if (p == 1 && !attn_simd_supported(ATTN_SIMD_AVX512)) break;
        for (int t = 0; t < 2; t++) {
            y[t] = malloc(N * H * sizeof(float));
            d[t] = malloc(2 * N * H * sizeof(float));
            omp_set_num_threads(t + 1);
            run(paths[p], h, dy, y[t], d[t], N, H);
        }
        cr_expect(memcmp(y[0], y[1], N * H * sizeof(float)) == 0, "%s forward", paths[p]);
        cr_expect(memcmp(d[0], d[1], 2 * N * H * sizeof(float)) == 0, "%s backward", paths[p]);
        for (int t = 0; t < 2; t++)
            free(y[t]), free(d[t]);
    }
    free(h), free(dy);
}
