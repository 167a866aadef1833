/* The parameter arena (attn/param.h): a model's tensors are views into one
 * aligned block of values and one of gradients, laid out from its table;
 * binding other storage is a loop over the table. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "attn/gpt.h"
#include "attn/optim.h"
#include "kernels/gemv.h"

static attn_gpt_config small_cfg(void) {
    attn_gpt_config c = {.vocab_size = 11, /* tok_emb 88 floats: the next tensor is padded */
                         .context_length = 8,
                         .emb_dim = 8,
                         .n_heads = 2,
                         .n_layers = 2,
                         .qkv_bias = 1};
    return c;
}

static void make(attn_gpt *m, const attn_gpt_config *cfg) {
    attn_rng rng;
    attn_rng_seed(&rng, 3);
    attn_error err;
    cr_assert_eq(attn_gpt_init(m, cfg, &rng, &err), ATTN_OK, "%s", err.msg);
}

static const attn_param *param(const attn_gpt *m, const char *name) {
    const attn_param *p = attn_param_list_find(attn_gpt_params(m), name);
    cr_assert(p != NULL, "no %s", name);
    return p;
}

static int inside(const float *p, size_t n, const float *block, size_t len) {
    return p && p >= block && p + n <= block + len;
}

Test(param_arena, every_tensor_is_a_view_into_one_aligned_block) {
    const attn_gpt_config cfg = small_cfg();
    attn_gpt m;
    make(&m, &cfg);
    const attn_param_list *L = attn_gpt_params(&m);
    cr_assert(L->values && L->grads);
    cr_expect_eq((uintptr_t)L->values % 64, 0, "the value block is 64-byte aligned");
    cr_expect_eq((uintptr_t)L->grads % 64, 0, "the gradient block is 64-byte aligned");
    size_t total = 0;
    for (int i = 0; i < L->count; i++) {
        const attn_param *p = &L->items[i];
        total += p->numel;
        cr_expect(inside(p->data, p->numel, L->values, L->values_numel), "%s", p->name);
        cr_expect(inside(p->grad, p->numel, L->grads, L->grads_numel), "%s", p->name);
        cr_expect_eq(p->grad - L->grads, p->data - L->values, "%s: the same layout", p->name);
        /* Each tensor starts on 64 bytes but the members of a group after its first. */
        const int follows = p->group && i > 0 && strstr(p->name, "W_query") == NULL;
        if (!follows) cr_expect_eq(p->offset % ATTN_ARENA_ALIGN, 0, "%s aligned", p->name);
        for (int j = 0; j < i; j++) { /* no two overlap */
            const attn_param *q = &L->items[j];
            cr_expect(p->offset >= q->offset + q->numel || q->offset >= p->offset + p->numel,
                      "%s overlaps %s", p->name, q->name);
        }
    }
    cr_expect_eq(total, attn_gpt_num_params(&m));
    cr_expect(L->values_numel >= total && L->values_numel < total + (size_t)L->count * 16,
              "%zu floats for %zu", L->values_numel, total);
    /* The modules' fields are the table's views. */
    const attn_gpt_block *b = &m.blocks[1];
    cr_expect_eq(b->att.W_query.weight, param(&m, "trf_blocks.1.att.W_query.weight")->data);
    cr_expect_eq(b->att.W_key.grad_weight, param(&m, "trf_blocks.1.att.W_key.weight")->grad);
    cr_expect_eq(b->ff.fc2.bias, param(&m, "trf_blocks.1.ff.layers.2.bias")->data);
    cr_expect_eq(b->norm2.grad_shift, param(&m, "trf_blocks.1.norm2.shift")->grad);
    cr_expect_eq(m.out_head.weight, param(&m, "out_head.weight")->data);
    cr_expect_eq(m.pos_emb.weight, param(&m, "pos_emb.weight")->data);
    /* W_query, W_key and W_value's weights stay one block (one product),
     * their biases between them in the table notwithstanding. */
    const size_t q = (size_t)cfg.emb_dim * (size_t)cfg.emb_dim;
    cr_expect_eq(b->att.W_key.weight, b->att.W_query.weight + q);
    cr_expect_eq(b->att.W_value.weight, b->att.W_query.weight + 2 * q);
    cr_expect_eq(b->att.W_value.grad_weight, b->att.W_query.grad_weight + 2 * q);
    cr_expect(b->att.w_qkv == NULL, "no storage of the module's own");
    /* Norm scales start at one, shifts at zero. */
    for (int c = 0; c < cfg.emb_dim; c++)
        cr_expect(b->norm1.scale[c] == 1.0f && b->norm1.shift[c] == 0.0f);
    attn_gpt_free(&m);
}

Test(param_arena, a_tied_head_views_the_embedding) {
    attn_gpt_config cfg = small_cfg();
    cfg.tie_weights = 1;
    attn_gpt m;
    make(&m, &cfg);
    cr_expect(attn_param_list_find(attn_gpt_params(&m), "out_head.weight") == NULL);
    const attn_param *e = param(&m, "tok_emb.weight");
    cr_expect_eq(m.out_head.weight, e->data);
    cr_expect_eq(m.out_head.grad_weight, e->grad);
    cr_expect_eq(m.tok_emb.weight, e->data);
    attn_gpt_free(&m);
}

/* Binding is a loop over the table: every field follows, and the arena's
 * own storage comes back. */
Test(param_arena, binding_points_every_view) {
    const attn_gpt_config cfg = small_cfg();
    attn_gpt m;
    make(&m, &cfg);
    attn_param_list *L = &m.params;
    float *own_values = L->values, *own_grads = L->grads;
    float **data = calloc((size_t)L->count, sizeof *data);
    float **grad = calloc((size_t)L->count, sizeof *grad);
    for (int i = 0; i < L->count; i++) {
        data[i] = calloc(L->items[i].numel, sizeof(float));
        grad[i] = i % 2 ? calloc(L->items[i].numel, sizeof(float)) : NULL; /* NULL: own */
    }
    attn_param_list_bind(L, data, grad);
    const attn_param *wq = param(&m, "trf_blocks.0.att.W_query.weight");
    const int iq = (int)(wq - L->items);
    cr_expect_eq(m.blocks[0].att.W_query.weight, data[iq]);
    cr_expect_eq(m.blocks[0].att.W_query.grad_weight,
                 grad[iq] ? grad[iq] : own_grads + wq->grad_offset);
    cr_expect_eq(m.final_norm.scale, param(&m, "final_norm.scale")->data);
    cr_expect(L->grads_bound == NULL, "gradients of the caller's: none bound as a block");
    /* Another gradient block of the arena's layout. */
    float *other = attn_param_block_alloc(L->grads_numel);
    cr_assert(other != NULL);
    attn_param_list_bind_grads(L, other);
    cr_expect_eq(m.blocks[1].ff.fc1.grad_weight,
                 other + param(&m, "trf_blocks.1.ff.layers.0.weight")->grad_offset);
    cr_expect_eq(L->grads_bound, other);
    /* Back to its own. */
    attn_param_list_bind(L, NULL, NULL);
    cr_expect_eq(m.blocks[0].att.W_query.weight, own_values + wq->offset);
    cr_expect_eq(m.blocks[0].att.W_query.grad_weight, own_grads + wq->grad_offset);
    cr_expect_eq(L->grads_bound, own_grads);
    attn_param_block_free(other, L->grads_numel);
    for (int i = 0; i < L->count; i++)
        free(data[i]), free(grad[i]);
    free(data), free(grad);
    attn_gpt_free(&m);
}

/* Zeroing the gradients clears the bound block whole. */
Test(param_arena, zero_grad_clears_the_block) {
    const attn_gpt_config cfg = small_cfg();
    attn_gpt m;
    make(&m, &cfg);
    const attn_param_list *L = attn_gpt_params(&m);
    for (size_t k = 0; k < L->grads_numel; k++)
        L->grads[k] = 1.0f;
    attn_gpt_zero_grad(&m);
    size_t nonzero = 0;
    for (size_t k = 0; k < L->grads_numel; k++)
        nonzero += L->grads[k] != 0.0f;
    cr_expect_eq(nonzero, 0);
    attn_gpt_free(&m);
}

/* ------------------------------------------------------------ frozen tensors */

/* One forward and backward of m on a fixed batch (plain or lean
 * activations; dropout off). */
static void step(attn_gpt *m, int lean) {
    const int B = 2, T = 6;
    int32_t ids[12], tg[12];
    for (int i = 0; i < B * T; i++)
        ids[i] = (int32_t)((i * 7 + 3) % m->cfg.vocab_size), tg[i] = (int32_t)((i * 5 + 1) % 11);
    attn_gpt_acts acts;
    attn_error err;
    cr_assert_eq(lean ? attn_gpt_acts_init_lean(&acts, m, B, T, &err)
                      : attn_gpt_acts_init(&acts, m, B, T, &err),
                 ATTN_OK, "%s", err.msg);
    attn_gpt_zero_grad_deferred(m);
    cr_assert_eq(attn_gpt_forward_backward(m, ids, tg, B, T, NULL, &acts, 1.0f, NULL, &err),
                 ATTN_OK, "%s", err.msg);
    attn_gpt_acts_free(&acts);
}

/* Model b with the tensors under prefix frozen against a, the same but
 * trainable: b keeps no gradient for them, and the rest are a's bits. */
static void frozen_against(const attn_gpt_config *cfg, const char *prefix, int bf16, int lean) {
    attn_gpt a, b;
    make(&a, cfg);
    make(&b, cfg);
    attn_error err;
    if (bf16 && (attn_gpt_set_precision(&a, ATTN_PRECISION_BF16, &err) != ATTN_OK ||
                 attn_gpt_set_precision(&b, ATTN_PRECISION_BF16, &err) != ATTN_OK)) {
        attn_gpt_free(&a), attn_gpt_free(&b);
        return; /* no AVX512-BF16 here */
    }
    cr_assert_eq(attn_gpt_set_trainable(&b, prefix, 0, &err), ATTN_OK, "%s", err.msg);
    step(&a, lean);
    step(&b, lean);
    const attn_param_list *La = attn_gpt_params(&a), *Lb = attn_gpt_params(&b);
    int frozen = 0;
    size_t kept = 0;
    for (int i = 0; i < Lb->count; i++) {
        const attn_param *pa = &La->items[i], *pb = &Lb->items[i];
        const int under = strncmp(pb->name, prefix, strlen(prefix)) == 0;
        cr_expect_eq(pb->trainable, !under, "%s", pb->name);
        if (under) {
            frozen++;
            cr_expect(pb->grad == NULL, "%s: no gradient storage", pb->name);
            for (int k = 0; k < ATTN_PARAM_VIEWS; k++)
                if (pb->grad_at[k]) cr_expect(*pb->grad_at[k] == NULL, "%s's field", pb->name);
            continue;
        }
        kept += pb->numel;
        cr_expect(memcmp(pa->grad, pb->grad, pa->numel * sizeof(float)) == 0,
                  "%s (%s frozen, bf16 %d, lean %d): the unfrozen model's gradient", pb->name,
                  prefix, bf16, lean);
    }
    cr_expect(frozen > 0);
    cr_expect(Lb->grads_numel < La->grads_numel && Lb->grads_numel >= kept,
              "%zu gradient floats for %zu trainable", Lb->grads_numel, kept);
    attn_gpt_free(&a);
    attn_gpt_free(&b);
}

Test(param_arena, frozen_tensors_have_no_gradients_and_change_no_other) {
    const char *prefixes[] = {"trf_blocks.0.",    "tok_emb.",
                              "pos_emb.",         "out_head.",
                              "final_norm.",      "trf_blocks.1.att.W_key.",
                              "trf_blocks.1.ff.", "trf_blocks.1.norm2.shift"};
    const attn_gpt_config cfg = small_cfg();
    for (size_t i = 0; i < sizeof prefixes / sizeof *prefixes; i++)
        for (int lean = 0; lean < 2; lean++)
            for (int bf16 = 0; bf16 < 2; bf16++)
                frozen_against(&cfg, prefixes[i], bf16, lean);
    /* The variants' modules: RMSNorm, SwiGLU, grouped-query, QK-norm, tied. */
    attn_gpt_config v = small_cfg();
    v.norm = ATTN_NORM_RMSNORM;
    v.act = ATTN_ACT_SWIGLU;
    v.n_kv_heads = 1;
    v.qk_norm = 1;
    v.tie_weights = 1;
    const char *vprefixes[] = {"trf_blocks.0.att.", "tok_emb.", "trf_blocks.1.att.q_norm."};
    for (size_t i = 0; i < sizeof vprefixes / sizeof *vprefixes; i++)
        for (int bf16 = 0; bf16 < 2; bf16++)
            frozen_against(&v, vprefixes[i], bf16, 1);
}

Test(param_arena, freezing_names_what_it_cannot_find_and_thaws) {
    const attn_gpt_config cfg = small_cfg();
    attn_gpt m;
    make(&m, &cfg);
    attn_error err;
    cr_expect_eq(attn_gpt_set_trainable(&m, "trf_blocks.9.", 0, &err), ATTN_ERR_NOT_FOUND);
    cr_expect(strstr(err.msg, "trf_blocks.9.") != NULL, "%s", err.msg);
    const size_t all = m.params.grads_numel;
    cr_assert_eq(attn_gpt_set_trainable(&m, "", 0, &err), ATTN_OK, "%s", err.msg);
    cr_expect(m.blocks[0].att.W_query.grad_weight == NULL && m.final_norm.grad_scale == NULL);
    step(&m, 0); /* nothing to compute: runs, writes nothing */
    cr_assert_eq(attn_gpt_set_trainable(&m, "", 1, &err), ATTN_OK, "%s", err.msg);
    cr_expect_eq(m.params.grads_numel, all);
    cr_expect(m.blocks[0].att.W_query.grad_weight != NULL);
    attn_gpt_free(&m);
    /* A module made alone keeps its own gradients. */
    attn_linear lin;
    attn_param_list own;
    attn_param_list_init(&own);
    cr_assert_eq(attn_linear_init(&lin, 3, 2, 1, NULL, &err), ATTN_OK);
    cr_assert_eq(attn_linear_params(&lin, "", &own, &err), ATTN_OK);
    cr_expect_eq(attn_param_list_set_trainable(&own, "", 0, &err), ATTN_ERR_STATE);
    cr_expect(lin.grad_weight != NULL && own.items[0].grad == lin.grad_weight);
    attn_param_list_free(&own);
    attn_linear_free(&lin);
}

/* AdamW leaves a frozen tensor as it is and updates the rest. */
Test(param_arena, adamw_steps_past_frozen_tensors) {
    const attn_gpt_config cfg = small_cfg();
    attn_gpt m;
    make(&m, &cfg);
    attn_error err;
    cr_assert_eq(attn_gpt_set_trainable(&m, "trf_blocks.0.", 0, &err), ATTN_OK, "%s", err.msg);
    const attn_param_list *L = attn_gpt_params(&m);
    float *before = malloc(L->values_numel * sizeof(float));
    memcpy(before, L->values, L->values_numel * sizeof(float));
    attn_adamw opt;
    const attn_adamw_config ac = attn_adamw_defaults();
    cr_assert_eq(attn_adamw_init(&opt, L, &ac, &err), ATTN_OK, "%s", err.msg);
    step(&m, 0);
    cr_assert_eq(attn_adamw_step(&opt, L, 1e-2, &err), ATTN_OK, "%s", err.msg);
    for (int i = 0; i < L->count; i++) {
        const attn_param *p = &L->items[i];
        const int same = memcmp(before + p->offset, p->data, p->numel * sizeof(float)) == 0;
        if (!p->trainable) cr_expect(same, "%s: frozen, unchanged", p->name);
        if (p->trainable && p->ndim >= 2) cr_expect(!same, "%s: updated", p->name);
    }
    attn_adamw_free(&opt);
    free(before);
    attn_gpt_free(&m);
}

/* On the bf16 engine the weights' copies are one block of the arena's
 * layout: each copy sits at its weight's offset. */
Test(param_arena, bf16_copies_are_one_block_alike) {
    const attn_gpt_config cfg = small_cfg();
    attn_gpt m;
    make(&m, &cfg);
    attn_error err;
    if (attn_gpt_set_precision(&m, ATTN_PRECISION_BF16, &err) != ATTN_OK) {
        attn_gpt_free(&m);
        cr_skip_test("no AVX512-BF16 on this CPU");
    }
    step(&m, 0); /* a pass: every weight multiplied is rounded once */
    const attn_param *a = param(&m, "trf_blocks.0.ff.layers.0.weight");
    const attn_param *b = param(&m, "out_head.weight");
    const uint16_t *ca = attn_bf16_gemm_weight_copy(m.bf16, a->data, a->numel);
    const uint16_t *cb = attn_bf16_gemm_weight_copy(m.bf16, b->data, b->numel);
    cr_assert(ca && cb);
    cr_expect_eq(cb - ca, b->data - a->data, "the copies' offsets are the weights'");
    uint16_t want[4];
    attn_f32_to_bf16(a->data, want, 4);
    cr_expect(memcmp(ca, want, sizeof want) == 0, "the copy holds the weight's rounding");
    attn_gpt_free(&m);
}
