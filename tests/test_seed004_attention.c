/* Seed 004's AttentionHead and MultiHeadAttention: forward against a double
 * reference (tests/support/gpt_ref.c) and float backward against central
 * finite differences of it; parameter names; dropout order; PyTorch values
 * from tests/fixtures/seed004_ref.h (written by scripts/gen_seed004_fixtures.py
 * with torch 1.13.1, seed 004's classes copied verbatim). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn/module.h"
#include "attn/seed004_attention.h"
#include "fixtures/seed004_ref.h"
#include "support/gpt_ref.h"

typedef struct {
    const attn_param_list *L;
    double **pd;
    const double *x, *dy;
    size_t B, T, E, hs, H;
    int mha;
} s4_case;

static const double *find(const s4_case *c, const char *name) {
    for (int i = 0; i < c->L->count; i++)
        if (strcmp(c->L->items[i].name, name) == 0) return c->pd[i];
    return NULL;
}

/* One head with parameters under prefix: out (B, T, hs). */
static void ref_head(const s4_case *c, const char *prefix, double *out) {
    const size_t N = c->B * c->T;
    char n[128];
    double *q = malloc(N * c->hs * sizeof(double)), *k = malloc(N * c->hs * sizeof(double));
    double *v = malloc(N * c->hs * sizeof(double));
    const char *names[3] = {"Q_weights", "K_weights", "V_weights"};
    double *dst[3] = {q, k, v};
    for (int i = 0; i < 3; i++) {
        snprintf(n, sizeof n, "%s%s.weight", prefix, names[i]);
        const double *w = find(c, n);
        snprintf(n, sizeof n, "%s%s.bias", prefix, names[i]);
        gref_linear(c->x, w, find(c, n), dst[i], N, c->E, c->hs);
    }
    gref_causal_attention(q, k, v, out, c->B, c->T, 1, c->hs);
    free(q), free(k), free(v);
}

static double ref_loss(const s4_case *c) {
    const size_t N = c->B * c->T;
    double L = 0;
    if (!c->mha) {
        double *o = malloc(N * c->hs * sizeof(double));
        ref_head(c, "", o);
        for (size_t i = 0; i < N * c->hs; i++)
            L += o[i] * c->dy[i];
        free(o);
        return L;
    }
    double *cat = malloc(N * c->E * sizeof(double)), *o = malloc(N * c->hs * sizeof(double));
    double *y = malloc(N * c->E * sizeof(double));
    for (size_t h = 0; h < c->H; h++) {
        char p[64];
        snprintf(p, sizeof p, "heads.%zu.", h);
        ref_head(c, p, o);
        for (size_t n = 0; n < N; n++)
            for (size_t d = 0; d < c->hs; d++)
                cat[n * c->E + h * c->hs + d] = o[n * c->hs + d];
    }
    gref_linear(cat, find(c, "linear.weight"), find(c, "linear.bias"), y, N, c->E, c->E);
    for (size_t i = 0; i < N * c->E; i++)
        L += y[i] * c->dy[i];
    free(cat), free(o), free(y);
    return L;
}

static double *to_d(const float *x, size_t n) {
    double *d = malloc(n * sizeof(double));
    for (size_t i = 0; i < n; i++)
        d[i] = x[i];
    return d;
}

static void fd_params(s4_case *c, const float *dx, double *xd) {
    const double h = 1e-6;
    for (int p = 0; p < c->L->count; p++)
        for (size_t j = 0; j < c->L->items[p].numel; j++) {
            const double keep = c->pd[p][j];
            c->pd[p][j] = keep + h;
            const double lp = ref_loss(c);
            c->pd[p][j] = keep - h;
            const double lm = ref_loss(c);
            c->pd[p][j] = keep;
            const double g = (lp - lm) / (2 * h), got = c->L->items[p].grad[j];
            cr_assert(fabs(got - g) <= 2e-6 + 1e-4 * fabs(g), "d/d %s[%zu]: %.9g, FD %.9g",
                      c->L->items[p].name, j, got, g);
        }
    for (size_t i = 0; i < c->B * c->T * c->E; i++) {
        const double keep = xd[i];
        xd[i] = keep + h;
        const double lp = ref_loss(c);
        xd[i] = keep - h;
        const double lm = ref_loss(c);
        xd[i] = keep;
        const double g = (lp - lm) / (2 * h);
        cr_assert(fabs(dx[i] - g) <= 2e-6 + 1e-4 * fabs(g), "dx[%zu]: %.9g, FD %.9g", i, dx[i], g);
    }
}

static void head_case(int use_bias) {
    const int B = 2, T = 5, E = 6, hs = 4;
    attn_rng rng;
    attn_rng_seed(&rng, 17);
    attn_seed004_head h;
    attn_error err;
    cr_assert_eq(attn_seed004_head_init(&h, E, hs, 8, 0.0, use_bias, &rng, &err), ATTN_OK);
    attn_param_list L;
    attn_param_list_init(&L);
    cr_assert_eq(attn_seed004_head_params(&h, "", &L, &err), ATTN_OK);
    cr_assert_eq(L.count, use_bias ? 6 : 3);
    cr_assert_str_eq(L.items[0].name, "Q_weights.weight");
    cr_assert_str_eq(L.items[L.count - 1].name, use_bias ? "V_weights.bias" : "V_weights.weight");
    attn_seed004_head_cache cache;
    cr_assert_eq(attn_seed004_head_cache_init(&cache, &h, B, T, &err), ATTN_OK);
    float x[60], out[40], dy[40], dx[60] = {0};
    gref_fill(x, 60, 3, 1.0f);
    gref_fill(dy, 40, 4, 1.0f);
    cr_assert_eq(attn_seed004_head_forward(&h, x, B, T, out, NULL, &cache, &err), ATTN_OK);
    s4_case c = {&L, gref_params_copy(&L), to_d(x, 60), to_d(dy, 40), B, T, E, hs, 1, 0};
    double ref[40];
    ref_head(&c, "", ref);
    for (int i = 0; i < 40; i++)
        cr_assert(fabs(out[i] - ref[i]) <= 1e-5 + 1e-5 * fabs(ref[i]), "out[%d] %.9g vs %.9g", i,
                  out[i], ref[i]);
    cr_assert_eq(attn_seed004_head_backward(&h, x, B, T, dy, dx, &cache, &err), ATTN_OK);
    fd_params(&c, dx, (double *)c.x);
    gref_params_free(c.pd, &L);
    free((double *)c.x), free((double *)c.dy);
    attn_param_list_free(&L);
    attn_seed004_head_cache_free(&cache);
    attn_seed004_head_free(&h);
}

Test(seed004_attention, head_fd_gradients) {
    head_case(0);
}

Test(seed004_attention, head_fd_gradients_with_bias) {
    head_case(1);
}

Test(seed004_attention, mha_fd_gradients_and_names) {
    const int B = 2, T = 4, E = 6, H = 3;
    attn_rng rng;
    attn_rng_seed(&rng, 23);
    attn_seed004_mha m;
    attn_error err;
    cr_assert_eq(attn_seed004_mha_init(&m, E, H, 6, 0.0, 0, &rng, &err), ATTN_OK, "%s", err.msg);
    cr_assert_eq(m.head_size, 2);
    attn_param_list L;
    attn_param_list_init(&L);
    cr_assert_eq(attn_seed004_mha_params(&m, "", &L, &err), ATTN_OK);
    cr_assert_eq(L.count, 3 * 3 + 2);
    cr_assert_str_eq(L.items[0].name, "heads.0.Q_weights.weight");
    cr_assert_str_eq(L.items[5].name, "heads.1.V_weights.weight");
    cr_assert_str_eq(L.items[9].name, "linear.weight");
    cr_assert_str_eq(L.items[10].name, "linear.bias");
    attn_seed004_mha_cache cache;
    cr_assert_eq(attn_seed004_mha_cache_init(&cache, &m, B, T, &err), ATTN_OK);
    float x[48], out[48], dy[48], dx[48] = {0};
    gref_fill(x, 48, 5, 1.0f);
    gref_fill(dy, 48, 6, 1.0f);
    cr_assert_eq(attn_seed004_mha_forward(&m, x, B, T, out, NULL, &cache, &err), ATTN_OK);
    cr_assert_eq(attn_seed004_mha_backward(&m, x, B, T, dy, dx, &cache, &err), ATTN_OK);
    s4_case c = {&L, gref_params_copy(&L), to_d(x, 48), to_d(dy, 48), B, T, E, 2, H, 1};
    fd_params(&c, dx, (double *)c.x);
    gref_params_free(c.pd, &L);
    free((double *)c.x), free((double *)c.dy);
    attn_param_list_free(&L);
    attn_seed004_mha_cache_free(&cache);
    attn_seed004_mha_free(&m);
}

Test(seed004_attention, bad_configs) {
    attn_seed004_mha m;
    attn_error err;
    cr_assert_eq(attn_seed004_mha_init(&m, 770, 12, 8, 0.1, 0, NULL, &err), ATTN_ERR_INVALID_ARG);
    cr_assert(strstr(err.msg, "770") && strstr(err.msg, "heads_num 12"), "%s", err.msg);
    cr_assert_eq(attn_seed004_mha_init(&m, 8, 2, 8, 1.5, 0, NULL, &err), ATTN_ERR_INVALID_ARG);
    cr_assert(strstr(err.msg, "dropout_rate"), "%s", err.msg);
    attn_seed004_head h;
    cr_assert_eq(attn_seed004_head_init(&h, 8, 4, 4, 0.0, 0, NULL, &err), ATTN_OK);
    attn_seed004_head_cache c;
    cr_assert_eq(attn_seed004_head_cache_init(&c, &h, 1, 5, &err), ATTN_OK);
    float x[40], y[20];
    memset(x, 0, sizeof x);
    cr_assert_eq(attn_seed004_head_forward(&h, x, 1, 5, y, NULL, &c, &err), ATTN_ERR_SHAPE);
    cr_assert(strstr(err.msg, "context_size 4"), "%s", err.msg);
    attn_seed004_head_cache_free(&c);
    attn_seed004_head_free(&h);
}

/* torch.manual_seed(S); MultiHeadAttention(config) with seed 004's classes;
 * x = torch.rand(B, T, E); out = mha(x) (eval, and train on the torch-cpu
 * stream); (out * w).sum().backward() with w = torch.rand(B, T, E). */
static void torch_case(int training) {
    const int B = S4_B, T = S4_T, E = S4_E;
    attn_rng rng;
    attn_rng_seed(&rng, S4_SEED);
    attn_seed004_mha m;
    attn_error err;
    cr_assert_eq(attn_seed004_mha_init(&m, E, S4_H, S4_CTX, S4_P, S4_BIAS, &rng, &err), ATTN_OK);
    float x[S4_B * S4_T * S4_E], w[S4_B * S4_T * S4_E], out[S4_B * S4_T * S4_E];
    float dx[S4_B * S4_T * S4_E] = {0};
    attn_rng_rand(&rng, x, (size_t)B * T * E);
    attn_rng_rand(&rng, w, (size_t)B * T * E);
    attn_seed004_mha_cache cache;
    cr_assert_eq(attn_seed004_mha_cache_init(&cache, &m, B, T, &err), ATTN_OK);
    attn_forward_mode mode = {training, &rng, ATTN_STREAM_TORCH_CPU};
    cr_assert_eq(attn_seed004_mha_forward(&m, x, B, T, out, &mode, &cache, &err), ATTN_OK);
    const float *want = training ? s4_out_train : s4_out_eval;
    for (int i = 0; i < B * T * E; i++)
        cr_assert(fabsf(out[i] - want[i]) <= 1e-6f + 1e-5f * fabsf(want[i]),
                  "out[%d] %.9g, PyTorch %.9g", i, out[i], want[i]);
    cr_assert_eq(attn_seed004_mha_backward(&m, x, B, T, w, dx, &cache, &err), ATTN_OK);
    const float *want_dx = training ? s4_dx_train : s4_dx_eval;
    const float *want_dq = training ? s4_dq0_train : s4_dq0_eval;
    for (int i = 0; i < B * T * E; i++)
        cr_assert(fabsf(dx[i] - want_dx[i]) <= 1e-5f + 1e-4f * fabsf(want_dx[i]),
                  "dx[%d] %.9g, PyTorch %.9g", i, dx[i], want_dx[i]);
    for (int i = 0; i < m.head_size * E; i++)
        cr_assert(fabsf(m.heads[0].Q_weights.grad_weight[i] - want_dq[i]) <=
                      1e-5f + 1e-4f * fabsf(want_dq[i]),
                  "heads.0.Q_weights grad[%d] %.9g, PyTorch %.9g", i,
                  m.heads[0].Q_weights.grad_weight[i], want_dq[i]);
    attn_seed004_mha_cache_free(&cache);
    attn_seed004_mha_free(&m);
}

Test(seed004_attention, mha_matches_pytorch_eval) {
    torch_case(0);
}

Test(seed004_attention, mha_matches_pytorch_training_dropout) {
    torch_case(1);
}

Test(seed004_attention, module_handle_kinds) {
    attn_module_kind k;
    cr_assert_eq(attn_module_kind_parse("attention-head", &k), 0);
    cr_assert_eq(k, ATTN_MODULE_ATTENTION_HEAD);
    cr_assert_str_eq(attn_module_kind_name(k), "attention-head");
    cr_assert_eq(attn_module_kind_parse("seed004-mha", &k), 0);
    cr_assert_eq(k, ATTN_MODULE_SEED004_MHA);
    /* The handle gives the typed module's output for the same seed. */
    const attn_module_config cfg = {ATTN_MODULE_SEED004_MHA, S4_E, S4_E, S4_H, S4_CTX, 0.0, 1};
    attn_rng rng, rng2;
    attn_rng_seed(&rng, S4_SEED);
    attn_rng_seed(&rng2, S4_SEED);
    attn_module *m = NULL;
    attn_error err;
    cr_assert_eq(attn_module_create(&cfg, &rng, &m, &err), ATTN_OK, "%s", err.msg);
    cr_assert_eq(attn_module_out_dim(m), S4_E);
    const attn_param_list *L = attn_module_params(m);
    cr_assert_str_eq(L->items[0].name, "heads.0.Q_weights.weight");
    cr_assert_str_eq(L->items[1].name, "heads.0.Q_weights.bias");
    attn_seed004_mha typed;
    cr_assert_eq(attn_seed004_mha_init(&typed, S4_E, S4_H, S4_CTX, 0.0, 1, &rng2, &err), ATTN_OK);
    float x[S4_B * S4_T * S4_E], y1[S4_B * S4_T * S4_E], y2[S4_B * S4_T * S4_E];
    attn_rng_rand(&rng, x, sizeof x / sizeof x[0]);
    attn_seed004_mha_cache c;
    cr_assert_eq(attn_seed004_mha_cache_init(&c, &typed, S4_B, S4_T, &err), ATTN_OK);
    cr_assert_eq(attn_module_forward(m, x, S4_B, S4_T, y1, NULL, &err), ATTN_OK, "%s", err.msg);
    cr_assert_eq(attn_seed004_mha_forward(&typed, x, S4_B, S4_T, y2, NULL, &c, &err), ATTN_OK);
    cr_assert(memcmp(y1, y2, sizeof y1) == 0);
    for (size_t i = 0; i < sizeof y1 / sizeof y1[0]; i++)
        cr_assert(fabsf(y1[i] - s4_out_eval[i]) <= 1e-6f + 1e-5f * fabsf(s4_out_eval[i]));
    /* Config errors name the field. */
    attn_module *bad = NULL;
    attn_module_config bc = cfg;
    bc.d_out = 4;
    cr_assert_eq(attn_module_create(&bc, NULL, &bad, &err), ATTN_ERR_INVALID_ARG);
    cr_assert(strstr(err.msg, "d_out"), "%s", err.msg);
    bc = cfg;
    bc.num_heads = 3;
    cr_assert_eq(attn_module_create(&bc, NULL, &bad, &err), ATTN_ERR_INVALID_ARG);
    cr_assert(strstr(err.msg, "heads_num"), "%s", err.msg);
    attn_seed004_mha_cache_free(&c);
    attn_seed004_mha_free(&typed);
    attn_module_free(m);
}
