/* The one backward rule (docs/library.md, conventions): every public
 * backward accumulates (+=) into dx and into the parameter gradients; the
 * caller zeroes them. Each backward runs twice on the same forward: once into
 * zeroed buffers (g), once into buffers pre-filled with P; the second must
 * leave P + g (an overwrite leaves g, a zeroing one too). The exceptions are
 * the in-place activations (attn_gelu_backward_inplace,
 * attn_relu2_backward_inplace), whose one buffer is dy on entry. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn/attn.h"
#include "attn/handles.h"

#define MAXB 64

typedef struct outs {
    float *p[MAXB];
    size_t n[MAXB];
    int count;
} outs;

static void add(outs *o, float *p, size_t n) {
    cr_assert(o->count < MAXB);
    o->p[o->count] = p;
    o->n[o->count++] = n;
}

static void add_params(outs *o, const attn_param_list *pl) {
    for (int i = 0; i < pl->count; i++) {
        size_t n = 1;
        for (int d = 0; d < pl->items[i].ndim; d++)
            n *= (size_t)pl->items[i].shape[d];
        add(o, pl->items[i].grad, n);
    }
}

static float fill_value(size_t i, int b) {
    return (float)((int)((i * 7 + (size_t)b * 3) % 11) - 5) * 0.375f;
}

/* run() calls the backward under test once. */
static void check_rule(const char *what, void (*run)(void *), void *ctx, const outs *o) {
    float *g[MAXB];
    for (int b = 0; b < o->count; b++) {
        memset(o->p[b], 0, o->n[b] * sizeof(float));
        cr_assert(g[b] = malloc(o->n[b] * sizeof(float)));
    }
    run(ctx);
    double gnorm = 0;
    for (int b = 0; b < o->count; b++) {
        memcpy(g[b], o->p[b], o->n[b] * sizeof(float));
        for (size_t i = 0; i < o->n[b]; i++) {
            gnorm += fabs((double)g[b][i]);
            o->p[b][i] = fill_value(i, b);
        }
    }
    cr_assert(gnorm > 0, "%s: the gradients are all zero (the test proves nothing)", what);
    run(ctx);
    for (int b = 0; b < o->count; b++) {
        int bad = 0;
        for (size_t i = 0; i < o->n[b] && !bad; i++) {
            const float want = fill_value(i, b) + g[b][i];
            if (fabsf(o->p[b][i] - want) > 1e-5f * (1.0f + fabsf(want))) {
                cr_expect_fail("%s: output %d [%zu] = %g after a second call into P = %g, want "
                               "P + g = %g (g = %g): not accumulated",
                               what, b, i, (double)o->p[b][i], (double)fill_value(i, b),
                               (double)want, (double)g[b][i]);
                bad = 1;
            }
        }
        free(g[b]);
    }
}

static void ramp(float *x, size_t n, float s) {
    for (size_t i = 0; i < n; i++)
        x[i] = sinf((float)i * 0.37f + s) * 0.8f;
}

/* ---- the function-level backwards -------------------------------------- */

typedef struct lin_ctx {
    attn_linear l;
    float x[5 * 4], dy[5 * 3], dx[5 * 4];
} lin_ctx;
static void lin_run(void *p) {
    lin_ctx *c = p;
    attn_linear_backward(&c->l, c->x, c->dy, c->dx, 5);
}
Test(rule, linear) {
    lin_ctx c;
    attn_rng rng;
    attn_rng_seed(&rng, 1);
    cr_assert_eq(attn_linear_init(&c.l, 4, 3, 1, &rng, NULL), ATTN_OK);
    ramp(c.x, 20, 0), ramp(c.dy, 15, 1);
    outs o = {0};
    add(&o, c.l.grad_weight, 12), add(&o, c.l.grad_bias, 3), add(&o, c.dx, 20);
    check_rule("attn_linear_backward", lin_run, &c, &o);
    attn_linear_free(&c.l);
}

typedef struct ln_ctx {
    attn_layernorm ln;
    float x[3 * 6], y[3 * 6], mean[3], rstd[3], dy[3 * 6], dx[3 * 6];
} ln_ctx;
static void ln_run(void *p) {
    ln_ctx *c = p;
    attn_layernorm_backward(&c->ln, c->x, c->mean, c->rstd, c->dy, c->dx, 3);
}
Test(rule, layernorm_and_rmsnorm) {
    for (int kind = 0; kind < 2; kind++) {
        ln_ctx c;
        cr_assert_eq(attn_norm_init(&c.ln, 6, (attn_norm_kind)kind, NULL), ATTN_OK);
        ramp(c.x, 18, 0), ramp(c.dy, 18, 2);
        ramp(c.ln.scale, 6, 3);
        attn_layernorm_forward(&c.ln, c.x, c.y, c.mean, c.rstd, 3);
        outs o = {0};
        add(&o, c.ln.grad_scale, 6), add(&o, c.dx, 18);
        if (kind == ATTN_NORM_LAYERNORM) add(&o, c.ln.grad_shift, 6);
        check_rule(kind ? "attn_layernorm_backward (rmsnorm)" : "attn_layernorm_backward", ln_run,
                   &c, &o);
        attn_layernorm_free(&c.ln);
    }
}

typedef struct emb_ctx {
    attn_embedding e;
    int32_t ids[4];
    float dout[4 * 3];
} emb_ctx;
static void emb_run(void *p) {
    emb_ctx *c = p;
    attn_embedding_backward(&c->e, c->ids, c->dout, 4);
}
Test(rule, embedding) {
    emb_ctx c = {.ids = {1, 4, 1, 0}};
    attn_rng rng;
    attn_rng_seed(&rng, 2);
    cr_assert_eq(attn_embedding_init(&c.e, 5, 3, &rng, NULL), ATTN_OK);
    ramp(c.dout, 12, 0);
    outs o = {0};
    add(&o, c.e.grad_weight, 15);
    check_rule("attn_embedding_backward", emb_run, &c, &o);
    attn_embedding_free(&c.e);
}

typedef struct ff_ctx {
    attn_feedforward ff;
    attn_feedforward_cache cache;
    float x[3 * 6], y[3 * 6], dy[3 * 6], dx[3 * 6];
    float *d_hidden;
} ff_ctx;
static void ff_run(void *p) {
    ff_ctx *c = p;
    attn_feedforward_backward(&c->ff, c->x, c->dy, c->dx, 3, &c->cache, c->d_hidden);
}
Test(rule, feedforward_each_act) {
    for (int act = 0; act < 3; act++) {
        ff_ctx c;
        attn_rng rng;
        attn_rng_seed(&rng, 3);
        cr_assert_eq(attn_feedforward_init_act(&c.ff, 6, (attn_act)act, &rng, NULL), ATTN_OK);
        cr_assert_eq(attn_feedforward_cache_init(&c.cache, &c.ff, 3, NULL), ATTN_OK);
        cr_assert(c.d_hidden = malloc(3 * attn_feedforward_scratch(&c.ff) * sizeof(float)));
        ramp(c.x, 18, 0), ramp(c.dy, 18, 1);
        attn_feedforward_forward(&c.ff, c.x, c.y, 3, &c.cache);
        attn_param_list pl;
        attn_param_list_init(&pl);
        cr_assert_eq(attn_feedforward_params(&c.ff, "", &pl, NULL), ATTN_OK);
        outs o = {0};
        add_params(&o, &pl);
        add(&o, c.dx, 18);
        check_rule("attn_feedforward_backward", ff_run, &c, &o);
        attn_param_list_free(&pl);
        free(c.d_hidden);
        attn_feedforward_cache_free(&c.cache);
        attn_feedforward_free(&c.ff);
    }
}

/* The elementwise ones: x, y (forward output or mask), dy -> dx. */
typedef struct ew_ctx {
    int which;
    float x[24], y[24], dy[24], dx[48];
    uint8_t keep[24];
    int32_t targets[4];
    float lse[4];
} ew_ctx;
static void ew_run(void *p) {
    ew_ctx *c = p;
    switch (c->which) {
    case 0: attn_gelu_backward(c->x, c->dy, c->dx, 24); break;
    case 1: attn_softmax_backward(c->y, c->dy, c->dx, 4, 6); break;
    case 2: attn_dropout_backward(c->dy, c->keep, 0.25, c->dx, 24); break;
    case 3: attn_residual_dropout_backward(c->dy, c->keep, 0.25, 1, c->dx, 24); break;
    case 4: attn_residual_dropout_backward(c->dy, c->keep, 0.25, 0, c->dx, 24); break;
    case 5: attn_swiglu_backward(c->x, c->dy, c->dx, 4, 3); break; /* h (4, 6) -> dh (4, 6) */
    case 6: attn_cross_entropy_backward(c->x, c->targets, c->lse, 0.5f, c->dx, 4, 6); break;
    }
}
Test(rule, elementwise_softmax_dropout_swiglu_cross_entropy) {
    static const char *names[] = {"attn_gelu_backward",
                                  "attn_softmax_backward",
                                  "attn_dropout_backward",
                                  "attn_residual_dropout_backward (dropped)",
                                  "attn_residual_dropout_backward (not dropped)",
                                  "attn_swiglu_backward",
                                  "attn_cross_entropy_backward"};
    for (int w = 0; w < 7; w++) {
        ew_ctx c = {.which = w, .targets = {0, 5, 2, 2}};
        ramp(c.x, 24, 0), ramp(c.dy, 24, 1);
        attn_softmax_forward(c.x, c.y, 4, 6);
        for (int i = 0; i < 24; i++)
            c.keep[i] = (uint8_t)(i % 3 != 0);
        attn_cross_entropy_forward(c.x, c.targets, c.lse, 4, 6);
        outs o = {0};
        add(&o, c.dx, 24);
        check_rule(names[w], ew_run, &c, &o);
    }
}

/* ---- the chapter-3 modules, by attn_module_backward and the handle ------ */

typedef struct mod_ctx {
    attn_module *m;
    const float *x;
    float *dy, *dx;
    int B, T, handle;
} mod_ctx;
static void mod_run(void *p) {
    mod_ctx *c = p;
    attn_error err;
    attn_status s = c->handle ? attn_h_module_backward(c->m, c->x, c->B, c->T, c->dy, c->dx, &err)
                              : attn_module_backward(c->m, c->x, c->dy, c->dx, &err);
    cr_assert_eq(s, ATTN_OK, "%s", err.msg);
}
Test(rule, every_module_kind_and_the_handle) {
    for (int kind = 0; kind < ATTN_MODULE_KIND_COUNT; kind++)
        for (int handle = 0; handle < 2; handle++) {
            const int B = kind <= ATTN_MODULE_SELF_ATTENTION_V2 ? 1 : 2, T = 5, d_in = 4;
            attn_module_config cfg = {
                (attn_module_kind)kind, d_in, 4, 2, 6, 0.0, kind != ATTN_MODULE_SELF_ATTENTION_V1};
            attn_rng rng;
            attn_rng_seed(&rng, 4);
            attn_module *m = NULL;
            attn_error err;
            cr_assert_eq(attn_module_create(&cfg, &rng, &m, &err), ATTN_OK, "%s", err.msg);
            const size_t nx = (size_t)B * T * d_in, ny = (size_t)B * T * attn_module_out_dim(m);
            float *x = malloc(nx * sizeof(float)), *dx = malloc(nx * sizeof(float));
            float *y = malloc(ny * sizeof(float)), *dy = malloc(ny * sizeof(float));
            cr_assert(x && dx && y && dy);
            ramp(x, nx, 0), ramp(dy, ny, 1);
            const attn_forward_mode eval = {0, NULL, ATTN_STREAM_TORCH_CPU};
            cr_assert_eq(attn_module_forward(m, x, B, T, y, &eval, &err), ATTN_OK, "%s", err.msg);
            mod_ctx c = {m, x, dy, dx, B, T, handle};
            outs o = {0};
            add_params(&o, attn_module_params(m));
            add(&o, dx, nx);
            char what[96];
            snprintf(what, sizeof what, "%s of %s",
                     handle ? "attn_h_module_backward" : "attn_module_backward",
                     attn_module_kind_name((attn_module_kind)kind));
            check_rule(what, mod_run, &c, &o);
            free(x), free(dx), free(y), free(dy);
            attn_module_free(m);
        }
}

/* ---- MultiHeadAttention with the attention variants, both paths ------- */

typedef struct mha_ctx {
    attn_mha *m;
    const float *x;
    float *dy, *dx;
    attn_attention_cache *cache;
    int B, T;
} mha_ctx;
static void mha_run(void *p) {
    mha_ctx *c = p;
    attn_error err;
    cr_assert_eq(attn_mha_backward(c->m, c->x, c->B, c->T, c->dy, c->dx, c->cache, &err), ATTN_OK,
                 "%s", err.msg);
}
Test(rule, mha_variants_on_both_paths) {
    /* grouped-query + QK-norm + RoPE, then ALiBi + window + soft-cap */
    for (int v = 0; v < 2; v++)
        for (int path = 0; path < 2; path++) {
            const int B = 2, T = 7, d_in = 6, d_out = 8;
            attn_attention_spec sp = attn_attention_book(4, 2, 0.0);
            if (v == 0) {
                sp.kv_heads = 2, sp.qk_norm = 1, sp.positions = ATTN_POSITIONS_ROPE;
            } else {
                sp.positions = ATTN_POSITIONS_ALIBI, sp.window = 3, sp.softcap = 2.0;
            }
            attn_rng rng;
            attn_rng_seed(&rng, 9);
            attn_mha m;
            attn_error err;
            cr_assert_eq(attn_mha_init_spec(&m, d_in, d_out, T, &sp, 1, &rng, &err), ATTN_OK, "%s",
                         err.msg);
            m.path = path ? ATTN_MHA_REFERENCE : ATTN_MHA_FUSED;
            attn_attention_cache cache;
            cr_assert_eq(attn_mha_cache_init_any(&cache, &m, B, T, &err), ATTN_OK, "%s", err.msg);
            const size_t nx = (size_t)B * T * d_in, ny = (size_t)B * T * d_out;
            float *x = malloc(nx * sizeof(float)), *dx = malloc(nx * sizeof(float));
            float *y = malloc(ny * sizeof(float)), *dy = malloc(ny * sizeof(float));
            cr_assert(x && dx && y && dy);
            ramp(x, nx, 0.5f), ramp(dy, ny, 2);
            cr_assert_eq(attn_mha_forward(&m, x, B, T, y, NULL, &cache, &err), ATTN_OK, "%s",
                         err.msg);
            attn_param_list pl;
            attn_param_list_init(&pl);
            cr_assert_eq(attn_mha_params(&m, "", &pl, &err), ATTN_OK, "%s", err.msg);
            outs o = {0};
            add_params(&o, &pl);
            add(&o, dx, nx);
            mha_ctx c = {&m, x, dy, dx, &cache, B, T};
            char what[96];
            snprintf(what, sizeof what, "attn_mha_backward (%s, %s)",
                     v ? "alibi+window+softcap" : "gqa+qk_norm+rope", path ? "reference" : "fused");
            check_rule(what, mha_run, &c, &o);
            attn_param_list_free(&pl);
            attn_attention_cache_free(&cache);
            attn_mha_free(&m);
            free(x), free(dx), free(y), free(dy);
        }
}

/* ---- fused attention (attn_h_sdpa_backward, over attn_flash_backward) -- */

typedef struct sdpa_ctx {
    float q[96], k[96], v[96], o[96], lse[24], d_o[96], dq[96], dk[96], dv[96];
    float scale;
} sdpa_ctx;
static void sdpa_run(void *p) {
    sdpa_ctx *c = p;
    attn_error err;
    cr_assert_eq(attn_h_sdpa_backward(1, 2, 12, 4, c->q, c->k, c->v, c->o, c->lse, c->scale, 0.0,
                                      NULL, ATTN_PRECISION_FP32, 1, c->d_o, c->dq, c->dk, c->dv,
                                      &err),
                 ATTN_OK, "%s", err.msg);
}
Test(rule, sdpa_default_and_own_scale) {
    for (int own = 0; own < 2; own++) {
        sdpa_ctx c;
        c.scale = own ? 0.3f : 0.0f;
        ramp(c.q, 96, 0), ramp(c.k, 96, 1), ramp(c.v, 96, 2), ramp(c.d_o, 96, 3);
        attn_error err;
        cr_assert_eq(attn_h_sdpa_forward(1, 2, 12, 4, c.q, c.k, c.v, c.scale, 0.0, NULL,
                                         ATTN_PRECISION_FP32, 1, c.o, c.lse, &err),
                     ATTN_OK, "%s", err.msg);
        outs o = {0};
        add(&o, c.dq, 96), add(&o, c.dk, 96), add(&o, c.dv, 96);
        check_rule(own ? "attn_h_sdpa_backward (scale 0.3)" : "attn_h_sdpa_backward", sdpa_run, &c,
                   &o);
    }
}

/* ---- the GPT ------------------------------------------------------------- */

typedef struct gpt_ctx {
    attn_gpt m;
    attn_gpt_acts acts;
} gpt_ctx;
static void gpt_run(void *p) {
    gpt_ctx *c = p;
    attn_error err;
    cr_assert_eq(attn_gpt_backward(&c->m, &c->acts, 1.0f, &err), ATTN_OK, "%s", err.msg);
}
Test(rule, gpt) {
    gpt_ctx c;
    attn_gpt_config cfg = {.vocab_size = 11,
                           .context_length = 8,
                           .emb_dim = 8,
                           .n_heads = 2,
                           .n_layers = 2,
                           .drop_rate = 0.0,
                           .qkv_bias = 0};
    attn_rng rng;
    attn_rng_seed(&rng, 5);
    attn_error err;
    cr_assert_eq(attn_gpt_init(&c.m, &cfg, &rng, &err), ATTN_OK, "%s", err.msg);
    cr_assert_eq(attn_gpt_acts_init(&c.acts, &c.m, 2, 6, &err), ATTN_OK, "%s", err.msg);
    int32_t ids[12], targets[12];
    for (int i = 0; i < 12; i++)
        ids[i] = (i * 5) % 11, targets[i] = (i * 3 + 1) % 11;
    cr_assert_eq(attn_gpt_forward(&c.m, ids, targets, 2, 6, NULL, &c.acts, NULL, &err), ATTN_OK,
                 "%s", err.msg);
    outs o = {0};
    add_params(&o, attn_gpt_params(&c.m));
    check_rule("attn_gpt_backward", gpt_run, &c, &o);
    attn_gpt_acts_free(&c.acts);
    attn_gpt_free(&c.m);
}
