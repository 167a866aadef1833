/* Models as a description (attn/gpt_family.h): a family made from a build
 * function alone trains; the head has its own width (the loss and the
 * lean path follow it); the backward stops below the lowest trainable
 * layer; a Linear carries a LoRA adapter (attn/lora.h), forward and
 * backward, alone and in the model. Gradients against central differences
 * of the double reference (tests/support/gpt_ref.c). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attn/generate.h"
#include "attn/gpt_family.h"
#include "attn/lora.h"
#include "attn/optim.h"
#include "attn/weights_format.h"
#include "support/gpt_ref.h"

static attn_gpt_config small_cfg(void) {
    attn_gpt_config c = {.vocab_size = 11,
                         .context_length = 8,
                         .emb_dim = 8,
                         .n_heads = 2,
                         .n_layers = 2,
                         .qkv_bias = 1};
    return c;
}

/* The toy family: the book's GPT with a 3-way classifier head (chapter 6's
 * nn.Linear(emb_dim, 3), with its bias). Nothing else is written for it. */
static attn_status classifier(attn_gpt *m, const attn_gpt_build *opts, attn_error *err) {
    (void)opts;
    attn_status s = attn_gpt_add_embedding(m, err);
    for (int i = 0; s == ATTN_OK && i < m->cfg.n_layers; i++)
        s = attn_gpt_add_block(m, err);
    if (s == ATTN_OK) s = attn_gpt_add_final_norm(m, err);
    return s == ATTN_OK ? attn_gpt_add_head(m, 3, 1, err) : s;
}

static void make(attn_gpt *m, const attn_gpt_config *cfg, attn_gpt_build_fn build,
                 const attn_gpt_build *opts, uint64_t seed) {
    attn_rng rng;
    attn_rng_seed(&rng, seed);
    attn_error err;
    cr_assert_eq(attn_gpt_init_family(m, cfg, build, opts, &rng, &err), ATTN_OK, "%s", err.msg);
}

/* (B, T) ids and 3-way targets: the class of a position is its token mod 3. */
static void batch(int32_t *ids, int32_t *tg, int n, int V, int step) {
    for (int i = 0; i < n; i++) {
        ids[i] = (int32_t)((i * 7 + step * 5 + 3) % V);
        tg[i] = ids[i] % 3;
    }
}

static const attn_param *param(const attn_gpt *m, const char *name) {
    const attn_param *p = attn_param_list_find(attn_gpt_params(m), name);
    cr_assert(p != NULL, "no %s", name);
    return p;
}

Test(gpt_family, a_toy_family_from_a_build_function_trains_with_a_frozen_block) {
    const attn_gpt_config cfg = small_cfg();
    attn_gpt m;
    make(&m, &cfg, classifier, NULL, 5);
    attn_error err;
    int n = 0;
    const attn_gpt_layer *l = attn_gpt_layers(&m, &n);
    cr_assert_eq(n, 5, "embedding, 2 blocks, final norm, head");
    cr_expect(l[0].kind == ATTN_GPT_LAYER_EMBEDDING && l[1].kind == ATTN_GPT_LAYER_BLOCK &&
              l[3].kind == ATTN_GPT_LAYER_NORM && l[4].kind == ATTN_GPT_LAYER_HEAD);
    cr_expect_eq(attn_gpt_head_width(&m), 3);
    const attn_param *w = param(&m, "out_head.weight");
    cr_expect(w->shape[0] == 3 && w->shape[1] == cfg.emb_dim);
    cr_expect_eq(param(&m, "out_head.bias")->numel, 3);
    cr_expect_eq(l[4].nparams, 2);
    /* Chapter 6's freezing: all but the top (block 1, final norm, head). */
    cr_assert_eq(attn_gpt_set_trainable(&m, "trf_blocks.0.", 0, &err), ATTN_OK, "%s", err.msg);
    cr_expect_eq(attn_gpt_backward_stop(&m), 0, "the embeddings train: the whole way down");
    cr_assert_eq(attn_gpt_set_trainable(&m, "tok_emb.", 0, &err), ATTN_OK, "%s", err.msg);
    cr_assert_eq(attn_gpt_set_trainable(&m, "pos_emb.", 0, &err), ATTN_OK, "%s", err.msg);
    cr_expect_eq(attn_gpt_backward_stop(&m), 2, "the backward stops at block 1");
    const attn_param_list *L = attn_gpt_params(&m);
    float *before = malloc(L->values_numel * sizeof(float));
    memcpy(before, L->values, L->values_numel * sizeof(float));
    attn_adamw opt;
    const attn_adamw_config ac = attn_adamw_defaults();
    cr_assert_eq(attn_adamw_init(&opt, L, &ac, &err), ATTN_OK, "%s", err.msg);
    const int B = 4, T = 8;
    int32_t ids[32], tg[32];
    attn_gpt_acts acts;
    cr_assert_eq(attn_gpt_acts_init(&acts, &m, B, T, &err), ATTN_OK, "%s", err.msg);
    float first = 0, last = 0;
    for (int s = 0; s < 40; s++) {
        batch(ids, tg, B * T, cfg.vocab_size, s);
        attn_gpt_zero_grad(&m);
        cr_assert_eq(attn_gpt_forward_backward(&m, ids, tg, B, T, NULL, &acts, 1.0f, &last, &err),
                     ATTN_OK, "%s", err.msg);
        cr_assert_eq(attn_adamw_step(&opt, L, 1e-2, &err), ATTN_OK, "%s", err.msg);
        if (s == 0) first = last;
    }
    cr_expect(first > 0.9f && last < 0.5f * first, "loss %g -> %g", first, last);
    for (int i = 0; i < L->count; i++) {
        const attn_param *p = &L->items[i];
        const int same = memcmp(before + p->offset, p->data, p->numel * sizeof(float)) == 0;
        cr_expect(p->trainable ? !same : same, "%s: %s", p->name,
                  p->trainable ? "trained" : "frozen, unchanged");
    }
    /* The logits are (B, T, 3) and the targets are classes. */
    cr_expect_eq(acts.logits[(size_t)B * T * 3 - 1], acts.logits[(size_t)B * T * 3 - 1]);
    tg[5] = 3;
    cr_expect_eq(attn_gpt_forward(&m, ids, tg, B, T, NULL, &acts, NULL, &err),
                 ATTN_ERR_INVALID_ARG);
    cr_expect(strstr(err.msg, "the head's width 3") != NULL, "%s", err.msg);
    attn_adamw_free(&opt);
    attn_gpt_acts_free(&acts);
    free(before);
    attn_gpt_free(&m);
}

/* Every trainable gradient of m (plain activations, loss over B x T)
 * against central differences of the double reference; frozen tensors
 * have none. */
static void fd_check(attn_gpt *m, int B, int T) {
    int32_t ids[16], tg[16];
    batch(ids, tg, B * T, m->cfg.vocab_size, 1);
    for (int i = 0; i < B * T; i++)
        tg[i] = (ids[i] * 5 + 2) % attn_gpt_head_width(m);
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
    for (int p = 0; p < L->count; p++) {
        if (!L->items[p].trainable) {
            cr_expect(L->items[p].grad == NULL, "%s: frozen, no gradient", L->items[p].name);
            continue;
        }
        for (size_t j = 0; j < L->items[p].numel; j++) {
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
    }
    gref_params_free(pd, L);
    attn_gpt_acts_free(&acts);
}

Test(gpt_family, the_toy_family_s_gradients_are_the_reference_s) {
    const attn_gpt_config cfg = small_cfg();
    attn_gpt m;
    make(&m, &cfg, classifier, NULL, 7);
    attn_error err;
    cr_assert_eq(attn_gpt_set_trainable(&m, "trf_blocks.0.", 0, &err), ATTN_OK, "%s", err.msg);
    cr_assert_eq(attn_gpt_set_trainable(&m, "tok_emb.", 0, &err), ATTN_OK, "%s", err.msg);
    cr_assert_eq(attn_gpt_set_trainable(&m, "pos_emb.", 0, &err), ATTN_OK, "%s", err.msg);
    fd_check(&m, 2, 5);
    attn_gpt_free(&m);
}

/* Below the lowest trainable layer nothing runs: block 0's saved
 * activations poisoned (NaN) after the forward leave the backward's
 * gradients finite and the unpoisoned run's bits when block 0 is frozen
 * with everything under it; with block 0 trainable the poison reaches
 * them. frozen: prefixes, each ended by a NUL, the list by two. */
static void backward_grads(const char *frozen, int poison, int lean, float **grads, size_t *n) {
    const attn_gpt_config cfg = small_cfg();
    attn_gpt m;
    make(&m, &cfg, NULL, NULL, 3);
    attn_error err;
    if (lean > 1 && attn_gpt_set_precision(&m, ATTN_PRECISION_BF16, &err) != ATTN_OK)
        lean = 1; /* no AVX512-BF16 here: fp32 */
    for (const char *f = frozen; *f; f += strlen(f) + 1)
        cr_assert_eq(attn_gpt_set_trainable(&m, f, 0, &err), ATTN_OK, "%s", err.msg);
    const int B = 2, T = 6;
    const size_t NC = (size_t)B * T * (size_t)cfg.emb_dim;
    int32_t ids[12], tg[12];
    batch(ids, tg, B * T, cfg.vocab_size, 2);
    attn_gpt_acts acts;
    cr_assert_eq(lean ? attn_gpt_acts_init_lean(&acts, &m, B, T, &err)
                      : attn_gpt_acts_init(&acts, &m, B, T, &err),
                 ATTN_OK, "%s", err.msg);
    cr_assert_eq(attn_gpt_forward(&m, ids, tg, B, T, NULL, &acts, NULL, &err), ATTN_OK);
    for (size_t i = 0; poison && i < NC / (size_t)cfg.emb_dim; i++) /* its norms' backward */
        acts.blocks[0].ln1_rstd[i] = acts.blocks[0].ln2_rstd[i] = NAN;
    attn_gpt_zero_grad(&m);
    cr_assert_eq(attn_gpt_backward(&m, &acts, 1.0f, &err), ATTN_OK, "%s", err.msg);
    const attn_param_list *L = attn_gpt_params(&m);
    *n = L->grads_numel;
    *grads = malloc(*n * sizeof(float));
    memcpy(*grads, L->grads, *n * sizeof(float));
    attn_gpt_acts_free(&acts);
    attn_gpt_free(&m);
}

static int all_finite(const float *v, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!isfinite(v[i])) return 0;
    return 1;
}

Test(gpt_family, the_backward_stops_below_the_lowest_trainable_layer) {
    const char *lower = "tok_emb.\0pos_emb.\0trf_blocks.0.\0";
    for (int lean = 0; lean < 3; lean++) { /* plain, lean, lean on bf16 */
        float *clean, *poisoned, *reached;
        size_t n, n2, n3;
        backward_grads(lower, 0, lean, &clean, &n);
        backward_grads(lower, 1, lean, &poisoned, &n2);
        cr_assert_eq(n, n2);
        cr_expect(all_finite(poisoned, n) && memcmp(clean, poisoned, n * sizeof(float)) == 0,
                  "block 0's backward did not run: the same bits (lean %d)", lean);
        backward_grads("tok_emb.\0pos_emb.\0", 1, lean, &reached, &n3);
        cr_expect(!all_finite(reached, n3), "with block 0 trainable its backward reads the poison");
        free(clean);
        free(poisoned);
        free(reached);
    }
}

/* The lean head (128-row chunks, no (B, T, V) tensor) at the head's width:
 * the plain path's loss bits and its gradients to rounding. */
Test(gpt_family, the_lean_head_follows_the_head_width) {
    attn_gpt_config cfg = small_cfg();
    cfg.context_length = 40;
    attn_gpt a, b;
    make(&a, &cfg, classifier, NULL, 9);
    make(&b, &cfg, classifier, NULL, 9);
    const int B = 4, T = 40;
    int32_t ids[160], tg[160];
    batch(ids, tg, B * T, cfg.vocab_size, 3);
    attn_gpt_acts pa, la;
    attn_error err;
    cr_assert_eq(attn_gpt_acts_init(&pa, &a, B, T, &err), ATTN_OK, "%s", err.msg);
    cr_assert_eq(attn_gpt_acts_init_lean(&la, &b, B, T, &err), ATTN_OK, "%s", err.msg);
    float lp, ll;
    attn_gpt_zero_grad(&a);
    attn_gpt_zero_grad(&b);
    cr_assert_eq(attn_gpt_forward_backward(&a, ids, tg, B, T, NULL, &pa, 1.0f, &lp, &err), ATTN_OK);
    cr_assert_eq(attn_gpt_forward_backward(&b, ids, tg, B, T, NULL, &la, 1.0f, &ll, &err), ATTN_OK);
    cr_expect_eq(lp, ll, "loss %.9g vs lean %.9g", lp, ll);
    const attn_param_list *A = attn_gpt_params(&a), *Bl = attn_gpt_params(&b);
    for (int i = 0; i < A->count; i++)
        for (size_t j = 0; j < A->items[i].numel; j++) {
            const float x = A->items[i].grad[j], y = Bl->items[i].grad[j];
            cr_assert(fabsf(x - y) <= 1e-6f + 1e-4f * fabsf(x), "%s[%zu]: %g vs lean %g",
                      A->items[i].name, j, x, y);
        }
    attn_gpt_acts_free(&pa);
    attn_gpt_acts_free(&la);
    attn_gpt_free(&a);
    attn_gpt_free(&b);
}

/* A family's list is checked: the embedding, the blocks, the head. */
static attn_status no_head(attn_gpt *m, const attn_gpt_build *opts, attn_error *err) {
    (void)opts;
    attn_status s = attn_gpt_add_embedding(m, err);
    for (int i = 0; s == ATTN_OK && i < m->cfg.n_layers; i++)
        s = attn_gpt_add_block(m, err);
    return s;
}

Test(gpt_family, a_list_out_of_shape_is_refused_by_name) {
    const attn_gpt_config cfg = small_cfg();
    attn_gpt m;
    attn_error err;
    cr_expect_eq(attn_gpt_init_family(&m, &cfg, no_head, NULL, NULL, &err), ATTN_ERR_INVALID_ARG);
    cr_expect(strstr(err.msg, "the head last") != NULL, "%s", err.msg);
    attn_gpt_config tied = cfg;
    tied.tie_weights = 1;
    const attn_gpt_build wide = {.head_width = 3};
    cr_expect_eq(attn_gpt_init_family(&m, &tied, NULL, &wide, NULL, &err), ATTN_ERR_INVALID_ARG);
    cr_expect(strstr(err.msg, "tie_weights") != NULL, "%s", err.msg);
    const attn_gpt_build none = {.lora_rank = 2, .lora_alpha = 1, .lora_prefix = "nothing."};
    cr_expect_eq(attn_gpt_init_family(&m, &cfg, NULL, &none, NULL, &err), ATTN_ERR_NOT_FOUND);
    cr_expect(strstr(err.msg, "nothing.") != NULL, "%s", err.msg);
}

/* ------------------------------------------------------------------ LoRA */

/* y = x W^T + b + alpha (x A) B and every gradient, by hand in double. */
Test(gpt_family, a_lora_linear_is_the_hand_written_reference) {
    enum { N = 70, IN = 5, OUT = 4, R = 3 }; /* N past ATTN_LORA_ROWS: two row blocks */
    const float alpha = 1.5f;
    attn_rng rng;
    attn_rng_seed(&rng, 11);
    attn_error err;
    attn_linear lin;
    attn_lora lora;
    cr_assert_eq(attn_linear_init(&lin, IN, OUT, 1, &rng, &err), ATTN_OK);
    cr_assert_eq(attn_lora_init(&lora, IN, OUT, R, alpha, &rng, &err), ATTN_OK);
    for (int i = 0; i < R * OUT; i++)
        cr_assert_eq(lora.B[i], 0.0f, "B starts at zero");
    gref_fill(lora.B, R * OUT, 4, 0.5f); /* a trained B */
    lin.lora = &lora;
    static float x[N * IN], y[N * OUT], dy[N * OUT], dx[N * IN];
    gref_fill(x, N * IN, 1, 1.0f);
    gref_fill(dy, N * OUT, 2, 1.0f);
    attn_linear_forward(&lin, x, y, N);
    attn_linear_backward(&lin, x, dy, dx, N);
    static double h[N * R], dh[N * R];
    for (int n = 0; n < N; n++)
        for (int k = 0; k < R; k++) {
            double s = 0, d = 0;
            for (int c = 0; c < IN; c++)
                s += (double)x[n * IN + c] * lora.A[c * R + k];
            for (int o = 0; o < OUT; o++)
                d += alpha * (double)dy[n * OUT + o] * lora.B[k * OUT + o];
            h[n * R + k] = s, dh[n * R + k] = d;
        }
    for (int n = 0; n < N; n++)
        for (int o = 0; o < OUT; o++) {
            double want = lin.bias[o];
            for (int c = 0; c < IN; c++)
                want += (double)x[n * IN + c] * lin.weight[o * IN + c];
            for (int k = 0; k < R; k++)
                want += alpha * h[n * R + k] * lora.B[k * OUT + o];
            cr_assert(fabs(y[n * OUT + o] - want) <= 1e-5 * (1 + fabs(want)), "y[%d][%d]", n, o);
        }
    for (int c = 0; c < IN; c++)
        for (int k = 0; k < R; k++) { /* dA = x^T dh */
            double want = 0;
            for (int n = 0; n < N; n++)
                want += (double)x[n * IN + c] * dh[n * R + k];
            cr_assert(fabs(lora.grad_A[c * R + k] - want) <= 1e-4 * (1 + fabs(want)), "dA");
        }
    for (int k = 0; k < R; k++)
        for (int o = 0; o < OUT; o++) { /* dB = alpha h^T dy */
            double want = 0;
            for (int n = 0; n < N; n++)
                want += alpha * h[n * R + k] * dy[n * OUT + o];
            cr_assert(fabs(lora.grad_B[k * OUT + o] - want) <= 1e-4 * (1 + fabs(want)), "dB");
        }
    for (int n = 0; n < N; n++)
        for (int c = 0; c < IN; c++) { /* dx = dy W + dh A^T */
            double want = 0;
            for (int o = 0; o < OUT; o++)
                want += (double)dy[n * OUT + o] * lin.weight[o * IN + c];
            for (int k = 0; k < R; k++)
                want += dh[n * R + k] * lora.A[c * R + k];
            cr_assert(fabs(dx[n * IN + c] - want) <= 1e-5 * (1 + fabs(want)), "dx[%d][%d]", n, c);
        }
    attn_linear_free(&lin);
    attn_lora_free(&lora);
}

/* A's draw is torch's kaiming_uniform_(A, a=sqrt(5)) on (in, rank), which
 * is nn.Linear(rank, in)'s weight draw (torch.equal holds for the two). */
Test(gpt_family, lora_s_a_is_drawn_as_torch_draws_it) {
    attn_rng r1, r2;
    attn_rng_seed(&r1, 5);
    attn_rng_seed(&r2, 5);
    float a[21], w[21];
    attn_lora_draw(&r1, a, 21, 3);
    attn_linear_draw(&r2, w, 21, 3, 0);
    cr_expect(memcmp(a, w, sizeof a) == 0);
    for (int i = 0; i < 21; i++)
        cr_expect(fabsf(a[i]) <= 1.0f / sqrtf(3.0f));
}

static const attn_gpt_build LORA = {.lora_rank = 2, .lora_alpha = 2.0f};

Test(gpt_family, adapters_are_in_the_table_with_the_book_s_names) {
    const attn_gpt_config cfg = small_cfg();
    attn_gpt base, m;
    make(&base, &cfg, NULL, NULL, 3);
    make(&m, &cfg, NULL, &LORA, 3);
    const attn_param *A = param(&m, "trf_blocks.1.ff.layers.0.lora.A");
    const attn_param *Bp = param(&m, "trf_blocks.1.ff.layers.0.lora.B");
    cr_expect(A->shape[0] == cfg.emb_dim && A->shape[1] == 2);
    cr_expect(Bp->shape[0] == 2 && Bp->shape[1] == 4 * cfg.emb_dim);
    param(&m, "trf_blocks.0.att.W_query.linear.weight");
    param(&m, "trf_blocks.0.att.W_query.linear.bias");
    param(&m, "out_head.linear.weight");
    param(&m, "out_head.lora.B");
    cr_expect_eq(m.n_adapters, 6 * cfg.n_layers + 1, "every Linear");
    cr_expect_eq(attn_gpt_params(&m)->count, attn_gpt_params(&base)->count + 2 * m.n_adapters);
    /* The base weights are the plain model's (the adapters drawn after),
     * and with B zero the adapted model is the model, bit for bit. */
    const int B = 2, T = 6;
    int32_t ids[12], tg[12];
    batch(ids, tg, B * T, cfg.vocab_size, 0);
    attn_gpt_acts a1, a2;
    attn_error err;
    cr_assert_eq(attn_gpt_acts_init(&a1, &base, B, T, &err), ATTN_OK);
    cr_assert_eq(attn_gpt_acts_init(&a2, &m, B, T, &err), ATTN_OK);
    cr_assert_eq(attn_gpt_forward(&base, ids, NULL, B, T, NULL, &a1, NULL, &err), ATTN_OK);
    cr_assert_eq(attn_gpt_forward(&m, ids, NULL, B, T, NULL, &a2, NULL, &err), ATTN_OK);
    cr_expect(memcmp(a1.logits, a2.logits, (size_t)B * T * cfg.vocab_size * sizeof(float)) == 0);
    /* The one-token step does not run adapters: refused, not ignored. */
    attn_gpt_kv_cache kv;
    cr_expect_eq(attn_gpt_kv_init(&kv, &m, &err), ATTN_ERR_INVALID_ARG);
    cr_expect(strstr(err.msg, "LoRA") != NULL, "%s", err.msg);
    attn_gpt_acts_free(&a1);
    attn_gpt_acts_free(&a2);
    attn_gpt_free(&base);
    attn_gpt_free(&m);
}

/* With B trained (non-zero) every gradient, the adapters' and the base's
 * (through the fused Q/K/V product, out_proj, the feed-forward and the
 * head), is the reference's; with the base frozen (the book's appendix E)
 * only A and B have gradients. */
Test(gpt_family, adapted_gradients_are_the_reference_s) {
    const attn_gpt_config cfg = small_cfg();
    for (int frozen = 0; frozen < 2; frozen++) {
        attn_gpt m;
        make(&m, &cfg, NULL, &LORA, 13);
        cr_expect_eq(m.blocks[0].att.path, ATTN_MHA_FUSED);
        const attn_param_list *L = attn_gpt_params(&m);
        for (int i = 0; i < L->count; i++)
            if (L->items[i].role == ATTN_ROLE_LORA_B)
                gref_fill(L->items[i].data, L->items[i].numel, (uint32_t)i, 0.3f);
        attn_error err;
        for (int i = 0; frozen && i < L->count; i++)
            if (L->items[i].role != ATTN_ROLE_LORA_A && L->items[i].role != ATTN_ROLE_LORA_B)
                cr_assert_eq(attn_gpt_set_trainable(&m, L->items[i].name, 0, &err), ATTN_OK);
        fd_check(&m, 2, 5);
        attn_gpt_free(&m);
    }
}

/* On the bf16 engine the adapters run in fp32 beside the bf16 products
 * (the modules' bf16-only input copies step aside for an adapted Linear):
 * the gradients are the fp32 model's to bf16's rounding. */
Test(gpt_family, adapters_run_on_the_bf16_engine) {
    const attn_gpt_config cfg = small_cfg();
    attn_gpt a, b;
    make(&a, &cfg, NULL, &LORA, 17);
    make(&b, &cfg, NULL, &LORA, 17);
    attn_error err;
    if (attn_gpt_set_precision(&b, ATTN_PRECISION_BF16, &err) != ATTN_OK) {
        attn_gpt_free(&a), attn_gpt_free(&b);
        cr_skip_test("no AVX512-BF16 here");
    }
    const attn_param_list *La = attn_gpt_params(&a), *Lb = attn_gpt_params(&b);
    for (int i = 0; i < La->count; i++)
        if (La->items[i].role == ATTN_ROLE_LORA_B) {
            gref_fill(La->items[i].data, La->items[i].numel, (uint32_t)i, 0.3f);
            gref_fill(Lb->items[i].data, Lb->items[i].numel, (uint32_t)i, 0.3f);
        }
    const int B = 2, T = 6;
    int32_t ids[12], tg[12];
    batch(ids, tg, B * T, cfg.vocab_size, 4);
    for (int lean = 0; lean < 2; lean++) {
        attn_gpt_acts x, y;
        cr_assert_eq(lean ? attn_gpt_acts_init_lean(&x, &a, B, T, &err)
                          : attn_gpt_acts_init(&x, &a, B, T, &err),
                     ATTN_OK);
        cr_assert_eq(lean ? attn_gpt_acts_init_lean(&y, &b, B, T, &err)
                          : attn_gpt_acts_init(&y, &b, B, T, &err),
                     ATTN_OK);
        attn_gpt_zero_grad(&a);
        attn_gpt_zero_grad_deferred(&b);
        float la, lb;
        cr_assert_eq(attn_gpt_forward_backward(&a, ids, tg, B, T, NULL, &x, 1.0f, &la, &err), 0);
        cr_assert_eq(attn_gpt_forward_backward(&b, ids, tg, B, T, NULL, &y, 1.0f, &lb, &err), 0);
        cr_expect(fabsf(la - lb) <= 2e-2f * fabsf(la), "loss %g vs bf16 %g", la, lb);
        float gmax = 0; /* W_key.bias's gradient is 0 exactly: its noise is the model's */
        for (size_t j = 0; j < La->grads_numel; j++)
            gmax = fmaxf(gmax, fabsf(La->grads[j]));
        for (int i = 0; i < La->count; i++) {
            const attn_param *p = &La->items[i], *q = &Lb->items[i];
            float top = 0, diff = 0;
            for (size_t j = 0; j < p->numel; j++) {
                top = fmaxf(top, fabsf(p->grad[j]));
                diff = fmaxf(diff, fabsf(p->grad[j] - q->grad[j]));
            }
            cr_expect(diff <= 5e-2f * top + 1e-3f * gmax, "%s (lean %d): %g off, largest %g",
                      p->name, lean, diff, top);
        }
        attn_gpt_acts_free(&x);
        attn_gpt_acts_free(&y);
    }
    attn_gpt_free(&a);
    attn_gpt_free(&b);
}

/* What runs a language model refuses a classifier and an adapted model by
 * name, before it reads a logit: generation, the export. */
Test(gpt_family, language_model_paths_refuse_other_heads_and_adapters) {
    const attn_gpt_config cfg = small_cfg();
    attn_gpt c, l;
    make(&c, &cfg, classifier, NULL, 1);
    make(&l, &cfg, NULL, &LORA, 1);
    attn_error err;
    attn_generator g;
    const attn_generate_options o = {0};
    cr_expect_eq(attn_generator_init(&g, &c, NULL, &o, &err), ATTN_ERR_INVALID_ARG);
    cr_expect(strstr(err.msg, "generation: the model's head is 3 wide") != NULL, "%s", err.msg);
    cr_expect_eq(attn_gpt_export(&l, "/nonexistent/x.safetensors", ATTN_WEIGHTS_HF, &err),
                 ATTN_ERR_INVALID_ARG);
    cr_expect(strstr(err.msg, "LoRA") != NULL, "%s", err.msg);
    attn_gpt_free(&c);
    attn_gpt_free(&l);
}
