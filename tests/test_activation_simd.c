/* SwiGLU's and the cross-entropy's AVX-512 and AVX2 rows against the
 * scalar loops and a double reference: forward and backward, every tail
 * length, the edges of exp (|a| near 88, infinities, NaN), and 1 thread ==
 * 2 threads bit for bit. The SIMD rows differ from the scalar ones only in
 * exp (attn_exp16 / attn_exp8, ~1 ulp), so they must agree to a few ulp;
 * AVX2's equal AVX-512's bit for bit. Each path's test is skipped where
 * the CPU (or ATTN_SIMD) does not have it. */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include <criterion/criterion.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "attn/activation.h"
#include "attn/cross_entropy.h"
#include "attn/flash_attention.h"
#include "attn/rng.h"

/* Forward and backward of N rows of width H with the SIMD path ATTN_SIMD names. */
static void run(const char *simd, const float *h, const float *dy, float *y, float *dh, size_t N,
                size_t H) {
    const char *was = getenv("ATTN_SIMD");
    char *keep = was ? strdup(was) : NULL;
    setenv("ATTN_SIMD", simd, 1);
    attn_swiglu_forward(h, y, N, H);
    memset(dh, 0, N * 2 * H * sizeof *dh);
    attn_swiglu_backward(h, dy, dh, N, H);
    if (keep) /* the cap the test runs under (make test's ATTN_SIMD runs) */
        setenv("ATTN_SIMD", keep, 1);
    else
        unsetenv("ATTN_SIMD");
    free(keep);
}

/* The SIMD level `name` names, or a skip when this CPU (or the cap) lacks it. */
static void need(const char *name) {
    attn_simd s;
    cr_assert_eq(attn_simd_parse(name, &s), 0);
    if (!attn_simd_supported(s)) cr_skip_test("no %s on this CPU (or ATTN_SIMD caps it)", name);
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

static void swiglu_rows_match(const char *simd) {
    need(simd);
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
        run(simd, h, dy, y1, d1, N, H);
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

Test(activation_simd, swiglu_avx512_rows_match_scalar_and_double) {
    swiglu_rows_match("avx512");
}

Test(activation_simd, swiglu_avx2_rows_match_scalar_and_double) {
    swiglu_rows_match("avx2");
}

/* AVX2's rows are AVX-512's bit for bit (attn_exp8 is attn_exp16; the
 * other steps the same), tails and exp's edges included. */
Test(activation_simd, swiglu_avx2_equals_avx512) {
    need("avx512");
    need("avx2");
    enum { N = 3, H = 45 };
    attn_rng rng;
    attn_rng_seed(&rng, 7);
    float h[2 * N * H], dy[N * H], y[2][N * H], d[2][2 * N * H];
    attn_rng_uniform(&rng, h, 2 * N * H, -100.0f, 100.0f);
    attn_rng_uniform(&rng, dy, N * H, -2.0f, 2.0f);
    const float edge[] = {88.0f, -88.0f, 88.8f, -88.8f, 87.0f, -87.0f, INFINITY, -INFINITY, -0.0f};
    memcpy(h + H - 4, edge, sizeof edge); /* across a vector's end */
    for (size_t r = 1; r <= 10; r++) {    /* every tail of a short row */
        run("avx512", h, dy, y[0], d[0], N, r);
        run("avx2", h, dy, y[1], d[1], N, r);
        cr_assert(memcmp(y[0], y[1], N * r * sizeof(float)) == 0, "forward, H %zu", r);
        cr_assert(memcmp(d[0], d[1], 2 * N * r * sizeof(float)) == 0, "backward, H %zu", r);
    }
    run("avx512", h, dy, y[0], d[0], N, H);
    run("avx2", h, dy, y[1], d[1], N, H);
    cr_assert(memcmp(y[0], y[1], sizeof y[0]) == 0, "forward");
    cr_assert(memcmp(d[0], d[1], sizeof d[0]) == 0, "backward");
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
    const char *paths[] = {"generic", "avx2", "avx512"};
    const attn_simd level[] = {ATTN_SIMD_GENERIC, ATTN_SIMD_AVX2, ATTN_SIMD_AVX512};
    for (int p = 0; p < 3; p++) {
        if (!attn_simd_supported(level[p])) continue;
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

/* Cross-entropy forward (loss, lse) and backward (added and in place) on
 * ATTN_SIMD's rows, at `threads` OpenMP threads. */
static float ce_run(const char *simd, int threads, const float *x, const int32_t *t, float *lse,
                    float *d, float *inplace, size_t N, size_t V) {
    const char *was = getenv("ATTN_SIMD");
    char *keep = was ? strdup(was) : NULL;
    setenv("ATTN_SIMD", simd, 1);
    omp_set_num_threads(threads);
    const float loss = attn_cross_entropy_forward(x, t, lse, N, V);
    memset(d, 0, N * V * sizeof *d);
    attn_cross_entropy_backward(x, t, lse, 1.0f, d, N, V);
    memcpy(inplace, x, N * V * sizeof *inplace);
    attn_cross_entropy_backward_inplace(inplace, t, lse, 1.0f / (float)N, N, V);
    /* written into another buffer (attn.torch's logits loss): the same bits */
    float *written = malloc(N * V * sizeof *written);
    cr_assert(written);
    attn_cross_entropy_grad(x, t, lse, 1.0f / (float)N, written, N, V);
    cr_assert(memcmp(written, inplace, N * V * sizeof *written) == 0,
              "%s V %zu: attn_cross_entropy_grad differs from the in-place gradient", simd, V);
    free(written);
    if (keep)
        setenv("ATTN_SIMD", keep, 1);
    else
        unsetenv("ATTN_SIMD");
    free(keep);
    return loss;
}

/* The cross-entropy's AVX-512 rows (attn_exp16, 16 double lanes) against
 * the C rows (expf, the same lanes): every width 1..40 (tails) and GPT-2's
 * 50,257, logits up to |x| = 30; loss and lse within a few ulp, gradients
 * within 4 ulp plus the two lse's difference and x - lse's rounding
 * (relative); each path the same bits at 1 and 2
 * threads; the in-place gradient equal to the added one, and the one
 * written into another buffer to the in-place one. */
static void cross_entropy_rows_match(const char *path) {
    need(path);
    attn_rng rng;
    attn_rng_seed(&rng, 9);
    for (size_t w = 1; w <= 41; w++) {
        const size_t V = w <= 40 ? w : 50257; /* every tail, then GPT-2's width */
        const size_t N = V < 40 ? 5 : 3, n = N * V;
        float *x = malloc(n * sizeof *x), *lse[2], *d[2], *ip[2], *d2 = malloc(n * sizeof *d2);
        float *ip2 = malloc(n * sizeof *ip2), *lse2 = malloc(N * sizeof *lse2);
        int32_t *t = malloc(N * sizeof *t);
        for (int k = 0; k < 2; k++) {
            lse[k] = malloc(N * sizeof(float));
            d[k] = malloc(n * sizeof(float));
            ip[k] = malloc(n * sizeof(float));
        }
        attn_rng_uniform(&rng, x, n, -30.0f, 30.0f);
        for (size_t r = 0; r < N; r++)
            t[r] = (int32_t)((r * 7919u) % V);
        const char *simd[2] = {"generic", path};
        float loss[2];
        for (int k = 0; k < 2; k++) {
            loss[k] = ce_run(simd[k], 1, x, t, lse[k], d[k], ip[k], N, V);
            const float l2 = ce_run(simd[k], 2, x, t, lse2, d2, ip2, N, V);
            cr_assert(memcmp(&l2, &loss[k], sizeof l2) == 0 &&
                          memcmp(lse2, lse[k], N * sizeof *lse2) == 0 &&
                          memcmp(d2, d[k], n * sizeof *d2) == 0 &&
                          memcmp(ip2, ip[k], n * sizeof *ip2) == 0,
                      "%s V %zu: 1 and 2 threads differ", simd[k], V);
            for (size_t i = 0; i < n; i++)
                cr_assert(fabsf(ip[k][i] - d[k][i]) <= 2e-7f * fabsf(d[k][i]) + 1e-30f,
                          "%s V %zu: in-place gradient %zu differs", simd[k], V, i);
        }
        cr_assert(close_to(loss[1], (double)loss[0], 8), "V %zu: loss %.9g vs %.9g", V,
                  (double)loss[1], (double)loss[0]);
        for (size_t r = 0; r < N; r++)
            cr_assert(close_to(lse[1][r], (double)lse[0][r], 4), "V %zu row %zu: lse %.9g vs %.9g",
                      V, r, (double)lse[1][r], (double)lse[0][r]);
        /* exp(x - lse): lse apart by e, and x - lse rounded to its ulp, move
         * a gradient by that much relative */
        for (size_t i = 0; i < n; i++) {
            const float e =
                fabsf(lse[1][i / V] - lse[0][i / V]) + 2 * 0x1p-23f * fabsf(x[i] - lse[0][i / V]);
            cr_assert(fabsf(d[1][i] - d[0][i]) <=
                          (4 * 0x1p-23f + e) * fmaxf(fabsf(d[0][i]), fabsf(d[1][i])) + 1e-30f,
                      "V %zu grad %zu: %.9g vs %.9g", V, i, (double)d[1][i], (double)d[0][i]);
        }
        for (int k = 0; k < 2; k++)
            free(lse[k]), free(d[k]), free(ip[k]);
        free(x), free(t), free(d2), free(ip2), free(lse2);
    }
}

Test(activation_simd, cross_entropy_avx512_rows_match_scalar) {
    cross_entropy_rows_match("avx512");
}

Test(activation_simd, cross_entropy_avx2_rows_match_scalar) {
    cross_entropy_rows_match("avx2");
}

/* AVX2's cross-entropy rows give AVX-512's loss, lse and gradients bit for
 * bit: every tail width, GPT-2's, and rows with -inf logits. */
Test(activation_simd, cross_entropy_avx2_equals_avx512) {
    need("avx512");
    need("avx2");
    attn_rng rng;
    attn_rng_seed(&rng, 11);
    for (size_t w = 1; w <= 35; w++) {
        const size_t V = w <= 34 ? w : 50257, N = 4, n = N * V;
        float *x = malloc(n * sizeof *x), *lse[2], *d[2], *ip[2];
        int32_t t[N];
        for (int k = 0; k < 2; k++) {
            lse[k] = malloc(N * sizeof(float));
            d[k] = malloc(n * sizeof(float));
            ip[k] = malloc(n * sizeof(float));
        }
        attn_rng_uniform(&rng, x, n, -40.0f, 40.0f);
        for (size_t r = 0; r < N; r++) {
            t[r] = (int32_t)((r * 31u) % V);
            x[r * V + (r * 13u) % V] = -INFINITY; /* a masked logit */
        }
        const char *simd[2] = {"avx512", "avx2"};
        float loss[2];
        for (int k = 0; k < 2; k++)
            loss[k] = ce_run(simd[k], 1, x, t, lse[k], d[k], ip[k], N, V);
        cr_assert(memcmp(&loss[0], &loss[1], sizeof(float)) == 0, "V %zu: loss", V);
        cr_assert(memcmp(lse[0], lse[1], N * sizeof(float)) == 0, "V %zu: lse", V);
        cr_assert(memcmp(d[0], d[1], n * sizeof(float)) == 0, "V %zu: gradient", V);
        cr_assert(memcmp(ip[0], ip[1], n * sizeof(float)) == 0, "V %zu: in place", V);
        for (int k = 0; k < 2; k++)
            free(lse[k]), free(d[k]), free(ip[k]);
        free(x);
    }
}
