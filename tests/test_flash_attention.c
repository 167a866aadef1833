/* The fused attention kernel (attn/flash_attention.h) against a naive
 * double-precision reference written here from the chapter's formulas
 * (softmax(masked(Q K^T) / sqrt(hd)), dropout on the weights, times V, and its
 * gradients), on every SIMD path this CPU has plus the portable one, odd
 * shapes and tile sizes, both dropout streams and several thread counts. The
 * dropout masks of the reference come from attn_dropout_mask on a copy of the
 * generator, i.e. exactly what the step-by-step modules draw. */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn/attn.h"
#include "attn/flash_attention.h"
#include "kernels/flash_kernels.h"

typedef struct problem {
    int B, T, H, hd;
    size_t ld; /* packed (q | k | v) rows: 3 * H * hd */
    float *qkv, *o, *lse, *d_o;
    float *dq, *dk, *dv; /* (B, T, H*hd) each */
    /* reference */
    double *ro, *rdq, *rdk, *rdv;
    uint8_t *keep; /* (B, H, T, T) or NULL */
    double p;
} problem;

static float frand(attn_rng *rng, float lo, float hi) {
    float x;
    attn_rng_uniform(rng, &x, 1, lo, hi);
    return x;
}

static void problem_init(problem *pb, int B, int T, int H, int hd, float qk_range, uint64_t seed) {
    memset(pb, 0, sizeof *pb);
    pb->B = B;
    pb->T = T;
    pb->H = H;
    pb->hd = hd;
    pb->ld = (size_t)3 * H * hd;
    const size_t n = (size_t)B * T * H * hd;
    pb->qkv = malloc(3 * n * sizeof(float));
    pb->o = calloc(n, sizeof(float));
    pb->lse = calloc((size_t)B * H * T, sizeof(float));
    pb->d_o = malloc(n * sizeof(float));
    pb->dq = calloc(n, sizeof(float));
    pb->dk = calloc(n, sizeof(float));
    pb->dv = calloc(n, sizeof(float));
    pb->ro = calloc(n, sizeof(double));
    pb->rdq = calloc(n, sizeof(double));
    pb->rdk = calloc(n, sizeof(double));
    pb->rdv = calloc(n, sizeof(double));
    attn_rng rng;
    attn_rng_seed(&rng, seed);
    const size_t row = (size_t)H * hd;
    for (size_t r = 0; r < (size_t)B * T; r++)
        for (size_t c = 0; c < 3 * row; c++)
            pb->qkv[r * pb->ld + c] =
                c < 2 * row ? frand(&rng, -qk_range, qk_range) : frand(&rng, -1.0f, 1.0f);
    for (size_t i = 0; i < n; i++)
        pb->d_o[i] = frand(&rng, -1.0f, 1.0f);
}

static void problem_free(problem *pb) {
    free(pb->qkv);
    free(pb->o);
    free(pb->lse);
    free(pb->d_o);
    free(pb->dq);
    free(pb->dk);
    free(pb->dv);
    free(pb->ro);
    free(pb->rdq);
    free(pb->rdk);
    free(pb->rdv);
    free(pb->keep);
}

#define QKV(pb, which, b, t, h, d)                                                                 \
    ((double)(pb)->qkv[((size_t)(b) * (pb)->T + (t)) * (pb)->ld +                                  \
                       (size_t)(which) * (pb)->H * (pb)->hd + (size_t)(h) * (pb)->hd + (d)])

/* The chapter's formulas in double precision, one (b, h) at a time. */
static void reference(problem *pb) {
    const int T = pb->T, hd = pb->hd, H = pb->H;
    const size_t row = (size_t)H * hd;
    const double scale = 1.0 / sqrt((double)hd);
    const double dscale = pb->keep ? 1.0 / (1.0 - pb->p) : 1.0;
    double *P = malloc((size_t)T * T * sizeof(double));
    double *Pd = malloc((size_t)T * T * sizeof(double));
    double *dP = malloc((size_t)T * T * sizeof(double));
    for (int b = 0; b < pb->B; b++)
        for (int h = 0; h < H; h++) {
            const uint8_t *keep = pb->keep ? pb->keep + ((size_t)b * H + h) * T * T : NULL;
            for (int i = 0; i < T; i++) {
                double mx = -INFINITY;
                for (int j = 0; j <= i; j++) {
                    double s = 0;
                    for (int d = 0; d < hd; d++)
                        s += QKV(pb, 0, b, i, h, d) * QKV(pb, 1, b, j, h, d);
                    P[(size_t)i * T + j] = s * scale;
                    if (s * scale > mx) mx = s * scale;
                }
                double sum = 0;
                for (int j = 0; j <= i; j++)
                    sum += P[(size_t)i * T + j] = exp(P[(size_t)i * T + j] - mx);
                for (int j = 0; j < T; j++) {
                    const double p = j <= i ? P[(size_t)i * T + j] / sum : 0.0;
                    P[(size_t)i * T + j] = p;
                    Pd[(size_t)i * T + j] = keep ? (keep[(size_t)i * T + j] ? p * dscale : 0) : p;
                }
                for (int d = 0; d < hd; d++) {
                    double o = 0;
                    for (int j = 0; j <= i; j++)
                        o += Pd[(size_t)i * T + j] * QKV(pb, 2, b, j, h, d);
                    pb->ro[((size_t)b * T + i) * row + (size_t)h * hd + d] = o;
                }
            }
            /* backward: dPd = dO V^T, dP = dPd * mask, dZ = P (dP - rowsum(dP P)) */
            for (int i = 0; i < T; i++) {
                const float *dO = pb->d_o + ((size_t)b * T + i) * row + (size_t)h * hd;
                double rs = 0;
                for (int j = 0; j <= i; j++) {
                    double s = 0;
                    for (int d = 0; d < hd; d++)
                        s += dO[d] * QKV(pb, 2, b, j, h, d);
                    if (keep) s = keep[(size_t)i * T + j] ? s * dscale : 0;
                    dP[(size_t)i * T + j] = s;
                    rs += s * P[(size_t)i * T + j];
                }
                for (int j = 0; j <= i; j++)
                    dP[(size_t)i * T + j] =
                        P[(size_t)i * T + j] * (dP[(size_t)i * T + j] - rs) * scale;
                for (int j = 0; j <= i; j++)
                    for (int d = 0; d < hd; d++) {
                        const size_t oj = ((size_t)b * T + j) * row + (size_t)h * hd + d;
                        const size_t oi = ((size_t)b * T + i) * row + (size_t)h * hd + d;
                        pb->rdv[oj] += Pd[(size_t)i * T + j] * dO[d];
                        pb->rdq[oi] += dP[(size_t)i * T + j] * QKV(pb, 1, b, j, h, d);
                        pb->rdk[oj] += dP[(size_t)i * T + j] * QKV(pb, 0, b, i, h, d);
                    }
            }
        }
    free(P);
    free(Pd);
    free(dP);
}

/* max |got - want| / max |want| */
static double rel_err(const float *got, const double *want, size_t n) {
    double num = 0, den = 1e-30;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(got[i])) return INFINITY;
        num = fmax(num, fabs((double)got[i] - want[i]));
        den = fmax(den, fabs(want[i]));
    }
    return num / den;
}

static attn_flash_problem view(problem *pb, const attn_flash_dropout *drop) {
    const size_t row = (size_t)pb->H * pb->hd;
    attn_flash_problem v = {
        pb->B,  pb->T,  pb->H,  pb->hd, pb->qkv, pb->qkv + row, pb->qkv + 2 * row,
        pb->ld, pb->ld, pb->ld, pb->o,  row,     pb->lse,       drop,
        0,      NULL};
    return v;
}

/* Run fused forward + backward with opt and compare with the reference. */
static void run_and_check(problem *pb, const attn_flash_dropout *drop, attn_flash_options opt,
                          const char *what) {
    const size_t row = (size_t)pb->H * pb->hd, n = (size_t)pb->B * pb->T * row;
    memset(pb->dq, 0, n * sizeof(float));
    memset(pb->dk, 0, n * sizeof(float));
    memset(pb->dv, 0, n * sizeof(float));
    attn_flash_problem v = view(pb, drop);
    attn_flash_workspace ws = {0};
    attn_error err;
    cr_assert_eq(attn_flash_forward(&v, &opt, &ws, &err), ATTN_OK, "%s: %s", what, err.msg);
    attn_flash_grads g = {pb->d_o, row, pb->dq, pb->dk, pb->dv, row, row, row};
    cr_assert_eq(attn_flash_backward(&v, &g, &opt, &ws, &err), ATTN_OK, "%s: %s", what, err.msg);
    attn_flash_workspace_free(&ws);
    const double tol = 1e-5;
    double e;
    cr_expect((e = rel_err(pb->o, pb->ro, n)) <= tol, "%s: output rel err %g", what, e);
    cr_expect((e = rel_err(pb->dq, pb->rdq, n)) <= tol, "%s: dQ rel err %g", what, e);
    cr_expect((e = rel_err(pb->dk, pb->rdk, n)) <= tol, "%s: dK rel err %g", what, e);
    cr_expect((e = rel_err(pb->dv, pb->rdv, n)) <= tol, "%s: dV rel err %g", what, e);
}

static const attn_simd ALL_SIMD[] = {ATTN_SIMD_GENERIC, ATTN_SIMD_AVX2, ATTN_SIMD_AVX512};

/* Every supported SIMD path x a few tile sizes and thread counts. */
static void check_all_paths(problem *pb, const attn_flash_dropout *drop, const char *what) {
    static const int tiles[][2] = {{0, 0}, {16, 32}, {32, 16}, {5, 7}};
    static const int threads[] = {1, 2, 3};
    for (size_t s = 0; s < 3; s++) {
        if (!attn_simd_supported(ALL_SIMD[s])) continue;
        for (size_t t = 0; t < sizeof tiles / sizeof tiles[0]; t++) {
            attn_flash_options opt = {.threads = threads[t % 3],
                                      .simd = ALL_SIMD[s],
                                      .block_q = tiles[t][0],
                                      .block_k = tiles[t][1]};
            char label[160];
            snprintf(label, sizeof label, "%s [%s, tiles %dx%d, %d threads, B%d T%d H%d hd%d]",
                     what, attn_simd_name(ALL_SIMD[s]), tiles[t][0], tiles[t][1], opt.threads,
                     pb->B, pb->T, pb->H, pb->hd);
            run_and_check(pb, drop, opt, label);
        }
    }
}

static void no_dropout_case(int B, int T, int H, int hd) {
    problem pb;
    problem_init(&pb, B, T, H, hd, 1.0f, 1000u + (uint64_t)(B * 7 + T * 13 + H * 17 + hd));
    reference(&pb);
    check_all_paths(&pb, NULL, "no dropout");
    problem_free(&pb);
}

Test(flash, tiny_and_odd_shapes) {
    no_dropout_case(1, 1, 1, 1); /* T = 1 */
    no_dropout_case(1, 2, 1, 1);
    no_dropout_case(2, 7, 3, 5);  /* T below every tile */
    no_dropout_case(1, 37, 2, 3); /* T not a multiple of any tile */
}

Test(flash, head_dims) {
    static const int hds[] = {1, 2, 8, 15, 16, 17, 31, 33, 64, 65, 100, 128};
    for (size_t i = 0; i < sizeof hds / sizeof hds[0]; i++)
        no_dropout_case(1, 19, 2, hds[i]);
}

Test(flash, longer_sequences) {
    no_dropout_case(2, 70, 2, 64);  /* two default tiles, ragged */
    no_dropout_case(1, 130, 1, 32); /* three default tiles */
}

/* Logits of order 1e4 (q, k in [-300, 300]): the running max keeps exp
 * finite. The softmax is then one-hot, so the exact gradients are ~0 and the
 * float ones are rounding noise: those are checked against an absolute bound
 * (the noise a 1e-7 relative error in dP gives through |K| <= 300). */
Test(flash, large_logits_no_nan) {
    problem pb;
    problem_init(&pb, 1, 40, 2, 16, 300.0f, 77);
    reference(&pb);
    const size_t n = 40 * 2 * 16;
    for (size_t s = 0; s < 3; s++) {
        if (!attn_simd_supported(ALL_SIMD[s])) continue;
        attn_flash_options opt = {.threads = 2, .simd = ALL_SIMD[s], .block_q = 16, .block_k = 16};
        memset(pb.dq, 0, n * sizeof(float));
        memset(pb.dk, 0, n * sizeof(float));
        memset(pb.dv, 0, n * sizeof(float));
        attn_flash_problem v = view(&pb, NULL);
        attn_flash_workspace ws = {0};
        cr_assert_eq(attn_flash_forward(&v, &opt, &ws, NULL), ATTN_OK);
        attn_flash_grads g = {pb.d_o, 32, pb.dq, pb.dk, pb.dv, 32, 32, 32};
        cr_assert_eq(attn_flash_backward(&v, &g, &opt, &ws, NULL), ATTN_OK);
        attn_flash_workspace_free(&ws);
        const char *name = attn_simd_name(ALL_SIMD[s]);
        for (size_t i = 0; i < 40 * 2; i++)
            cr_expect(isfinite(pb.lse[i]), "%s: lse[%zu] = %g", name, i, (double)pb.lse[i]);
        double e;
        cr_expect((e = rel_err(pb.o, pb.ro, n)) <= 1e-5, "%s: output rel err %g", name, e);
        cr_expect((e = rel_err(pb.dv, pb.rdv, n)) <= 1e-5, "%s: dV rel err %g", name, e);
        for (size_t i = 0; i < n; i++) {
            cr_expect(fabs(pb.dq[i] - pb.rdq[i]) <= 1e-3, "%s: dQ[%zu] %g vs %g", name, i,
                      (double)pb.dq[i], pb.rdq[i]);
            cr_expect(fabs(pb.dk[i] - pb.rdk[i]) <= 1e-3, "%s: dK[%zu] %g vs %g", name, i,
                      (double)pb.dk[i], pb.rdk[i]);
        }
    }
    problem_free(&pb);
}

/* Same NaN and +-Inf pattern, finite values within float rounding (relative
 * 1e-5, the SIMD exp is ~1 ulp from expf). */
static void expect_same_pattern(const float *got, const float *want, size_t n, const char *what,
                                const char *name) {
    size_t bad = 0, first = n;
    for (size_t i = 0; i < n; i++) {
        const float a = got[i], b = want[i];
        int same = isnan(a)   ? isnan(b)
                   : isinf(a) ? a == b
                              : isfinite(b) && fabs((double)a - b) <= 1e-5 * fmax(1.0, fabs(b));
        if (!same && !bad++) first = i;
    }
    cr_expect_eq(bad, 0, "%s %s: %zu values differ from the generic path, first [%zu] %g vs %g",
                 name, what, bad, first, first < n ? (double)got[first] : 0.0,
                 first < n ? (double)want[first] : 0.0);
}

/* Huge (+-1e30: scores overflow to +-Inf; 1e18: huge finite scores), tiny
 * (subnormal), +-Inf and NaN inputs: every SIMD path gives what the generic
 * path gives (which the CLI test checks against PyTorch), forward and
 * backward. Found: the AVX-512 forward turned huge finite scores into NaN. */
Test(flash, special_values_agree_on_every_simd_path) {
    const int B = 2, T = 37, H = 2, hd = 16;
    const size_t row = (size_t)H * hd, n = (size_t)B * T * row, ld = 3 * row;
    problem pb;
    problem_init(&pb, B, T, H, hd, 1.0f, 2024);
    float *q = pb.qkv, *k = pb.qkv + row, *v = pb.qkv + 2 * row;
#define AT(p, b, t, c) (p)[((size_t)(b)*T + (t)) * ld + (c)]
    for (size_t c = 0; c < row; c++) {
        AT(q, 0, 3, c) = 1e30f;  /* row of +-Inf scores */
        AT(q, 0, 20, c) = 1e18f; /* huge finite scores with the key below */
        AT(k, 0, 20, c) = 1e18f;
        AT(k, 1, 15, c) = 1e-40f; /* subnormal */
        /* Products beyond FLT_MAX of both signs in one dot product: +Inf
         * then -Inf must not become NaN on one path only. */
        AT(k, 0, 3, c) = c % 3 ? 1e30f : -1e30f;
    }
    AT(k, 0, 9, 2) = -1e30f;
    AT(q, 0, 30, 5) = 3e18f;
    AT(v, 1, 5, 1) = NAN;
    AT(q, 1, 11, 0) = INFINITY;
    AT(q, 1, 25, 3) = -INFINITY;
    AT(k, 1, 30, 7) = INFINITY;
#undef AT
    float *o_ref = malloc(n * sizeof(float)), *lse_ref = malloc((size_t)B * H * T * sizeof(float));
    float *g_ref = malloc(3 * n * sizeof(float));
    for (size_t s = 0; s < 3; s++) {
        if (!attn_simd_supported(ALL_SIMD[s])) continue;
        attn_flash_options opt = {.threads = 2, .simd = ALL_SIMD[s], .block_q = 16, .block_k = 16};
        memset(pb.o, 0, n * sizeof(float));
        memset(pb.dq, 0, n * sizeof(float));
        memset(pb.dk, 0, n * sizeof(float));
        memset(pb.dv, 0, n * sizeof(float));
        attn_flash_problem vw = view(&pb, NULL);
        attn_flash_workspace ws = {0};
        cr_assert_eq(attn_flash_forward(&vw, &opt, &ws, NULL), ATTN_OK);
        attn_flash_grads g = {pb.d_o, row, pb.dq, pb.dk, pb.dv, row, row, row};
        cr_assert_eq(attn_flash_backward(&vw, &g, &opt, &ws, NULL), ATTN_OK);
        attn_flash_workspace_free(&ws);
        if (ALL_SIMD[s] == ATTN_SIMD_GENERIC) {
            size_t nan = 0;
            for (size_t i = 0; i < n; i++)
                nan += isnan(pb.o[i]) != 0;
            cr_expect(nan > 0 && nan < n / 2, "the case should mix NaN and finite rows (%zu NaN)",
                      nan);
            memcpy(o_ref, pb.o, n * sizeof(float));
            memcpy(lse_ref, pb.lse, (size_t)B * H * T * sizeof(float));
            memcpy(g_ref, pb.dq, n * sizeof(float));
            memcpy(g_ref + n, pb.dk, n * sizeof(float));
            memcpy(g_ref + 2 * n, pb.dv, n * sizeof(float));
            continue;
        }
        const char *name = attn_simd_name(ALL_SIMD[s]);
        expect_same_pattern(pb.o, o_ref, n, "output", name);
        expect_same_pattern(pb.lse, lse_ref, (size_t)B * H * T, "lse", name);
        expect_same_pattern(pb.dq, g_ref, n, "dQ", name);
        expect_same_pattern(pb.dk, g_ref + n, n, "dK", name);
        expect_same_pattern(pb.dv, g_ref + 2 * n, n, "dV", name);
    }
    free(o_ref);
    free(lse_ref);
    free(g_ref);
    problem_free(&pb);
}

static void dropout_case(attn_dropout_stream stream, double p, int B, int T, int H, int hd,
                         uint64_t seed) {
    problem pb;
    problem_init(&pb, B, T, H, hd, 1.0f, seed);
    pb.p = p;
    const size_t nw = (size_t)B * H * T * T;
    pb.keep = malloc(nw);
    attn_rng r1, r2;
    attn_rng_seed(&r1, seed);
    r2 = r1;
    /* What the step-by-step module draws ... */
    attn_dropout_mask(&r1, stream, p, pb.keep, nw);
    /* ... and what the fused one draws: same bits, same generator state after. */
    attn_flash_dropout drop = {0};
    attn_error err;
    cr_assert_eq(attn_flash_dropout_draw(&drop, &r2, stream, p, B, H, T, &err), ATTN_OK, "%s",
                 err.msg);
    cr_expect(memcmp(&r1, &r2, sizeof r1) == 0, "generator state differs after the draw");
    size_t mismatches = 0;
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++)
            for (int i = 0; i < T; i++)
                for (int j = 0; j < T; j++)
                    mismatches += (size_t)(attn_flash_dropout_keep(&drop, b, h, i, j) !=
                                           pb.keep[(((size_t)b * H + h) * T + i) * T + j]);
    cr_expect_eq(mismatches, 0, "%zu mask bits differ", mismatches);
    reference(&pb);
    char what[64];
    snprintf(what, sizeof what, "dropout %s p=%g", attn_dropout_stream_name(stream), p);
    check_all_paths(&pb, &drop, what);
    attn_flash_dropout_free(&drop);
    problem_free(&pb);
}

Test(flash, dropout_torch_mkl) {
    dropout_case(ATTN_STREAM_TORCH_MKL, 0.1, 2, 45, 2, 8, 123);
    dropout_case(ATTN_STREAM_TORCH_MKL, 0.5, 1, 70, 3, 16, 5);
}

Test(flash, dropout_torch_cpu) {
    dropout_case(ATTN_STREAM_TORCH_CPU, 0.2, 2, 45, 2, 8, 123);
    dropout_case(ATTN_STREAM_TORCH_CPU, 0.5, 1, 33, 1, 4, 9);
}

/* The forward output and dQ/dK/dV are bit-identical whatever the thread
 * count and from run to run (each (b, h) of the backward is one task that
 * adds its key tiles in order), dropout included; 7 tiles of 16 keys each. */
Test(flash, thread_count_does_not_change_results) {
    problem pb;
    problem_init(&pb, 2, 100, 3, 16, 1.0f, 31);
    attn_rng rng;
    attn_rng_seed(&rng, 31);
    attn_flash_dropout drop = {0};
    cr_assert_eq(attn_flash_dropout_draw(&drop, &rng, ATTN_STREAM_TORCH_MKL, 0.3, 2, 3, 100, NULL),
                 ATTN_OK);
    const size_t row = 3 * 16, n = 2 * 100 * row;
    float *o1 = malloc(n * sizeof(float)), *dk1 = malloc(n * sizeof(float));
    float *dv1 = malloc(n * sizeof(float)), *dq1 = malloc(n * sizeof(float));
    static const int counts[] = {1, 2, 3, 4, 2, 2, 3};
    for (size_t run = 0; run < sizeof counts / sizeof counts[0]; run++) {
        const int threads = counts[run];
        attn_flash_options opt = {
            .threads = threads, .simd = ATTN_SIMD_AUTO, .block_q = 16, .block_k = 16};
        attn_flash_problem v = view(&pb, &drop);
        attn_flash_workspace ws = {0};
        memset(pb.dk, 0, n * sizeof(float));
        memset(pb.dv, 0, n * sizeof(float));
        memset(pb.dq, 0, n * sizeof(float));
        cr_assert_eq(attn_flash_forward(&v, &opt, &ws, NULL), ATTN_OK);
        attn_flash_grads g = {pb.d_o, row, pb.dq, pb.dk, pb.dv, row, row, row};
        cr_assert_eq(attn_flash_backward(&v, &g, &opt, &ws, NULL), ATTN_OK);
        attn_flash_workspace_free(&ws);
        if (run == 0) {
            memcpy(o1, pb.o, n * sizeof(float));
            memcpy(dk1, pb.dk, n * sizeof(float));
            memcpy(dv1, pb.dv, n * sizeof(float));
            memcpy(dq1, pb.dq, n * sizeof(float));
        } else {
            cr_expect(memcmp(dq1, pb.dq, n * sizeof(float)) == 0, "dQ differs at %d threads",
                      threads);
            cr_expect(memcmp(o1, pb.o, n * sizeof(float)) == 0, "output differs at %d threads",
                      threads);
            cr_expect(memcmp(dk1, pb.dk, n * sizeof(float)) == 0, "dK differs at %d threads",
                      threads);
            cr_expect(memcmp(dv1, pb.dv, n * sizeof(float)) == 0, "dV differs at %d threads",
                      threads);
        }
    }
    free(o1);
    free(dk1);
    free(dv1);
    free(dq1);
    attn_flash_dropout_free(&drop);
    problem_free(&pb);
}

/* Backward accumulates into the gradients it is given. */
Test(flash, backward_accumulates) {
    problem pb;
    problem_init(&pb, 1, 20, 1, 4, 1.0f, 3);
    reference(&pb);
    const size_t n = 20 * 4;
    attn_flash_problem v = view(&pb, NULL);
    attn_flash_workspace ws = {0};
    attn_flash_options opt = {.threads = 2, .simd = ATTN_SIMD_AUTO, .block_q = 8, .block_k = 8};
    cr_assert_eq(attn_flash_forward(&v, &opt, &ws, NULL), ATTN_OK);
    for (size_t i = 0; i < n; i++)
        pb.dq[i] = pb.dk[i] = pb.dv[i] = 1.0f;
    attn_flash_grads g = {pb.d_o, 4, pb.dq, pb.dk, pb.dv, 4, 4, 4};
    cr_assert_eq(attn_flash_backward(&v, &g, &opt, &ws, NULL), ATTN_OK);
    for (size_t i = 0; i < n; i++) {
        pb.rdq[i] += 1.0;
        pb.rdk[i] += 1.0;
        pb.rdv[i] += 1.0;
    }
    cr_expect(rel_err(pb.dq, pb.rdq, n) <= 1e-5);
    cr_expect(rel_err(pb.dk, pb.rdk, n) <= 1e-5);
    cr_expect(rel_err(pb.dv, pb.rdv, n) <= 1e-5);
    attn_flash_workspace_free(&ws);
    problem_free(&pb);
}

Test(flash, simd_selection) {
    cr_expect(attn_simd_supported(ATTN_SIMD_GENERIC));
    attn_simd s;
    cr_expect_eq(attn_simd_parse("avx512", &s), 0);
    cr_expect_eq(s, ATTN_SIMD_AVX512);
    cr_expect_eq(attn_simd_parse("sse9", &s), -1);
    setenv("ATTN_SIMD", "generic", 1);
    cr_expect_eq(attn_simd_resolve(ATTN_SIMD_AUTO), ATTN_SIMD_GENERIC);
    unsetenv("ATTN_SIMD");
    const attn_simd best = attn_simd_resolve(ATTN_SIMD_AUTO);
    cr_expect(attn_simd_supported(best));
    cr_expect_neq(best, ATTN_SIMD_AUTO);
    setenv("OMP_NUM_THREADS", "3", 1);
    cr_expect_eq(attn_default_threads(), 3);
    unsetenv("OMP_NUM_THREADS");
    cr_expect_geq(attn_default_threads(), 1);
}

Test(flash, bad_arguments) {
    problem pb;
    problem_init(&pb, 1, 4, 1, 2, 1.0f, 1);
    attn_flash_problem v = view(&pb, NULL);
    attn_flash_workspace ws = {0};
    attn_error err;
    v.head_dim = 0;
    cr_expect_eq(attn_flash_forward(&v, NULL, &ws, &err), ATTN_ERR_INVALID_ARG);
    v = view(&pb, NULL);
    v.ld_q = 1;
    cr_expect_eq(attn_flash_forward(&v, NULL, &ws, &err), ATTN_ERR_SHAPE);
    cr_expect(strstr(err.msg, "stride") != NULL, "%s", err.msg);
    attn_flash_dropout drop = {0};
    cr_expect_eq(attn_flash_dropout_draw(&drop, NULL, ATTN_STREAM_TORCH_MKL, 1.0, 1, 1, 4, &err),
                 ATTN_ERR_INVALID_ARG);
    attn_rng rng;
    attn_rng_seed(&rng, 1);
    cr_assert_eq(attn_flash_dropout_draw(&drop, &rng, ATTN_STREAM_TORCH_MKL, 0.5, 1, 1, 3, &err),
                 ATTN_OK);
    v = view(&pb, &drop); /* mask for T = 3, problem has T = 4 */
    cr_expect_eq(attn_flash_forward(&v, NULL, &ws, &err), ATTN_ERR_SHAPE);
    attn_flash_workspace_free(&ws);
    problem_free(&pb);
}

/* ---- the micro-kernels, each SIMD table against the generic one ---------- */

/* gemm: every block shape and tail (M to 13, N across vector widths), A
 * read by rows and transposed, fresh / accumulated / rescaled. Both sides
 * sum over k in order with one rounding per step (the generic one in
 * double, then to float): equal, or within a rounding of the k-th partial
 * sums (bound: 2^-22 of sum |a b| + |c|). C's padding is never written. */
static void check_gemm(const attn_flash_kernels *K, attn_rng *rng) {
    static const int Ms[] = {1, 2, 3, 4, 5, 6, 7, 12, 13, 64};
    static const int Ns[] = {1, 7, 8, 9, 15, 16, 17, 24, 33, 64, 70};
    static const int Ks[] = {1, 5, 64};
    enum { LD = 80, PAD = 3 };
    float *A = malloc(64 * LD * sizeof(float)), *B = malloc(64 * LD * sizeof(float));
    float *c1 = malloc(64 * LD * sizeof(float)), *c2 = malloc(64 * LD * sizeof(float));
    float rs[64];
    attn_rng_uniform(rng, A, 64 * LD, -2.0f, 2.0f);
    attn_rng_uniform(rng, B, 64 * LD, -2.0f, 2.0f);
    attn_rng_uniform(rng, rs, 64, 0.25f, 1.0f);
    for (size_t mi = 0; mi < sizeof Ms / sizeof *Ms; mi++)
        for (size_t ni = 0; ni < sizeof Ns / sizeof *Ns; ni++)
            for (size_t ki = 0; ki < sizeof Ks / sizeof *Ks; ki++)
                for (int mode = 0; mode < 6; mode++) {
                    const int M = Ms[mi], N = Ns[ni], Kd = Ks[ki], trans = mode & 1;
                    const int acc = mode >= 2, scaled = mode >= 4;
                    const ptrdiff_t rsa = trans ? 1 : LD, csa = trans ? LD : 1;
                    attn_rng_uniform(rng, c1, 64 * LD, -4.0f, 4.0f);
                    memcpy(c2, c1, 64 * LD * sizeof(float));
                    attn_flash_kernels_generic.gemm(M, N, Kd, A, rsa, csa, B, LD, c1, LD - PAD, acc,
                                                    scaled ? rs : NULL);
                    K->gemm(M, N, Kd, A, rsa, csa, B, LD, c2, LD - PAD, acc, scaled ? rs : NULL);
                    for (int i = 0; i < M; i++)
                        for (int n = 0; n < LD - PAD; n++) {
                            const size_t at = (size_t)i * (LD - PAD) + n;
                            if (n >= N) { /* another row's entries or untouched */
                                cr_assert(i + 1 < M || c1[at] == c2[at], "%s gemm wrote past N",
                                          K->name);
                                continue;
                            }
                            double bound = acc ? fabs(c1[at]) : 0.0;
                            for (int k = 0; k < Kd; k++)
                                bound += fabs((double)A[i * rsa + k * csa] * B[k * LD + n]);
                            cr_assert(fabs((double)c1[at] - c2[at]) <= bound * 0x1p-22,
                                      "%s gemm M%d N%d K%d mode %d (%d, %d): %a vs %a", K->name, M,
                                      N, Kd, mode, i, n, c2[at], c1[at]);
                        }
                }
    free(A), free(B), free(c1), free(c2);
}

/* pack_t and ds_row: the same operations in the same order, so the same
 * bits; exp_row within 2 ulp of expf (0 below -87, as the generic's
 * subnormals are); softmax_cols within float rounding of the generic. */
static void check_rows(const attn_flash_kernels *K, attn_rng *rng) {
    enum { R = 37, C = 29, LD = 40 };
    float src[R * LD], d1[C * LD], d2[C * LD], p[LD], m[LD], e1[LD], e2[LD];
    attn_rng_uniform(rng, src, R * LD, -3.0f, 3.0f);
    for (int rows = 1; rows <= R; rows += 4)
        for (int cols = 1; cols <= C; cols += 3) {
            memset(d1, 0, sizeof d1);
            memset(d2, 0, sizeof d2);
            attn_flash_kernels_generic.pack_t(src, LD, rows, cols, d1, LD);
            K->pack_t(src, LD, rows, cols, d2, LD);
            cr_assert(memcmp(d1, d2, sizeof d1) == 0, "%s pack_t %dx%d", K->name, rows, cols);
        }
    for (int n = 1; n <= LD; n++) {
        attn_rng_uniform(rng, p, LD, 0.0f, 1.0f);
        attn_rng_uniform(rng, m, LD, 0.0f, 2.0f);
        for (int use_m = 0; use_m < 2; use_m++) {
            memcpy(e1, src, sizeof e1);
            memcpy(e2, src, sizeof e2);
            attn_flash_kernels_generic.ds_row(p, e1, use_m ? m : NULL, n, 0.3f, 0.125f);
            K->ds_row(p, e2, use_m ? m : NULL, n, 0.3f, 0.125f);
            cr_assert(memcmp(e1, e2, sizeof e1) == 0, "%s ds_row n %d", K->name, n);
        }
        float s[LD];
        attn_rng_uniform(rng, s, LD, -120.0f, 90.0f);
        s[0] = -INFINITY;
        memcpy(e1, src, sizeof e1);
        memcpy(e2, src, sizeof e2);
        attn_flash_kernels_generic.exp_row(s, e1, n, 1.0f, 0.5f);
        K->exp_row(s, e2, n, 1.0f, 0.5f);
        for (int j = 0; j < LD; j++)
            cr_assert(e1[j] == e2[j] ||
                          (j < n && fabs((double)e1[j] - e2[j]) <= 0x1p-22 * e1[j] + 0x1p-125),
                      "%s exp_row n %d [%d]: %a vs %a", K->name, n, j, e2[j], e1[j]);
    }
}

static void check_softmax(const attn_flash_kernels *K, attn_rng *rng) {
    enum { NK = 13, NC = 32 };
    float st1[NK * NC], st2[NK * NC], m1[NC], m2[NC], l1[NC], l2[NC], a1[NC], a2[NC];
    for (int step = 0; step < 3; step++) {
        attn_rng_uniform(rng, st1, NK * NC, -8.0f, 8.0f);
        for (int c = 0; c < NC; c += 5) /* masked columns: -inf so far, or now */
            for (int r = 0; r < NK; r++)
                st1[r * NC + c] = -INFINITY;
        memcpy(st2, st1, sizeof st1);
        if (step == 0)
            for (int c = 0; c < NC; c++) {
                m1[c] = m2[c] = -INFINITY;
                l1[c] = l2[c] = 0.0f;
            }
        attn_flash_kernels_generic.softmax_cols(st1, NK, NC, NC, m1, l1, a1, 0.7f);
        K->softmax_cols(st2, NK, NC, NC, m2, l2, a2, 0.7f);
        for (int c = 0; c < NC; c++) {
            cr_assert(m1[c] == m2[c] || (isinf(m1[c]) && m1[c] == m2[c]), "%s m[%d]", K->name, c);
            cr_assert(fabs((double)l1[c] - l2[c]) <= 1e-6 * fabs(l1[c]), "%s l[%d]: %g vs %g",
                      K->name, c, l2[c], l1[c]);
            cr_assert(fabs((double)a1[c] - a2[c]) <= 1e-6 * fabs(a1[c]), "%s alpha[%d]", K->name,
                      c);
        }
        for (int i = 0; i < NK * NC; i++)
            cr_assert(fabs((double)st1[i] - st2[i]) <= 1e-6 * fabs(st1[i]), "%s p[%d]", K->name, i);
    }
}

static void kernels_match_generic(attn_simd s) {
    if (!attn_simd_supported(s))
        cr_skip_test("no %s here (or ATTN_SIMD caps it)", attn_simd_name(s));
    const attn_flash_options o = {.simd = s};
    const char *name = attn_flash_kernel_path(&o);
    cr_assert(name && strcmp(name, attn_simd_name(s)) == 0, "path %s", name ? name : "NULL");
#ifdef ATTN_FLASH_HAVE_X86
    const attn_flash_kernels *K =
        s == ATTN_SIMD_AVX2 ? &attn_flash_kernels_avx2 : &attn_flash_kernels_avx512;
    attn_rng rng;
    attn_rng_seed(&rng, 50);
    check_gemm(K, &rng);
    check_rows(K, &rng);
    check_softmax(K, &rng);
#endif
}

Test(flash_kernels, avx2_matches_generic) {
    kernels_match_generic(ATTN_SIMD_AVX2);
}

Test(flash_kernels, avx512_matches_generic) {
    kernels_match_generic(ATTN_SIMD_AVX512);
}

/* ---- MultiHeadAttention: fused path vs the step-by-step reference path ---- */

static double rel_err_f(const float *got, const float *want, size_t n) {
    double num = 0, den = 1e-30;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(got[i])) return INFINITY;
        num = fmax(num, fabs((double)got[i] - (double)want[i]));
        den = fmax(den, fabs((double)want[i]));
    }
    return num / den;
}

typedef struct mha_run {
    attn_mha m;
    attn_attention_cache cache;
    attn_param_list params;
    float *y, *dx;
} mha_run;

static void mha_run_once(mha_run *r, attn_mha_path path, attn_simd simd, int threads, int B, int T,
                         int d_in, int d_out, int H, int bias, double p, int training,
                         attn_dropout_stream stream, const float *x, const float *dy,
                         attn_rng *drop_rng) {
    attn_rng init;
    attn_rng_seed(&init, 123);
    attn_error err;
    cr_assert_eq(attn_mha_init(&r->m, d_in, d_out, T, p, H, bias, &init, &err), ATTN_OK, "%s",
                 err.msg);
    r->m.path = path;
    r->m.flash.simd = simd;
    r->m.flash.threads = threads;
    r->m.flash.block_q = 16; /* several tiles even for short T */
    r->m.flash.block_k = 16;
    cr_assert_eq(attn_mha_cache_init(&r->cache, &r->m, B, T, &err), ATTN_OK, "%s", err.msg);
    attn_param_list_init(&r->params);
    cr_assert_eq(attn_mha_params(&r->m, "", &r->params, &err), ATTN_OK);
    attn_param_list_zero_grad(&r->params);
    const size_t ny = (size_t)B * T * d_out, nx = (size_t)B * T * d_in;
    r->y = malloc(ny * sizeof(float));
    r->dx = calloc(nx, sizeof(float));
    attn_forward_mode mode = {training, drop_rng, stream};
    cr_assert_eq(attn_mha_forward(&r->m, x, B, T, r->y, &mode, &r->cache, &err), ATTN_OK, "%s",
                 err.msg);
    cr_assert_eq(attn_mha_backward(&r->m, x, B, T, dy, r->dx, &r->cache, &err), ATTN_OK, "%s",
                 err.msg);
}

static void mha_run_free(mha_run *r) {
    attn_param_list_free(&r->params);
    attn_attention_cache_free(&r->cache);
    attn_mha_free(&r->m);
    free(r->y);
    free(r->dx);
}

static void mha_compare(int B, int T, int d_in, int d_out, int H, int bias, double p,
                        attn_dropout_stream stream) {
    const size_t nx = (size_t)B * T * d_in, ny = (size_t)B * T * d_out;
    float *x = malloc(nx * sizeof(float)), *dy = malloc(ny * sizeof(float));
    attn_rng data;
    attn_rng_seed(&data, 7);
    attn_rng_uniform(&data, x, nx, -1.0f, 1.0f);
    attn_rng_uniform(&data, dy, ny, -1.0f, 1.0f);
    attn_rng r_ref;
    attn_rng_seed(&r_ref, 99);
    mha_run ref;
    mha_run_once(&ref, ATTN_MHA_REFERENCE, ATTN_SIMD_AUTO, 0, B, T, d_in, d_out, H, bias, p, 1,
                 stream, x, dy, &r_ref);
    for (size_t s = 0; s < 3; s++) {
        if (!attn_simd_supported(ALL_SIMD[s])) continue;
        attn_rng r_fused;
        attn_rng_seed(&r_fused, 99);
        mha_run fused;
        mha_run_once(&fused, ATTN_MHA_FUSED, ALL_SIMD[s], 1 + (int)s, B, T, d_in, d_out, H, bias, p,
                     1, stream, x, dy, &r_fused);
        char what[128];
        snprintf(what, sizeof what, "mha B%d T%d d_in %d d_out %d H%d bias %d p %g %s [%s]", B, T,
                 d_in, d_out, H, bias, p, attn_dropout_stream_name(stream),
                 attn_simd_name(ALL_SIMD[s]));
        cr_expect(memcmp(&r_ref, &r_fused, sizeof r_ref) == 0, "%s: generator state differs", what);
        double e;
        cr_expect((e = rel_err_f(fused.y, ref.y, ny)) <= 1e-5, "%s: output rel err %g", what, e);
        cr_expect((e = rel_err_f(fused.dx, ref.dx, nx)) <= 1e-5, "%s: dx rel err %g", what, e);
        cr_assert_eq(fused.params.count, ref.params.count);
        /* W_key.bias has an exact gradient of 0 (softmax ignores a constant
         * q.b added to a whole row), so both sides hold rounding noise: that
         * one is held to 1e-5 of the largest gradient of the module. */
        double gmax = 0;
        for (int i = 0; i < ref.params.count; i++)
            for (size_t k = 0; k < ref.params.items[i].numel; k++)
                gmax = fmax(gmax, fabs((double)ref.params.items[i].grad[k]));
        for (int i = 0; i < ref.params.count; i++) {
            const attn_param *a = &fused.params.items[i], *b = &ref.params.items[i];
            cr_expect_str_eq(a->name, b->name);
            if (strcmp(b->name, "W_key.bias") == 0) {
                for (size_t k = 0; k < b->numel; k++)
                    cr_expect(fabs((double)a->grad[k]) <= 1e-5 * gmax, "%s: W_key.bias[%zu] = %g",
                              what, k, (double)a->grad[k]);
                continue;
            }
            cr_expect((e = rel_err_f(a->grad, b->grad, b->numel)) <= 1e-5, "%s: %s grad rel err %g",
                      what, b->name, e);
        }
        mha_run_free(&fused);
    }
    mha_run_free(&ref);
    free(x);
    free(dy);
}

Test(flash_mha, matches_reference_without_dropout) {
    mha_compare(2, 37, 24, 32, 4, 1, 0.0, ATTN_STREAM_TORCH_MKL);
    mha_compare(1, 1, 5, 6, 3, 0, 0.0, ATTN_STREAM_TORCH_MKL);     /* T = 1 */
    mha_compare(1, 20, 8, 2, 2, 1, 0.0, ATTN_STREAM_TORCH_MKL);    /* head_dim 1 */
    mha_compare(2, 40, 16, 128, 1, 0, 0.0, ATTN_STREAM_TORCH_CPU); /* head_dim 128 */
}

Test(flash_mha, matches_reference_with_dropout) {
    mha_compare(2, 37, 24, 32, 4, 1, 0.1, ATTN_STREAM_TORCH_MKL);
    mha_compare(2, 37, 24, 32, 4, 0, 0.5, ATTN_STREAM_TORCH_CPU);
    mha_compare(1, 19, 12, 12, 2, 1, 0.3, ATTN_STREAM_TORCH_MKL);
}

/* The fused path's cache holds no (B, heads, T, T) buffer. */
Test(flash_mha, fused_cache_is_linear_in_T) {
    attn_mha m;
    cr_assert_eq(attn_mha_init(&m, 8, 8, 64, 0.0, 2, 0, NULL, NULL), ATTN_OK);
    cr_expect_eq(m.path, ATTN_MHA_FUSED);
    attn_attention_cache c;
    cr_assert_eq(attn_mha_cache_init(&c, &m, 2, 64, NULL), ATTN_OK);
    cr_expect_null(c.attn_weights);
    cr_expect_null(c.keep);
    cr_expect_null(c.scratch);
    /* ... so the reference path refuses it with a message. */
    m.path = ATTN_MHA_REFERENCE;
    float x[2 * 64 * 8] = {0}, y[2 * 64 * 8];
    attn_error err;
    const attn_forward_mode eval = {0, NULL, ATTN_STREAM_TORCH_CPU};
    cr_expect_eq(attn_mha_forward(&m, x, 2, 64, y, &eval, &c, &err), ATTN_ERR_STATE);
    cr_expect(strstr(err.msg, "attn_attention_cache_init") != NULL, "%s", err.msg);
    attn_attention_cache_free(&c);
    attn_mha_free(&m);
}
