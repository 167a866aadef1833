/* --precision bf16: rounding, the bf16 GEMM engine, the GPT's outputs and
 * gradients, a short loss curve and KV-cached generation, each checked
 * against the fp32 path (the reference) within bf16's tolerance: a bf16
 * operand carries 8 significant bits (relative rounding error <= 2^-9), so
 * a product of two has <= ~2^-8 relative error per term. Tests that need
 * AVX512-BF16 are skipped on CPUs without it. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attention/mha_fused.h"
#include "attn/engine.h"
#include "attn/feedforward.h"
#include "attn/flash_attention.h"
#include "attn/gelu.h"
#include "attn/gemm.h"
#include "attn/multi_head_attention.h"
#include "attn/train.h"
#include "kernels/flash_kernels.h"
#include "kernels/gemv.h"
#include "train/trainer.h"

static int have_bf16(void) {
    attn_error err;
    return attn_precision_check(ATTN_PRECISION_BF16, &err) == ATTN_OK;
}

static float bits_f(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

Test(bf16, rounding_is_nearest_even_and_keeps_nan_and_inf) {
    /* 1 + 2^-8 is halfway between bf16 1.0 and 1 + 2^-7: to even (1.0);
     * 1 + 3 * 2^-8 is halfway up from 1 + 2^-7 (odd): to 1 + 2^-6. */
    const float x[6] = {1.0f, 1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f, -2.5f, INFINITY, NAN};
    const uint16_t want[5] = {0x3f80, 0x3f80, 0x3f82, 0xc020, 0x7f80};
    uint16_t y[6], z[6];
    attn_f32_to_bf16_scalar(x, y, 6);
    for (int i = 0; i < 5; i++)
        cr_expect_eq(y[i], want[i], "x %g: got 0x%04x want 0x%04x", (double)x[i], y[i], want[i]);
    cr_expect(isnan(attn_bf16_to_f32(y[5])), "NaN must stay NaN (got 0x%04x)", y[5]);
    /* The AVX-512 conversion gives the same bits on random and special values. */
    enum { N = 1000 };
    static float r[N];
    static uint16_t a[N], b[N];
    attn_rng rng;
    attn_rng_seed(&rng, 3);
    attn_rng_uniform(&rng, r, N, -1e3f, 1e3f);
    r[0] = bits_f(0x7fc00001u), r[1] = -INFINITY, r[2] = bits_f(0x3f808000u); /* a tie */
    r[3] = bits_f(0x7f7fffffu), r[4] = 1e-40f, r[5] = -0.0f;                  /* max, subnormal */
    attn_f32_to_bf16_scalar(r, a, N);
    attn_f32_to_bf16(r, b, N);
    cr_expect(memcmp(a, b, sizeof a) == 0, "vector and scalar conversions differ");
    (void)z;
}

/* C = op(A) op(B) (+ C) in double on the bf16-rounded operands. */
static void ref_gemm(int ta, int tb, int M, int N, int K, const float *A, int lda, const float *B,
                     int ldb, float beta, const float *C0, double *C, int ldc, int round) {
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double s = beta != 0.0f ? C0[(size_t)i * ldc + j] : 0.0;
            for (int k = 0; k < K; k++) {
                float a = ta ? A[(size_t)k * lda + i] : A[(size_t)i * lda + k];
                float b = tb ? B[(size_t)j * ldb + k] : B[(size_t)k * ldb + j];
                if (round) {
                    uint16_t h;
                    attn_f32_to_bf16_scalar(&a, &h, 1);
                    a = attn_bf16_to_f32(h);
                    attn_f32_to_bf16_scalar(&b, &h, 1);
                    b = attn_bf16_to_f32(h);
                }
                s += (double)a * b;
            }
            C[(size_t)i * ldc + j] = s;
        }
}

/* A bf16 engine (the test fails if it cannot be made). */
static float *copy_floats(const float *v, size_t n) {
    float *c = malloc(n * sizeof(float));
    memcpy(c, v, n * sizeof(float));
    return c;
}

static void zero_ff_grads(attn_feedforward *ff) {
    memset(ff->fc1.grad_weight, 0, sizeof(float) * ff->fc1.out_features * ff->fc1.in_features);
    memset(ff->fc1.grad_bias, 0, sizeof(float) * ff->fc1.out_features);
    memset(ff->fc2.grad_weight, 0, sizeof(float) * ff->fc2.out_features * ff->fc2.in_features);
    memset(ff->fc2.grad_bias, 0, sizeof(float) * ff->fc2.out_features);
}

static attn_bf16_gemm *new_engine(void) {
    attn_bf16_gemm *g = NULL;
    attn_error err;
    cr_assert_eq(attn_bf16_gemm_create(&g, &err), ATTN_OK, "%s", err.msg);
    return g;
}

Test(bf16, gemm_engine_matches_rounded_operands_in_every_layout) {
    if (!have_bf16()) cr_skip_test("no AVX512-BF16 on this CPU");
    attn_bf16_gemm *g = new_engine();
    const int M = 37, N = 70, K = 129;
    float *A = malloc(sizeof(float) * M * K), *B = malloc(sizeof(float) * N * K);
    float *C = malloc(sizeof(float) * M * N), *C0 = malloc(sizeof(float) * M * N);
    double *R = malloc(sizeof(double) * M * N), *F = malloc(sizeof(double) * M * N);
    attn_rng rng;
    attn_rng_seed(&rng, 9);
    attn_rng_uniform(&rng, A, (size_t)M * K, -1.0f, 1.0f);
    attn_rng_uniform(&rng, B, (size_t)N * K, -1.0f, 1.0f);
    attn_rng_uniform(&rng, C0, (size_t)M * N, -1.0f, 1.0f);
    for (int rep = 0; rep < 2; rep++) /* the second round reuses the cached primitives */
        for (int ta = 0; ta < 2; ta++)
            for (int tb = 0; tb < 2; tb++)
                for (int acc = 0; acc < 2; acc++) {
                    const int lda = ta ? M : K, ldb = tb ? K : N;
                    const float beta = acc ? 1.0f : 0.0f;
                    memcpy(C, C0, sizeof(float) * M * N);
                    attn_gemm(g, 0, ta, tb, M, N, K, 1.0f, A, lda, B, ldb, beta, C, N);
                    ref_gemm(ta, tb, M, N, K, A, lda, B, ldb, beta, C0, R, N, 1);
                    ref_gemm(ta, tb, M, N, K, A, lda, B, ldb, beta, C0, F, N, 0);
                    double worst = 0, worst_fp32 = 0;
                    for (int i = 0; i < M * N; i++) {
                        worst = fmax(worst, fabs(C[i] - R[i]));
                        worst_fp32 = fmax(worst_fp32, fabs(C[i] - F[i]));
                    }
                    /* fp32 sums of exact products: a few ulps of |C| <~ 20. */
                    cr_expect(worst < 1e-4, "ta %d tb %d beta %g: %g from the rounded operands", ta,
                              tb, (double)beta, worst);
                    /* vs fp32 operands: K terms of |ab| <= 1 with <= 2^-8 error each,
                     * random signs: sqrt(K) 2^-8 ~ 0.05. */
                    cr_expect(worst_fp32 < 0.1, "ta %d tb %d: %g from fp32", ta, tb, worst_fp32);
                    cr_expect(worst_fp32 > 1e-4, "bf16 rounding must be visible (%g)", worst_fp32);
                }
    /* NULL engine: the fp32 sgemm, bit for bit. */
    float *S = malloc(sizeof(float) * M * N);
    memcpy(C, C0, sizeof(float) * M * N);
    memcpy(S, C0, sizeof(float) * M * N);
    attn_gemm(NULL, 1, 0, 1, M, N, K, 1.0f, A, K, B, K, 1.0f, C, N);
    attn_sgemm(1, 0, 1, M, N, K, 1.0f, A, K, B, K, 1.0f, S, N);
    cr_expect(memcmp(C, S, sizeof(float) * M * N) == 0);
    attn_bf16_gemm_free(g);
    free(A), free(B), free(C), free(C0), free(R), free(F), free(S);
}

/* A linear layer's x (N, in), dy (N, out) and W (out, in), uniform in
 * [-1, 1) from seed; the caller frees them. */
static void linear_operands(uint64_t seed, int N, int in, int out, float **x, float **dy, float **W,
                            attn_rng *rng) {
    *x = malloc(sizeof(float) * N * in);
    *dy = malloc(sizeof(float) * N * out);
    *W = malloc(sizeof(float) * out * in);
    attn_rng_seed(rng, seed);
    attn_rng_uniform(rng, *x, (size_t)N * in, -1.0f, 1.0f);
    attn_rng_uniform(rng, *dy, (size_t)N * out, -1.0f, 1.0f);
    attn_rng_uniform(rng, *W, (size_t)out * in, -1.0f, 1.0f);
}

/* The backward pair with dy converted once gives each product exactly as
 * attn_gemm does (same rounding, same primitive), for both beta_w and with
 * dx skipped; and with no engine, attn_sgemm's bits. */
Test(bf16, linear_backward_pair_equals_two_products) {
    if (!have_bf16()) cr_skip_test("no AVX512-BF16 on this CPU");
    attn_bf16_gemm *g = new_engine();
    const int N = 45, in = 33, out = 70;
    float *x, *dy, *W;
    attn_rng rng;
    linear_operands(11, N, in, out, &x, &dy, &W, &rng);
    float *dW0 = malloc(sizeof(float) * out * in), *dx0 = malloc(sizeof(float) * N * in);
    float *dW[2], *dx[2];
    for (int k = 0; k < 2; k++) {
        dW[k] = malloc(sizeof(float) * out * in);
        dx[k] = malloc(sizeof(float) * N * in);
    }
    attn_rng_uniform(&rng, dW0, (size_t)out * in, -1.0f, 1.0f);
    attn_rng_uniform(&rng, dx0, (size_t)N * in, -1.0f, 1.0f);
    for (int engine = 0; engine < 2; engine++)
        for (int acc = 0; acc < 2; acc++)
            for (int with_dx = 0; with_dx < 2; with_dx++) {
                attn_bf16_gemm *e = engine ? g : NULL;
                const float beta = acc ? 1.0f : 0.0f;
                for (int k = 0; k < 2; k++) {
                    memcpy(dW[k], dW0, sizeof(float) * out * in);
                    memcpy(dx[k], dx0, sizeof(float) * N * in);
                }
                attn_gemm_linear_grads(e, 1, N, in, out, x, dy, W, beta, dW[0],
                                       with_dx ? dx[0] : NULL);
                attn_gemm(e, 1, 1, 0, out, in, N, 1.0f, dy, out, x, in, beta, dW[1], in);
                if (with_dx)
                    attn_gemm(e, 1, 0, 0, N, in, out, 1.0f, dy, out, W, in, 1.0f, dx[1], in);
                cr_expect(memcmp(dW[0], dW[1], sizeof(float) * out * in) == 0,
                          "engine %d beta %g: dW differs", engine, (double)beta);
                cr_expect(memcmp(dx[0], dx[1], sizeof(float) * N * in) == 0,
                          "engine %d beta %g dx %d: dx differs", engine, (double)beta, with_dx);
                if (!with_dx) cr_expect(memcmp(dx[0], dx0, sizeof(float) * N * in) == 0);
            }
    attn_bf16_gemm_free(g);
    free(x), free(dy), free(W), free(dW0), free(dx0);
    for (int k = 0; k < 2; k++)
        free(dW[k]), free(dx[k]);
}

/* Outputs back to their starting values. */
static void restart(float *y, const float *y0, size_t ny, float *dW, const float *dW0, size_t nw,
                    float *dx, const float *dx0, size_t nx) {
    memcpy(y, y0, sizeof(float) * ny);
    memcpy(dW, dW0, sizeof(float) * nw);
    memcpy(dx, dx0, sizeof(float) * nx);
}

/* A layer input kept in bf16 from its forward gives the products of its
 * fp32 original, bit for bit: the forward (beta 0 and 1) and the backward
 * pair (dx added, or written over whatever dx held); without an engine, the
 * fp32 products of its widening. */
Test(bf16, products_from_a_kept_bf16_input_equal_those_from_fp32) {
    if (!have_bf16()) cr_skip_test("no AVX512-BF16 on this CPU");
    attn_bf16_gemm *g = new_engine();
    const int N = 41, in = 36, out = 67;
    float *x, *dy, *W;
    attn_rng rng;
    linear_operands(13, N, in, out, &x, &dy, &W, &rng);
    uint16_t *x16 = malloc(sizeof(uint16_t) * N * in);
    attn_f32_to_bf16(x, x16, (size_t)N * in);
    const size_t ny = (size_t)N * out, nx = (size_t)N * in, nw = (size_t)out * in;
    float *y0 = malloc(sizeof(float) * ny), *dW0 = malloc(sizeof(float) * nw);
    float *dx0 = malloc(sizeof(float) * nx), *y[2], *dW[2], *dx[2];
    for (int k = 0; k < 2; k++) {
        y[k] = malloc(sizeof(float) * ny);
        dW[k] = malloc(sizeof(float) * nw);
        dx[k] = malloc(sizeof(float) * nx);
    }
    attn_rng_uniform(&rng, y0, ny, -1.0f, 1.0f);
    attn_rng_uniform(&rng, dx0, nx, -1.0f, 1.0f);
    attn_rng_uniform(&rng, dW0, nw, -1.0f, 1.0f);
    for (int pass = 0; pass < 2; pass++) {
        if (pass) attn_bf16_gemm_begin_pass(g);
        for (int acc = 0; acc < 2; acc++) {
            const float beta = acc ? 1.0f : 0.0f;
            for (int k = 0; k < 2; k++)
                restart(y[k], y0, ny, dW[k], dW0, nw, dx[k], dx0, nx);
            attn_gemm_weight_a16(g, 1, N, out, in, x16, W, beta, y[0]);
            attn_gemm_weight(g, 1, N, out, in, x, W, beta, y[1]);
            cr_expect(memcmp(y[0], y[1], sizeof(float) * ny) == 0, "pass %d beta %g: y differs",
                      pass, (double)beta);
            /* beta_x as acc: added to dx0, or written over it (vs dx cleared first). */
            if (!acc) memset(dx[1], 0, sizeof(float) * nx);
            attn_gemm_linear_grads_x16(g, 1, N, in, out, x16, dy, W, beta, dW[0], beta, dx[0]);
            attn_gemm_linear_grads(g, 1, N, in, out, x, dy, W, beta, dW[1], dx[1]);
            cr_expect(memcmp(dW[0], dW[1], sizeof(float) * nw) == 0, "pass %d beta %g: dW differs",
                      pass, (double)beta);
            cr_expect(memcmp(dx[0], dx[1], sizeof(float) * nx) == 0, "pass %d beta %g: dx differs",
                      pass, (double)beta);
        }
    }
    /* No engine: fp32 products on the exact widening of x16. */
    float *xw = malloc(sizeof(float) * nx);
    for (size_t i = 0; i < nx; i++)
        xw[i] = attn_bf16_to_f32(x16[i]);
    for (int k = 0; k < 2; k++)
        restart(y[k], y0, ny, dW[k], dW0, nw, dx[k], dx0, nx);
    attn_gemm_weight_a16(NULL, 1, N, out, in, x16, W, 1.0f, y[0]);
    attn_gemm_weight(NULL, 1, N, out, in, xw, W, 1.0f, y[1]);
    cr_expect(memcmp(y[0], y[1], sizeof(float) * ny) == 0, "no engine: y differs");
    attn_gemm_linear_grads_x16(NULL, 1, N, in, out, x16, dy, W, 1.0f, dW[0], 1.0f, dx[0]);
    attn_gemm_linear_grads(NULL, 1, N, in, out, xw, dy, W, 1.0f, dW[1], dx[1]);
    cr_expect(memcmp(dW[0], dW[1], sizeof(float) * nw) == 0, "no engine: dW differs");
    cr_expect(memcmp(dx[0], dx[1], sizeof(float) * nx) == 0, "no engine: dx differs");
    free(xw);
    attn_bf16_gemm_free(g);
    free(x), free(dy), free(W), free(x16), free(y0), free(dW0), free(dx0);
    for (int k = 0; k < 2; k++)
        free(y[k]), free(dW[k]), free(dx[k]);
}

/* The output head's pair from dlogits rounded once (attn_gemm_round, then
 * attn_gemm_input_grad_dy16 and attn_gemm_weight_grad_dy16, each over many
 * rows) equals attn_gemm_linear_grads from the fp32 dy, bit for bit, written
 * or added; with no engine, both are fp32 products on dy16's exact widening. */
Test(bf16, products_from_a_rounded_dy_equal_those_from_fp32) {
    if (!have_bf16()) cr_skip_test("no AVX512-BF16 on this CPU");
    attn_bf16_gemm *g = new_engine();
    const int N = 45, in = 36, out = 131;
    float *x, *dy, *W;
    attn_rng rng;
    linear_operands(17, N, in, out, &x, &dy, &W, &rng);
    const size_t ny = (size_t)N * out, nx = (size_t)N * in, nw = (size_t)out * in;
    uint16_t *dy16 = malloc(sizeof(uint16_t) * ny), *want16 = malloc(sizeof(uint16_t) * ny);
    attn_gemm_round(N, out, dy, dy16);
    attn_f32_to_bf16(dy, want16, ny);
    cr_expect(memcmp(dy16, want16, sizeof(uint16_t) * ny) == 0, "attn_gemm_round differs");
    float *dW0 = malloc(sizeof(float) * nw), *dx0 = malloc(sizeof(float) * nx);
    float *dyw = malloc(sizeof(float) * ny), *dW[2], *dx[2];
    for (size_t i = 0; i < ny; i++)
        dyw[i] = attn_bf16_to_f32(dy16[i]);
    for (int k = 0; k < 2; k++) {
        dW[k] = malloc(sizeof(float) * nw);
        dx[k] = malloc(sizeof(float) * nx);
    }
    attn_rng_uniform(&rng, dx0, nx, -1.0f, 1.0f);
    attn_rng_uniform(&rng, dW0, nw, -1.0f, 1.0f);
    for (int acc = 0; acc < 2; acc++) {
        const float beta = acc ? 1.0f : 0.0f;
        for (int k = 0; k < 2; k++)
            memcpy(dW[k], dW0, sizeof(float) * nw), memcpy(dx[k], dx0, sizeof(float) * nx);
        attn_gemm_input_grad_dy16(g, 1, N, in, out, dy16, W, 1.0f, dx[0]);
        attn_gemm_weight_grad_dy16(g, 1, N, in, out, x, dy16, beta, dW[0]);
        attn_gemm_linear_grads(g, 1, N, in, out, x, dy, W, beta, dW[1], dx[1]);
        cr_expect(memcmp(dW[0], dW[1], sizeof(float) * nw) == 0, "beta %g: dW differs",
                  (double)beta);
        cr_expect(memcmp(dx[0], dx[1], sizeof(float) * nx) == 0, "beta %g: dx differs",
                  (double)beta);
    }
    /* No engine: fp32 products on the exact widening of dy16. */
    for (int k = 0; k < 2; k++)
        memcpy(dW[k], dW0, sizeof(float) * nw), memcpy(dx[k], dx0, sizeof(float) * nx);
    attn_gemm_input_grad_dy16(NULL, 1, N, in, out, dy16, W, 1.0f, dx[0]);
    attn_gemm_weight_grad_dy16(NULL, 1, N, in, out, x, dy16, 1.0f, dW[0]);
    attn_sgemm(1, 0, 0, N, in, out, 1.0f, dyw, out, W, in, 1.0f, dx[1], in);
    attn_sgemm(1, 1, 0, out, in, N, 1.0f, dyw, out, x, in, 1.0f, dW[1], in);
    cr_expect(memcmp(dW[0], dW[1], sizeof(float) * nw) == 0, "no engine: dW differs");
    cr_expect(memcmp(dx[0], dx[1], sizeof(float) * nx) == 0, "no engine: dx differs");
    attn_bf16_gemm_free(g);
    free(x), free(dy), free(W), free(dy16), free(want16), free(dW0), free(dx0), free(dyw);
    for (int k = 0; k < 2; k++)
        free(dW[k]), free(dx[k]);
}

/* The bf16 FeedForward rounds GELU's output in GELU's pass and keeps it for
 * fc2's backward: output and every gradient equal the same layer run on the
 * fp32 activation (fc1, GELU, fc2 with their own rounding), bit for bit,
 * and a second forward on fewer rows reuses the kept buffer. */
Test(bf16, feedforward_with_gelu_rounded_once_equals_the_fp32_activation_path) {
    if (!have_bf16()) cr_skip_test("no AVX512-BF16 on this CPU");
    attn_bf16_gemm *g = new_engine();
    attn_error err;
    attn_rng rng;
    attn_rng_seed(&rng, 21);
    const int C = 48;
    attn_feedforward ff;
    cr_assert_eq(attn_feedforward_init(&ff, C, &rng, &err), ATTN_OK);
    ff.fc1.bf16 = ff.fc2.bf16 = g;
    const int H = ff.hidden, rows[2] = {70, 33};
    attn_feedforward_cache cache;
    cr_assert_eq(attn_feedforward_cache_init(&cache, &ff, 70, &err), ATTN_OK);
    for (int r = 0; r < 2; r++) {
        const size_t N = (size_t)rows[r];
        float *x = malloc(sizeof(float) * N * C), *dy = malloc(sizeof(float) * N * C);
        attn_rng_uniform(&rng, x, N * C, -2.0f, 2.0f);
        attn_rng_uniform(&rng, dy, N * C, -1.0f, 1.0f);
        float *y = malloc(sizeof(float) * N * C), *dx = calloc(N * C, sizeof(float));
        float *scratch = malloc(sizeof(float) * N * H);
        attn_rng_uniform(&rng, scratch, N * H, -1.0f, 1.0f); /* not cleared by the caller */
        zero_ff_grads(&ff);
        attn_bf16_gemm_begin_pass(g);
        attn_feedforward_forward(&ff, x, y, N, &cache);
        cr_assert(cache.g_in_bf16, "the bf16 GELU path ran");
        attn_feedforward_backward(&ff, x, dy, dx, N, &cache, scratch);
        float *gw1 = copy_floats(ff.fc1.grad_weight, (size_t)H * C);
        float *gb1 = copy_floats(ff.fc1.grad_bias, (size_t)H);
        float *gw2 = copy_floats(ff.fc2.grad_weight, (size_t)H * C);
        float *gb2 = copy_floats(ff.fc2.grad_bias, (size_t)C);
        /* The reference: the fp32 activation, each product rounding its operands. */
        zero_ff_grads(&ff);
        attn_bf16_gemm_begin_pass(g);
        float *h = malloc(sizeof(float) * N * H), *act = malloc(sizeof(float) * N * H);
        float *y_ref = malloc(sizeof(float) * N * C), *dx_ref = calloc(N * C, sizeof(float));
        float *dh = calloc(N * H, sizeof(float));
        attn_linear_forward(&ff.fc1, x, h, N);
        attn_gelu_forward(h, act, N * H);
        attn_linear_forward(&ff.fc2, act, y_ref, N);
        attn_linear_backward(&ff.fc2, act, dy, dh, N);
        attn_gelu_backward_inplace(h, dh, N * H);
        attn_linear_backward(&ff.fc1, x, dh, dx_ref, N);
        cr_expect(memcmp(y, y_ref, sizeof(float) * N * C) == 0, "rows %zu: y differs", N);
        cr_expect(memcmp(dx, dx_ref, sizeof(float) * N * C) == 0, "rows %zu: dx differs", N);
        cr_expect(memcmp(gw1, ff.fc1.grad_weight, sizeof(float) * H * C) == 0, "fc1 dW");
        cr_expect(memcmp(gb1, ff.fc1.grad_bias, sizeof(float) * H) == 0, "fc1 db");
        cr_expect(memcmp(gw2, ff.fc2.grad_weight, sizeof(float) * H * C) == 0, "fc2 dW");
        cr_expect(memcmp(gb2, ff.fc2.grad_bias, sizeof(float) * C) == 0, "fc2 db");
        free(x), free(dy), free(y), free(dx), free(scratch), free(gw1), free(gb1), free(gw2);
        free(gb2), free(h), free(act), free(y_ref), free(dx_ref), free(dh);
    }
    /* Without the engine the fp32 activation is kept, as before. */
    ff.fc1.bf16 = ff.fc2.bf16 = NULL;
    float x1[48], y1[48];
    for (int c = 0; c < C; c++)
        x1[c] = 0.01f * (float)c;
    attn_feedforward_forward(&ff, x1, y1, 1, &cache);
    cr_expect(!cache.g_in_bf16, "fp32 keeps g");
    attn_feedforward_cache_free(&cache);
    attn_feedforward_free(&ff);
    attn_bf16_gemm_free(g);
}

/* The bf16 MHA keeps its rounded input and context from the forward for the
 * backward: a forward on other data in between (same cache) leaves no stale
 * copy; output, input gradient and every parameter gradient equal a fresh
 * cache's, bit for bit. */
static void mha_grads(attn_mha *m, float **out) {
    const attn_linear *l[4] = {&m->W_query, &m->W_key, &m->W_value, &m->out_proj};
    size_t k = 0;
    for (int i = 0; i < 4; i++) {
        const size_t nw = (size_t)l[i]->out_features * (size_t)l[i]->in_features;
        memcpy(*out + k, l[i]->grad_weight, nw * sizeof(float)), k += nw;
        memcpy(*out + k, l[i]->grad_bias, (size_t)l[i]->out_features * sizeof(float));
        k += (size_t)l[i]->out_features;
        memset(l[i]->grad_weight, 0, nw * sizeof(float));
        memset(l[i]->grad_bias, 0, (size_t)l[i]->out_features * sizeof(float));
    }
}

Test(bf16, mha_kept_inputs_follow_the_last_forward) {
    if (!have_bf16()) cr_skip_test("no AVX512-BF16 on this CPU");
    attn_bf16_gemm *g = new_engine();
    attn_error err;
    attn_rng rng;
    attn_rng_seed(&rng, 31);
    const int B = 2, T = 24, d = 64, H = 4;
    attn_mha m;
    cr_assert_eq(attn_mha_init(&m, d, d, T, 0.0, H, 1, &rng, &err), ATTN_OK, "%s", err.msg);
    m.bf16 = g;
    m.W_query.bf16 = m.W_key.bf16 = m.W_value.bf16 = m.out_proj.bf16 = g;
    const size_t N = (size_t)B * T, np = 4 * ((size_t)d * d + d);
    float *x1 = malloc(sizeof(float) * N * d), *x2 = malloc(sizeof(float) * N * d);
    float *dy = malloc(sizeof(float) * N * d);
    attn_rng_uniform(&rng, x1, N * d, -1.0f, 1.0f);
    attn_rng_uniform(&rng, x2, N * d, -1.0f, 1.0f);
    attn_rng_uniform(&rng, dy, N * d, -1.0f, 1.0f);
    float *out[2], *dx[2], *gr[2];
    for (int run = 0; run < 2; run++) {
        out[run] = malloc(sizeof(float) * N * d);
        dx[run] = calloc(N * d, sizeof(float));
        gr[run] = malloc(sizeof(float) * np);
        attn_attention_cache cache;
        cr_assert_eq(attn_mha_cache_init(&cache, &m, B, T, &err), ATTN_OK, "%s", err.msg);
        float *zero = gr[run];
        mha_grads(&m, &zero); /* clears the gradients */
        attn_bf16_gemm_begin_pass(g);
        if (run == 0) /* the first run's cache saw other data first */
            cr_assert_eq(attn_mha_forward(&m, x1, B, T, out[run], NULL, &cache, &err), ATTN_OK);
        cr_assert_eq(attn_mha_forward(&m, x2, B, T, out[run], NULL, &cache, &err), ATTN_OK);
        cr_assert(cache.fused && cache.fused->kept16, "the fused bf16 path keeps its inputs");
        cr_assert_eq(attn_mha_backward(&m, x2, B, T, dy, dx[run], &cache, &err), ATTN_OK, "%s",
                     err.msg);
        mha_grads(&m, &gr[run]);
        attn_attention_cache_free(&cache);
    }
    cr_expect(memcmp(out[0], out[1], sizeof(float) * N * d) == 0, "output");
    cr_expect(memcmp(dx[0], dx[1], sizeof(float) * N * d) == 0, "dx");
    cr_expect(memcmp(gr[0], gr[1], sizeof(float) * np) == 0, "parameter gradients");
    for (int run = 0; run < 2; run++)
        free(out[run]), free(dx[run]), free(gr[run]);
    free(x1), free(x2), free(dy);
    attn_mha_free(&m);
    attn_bf16_gemm_free(g);
}

/* MultiHeadAttention keeps W_query, W_key, W_value adjacent and multiplies
 * by them in place; with them apart (attn.torch points them at torch
 * tensors) the fused path packs a copy: the same bits either way, fp32 and
 * bf16, for the output, dx and every parameter gradient. */
Test(bf16, mha_weights_in_place_or_packed_give_the_same_bits) {
    const int B = 2, T = 16, d = 48, H = 4;
    const size_t N = (size_t)B * T, nw = (size_t)d * d, np = 4 * (nw + d);
    attn_error err;
    for (int prec = 0; prec < 2; prec++) {
        if (prec == 1 && !have_bf16()) break;
        attn_bf16_gemm *g = prec ? new_engine() : NULL;
        float *out[2], *dx[2], *gr[2], *x = malloc(sizeof(float) * N * d);
        float *dy = malloc(sizeof(float) * N * d);
        float *wk = malloc(sizeof(float) * nw), *gk = calloc(nw, sizeof(float));
        attn_rng rng;
        attn_rng_seed(&rng, 5);
        attn_rng_uniform(&rng, x, N * d, -1.0f, 1.0f);
        attn_rng_uniform(&rng, dy, N * d, -1.0f, 1.0f);
        for (int apart = 0; apart < 2; apart++) {
            attn_mha m;
            attn_rng_seed(&rng, 77);
            cr_assert_eq(attn_mha_init(&m, d, d, T, 0.0, H, 1, &rng, &err), ATTN_OK, "%s", err.msg);
            m.bf16 = m.W_query.bf16 = m.W_key.bf16 = m.W_value.bf16 = m.out_proj.bf16 = g;
            float *own_w = m.W_key.weight, *own_g = m.W_key.grad_weight;
            if (apart) { /* W_key elsewhere, as a borrowed tensor */
                memcpy(wk, own_w, nw * sizeof(float));
                m.W_key.weight = wk, m.W_key.grad_weight = gk;
            }
            out[apart] = malloc(sizeof(float) * N * d);
            dx[apart] = calloc(N * d, sizeof(float));
            gr[apart] = malloc(sizeof(float) * np);
            attn_attention_cache cache;
            cr_assert_eq(attn_mha_cache_init(&cache, &m, B, T, &err), ATTN_OK, "%s", err.msg);
            attn_bf16_gemm_begin_pass(g);
            cr_assert_eq(attn_mha_forward(&m, x, B, T, out[apart], NULL, &cache, &err), ATTN_OK);
            cr_assert_eq(attn_mha_backward(&m, x, B, T, dy, dx[apart], &cache, &err), ATTN_OK);
            cr_expect((cache.fused->w_qkv != NULL) == apart, "packed only when apart");
            mha_grads(&m, &gr[apart]);
            attn_attention_cache_free(&cache);
            m.W_key.weight = own_w, m.W_key.grad_weight = own_g;
            attn_mha_free(&m);
        }
        cr_expect(memcmp(out[0], out[1], sizeof(float) * N * d) == 0, "prec %d: output", prec);
        cr_expect(memcmp(dx[0], dx[1], sizeof(float) * N * d) == 0, "prec %d: dx", prec);
        cr_expect(memcmp(gr[0], gr[1], sizeof(float) * np) == 0, "prec %d: gradients", prec);
        for (int k = 0; k < 2; k++)
            free(out[k]), free(dx[k]), free(gr[k]);
        free(x), free(dy), free(wk), free(gk);
        attn_bf16_gemm_free(g);
    }
}

/* A weight's bf16 copy within a pass: attn_gemm_weight and the backward
 * pair's dx give attn_gemm's bits, whether the copy was just made or
 * reused; a new pass rounds the weight again (it changed), and without a
 * pass each use rounds it. */
Test(bf16, weight_copies_of_a_pass_give_the_same_products) {
    if (!have_bf16()) cr_skip_test("no AVX512-BF16 on this CPU");
    attn_bf16_gemm *g = new_engine();
    const int N = 37, in = 48, out = 65;
    float *x, *dy, *W, *dW = malloc(sizeof(float) * out * in);
    attn_rng rng;
    linear_operands(12, N, in, out, &x, &dy, &W, &rng);
    float *y[2], *dx[2];
    for (int k = 0; k < 2; k++) {
        y[k] = malloc(sizeof(float) * N * out);
        dx[k] = malloc(sizeof(float) * N * in);
    }
    for (int round = 0; round < 4; round++) {
        if (round == 1 || round == 2) attn_bf16_gemm_begin_pass(g); /* round 3: same pass */
        if (round == 2) /* the weight changed between passes */
            for (int i = 0; i < out * in; i++)
                W[i] *= 1.5f;
        for (int k = 0; k < 2; k++) {
            memset(y[k], 0, sizeof(float) * N * out);
            memset(dx[k], 0, sizeof(float) * N * in);
        }
        attn_gemm_weight(g, 1, N, out, in, x, W, 0.0f, y[0]);
        attn_gemm(g, 1, 0, 1, N, out, in, 1.0f, x, in, W, in, 0.0f, y[1], out);
        attn_gemm_linear_grads(g, 1, N, in, out, x, dy, W, 0.0f, dW, dx[0]);
        attn_gemm(g, 1, 0, 0, N, in, out, 1.0f, dy, out, W, in, 1.0f, dx[1], in);
        cr_expect(memcmp(y[0], y[1], sizeof(float) * N * out) == 0, "round %d: y differs", round);
        cr_expect(memcmp(dx[0], dx[1], sizeof(float) * N * in) == 0, "round %d: dx differs", round);
    }
    /* Within a pass the copy is the one made at the weight's first use. */
    float *y0 = malloc(sizeof(float) * N * out);
    attn_gemm_weight(g, 1, N, out, in, x, W, 0.0f, y0);
    W[0] += 1.0f;
    attn_gemm_weight(g, 1, N, out, in, x, W, 0.0f, y[0]);
    cr_expect(memcmp(y0, y[0], sizeof(float) * N * out) == 0, "the pass's copy is reused");
    attn_bf16_gemm_begin_pass(g);
    attn_gemm_weight(g, 1, N, out, in, x, W, 0.0f, y[0]);
    cr_expect(memcmp(y0, y[0], sizeof(float) * N * out) != 0, "a new pass rounds it again");
    attn_bf16_gemm_free(g);
    free(x), free(dy), free(W), free(dW), free(y0);
    for (int k = 0; k < 2; k++)
        free(y[k]), free(dx[k]);
}

/* y (N, out) = x W^T on a fresh engine (its first pass rounds W). */
static void fresh_product(int N, int in, int out, const float *x, const float *W, float *y) {
    attn_bf16_gemm *f = new_engine();
    attn_bf16_gemm_begin_pass(f);
    attn_gemm_weight(f, 1, N, out, in, x, W, 0.0f, y);
    attn_bf16_gemm_free(f);
}

/* The optimizer's side: copies it writes are the next pass's, that pass
 * only; a weight used as one block (three parts, as MHA's Q, K, V) is
 * carried only when every part was written. */
Test(bf16, optimizer_written_copies_serve_the_next_pass_only) {
    if (!have_bf16()) cr_skip_test("no AVX512-BF16 on this CPU");
    attn_bf16_gemm *g = new_engine();
    const int N = 19, in = 40, out = 3 * 24;
    const size_t part = (size_t)24 * in;
    float *x, *dy, *W;
    attn_rng rng;
    linear_operands(44, N, in, out, &x, &dy, &W, &rng);
    float *W1 = malloc(sizeof(float) * out * in), *y = malloc(sizeof(float) * N * out);
    float *want = malloc(sizeof(float) * N * out);
    cr_expect(attn_bf16_gemm_weight_copy(NULL, W, part) == NULL, "no engine, no copy");
    cr_expect(attn_bf16_gemm_weight_copy(g, W, part) == NULL, "no pass, no copy");
    for (int parts = 3; parts >= 2; parts--) {
        attn_bf16_gemm_begin_pass(g);
        cr_expect(attn_bf16_gemm_weight_copy(g, W, part) == NULL, "not used in this pass yet");
        attn_gemm_weight(g, 1, N, out, in, x, W, 0.0f, y);
        /* the update: W1 = 1.5 W, parts written into the pass's copy */
        for (int i = 0; i < out * in; i++)
            W1[i] = W[i] = 1.5f * W[i];
        for (int k = 0; k < parts; k++) {
            uint16_t *c = attn_bf16_gemm_weight_copy(g, W + k * part, part);
            cr_assert(c != NULL, "part %d of the weight used this pass", k);
            attn_f32_to_bf16(W + k * part, c, part);
        }
        attn_bf16_gemm_carry_copies(g);
        /* A write the rule forbids, made here to see which values the next
         * pass multiplies by: the carried copy (all parts written) or W. */
        for (int i = 0; i < out * in; i++)
            W[i] += 0.25f;
        attn_bf16_gemm_begin_pass(g);
        attn_gemm_weight(g, 1, N, out, in, x, W, 0.0f, y);
        fresh_product(N, in, out, x, parts == 3 ? W1 : W, want);
        cr_expect(memcmp(y, want, sizeof(float) * N * out) == 0, "%s",
                  parts == 3 ? "the next pass multiplies by the carried copy"
                             : "a copy written in part is rounded again");
        attn_bf16_gemm_begin_pass(g); /* the pass after: W rounded afresh */
        attn_gemm_weight(g, 1, N, out, in, x, W, 0.0f, y);
        fresh_product(N, in, out, x, W, want);
        cr_expect(memcmp(y, want, sizeof(float) * N * out) == 0, "%d parts: one pass only", parts);
    }
    attn_bf16_gemm_free(g);
    free(x), free(dy), free(W), free(W1), free(y), free(want);
}

static double rel_err(const float *a, const float *b, size_t n) {
    double d = 0, s = 0;
    for (size_t i = 0; i < n; i++) {
        d += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
        s += (double)b[i] * b[i];
    }
    return s > 0 ? sqrt(d / s) : sqrt(d);
}

/* Every output and every parameter gradient of the GPT (fused MHA with qkv
 * bias, dropout off) in bf16 vs fp32: relative L2 error within bf16's. */
Test(bf16, gpt_forward_and_gradients_within_bf16_tolerance) {
    if (!have_bf16()) cr_skip_test("no AVX512-BF16 on this CPU");
    const attn_gpt_config cfg = {.vocab_size = 29,
                                 .context_length = 16,
                                 .emb_dim = 64,
                                 .n_heads = 4,
                                 .n_layers = 2,
                                 .drop_rate = 0.0,
                                 .qkv_bias = 1};
    const int B = 3, T = 16, N = B * T;
    attn_gpt m32, m16;
    attn_rng r1, r2;
    attn_rng_seed(&r1, 5);
    attn_rng_seed(&r2, 5);
    attn_error err;
    cr_assert_eq(attn_gpt_init(&m32, &cfg, &r1, &err), ATTN_OK);
    cr_assert_eq(attn_gpt_init(&m16, &cfg, &r2, &err), ATTN_OK);
    cr_assert_eq(attn_gpt_set_precision(&m16, ATTN_PRECISION_BF16, &err), ATTN_OK, "%s", err.msg);
    cr_expect_eq(m16.precision, ATTN_PRECISION_BF16);
    int32_t ids[48], tg[48];
    for (int i = 0; i < N; i++)
        ids[i] = (i * 7 + 3) % cfg.vocab_size, tg[i] = (i * 5 + 1) % cfg.vocab_size;
    attn_gpt_acts a32, a16;
    cr_assert_eq(attn_gpt_acts_init(&a32, &m32, B, T, &err), ATTN_OK);
    cr_assert_eq(attn_gpt_acts_init(&a16, &m16, B, T, &err), ATTN_OK);
    float l32, l16;
    cr_assert_eq(attn_gpt_forward(&m32, ids, tg, B, T, NULL, &a32, &l32, &err), ATTN_OK);
    cr_assert_eq(attn_gpt_forward(&m16, ids, tg, B, T, NULL, &a16, &l16, &err), ATTN_OK);
    const double e_logits = rel_err(a16.logits, a32.logits, (size_t)N * cfg.vocab_size);
    cr_expect(e_logits < 2e-2 && e_logits > 0, "logits: relative error %g", e_logits);
    cr_expect(fabs(l16 - l32) < 1e-2 * fabs(l32), "loss %g vs %g", (double)l16, (double)l32);
    cr_assert_eq(attn_gpt_backward(&m32, &a32, 1.0f, &err), ATTN_OK);
    cr_assert_eq(attn_gpt_backward(&m16, &a16, 1.0f, &err), ATTN_OK);
    const attn_param_list *p32 = attn_gpt_params(&m32), *p16 = attn_gpt_params(&m16);
    for (int i = 0; i < p32->count; i++) {
        const attn_param *q = &p32->items[i];
        double norm = 0, diff = 0;
        for (size_t j = 0; j < q->numel; j++) {
            norm += (double)q->grad[j] * q->grad[j];
            const double d = (double)p16->items[i].grad[j] - q->grad[j];
            diff += d * d;
        }
        norm = sqrt(norm), diff = sqrt(diff);
        /* W_key.bias: its exact gradient is 0 (a key bias shifts all of a
         * query's scores alike); both paths give rounding noise there. */
        if (norm < 1e-5)
            cr_expect(diff < 1e-4, "%s grad: %g from fp32's ~0", q->name, diff);
        else
            cr_expect(diff < 5e-2 * norm, "%s grad: relative error %g", q->name, diff / norm);
    }
    /* Back to fp32: bit for bit the reference again. */
    cr_assert_eq(attn_gpt_set_precision(&m16, ATTN_PRECISION_FP32, &err), ATTN_OK);
    cr_assert_eq(attn_gpt_forward(&m16, ids, tg, B, T, NULL, &a16, &l16, &err), ATTN_OK);
    cr_expect(memcmp(a16.logits, a32.logits, sizeof(float) * N * cfg.vocab_size) == 0);
    attn_gpt_acts_free(&a32);
    attn_gpt_acts_free(&a16);
    attn_gpt_free(&m32);
    attn_gpt_free(&m16);
}

static char *corpus(size_t *n) {
    const char *line = "Now is the winter of our discontent made glorious summer by this sun.\n";
    const size_t L = strlen(line), reps = 60;
    char *s = malloc(L * reps + 1);
    for (size_t i = 0; i < reps; i++)
        memcpy(s + i * L, line, L);
    s[L * reps] = '\0';
    *n = L * reps;
    return s;
}

/* Two fp32 trainers of one tiny model (no dropout) on corpus(); returns
 * the corpus, for the caller to free. */
static char *tiny_pair(attn_trainer *a, attn_trainer *b, int batch_size, int max_steps,
                       int warmup_steps) {
    size_t n;
    char *text = corpus(&n);
    attn_gpt_config m;
    attn_train_config t;
    attn_error err;
    cr_assert_eq(attn_train_preset("tiny", &m, &t, &err), ATTN_OK);
    m.context_length = 32, m.emb_dim = 64, m.n_heads = 4, m.n_layers = 2, m.drop_rate = 0.0;
    t.batch_size = batch_size, t.max_steps = max_steps, t.warmup_steps = warmup_steps;
    cr_assert_eq(attn_trainer_init(a, &m, &t, 0, text, n, &err), ATTN_OK, "%s", err.msg);
    cr_assert_eq(attn_trainer_init(b, &m, &t, 0, text, n, &err), ATTN_OK, "%s", err.msg);
    return text;
}

/* A few dozen steps of a tiny model: the bf16 loss curve stays within 1% of
 * fp32's (the 500-step comparison is bench/bf16_loss.sh). */
Test(bf16, short_loss_curve_within_one_percent_of_fp32) {
    if (!have_bf16()) cr_skip_test("no AVX512-BF16 on this CPU");
    attn_trainer a, b;
    attn_error err;
    char *text = tiny_pair(&a, &b, 8, 40, 5);
    cr_assert_eq(attn_gpt_set_precision(&b.model, ATTN_PRECISION_BF16, &err), ATTN_OK);
    double worst = 0, first = 0, last32 = 0, last16 = 0;
    for (int s = 0; s < 40; s++) {
        attn_train_record ra, rb;
        cr_assert_eq(attn_trainer_step(&a, &ra, &err), ATTN_OK, "%s", err.msg);
        cr_assert_eq(attn_trainer_step(&b, &rb, &err), ATTN_OK, "%s", err.msg);
        if (s == 0) first = ra.loss;
        worst = fmax(worst, fabs((double)rb.loss - ra.loss) / ra.loss);
        last32 = ra.loss, last16 = rb.loss;
    }
    cr_expect(last32 < 0.6 * first, "fp32 must learn (%g -> %g)", first, last32);
    cr_expect(worst < 0.01, "bf16 loss off fp32's by %.3g%% at worst (last %g vs %g)", 100 * worst,
              last16, last32);
    attn_trainer_release(&a);
    attn_trainer_release(&b);
    free(text);
}

/* The trainer's AdamW writes the weights' bf16 copies as it updates them:
 * the same losses and weights, bit for bit, as steps that round every
 * weight afresh at each forward. */
Test(bf16, trainer_steps_on_carried_copies_equal_steps_rounding_afresh) {
    if (!have_bf16()) cr_skip_test("no AVX512-BF16 on this CPU");
    attn_trainer a, b;
    attn_error err;
    char *text = tiny_pair(&a, &b, 4, 12, 2);
    cr_assert_eq(attn_gpt_set_precision(&a.model, ATTN_PRECISION_BF16, &err), ATTN_OK);
    cr_assert_eq(attn_gpt_set_precision(&b.model, ATTN_PRECISION_BF16, &err), ATTN_OK);
    for (int s = 0; s < 12; s++) {
        attn_train_record ra, rb;
        cr_assert_eq(attn_trainer_step(&a, &ra, &err), ATTN_OK, "%s", err.msg);
        cr_assert_eq(attn_trainer_step(&b, &rb, &err), ATTN_OK, "%s", err.msg);
        /* b: an extra pass, so its next forward rounds every weight again */
        attn_bf16_gemm_begin_pass(b.model.bf16);
        cr_expect(memcmp(&ra.loss, &rb.loss, sizeof ra.loss) == 0, "step %d: loss %.9g vs %.9g", s,
                  (double)ra.loss, (double)rb.loss);
    }
    const attn_param_list *pa = attn_gpt_params(&a.model), *pb = attn_gpt_params(&b.model);
    for (int i = 0; i < pa->count; i++)
        cr_expect(
            memcmp(pa->items[i].data, pb->items[i].data, pa->items[i].numel * sizeof(float)) == 0,
            "%s differs", pa->items[i].name);
    attn_trainer_release(&a);
    attn_trainer_release(&b);
    free(text);
}

/* KV-cached steps with bf16 weight copies stay within bf16 tolerance of the
 * fp32 steps; the portable and AVX-512 matrix-vector kernels agree. */
Test(bf16, kv_steps_with_bf16_weights) {
    const attn_gpt_config cfg = {.vocab_size = 29,
                                 .context_length = 16,
                                 .emb_dim = 64,
                                 .n_heads = 4,
                                 .n_layers = 2,
                                 .drop_rate = 0.0,
                                 .qkv_bias = 1};
    attn_gpt m;
    attn_rng rng;
    attn_rng_seed(&rng, 8);
    attn_error err;
    cr_assert_eq(attn_gpt_init(&m, &cfg, &rng, &err), ATTN_OK);
    attn_gpt_kv_cache c32, c16;
    cr_assert_eq(attn_gpt_kv_init(&c32, &m, &err), ATTN_OK);
    cr_assert_eq(attn_gpt_kv_init(&c16, &m, &err), ATTN_OK);
    cr_assert_eq(attn_gpt_kv_set_precision(&c16, &m, ATTN_PRECISION_BF16, &err), ATTN_OK);
    float l32[29], l16[29];
    for (int t = 0; t < 16; t++) {
        cr_assert_eq(attn_gpt_kv_step(&m, &c32, (t * 3) % 29, l32, &err), ATTN_OK);
        cr_assert_eq(attn_gpt_kv_step(&m, &c16, (t * 3) % 29, l16, &err), ATTN_OK);
        const double e = rel_err(l16, l32, 29);
        cr_expect(e < 2e-2 && e > 0, "step %d: relative error %g", t, e);
    }
    attn_gpt_kv_free(&c32);
    attn_gpt_kv_free(&c16);
    attn_gpt_free(&m);
    /* Kernels: portable vs dispatched, odd sizes (masked tails). */
    const int out = 21, in = 83;
    float W[21 * 83], x[83], b[21], y1[21], y2[21];
    uint16_t Wb[21 * 83];
    attn_rng_uniform(&rng, W, sizeof W / sizeof *W, -1, 1);
    attn_rng_uniform(&rng, x, 83, -1, 1);
    attn_rng_uniform(&rng, b, 21, -1, 1);
    attn_f32_to_bf16(W, Wb, sizeof W / sizeof *W);
    for (int o = 0; o < out; o++) {
        double s = b[o], sb = b[o];
        for (int i = 0; i < in; i++) {
            s += (double)W[o * in + i] * x[i];
            sb += (double)attn_bf16_to_f32(Wb[o * in + i]) * x[i];
        }
        y1[o] = (float)s;
        y2[o] = (float)sb;
    }
    float g1[21], g2[21];
    attn_gemv_f32(W, b, x, g1, in, 0, out);
    attn_gemv_bf16(Wb, b, x, g2, in, 0, out);
    for (int o = 0; o < out; o++) {
        cr_expect(fabsf(g1[o] - y1[o]) < 1e-5f, "f32 row %d: %g vs %g", o, g1[o], y1[o]);
        cr_expect(fabsf(g2[o] - y2[o]) < 1e-5f, "bf16 row %d: %g vs %g", o, g2[o], y2[o]);
    }
}

/* ---- the bf16 attention kernel (attn_flash_* with precision BF16) ------- */

typedef struct flash_case {
    int B, T, H, hd;
    float *qkv, *o, *lse, *d_o, *dq, *dk, *dv;
} flash_case;

static void flash_case_init(flash_case *fc, int B, int T, int H, int hd, uint64_t seed) {
    fc->B = B, fc->T = T, fc->H = H, fc->hd = hd;
    const size_t n = (size_t)B * T * H * hd;
    fc->qkv = malloc(3 * n * sizeof(float));
    fc->d_o = malloc(n * sizeof(float));
    fc->o = malloc(n * sizeof(float));
    fc->lse = malloc((size_t)B * H * T * sizeof(float));
    fc->dq = malloc(n * sizeof(float));
    fc->dk = malloc(n * sizeof(float));
    fc->dv = malloc(n * sizeof(float));
    attn_rng rng;
    attn_rng_seed(&rng, seed);
    attn_rng_uniform(&rng, fc->qkv, 3 * n, -1.5f, 1.5f);
    attn_rng_uniform(&rng, fc->d_o, n, -1.0f, 1.0f);
}

static void flash_case_free(flash_case *fc) {
    free(fc->qkv), free(fc->d_o), free(fc->o), free(fc->lse);
    free(fc->dq), free(fc->dk), free(fc->dv);
}

/* Forward then backward on the packed (q | k | v) rows. */
static attn_status flash_run(flash_case *fc, const attn_flash_dropout *drop,
                             const attn_flash_options *opt, attn_error *err) {
    const size_t row = (size_t)fc->H * fc->hd, n = (size_t)fc->B * fc->T * row;
    attn_flash_problem pb = {
        fc->B,   fc->T,   fc->H,   fc->hd, fc->qkv, fc->qkv + row, fc->qkv + 2 * row,
        3 * row, 3 * row, 3 * row, fc->o,  row,     fc->lse,       drop,
        0,       NULL};
    attn_flash_grads g = {fc->d_o, row, fc->dq, fc->dk, fc->dv, row, row, row};
    memset(fc->dq, 0, n * sizeof(float));
    memset(fc->dk, 0, n * sizeof(float));
    memset(fc->dv, 0, n * sizeof(float));
    attn_flash_workspace ws = {0};
    attn_status s = attn_flash_forward(&pb, opt, &ws, err);
    if (s == ATTN_OK) s = attn_flash_backward(&pb, &g, opt, &ws, err);
    attn_flash_workspace_free(&ws);
    return s;
}

/* Output, LSE and the three gradients in bf16 against fp32 (the reference,
 * itself checked against a double reference in test_flash_attention.c), on
 * odd shapes (odd head_dim and T: the zero-padded pairs), tiles that do and
 * do not divide T, both dropout streams, 1 and 2 threads. The bf16 results
 * are the same bits for either thread count. */
Test(bf16, flash_attention_within_bf16_tolerance_of_fp32) {
    if (!have_bf16()) cr_skip_test("no AVX512-BF16 on this CPU");
    const struct {
        int B, T, H, hd, bq, bk;
        double p;
        attn_dropout_stream stream;
    } cases[] = {
        {2, 37, 3, 7, 16, 16, 0.0, ATTN_STREAM_TORCH_CPU},
        {1, 70, 2, 13, 0, 0, 0.1, ATTN_STREAM_TORCH_MKL},
        {2, 129, 2, 64, 64, 32, 0.2, ATTN_STREAM_TORCH_CPU},
        {1, 96, 4, 16, 32, 64, 0.0, ATTN_STREAM_TORCH_MKL},
    };
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        const int B = cases[ci].B, T = cases[ci].T, H = cases[ci].H, hd = cases[ci].hd;
        const size_t n = (size_t)B * T * H * hd, nl = (size_t)B * H * T;
        flash_case f32, f16;
        flash_case_init(&f32, B, T, H, hd, 40 + ci);
        flash_case_init(&f16, B, T, H, hd, 40 + ci);
        attn_flash_dropout drop = {0};
        attn_rng rng;
        attn_rng_seed(&rng, 9);
        attn_error err;
        cr_assert_eq(
            attn_flash_dropout_draw(&drop, &rng, cases[ci].stream, cases[ci].p, B, H, T, &err),
            ATTN_OK, "%s", err.msg);
        attn_flash_options o32 = {.threads = 2, .block_q = cases[ci].bq, .block_k = cases[ci].bk};
        attn_flash_options o16 = o32;
        o16.precision = ATTN_PRECISION_BF16;
        cr_assert_eq(flash_run(&f32, &drop, &o32, &err), ATTN_OK, "%s", err.msg);
        cr_assert_eq(flash_run(&f16, &drop, &o16, &err), ATTN_OK, "%s", err.msg);
        const double eo = rel_err(f16.o, f32.o, n), el = rel_err(f16.lse, f32.lse, nl);
        const double eq = rel_err(f16.dq, f32.dq, n), ek = rel_err(f16.dk, f32.dk, n),
                     ev = rel_err(f16.dv, f32.dv, n);
        /* > 0: the bf16 path really ran; bounds: a few bf16 roundings. */
        cr_expect(eo > 0 && eo < 8e-3, "case %zu: output relative error %g", ci, eo);
        cr_expect(el < 2e-3, "case %zu: LSE relative error %g", ci, el);
        cr_expect(eq > 0 && eq < 1.5e-2, "case %zu: dQ relative error %g", ci, eq);
        cr_expect(ek > 0 && ek < 1.5e-2, "case %zu: dK relative error %g", ci, ek);
        cr_expect(ev > 0 && ev < 1.5e-2, "case %zu: dV relative error %g", ci, ev);
        /* One thread: the same bits (every sum runs in one fixed order). */
        flash_case f1;
        flash_case_init(&f1, B, T, H, hd, 40 + ci);
        o16.threads = 1;
        cr_assert_eq(flash_run(&f1, &drop, &o16, &err), ATTN_OK, "%s", err.msg);
        cr_expect(memcmp(f1.o, f16.o, n * sizeof(float)) == 0, "case %zu: O differs", ci);
        cr_expect(memcmp(f1.dq, f16.dq, n * sizeof(float)) == 0, "case %zu: dQ differs", ci);
        cr_expect(memcmp(f1.dk, f16.dk, n * sizeof(float)) == 0, "case %zu: dK differs", ci);
        cr_expect(memcmp(f1.dv, f16.dv, n * sizeof(float)) == 0, "case %zu: dV differs", ci);
        flash_case_free(&f1);
        flash_case_free(&f32);
        flash_case_free(&f16);
        attn_flash_dropout_free(&drop);
    }
}

/* The AMX tile gemm against the AVX512-BF16 one it stands in for, on the
 * pair layouts the attention uses (A's pairs along its rows, csa == 1, or
 * down its columns, rsa == 1), sizes with and without 16-edges, K2 that
 * the tiles take and that they leave to AVX-512, plain and accumulating
 * with a row scale. Both add exact bf16 products in fp32 in different
 * orders, so they agree to fp32 rounding of the sum of |terms| (2^-16 of
 * it: a term left out or counted twice is far more). */
Test(bf16, amx_tile_gemm_matches_the_avx512_kernel) {
    if (!have_bf16()) cr_skip_test("no AVX512-BF16 on this CPU");
    if (!attn_flash_amx_usable()) cr_skip_test("no AMX-BF16 (or no tile state from the OS)");
    static const int shapes[][3] = {{16, 16, 16}, {64, 64, 16}, {64, 32, 32}, {20, 40, 16},
                                    {37, 19, 48}, {5, 64, 16},  {64, 7, 32},  {48, 48, 8}};
    attn_rng rng;
    attn_rng_seed(&rng, 2026);
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++)
        for (int trans = 0; trans < 2; trans++)
            for (int acc = 0; acc < 2; acc++) {
                const int M = shapes[si][0], N = shapes[si][1], K2 = shapes[si][2];
                /* A2(i, p) = A[i * rsa + p * csa]; padded strides */
                const ptrdiff_t rsa = trans ? 1 : K2 + 3, csa = trans ? M + 5 : 1;
                const ptrdiff_t ldb = N + 2, ldc = N + 1;
                const size_t na = trans ? (size_t)K2 * csa : (size_t)M * rsa;
                uint32_t *A = malloc(na * sizeof *A), *B = malloc((size_t)K2 * ldb * sizeof *B);
                float *f = malloc(2 * (na > (size_t)K2 * ldb ? na : (size_t)K2 * ldb) * sizeof *f);
                float *c1 = malloc((size_t)M * ldc * sizeof *c1);
                float *c2 = malloc((size_t)M * ldc * sizeof *c2);
                float *bound = malloc((size_t)M * N * sizeof *bound), rs[64];
                uint16_t *h = malloc(2 * na * sizeof *h + 2 * (size_t)K2 * ldb * sizeof *h);
                uint16_t *hb = h + 2 * na;
                attn_rng_uniform(&rng, f, 2 * na, -2.0f, 2.0f);
                attn_f32_to_bf16(f, h, 2 * na);
                memcpy(A, h, na * sizeof *A);
                attn_rng_uniform(&rng, f, 2 * (size_t)K2 * ldb, -2.0f, 2.0f);
                attn_f32_to_bf16(f, hb, 2 * (size_t)K2 * ldb);
                memcpy(B, hb, (size_t)K2 * ldb * sizeof *B);
                attn_rng_uniform(&rng, c1, (size_t)M * ldc, -4.0f, 4.0f);
                memcpy(c2, c1, (size_t)M * ldc * sizeof *c1);
                attn_rng_uniform(&rng, rs, 64, 0.25f, 1.0f);
                for (int i = 0; i < M; i++)
                    for (int n = 0; n < N; n++) {
                        double s = acc ? fabs((double)c1[i * ldc + n] * rs[i]) : 0.0;
                        for (int p = 0; p < K2; p++)
                            for (int e = 0; e < 2; e++) {
                                const uint32_t a = A[i * rsa + p * csa], b = B[p * ldb + n];
                                s += fabs((double)bits_f((e ? a >> 16 : a & 0xFFFFu) << 16) *
                                          (double)bits_f((e ? b >> 16 : b & 0xFFFFu) << 16));
                            }
                        bound[i * N + n] = (float)(s * 0x1p-16 + 1e-30);
                    }
                attn_flash_kernels_bf16.gemm(M, N, K2, A, rsa, csa, B, ldb, c1, ldc, acc,
                                             acc ? rs : NULL);
                attn_flash_gemm_amx(M, N, K2, A, rsa, csa, B, ldb, c2, ldc, acc, acc ? rs : NULL);
                for (int i = 0; i < M; i++)
                    for (int n = 0; n < N; n++)
                        cr_assert(fabsf(c1[i * ldc + n] - c2[i * ldc + n]) <= bound[i * N + n],
                                  "M%d N%d K2 %d trans %d acc %d (%d, %d): %g vs %g", M, N, K2,
                                  trans, acc, i, n, c1[i * ldc + n], c2[i * ldc + n]);
                for (int i = 0; i < M; i++) /* the padding of C's rows is left alone */
                    cr_assert(c1[i * ldc + N] == c2[i * ldc + N], "padding of row %d", i);
                free(A), free(B), free(f), free(c1), free(c2), free(bound), free(h);
            }
}
