/* Activations made once for (B_max, T_max) run any smaller batch (the book's
 * chapter-7 collate pads each batch to its own length): a training step at
 * (B, T) on them, after one at the full shape, gives the bits of the same
 * step on activations made for exactly (B, T) — loss, logits, every
 * gradient — in fp32 and bf16, with dropout drawn (training mode, the same
 * generator), for the book's model and a variant (RoPE, grouped-query,
 * QK-norm), on the plain and the lean head; no buffer is made again (every
 * pointer, the attention's fused state's included, unchanged). A batch past
 * the activations' shape is refused naming both; attn_gpt_acts_reserve
 * keeps what holds a batch and grows to cover one that does not. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attention/mha_fused.h"
#include "attn/cross_entropy.h"
#include "attn/gpt.h"

enum { BMAX = 3, TMAX = 12, V = 97 };

static attn_gpt_config cfg(const char *variant) {
    attn_gpt_config c = {.vocab_size = V,
                         .context_length = 16,
                         .emb_dim = 16,
                         .n_heads = 2,
                         .n_layers = 2,
                         .drop_rate = 0.1,
                         .qkv_bias = 1};
    attn_error err;
    if (variant) cr_assert_eq(attn_gpt_config_set_json(&c, variant, &err), ATTN_OK, "%s", err.msg);
    return c;
}

static void tokens(int32_t *ids, int32_t *targets, int N, int salt) {
    for (int i = 0; i < N; i++) {
        ids[i] = (int32_t)((i * 37 + 11 + salt) % V);
        targets[i] = i % 5 == 4 ? ATTN_IGNORE_INDEX : (int32_t)((i * 53 + 7 + salt) % V);
    }
}

static void make(attn_gpt *m, const char *variant, int bf16) {
    attn_rng rng;
    attn_error err;
    attn_rng_seed(&rng, 1);
    const attn_gpt_config c = cfg(variant);
    cr_assert_eq(attn_gpt_init(m, &c, &rng, &err), ATTN_OK, "%s", err.msg);
    if (bf16)
        cr_assert_eq(attn_gpt_set_precision(m, ATTN_PRECISION_BF16, &err), ATTN_OK, "%s", err.msg);
}

/* What one step leaves: the loss, the logits (plain) and every gradient. */
typedef struct result {
    float loss;
    float *logits, *grads;
    size_t n_logits, n_grads;
} result;

static void result_free(result *r) {
    free(r->logits), free(r->grads);
}

/* A training step at (B, T) on a, dropout drawn from seed; lean: one
 * forward_backward, else forward then backward. */
static result step(attn_gpt *m, attn_gpt_acts *a, int B, int T, int lean, uint64_t seed) {
    const int N = B * T;
    int32_t *ids = malloc((size_t)N * sizeof *ids), *targets = malloc((size_t)N * sizeof *targets);
    tokens(ids, targets, N, B + T);
    attn_rng drop;
    attn_rng_seed(&drop, seed);
    const attn_forward_mode mode = {1, &drop, ATTN_STREAM_TORCH_CPU};
    attn_error err;
    result r = {NAN, NULL, NULL, 0, 0};
    attn_gpt_zero_grad(m);
    attn_status s =
        lean ? attn_gpt_forward_backward(m, ids, targets, B, T, &mode, a, 1.0f, &r.loss, &err)
             : attn_gpt_forward(m, ids, targets, B, T, &mode, a, &r.loss, &err);
    if (!lean && s == ATTN_OK) s = attn_gpt_backward(m, a, 1.0f, &err);
    cr_assert_eq(s, ATTN_OK, "(%d, %d): %s", B, T, err.msg);
    cr_assert(a->B == B && a->T == T, "the acts hold the forward's shape");
    if (!lean) {
        r.n_logits = (size_t)N * (size_t)V;
        r.logits = malloc(r.n_logits * sizeof(float));
        memcpy(r.logits, a->logits, r.n_logits * sizeof(float));
    }
    const attn_param_list *L = attn_gpt_params(m);
    r.n_grads = attn_param_list_numel(L);
    r.grads = malloc(r.n_grads * sizeof(float));
    size_t at = 0;
    for (int i = 0; i < L->count; i++) {
        memcpy(r.grads + at, L->items[i].grad, L->items[i].numel * sizeof(float));
        at += L->items[i].numel;
    }
    free(ids), free(targets);
    return r;
}

enum { PTRS_MAX = 64 };

/* Every buffer the activations hold, down to the attention's fused state. */
static int pointers(const attn_gpt_acts *a, const void **p) {
    int n = 0;
    const void *top[] = {a->ids,      a->targets,  a->keep_emb,  a->x_final, a->lnf,
                         a->logits,   a->lse,      a->d_resid,   a->d_tmp,   a->d_ln,
                         a->d_hidden, a->d_logits, a->d_logits16};
    for (size_t i = 0; i < sizeof top / sizeof *top; i++)
        p[n++] = top[i];
    for (int l = 0; l < a->n_layers; l++) {
        const attn_gpt_block_acts *b = &a->blocks[l];
        const attn_mha_fused_state *f = b->att.fused;
        cr_assert(f, "a forward made the fused state");
        const void *blk[] = {
            b->x_in,   b->ln1, b->att_out, b->x_mid,     b->ff.h,   b->ff.g,
            b->ff.x16, f,      f->qkv,     f->d_qkv,     f->lse,    f->x16,
            f->ctx16,  f->raw, f->kv_x,    f->drop.bits, f->ws.mem, b->att.context};
        for (size_t i = 0; i < sizeof blk / sizeof *blk && n < PTRS_MAX; i++)
            p[n++] = blk[i];
    }
    return n;
}

static void same_bits(const float *got, const float *want, size_t n, const char *what,
                      const char *variant, int bf16, int lean, int B, int T) {
    for (size_t i = 0; i < n; i++)
        cr_assert(memcmp(&got[i], &want[i], sizeof(float)) == 0,
                  "%s bf16 %d lean %d (B %d, T %d): %s[%zu] %.9g, fresh %.9g",
                  variant ? variant : "book", bf16, lean, B, T, what, i, (double)got[i],
                  (double)want[i]);
}

/* Steps at (B_max, T_max), then at each smaller shape on the same acts,
 * each against fresh activations of exactly that shape. */
static void reuse_equals_fresh(const char *variant, int bf16, int lean) {
    static const int shapes[][2] = {{2, 7}, {3, 5}, {1, 12}, {BMAX, TMAX - 1}};
    attn_gpt m;
    attn_error err;
    make(&m, variant, bf16);
    attn_gpt_acts a;
    attn_status s = lean ? attn_gpt_acts_init_lean(&a, &m, BMAX, TMAX, &err)
                         : attn_gpt_acts_init(&a, &m, BMAX, TMAX, &err);
    cr_assert_eq(s, ATTN_OK, "%s", err.msg);
    result full = step(&m, &a, BMAX, TMAX, lean, 3);
    result_free(&full);
    const void *before[PTRS_MAX], *after[PTRS_MAX];
    const int n = pointers(&a, before);
    for (size_t k = 0; k < sizeof shapes / sizeof *shapes; k++) {
        const int B = shapes[k][0], T = shapes[k][1];
        result got = step(&m, &a, B, T, lean, 100 + k);
        cr_assert_eq(pointers(&a, after), n);
        cr_assert(memcmp(before, after, (size_t)n * sizeof *before) == 0,
                  "(B %d, T %d) made a buffer again", B, T);
        attn_gpt fresh;
        make(&fresh, variant, bf16);
        attn_gpt_acts fa;
        s = lean ? attn_gpt_acts_init_lean(&fa, &fresh, B, T, &err)
                 : attn_gpt_acts_init(&fa, &fresh, B, T, &err);
        cr_assert_eq(s, ATTN_OK, "%s", err.msg);
        result want = step(&fresh, &fa, B, T, lean, 100 + k);
        same_bits(&got.loss, &want.loss, 1, "loss", variant, bf16, lean, B, T);
        same_bits(got.logits, want.logits, got.n_logits, "logits", variant, bf16, lean, B, T);
        cr_assert_eq(got.n_grads, want.n_grads);
        same_bits(got.grads, want.grads, got.n_grads, "grad", variant, bf16, lean, B, T);
        result_free(&got), result_free(&want);
        attn_gpt_acts_free(&fa);
        attn_gpt_free(&fresh);
    }
    attn_gpt_acts_free(&a);
    attn_gpt_free(&m);
}

static const char *const RGQ = "{\"pos_emb\": \"rope\", \"n_kv_heads\": 1, \"qk_norm\": true}";

static int have_bf16(void) {
    attn_error err;
    return attn_precision_check(ATTN_PRECISION_BF16, &err) == ATTN_OK;
}

Test(gpt_acts_reuse, fp32_book_model) {
    reuse_equals_fresh(NULL, 0, 0);
    reuse_equals_fresh(NULL, 0, 1);
}

Test(gpt_acts_reuse, fp32_rope_gqa_qk_norm) {
    reuse_equals_fresh(RGQ, 0, 0);
    reuse_equals_fresh(RGQ, 0, 1);
}

Test(gpt_acts_reuse, bf16_book_model) {
    if (!have_bf16()) cr_skip_test("no AVX512-BF16 on this CPU");
    reuse_equals_fresh(NULL, 1, 0);
    reuse_equals_fresh(NULL, 1, 1);
}

Test(gpt_acts_reuse, bf16_rope_gqa_qk_norm) {
    if (!have_bf16()) cr_skip_test("no AVX512-BF16 on this CPU");
    reuse_equals_fresh(RGQ, 1, 0);
    reuse_equals_fresh(RGQ, 1, 1);
}

/* A batch past the activations' shape, in B or in T, is refused naming
 * both shapes; a backward of another shape than its forward's, too. */
Test(gpt_acts_reuse, bigger_batch_refused) {
    attn_gpt m;
    attn_error err;
    make(&m, NULL, 0);
    attn_gpt_acts a;
    cr_assert_eq(attn_gpt_acts_init(&a, &m, 2, 6, &err), ATTN_OK, "%s", err.msg);
    int32_t ids[3 * 7], targets[3 * 7];
    tokens(ids, targets, 3 * 7, 0);
    static const int bad[][2] = {{3, 6}, {2, 7}};
    for (int k = 0; k < 2; k++) {
        const attn_status s =
            attn_gpt_forward(&m, ids, targets, bad[k][0], bad[k][1], NULL, &a, NULL, &err);
        cr_assert_eq(s, ATTN_ERR_SHAPE, "(%d, %d)", bad[k][0], bad[k][1]);
        char want[64];
        snprintf(want, sizeof want, "(B %d, T %d)", bad[k][0], bad[k][1]);
        cr_assert(strstr(err.msg, "(B 2, T 6)") && strstr(err.msg, want), "%s", err.msg);
        cr_assert_eq(attn_gpt_backward(&m, &a, 1.0f, &err), ATTN_ERR_STATE,
                     "no result to differentiate");
    }
    cr_assert_eq(attn_gpt_forward(&m, ids, targets, 1, 4, NULL, &a, NULL, &err), ATTN_OK, "%s",
                 err.msg);
    const attn_gpt_block *blk = &m.blocks[0];
    float dx[2 * 6 * 16];
    cr_assert_eq(attn_mha_backward_ops(&m.engine, (attn_mha *)&blk->att, a.blocks[0].ln1, 2, 6,
                                       a.blocks[0].att_out, dx, &a.blocks[0].att, &err),
                 ATTN_ERR_SHAPE);
    cr_assert(strstr(err.msg, "after a forward of (B 1, T 4)"), "%s", err.msg);
    attn_gpt_acts_free(&a);
    attn_gpt_free(&m);
}

/* attn_gpt_acts_reserve: kept for a batch within them, made again to
 * cover a bigger one (both shapes), for the batch alone when covering
 * both would more than double the rows. */
Test(gpt_acts_reuse, reserve_keeps_and_grows) {
    attn_gpt m;
    attn_error err;
    make(&m, NULL, 0);
    attn_gpt_acts a;
    memset(&a, 0, sizeof a);
    cr_assert_eq(attn_gpt_acts_reserve(&a, &m, 2, 8, 0, &err), ATTN_OK, "%s", err.msg);
    cr_assert(a.B_max == 2 && a.T_max == 8);
    const float *x = a.x_final;
    cr_assert_eq(attn_gpt_acts_reserve(&a, &m, 1, 5, 0, &err), ATTN_OK);
    cr_assert(a.x_final == x && a.B_max == 2 && a.T_max == 8, "kept");
    cr_assert_eq(attn_gpt_acts_reserve(&a, &m, 1, 12, 0, &err), ATTN_OK);
    cr_assert(a.B_max == 2 && a.T_max == 12, "(%d, %d)", a.B_max, a.T_max);
    cr_assert_eq(attn_gpt_acts_reserve(&a, &m, 9, 1, 0, &err), ATTN_OK);
    cr_assert(a.B_max == 9 && a.T_max == 1, "(%d, %d): 9 x 12 rows is past twice 24", a.B_max,
              a.T_max);
    cr_assert_eq(attn_gpt_acts_reserve(&a, &m, 1, 17, 0, &err), ATTN_ERR_SHAPE);
    cr_assert(a.B_max == 9 && a.T_max == 1, "a shape no forward takes leaves them");
    cr_assert_eq(attn_gpt_acts_reserve(&a, &m, 2, 3, 1, &err), ATTN_OK);
    cr_assert(a.lean && a.B_max == 2 && a.T_max == 3, "lean ones are made anew");
    attn_gpt_acts_free(&a);
    attn_gpt_free(&m);
}
