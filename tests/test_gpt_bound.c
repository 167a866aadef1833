/* A GPT on the caller's arrays (attn_h_bgpt_*, attn.torch.GPTModel's C side)
 * and attn_gpt_backward_logits: the backward from the cross-entropy's own
 * d_logits equals attn_gpt_backward; a bound model computes what the model
 * that owns the same weights computes, to rounding (logits, loss, gradients into the
 * caller's arrays, with the caller's dropout masks); the plain and lean loss
 * paths agree; wrong counts are refused. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attn/cross_entropy.h"
#include "attn/gpt.h"
#include "attn/handles.h"

enum { B = 2, T = 70, N = B * T, V = 300 };

static const char *JSON = "{\"vocab_size\":300,\"context_length\":70,\"emb_dim\":16,"
                          "\"n_heads\":2,\"n_layers\":2,\"drop_rate\":0.1,\"qkv_bias\":true}";

static attn_gpt_config cfg(void) {
    attn_gpt_config c = {.vocab_size = V,
                         .context_length = T,
                         .emb_dim = 16,
                         .n_heads = 2,
                         .n_layers = 2,
                         .drop_rate = 0.1,
                         .qkv_bias = 1};
    return c;
}

static void tokens(int64_t *ids, int64_t *targets) {
    for (int i = 0; i < N; i++) {
        ids[i] = (i * 37 + 11) % V;
        targets[i] = (i * 53 + 7) % V;
    }
}

static void check_close(const float *a, const float *b, size_t n, float tol, const char *what) {
    for (size_t i = 0; i < n; i++)
        cr_assert(fabsf(a[i] - b[i]) <= tol * (1.0f + fabsf(b[i])), "%s[%zu]: %g vs %g", what, i,
                  (double)a[i], (double)b[i]);
}

Test(gpt_bound, backward_logits_equals_backward) {
    const attn_gpt_config c = cfg();
    attn_gpt m;
    attn_rng rng;
    attn_error err;
    attn_rng_seed(&rng, 1);
    cr_assert_eq(attn_gpt_init(&m, &c, &rng, &err), ATTN_OK, "%s", err.msg);
    attn_gpt_acts a;
    cr_assert_eq(attn_gpt_acts_init(&a, &m, B, T, &err), ATTN_OK, "%s", err.msg);
    int64_t ids[N], targets[N];
    tokens(ids, targets);
    cr_assert_eq(attn_gpt_forward_i64(&m, ids, targets, B, T, NULL, &a, NULL, &err), ATTN_OK);
    attn_gpt_zero_grad(&m);
    cr_assert_eq(attn_gpt_backward(&m, &a, 1.0f, &err), ATTN_OK, "%s", err.msg);
    const attn_param_list *L = attn_gpt_params(&m);
    const size_t n0 = L->items[0].numel, nh = L->items[L->count - 1].numel;
    float *want0 = malloc(n0 * sizeof(float)), *wanth = malloc(nh * sizeof(float));
    memcpy(want0, L->items[0].grad, n0 * sizeof(float));
    memcpy(wanth, L->items[L->count - 1].grad, nh * sizeof(float));
    float *d = calloc((size_t)N * V, sizeof(float)); /* the same d_logits, handed in */
    attn_cross_entropy_backward(a.logits, a.targets, a.lse, 1.0f, d, N, V);
    attn_gpt_zero_grad(&m);
    cr_assert_eq(attn_gpt_backward_logits(&m, &a, d, &err), ATTN_OK, "%s", err.msg);
    check_close(L->items[0].grad, want0, n0, 0.0f, "tok_emb grad");
    check_close(L->items[L->count - 1].grad, wanth, nh, 0.0f, "out_head grad");
    attn_gpt_acts lean;
    cr_assert_eq(attn_gpt_acts_init_lean(&lean, &m, B, T, &err), ATTN_OK);
    cr_assert_eq(attn_gpt_backward_logits(&m, &lean, d, &err), ATTN_ERR_INVALID_ARG);
    attn_gpt_acts_free(&lean);
    free(d), free(want0), free(wanth);
    attn_gpt_acts_free(&a);
    attn_gpt_free(&m);
}

/* The reference: a seed-1 model owning its weights; the bound one gets
 * copies of them in arrays of its own. */
typedef struct fixture {
    attn_gpt ref;
    attn_h_bgpt *g;
    int n;
    float **data, **grad;
} fixture;

static void setup(fixture *f) {
    const attn_gpt_config c = cfg();
    attn_rng rng;
    attn_error err;
    attn_rng_seed(&rng, 1);
    cr_assert_eq(attn_gpt_init(&f->ref, &c, &rng, &err), ATTN_OK, "%s", err.msg);
    cr_assert_eq(attn_h_bgpt_create(JSON, &f->g, &err), ATTN_OK, "%s", err.msg);
    const attn_param_list *L = attn_h_bgpt_params(f->g), *R = attn_gpt_params(&f->ref);
    cr_assert_eq(L->count, R->count);
    f->n = L->count;
    f->data = calloc((size_t)f->n, sizeof(float *));
    f->grad = calloc((size_t)f->n, sizeof(float *));
    for (int i = 0; i < f->n; i++) {
        cr_assert_str_eq(L->items[i].name, R->items[i].name);
        f->data[i] = malloc(R->items[i].numel * sizeof(float));
        memcpy(f->data[i], R->items[i].data, R->items[i].numel * sizeof(float));
        f->grad[i] = calloc(R->items[i].numel, sizeof(float));
    }
    cr_assert_eq(attn_h_bgpt_bind(f->g, f->data, f->grad, f->n, &err), ATTN_OK, "%s", err.msg);
}

static void teardown(fixture *f) {
    attn_h_bgpt_free(f->g); /* puts its own buffers back, frees none of ours */
    for (int i = 0; i < f->n; i++) {
        free(f->data[i]);
        free(f->grad[i]);
    }
    free(f->data), free(f->grad);
    attn_gpt_free(&f->ref);
}

Test(gpt_bound, computes_what_the_owning_model_computes) {
    fixture f;
    setup(&f);
    attn_error err;
    int64_t ids[N], targets[N];
    tokens(ids, targets);
    /* eval logits */
    float *logits = malloc((size_t)N * V * sizeof(float));
    cr_assert_eq(attn_h_bgpt_forward(f.g, ids, NULL, B, T, 0, NULL, 0, 0, logits, NULL, &err),
                 ATTN_OK, "%s", err.msg);
    attn_gpt_acts a;
    cr_assert_eq(attn_gpt_acts_init(&a, &f.ref, B, T, &err), ATTN_OK);
    cr_assert_eq(attn_gpt_forward_i64(&f.ref, ids, NULL, B, T, NULL, &a, NULL, &err), ATTN_OK);
    /* to rounding: the arrays' alignment may change a kernel's peeling */
    check_close(logits, a.logits, (size_t)N * V, 1e-6f, "logits");
    /* training with given masks: one in three dropped */
    const size_t nk = attn_h_bgpt_mask_numel(f.g, B, T);
    cr_assert_eq(nk, (size_t)N * 16 + 2 * ((size_t)B * 2 * T * T + 2 * (size_t)N * 16));
    uint8_t *keep = malloc(nk);
    for (size_t i = 0; i < nk; i++)
        keep[i] = i % 3 != 0;
    attn_dropout_given dg;
    attn_dropout_given_init(&dg, keep, nk);
    const attn_forward_mode mode = {1, &dg.rng, ATTN_STREAM_GIVEN};
    float want = NAN, got = NAN, lean = NAN;
    attn_gpt_zero_grad(&f.ref);
    cr_assert_eq(attn_gpt_forward_i64(&f.ref, ids, targets, B, T, &mode, &a, &want, &err), ATTN_OK);
    cr_assert_eq(attn_gpt_backward(&f.ref, &a, 1.0f, &err), ATTN_OK);
    cr_assert_eq(attn_h_bgpt_forward(f.g, ids, targets, B, T, 1, keep, nk, 1, NULL, &got, &err),
                 ATTN_OK, "%s", err.msg);
    cr_assert(fabsf(got - want) <= 1e-6f, "%g vs %g", (double)got, (double)want);
    const attn_param_list *R = attn_gpt_params(&f.ref);
    for (int i = 0; i < f.n; i++)
        check_close(f.grad[i], R->items[i].grad, R->items[i].numel, 1e-6f, R->items[i].name);
    /* the lean loss path: the same loss, gradients to rounding */
    attn_h_bgpt_set_lean(f.g, 1);
    for (int i = 0; i < f.n; i++)
        memset(f.grad[i], 0, R->items[i].numel * sizeof(float));
    cr_assert_eq(attn_h_bgpt_forward(f.g, ids, targets, B, T, 1, keep, nk, 1, NULL, &lean, &err),
                 ATTN_OK, "%s", err.msg);
    cr_assert(fabsf(lean - want) <= 1e-6f, "%g vs %g", (double)lean, (double)want);
    for (int i = 0; i < f.n; i++)
        check_close(f.grad[i], R->items[i].grad, R->items[i].numel, 1e-5f, R->items[i].name);
    free(keep), free(logits);
    attn_gpt_acts_free(&a);
    teardown(&f);
}

Test(gpt_bound, refuses_wrong_counts) {
    fixture f;
    setup(&f);
    attn_error err;
    int64_t ids[N], targets[N];
    tokens(ids, targets);
    cr_assert_eq(attn_h_bgpt_bind(f.g, f.data, NULL, f.n - 1, &err), ATTN_ERR_SHAPE);
    uint8_t keep[4] = {1, 1, 1, 1};
    float loss;
    cr_assert_eq(attn_h_bgpt_forward(f.g, ids, targets, B, T, 1, keep, 4, 0, NULL, &loss, &err),
                 ATTN_ERR_SHAPE);
    cr_assert(strstr(err.msg, "mask bytes") != NULL, "%s", err.msg);
    cr_assert_eq(attn_h_bgpt_forward(f.g, ids, NULL, B, T, 0, NULL, 0, 0, NULL, &loss, &err),
                 ATTN_ERR_INVALID_ARG);
    cr_assert_eq(attn_h_bgpt_forward(f.g, ids, targets, B, T + 1, 0, NULL, 0, 0, NULL, &loss, &err),
                 ATTN_ERR_SHAPE);
    attn_h_bgpt *bad = NULL;
    cr_assert_eq(attn_h_bgpt_create("{\"vocab_size\":10}", &bad, &err), ATTN_ERR_INVALID_ARG, "%s",
                 err.msg);
    cr_assert_null(bad);
    teardown(&f);
}
