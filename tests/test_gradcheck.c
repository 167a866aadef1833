/* Finite-difference gradient checks in double precision for every module.
 *
 * The C float forward/backward (through attn_module_*) is compared with an
 * independent double-precision reference forward (tests/support/ref_attention.c)
 * evaluated at the same float weights: the forward within 1e-5 x max(1, |ref|),
 * and every gradient (dX and each parameter) against central differences of
 * L = sum(y * dy) on the reference, within 1e-4 of the largest |gradient| of
 * that tensor (see grad_error for gradients that are exactly zero). With
 * dropout in training mode the reference takes the keep masks the C forward
 * drew (from the module's caches). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn/attn.h"
#include "support/ref_attention.h"

/* ATTN_GRADCHECK_REPORT=1 prints the worst errors seen (for the record). */
static double worst_fwd, worst_grad;
static void note(double fwd, double grad) {
    worst_fwd = fmax(worst_fwd, fwd);
    worst_grad = fmax(worst_grad, grad);
    if (getenv("ATTN_GRADCHECK_REPORT"))
        fprintf(stderr, "gradcheck worst so far: forward %.3g (abs/max(1,|ref|)), grad %.3g\n",
                worst_fwd, worst_grad);
}

#define FD_EPS 1e-6
#define GRAD_TOL 1e-4
#define FWD_TOL 1e-5

typedef struct gc_case {
    attn_module_config cfg;
    int B, T;
    int training;
    attn_dropout_stream stream;
} gc_case;

static double ref_loss(const gc_case *c, const double *const *params, const uint8_t *const *keep,
                       double dscale, const double *x, const float *dy, double *y, size_t ny) {
    ref_module_forward(&c->cfg, params, keep, dscale, x, c->B, c->T, y);
    double L = 0.0;
    for (size_t i = 0; i < ny; i++)
        L += y[i] * (double)dy[i];
    return L;
}

/* Max-abs-normalised error of a float gradient against a double one. The
 * scale is this tensor's largest |gradient|, but at least 1e-2 of the
 * module's (gmax): some gradients are zero in exact arithmetic (W_key.bias
 * adds q_i . b to a whole score row, which softmax ignores; W_query/W_key
 * when T = 1), and their float value is rounding noise of the size of the
 * other gradients' rounding. */
static double grad_error(const float *got, const double *want, size_t n, double gmax) {
    double maxref = 0.0, maxdiff = 0.0;
    for (size_t i = 0; i < n; i++) {
        maxref = fmax(maxref, fabs(want[i]));
        maxdiff = fmax(maxdiff, fabs((double)got[i] - want[i]));
    }
    return maxdiff / fmax(fmax(maxref, 1e-2 * gmax), 1e-12);
}

/* Central differences of L w.r.t. every element of v (perturbed in place). */
static void fd_grad(const gc_case *c, const double *const *params, const uint8_t *const *keep,
                    double dscale, const double *x, const float *dy, double *y, size_t ny,
                    double *v, size_t n, double *out) {
    for (size_t i = 0; i < n; i++) {
        const double save = v[i];
        v[i] = save + FD_EPS;
        const double lp = ref_loss(c, params, keep, dscale, x, dy, y, ny);
        v[i] = save - FD_EPS;
        const double lm = ref_loss(c, params, keep, dscale, x, dy, y, ny);
        v[i] = save;
        out[i] = (lp - lm) / (2 * FD_EPS);
    }
}

static void run_case(const gc_case *c, uint64_t seed) {
    attn_rng rng;
    attn_rng_seed(&rng, seed);
    attn_module *m = NULL;
    attn_error err;
    cr_assert_eq(attn_module_create(&c->cfg, &rng, &m, &err), ATTN_OK, "%s", err.msg);
    const int B = c->B, T = c->T, d_in = c->cfg.d_in, od = attn_module_out_dim(m);
    const size_t nx = (size_t)B * T * d_in, ny = (size_t)B * T * od;
    float *x = malloc(nx * sizeof(float)), *dy = malloc(ny * sizeof(float));
    float *y = malloc(ny * sizeof(float)), *y2 = malloc(ny * sizeof(float));
    float *dx = calloc(nx, sizeof(float));
    attn_rng data;
    attn_rng_seed(&data, seed + 1000);
    attn_rng_uniform(&data, x, nx, -1.0f, 1.0f);
    attn_rng_uniform(&data, dy, ny, -1.0f, 1.0f);

    /* Reseeding before each forward repeats the dropout mask. */
    attn_rng drop;
    attn_forward_mode mode = {c->training, &drop, c->stream};
    attn_rng_seed(&drop, 77);
    cr_assert_eq(attn_module_forward(m, x, B, T, y2, &mode, &err), ATTN_OK, "%s", err.msg);
    attn_rng_seed(&drop, 77);
    cr_assert_eq(attn_module_forward(m, x, B, T, y, &mode, &err), ATTN_OK, "%s", err.msg);
    cr_expect(memcmp(y, y2, ny * sizeof(float)) == 0, "reseeded forward differs");

    const attn_param_list *pl = attn_module_params(m);
    attn_param_list_zero_grad(pl);
    cr_assert_eq(attn_module_backward(m, x, dy, dx, &err), ATTN_OK, "%s", err.msg);

    /* Keep masks as the C forward drew them. */
    const uint8_t *keeps[16] = {0};
    int with_dropout = 0;
    for (int i = 0; i < 16; i++) {
        const attn_attention_cache *ac = attn_module_attention_cache(m, i);
        if (!ac) break;
        keeps[i] = ac->keep;
        if (ac->dropout_applied) with_dropout = 1;
    }
    cr_expect_eq(with_dropout, c->training && c->cfg.dropout > 0.0);
    const double dscale = attn_dropout_scale(c->cfg.dropout);

    double **params = calloc((size_t)pl->count, sizeof *params);
    for (int p = 0; p < pl->count; p++) {
        params[p] = malloc(pl->items[p].numel * sizeof(double));
        for (size_t i = 0; i < pl->items[p].numel; i++)
            params[p][i] = pl->items[p].data[i];
    }
    double *xd = malloc(nx * sizeof(double)), *yd = malloc(ny * sizeof(double));
    for (size_t i = 0; i < nx; i++)
        xd[i] = x[i];
    const uint8_t *const *kp = with_dropout ? keeps : NULL;
    const double *const *cp = (const double *const *)params;

    /* forward vs reference */
    ref_module_forward(&c->cfg, cp, kp, dscale, xd, B, T, yd);
    double maxref = 0.0, maxdiff = 0.0;
    for (size_t i = 0; i < ny; i++) {
        maxref = fmax(maxref, fabs(yd[i]));
        maxdiff = fmax(maxdiff, fabs((double)y[i] - yd[i]));
    }
    note(maxdiff / fmax(1.0, maxref), 0.0);
    cr_expect(maxdiff <= FWD_TOL * fmax(1.0, maxref), "%s B%d T%d: forward off by %g",
              attn_module_kind_name(c->cfg.kind), B, T, maxdiff);

    /* Central differences for dX (slot 0) and every parameter (slot 1 + p). */
    const int nt = 1 + pl->count;
    double **fd = calloc((size_t)nt, sizeof *fd);
    double gmax = 0.0; /* the largest |gradient| anywhere in the module */
    for (int t = 0; t < nt; t++) {
        const size_t n = t == 0 ? nx : pl->items[t - 1].numel;
        fd[t] = malloc(n * sizeof(double));
        fd_grad(c, cp, kp, dscale, xd, dy, yd, ny, t == 0 ? xd : params[t - 1], n, fd[t]);
        for (size_t i = 0; i < n; i++)
            gmax = fmax(gmax, fabs(fd[t][i]));
    }
    for (int t = 0; t < nt; t++) {
        const size_t n = t == 0 ? nx : pl->items[t - 1].numel;
        const char *name = t == 0 ? "input (dX)" : pl->items[t - 1].name;
        const double e = grad_error(t == 0 ? dx : pl->items[t - 1].grad, fd[t], n, gmax);
        note(0.0, e);
        cr_expect(e <= GRAD_TOL, "%s (heads %d, bias %d, B%d T%d, train %d): %s error %g",
                  attn_module_kind_name(c->cfg.kind), c->cfg.num_heads, c->cfg.qkv_bias, B, T,
                  c->training, name, e);
        free(fd[t]);
    }
    free(fd);

    for (int p = 0; p < pl->count; p++)
        free(params[p]);
    free(params);
    free(xd);
    free(yd);
    free(x);
    free(dy);
    free(y);
    free(y2);
    free(dx);
    attn_module_free(m);
}

#define V1 ATTN_MODULE_SELF_ATTENTION_V1
#define V2 ATTN_MODULE_SELF_ATTENTION_V2
#define CA ATTN_MODULE_CAUSAL_ATTENTION
#define WR ATTN_MODULE_MHA_WRAPPER
#define MHA ATTN_MODULE_MHA
#define CPU ATTN_STREAM_TORCH_CPU
#define MKL ATTN_STREAM_TORCH_MKL

/* config fields: kind, d_in, d_out, num_heads, context_length, dropout, qkv_bias */
Test(gradcheck, self_attention_v1) {
    const gc_case cases[] = {{{V1, 3, 4, 0, 0, 0.0, 0}, 1, 5, 0, CPU},
                             {{V1, 3, 2, 0, 0, 0.0, 0}, 1, 1, 0, CPU},
                             {{V1, 4, 3, 0, 0, 0.0, 0}, 1, 6, 1, CPU}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        run_case(&cases[i], 10 + i);
}

Test(gradcheck, self_attention_v2) {
    const gc_case cases[] = {{{V2, 3, 4, 0, 0, 0.0, 0}, 1, 5, 0, CPU},
                             {{V2, 3, 4, 0, 0, 0.0, 1}, 1, 5, 0, CPU},
                             {{V2, 5, 2, 0, 0, 0.0, 1}, 1, 1, 0, CPU}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        run_case(&cases[i], 20 + i);
}

Test(gradcheck, causal_attention) {
    const gc_case cases[] = {
        {{CA, 3, 4, 0, 6, 0.0, 0}, 2, 6, 0, CPU},  /* T == context_length */
        {{CA, 3, 4, 0, 6, 0.0, 1}, 2, 4, 0, CPU},  /* T < context_length, bias */
        {{CA, 4, 3, 0, 5, 0.0, 1}, 1, 1, 0, CPU},  /* T = 1 */
        {{CA, 3, 4, 0, 6, 0.3, 0}, 2, 5, 1, CPU},  /* dropout, training, torch-cpu stream */
        {{CA, 3, 4, 0, 6, 0.5, 1}, 2, 5, 1, MKL},  /* dropout, training, torch-mkl stream */
        {{CA, 3, 4, 0, 6, 0.5, 1}, 2, 5, 0, CPU}}; /* dropout configured, eval: none */
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        run_case(&cases[i], 30 + i);
}

Test(gradcheck, mha_wrapper) {
    const gc_case cases[] = {
        {{WR, 3, 2, 1, 6, 0.0, 0}, 2, 6, 0, CPU},  {{WR, 3, 2, 2, 6, 0.0, 1}, 2, 4, 0, CPU},
        {{WR, 3, 3, 4, 6, 0.0, 0}, 1, 5, 0, CPU},  {{WR, 4, 2, 2, 4, 0.0, 1}, 2, 1, 0, CPU},
        {{WR, 3, 2, 2, 6, 0.25, 1}, 2, 5, 1, CPU}, {{WR, 3, 2, 4, 6, 0.4, 0}, 1, 6, 1, MKL}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        run_case(&cases[i], 40 + i);
}

Test(gradcheck, multi_head_attention) {
    const gc_case cases[] = {
        {{MHA, 3, 4, 1, 6, 0.0, 0}, 2, 6, 0, CPU}, {{MHA, 3, 4, 2, 6, 0.0, 1}, 2, 4, 0, CPU},
        {{MHA, 4, 8, 4, 6, 0.0, 0}, 2, 5, 0, CPU}, {{MHA, 4, 8, 4, 6, 0.0, 1}, 1, 1, 0, CPU},
        {{MHA, 3, 4, 2, 6, 0.3, 1}, 2, 5, 1, CPU}, {{MHA, 3, 8, 4, 6, 0.5, 0}, 2, 6, 1, MKL}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        run_case(&cases[i], 50 + i);
}

/* Seed 004's modules through the same handle (no-dropout cases: their masks
 * live in their own caches; dropout is covered against PyTorch in
 * tests/test_seed004_attention.c). d_out = head_size for attention-head. */
Test(gradcheck, seed004_modules) {
    const gc_case cases[] = {{{ATTN_MODULE_ATTENTION_HEAD, 4, 3, 0, 6, 0.0, 0}, 2, 5, 0, CPU},
                             {{ATTN_MODULE_ATTENTION_HEAD, 4, 2, 0, 6, 0.0, 1}, 1, 6, 0, CPU},
                             {{ATTN_MODULE_SEED004_MHA, 6, 6, 3, 6, 0.0, 0}, 2, 4, 0, CPU},
                             {{ATTN_MODULE_SEED004_MHA, 4, 4, 2, 6, 0.2, 1}, 2, 5, 0, CPU}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        run_case(&cases[i], 60 + i);
}
