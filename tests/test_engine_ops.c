/* Every op of every engine present against the fp32 CPU reference, in the
 * manner of ggml's test-backend-ops (attn/engine_ops.h): for each engine
 * (cpu-fp32; cpu-bf16 where this CPU runs it; test engines of their own)
 * and each op at each precision its supports_op takes, the op runs on
 * random inputs and every output is compared with the kernels' own fp32
 * results (attn/linear.h, ...): equal bit for bit at FP32, within bf16's
 * tolerance at BF16. An op the engine refuses gets a status with a message
 * and is not run, and a model refuses an engine that lacks an op it calls.
 * (ctest runs this at each ATTN_SIMD level.) */
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "attention/mha_fused.h"
#include "attn/activation.h"
#include "attn/cross_entropy.h"
#include "attn/embedding.h"
#include "attn/engine_cpu.h"
#include "attn/engine_ops.h"
#include "attn/gelu.h"
#include "attn/gemm.h"
#include "attn/gpt.h"
#include "attn/layernorm.h"
#include "attn/linear.h"
#include "attn/multi_head_attention.h"
#include "attn/optim.h"
#include "attn/residual.h"
#include "nn/linear_step.h"

/* ------------------------------------------------------ outputs of a run */

enum { MAX_OUT = 10 };
typedef struct outs {
    float *p[MAX_OUT];
    size_t n[MAX_OUT];
    int k;
} outs;

static void keep(outs *o, const float *v, size_t n) {
    cr_assert_lt(o->k, MAX_OUT);
    o->p[o->k] = malloc(n * sizeof(float));
    memcpy(o->p[o->k], v, n * sizeof(float));
    o->n[o->k++] = n;
}

static void outs_free(outs *o) {
    for (int i = 0; i < o->k; i++)
        free(o->p[i]);
    o->k = 0;
}

static float *rnd(attn_rng *rng, size_t n, float lo, float hi) {
    float *v = malloc(n * sizeof(float));
    attn_rng_uniform(rng, v, n, lo, hi);
    return v;
}

/* ------------------------------------------------------------- the cases
 * Each case makes its inputs from its own seed and runs its op on engine e,
 * or (e NULL) the op's kernel itself: the fp32 reference. */

typedef void (*op_case)(const attn_engine *e, outs *o);

enum { N = 37, IN = 24, OUT = 40, B = 2, T = 9, D = 32, HEADS = 4, V = 50 };

static void linear_case(const attn_engine *e, outs *o, int backward) {
    attn_rng rng;
    attn_rng_seed(&rng, 11);
    attn_error err;
    attn_linear l;
    cr_assert_eq(attn_linear_init(&l, IN, OUT, 1, &rng, &err), ATTN_OK);
    float *x = rnd(&rng, (size_t)N * IN, -1, 1), *y = malloc(sizeof(float) * N * OUT);
    float *dy = rnd(&rng, (size_t)N * OUT, -1, 1), *dx = calloc((size_t)N * IN, sizeof(float));
    if (!backward) {
        if (e)
            e->ops->linear_forward(e, &l, x, y, N);
        else
            attn_linear_forward(&l, x, y, N);
        keep(o, y, (size_t)N * OUT);
    } else {
        if (e)
            e->ops->linear_backward(e, &l, x, dy, dx, N);
        else
            attn_linear_backward(&l, x, dy, dx, N);
        keep(o, dx, (size_t)N * IN);
        keep(o, l.grad_weight, (size_t)OUT * IN);
        keep(o, l.grad_bias, OUT);
    }
    free(x), free(y), free(dy), free(dx);
    attn_linear_free(&l);
}
static void linear_fwd(const attn_engine *e, outs *o) {
    linear_case(e, o, 0);
}
static void linear_bwd(const attn_engine *e, outs *o) {
    linear_case(e, o, 1);
}

/* The reference: both products in fp32 on dy16's exact widening. */
static void linear_bwd_dy16(const attn_engine *e, outs *o) {
    attn_rng rng;
    attn_rng_seed(&rng, 12);
    attn_error err;
    attn_linear l;
    cr_assert_eq(attn_linear_init(&l, IN, OUT, 0, &rng, &err), ATTN_OK);
    float *x = rnd(&rng, (size_t)N * IN, -1, 1), *dy = rnd(&rng, (size_t)N * OUT, -1, 1);
    float *dx = calloc((size_t)N * IN, sizeof(float));
    uint16_t *dy16 = malloc(sizeof(uint16_t) * N * OUT);
    attn_gemm_round(N, OUT, dy, dy16);
    if (e) {
        e->ops->linear_backward_dy16(e, &l, x, dy16, dx, N);
    } else {
        attn_gemm_input_grad_dy16(NULL, 0, N, IN, OUT, dy16, l.weight, 1.0f, dx);
        attn_gemm_weight_grad_dy16(NULL, 0, N, IN, OUT, x, dy16, 1.0f, l.grad_weight);
    }
    keep(o, dx, (size_t)N * IN);
    keep(o, l.grad_weight, (size_t)OUT * IN);
    free(x), free(dy), free(dx), free(dy16);
    attn_linear_free(&l);
}

/* bf16 values widened to fp32 (exact). */
static void widen(const uint16_t *v16, float *v, size_t n) {
    for (size_t i = 0; i < n; i++) {
        const uint32_t u = (uint32_t)v16[i] << 16;
        memcpy(&v[i], &u, sizeof u);
    }
}

/* The kept bf16 input: the forward keeping x16 (and the x16 it kept), then
 * from x16 as given; the backward written (beta_x 0) then added (1). The
 * reference: the fp32 products on x16's exact widening. */
static void linear_x16_case(const attn_engine *e, outs *o, int backward) {
    attn_rng rng;
    attn_rng_seed(&rng, 14);
    attn_error err;
    attn_linear l;
    cr_assert_eq(attn_linear_init(&l, IN, OUT, 1, &rng, &err), ATTN_OK);
    const size_t nx = (size_t)N * IN;
    float *x = rnd(&rng, nx, -1, 1), *xw = malloc(sizeof(float) * nx);
    float *y = malloc(sizeof(float) * N * OUT), *dy = rnd(&rng, (size_t)N * OUT, -1, 1);
    float *dx = rnd(&rng, nx, -1, 1); /* beta_x 0: overwritten */
    uint16_t *x16 = malloc(sizeof(uint16_t) * nx), *kept = calloc(nx, sizeof(uint16_t));
    attn_gemm_round(N, IN, x, x16); /* the x16 ops' input, and its widening */
    widen(x16, xw, nx);
    if (!backward) {
        if (e) {
            e->ops->linear_forward_x16(e, &l, x, kept, y, N);
            keep(o, y, (size_t)N * OUT);
            widen(kept, x, nx); /* what it kept (x is spent) */
            keep(o, x, nx);
            e->ops->linear_forward_x16(e, &l, NULL, x16, y, N);
        } else {
            attn_linear_forward(&l, xw, y, N);
            keep(o, y, (size_t)N * OUT);
            keep(o, xw, nx);
        }
        keep(o, y, (size_t)N * OUT);
    } else {
        if (e) {
            e->ops->linear_backward_x16(e, &l, x16, dy, dx, 0.0f, N);
            e->ops->linear_backward_x16(e, &l, x16, dy, dx, 1.0f, N);
        } else {
            memset(dx, 0, sizeof(float) * nx);
            attn_linear_backward(&l, xw, dy, dx, N);
            attn_linear_backward(&l, xw, dy, dx, N);
        }
        keep(o, dx, nx);
        keep(o, l.grad_weight, (size_t)OUT * IN);
        keep(o, l.grad_bias, OUT);
    }
    free(x), free(xw), free(y), free(dy), free(dx), free(x16), free(kept);
    attn_linear_free(&l);
}
static void linear_x16_fwd(const attn_engine *e, outs *o) {
    linear_x16_case(e, o, 0);
}
static void linear_x16_bwd(const attn_engine *e, outs *o) {
    linear_x16_case(e, o, 1);
}

static void norm_case(const attn_engine *e, outs *o, attn_norm_kind kind, int backward) {
    attn_rng rng;
    attn_rng_seed(&rng, 13 + (unsigned)kind);
    attn_error err;
    attn_layernorm ln;
    cr_assert_eq(attn_norm_init(&ln, IN, kind, &err), ATTN_OK);
    attn_rng_uniform(&rng, ln.scale, IN, 0.5f, 1.5f);
    if (kind == ATTN_NORM_LAYERNORM) attn_rng_uniform(&rng, ln.shift, IN, -0.5f, 0.5f);
    float *x = rnd(&rng, (size_t)N * IN, -2, 2), *y = malloc(sizeof(float) * N * IN);
    float *mean = malloc(sizeof(float) * N), *rstd = malloc(sizeof(float) * N);
    float *dy = rnd(&rng, (size_t)N * IN, -1, 1), *dx = calloc((size_t)N * IN, sizeof(float));
    attn_layernorm_forward(&ln, x, y, mean, rstd, N); /* the backward's saved rows */
    if (!backward) {
        memset(y, 0, sizeof(float) * N * IN);
        if (e)
            e->ops->layernorm_forward(e, &ln, x, y, mean, rstd, N);
        else
            attn_layernorm_forward(&ln, x, y, mean, rstd, N);
        keep(o, y, (size_t)N * IN);
        keep(o, mean, N);
        keep(o, rstd, N);
    } else {
        if (e)
            e->ops->layernorm_backward(e, &ln, x, mean, rstd, dy, dx, N);
        else
            attn_layernorm_backward(&ln, x, mean, rstd, dy, dx, N);
        keep(o, dx, (size_t)N * IN);
        keep(o, ln.grad_scale, IN);
        if (kind == ATTN_NORM_LAYERNORM) keep(o, ln.grad_shift, IN);
    }
    free(x), free(y), free(mean), free(rstd), free(dy), free(dx);
    attn_layernorm_free(&ln);
}
static void layernorm_fwd(const attn_engine *e, outs *o) {
    norm_case(e, o, ATTN_NORM_LAYERNORM, 0);
    norm_case(e, o, ATTN_NORM_RMSNORM, 0);
}
static void layernorm_bwd(const attn_engine *e, outs *o) {
    norm_case(e, o, ATTN_NORM_LAYERNORM, 1);
    norm_case(e, o, ATTN_NORM_RMSNORM, 1);
}

/* The attention's two ops on a MultiHeadAttention with biases: the book's,
 * and a grouped-query one with RoPE and QK-norm. part 0: linear_qkv, 1:
 * attention_core, each forward or backward; the core's packed input is the
 * kernel's fp32 product on either side, its gradient a random one. */
static void attention_case(const attn_engine *e, outs *o, int variant, int part, int backward) {
    attn_rng rng;
    attn_rng_seed(&rng, 17 + (unsigned)variant);
    attn_error err;
    attn_attention_spec sp = attn_attention_book(HEADS, D / HEADS, 0.0);
    if (variant) sp.kv_heads = 2, sp.positions = ATTN_POSITIONS_ROPE, sp.qk_norm = 1;
    attn_mha m;
    attn_attention_cache c;
    /* A pass of its own: the bf16 engine rounds a weight once a pass, and
     * this case's weights may lie where the previous case's did. */
    if (e) e->ops->begin_pass(e);
    cr_assert_eq(attn_mha_init_spec(&m, D, D, T, &sp, 1, &rng, &err), ATTN_OK, "%s", err.msg);
    cr_assert_eq(attn_mha_cache_init(&c, &m, B, T, &err), ATTN_OK, "%s", err.msg);
    const size_t n = (size_t)B * T * D, d3 = (size_t)D + 2 * (size_t)m.kv_dim;
    float *x = rnd(&rng, n, -1, 1), *dx = calloc(n, sizeof(float));
    attn_status s = part == 0 && e ? e->ops->linear_qkv_forward(e, &m, x, B, T, &c, &err)
                                   : attn_mha_qkv_forward(&m, x, B, T, &c, &err);
    cr_assert_eq(s, ATTN_OK, "%s", err.msg);
    const attn_mha_fused_state *st = c.fused;
    if (part == 1) {
        s = e ? e->ops->attention_core_forward(e, &m, B, T, NULL, &c, &err)
              : attn_mha_core_forward(&m, B, T, NULL, &c, &err);
        cr_assert_eq(s, ATTN_OK, "%s", err.msg);
    }
    if (!backward) {
        keep(o, part ? c.context : st->qkv, part ? n : (size_t)B * T * d3);
    } else if (part == 0) {
        float *g = rnd(&rng, (size_t)B * T * d3, -1, 1);
        memcpy(st->d_qkv, g, sizeof(float) * (size_t)B * T * d3);
        s = e ? e->ops->linear_qkv_backward(e, &m, x, dx, B, T, &c, &err)
              : attn_mha_qkv_backward(&m, x, dx, B, T, &c, &err);
        cr_assert_eq(s, ATTN_OK, "%s", err.msg);
        keep(o, dx, n);
        keep(o, m.W_query.grad_weight, (size_t)D * D);
        keep(o, m.W_key.grad_weight, (size_t)m.kv_dim * D);
        keep(o, m.W_value.grad_weight, (size_t)m.kv_dim * D);
        keep(o, m.W_value.grad_bias, (size_t)m.kv_dim);
        free(g);
    } else {
        float *g = rnd(&rng, n, -1, 1);
        memcpy(c.d_context, g, sizeof(float) * n);
        s = e ? e->ops->attention_core_backward(e, &m, B, T, &c, &err)
              : attn_mha_core_backward(&m, B, T, &c, &err);
        cr_assert_eq(s, ATTN_OK, "%s", err.msg);
        keep(o, st->d_qkv, (size_t)B * T * d3);
        if (variant) keep(o, m.q_norm.grad_scale, (size_t)m.head_dim);
        free(g);
    }
    free(x), free(dx);
    attn_attention_cache_free(&c);
    attn_mha_free(&m);
}
static void qkv_fwd(const attn_engine *e, outs *o) {
    attention_case(e, o, 0, 0, 0);
    attention_case(e, o, 1, 0, 0);
}
static void qkv_bwd(const attn_engine *e, outs *o) {
    attention_case(e, o, 0, 0, 1);
    attention_case(e, o, 1, 0, 1);
}
static void core_fwd(const attn_engine *e, outs *o) {
    attention_case(e, o, 0, 1, 0);
    attention_case(e, o, 1, 1, 0);
}
static void core_bwd(const attn_engine *e, outs *o) {
    attention_case(e, o, 0, 1, 1);
    attention_case(e, o, 1, 1, 1);
}

/* The three activations at once (GELU, ReLU^2 on (N, OUT); SwiGLU on
 * (N, 2 OUT) -> (N, OUT)), against their kernels: forward, the backward
 * added into dx and in place, and GELU's bf16 output. */
static void activation_case(const attn_engine *e, outs *o, int backward) {
    attn_rng rng;
    attn_rng_seed(&rng, 23);
    const size_t n = (size_t)N * OUT;
    float *x = rnd(&rng, 2 * n, -6, 6), *y = malloc(sizeof(float) * n);
    float *dy = rnd(&rng, n, -1, 1), *dx = rnd(&rng, 2 * n, -1, 1); /* the backward adds */
    float *d = malloc(sizeof(float) * n);
    uint16_t *y16 = malloc(sizeof(uint16_t) * n);
    for (int act = ATTN_ACT_GELU; act <= ATTN_ACT_SWIGLU; act++) {
        if (!backward) {
            if (e)
                e->ops->activation_forward(e, act, x, y, NULL, N, OUT);
            else if (act == ATTN_ACT_GELU)
                attn_gelu_forward(x, y, n);
            else if (act == ATTN_ACT_RELU2)
                attn_relu2_forward(x, y, n);
            else
                attn_swiglu_forward(x, y, N, OUT);
            keep(o, y, n);
            continue;
        }
        memcpy(d, dy, sizeof(float) * n);
        if (e) {
            e->ops->activation_backward(e, act, x, dy, dx, N, OUT);
            if (act != ATTN_ACT_SWIGLU) e->ops->activation_backward(e, act, x, d, d, N, OUT);
        } else if (act == ATTN_ACT_GELU) {
            attn_gelu_backward(x, dy, dx, n);
            attn_gelu_backward_inplace(x, d, n);
        } else if (act == ATTN_ACT_RELU2) {
            for (size_t i = 0; i < n; i++) /* relu2'(x) = 2 max(x, 0) */
                dx[i] += (x[i] > 0 ? 2 * x[i] : 0) * dy[i];
            attn_relu2_backward_inplace(x, d, n);
        } else {
            attn_swiglu_backward(x, dy, dx, N, OUT);
        }
        keep(o, dx, 2 * n);
        if (act != ATTN_ACT_SWIGLU) keep(o, d, n);
    }
    if (!backward) { /* GELU straight to bf16, widened */
        if (e)
            e->ops->activation_forward(e, ATTN_ACT_GELU, x, NULL, y16, N, OUT);
        else
            attn_gelu_forward_bf16(x, y16, n);
        widen(y16, y, n);
        keep(o, y, n);
    }
    free(x), free(y), free(dy), free(dx), free(d), free(y16);
}
static void activation_fwd(const attn_engine *e, outs *o) {
    activation_case(e, o, 0);
}
static void activation_bwd(const attn_engine *e, outs *o) {
    activation_case(e, o, 1);
}

static void embedding_case(const attn_engine *e, outs *o, int backward) {
    attn_rng rng;
    attn_rng_seed(&rng, 29);
    attn_error err;
    attn_embedding emb;
    cr_assert_eq(attn_embedding_init(&emb, V, D, &rng, &err), ATTN_OK);
    int32_t ids[N];
    for (int i = 0; i < N; i++)
        ids[i] = (i * 7 + 3) % V; /* repeats: the backward adds rows onto one */
    float *out = malloc(sizeof(float) * N * D), *dout = rnd(&rng, (size_t)N * D, -1, 1);
    if (!backward) {
        if (e)
            e->ops->embedding_forward(e, &emb, ids, out, N);
        else
            attn_embedding_forward(&emb, ids, out, N);
        keep(o, out, (size_t)N * D);
    } else {
        if (e)
            e->ops->embedding_backward(e, &emb, ids, dout, N);
        else
            attn_embedding_backward(&emb, ids, dout, N);
        keep(o, emb.grad_weight, (size_t)V * D);
    }
    free(out), free(dout);
    attn_embedding_free(&emb);
}
static void embedding_fwd(const attn_engine *e, outs *o) {
    embedding_case(e, o, 0);
}
static void embedding_bwd(const attn_engine *e, outs *o) {
    embedding_case(e, o, 1);
}

/* which: 0 the loss, 1 the backward (+=), 2 the grad (written). */
static void ce_case(const attn_engine *e, outs *o, int which) {
    attn_rng rng;
    attn_rng_seed(&rng, 31);
    int32_t tg[N];
    for (int i = 0; i < N; i++)
        tg[i] = (i * 5 + 1) % V;
    float *logits = rnd(&rng, (size_t)N * V, -4, 4), *lse = malloc(sizeof(float) * N);
    float *d = rnd(&rng, (size_t)N * V, -1, 1);
    double total = 0.5;
    if (which == 0 && e)
        e->ops->cross_entropy_forward(e, logits, tg, lse, N, V, &total);
    else
        attn_cross_entropy_accumulate(logits, tg, lse, N, V, &total);
    if (which == 0) {
        const float t = (float)total;
        keep(o, &t, 1);
        keep(o, lse, N);
    } else if (which == 1) {
        if (e)
            e->ops->cross_entropy_backward(e, logits, tg, lse, 0.7f, d, N, V);
        else
            attn_cross_entropy_backward(logits, tg, lse, 0.7f, d, N, V);
        keep(o, d, (size_t)N * V);
    } else {
        if (e)
            e->ops->cross_entropy_grad(e, logits, tg, lse, 0.01f, logits, N, V);
        else
            attn_cross_entropy_grad(logits, tg, lse, 0.01f, logits, N, V);
        keep(o, logits, (size_t)N * V);
    }
    free(logits), free(lse), free(d);
}
static void ce_fwd(const attn_engine *e, outs *o) {
    ce_case(e, o, 0);
}
static void ce_bwd(const attn_engine *e, outs *o) {
    ce_case(e, o, 1);
}
static void ce_grad(const attn_engine *e, outs *o) {
    ce_case(e, o, 2);
}

/* Two steps over a Linear's table, the gradients read times 0.5. */
static void adamw_case(const attn_engine *e, outs *o) {
    attn_rng rng;
    attn_rng_seed(&rng, 37);
    attn_error err;
    attn_linear l;
    attn_param_list list;
    attn_adamw opt;
    const attn_adamw_config cfg = attn_adamw_defaults();
    attn_param_list_init(&list);
    cr_assert_eq(attn_linear_init(&l, IN, OUT, 1, &rng, &err), ATTN_OK);
    cr_assert_eq(attn_linear_params(&l, "", &list, &err), ATTN_OK, "%s", err.msg);
    cr_assert_eq(attn_adamw_init(&opt, &list, &cfg, &err), ATTN_OK, "%s", err.msg);
    for (int step = 0; step < 2; step++) {
        attn_rng_uniform(&rng, l.grad_weight, (size_t)OUT * IN, -1, 1);
        attn_rng_uniform(&rng, l.grad_bias, OUT, -1, 1);
        attn_status s = e ? e->ops->adamw_step(e, &opt, &list, 1e-2, 0.5f, &err)
                          : attn_adamw_step_scaled(&opt, &list, 1e-2, 0.5f, &err);
        cr_assert_eq(s, ATTN_OK, "%s", err.msg);
    }
    keep(o, l.weight, (size_t)OUT * IN);
    keep(o, l.bias, OUT);
    keep(o, opt.m, opt.total);
    keep(o, opt.v, opt.total);
    attn_adamw_free(&opt);
    attn_param_list_free(&list);
    attn_linear_free(&l);
}

/* A drawn mask's elements as floats (an output to compare). */
static void keep_mask(outs *o, const uint8_t *mask, size_t n) {
    float *f = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++)
        f[i] = mask[i];
    keep(o, f, n);
    free(f);
}

/* which: 0 dropout_add, 1 its backward, 2 dropout, 3 its backward; each in
 * training mode (a mask drawn from PyTorch's stream) and in eval mode. */
static void dropout_case(const attn_engine *e, outs *o, int which) {
    const size_t n = 40000; /* past ATTN_PAR_MIN: the threaded loops */
    for (int training = 0; training <= 1; training++) {
        attn_rng rng, draws;
        attn_rng_seed(&rng, 41);
        attn_rng_seed(&draws, 43);
        const attn_forward_mode mode = {training, &draws, ATTN_STREAM_TORCH_CPU};
        float *f = rnd(&rng, n, -1, 1), *sc = rnd(&rng, n, -1, 1), *out = rnd(&rng, n, -1, 1);
        uint8_t *mask = calloc(n, 1);
        float flag = 0;
        if (which == 0)
            flag = (float)(e ? e->ops->dropout_add_forward(e, f, sc, out, mask, 0.1, &mode, n)
                             : attn_residual_dropout_forward(f, sc, out, mask, 0.1, &mode, n));
        else if (which == 2)
            flag = (float)(e ? e->ops->dropout_forward(e, out, mask, 0.1, &mode, n)
                             : attn_dropout_forward_inplace(out, mask, 0.1, &mode, n));
        else
            attn_dropout_mask(&draws, ATTN_STREAM_TORCH_CPU, 0.1, mask, n);
        if (which == 1 && e)
            e->ops->dropout_add_backward(e, f, mask, 0.1, training, out, n);
        else if (which == 1)
            attn_residual_dropout_backward(f, mask, 0.1, training, out, n);
        else if (which == 3 && e)
            e->ops->dropout_backward(e, out, mask, 0.1, n);
        else if (which == 3)
            attn_dropout_backward_inplace(out, mask, 0.1, n);
        keep(o, out, n);
        keep_mask(o, mask, n);
        keep(o, &flag, 1);
        free(f), free(sc), free(out), free(mask);
    }
}
static void dropout_add_fwd(const attn_engine *e, outs *o) {
    dropout_case(e, o, 0);
}
static void dropout_add_bwd(const attn_engine *e, outs *o) {
    dropout_case(e, o, 1);
}
static void dropout_fwd(const attn_engine *e, outs *o) {
    dropout_case(e, o, 2);
}
static void dropout_bwd(const attn_engine *e, outs *o) {
    dropout_case(e, o, 3);
}

/* Sequences of T rows from position 2 (forward), 0 (backward). */
static void positions_case(const attn_engine *e, outs *o, int backward) {
    attn_rng rng;
    attn_rng_seed(&rng, 47);
    attn_error err;
    attn_embedding pos;
    cr_assert_eq(attn_embedding_init(&pos, T + 2, D, &rng, &err), ATTN_OK);
    const size_t rows = (size_t)B * T, n = rows * D;
    float *x = rnd(&rng, n, -1, 1);
    if (!backward) {
        if (e)
            e->ops->add_positions_forward(e, &pos, x, rows, T, 2);
        else
            attn_embedding_add_positions(&pos, x, rows, T, 2);
        keep(o, x, n);
    } else {
        attn_rng_uniform(&rng, pos.grad_weight, (size_t)(T + 2) * D, -1, 1); /* it adds */
        if (e)
            e->ops->add_positions_backward(e, &pos, x, rows, T);
        else
            attn_embedding_add_positions_backward(&pos, x, rows, T);
        keep(o, pos.grad_weight, (size_t)(T + 2) * D);
    }
    free(x);
    attn_embedding_free(&pos);
}
static void positions_fwd(const attn_engine *e, outs *o) {
    positions_case(e, o, 0);
}
static void positions_bwd(const attn_engine *e, outs *o) {
    positions_case(e, o, 1);
}

static void add_case(const attn_engine *e, outs *o) {
    attn_rng rng;
    attn_rng_seed(&rng, 53);
    const size_t n = (size_t)3 * D;
    float *x = rnd(&rng, n, -1, 1), *y = rnd(&rng, n, -1, 1);
    if (e)
        e->ops->add(e, x, y, n);
    else
        attn_add(x, y, n);
    keep(o, x, n);
    free(x), free(y);
}

/* The precision run_engine asks an op at (the step's products: their
 * weight copy's). */
static attn_precision asked = ATTN_PRECISION_FP32;

/* Three sequences' rows through a Linear of 40 outputs (rows split over a
 * team of two, y's rows OUT + 3 apart): once without the closing barrier
 * and once with it. The reference: the fp32 GEMV alone. */
static void linear_step_case(const attn_engine *e, outs *o) {
    attn_rng rng;
    attn_rng_seed(&rng, 59);
    attn_error err;
    attn_linear l;
    cr_assert_eq(attn_linear_init(&l, IN, OUT, 1, &rng, &err), ATTN_OK);
    const int n = 3;
    const size_t ldx = IN + 5, ldy = OUT + 3;
    float *x = rnd(&rng, (size_t)n * ldx, -1, 1);
    float *y0 = calloc((size_t)n * ldy, sizeof(float)),
          *y1 = calloc((size_t)n * ldy, sizeof(float));
    uint16_t *w16 = malloc(sizeof(uint16_t) * OUT * IN);
    attn_linear_bf16_copy(&l, w16);
    const uint16_t *w = e && asked == ATTN_PRECISION_BF16 ? w16 : NULL;
    if (e) {
#pragma omp parallel num_threads(2)
        {
            e->ops->linear_step(e, &l, w, x, ldx, y0, ldy, n, 0);
            e->ops->linear_step(e, &l, w, x, ldx, y1, ldy, n, 1);
        }
    } else {
        attn_linear_step_ld(&l, NULL, x, ldx, y0, ldy, n, 1);
        attn_linear_step_ld(&l, NULL, x, ldx, y1, ldy, n, 1);
    }
    keep(o, y0, (size_t)n * ldy);
    keep(o, y1, (size_t)n * ldy);
    free(x), free(y0), free(y1), free(w16);
    attn_linear_free(&l);
}

/* Two sequences at position 5 of caches of T rows (a ring of 4 with a
 * window): the book's attention, and a grouped-query one with RoPE and
 * QK-norm over a window (which rewrites the key row). */
static void attention_step_case(const attn_engine *e, outs *o, int variant) {
    attn_rng rng;
    attn_rng_seed(&rng, 61 + (unsigned)variant);
    attn_error err;
    attn_attention_spec sp = attn_attention_book(HEADS, D / HEADS, 0.0);
    if (variant) sp.kv_heads = 2, sp.positions = ATTN_POSITIONS_ROPE, sp.qk_norm = 1, sp.window = 4;
    attn_mha m;
    cr_assert_eq(attn_mha_init_spec(&m, D, D, T, &sp, 1, &rng, &err), ATTN_OK, "%s", err.msg);
    const int n = 2, pos = 5;
    const size_t stride = (size_t)attn_mha_step_rows(&m) * (size_t)m.kv_dim, kv = n * stride;
    float *q = rnd(&rng, (size_t)n * D, -1, 1), *k = rnd(&rng, kv, -1, 1);
    float *v = rnd(&rng, kv, -1, 1), *ctx = calloc((size_t)n * D, sizeof(float));
    float *scores = calloc((size_t)n * HEADS * T, sizeof(float));
    if (e)
        e->ops->attention_step(e, &m, n, q, k, v, stride, pos, ctx, scores);
    else
        attn_mha_step_core(&m, n, q, k, v, stride, pos, ctx, scores);
    keep(o, ctx, (size_t)n * D);
    keep(o, k, kv); /* the key row, normed and rotated */
    keep(o, q, (size_t)n * D);
    free(q), free(k), free(v), free(ctx), free(scores);
    attn_mha_free(&m);
}
static void attention_step(const attn_engine *e, outs *o) {
    attention_step_case(e, o, 0);
    attention_step_case(e, o, 1);
}

/* GELU, ReLU^2 and SwiGLU on three rows of fc1's width. */
static void activation_step(const attn_engine *e, outs *o) {
    for (int act = ATTN_ACT_GELU; act <= ATTN_ACT_SWIGLU; act++) {
        attn_rng rng;
        attn_rng_seed(&rng, 67);
        attn_error err;
        attn_feedforward ff;
        cr_assert_eq(attn_feedforward_init_act(&ff, D, (attn_act)act, &rng, &err), ATTN_OK);
        const size_t n = (size_t)3 * (size_t)ff.fc1.out_features;
        float *h = rnd(&rng, n, -4, 4);
        if (e)
            e->ops->activation_step(e, &ff, h, 3);
        else
            attn_feedforward_act_step(&ff, h, 3);
        keep(o, h, n);
        free(h);
        attn_feedforward_free(&ff);
    }
}

/* Every op, its case and its shape (rows, in, out) as supports_op is asked. */
static const struct {
    attn_op op;
    op_case run;
    size_t rows;
    int in, out;
} CASES[] = {
    {ATTN_OP_LINEAR, linear_fwd, N, IN, OUT},
    {ATTN_OP_LINEAR_BACKWARD, linear_bwd, N, IN, OUT},
    {ATTN_OP_LINEAR_BACKWARD_DY16, linear_bwd_dy16, N, IN, OUT},
    {ATTN_OP_LINEAR_X16, linear_x16_fwd, N, IN, OUT},
    {ATTN_OP_LINEAR_BACKWARD_X16, linear_x16_bwd, N, IN, OUT},
    {ATTN_OP_LINEAR_QKV, qkv_fwd, B *T, D, 3 * D},
    {ATTN_OP_LINEAR_QKV_BACKWARD, qkv_bwd, B *T, D, 3 * D},
    {ATTN_OP_LAYERNORM, layernorm_fwd, N, IN, 0},
    {ATTN_OP_LAYERNORM_BACKWARD, layernorm_bwd, N, IN, 0},
    {ATTN_OP_ATTENTION_CORE, core_fwd, B *T, D, D},
    {ATTN_OP_ATTENTION_CORE_BACKWARD, core_bwd, B *T, D, D},
    {ATTN_OP_ACTIVATION, activation_fwd, N, 2 * OUT, OUT},
    {ATTN_OP_ACTIVATION_BACKWARD, activation_bwd, N, 2 * OUT, OUT},
    {ATTN_OP_EMBEDDING, embedding_fwd, N, 0, D},
    {ATTN_OP_EMBEDDING_BACKWARD, embedding_bwd, N, 0, D},
    {ATTN_OP_CROSS_ENTROPY, ce_fwd, N, 0, V},
    {ATTN_OP_CROSS_ENTROPY_BACKWARD, ce_bwd, N, 0, V},
    {ATTN_OP_CROSS_ENTROPY_GRAD, ce_grad, N, 0, V},
    {ATTN_OP_ADAMW, adamw_case, 0, 0, 0},
    {ATTN_OP_DROPOUT_ADD, dropout_add_fwd, 40000, 0, 0},
    {ATTN_OP_DROPOUT_ADD_BACKWARD, dropout_add_bwd, 40000, 0, 0},
    {ATTN_OP_DROPOUT, dropout_fwd, 40000, 0, 0},
    {ATTN_OP_DROPOUT_BACKWARD, dropout_bwd, 40000, 0, 0},
    {ATTN_OP_ADD_POSITIONS, positions_fwd, B *T, 0, D},
    {ATTN_OP_ADD_POSITIONS_BACKWARD, positions_bwd, B *T, 0, D},
    {ATTN_OP_ADD, add_case, 3, D, D},
    {ATTN_OP_LINEAR_STEP, linear_step_case, 3, IN, OUT},
    {ATTN_OP_ATTENTION_STEP, attention_step, 2, D, D},
    {ATTN_OP_ACTIVATION_STEP, activation_step, 3, D, 4 * D},
};
_Static_assert(sizeof CASES / sizeof *CASES == ATTN_OP_COUNT, "a case per op");

/* ----------------------------------------------- a test engine of its own
 * The recipe "add an engine" in small: a table of its own whose entries
 * count their calls and run cpu-fp32's (its state NULL, as cpu-fp32's).
 * "partial" takes no attention, activation or AdamW. */

static int calls[ATTN_OP_COUNT];
static attn_engine cpu32; /* whose entries the test engines run */

#define COUNTED(op) (calls[op]++, cpu32.ops)

static void t_linear_forward(const attn_engine *e, const attn_linear *l, const float *x, float *y,
                             size_t n) {
    COUNTED(ATTN_OP_LINEAR)->linear_forward(e, l, x, y, n);
}
static void t_linear_backward(const attn_engine *e, attn_linear *l, const float *x, const float *dy,
                              float *dx, size_t n) {
    COUNTED(ATTN_OP_LINEAR_BACKWARD)->linear_backward(e, l, x, dy, dx, n);
}
static void t_ln_forward(const attn_engine *e, const attn_layernorm *ln, const float *x, float *y,
                         float *mean, float *rstd, size_t n) {
    COUNTED(ATTN_OP_LAYERNORM)->layernorm_forward(e, ln, x, y, mean, rstd, n);
}
static void t_ln_backward(const attn_engine *e, attn_layernorm *ln, const float *x,
                          const float *mean, const float *rstd, const float *dy, float *dx,
                          size_t n) {
    COUNTED(ATTN_OP_LAYERNORM_BACKWARD)->layernorm_backward(e, ln, x, mean, rstd, dy, dx, n);
}
static attn_status t_qkv_forward(const attn_engine *e, const attn_mha *m, const float *x, int b,
                                 int t, attn_attention_cache *c, attn_error *err) {
    return COUNTED(ATTN_OP_LINEAR_QKV)->linear_qkv_forward(e, m, x, b, t, c, err);
}
static attn_status t_qkv_backward(const attn_engine *e, attn_mha *m, const float *x, float *dx,
                                  int b, int t, const attn_attention_cache *c, attn_error *err) {
    return COUNTED(ATTN_OP_LINEAR_QKV_BACKWARD)->linear_qkv_backward(e, m, x, dx, b, t, c, err);
}
static attn_status t_core_forward(const attn_engine *e, const attn_mha *m, int b, int t,
                                  const attn_forward_mode *mode, attn_attention_cache *c,
                                  attn_error *err) {
    return COUNTED(ATTN_OP_ATTENTION_CORE)->attention_core_forward(e, m, b, t, mode, c, err);
}
static attn_status t_core_backward(const attn_engine *e, attn_mha *m, int b, int t,
                                   const attn_attention_cache *c, attn_error *err) {
    return COUNTED(ATTN_OP_ATTENTION_CORE_BACKWARD)->attention_core_backward(e, m, b, t, c, err);
}
static void t_linear_forward_x16(const attn_engine *e, const attn_linear *l, const float *x,
                                 uint16_t *x16, float *y, size_t n) {
    COUNTED(ATTN_OP_LINEAR_X16)->linear_forward_x16(e, l, x, x16, y, n);
}
static void t_linear_backward_x16(const attn_engine *e, attn_linear *l, const uint16_t *x16,
                                  const float *dy, float *dx, float beta_x, size_t n) {
    COUNTED(ATTN_OP_LINEAR_BACKWARD_X16)->linear_backward_x16(e, l, x16, dy, dx, beta_x, n);
}
static void t_act_forward(const attn_engine *e, int act, const float *x, float *y, uint16_t *y16,
                          size_t n, int hidden) {
    COUNTED(ATTN_OP_ACTIVATION)->activation_forward(e, act, x, y, y16, n, hidden);
}
static void t_act_backward(const attn_engine *e, int act, const float *x, float *dy, float *dx,
                           size_t n, int hidden) {
    COUNTED(ATTN_OP_ACTIVATION_BACKWARD)->activation_backward(e, act, x, dy, dx, n, hidden);
}
static void t_emb_forward(const attn_engine *e, const attn_embedding *emb, const int32_t *ids,
                          float *out, size_t n) {
    COUNTED(ATTN_OP_EMBEDDING)->embedding_forward(e, emb, ids, out, n);
}
static void t_emb_backward(const attn_engine *e, attn_embedding *emb, const int32_t *ids,
                           const float *dout, size_t n) {
    COUNTED(ATTN_OP_EMBEDDING_BACKWARD)->embedding_backward(e, emb, ids, dout, n);
}
static void t_ce_forward(const attn_engine *e, const float *lg, const int32_t *tg, float *lse,
                         size_t n, size_t v, double *total) {
    COUNTED(ATTN_OP_CROSS_ENTROPY)->cross_entropy_forward(e, lg, tg, lse, n, v, total);
}
static void t_ce_backward(const attn_engine *e, const float *lg, const int32_t *tg,
                          const float *lse, float dloss, float *d, size_t n, size_t v) {
    COUNTED(ATTN_OP_CROSS_ENTROPY_BACKWARD)->cross_entropy_backward(e, lg, tg, lse, dloss, d, n, v);
}

static int t_dadd_forward(const attn_engine *e, const float *f, const float *sc, float *out,
                          uint8_t *mask, double p, const attn_forward_mode *mode, size_t n) {
    return COUNTED(ATTN_OP_DROPOUT_ADD)->dropout_add_forward(e, f, sc, out, mask, p, mode, n);
}
static void t_dadd_backward(const attn_engine *e, const float *dout, const uint8_t *mask, double p,
                            int dropped, float *df, size_t n) {
    COUNTED(ATTN_OP_DROPOUT_ADD_BACKWARD)->dropout_add_backward(e, dout, mask, p, dropped, df, n);
}
static int t_drop_forward(const attn_engine *e, float *x, uint8_t *mask, double p,
                          const attn_forward_mode *mode, size_t n) {
    return COUNTED(ATTN_OP_DROPOUT)->dropout_forward(e, x, mask, p, mode, n);
}
static void t_drop_backward(const attn_engine *e, float *dx, const uint8_t *mask, double p,
                            size_t n) {
    COUNTED(ATTN_OP_DROPOUT_BACKWARD)->dropout_backward(e, dx, mask, p, n);
}
static void t_pos_forward(const attn_engine *e, const attn_embedding *t, float *x, size_t n, int tt,
                          int pos0) {
    COUNTED(ATTN_OP_ADD_POSITIONS)->add_positions_forward(e, t, x, n, tt, pos0);
}
static void t_pos_backward(const attn_engine *e, attn_embedding *t, const float *dx, size_t n,
                           int tt) {
    COUNTED(ATTN_OP_ADD_POSITIONS_BACKWARD)->add_positions_backward(e, t, dx, n, tt);
}
static void t_add(const attn_engine *e, float *x, const float *y, size_t n) {
    COUNTED(ATTN_OP_ADD)->add(e, x, y, n);
}
static void t_linear_step(const attn_engine *e, const attn_linear *l, const uint16_t *w,
                          const float *x, size_t ldx, float *y, size_t ldy, int n, int wait) {
    COUNTED(ATTN_OP_LINEAR_STEP)->linear_step(e, l, w, x, ldx, y, ldy, n, wait);
}
static void t_att_step(const attn_engine *e, const attn_mha *m, int n, float *q, float *k, float *v,
                       size_t stride, int pos, float *ctx, float *scores) {
    COUNTED(ATTN_OP_ATTENTION_STEP)->attention_step(e, m, n, q, k, v, stride, pos, ctx, scores);
}
static void t_act_step(const attn_engine *e, const attn_feedforward *ff, float *h, int n) {
    COUNTED(ATTN_OP_ACTIVATION_STEP)->activation_step(e, ff, h, n);
}

static attn_status partial_supports(const attn_engine *e, const attn_op_desc *d, attn_error *err) {
    if (d->op == ATTN_OP_ATTENTION_CORE || d->op == ATTN_OP_ATTENTION_CORE_BACKWARD ||
        d->op == ATTN_OP_ACTIVATION || d->op == ATTN_OP_ACTIVATION_BACKWARD ||
        d->op == ATTN_OP_ADAMW)
        return attn_fail(err, ATTN_ERR_INVALID_ARG, "engine %s has no %s", e->name,
                         attn_op_name(d->op));
    return cpu32.ops->supports_op(e, d, err);
}

/* "trains": every op but the step's attention core (it trains, and
 * refuses a KV cache). */
static attn_status trains_supports(const attn_engine *e, const attn_op_desc *d, attn_error *err) {
    if (d->op == ATTN_OP_ATTENTION_STEP)
        return attn_fail(err, ATTN_ERR_INVALID_ARG, "engine %s has no %s", e->name,
                         attn_op_name(d->op));
    return cpu32.ops->supports_op(e, d, err);
}

static attn_engine_ops counting_ops, partial_ops, trains_ops;

/* The two test engines (after cpu32 is made). */
static void test_engines(attn_engine *counting, attn_engine *partial) {
    attn_engine_ops t = *cpu32.ops;
    t.release = NULL; /* they own nothing */
    t.linear_forward = t_linear_forward, t.linear_backward = t_linear_backward;
    t.layernorm_forward = t_ln_forward, t.layernorm_backward = t_ln_backward;
    t.linear_qkv_forward = t_qkv_forward, t.linear_qkv_backward = t_qkv_backward;
    t.attention_core_forward = t_core_forward, t.attention_core_backward = t_core_backward;
    t.linear_forward_x16 = t_linear_forward_x16, t.linear_backward_x16 = t_linear_backward_x16;
    t.activation_forward = t_act_forward, t.activation_backward = t_act_backward;
    t.embedding_forward = t_emb_forward, t.embedding_backward = t_emb_backward;
    t.cross_entropy_forward = t_ce_forward, t.cross_entropy_backward = t_ce_backward;
    t.dropout_add_forward = t_dadd_forward, t.dropout_add_backward = t_dadd_backward;
    t.dropout_forward = t_drop_forward, t.dropout_backward = t_drop_backward;
    t.add_positions_forward = t_pos_forward, t.add_positions_backward = t_pos_backward;
    t.add = t_add, t.linear_step = t_linear_step;
    t.attention_step = t_att_step, t.activation_step = t_act_step;
    counting_ops = t;
    t.supports_op = trains_supports;
    trains_ops = t;
    t.supports_op = partial_supports;
    partial_ops = t;
    *counting = (attn_engine){"counting", ATTN_PRECISION_FP32, &counting_ops, NULL, 0};
    *partial = (attn_engine){"partial", ATTN_PRECISION_FP32, &partial_ops, NULL, 0};
}

/* ------------------------------------------------------------ the harness */

/* max |a - b| <= tol * max |ref| over each output (tol 0: the same bits). */
static void compare(const outs *got, const outs *ref, double tol, const char *engine,
                    const char *op) {
    cr_assert_eq(got->k, ref->k);
    for (int i = 0; i < ref->k; i++) {
        if (tol == 0.0) {
            cr_expect(memcmp(got->p[i], ref->p[i], ref->n[i] * sizeof(float)) == 0,
                      "%s %s: output %d differs from the fp32 reference", engine, op, i);
            continue;
        }
        double scale = 0, diff = 0;
        for (size_t j = 0; j < ref->n[i]; j++) {
            scale = fmax(scale, fabs((double)ref->p[i][j]));
            diff = fmax(diff, fabs((double)got->p[i][j] - (double)ref->p[i][j]));
        }
        cr_expect(diff <= tol * scale, "%s %s: output %d off by %g (scale %g, tolerance %g)",
                  engine, op, i, diff, scale, tol);
    }
}

/* Every op at each precision e takes, against the kernels'; returns the
 * number run and counts the refusals (each with its message). */
static int run_engine(const attn_engine *e, int *refused) {
    int ran = 0;
    for (int c = 0; c < ATTN_OP_COUNT; c++) {
        for (int p = ATTN_PRECISION_FP32; p <= ATTN_PRECISION_BF16; p++) {
            const attn_op_desc d = {CASES[c].op, (attn_precision)p, CASES[c].rows,
                                    CASES[c].in, CASES[c].out,      NULL};
            attn_error err = {0};
            if (attn_engine_supports_op(e, &d, &err) != ATTN_OK) {
                cr_expect(err.code != ATTN_OK && err.msg[0], "%s refuses %s without a message",
                          e->name, attn_op_name(d.op));
                ++*refused;
                continue;
            }
            outs got = {0}, ref = {0};
            asked = d.precision;
            e->ops->begin_pass(e); /* each weight rounded anew (a new tensor per case) */
            CASES[c].run(e, &got);
            CASES[c].run(NULL, &ref);
            compare(&got, &ref, p == ATTN_PRECISION_BF16 ? 3e-2 : 0.0, e->name, attn_op_name(d.op));
            outs_free(&got), outs_free(&ref);
            ran++;
        }
    }
    return ran;
}

static int have_bf16(void) {
    attn_error err;
    return attn_precision_check(ATTN_PRECISION_BF16, &err) == ATTN_OK;
}

Test(engine_ops, every_op_of_every_engine_against_the_fp32_reference) {
    attn_error err;
    cr_assert_eq(attn_engine_cpu_init(&cpu32, ATTN_PRECISION_FP32, &err), ATTN_OK);
    attn_engine counting, partial, bf16 = {0};
    test_engines(&counting, &partial);
    int refused = 0;
    /* cpu-fp32: every op in fp32 but the three from bf16 operands, and the
     * step's linear on bf16 weight copies too. */
    cr_expect_eq(run_engine(&cpu32, &refused), ATTN_OP_COUNT - 2);
    cr_expect_eq(refused, ATTN_OP_COUNT + 2);
    refused = 0;
    /* partial: cpu-fp32's less its five refusals. */
    cr_expect_eq(run_engine(&partial, &refused), ATTN_OP_COUNT - 7);
    cr_expect_eq(refused, ATTN_OP_COUNT + 7);
    if (have_bf16()) {
        cr_assert_eq(attn_engine_cpu_init(&bf16, ATTN_PRECISION_BF16, &err), ATTN_OK, "%s",
                     err.msg);
        refused = 0;
        /* cpu-bf16: each op once, the products in bf16, the rest in fp32;
         * the step's linear at both. */
        cr_expect_eq(run_engine(&bf16, &refused), ATTN_OP_COUNT + 1);
        cr_expect_eq(refused, ATTN_OP_COUNT - 1);
        attn_engine_free(&bf16);
        cr_expect_null(bf16.ops, "freed engines are cleared");
    } else {
        cr_expect_neq(attn_engine_cpu_init(&bf16, ATTN_PRECISION_BF16, &err), ATTN_OK);
        cr_expect_null(bf16.ops, "a refused engine is cleared");
    }
    attn_engine_free(&cpu32);
}

/* ------------------------------------------------------------- a model */

static const attn_gpt_config TINY = {
    .vocab_size = 23, .context_length = 8, .emb_dim = 16, .n_heads = 2, .n_layers = 2};

static void tiny(attn_gpt *m, attn_gpt_acts *a) {
    attn_rng rng;
    attn_rng_seed(&rng, 5);
    attn_error err;
    cr_assert_eq(attn_gpt_init(m, &TINY, &rng, &err), ATTN_OK, "%s", err.msg);
    cr_assert_eq(attn_gpt_acts_init(a, m, 2, 8, &err), ATTN_OK, "%s", err.msg);
}

static float step(attn_gpt *m, attn_gpt_acts *a) {
    int32_t ids[16], tg[16];
    for (int i = 0; i < 16; i++)
        ids[i] = (i * 5 + 2) % 23, tg[i] = (i * 3 + 1) % 23;
    attn_error err;
    float loss = 0;
    attn_gpt_zero_grad(m);
    cr_assert_eq(attn_gpt_forward_backward(m, ids, tg, 2, 8, NULL, a, 1.0f, &loss, &err), ATTN_OK,
                 "%s", err.msg);
    return loss;
}

/* A model on the counting engine: every pass's kernel through its table
 * (each op the layer list walks counted), the same bits as on cpu-fp32. */
Test(engine_ops, a_model_runs_on_an_engine_of_its_own_through_its_ops) {
    attn_error err;
    cr_assert_eq(attn_engine_cpu_init(&cpu32, ATTN_PRECISION_FP32, &err), ATTN_OK);
    attn_engine counting, partial;
    test_engines(&counting, &partial);
    attn_gpt m, r;
    attn_gpt_acts a, ra;
    tiny(&m, &a), tiny(&r, &ra);
    cr_assert_eq(attn_gpt_set_engine(&m, &counting, &err), ATTN_OK, "%s", err.msg);
    memset(calls, 0, sizeof calls);
    const float loss = step(&m, &a), want = step(&r, &ra);
    cr_expect_eq(memcmp(&loss, &want, sizeof loss), 0, "loss %g, cpu-fp32 %g", (double)loss,
                 (double)want);
    const attn_param_list *p = attn_gpt_params(&m), *q = attn_gpt_params(&r);
    cr_expect(memcmp(p->grads, q->grads, p->grads_numel * sizeof(float)) == 0,
              "the gradients are cpu-fp32's");
    const int L = TINY.n_layers;
    cr_expect_eq(calls[ATTN_OP_EMBEDDING], 1);
    cr_expect_eq(calls[ATTN_OP_EMBEDDING_BACKWARD], 1);
    cr_expect_eq(calls[ATTN_OP_LAYERNORM], 2 * L + 1);
    cr_expect_eq(calls[ATTN_OP_LAYERNORM_BACKWARD], 2 * L + 1);
    cr_expect_eq(calls[ATTN_OP_LINEAR_QKV], L);
    cr_expect_eq(calls[ATTN_OP_LINEAR_QKV_BACKWARD], L);
    cr_expect_eq(calls[ATTN_OP_ATTENTION_CORE], L);
    cr_expect_eq(calls[ATTN_OP_ATTENTION_CORE_BACKWARD], L);
    cr_expect_eq(calls[ATTN_OP_ACTIVATION], L);
    cr_expect_eq(calls[ATTN_OP_ACTIVATION_BACKWARD], L);
    cr_expect_eq(calls[ATTN_OP_LINEAR], 3 * L + 1); /* out_proj, fc1, fc2; the head */
    cr_expect_eq(calls[ATTN_OP_LINEAR_BACKWARD], 3 * L + 1);
    cr_expect_eq(calls[ATTN_OP_CROSS_ENTROPY], 1);
    cr_expect_eq(calls[ATTN_OP_CROSS_ENTROPY_BACKWARD], 1);
    cr_expect_eq(calls[ATTN_OP_DROPOUT_ADD], 2 * L);
    cr_expect_eq(calls[ATTN_OP_DROPOUT_ADD_BACKWARD], 2 * L);
    cr_expect_eq(calls[ATTN_OP_DROPOUT], 1);
    cr_expect_eq(calls[ATTN_OP_DROPOUT_BACKWARD], 0); /* eval mode: no mask was drawn */
    cr_expect_eq(calls[ATTN_OP_ADD_POSITIONS], 1);
    cr_expect_eq(calls[ATTN_OP_ADD_POSITIONS_BACKWARD], 1);
    /* Back to the CPU engine (the counting one is borrowed, not freed). */
    cr_assert_eq(attn_gpt_set_precision(&m, ATTN_PRECISION_FP32, &err), ATTN_OK);
    cr_expect(attn_engine_is_cpu(&m.engine));
    attn_gpt_acts_free(&a), attn_gpt_acts_free(&ra);
    attn_gpt_free(&m), attn_gpt_free(&r);
    attn_engine_free(&cpu32);
}

/* An engine that lacks an op the model calls is refused before anything
 * runs: the status names the op, the model keeps its engine. */
Test(engine_ops, an_engine_without_an_op_the_model_calls_is_refused_not_run) {
    attn_error err = {0};
    cr_assert_eq(attn_engine_cpu_init(&cpu32, ATTN_PRECISION_FP32, &err), ATTN_OK);
    attn_engine counting, partial;
    test_engines(&counting, &partial);
    attn_gpt m;
    attn_gpt_acts a;
    tiny(&m, &a);
    const float before = step(&m, &a);
    memset(calls, 0, sizeof calls);
    cr_expect_eq(attn_gpt_set_engine(&m, &partial, &err), ATTN_ERR_INVALID_ARG);
    cr_expect(strstr(err.msg, "partial") && strstr(err.msg, "attention"), "message: %s", err.msg);
    cr_expect(attn_engine_is_cpu(&m.engine), "the model keeps cpu-fp32");
    const float after = step(&m, &a);
    cr_expect_eq(memcmp(&before, &after, sizeof before), 0);
    for (int op = 0; op < ATTN_OP_COUNT; op++)
        cr_expect_eq(calls[op], 0, "%s ran on the refused engine", attn_op_name((attn_op)op));
    /* A refused op at the table: a name and a status, never a call. */
    const attn_op_desc d = {ATTN_OP_ATTENTION_CORE, ATTN_PRECISION_FP32, 4, 16, 16, NULL};
    cr_expect_eq(attn_engine_supports_op(&partial, &d, &err), ATTN_ERR_INVALID_ARG);
    const attn_op_desc bad = {ATTN_OP_COUNT, ATTN_PRECISION_FP32, 4, 16, 16, NULL};
    cr_expect_eq(attn_engine_supports_op(&cpu32, &bad, &err), ATTN_ERR_INVALID_ARG);
    cr_expect_null(attn_op_name(ATTN_OP_COUNT));
    const attn_op_desc empty = {ATTN_OP_LINEAR, ATTN_PRECISION_FP32, 4, 0, 16, NULL};
    cr_expect_eq(attn_engine_supports_op(&cpu32, &empty, &err), ATTN_ERR_SHAPE);
    attn_gpt_acts_free(&a);
    attn_gpt_free(&m);
    attn_engine_free(&cpu32);
}

Test(engine_ops, memory_is_the_engines) {
    attn_error err;
    attn_engine e;
    cr_assert_eq(attn_engine_cpu_init(&e, ATTN_PRECISION_FP32, &err), ATTN_OK);
    cr_expect_null(attn_engine_alloc(&e, 0));
    float *p = attn_engine_alloc(&e, 1000 * sizeof(float));
    cr_assert_not_null(p);
    cr_expect_eq((uintptr_t)p % 64, 0, "64-byte aligned");
    for (int i = 0; i < 1000; i++)
        p[i] = (float)i;
    cr_expect_eq(p[999], 999.0f);
    attn_engine_free_buffer(&e, p);
    attn_engine_free(&e);
    attn_engine_free(&e); /* a cleared engine: nothing */
}

/* Generation on the counting engine: every op of the one-token step
 * through its table (counted), the logits cpu-fp32's to the bit, with fp32
 * and bf16 weights. */
Test(engine_ops, the_kv_step_runs_on_the_engine_through_its_ops) {
    attn_error err;
    cr_assert_eq(attn_engine_cpu_init(&cpu32, ATTN_PRECISION_FP32, &err), ATTN_OK);
    attn_engine counting, partial;
    test_engines(&counting, &partial);
    attn_gpt m, r;
    attn_gpt_acts a, ra;
    tiny(&m, &a), tiny(&r, &ra);
    cr_assert_eq(attn_gpt_set_engine(&m, &counting, &err), ATTN_OK, "%s", err.msg);
    const int L = TINY.n_layers, n = 2;
    const int32_t prompt[2 * 3] = {1, 5, 7, 22, 0, 3};
    for (int p = ATTN_PRECISION_FP32; p <= ATTN_PRECISION_BF16; p++) {
        attn_gpt_kv_cache c, rc;
        float got[2 * 23], want[2 * 23];
        cr_assert_eq(attn_gpt_kv_init_batch(&c, &m, n, &err), ATTN_OK, "%s", err.msg);
        cr_assert_eq(attn_gpt_kv_init_batch(&rc, &r, n, &err), ATTN_OK, "%s", err.msg);
        cr_assert_eq(attn_gpt_kv_set_precision(&c, &m, (attn_precision)p, &err), ATTN_OK);
        cr_assert_eq(attn_gpt_kv_set_precision(&rc, &r, (attn_precision)p, &err), ATTN_OK);
        memset(calls, 0, sizeof calls);
        cr_assert_eq(attn_gpt_kv_prefill_batch(&m, &c, prompt, 3, got, &err), ATTN_OK, "%s",
                     err.msg);
        cr_assert_eq(attn_gpt_kv_prefill_batch(&r, &rc, prompt, 3, want, &err), ATTN_OK);
        cr_expect(memcmp(got, want, sizeof got) == 0, "the logits are cpu-fp32's (precision %d)",
                  p);
        /* 3 tokens; the head (final norm, product) for the last alone. */
        cr_expect_eq(calls[ATTN_OP_EMBEDDING], 3 * n);
        cr_expect_eq(calls[ATTN_OP_ADD_POSITIONS], 3 * n);
        cr_expect_eq(calls[ATTN_OP_LAYERNORM], 3 * 2 * L + 1);
        cr_expect_eq(calls[ATTN_OP_LINEAR_STEP], 3 * 6 * L + 1);
        cr_expect_eq(calls[ATTN_OP_ATTENTION_STEP], 3 * L);
        cr_expect_eq(calls[ATTN_OP_ACTIVATION_STEP], 3 * L);
        cr_expect_eq(calls[ATTN_OP_ADD], 3 * 2 * L);
        cr_expect_eq(calls[ATTN_OP_LINEAR] + calls[ATTN_OP_LINEAR_QKV] +
                         calls[ATTN_OP_ATTENTION_CORE] + calls[ATTN_OP_ACTIVATION],
                     0, "no training op");
        attn_gpt_kv_free(&c), attn_gpt_kv_free(&rc);
    }
    attn_gpt_acts_free(&a), attn_gpt_acts_free(&ra);
    attn_gpt_free(&m), attn_gpt_free(&r);
    attn_engine_free(&cpu32);
}

/* An engine that trains but lacks a step op: the model takes it, a KV
 * cache is refused when it is made (naming the op), nothing allocated;
 * a cache made on cpu-fp32 refuses a step once the model's engine is
 * another. */
Test(engine_ops, a_kv_cache_on_an_engine_without_a_step_op_is_refused_when_made) {
    attn_error err = {0};
    cr_assert_eq(attn_engine_cpu_init(&cpu32, ATTN_PRECISION_FP32, &err), ATTN_OK);
    attn_engine counting, partial;
    test_engines(&counting, &partial);
    const attn_engine trains = {"trains", ATTN_PRECISION_FP32, &trains_ops, NULL, 0};
    attn_gpt m;
    attn_gpt_acts a;
    tiny(&m, &a);
    attn_gpt_kv_cache c;
    cr_assert_eq(attn_gpt_kv_init(&c, &m, &err), ATTN_OK, "%s", err.msg);
    cr_assert_eq(attn_gpt_set_engine(&m, &trains, &err), ATTN_OK, "%s", err.msg);
    step(&m, &a); /* it trains */
    memset(calls, 0, sizeof calls);
    float logits[23];
    cr_expect_eq(attn_gpt_kv_step(&m, &c, 3, logits, &err), ATTN_ERR_STATE);
    cr_expect(strstr(err.msg, "engine"), "message: %s", err.msg);
    attn_gpt_kv_free(&c);
    cr_expect_eq(attn_gpt_kv_init(&c, &m, &err), ATTN_ERR_INVALID_ARG);
    cr_expect(strstr(err.msg, "trains") && strstr(err.msg, "attention_step"), "message: %s",
              err.msg);
    cr_expect_null(c.k, "nothing allocated");
    for (int op = 0; op < ATTN_OP_COUNT; op++)
        cr_expect_eq(calls[op], 0, "%s ran", attn_op_name((attn_op)op));
    attn_gpt_kv_free(&c);
    attn_gpt_acts_free(&a);
    attn_gpt_free(&m);
    attn_engine_free(&cpu32);
}
