/* The one-token, KV-cached entry points the generation step is built from
 * (attn_mha_step, attn_feedforward_step) against the batched forwards they
 * stand in for. The reference is the batched forward itself, which the
 * PyTorch parity tests pin (test_modules.c, test_gpt_parity.c). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "attn/attn.h"

enum { D_IN = 12, D_OUT = 16, HEADS = 4, CTX = 9, T = 7 };

static void expect_close(const float *got, const float *want, size_t n, const char *what) {
    for (size_t i = 0; i < n; i++)
        cr_assert(fabsf(got[i] - want[i]) <= 1e-5f + 1e-5f * fabsf(want[i]),
                  "%s [%zu]: step %.9g batched %.9g", what, i, got[i], want[i]);
}

/* w's fp32 values replaced by the bf16 values b (widened exactly). */
static void widen_bf16(float *w, const uint16_t *b, size_t n) {
    for (size_t i = 0; i < n; i++) {
        const uint32_t u = (uint32_t)b[i] << 16;
        memcpy(&w[i], &u, sizeof u);
    }
}

static void mha_batched(const attn_mha *m, const float *x, float *out) {
    attn_attention_cache cache;
    cr_assert_eq(attn_mha_cache_init(&cache, m, 1, T, NULL), ATTN_OK);
    cr_assert_eq(attn_mha_forward(m, x, 1, T, out, NULL, &cache, NULL), ATTN_OK);
    attn_attention_cache_free(&cache);
}

/* Positions 0..T-1 one at a time; with team, every call runs on a team of 2. */
static void mha_steps(const attn_mha *m, const uint16_t *w, const float *x, float *out, float *k,
                      int team) {
    static float v[CTX * D_OUT], q[D_OUT], ctx[D_OUT], scores[HEADS * CTX];
    const attn_mha_step_buf buf = {w, q, ctx, scores};
    memset(k, 0, CTX * D_OUT * sizeof(float));
    for (int t = 0; t < T; t++) {
        if (team) {
#pragma omp parallel num_threads(2)
            attn_mha_step(m, x + t * D_IN, k, v, t, out + t * D_OUT, &buf);
        } else {
            attn_mha_step(m, x + t * D_IN, k, v, t, out + t * D_OUT, &buf);
        }
    }
}

Test(step, mha_step_equals_the_batched_forward) {
    attn_rng rng;
    attn_rng_seed(&rng, 5);
    attn_mha m;
    /* d_in != d_out, biases on, dropout (eval: none) */
    cr_assert_eq(attn_mha_init(&m, D_IN, D_OUT, CTX, 0.1, HEADS, 1, &rng, NULL), ATTN_OK);
    float x[T * D_IN], want[T * D_OUT], got[T * D_OUT], team[T * D_OUT];
    float k[CTX * D_OUT], k_team[CTX * D_OUT];
    attn_rng_uniform(&rng, x, T * D_IN, -2.0f, 2.0f);
    mha_batched(&m, x, want);
    mha_steps(&m, NULL, x, got, k, 0);
    expect_close(got, want, T * D_OUT, "fp32");
    /* The team splits rows and heads; each value is still computed by one thread. */
    mha_steps(&m, NULL, x, team, k_team, 1);
    cr_assert(memcmp(team, got, sizeof got) == 0, "a team of 2 gives the serial bits");
    cr_assert(memcmp(k_team, k, T * D_OUT * sizeof(float)) == 0, "same cached keys");

    /* bf16: the step equals the batched forward on the bf16-rounded weights. */
    const size_t n = attn_mha_bf16_numel(&m);
    cr_assert_eq(n, 3 * D_OUT * D_IN + D_OUT * D_OUT);
    uint16_t *w = malloc(n * sizeof *w);
    attn_mha_bf16_copy(&m, w);
    float got_b[T * D_OUT];
    mha_steps(&m, w, x, got_b, k, 0);
    cr_assert(memcmp(got_b, got, sizeof got) != 0, "the bf16 weights were read");
    const size_t wq = (size_t)D_OUT * D_IN;
    widen_bf16(m.W_query.weight, w, wq);
    widen_bf16(m.W_key.weight, w + wq, wq);
    widen_bf16(m.W_value.weight, w + 2 * wq, wq);
    widen_bf16(m.out_proj.weight, w + 3 * wq, (size_t)D_OUT * D_OUT);
    mha_batched(&m, x, want);
    expect_close(got_b, want, T * D_OUT, "bf16");
    free(w);
    attn_mha_free(&m);
}

enum { C = 8, H4 = 4 * C, ROWS = 5 };

static void ff_steps(const attn_feedforward *ff, const uint16_t *w, const float *x, float *y,
                     int team) {
    static float hidden[H4];
    for (int r = 0; r < ROWS; r++) {
        if (team) {
#pragma omp parallel num_threads(2)
            attn_feedforward_step(ff, w, x + r * C, hidden, y + r * C);
        } else {
            attn_feedforward_step(ff, w, x + r * C, hidden, y + r * C);
        }
    }
}

Test(step, feedforward_step_equals_the_batched_forward) {
    attn_rng rng;
    attn_rng_seed(&rng, 9);
    attn_feedforward ff;
    cr_assert_eq(attn_feedforward_init(&ff, C, &rng, NULL), ATTN_OK);
    attn_feedforward_cache cache;
    cr_assert_eq(attn_feedforward_cache_init(&cache, &ff, ROWS, NULL), ATTN_OK);
    float x[ROWS * C], want[ROWS * C], got[ROWS * C], team[ROWS * C], got_b[ROWS * C];
    attn_rng_uniform(&rng, x, ROWS * C, -3.0f, 3.0f);
    attn_feedforward_forward(&ff, x, want, ROWS, &cache);
    ff_steps(&ff, NULL, x, got, 0);
    expect_close(got, want, ROWS * C, "fp32");
    ff_steps(&ff, NULL, x, team, 1);
    cr_assert(memcmp(team, got, sizeof got) == 0, "a team of 2 gives the serial bits");

    const size_t n = attn_feedforward_bf16_numel(&ff);
    cr_assert_eq(n, 2 * H4 * C);
    uint16_t *w = malloc(n * sizeof *w);
    attn_feedforward_bf16_copy(&ff, w);
    ff_steps(&ff, w, x, got_b, 0);
    cr_assert(memcmp(got_b, got, sizeof got) != 0, "the bf16 weights were read");
    widen_bf16(ff.fc1.weight, w, (size_t)H4 * C);
    widen_bf16(ff.fc2.weight, w + (size_t)H4 * C, (size_t)C * H4);
    attn_feedforward_forward(&ff, x, want, ROWS, &cache);
    expect_close(got_b, want, ROWS * C, "bf16");
    free(w);
    attn_feedforward_cache_free(&cache);
    attn_feedforward_free(&ff);
}
