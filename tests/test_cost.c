/* attn/cost.h: one rule for the arithmetic (issue 48). The weight products
 * are checked against the model's own parameters (every 2-D weight but the
 * embeddings, and the head tied or not), the attention against a pair
 * count done by hand, and bench mha's documented formula. */
#include <criterion/criterion.h>
#include <string.h>

#include "attn/cost.h"
#include "attn/gpt.h"
#include "attn/gpt_family.h"

Test(cost, causal_pairs_count_each_querys_keys) {
    for (int T = 1; T <= 40; T++)
        for (int w = 0; w <= 45; w += 3) {
            double n = 0;
            for (int i = 0; i < T; i++)
                n += w > 0 && w < i + 1 ? w : i + 1;
            cr_assert_eq(attn_causal_pairs(T, w), n, "T %d window %d", T, w);
        }
}

/* The weight elements a token multiplies through, from the parameter list. */
static double weights_of(const attn_gpt *m) {
    const attn_param_list *L = attn_gpt_params(m);
    double n = 0;
    for (int i = 0; i < L->count; i++) {
        const attn_param *p = &L->items[i];
        if (p->ndim != 2 || strstr(p->name, "pos_emb")) continue;
        if (strstr(p->name, "tok_emb") && !m->cfg.tie_weights) continue; /* a lookup */
        n += (double)p->numel;
    }
    return n;
}

Test(cost, gpt_products_are_the_models_weights) {
    const attn_gpt_config base = {
        .vocab_size = 37, .context_length = 16, .emb_dim = 24, .n_heads = 4, .n_layers = 3};
    attn_gpt_config cfgs[4] = {base, base, base, base};
    cfgs[1].tie_weights = 1;
    cfgs[2].n_kv_heads = 2;
    cfgs[3].act = ATTN_ACT_SWIGLU;
    for (int k = 0; k < 4; k++) {
        attn_gpt m;
        attn_rng rng;
        attn_error err;
        attn_rng_seed(&rng, 1);
        cr_assert_eq(attn_gpt_init(&m, &cfgs[k], &rng, &err), ATTN_OK, "%s", err.msg);
        const attn_gpt_flops f = attn_gpt_flops_forward(&cfgs[k], 3, 10);
        cr_assert_float_eq(f.matmul, 2.0 * 30 * weights_of(&m), 1e-6, "config %d", k);
        cr_assert_float_eq(f.attention, 4.0 * 3 * 3 * 24 * attn_causal_pairs(10, 0), 1e-6);
        cr_assert_float_eq(attn_gpt_flops_step(&cfgs[k], 3, 10), 3 * f.matmul + 3.5 * f.attention,
                           1e-6);
        attn_gpt_free(&m);
    }
}

/* A classifier's head (attn_gpt_flops_step_head): its n_classes-wide
 * matrix, not the vocabulary's, as the model's own parameters have it; at
 * vocab_size it is attn_gpt_flops_step. */
Test(cost, a_narrow_head_counts_its_own_width) {
    const attn_gpt_config cfg = {
        .vocab_size = 37, .context_length = 16, .emb_dim = 24, .n_heads = 4, .n_layers = 3};
    const attn_gpt_build o = {.head_width = 3, .head_bias = 1};
    attn_gpt m;
    attn_error err;
    cr_assert_eq(attn_gpt_init_family(&m, &cfg, NULL, &o, NULL, &err), ATTN_OK, "%s", err.msg);
    const double attention = 4.0 * 3 * 3 * 24 * attn_causal_pairs(10, 0);
    cr_assert_float_eq(attn_gpt_flops_step_head(&cfg, 3, 3, 10),
                       3 * 2.0 * 30 * weights_of(&m) + 3.5 * attention, 1e-6);
    cr_assert_eq(attn_gpt_flops_step_head(&cfg, 37, 3, 10), attn_gpt_flops_step(&cfg, 3, 10));
    attn_gpt_free(&m);
}

/* bench mha's documented count: projections 8 B T D^2 (x3 with backward),
 * attention 2 B D T (T + 1) (x3.5). */
Test(cost, mha_is_bench_mhas_formula) {
    const double B = 2, T = 64, D = 48;
    const double proj = 8 * B * T * D * D, core = 2 * B * D * T * (T + 1);
    cr_assert_float_eq(attn_mha_flops(B, T, D, 4, 0, 0, 0), proj + core, 1e-6);
    cr_assert_float_eq(attn_mha_flops(B, T, D, 4, 0, 0, 1), 3 * proj + 3.5 * core, 1e-6);
    cr_assert_float_eq(attn_attention_flops(B, T, D, 0, 1), 3.5 * core, 1e-6);
    cr_assert(attn_mha_flops(B, T, D, 4, 1, 0, 0) < proj + core); /* grouped-query: smaller K, V */
}
