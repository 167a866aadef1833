/* The fused output layer (attn_gpt_acts_init_lean, attn_gpt_forward_backward):
 * no (B,T,V) tensor; the loss equals the plain path's bit for bit; every
 * gradient equals it to rounding (1e-5); forward_backward equals lean
 * forward + backward bit for bit; 1, 2 and 3 threads give the same bits;
 * a lean forward without targets is refused. The vocabulary (300) and
 * B x T (2 x 70 = 140 rows) make two chunks, the last one partial. On
 * the bf16 engine the same, at 9 x 70 = 630 rows too: the head's weight
 * gradient is then two products (512 rows and the rest). The trainer's
 * deferred zeroing (attn_gpt_zero_grad_deferred: weight gradients written,
 * not added to) gives the zeroed gradients' bits, over two accumulated
 * micro-steps, and leaves none unset when a backward is refused. */
#include <criterion/criterion.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "attn/engine.h"
#include "attn/gpt.h"

enum { T = 70 };

static attn_gpt_config cfg(int tie) {
    attn_gpt_config c = {.vocab_size = 300,
                         .context_length = T,
                         .emb_dim = 16,
                         .n_heads = 2,
                         .n_layers = 2,
                         .drop_rate = 0.1,
                         .qkv_bias = 1,
                         .tie_weights = tie};
    return c;
}

static void tokens(int32_t *ids, int32_t *targets, int N) {
    for (int i = 0; i < N; i++) {
        ids[i] = (int32_t)((i * 37 + 11) % 300);
        targets[i] = (int32_t)((i * 53 + 7) % 300);
    }
}

enum { ZERO_ONCE, ZERO_TWICE, DEFER_TWICE };

/* Every gradient of m, flat, into *grads (malloc'd). */
static void flat_grads(const attn_gpt *m, float **grads, size_t *n) {
    const attn_param_list *L = attn_gpt_params(m);
    *n = attn_param_list_numel(L);
    *grads = malloc(*n * sizeof(float));
    size_t at = 0;
    for (int i = 0; i < L->count; i++) {
        memcpy(*grads + at, L->items[i].grad, L->items[i].numel * sizeof(float));
        at += L->items[i].numel;
    }
}

/* Every gradient of m set to NaN: what a deferred zeroing leaves shows. */
static void poison_grads(const attn_gpt *m) {
    const attn_param_list *L = attn_gpt_params(m);
    for (int i = 0; i < L->count; i++)
        for (size_t k = 0; k < L->items[i].numel; k++)
            L->items[i].grad[k] = NAN;
}

/* One training micro-step of batch B (bf16: on the bf16 engine) on a fresh
 * seed-1 model; the gradients, flat, into *grads (malloc'd). how: 0 plain
 * forward+backward, 1 lean forward+backward, 2 lean forward_backward.
 * zero: ZERO_ONCE; ZERO_TWICE, two micro-steps accumulated; DEFER_TWICE,
 * the same after NaN gradients zeroed by attn_gpt_zero_grad_deferred. */
static float steps_at(int how, int tie, int bf16, int B, int zero, float **grads, size_t *n) {
    const attn_gpt_config c = cfg(tie);
    const int N = B * T;
    attn_gpt m;
    attn_rng rng, drop;
    attn_error err;
    attn_rng_seed(&rng, 1);
    cr_assert_eq(attn_gpt_init(&m, &c, &rng, &err), ATTN_OK, "%s", err.msg);
    if (bf16)
        cr_assert_eq(attn_gpt_set_precision(&m, ATTN_PRECISION_BF16, &err), ATTN_OK, "%s", err.msg);
    attn_gpt_acts a;
    attn_status s =
        how ? attn_gpt_acts_init_lean(&a, &m, B, T, &err) : attn_gpt_acts_init(&a, &m, B, T, &err);
    cr_assert_eq(s, ATTN_OK, "%s", err.msg);
    cr_assert(how == 0 || a.d_logits == NULL, "lean activations hold no (B,T,V) gradient");
    int32_t *ids = malloc(N * sizeof *ids), *targets = malloc(N * sizeof *targets);
    tokens(ids, targets, N);
    attn_rng_seed(&drop, 5);
    const attn_forward_mode mode = {1, &drop, ATTN_STREAM_TORCH_CPU};
    if (zero == DEFER_TWICE) {
        poison_grads(&m);
        attn_gpt_zero_grad_deferred(&m);
    } else {
        attn_gpt_zero_grad(&m);
    }
    float loss = NAN;
    for (int rep = 0; rep < (zero == ZERO_ONCE ? 1 : 2); rep++) {
        if (how == 2) {
            s = attn_gpt_forward_backward(&m, ids, targets, B, T, &mode, &a, 0.5f, &loss, &err);
        } else {
            s = attn_gpt_forward(&m, ids, targets, B, T, &mode, &a, &loss, &err);
            if (s == ATTN_OK) s = attn_gpt_backward(&m, &a, 0.5f, &err);
        }
        cr_assert_eq(s, ATTN_OK, "%s", err.msg);
    }
    flat_grads(&m, grads, n);
    attn_gpt_acts_free(&a);
    attn_gpt_free(&m);
    free(ids), free(targets);
    return loss;
}

static float step_at(int how, int tie, int bf16, int B, float **grads, size_t *n) {
    return steps_at(how, tie, bf16, B, ZERO_ONCE, grads, n);
}

static void lean_equals_plain_at(int tie, int bf16, int B) {
    float *g0, *g1, *g2;
    size_t n0, n1, n2;
    const float l0 = step_at(0, tie, bf16, B, &g0, &n0), l1 = step_at(1, tie, bf16, B, &g1, &n1),
                l2 = step_at(2, tie, bf16, B, &g2, &n2);
    cr_assert(n0 == n1 && n1 == n2);
    cr_assert(memcmp(&l0, &l1, sizeof l0) == 0 && memcmp(&l0, &l2, sizeof l0) == 0,
              "loss %.9g / %.9g / %.9g", (double)l0, (double)l1, (double)l2);
    cr_assert(memcmp(g1, g2, n1 * sizeof(float)) == 0, "forward_backward == forward + backward");
    double worst = 0;
    for (size_t i = 0; i < n0; i++) {
        const double d = fabs((double)g0[i] - (double)g1[i]) / (1e-3 + fabs((double)g0[i]));
        if (d > worst) worst = d;
    }
    cr_assert(worst < 1e-5, "lean gradients differ from the plain path's by %g", worst);
    free(g0), free(g1), free(g2);
}

static void lean_equals_plain(int tie) {
    lean_equals_plain_at(tie, 0, 2);
}

Test(gpt_lean, bf16_equals_the_plain_bf16_path) {
    attn_error err;
    if (attn_precision_check(ATTN_PRECISION_BF16, &err) != ATTN_OK)
        cr_skip_test("no AVX512-BF16 on this CPU");
    lean_equals_plain_at(1, 1, 2);
    lean_equals_plain_at(1, 1, 9);
}

Test(gpt_lean, equals_the_plain_path) {
    lean_equals_plain(0);
}

Test(gpt_lean, equals_the_plain_path_tied) {
    lean_equals_plain(1);
}

Test(gpt_lean, same_bits_at_1_2_3_threads) {
    attn_error err;
    const int has_bf16 = attn_precision_check(ATTN_PRECISION_BF16, &err) == ATTN_OK;
    for (int bf16 = 0; bf16 <= has_bf16; bf16++) {
        float *ref = NULL;
        size_t n = 0;
        float lref = 0;
        for (int threads = 1; threads <= 3; threads++) {
            omp_set_num_threads(threads);
            float *g;
            size_t k;
            const float l = step_at(2, 0, bf16, bf16 ? 9 : 2, &g, &k);
            if (!ref) {
                ref = g, n = k, lref = l;
                continue;
            }
            cr_assert(k == n && memcmp(&l, &lref, sizeof l) == 0 &&
                          memcmp(g, ref, n * sizeof(float)) == 0,
                      "bf16 %d: %d threads", bf16, threads);
            free(g);
        }
        free(ref);
    }
}

Test(gpt_lean, forward_without_targets_refused) {
    const attn_gpt_config c = cfg(0);
    const int B = 2, N = B * T;
    attn_gpt m;
    attn_error err;
    cr_assert_eq(attn_gpt_init(&m, &c, NULL, &err), ATTN_OK);
    attn_gpt_acts a;
    cr_assert_eq(attn_gpt_acts_init_lean(&a, &m, B, T, &err), ATTN_OK);
    int32_t *ids = malloc(N * sizeof *ids), *targets = malloc(N * sizeof *targets);
    tokens(ids, targets, N);
    cr_assert_eq(attn_gpt_forward(&m, ids, NULL, B, T, NULL, &a, NULL, &err), ATTN_ERR_INVALID_ARG);
    cr_assert(strstr(err.msg, "needs targets"), "%s", err.msg);
    cr_assert_eq(attn_gpt_forward_backward(&m, ids, NULL, B, T, NULL, &a, 1, NULL, &err),
                 ATTN_ERR_INVALID_ARG);
    attn_gpt_acts_free(&a);
    attn_gpt_free(&m);
    free(ids), free(targets);
}

/* Equal as numbers: a written zero may be -0 where 0 + -0 gave +0. */
static void deferred_equals_zeroed(int how, int tie, int bf16, int B) {
    float *g0, *g1;
    size_t n0, n1;
    steps_at(how, tie, bf16, B, ZERO_TWICE, &g0, &n0);
    steps_at(how, tie, bf16, B, DEFER_TWICE, &g1, &n1);
    cr_assert_eq(n0, n1);
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < n0; i++)
        if (!(g0[i] == g1[i]) && bad++ == 0) first = i;
    cr_assert(bad == 0, "how %d tie %d bf16 %d B %d: %zu gradients differ, first [%zu] %g vs %g",
              how, tie, bf16, B, bad, first, (double)g0[first], (double)g1[first]);
    free(g0), free(g1);
}

/* The trainer's deferred zeroing, for one engine. */
static void deferred_equals_zeroed_all(int bf16) {
    for (int tie = 0; tie <= 1; tie++) {
        deferred_equals_zeroed(0, tie, bf16, 2);
        deferred_equals_zeroed(2, tie, bf16, 2);
        if (bf16) deferred_equals_zeroed(2, tie, bf16, 9); /* the head's dW in two products */
    }
}

Test(gpt_lean, deferred_zeroing_gives_the_zeroed_gradients) {
    deferred_equals_zeroed_all(0);
}

/* A case this CPU cannot run is skipped, never logged as a warning: Criterion
 * exits 1 after any warning, with every test passing. */
Test(gpt_lean, deferred_zeroing_gives_the_zeroed_gradients_bf16) {
    attn_error err;
    if (attn_precision_check(ATTN_PRECISION_BF16, &err) != ATTN_OK)
        cr_skip_test("no AVX512-BF16 on this CPU (or ATTN_SIMD caps it)");
    deferred_equals_zeroed_all(1);
}

Test(gpt_lean, refused_backward_leaves_no_gradient_unset) {
    attn_error err;
    if (attn_precision_check(ATTN_PRECISION_BF16, &err) != ATTN_OK)
        cr_skip_test("no AVX512-BF16 on this CPU");
    const attn_gpt_config c = cfg(0);
    attn_gpt m;
    attn_rng rng;
    attn_rng_seed(&rng, 1);
    cr_assert_eq(attn_gpt_init(&m, &c, &rng, &err), ATTN_OK);
    cr_assert_eq(attn_gpt_set_precision(&m, ATTN_PRECISION_BF16, &err), ATTN_OK, "%s", err.msg);
    attn_gpt_acts a;
    cr_assert_eq(attn_gpt_acts_init_lean(&a, &m, 2, T, &err), ATTN_OK);
    poison_grads(&m);
    attn_gpt_zero_grad_deferred(&m);
    cr_assert_eq(attn_gpt_backward(&m, &a, 1.0f, &err), ATTN_ERR_STATE); /* no forward yet */
    const attn_param_list *L = attn_gpt_params(&m);
    int unset = 0;
    for (int i = 0; i < L->count; i++) {
        unset += L->items[i].grad_unset && *L->items[i].grad_unset;
        for (size_t k = 0; k < L->items[i].numel; k++)
            cr_assert(L->items[i].grad[k] == 0.0f, "%s[%zu] = %g", L->items[i].name, k,
                      (double)L->items[i].grad[k]);
    }
    cr_assert_eq(unset, 0);
    attn_gpt_acts_free(&a);
    attn_gpt_free(&m);
}
