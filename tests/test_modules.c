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
    attn_module_destroy(m);
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
    attn_module_destroy(m);
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
    attn_module_destroy(m);
}
