/* The parameter arena (attn/param.h): a model's tensors are views into one
 * aligned block of values and one of gradients, laid out from its table;
 * binding other storage is a loop over the table. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "attn/gpt.h"

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
