/* GPT layers (layernorm, gelu, embedding, cross-entropy, feedforward,
 * residual dropout): float forward against the double references in
 * tests/support/gpt_ref.c, and float backward against central finite
 * differences of those references (in double, h = 1e-6). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attn/cross_entropy.h"
#include "attn/embedding.h"
#include "attn/feedforward.h"
#include "attn/gelu.h"
#include "attn/layernorm.h"
#include "attn/residual.h"
#include "support/gpt_ref.h"

#define FD_H 1e-6

static void expect_close(double got, double want, double rtol, double atol, const char *what,
                         size_t i) {
    cr_assert(fabs(got - want) <= atol + rtol * fabs(want), "%s[%zu]: got %.9g, reference %.9g",
              what, i, got, want);
}

/* ---- layernorm */

typedef struct {
    size_t N, C;
    double *x, *scale, *shift, *dy;
} ln_case;

static double ln_loss(const ln_case *c) {
    double *y = malloc(c->N * c->C * sizeof(double));
    gref_layernorm(c->x, c->scale, c->shift, y, c->N, c->C);
    double L = 0;
    for (size_t i = 0; i < c->N * c->C; i++)
        L += y[i] * c->dy[i];
    free(y);
    return L;
}

static double fd(double *v, double (*f)(const void *), const void *ctx) {
    const double keep = *v;
    *v = keep + FD_H;
    const double lp = f(ctx);
    *v = keep - FD_H;
    const double lm = f(ctx);
    *v = keep;
    return (lp - lm) / (2 * FD_H);
}

static double ln_loss_v(const void *c) {
    return ln_loss(c);
}

static double *to_d(const float *x, size_t n) {
    double *d = malloc(n * sizeof(double));
    for (size_t i = 0; i < n; i++)
        d[i] = x[i];
    return d;
}

Test(gpt_layers, layernorm_forward_and_fd_gradients) {
    const size_t N = 3, C = 7;
    attn_layernorm ln;
    cr_assert_eq(attn_layernorm_init(&ln, (int)C, NULL), ATTN_OK);
    for (size_t c = 0; c < C; c++)
        cr_assert(ln.scale[c] == 1.0f && ln.shift[c] == 0.0f, "LayerNorm init is ones/zeros");
    float x[21], dy[21], y[21], dx[21] = {0}, mean[3], rstd[3];
    gref_fill(x, N * C, 1, 2.0f);
    x[3] += 5.0f; /* a row with a large offset */
    gref_fill(dy, N * C, 2, 1.0f);
    gref_fill(ln.scale, C, 3, 1.5f);
    gref_fill(ln.shift, C, 4, 0.5f);
    attn_layernorm_forward(&ln, x, y, mean, rstd, N);
    ln_case c = {N, C, to_d(x, N * C), to_d(ln.scale, C), to_d(ln.shift, C), to_d(dy, N * C)};
    double yref[21];
    gref_layernorm(c.x, c.scale, c.shift, yref, N, C);
    for (size_t i = 0; i < N * C; i++)
        expect_close(y[i], yref[i], 1e-5, 1e-6, "layernorm y", i);
    attn_layernorm_backward(&ln, x, mean, rstd, dy, dx, N);
    for (size_t i = 0; i < N * C; i++)
        expect_close(dx[i], fd(&c.x[i], ln_loss_v, &c), 1e-4, 1e-5, "layernorm dx", i);
    for (size_t i = 0; i < C; i++) {
        expect_close(ln.grad_scale[i], fd(&c.scale[i], ln_loss_v, &c), 1e-4, 1e-5,
                     "layernorm dscale", i);
        expect_close(ln.grad_shift[i], fd(&c.shift[i], ln_loss_v, &c), 1e-4, 1e-5,
                     "layernorm dshift", i);
    }
    /* Backward accumulates: a second call doubles the gradients. */
    const float g0 = ln.grad_scale[0], d0 = dx[0];
    attn_layernorm_backward(&ln, x, mean, rstd, dy, dx, N);
    cr_assert_float_eq(ln.grad_scale[0], 2 * g0, 1e-6);
    cr_assert_float_eq(dx[0], 2 * d0, 1e-6);
    free(c.x), free(c.scale), free(c.shift), free(c.dy);
    attn_layernorm_free(&ln);
}

Test(gpt_layers, layernorm_rejects_bad_dim) {
    attn_layernorm ln;
    attn_error err;
    cr_assert_eq(attn_layernorm_init(&ln, 0, &err), ATTN_ERR_INVALID_ARG);
    cr_assert(strstr(err.msg, "emb_dim") != NULL, "message: %s", err.msg);
}

/* ---- gelu */

Test(gpt_layers, gelu_forward_and_fd_gradient) {
    const float x[] = {-6.0f, -3.0f, -1.0f, -0.3f, 0.0f, 0.2f, 0.7f, 1.5f, 3.0f, 8.0f};
    const size_t n = sizeof x / sizeof x[0];
    float y[10], dy[10], dx[10] = {0};
    gref_fill(dy, n, 9, 1.0f);
    attn_gelu_forward(x, y, n);
    attn_gelu_backward(x, dy, dx, n);
    for (size_t i = 0; i < n; i++) {
        expect_close(y[i], gref_gelu(x[i]), 1e-6, 1e-7, "gelu y", i);
        const double g = (gref_gelu(x[i] + FD_H) - gref_gelu(x[i] - FD_H)) / (2 * FD_H);
        expect_close(dx[i], g * dy[i], 1e-5, 1e-6, "gelu dx", i);
    }
    /* In-place form gives the same. */
    float d[10];
    memcpy(d, dy, sizeof d);
    attn_gelu_backward_inplace(x, d, n);
    for (size_t i = 0; i < n; i++)
        cr_assert_float_eq(d[i], dx[i], 0.0);
    /* The book's GELU printed values: GELU(1) = 0.8412, GELU(-1) = -0.1588. */
    cr_assert_float_eq(y[2], -0.15880801f, 1e-6);
}

/* ---- embedding */

Test(gpt_layers, embedding_lookup_and_scatter_add) {
    attn_embedding e;
    attn_error err;
    cr_assert_eq(attn_embedding_init(&e, 5, 3, NULL, &err), ATTN_OK);
    gref_fill(e.weight, 15, 11, 1.0f);
    const int32_t ids[4] = {1, 3, 1, 0};
    float out[12], dout[12];
    attn_embedding_forward(&e, ids, out, 4);
    for (int i = 0; i < 4; i++)
        for (int d = 0; d < 3; d++)
            cr_assert(out[i * 3 + d] == e.weight[ids[i] * 3 + d]);
    gref_fill(dout, 12, 12, 1.0f);
    attn_embedding_backward(&e, ids, dout, 4);
    for (int d = 0; d < 3; d++) {
        cr_assert_float_eq(e.grad_weight[1 * 3 + d], dout[0 * 3 + d] + dout[2 * 3 + d], 1e-7);
        cr_assert_float_eq(e.grad_weight[3 * 3 + d], dout[1 * 3 + d], 0.0);
        cr_assert_float_eq(e.grad_weight[2 * 3 + d], 0.0f, 0.0);
    }
    const int32_t bad[2] = {2, 5};
    cr_assert_eq(attn_embedding_check_ids(&e, bad, 2, &err), ATTN_ERR_INVALID_ARG);
    cr_assert(strstr(err.msg, "index 1") != NULL, "message: %s", err.msg);
    attn_embedding_free(&e);
}

Test(gpt_layers, embedding_init_is_torch_normal) {
    /* nn.Embedding(5, 3) after torch.manual_seed(0) draws normal_(0, 1): the
     * same numbers as attn_rng_normal on a fresh generator. */
    attn_rng a, b;
    attn_rng_seed(&a, 0);
    attn_rng_seed(&b, 0);
    attn_embedding e;
    cr_assert_eq(attn_embedding_init(&e, 5, 4, &a, NULL), ATTN_OK);
    float want[20];
    attn_rng_normal(&b, want, 20, 0.0f, 1.0f);
    for (int i = 0; i < 20; i++)
        cr_assert(e.weight[i] == want[i]);
    attn_embedding_free(&e);
}

/* ---- cross-entropy */

typedef struct {
    size_t N, V;
    double *logits;
    const int32_t *t;
} ce_case;

static double ce_loss_v(const void *p) {
    const ce_case *c = p;
    return gref_cross_entropy(c->logits, c->t, c->N, c->V);
}

Test(gpt_layers, cross_entropy_forward_and_fd_gradient) {
    const size_t N = 4, V = 6;
    float logits[24], lse[4], dl[24] = {0};
    gref_fill(logits, N * V, 21, 3.0f);
    logits[5] = 40.0f; /* large logit: the stable form must not overflow */
    const int32_t t[4] = {0, 5, 2, 2};
    const float loss = attn_cross_entropy_forward(logits, t, lse, N, V);
    ce_case c = {N, V, to_d(logits, N * V), t};
    expect_close(loss, gref_cross_entropy(c.logits, t, N, V), 1e-6, 1e-7, "loss", 0);
    attn_cross_entropy_backward(logits, t, lse, 0.5f, dl, N, V);
    for (size_t i = 0; i < N * V; i++)
        expect_close(dl[i], 0.5 * fd(&c.logits[i], ce_loss_v, &c), 1e-4, 1e-6, "dlogits", i);
    free(c.logits);
}

/* ---- feedforward */

typedef struct {
    size_t N, C;
    double *x, *w1, *b1, *w2, *b2, *dy;
} ff_case;

static double ff_loss_v(const void *p) {
    const ff_case *c = p;
    const size_t N = c->N, C = c->C;
    double *h = malloc(N * 4 * C * sizeof(double)), *y = malloc(N * C * sizeof(double));
    gref_linear(c->x, c->w1, c->b1, h, N, C, 4 * C);
    for (size_t i = 0; i < N * 4 * C; i++)
        h[i] = gref_gelu(h[i]);
    gref_linear(h, c->w2, c->b2, y, N, 4 * C, C);
    double L = 0;
    for (size_t i = 0; i < N * C; i++)
        L += y[i] * c->dy[i];
    free(h), free(y);
    return L;
}

Test(gpt_layers, feedforward_forward_and_fd_gradients) {
    const size_t N = 3, C = 4, Hd = 16;
    attn_rng rng;
    attn_rng_seed(&rng, 5);
    attn_feedforward ff;
    attn_error err;
    cr_assert_eq(attn_feedforward_init(&ff, (int)C, &rng, &err), ATTN_OK, "%s", err.msg);
    attn_param_list L;
    attn_param_list_init(&L);
    cr_assert_eq(attn_feedforward_params(&ff, "ff.", &L, &err), ATTN_OK);
    cr_assert_eq(L.count, 4);
    cr_assert_str_eq(L.items[0].name, "ff.layers.0.weight");
    cr_assert_eq(L.items[0].shape[0], (int64_t)Hd);
    cr_assert_str_eq(L.items[3].name, "ff.layers.2.bias");
    attn_feedforward_cache cache;
    cr_assert_eq(attn_feedforward_cache_init(&cache, &ff, N, &err), ATTN_OK);
    float x[12], y[12], dy[12], dx[12] = {0}, dh[48];
    gref_fill(x, N * C, 31, 1.5f);
    gref_fill(dy, N * C, 32, 1.0f);
    attn_feedforward_forward(&ff, x, y, N, &cache);
    ff_case c = {N,
                 C,
                 to_d(x, N * C),
                 to_d(ff.fc1.weight, Hd * C),
                 to_d(ff.fc1.bias, Hd),
                 to_d(ff.fc2.weight, C * Hd),
                 to_d(ff.fc2.bias, C),
                 to_d(dy, N * C)};
    double yref[12], h[48];
    gref_linear(c.x, c.w1, c.b1, h, N, C, Hd);
    for (size_t i = 0; i < N * Hd; i++)
        h[i] = gref_gelu(h[i]);
    gref_linear(h, c.w2, c.b2, yref, N, Hd, C);
    for (size_t i = 0; i < N * C; i++)
        expect_close(y[i], yref[i], 1e-5, 1e-6, "ff y", i);
    attn_feedforward_backward(&ff, x, dy, dx, N, &cache, dh);
    for (size_t i = 0; i < N * C; i++)
        expect_close(dx[i], fd(&c.x[i], ff_loss_v, &c), 1e-4, 1e-5, "ff dx", i);
    for (size_t i = 0; i < Hd * C; i++) {
        expect_close(ff.fc1.grad_weight[i], fd(&c.w1[i], ff_loss_v, &c), 1e-4, 1e-5, "ff dW1", i);
        expect_close(ff.fc2.grad_weight[i], fd(&c.w2[i], ff_loss_v, &c), 1e-4, 1e-5, "ff dW2", i);
    }
    for (size_t i = 0; i < Hd; i++)
        expect_close(ff.fc1.grad_bias[i], fd(&c.b1[i], ff_loss_v, &c), 1e-4, 1e-5, "ff db1", i);
    for (size_t i = 0; i < C; i++)
        expect_close(ff.fc2.grad_bias[i], fd(&c.b2[i], ff_loss_v, &c), 1e-4, 1e-5, "ff db2", i);
    free(c.x), free(c.w1), free(c.b1), free(c.w2), free(c.b2), free(c.dy);
    attn_param_list_free(&L);
    attn_feedforward_cache_free(&cache);
    attn_feedforward_free(&ff);
}

/* ---- residual + dropout */

Test(gpt_layers, residual_dropout_draws_only_in_training) {
    const size_t n = 64;
    float f[64], s[64], out[64], df[64];
    uint8_t keep[64];
    gref_fill(f, n, 41, 1.0f);
    gref_fill(s, n, 42, 1.0f);
    attn_rng rng, snap;
    attn_rng_seed(&rng, 123);
    snap = rng;
    attn_forward_mode eval = {0, &rng, ATTN_STREAM_TORCH_CPU};
    cr_assert_eq(attn_residual_dropout_forward(f, s, out, keep, 0.5, &eval, n), 0);
    cr_assert(memcmp(&rng, &snap, sizeof rng) == 0, "eval mode must not consume the generator");
    for (size_t i = 0; i < n; i++)
        cr_assert(out[i] == f[i] + s[i]);
    attn_forward_mode train = {1, &rng, ATTN_STREAM_TORCH_CPU};
    cr_assert_eq(attn_residual_dropout_forward(f, s, out, keep, 0.0, &train, n), 0,
                 "p = 0 draws nothing, as PyTorch");
    cr_assert(memcmp(&rng, &snap, sizeof rng) == 0);
    cr_assert_eq(attn_residual_dropout_forward(f, s, out, keep, 0.5, &train, n), 1);
    uint8_t want[64];
    attn_dropout_mask(&snap, ATTN_STREAM_TORCH_CPU, 0.5, want, n);
    int kept = 0;
    for (size_t i = 0; i < n; i++) {
        cr_assert_eq(keep[i], want[i]);
        cr_assert_float_eq(out[i], (keep[i] ? 2.0f * f[i] : 0.0f) + s[i], 1e-6);
        kept += keep[i];
    }
    cr_assert(kept > 0 && kept < (int)n);
    memset(df, 0, sizeof df);
    attn_residual_dropout_backward(s, keep, 0.5, 1, df, n);
    for (size_t i = 0; i < n; i++)
        cr_assert_float_eq(df[i], keep[i] ? 2.0f * s[i] : 0.0f, 1e-6);
}

Test(gpt_layers, fast_tanh_accuracy) {
    /* GELU's vectorisable tanh against libm's double tanh over [-12, 12]:
     * within 3e-7 relative (about 5 float ulps); NaN propagates. */
    double worst = 0.0;
    for (float u = -12.0f; u <= 12.0f; u += 3.1e-4f) {
        const double want = tanh((double)u);
        if (want == 0.0) continue;
        worst = fmax(worst, fabs(attn_tanhf(u) - want) / fabs(want));
    }
    for (float u = -1e-3f; u <= 1e-3f; u += 1.3e-7f) {
        const double want = tanh((double)u);
        if (want != 0.0) worst = fmax(worst, fabs(attn_tanhf(u) - want) / fabs(want));
    }
    cr_assert(worst <= 3e-7, "worst relative error %g", worst);
    cr_assert(attn_tanhf(100.0f) == 1.0f && attn_tanhf(-100.0f) == -1.0f);
    cr_assert(isnan(attn_tanhf(NAN)));
    float x[3] = {NAN, INFINITY, -INFINITY}, y[3];
    attn_gelu_forward(x, y, 3);
    cr_assert(isnan(y[0]));
    cr_assert(y[1] == INFINITY);
}
