/* Chapter-3 modules against the printed tables of the seeds, plus weight
 * order/shape and bad-config checks. */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "attn/attn.h"

/* The chapter's "Your journey starts with one step" inputs (seed 000, In [1]). */
static const float INPUTS[6 * 3] = {0.43f, 0.15f, 0.89f, 0.55f, 0.87f, 0.66f, 0.57f, 0.85f, 0.64f,
                                    0.22f, 0.58f, 0.33f, 0.77f, 0.25f, 0.10f, 0.05f, 0.80f, 0.55f};

/* Printed tables have 4 decimals: within half a unit of the last digit. */
static void expect_table(const float *got, const float *want, size_t n, const char *what) {
    for (size_t i = 0; i < n; i++)
        cr_expect(fabsf(got[i] - want[i]) <= 5.001e-5f, "%s[%zu]: got %.6f, want %.4f", what, i,
                  (double)got[i], (double)want[i]);
}

/* batch = torch.stack((inputs, inputs), dim=0) */
static void make_batch(float *batch) {
    memcpy(batch, INPUTS, sizeof INPUTS);
    memcpy(batch + 18, INPUTS, sizeof INPUTS);
}

static attn_module *create(attn_module_config cfg, uint64_t seed) {
    attn_rng rng;
    attn_rng_seed(&rng, seed);
    attn_module *m = NULL;
    attn_error err;
    attn_status s = attn_module_create(&cfg, &rng, &m, &err);
    cr_assert_eq(s, ATTN_OK, "create %s: %s", attn_module_kind_name(cfg.kind), err.msg);
    return m;
}

static const attn_forward_mode EVAL = {0, NULL, ATTN_STREAM_TORCH_CPU};

Test(seeds, sa_v1_seed123) {
    /* seed 000 In [12]: W_query/W_key/W_value from torch.rand after manual_seed(123) */
    attn_rng rng;
    attn_rng_seed(&rng, 123);
    attn_sa_v1 v1;
    cr_assert_eq(attn_sa_v1_init(&v1, 3, 2, &rng, NULL), ATTN_OK);
    const float wq[6] = {0.2961f, 0.5166f, 0.2517f, 0.6886f, 0.0740f, 0.8665f};
    const float wk[6] = {0.1366f, 0.1025f, 0.1841f, 0.7264f, 0.3153f, 0.6871f};
    const float wv[6] = {0.0756f, 0.1966f, 0.3164f, 0.4017f, 0.1186f, 0.8274f};
    expect_table(v1.W_query, wq, 6, "W_query");
    expect_table(v1.W_key, wk, 6, "W_key");
    expect_table(v1.W_value, wv, 6, "W_value");
    /* seed 000 In [21]: sa_v1(inputs) */
    attn_sa_cache c;
    cr_assert_eq(attn_sa_cache_init(&c, 6, 2, NULL), ATTN_OK);
    float out[12];
    cr_assert_eq(attn_sa_v1_forward(&v1, INPUTS, 6, out, &c, NULL), ATTN_OK);
    const float want[12] = {0.2996f, 0.8053f, 0.3061f, 0.8210f, 0.3058f, 0.8203f,
                            0.2948f, 0.7939f, 0.2927f, 0.7891f, 0.2990f, 0.8040f};
    expect_table(out, want, 12, "sa_v1");
    attn_sa_cache_free(&c);
    attn_sa_v1_free(&v1);
}

Test(seeds, sa_v2_seed789_and_transfer) {
    /* seed 000 In [24] and In [25]: SelfAttention_v2 seed 789, then v1 with v2's weights^T */
    const float want[12] = {-0.0739f, 0.0713f, -0.0748f, 0.0703f, -0.0749f, 0.0702f,
                            -0.0760f, 0.0685f, -0.0763f, 0.0679f, -0.0754f, 0.0693f};
    attn_rng rng;
    attn_rng_seed(&rng, 789);
    attn_sa_v2 v2;
    cr_assert_eq(attn_sa_v2_init(&v2, 3, 2, 0, &rng, NULL), ATTN_OK);
    attn_sa_cache c;
    cr_assert_eq(attn_sa_cache_init(&c, 6, 2, NULL), ATTN_OK);
    float out[12];
    cr_assert_eq(attn_sa_v2_forward(&v2, INPUTS, 6, out, &c, NULL), ATTN_OK);
    expect_table(out, want, 12, "sa_v2");
    attn_sa_v1 v1;
    cr_assert_eq(attn_sa_v1_init(&v1, 3, 2, NULL, NULL), ATTN_OK);
    cr_assert_eq(attn_sa_v1_from_v2(&v1, &v2, NULL), ATTN_OK);
    float out1[12];
    cr_assert_eq(attn_sa_v1_forward(&v1, INPUTS, 6, out1, &c, NULL), ATTN_OK);
    for (int i = 0; i < 12; i++) /* same arithmetic up to summation order */
        cr_expect(fabsf(out1[i] - out[i]) < 1e-6f, "transfer [%d]: %g vs %g", i, (double)out1[i],
                  (double)out[i]);
    attn_sa_v1_free(&v1);
    attn_sa_cache_free(&c);
    attn_sa_v2_free(&v2);
}

Test(seeds, mha_wrapper_seed123) {
    /* seed 000 In [37] (and seed 001): MultiHeadAttentionWrapper(3, 2, 6, 0.0, num_heads=2) */
    const float row[6][4] = {
        {-0.4519f, 0.2216f, 0.4772f, 0.1063f},  {-0.5874f, 0.0058f, 0.5891f, 0.3257f},
        {-0.6300f, -0.0632f, 0.6202f, 0.3860f}, {-0.5675f, -0.0843f, 0.5478f, 0.3589f},
        {-0.5526f, -0.0981f, 0.5321f, 0.3428f}, {-0.5299f, -0.1081f, 0.5077f, 0.3493f}};
    attn_module_config cfg = {ATTN_MODULE_MHA_WRAPPER, 3, 2, 2, 6, 0.0, 0};
    attn_module *m = create(cfg, 123);
    cr_assert_eq(attn_module_out_dim(m), 4);
    float batch[36], out[48];
    make_batch(batch);
    attn_error err;
    cr_assert_eq(attn_module_forward(m, batch, 2, 6, out, &EVAL, &err), ATTN_OK, "%s", err.msg);
    for (int b = 0; b < 2; b++)
        expect_table(out + b * 24, &row[0][0], 24, "wrapper");
    attn_module_free(m);
}

Test(seeds, mha_seed123) {
    /* seed 000 In [39] (and seed 001): MultiHeadAttention(3, 2, 6, 0.0, num_heads=2) */
    const float want[12] = {0.3190f, 0.4858f, 0.2943f, 0.3897f, 0.2856f, 0.3593f,
                            0.2693f, 0.3873f, 0.2639f, 0.3928f, 0.2575f, 0.4028f};
    attn_module_config cfg = {ATTN_MODULE_MHA, 3, 2, 2, 6, 0.0, 0};
    attn_module *m = create(cfg, 123);
    float batch[36], out[24];
    make_batch(batch);
    cr_assert_eq(attn_module_forward(m, batch, 2, 6, out, &EVAL, NULL), ATTN_OK);
    expect_table(out, want, 12, "mha b0");
    expect_table(out + 12, want, 12, "mha b1");
    attn_module_free(m);
}

Test(seeds, mha_768_12_heads) {
    /* seed 000 In [40]: MultiHeadAttention(3, 768, 6, 0.0, num_heads=12), first and last
     * three columns of each row. */
    const float first[6][3] = {{0.0208f, -0.1094f, -0.1502f},  {-0.0732f, -0.1550f, -0.1058f},
                               {-0.1013f, -0.1662f, -0.0936f}, {-0.1035f, -0.1574f, -0.0720f},
                               {-0.0765f, -0.1191f, -0.0922f}, {-0.0913f, -0.1358f, -0.0698f}};
    const float last[6][3] = {{0.3617f, 0.2821f, 0.0099f}, {0.4179f, 0.2185f, 0.0626f},
                              {0.4298f, 0.1946f, 0.0779f}, {0.3876f, 0.1603f, 0.0761f},
                              {0.3362f, 0.1465f, 0.0587f}, {0.3519f, 0.1339f, 0.0640f}};
    attn_module_config cfg = {ATTN_MODULE_MHA, 3, 768, 12, 6, 0.0, 0};
    attn_module *m = create(cfg, 123);
    float batch[36];
    static float out[2 * 6 * 768];
    make_batch(batch);
    cr_assert_eq(attn_module_forward(m, batch, 2, 6, out, &EVAL, NULL), ATTN_OK);
    for (int b = 0; b < 2; b++)
        for (int t = 0; t < 6; t++) {
            const float *r = out + (b * 6 + t) * 768;
            expect_table(r, first[t], 3, "768 first");
            expect_table(r + 765, last[t], 3, "768 last");
        }
    attn_module_free(m);
}

/* ---- parameter names, shapes and creation order -------------------------- */

static void expect_param(const attn_param_list *pl, int i, const char *name, int64_t d0,
                         int64_t d1) {
    cr_assert(i < pl->count, "missing parameter %d (%s)", i, name);
    const attn_param *p = &pl->items[i];
    cr_expect_str_eq(p->name, name);
    cr_expect_eq(p->shape[0], d0, "%s dim 0", name);
    if (d1 > 0)
        cr_expect(p->ndim == 2 && p->shape[1] == d1, "%s shape", name);
    else
        cr_expect_eq(p->ndim, 1, "%s ndim", name);
    cr_expect(p->grad != NULL, "%s has a gradient", name);
}

Test(params, names_and_shapes_in_state_dict_order) {
    attn_module *m =
        create((attn_module_config){ATTN_MODULE_SELF_ATTENTION_V1, 3, 2, 0, 0, 0, 0}, 1);
    const attn_param_list *pl = attn_module_params(m);
    cr_expect_eq(pl->count, 3);
    expect_param(pl, 0, "W_query", 3, 2);
    expect_param(pl, 1, "W_key", 3, 2);
    expect_param(pl, 2, "W_value", 3, 2);
    attn_module_free(m);

    m = create((attn_module_config){ATTN_MODULE_CAUSAL_ATTENTION, 3, 2, 0, 6, 0, 1}, 1);
    pl = attn_module_params(m);
    cr_expect_eq(pl->count, 6);
    expect_param(pl, 0, "W_query.weight", 2, 3);
    expect_param(pl, 1, "W_query.bias", 2, 0);
    expect_param(pl, 4, "W_value.weight", 2, 3);
    expect_param(pl, 5, "W_value.bias", 2, 0);
    attn_module_free(m);

    m = create((attn_module_config){ATTN_MODULE_MHA_WRAPPER, 3, 2, 2, 6, 0, 0}, 1);
    pl = attn_module_params(m);
    cr_expect_eq(pl->count, 6);
    expect_param(pl, 0, "heads.0.W_query.weight", 2, 3);
    expect_param(pl, 3, "heads.1.W_query.weight", 2, 3);
    expect_param(pl, 5, "heads.1.W_value.weight", 2, 3);
    attn_module_free(m);

    m = create((attn_module_config){ATTN_MODULE_MHA, 3, 4, 2, 6, 0, 0}, 1);
    pl = attn_module_params(m);
    cr_expect_eq(pl->count, 5);
    expect_param(pl, 2, "W_value.weight", 4, 3);
    expect_param(pl, 3, "out_proj.weight", 4, 4);
    expect_param(pl, 4, "out_proj.bias", 4, 0);
    attn_module_free(m);
}

/* The same generator stream feeds the constructors in the book's order, so
 * the wrapper's head 0 equals a CausalAttention made from the same seed, head
 * 1 is what a second CausalAttention would draw next, and MHA's Q/K/V equal
 * CausalAttention's (same shapes, same order) with out_proj drawn last. */
Test(params, creation_order_follows_the_constructors) {
    attn_rng rng;
    attn_rng_seed(&rng, 123);
    attn_causal_attention h0, h1;
    cr_assert_eq(attn_causal_attention_init(&h0, 3, 4, 6, 0.0, 1, &rng, NULL), ATTN_OK);
    cr_assert_eq(attn_causal_attention_init(&h1, 3, 4, 6, 0.0, 1, &rng, NULL), ATTN_OK);
    attn_linear op;
    cr_assert_eq(attn_linear_init(&op, 4, 4, 1, &rng, NULL), ATTN_OK); /* after h1's draws */

    attn_rng_seed(&rng, 123);
    attn_mha_wrapper w;
    cr_assert_eq(attn_mha_wrapper_init(&w, 3, 4, 6, 0.0, 2, 1, &rng, NULL), ATTN_OK);
    cr_expect(memcmp(w.heads[0].W_value.weight, h0.W_value.weight, 12 * sizeof(float)) == 0);
    cr_expect(memcmp(w.heads[1].W_query.weight, h1.W_query.weight, 12 * sizeof(float)) == 0);
    cr_expect(memcmp(w.heads[1].W_key.bias, h1.W_key.bias, 4 * sizeof(float)) == 0);

    attn_rng_seed(&rng, 123);
    attn_mha mha;
    cr_assert_eq(attn_mha_init(&mha, 3, 4, 6, 0.0, 2, 1, &rng, NULL), ATTN_OK);
    cr_expect(memcmp(mha.W_query.weight, h0.W_query.weight, 12 * sizeof(float)) == 0);
    cr_expect(memcmp(mha.W_value.bias, h0.W_value.bias, 4 * sizeof(float)) == 0);
    /* out_proj comes right after W_value: it matches h1's first draws, not op */
    attn_rng_seed(&rng, 123);
    attn_causal_attention skip;
    cr_assert_eq(attn_causal_attention_init(&skip, 3, 4, 6, 0.0, 1, &rng, NULL), ATTN_OK);
    attn_linear op2;
    cr_assert_eq(attn_linear_init(&op2, 4, 4, 1, &rng, NULL), ATTN_OK);
    cr_expect(memcmp(mha.out_proj.weight, op2.weight, 16 * sizeof(float)) == 0);
    cr_expect(memcmp(mha.out_proj.bias, op2.bias, 4 * sizeof(float)) == 0);

    /* rng == NULL: zeros */
    attn_mha zero;
    cr_assert_eq(attn_mha_init(&zero, 3, 4, 6, 0.0, 2, 0, NULL, NULL), ATTN_OK);
    for (int i = 0; i < 16; i++)
        cr_expect_eq(zero.out_proj.weight[i], 0.0f);

    attn_mha_free(&zero);
    attn_linear_free(&op2);
    attn_causal_attention_free(&skip);
    attn_mha_free(&mha);
    attn_mha_wrapper_free(&w);
    attn_linear_free(&op);
    attn_causal_attention_free(&h1);
    attn_causal_attention_free(&h0);
}

/* ---- bad configurations and calls --------------------------------------- */

static void expect_bad(attn_module_config cfg, attn_status code, const char *needle) {
    attn_error err;
    attn_error_clear(&err);
    attn_module *m = (attn_module *)1;
    attn_status s = attn_module_create(&cfg, NULL, &m, &err);
    cr_expect_eq(s, code, "%s: status %d, want %d (%s)", needle, s, code, err.msg);
    cr_expect_null(m);
    cr_expect(strstr(err.msg, needle) != NULL, "message '%s' should mention '%s'", err.msg, needle);
    cr_expect_eq(attn_module_config_validate(&cfg, NULL), code);
}

Test(bad_input, configs) {
    const attn_status E = ATTN_ERR_INVALID_ARG;
    expect_bad((attn_module_config){ATTN_MODULE_MHA, 3, 5, 2, 6, 0.0, 0}, E,
               "d_out (5) must be divisible by num_heads (2)");
    expect_bad((attn_module_config){ATTN_MODULE_MHA, 0, 4, 2, 6, 0.0, 0}, E, "d_in must be > 0");
    expect_bad((attn_module_config){ATTN_MODULE_CAUSAL_ATTENTION, 3, -1, 1, 6, 0.0, 0}, E,
               "d_out must be > 0");
    expect_bad((attn_module_config){ATTN_MODULE_MHA_WRAPPER, 3, 2, 0, 6, 0.0, 0}, E,
               "num_heads must be > 0");
    expect_bad((attn_module_config){ATTN_MODULE_MHA, 3, 4, -2, 6, 0.0, 0}, E,
               "num_heads must be > 0");
    expect_bad((attn_module_config){ATTN_MODULE_CAUSAL_ATTENTION, 3, 2, 1, 0, 0.0, 0}, E,
               "context_length must be > 0");
    expect_bad((attn_module_config){ATTN_MODULE_CAUSAL_ATTENTION, 3, 2, 1, 6, 1.0, 0}, E,
               "dropout must be in [0, 1)");
    expect_bad((attn_module_config){ATTN_MODULE_MHA, 3, 2, 1, 6, -0.1, 0}, E,
               "dropout must be in [0, 1)");
    expect_bad((attn_module_config){ATTN_MODULE_MHA_WRAPPER, 3, 2, 1, 6, NAN, 0}, E,
               "dropout must be in [0, 1)");
    expect_bad((attn_module_config){ATTN_MODULE_SELF_ATTENTION_V2, 3, 2, 0, 0, 0.1, 0}, E,
               "has no dropout");
    expect_bad((attn_module_config){ATTN_MODULE_SELF_ATTENTION_V1, 3, 2, 0, 0, 0.0, 1}, E,
               "no bias");
    /* typed APIs report the same problems */
    attn_error err;
    attn_mha mha;
    cr_expect_eq(attn_mha_init(&mha, 3, 5, 6, 0.0, 2, 0, NULL, &err), E);
    cr_expect(strstr(err.msg, "divisible") != NULL, "%s", err.msg);
    attn_causal_attention ca;
    cr_expect_eq(attn_causal_attention_init(&ca, 3, 2, 6, 1.5, 0, NULL, &err), E);
    cr_expect(strstr(err.msg, "dropout") != NULL, "%s", err.msg);
}

Test(bad_input, calls) {
    attn_error err;
    float x[2 * 7 * 3] = {0}, y[2 * 7 * 4], dy[2 * 7 * 4] = {0};
    attn_module *m = create((attn_module_config){ATTN_MODULE_MHA, 3, 4, 2, 6, 0.0, 0}, 1);
    cr_expect_eq(attn_module_backward(m, x, dy, NULL, &err), ATTN_ERR_STATE);
    cr_expect(strstr(err.msg, "before") != NULL, "%s", err.msg);
    cr_expect_eq(attn_module_forward(m, x, 2, 7, y, &EVAL, &err), ATTN_ERR_SHAPE);
    cr_expect(strstr(err.msg, "T = 7 exceeds context_length = 6") != NULL, "%s", err.msg);
    cr_expect_eq(attn_module_forward(m, x, 0, 3, y, &EVAL, &err), ATTN_ERR_SHAPE);
    /* training with dropout needs a generator */
    attn_module *d = create((attn_module_config){ATTN_MODULE_MHA, 3, 4, 2, 6, 0.5, 0}, 1);
    const attn_forward_mode no_rng = {1, NULL, ATTN_STREAM_TORCH_CPU};
    cr_expect_eq(attn_module_forward(d, x, 1, 3, y, &no_rng, &err), ATTN_ERR_INVALID_ARG);
    cr_expect(strstr(err.msg, "rng") != NULL, "%s", err.msg);
    cr_expect_eq(attn_module_forward(d, x, 1, 3, y, &EVAL, &err), ATTN_OK); /* eval is fine */
    attn_module_free(d);
    attn_module_free(m);
    /* v1/v2 take one sequence */
    m = create((attn_module_config){ATTN_MODULE_SELF_ATTENTION_V2, 3, 4, 0, 0, 0.0, 1}, 1);
    cr_expect_eq(attn_module_forward(m, x, 2, 3, y, &EVAL, &err), ATTN_ERR_SHAPE);
    cr_expect(strstr(err.msg, "B = 1") != NULL, "%s", err.msg);
    cr_expect_eq(attn_module_forward(m, x, 1, 7, y, &EVAL, &err), ATTN_OK); /* no T limit */
    attn_module_free(m);
    /* a typed cache of the wrong shape */
    attn_causal_attention ca;
    cr_assert_eq(attn_causal_attention_init(&ca, 3, 4, 6, 0.0, 0, NULL, NULL), ATTN_OK);
    attn_attention_cache c;
    cr_assert_eq(attn_attention_cache_init(&c, 1, 4, 1, 4, NULL), ATTN_OK);
    cr_expect_eq(attn_causal_attention_forward(&ca, x, 1, 5, y, &EVAL, &c, &err), ATTN_ERR_SHAPE);
    cr_expect(strstr(err.msg, "cache") != NULL, "%s", err.msg);
    attn_attention_cache_free(&c);
    attn_causal_attention_free(&ca);
    /* v2 with bias cannot transfer to v1 */
    attn_sa_v2 v2;
    attn_sa_v1 v1;
    cr_assert_eq(attn_sa_v2_init(&v2, 3, 2, 1, NULL, NULL), ATTN_OK);
    cr_assert_eq(attn_sa_v1_init(&v1, 3, 2, NULL, NULL), ATTN_OK);
    cr_expect_eq(attn_sa_v1_from_v2(&v1, &v2, &err), ATTN_ERR_INVALID_ARG);
    attn_sa_v1_free(&v1);
    attn_sa_v2_free(&v2);
}

/* ---- semantics --------------------------------------------------------- */

Test(semantics, backward_accumulates_params_and_dx) {
    attn_module *m = create((attn_module_config){ATTN_MODULE_MHA, 3, 4, 2, 6, 0.0, 1}, 5);
    float batch[36], y[48], dy[48], dx1[36], dx2[36];
    make_batch(batch);
    for (int i = 0; i < 48; i++)
        dy[i] = (float)((i % 7) - 3) * 0.25f;
    cr_assert_eq(attn_module_forward(m, batch, 2, 6, y, &EVAL, NULL), ATTN_OK);
    const attn_param_list *pl = attn_module_params(m);
    attn_param_list_zero_grad(pl);
    memset(dx1, 0, sizeof dx1);
    cr_assert_eq(attn_module_backward(m, batch, dy, dx1, NULL), ATTN_OK);
    const float g1 = pl->items[0].grad[1], b1 = pl->items[4].grad[0];
    memcpy(dx2, dx1, sizeof dx1); /* accumulated, not overwritten */
    cr_assert_eq(attn_module_backward(m, batch, dy, dx2, NULL), ATTN_OK);
    for (int i = 0; i < 36; i++)
        cr_expect(fabsf(dx2[i] - 2 * dx1[i]) <= 1e-6f * fabsf(dx1[i]) + 1e-7f,
                  "dx[%d]: %g, want twice %g", i, (double)dx2[i], (double)dx1[i]);
    cr_expect(fabsf(pl->items[0].grad[1] - 2 * g1) <= 1e-6f * fabsf(g1) + 1e-7f);
    cr_expect(fabsf(pl->items[4].grad[0] - 2 * b1) <= 1e-6f * fabsf(b1) + 1e-7f);
    /* a shorter sequence after a longer one: caches follow the shape */
    float y3[2 * 3 * 4];
    cr_assert_eq(attn_module_forward(m, batch, 2, 3, y3, &EVAL, NULL), ATTN_OK);
    /* causal: the first 3 positions do not see the later ones (batch row 0 == T=6 row 0) */
    for (int t = 0; t < 3; t++)
        for (int d = 0; d < 4; d++)
            cr_expect(fabsf(y3[t * 4 + d] - y[t * 4 + d]) < 1e-6f);
    attn_module_free(m);
}

Test(semantics, dropout_only_in_training) {
    attn_module *m =
        create((attn_module_config){ATTN_MODULE_CAUSAL_ATTENTION, 3, 2, 1, 6, 0.5, 0}, 123);
    float batch[36], a[24], b[24];
    make_batch(batch);
    cr_assert_eq(attn_module_forward(m, batch, 2, 6, a, &EVAL, NULL), ATTN_OK);
    const attn_attention_cache *c = attn_module_attention_cache(m, 0);
    cr_assert_not_null(c);
    cr_expect_eq(c->dropout_applied, 0);
    attn_rng rng;
    attn_rng_seed(&rng, 123);
    const attn_forward_mode train = {1, &rng, ATTN_STREAM_TORCH_MKL};
    cr_assert_eq(attn_module_forward(m, batch, 2, 6, b, &train, NULL), ATTN_OK);
    c = attn_module_attention_cache(m, 0);
    cr_expect_eq(c->dropout_applied, 1);
    size_t dropped = 0;
    for (size_t i = 0; i < 72; i++) {
        dropped += !c->keep[i];
        const float want = c->keep[i] ? c->attn_weights[i] * 2.0f : 0.0f;
        cr_expect_eq(c->dropped_weights[i], want);
    }
    cr_expect(dropped > 0 && dropped < 72);
    attn_module_free(m);
}

/* ---- the kind table (src/attention/module.c) --------------------------------------- */

/* Every row sits at its own enum value, its name parses back to it, and
 * what it says it uses is what validation accepts: a field a kind does not
 * use is refused (dropout, bias) or ignored (heads, context). */
Test(kinds, table_rows_match_behaviour) {
    for (int i = 0; i < ATTN_MODULE_KIND_COUNT; i++) {
        const attn_module_kind_info *k = attn_module_kind_get((attn_module_kind)i);
        cr_assert_not_null(k, "kind %d has no row", i);
        cr_expect_eq((int)k->kind, i, "row %d says kind %d", i, (int)k->kind);
        attn_module_kind parsed;
        cr_expect_eq(attn_module_kind_parse(k->name, &parsed), 0, "%s", k->name);
        cr_expect_eq((int)parsed, i, "%s parses to %d", k->name, (int)parsed);
        cr_expect_str_eq(attn_module_kind_name(k->kind), k->name);
        cr_expect(k->summary && k->summary[0], "%s has a summary", k->name);
        cr_expect(k->input_rank == 2 || k->input_rank == 3, "%s rank %d", k->name, k->input_rank);
        /* d_in = d_out = 4, 2 heads, context 6: valid for every kind. */
        attn_module_config cfg = {k->kind, 4, 4, 2, 6, 0.0, 0};
        cr_expect_eq(attn_module_config_validate(&cfg, NULL), ATTN_OK, "%s", k->name);
        cfg.dropout = 0.1;
        cr_expect_eq(attn_module_config_validate(&cfg, NULL) == ATTN_OK,
                     (k->uses & ATTN_MODULE_USES_DROPOUT) != 0, "%s dropout", k->name);
        cfg.dropout = 0.0;
        cfg.qkv_bias = 1;
        cr_expect_eq(attn_module_config_validate(&cfg, NULL) == ATTN_OK,
                     (k->uses & ATTN_MODULE_USES_QKV_BIAS) != 0, "%s bias", k->name);
        cfg.qkv_bias = 0;
        cfg.num_heads = 0;
        cr_expect_eq(attn_module_config_validate(&cfg, NULL) == ATTN_OK,
                     !(k->uses & ATTN_MODULE_USES_HEADS), "%s heads", k->name);
        cfg.num_heads = 2;
        cfg.context_length = 0;
        cr_expect_eq(attn_module_config_validate(&cfg, NULL) == ATTN_OK,
                     !(k->uses & ATTN_MODULE_USES_CONTEXT), "%s context", k->name);
        /* The output width the row promises. */
        cfg.context_length = 6;
        attn_module *m = create(cfg, 1);
        cr_expect_eq(attn_module_out_dim(m), k->out_per_head ? 8 : 4, "%s out_dim", k->name);
        attn_module_free(m);
    }
    cr_expect_null(attn_module_kind_get((attn_module_kind)ATTN_MODULE_KIND_COUNT));
    cr_expect_null(attn_module_kind_get((attn_module_kind)-1));
    cr_expect_str_eq(attn_module_kind_name((attn_module_kind)ATTN_MODULE_KIND_COUNT), "unknown");
}
