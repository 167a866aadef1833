/* The masked loss (attn/cross_entropy.h's ATTN_IGNORE_INDEX, PyTorch's
 * F.cross_entropy(..., ignore_index=-100), reduction mean): an ignored
 * target contributes no loss and no gradient, the mean is over the rest,
 * all ignored is NaN. Against a double reference: the cross-entropy alone,
 * and a GPT's loss and gradients (central differences of
 * tests/support/gpt_ref.c) with chapter 6's targets (-100 but at the last
 * position) and chapter 7's (-100 after the text); plain, lean, bf16,
 * int64 targets, micro-batches, every thread count the same bits. */
#include <criterion/criterion.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "attn/cross_entropy.h"
#include "attn/gpt_family.h"
#include "support/gpt_ref.h"

#define IGN ATTN_IGNORE_INDEX

/* The reference's loss and dlogits (mean over the counted rows). */
static double ref_ce(const float *logits, const int32_t *tg, size_t N, size_t V, double *d) {
    size_t k = 0;
    for (size_t n = 0; n < N; n++)
        k += tg[n] != IGN;
    double total = 0;
    for (size_t n = 0; n < N; n++) {
        const float *r = logits + n * V;
        if (tg[n] == IGN) {
            for (size_t v = 0; d && v < V; v++)
                d[n * V + v] = 0;
            continue;
        }
        double mx = r[0], s = 0;
        for (size_t v = 1; v < V; v++)
            mx = r[v] > mx ? r[v] : mx;
        for (size_t v = 0; v < V; v++)
            s += exp((double)r[v] - mx);
        const double lse = mx + log(s);
        total += lse - r[tg[n]];
        for (size_t v = 0; d && v < V; v++)
            d[n * V + v] = (exp((double)r[v] - lse) - (v == (size_t)tg[n])) / (double)k;
    }
    return total / (double)k;
}

Test(masked_loss, the_cross_entropy_leaves_out_ignored_rows) {
    const size_t N = 70, V = 37; /* more than one 32-row block */
    float *x = malloc(N * V * sizeof(float)), *d = malloc(N * V * sizeof(float));
    float *g = malloc(N * V * sizeof(float)), lse[70];
    double *rd = malloc(N * V * sizeof(double));
    int32_t tg[70];
    gref_fill(x, N * V, 11, 3.0f);
    for (size_t n = 0; n < N; n++)
        tg[n] = n % 3 == 1 ? IGN : (int32_t)((n * 7) % V);
    cr_expect_eq(attn_cross_entropy_count(tg, N), N - 23);
    const double ref = ref_ce(x, tg, N, V, rd);
    const float loss = attn_cross_entropy_forward(x, tg, lse, N, V);
    cr_expect(fabs(loss - ref) <= 1e-6 * fabs(ref), "loss %.9g vs reference %.9g", loss, ref);
    for (size_t i = 0; i < N * V; i++)
        d[i] = 0.5f; /* backward adds: ignored rows keep this */
    attn_cross_entropy_backward(x, tg, lse, 1.0f, d, N, V);
    attn_cross_entropy_grad(x, tg, lse, 1.0f / (float)(N - 23), g, N, V);
    for (size_t i = 0; i < N * V; i++) {
        cr_assert(fabs(d[i] - 0.5 - rd[i]) <= 1e-6, "backward [%zu]: %g vs %g", i, d[i] - 0.5,
                  rd[i]);
        cr_assert(fabs(g[i] - rd[i]) <= 1e-7, "grad [%zu]: %g vs %g", i, g[i], rd[i]);
    }
    /* The mean of the counted rows' own losses: the sum split in chunks of
     * 32 rows adds up to the same bits (the lean head's promise). */
    double total = 0;
    for (size_t r0 = 0; r0 < N; r0 += 32)
        attn_cross_entropy_accumulate(x + r0 * V, tg + r0, lse + r0, N - r0 < 32 ? N - r0 : 32, V,
                                      &total);
    cr_expect_eq((float)(total / (double)(N - 23)), loss);
    free(x), free(d), free(g), free(rd);
}

Test(masked_loss, every_target_ignored_is_nan_with_no_gradient) {
    float x[12], d[12] = {0}, lse[3];
    const int32_t tg[3] = {IGN, IGN, IGN};
    gref_fill(x, 12, 3, 1.0f);
    cr_expect(isnan(attn_cross_entropy_forward(x, tg, lse, 3, 4)), "PyTorch gives nan");
    attn_cross_entropy_backward(x, tg, lse, 1.0f, d, 3, 4);
    for (int i = 0; i < 12; i++)
        cr_expect_eq(d[i], 0.0f);
}

/* A chapter-6 classifier (3 classes, with bias) or the book's GPT. */
static attn_status classifier(attn_gpt *m, const attn_gpt_build *opts, attn_error *err) {
    (void)opts;
    attn_status s = attn_gpt_add_embedding(m, err);
    for (int i = 0; s == ATTN_OK && i < m->cfg.n_layers; i++)
        s = attn_gpt_add_block(m, err);
    if (s == ATTN_OK) s = attn_gpt_add_final_norm(m, err);
    return s == ATTN_OK ? attn_gpt_add_head(m, 3, 1, err) : s;
}

static void make(attn_gpt *m, int T, attn_gpt_build_fn build, uint64_t seed) {
    const attn_gpt_config cfg = {.vocab_size = 11,
                                 .context_length = T,
                                 .emb_dim = 8,
                                 .n_heads = 2,
                                 .n_layers = 2,
                                 .qkv_bias = 1};
    attn_rng rng;
    attn_rng_seed(&rng, seed);
    attn_error err;
    cr_assert_eq(attn_gpt_init_family(m, &cfg, build, NULL, &rng, &err), ATTN_OK, "%s", err.msg);
}

/* ids, and targets: classify, the class at each row's last position only;
 * else next tokens with -100 from a row-dependent length on (chapter 7's
 * padding). */
static void batch(int32_t *ids, int32_t *tg, int B, int T, int V, int classify) {
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            const int i = b * T + t;
            ids[i] = (int32_t)((i * 7 + 3) % V);
            if (classify)
                tg[i] = t == T - 1 ? (int32_t)((b * 2 + 1) % 3) : IGN;
            else
                tg[i] = t < T - 1 - b % T ? (int32_t)((i * 5 + 2) % V) : IGN;
        }
}

/* Loss and every gradient against the reference's central differences. */
static void fd_check(attn_gpt *m, int B, int T, int classify) {
    int32_t ids[64], tg[64];
    batch(ids, tg, B, T, m->cfg.vocab_size, classify);
    attn_gpt_acts acts;
    attn_error err;
    cr_assert_eq(attn_gpt_acts_init(&acts, m, B, T, &err), ATTN_OK, "%s", err.msg);
    attn_gpt_zero_grad(m);
    float loss;
    cr_assert_eq(attn_gpt_forward_backward(m, ids, tg, B, T, NULL, &acts, 1.0f, &loss, &err),
                 ATTN_OK, "%s", err.msg);
    const attn_param_list *L = attn_gpt_params(m);
    double **pd = gref_params_copy(L);
    const double ref = gref_gpt_forward(m, pd, ids, tg, (size_t)B, (size_t)T, NULL);
    cr_assert(fabs(loss - ref) <= 1e-5 * fabs(ref), "loss %.9g vs reference %.9g", loss, ref);
    const double h = 1e-6;
    for (int p = 0; p < L->count; p++)
        for (size_t j = 0; L->items[p].trainable && j < L->items[p].numel; j++) {
            const double keep = pd[p][j];
            pd[p][j] = keep + h;
            const double lp = gref_gpt_forward(m, pd, ids, tg, (size_t)B, (size_t)T, NULL);
            pd[p][j] = keep - h;
            const double lm = gref_gpt_forward(m, pd, ids, tg, (size_t)B, (size_t)T, NULL);
            pd[p][j] = keep;
            const double g = (lp - lm) / (2 * h), got = L->items[p].grad[j];
            cr_assert(fabs(got - g) <= 2e-6 + 1e-4 * fabs(g), "d loss / d %s[%zu]: %.9g, FD %.9g",
                      L->items[p].name, j, got, g);
        }
    gref_params_free(pd, L);
    attn_gpt_acts_free(&acts);
}

Test(masked_loss, a_classifier_s_last_token_loss_and_gradients_are_the_reference_s) {
    attn_gpt m;
    make(&m, 6, classifier, 7);
    attn_error err;
    /* chapter 6's trainable set: the last block, the final norm, the head */
    cr_assert_eq(attn_gpt_set_trainable(&m, "", 0, &err), ATTN_OK, "%s", err.msg);
    cr_assert_eq(attn_gpt_set_trainable(&m, "trf_blocks.1.", 1, &err), ATTN_OK, "%s", err.msg);
    cr_assert_eq(attn_gpt_set_trainable(&m, "final_norm.", 1, &err), ATTN_OK, "%s", err.msg);
    cr_assert_eq(attn_gpt_set_trainable(&m, "out_head.", 1, &err), ATTN_OK, "%s", err.msg);
    fd_check(&m, 3, 6, 1);
    attn_gpt_free(&m);
}

Test(masked_loss, padded_next_token_targets_are_the_reference_s) {
    attn_gpt m;
    make(&m, 6, NULL, 9);
    fd_check(&m, 3, 6, 0);
    attn_gpt_free(&m);
}

/* One forward_backward of a batch: loss and the gradients, copied. */
static float run(attn_gpt *m, const int32_t *ids, const int32_t *tg, int B, int T, int lean,
                 float *grads) {
    attn_gpt_acts acts;
    attn_error err;
    cr_assert_eq(lean ? attn_gpt_acts_init_lean(&acts, m, B, T, &err)
                      : attn_gpt_acts_init(&acts, m, B, T, &err),
                 ATTN_OK, "%s", err.msg);
    attn_gpt_zero_grad(m);
    float loss;
    cr_assert_eq(attn_gpt_forward_backward(m, ids, tg, B, T, NULL, &acts, 1.0f, &loss, &err),
                 ATTN_OK, "%s", err.msg);
    const attn_param_list *L = attn_gpt_params(m);
    memcpy(grads, L->grads, L->grads_numel * sizeof(float));
    attn_gpt_acts_free(&acts);
    return loss;
}

/* 300 rows: the lean head's 128-row chunks, counted rows in each. */
Test(masked_loss, lean_plain_bf16_and_thread_counts_agree) {
    const int B = 5, T = 60;
    attn_gpt m;
    make(&m, T, NULL, 3);
    int32_t ids[300], tg[300];
    batch(ids, tg, B, T, m.cfg.vocab_size, 0);
    for (int i = 0; i < B * T; i += 4)
        tg[i] = IGN;
    const size_t n = attn_gpt_params(&m)->grads_numel;
    float *g[4];
    for (int i = 0; i < 4; i++)
        g[i] = malloc(n * sizeof(float));
    omp_set_num_threads(1);
    const float plain1 = run(&m, ids, tg, B, T, 0, g[0]);
    omp_set_num_threads(2);
    const float plain2 = run(&m, ids, tg, B, T, 0, g[1]);
    const float lean = run(&m, ids, tg, B, T, 1, g[2]);
    cr_expect_eq(plain1, plain2, "one thread %.9g, two %.9g", plain1, plain2);
    cr_expect(memcmp(g[0], g[1], n * sizeof(float)) == 0, "gradients: the same bits");
    cr_expect_eq(plain1, lean, "plain %.9g, lean %.9g", plain1, lean);
    for (size_t j = 0; j < n; j++)
        cr_assert(fabsf(g[0][j] - g[2][j]) <= 1e-6f + 1e-4f * fabsf(g[0][j]), "[%zu] %g vs %g", j,
                  g[0][j], g[2][j]);
    attn_error err;
    if (attn_gpt_set_precision(&m, ATTN_PRECISION_BF16, &err) == ATTN_OK) {
        const float b16 = run(&m, ids, tg, B, T, 1, g[3]);
        cr_expect(fabsf(b16 - plain1) <= 2e-2f * fabsf(plain1), "bf16 %g vs %g", b16, plain1);
        double dot = 0, na = 0, nb = 0;
        for (size_t j = 0; j < n; j++)
            dot += (double)g[0][j] * g[3][j], na += (double)g[0][j] * g[0][j],
                nb += (double)g[3][j] * g[3][j];
        cr_expect(dot / sqrt(na * nb) > 0.99, "bf16 gradients point the fp32 way: %g",
                  dot / sqrt(na * nb));
    }
    for (int i = 0; i < 4; i++)
        free(g[i]);
    attn_gpt_free(&m);
}

/* Two micro-batches at loss scale 1/2: the mean of their own masked means
 * (each batch's mean over its counted rows, as the trainer adds them). */
Test(masked_loss, micro_batches_add_their_own_means) {
    const int B = 2, T = 6;
    attn_gpt m;
    make(&m, T, NULL, 5);
    int32_t ids[12], tg[12];
    batch(ids, tg, B, T, m.cfg.vocab_size, 0);
    const size_t n = attn_gpt_params(&m)->grads_numel;
    float *ga = malloc(n * sizeof(float)), *gb = malloc(n * sizeof(float));
    /* batch a: rows as made; batch b: its second row ignored entirely */
    int32_t tb[12];
    memcpy(tb, tg, sizeof tb);
    for (int t = 0; t < T; t++)
        tb[T + t] = IGN;
    const float la = run(&m, ids, tg, B, T, 0, ga);
    const float lb = run(&m, ids, tb, B, T, 0, gb);
    attn_gpt_acts acts;
    attn_error err;
    cr_assert_eq(attn_gpt_acts_init(&acts, &m, B, T, &err), ATTN_OK);
    attn_gpt_zero_grad(&m);
    float l1, l2;
    cr_assert_eq(attn_gpt_forward_backward(&m, ids, tg, B, T, NULL, &acts, 0.5f, &l1, &err),
                 ATTN_OK);
    cr_assert_eq(attn_gpt_forward_backward(&m, ids, tb, B, T, NULL, &acts, 0.5f, &l2, &err),
                 ATTN_OK);
    cr_expect(l1 == la && l2 == lb);
    const float *g = attn_gpt_params(&m)->grads;
    for (size_t j = 0; j < n; j++)
        cr_assert(fabsf(g[j] - 0.5f * (ga[j] + gb[j])) <= 1e-7f + 1e-5f * fabsf(g[j]),
                  "[%zu] %g vs %g", j, g[j], 0.5f * (ga[j] + gb[j]));
    attn_gpt_acts_free(&acts);
    free(ga), free(gb);
    attn_gpt_free(&m);
}

/* -100 is a target's value only: an id of -100 or a target of -101 is
 * still refused, int32 and int64; an ignored target makes no loss. */
Test(masked_loss, only_targets_may_be_ignored) {
    const int B = 1, T = 4;
    attn_gpt m;
    make(&m, T, classifier, 1);
    attn_gpt_acts acts;
    attn_error err;
    cr_assert_eq(attn_gpt_acts_init(&acts, &m, B, T, &err), ATTN_OK);
    int32_t ids[4] = {1, 2, 3, 4}, tg[4] = {IGN, IGN, IGN, 2};
    int64_t ids64[4] = {1, 2, 3, 4}, tg64[4] = {IGN, IGN, IGN, 2};
    float l32, l64;
    cr_expect_eq(attn_gpt_forward(&m, ids, tg, B, T, NULL, &acts, &l32, &err), ATTN_OK, "%s",
                 err.msg);
    cr_expect_eq(attn_gpt_forward_i64(&m, ids64, tg64, B, T, NULL, &acts, &l64, &err), ATTN_OK,
                 "%s", err.msg);
    cr_expect_eq(l32, l64);
    cr_expect_eq(acts.lse[0], 0.0f, "an ignored row's lse is 0");
    ids[1] = IGN;
    cr_expect_eq(attn_gpt_forward(&m, ids, tg, B, T, NULL, &acts, NULL, &err),
                 ATTN_ERR_INVALID_ARG);
    cr_expect(strstr(err.msg, "token id -100") != NULL, "%s", err.msg);
    ids64[1] = IGN;
    cr_expect_eq(attn_gpt_forward_i64(&m, ids64, tg64, B, T, NULL, &acts, NULL, &err),
                 ATTN_ERR_INVALID_ARG);
    ids[1] = 2;
    tg[0] = -101;
    cr_expect_eq(attn_gpt_forward(&m, ids, tg, B, T, NULL, &acts, NULL, &err),
                 ATTN_ERR_INVALID_ARG);
    cr_expect(strstr(err.msg, "target -101") != NULL, "%s", err.msg);
    attn_gpt_acts_free(&acts);
    attn_gpt_free(&m);
}
