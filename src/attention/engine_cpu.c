/* engine_cpu.c — the CPU engine (attn/engine_cpu.h): attn/engine_ops.h's
 * table filled with today's kernels. It lives in attention/, the lowest
 * layer that sees every kernel it runs (nn/'s layers, the optimizer and the
 * attention module), while the table's type sits in base/ so that any layer
 * can hold an engine. The two precisions share every entry: the products
 * take the engine's bf16 GEMM engine, NULL for fp32 (attn/gemm.h's rule). */
#include "attn/engine_cpu.h"

#include <stdlib.h>
#include <string.h>

#include "attn/activation.h"
#include "attn/cross_entropy.h"
#include "attn/embedding.h"
#include "attn/feedforward.h"
#include "attn/gemm.h"
#include "attn/layernorm.h"
#include "attn/linear.h"
#include "attn/multi_head_attention.h"
#include "attn/optim.h"
#include "attn/residual.h"
#include "mha_fused.h"
#include "nn/linear_step.h"

static const attn_engine_ops CPU_OPS;

static attn_bf16_gemm *gemm_of(const attn_engine *e) {
    return (attn_bf16_gemm *)e->state;
}

/* ------------------------------------------------------------ supports_op */

/* The products: the ops whose arithmetic the bf16 engine changes. */
static int is_product(attn_op op) {
    return op == ATTN_OP_LINEAR || op == ATTN_OP_LINEAR_BACKWARD ||
           op == ATTN_OP_LINEAR_BACKWARD_DY16 || op == ATTN_OP_LINEAR_X16 ||
           op == ATTN_OP_LINEAR_BACKWARD_X16 || op == ATTN_OP_LINEAR_QKV ||
           op == ATTN_OP_LINEAR_QKV_BACKWARD || op == ATTN_OP_ATTENTION_CORE ||
           op == ATTN_OP_ATTENTION_CORE_BACKWARD;
}

/* The step's products: their precision is their weight copy's (fp32 or
 * bf16, widened in the GEMV kernel), whatever the engine's. */
static int is_step_product(attn_op op) {
    return op == ATTN_OP_LINEAR_STEP;
}

/* The widths an op reads from its descriptor, positive. */
static attn_status check_shape(const attn_engine *e, const attn_op_desc *d, attn_error *err) {
    const char *name = attn_op_name(d->op);
    int need_in = 0, need_out = 0;
    switch (d->op) {
    case ATTN_OP_LINEAR:
    case ATTN_OP_LINEAR_BACKWARD:
    case ATTN_OP_LINEAR_BACKWARD_DY16:
    case ATTN_OP_LINEAR_X16:
    case ATTN_OP_LINEAR_BACKWARD_X16:
    case ATTN_OP_LINEAR_QKV:
    case ATTN_OP_LINEAR_QKV_BACKWARD:
    case ATTN_OP_ATTENTION_CORE:
    case ATTN_OP_ATTENTION_CORE_BACKWARD:
    case ATTN_OP_LINEAR_STEP:
    case ATTN_OP_ATTENTION_STEP:
    case ATTN_OP_ACTIVATION_STEP: need_in = need_out = 1; break;
    case ATTN_OP_LAYERNORM:
    case ATTN_OP_LAYERNORM_BACKWARD: need_in = 1; break;
    case ATTN_OP_EMBEDDING:
    case ATTN_OP_EMBEDDING_BACKWARD:
    case ATTN_OP_CROSS_ENTROPY:
    case ATTN_OP_CROSS_ENTROPY_BACKWARD:
    case ATTN_OP_CROSS_ENTROPY_GRAD:
    case ATTN_OP_ADD_POSITIONS:
    case ATTN_OP_ADD_POSITIONS_BACKWARD: need_out = 1; break;
    default: break;
    }
    if ((need_in && d->in <= 0) || (need_out && d->out <= 0))
        return attn_fail(err, ATTN_ERR_SHAPE, "engine %s: %s needs positive widths (in %d, out %d)",
                         e->name, name, d->in, d->out);
    return ATTN_OK;
}

static attn_status cpu_supports_op(const attn_engine *e, const attn_op_desc *d, attn_error *err) {
    const char *name = attn_op_name(d->op);
    const int bf16 = gemm_of(e) != NULL;
    if (d->precision != ATTN_PRECISION_FP32 && d->precision != ATTN_PRECISION_BF16)
        return attn_fail(err, ATTN_ERR_INVALID_ARG, "engine %s: no precision %d", e->name,
                         (int)d->precision);
    if (is_step_product(d->op)) return check_shape(e, d, err);
    if (!bf16 && d->precision != ATTN_PRECISION_FP32)
        return attn_fail(err, ATTN_ERR_INVALID_ARG, "engine %s runs %s in fp32 only, not %s",
                         e->name, name, attn_precision_name(d->precision));
    if (!bf16 && d->op == ATTN_OP_LINEAR_BACKWARD_DY16)
        return attn_fail(err, ATTN_ERR_INVALID_ARG,
                         "engine %s keeps gradients in fp32: no %s (a bf16 dy)", e->name, name);
    if (!bf16 && (d->op == ATTN_OP_LINEAR_X16 || d->op == ATTN_OP_LINEAR_BACKWARD_X16))
        return attn_fail(err, ATTN_ERR_INVALID_ARG,
                         "engine %s multiplies fp32 inputs: no %s (a bf16 input)", e->name, name);
    if (bf16 && is_product(d->op) && d->precision != ATTN_PRECISION_BF16)
        return attn_fail(err, ATTN_ERR_INVALID_ARG,
                         "engine %s multiplies in bf16: %s in fp32 is cpu-fp32's", e->name, name);
    if (bf16 && !is_product(d->op) && d->precision != ATTN_PRECISION_FP32)
        return attn_fail(err, ATTN_ERR_INVALID_ARG, "engine %s runs %s in fp32, not bf16", e->name,
                         name);
    return check_shape(e, d, err);
}

/* ----------------------------------------------------------------- memory */

static void *cpu_alloc(const attn_engine *e, size_t bytes) {
    (void)e;
    const size_t a = 64, n = (bytes + a - 1) / a * a;
    return n < bytes ? NULL : aligned_alloc(a, n);
}

static void cpu_free(const attn_engine *e, void *p) {
    (void)e;
    free(p);
}

static void cpu_release(attn_engine *e) {
    if (e->owns_state) attn_bf16_gemm_free(gemm_of(e));
}

static void cpu_begin_pass(const attn_engine *e) {
    attn_bf16_gemm_begin_pass(gemm_of(e));
}

/* ----------------------------------------------------------------- linear */

/* A module carrying another GEMM engine than e's runs as a copy carrying
 * e's; the copy's mark of an unset gradient goes back (the backward clears
 * it). A model's modules carry e's: no copy. */
static void linear_forward(const attn_engine *e, const attn_linear *l, const float *x, float *y,
                           size_t N) {
    if (l->bf16 == gemm_of(e)) {
        attn_linear_forward(l, x, y, N);
        return;
    }
    attn_linear c = *l;
    c.bf16 = gemm_of(e);
    attn_linear_forward(&c, x, y, N);
}

static void linear_backward(const attn_engine *e, attn_linear *l, const float *x, const float *dy,
                            float *dx, size_t N) {
    if (l->bf16 == gemm_of(e)) {
        attn_linear_backward(l, x, dy, dx, N);
        return;
    }
    attn_linear c = *l;
    c.bf16 = gemm_of(e);
    attn_linear_backward(&c, x, dy, dx, N);
    l->grad_unset = c.grad_unset;
}

static void linear_round(const attn_engine *e, size_t N, int out, const float *dy, uint16_t *dy16) {
    (void)e;
    attn_gemm_round((int)N, out, dy, dy16);
}

static void linear_backward_dy16(const attn_engine *e, attn_linear *l, const float *x,
                                 const uint16_t *dy16, float *dx, size_t N) {
    const int C = l->in_features, V = l->out_features;
    if (dx) attn_gemm_input_grad_dy16(gemm_of(e), 0, (int)N, C, V, dy16, l->weight, 1.0f, dx);
    if (l->grad_weight) /* else frozen */
        attn_gemm_weight_grad_dy16(gemm_of(e), 0, (int)N, C, V, x, dy16, attn_linear_grad_beta(l),
                                   l->grad_weight);
}

static void linear_forward_x16(const attn_engine *e, const attn_linear *l, const float *x,
                               uint16_t *x16, float *y, size_t N) {
    attn_linear c = *l;
    c.bf16 = gemm_of(e);
    if (x)
        attn_linear_forward_keep(&c, x, y, N, x16);
    else
        attn_linear_forward_x16(&c, x16, y, N);
}

static void linear_backward_x16(const attn_engine *e, attn_linear *l, const uint16_t *x16,
                                const float *dy, float *dx, float beta_x, size_t N) {
    if (l->bf16 == gemm_of(e)) {
        attn_linear_backward_x16(l, x16, dy, dx, beta_x, N);
        return;
    }
    attn_linear c = *l;
    c.bf16 = gemm_of(e);
    attn_linear_backward_x16(&c, x16, dy, dx, beta_x, N);
    l->grad_unset = c.grad_unset;
}

/* -------------------------------------------------------------- layernorm */

static void layernorm_forward(const attn_engine *e, const attn_layernorm *ln, const float *x,
                              float *y, float *mean, float *rstd, size_t N) {
    (void)e;
    attn_layernorm_forward(ln, x, y, mean, rstd, N);
}

static void layernorm_backward(const attn_engine *e, attn_layernorm *ln, const float *x,
                               const float *mean, const float *rstd, const float *dy, float *dx,
                               size_t N) {
    (void)e;
    attn_layernorm_backward(ln, x, mean, rstd, dy, dx, N);
}

/* ---------------------------------------------- linear_qkv, attention_core */

static int mha_on(const attn_mha *m, attn_bf16_gemm *g) {
    return m->bf16 == g && m->W_query.bf16 == g && m->W_key.bf16 == g && m->W_value.bf16 == g &&
           m->out_proj.bf16 == g;
}

static void mha_carry(attn_mha *c, attn_bf16_gemm *g) {
    c->bf16 = c->W_query.bf16 = c->W_key.bf16 = c->W_value.bf16 = c->out_proj.bf16 = g;
}

/* A module carrying another GEMM engine than e's runs as a copy carrying
 * e's, as linear_forward's; the copy's marks of unset gradients go back. */
static attn_status qkv_forward(const attn_engine *e, const attn_mha *m, const float *x, int B,
                               int T, attn_attention_cache *cache, attn_error *err) {
    if (mha_on(m, gemm_of(e))) return attn_mha_qkv_forward(m, x, B, T, cache, err);
    attn_mha c = *m;
    mha_carry(&c, gemm_of(e));
    return attn_mha_qkv_forward(&c, x, B, T, cache, err);
}

static attn_status qkv_backward(const attn_engine *e, attn_mha *m, const float *x, float *dx, int B,
                                int T, const attn_attention_cache *cache, attn_error *err) {
    if (mha_on(m, gemm_of(e))) return attn_mha_qkv_backward(m, x, dx, B, T, cache, err);
    attn_mha c = *m;
    mha_carry(&c, gemm_of(e));
    attn_status s = attn_mha_qkv_backward(&c, x, dx, B, T, cache, err);
    m->W_query.grad_unset = c.W_query.grad_unset;
    m->W_key.grad_unset = c.W_key.grad_unset;
    m->W_value.grad_unset = c.W_value.grad_unset;
    return s;
}

static attn_status core_forward(const attn_engine *e, const attn_mha *m, int B, int T,
                                const attn_forward_mode *mode, attn_attention_cache *cache,
                                attn_error *err) {
    if (mha_on(m, gemm_of(e))) return attn_mha_core_forward(m, B, T, mode, cache, err);
    attn_mha c = *m;
    mha_carry(&c, gemm_of(e));
    return attn_mha_core_forward(&c, B, T, mode, cache, err);
}

static attn_status core_backward(const attn_engine *e, attn_mha *m, int B, int T,
                                 const attn_attention_cache *cache, attn_error *err) {
    if (mha_on(m, gemm_of(e))) return attn_mha_core_backward(m, B, T, cache, err);
    attn_mha c = *m;
    mha_carry(&c, gemm_of(e));
    return attn_mha_core_backward(&c, B, T, cache, err);
}

/* ------------------------------------------------- activation, embedding */

static void activation_forward(const attn_engine *e, int act, const float *x, float *y,
                               uint16_t *y16, size_t N, int hidden) {
    (void)e;
    if (y)
        attn_act_forward((attn_act)act, x, y, N, (size_t)hidden);
    else
        attn_act_forward_bf16((attn_act)act, x, y16, N, (size_t)hidden);
}

static void activation_backward(const attn_engine *e, int act, const float *x, float *dy, float *dx,
                                size_t N, int hidden) {
    (void)e;
    attn_act_backward((attn_act)act, x, dy, dx, N, (size_t)hidden);
}

static void embedding_forward(const attn_engine *e, const attn_embedding *emb, const int32_t *ids,
                              float *out, size_t N) {
    (void)e;
    attn_embedding_forward(emb, ids, out, N);
}

static void embedding_backward(const attn_engine *e, attn_embedding *emb, const int32_t *ids,
                               const float *dout, size_t N) {
    (void)e;
    attn_embedding_backward(emb, ids, dout, N);
}

static void ce_forward(const attn_engine *e, const float *logits, const int32_t *targets,
                       float *lse, size_t N, size_t V, double *total) {
    (void)e;
    attn_cross_entropy_accumulate(logits, targets, lse, N, V, total);
}

static void ce_backward(const attn_engine *e, const float *logits, const int32_t *targets,
                        const float *lse, float dloss, float *dlogits, size_t N, size_t V) {
    (void)e;
    attn_cross_entropy_backward(logits, targets, lse, dloss, dlogits, N, V);
}

static void ce_grad(const attn_engine *e, const float *logits, const int32_t *targets,
                    const float *lse, float scale, float *dlogits, size_t N, size_t V) {
    (void)e;
    attn_cross_entropy_grad(logits, targets, lse, scale, dlogits, N, V);
}

/* ------------------------------------------------------------------ adamw */

static attn_status adamw_step(const attn_engine *e, attn_adamw *opt, const attn_param_list *params,
                              double lr, float grad_scale, attn_error *err) {
    return attn_adamw_step_bf16(opt, params, lr, grad_scale, gemm_of(e), err);
}

/* ---------------------------------------- dropout_add, add_positions */

static int dropout_add_forward(const attn_engine *e, const float *f, const float *shortcut,
                               float *out, uint8_t *keep, double p, const attn_forward_mode *mode,
                               size_t n) {
    (void)e;
    return attn_residual_dropout_forward(f, shortcut, out, keep, p, mode, n);
}

static void dropout_add_backward(const attn_engine *e, const float *dout, const uint8_t *keep,
                                 double p, int dropped, float *df, size_t n) {
    (void)e;
    attn_residual_dropout_backward(dout, keep, p, dropped, df, n);
}

static int dropout_forward(const attn_engine *e, float *x, uint8_t *keep, double p,
                           const attn_forward_mode *mode, size_t n) {
    (void)e;
    return attn_dropout_forward_inplace(x, keep, p, mode, n);
}

static void dropout_backward(const attn_engine *e, float *dx, const uint8_t *keep, double p,
                             size_t n) {
    (void)e;
    attn_dropout_backward_inplace(dx, keep, p, n);
}

static void add_positions_forward(const attn_engine *e, const attn_embedding *table, float *x,
                                  size_t N, int T, int pos0) {
    (void)e;
    attn_embedding_add_positions(table, x, N, T, pos0);
}

static void add_positions_backward(const attn_engine *e, attn_embedding *table, const float *dx,
                                   size_t N, int T) {
    (void)e;
    attn_embedding_add_positions_backward(table, dx, N, T);
}

/* --------------------------------------------------------------- the step */

static void add(const attn_engine *e, float *x, const float *y, size_t n) {
    (void)e;
    attn_add(x, y, n);
}

static void linear_step(const attn_engine *e, const attn_linear *l, const uint16_t *w16,
                        const float *x, size_t ldx, float *y, size_t ldy, int n, int wait) {
    (void)e;
    attn_linear_step_ld(l, w16, x, ldx, y, ldy, n, wait);
}

static void attention_step(const attn_engine *e, const attn_mha *m, int n, float *q, float *k_cache,
                           float *v_cache, size_t kv_stride, int pos, float *ctx, float *scores) {
    (void)e;
    attn_mha_step_core(m, n, q, k_cache, v_cache, kv_stride, pos, ctx, scores);
}

static void activation_step(const attn_engine *e, const attn_feedforward *ff, float *hidden,
                            int n) {
    (void)e;
    attn_feedforward_act_step(ff, hidden, n);
}

static const attn_engine_ops CPU_OPS = {
    .supports_op = cpu_supports_op,
    .alloc = cpu_alloc,
    .free = cpu_free,
    .release = cpu_release,
    .begin_pass = cpu_begin_pass,
    .linear_forward = linear_forward,
    .linear_backward = linear_backward,
    .linear_round = linear_round,
    .linear_backward_dy16 = linear_backward_dy16,
    .linear_forward_x16 = linear_forward_x16,
    .linear_backward_x16 = linear_backward_x16,
    .layernorm_forward = layernorm_forward,
    .layernorm_backward = layernorm_backward,
    .linear_qkv_forward = qkv_forward,
    .linear_qkv_backward = qkv_backward,
    .attention_core_forward = core_forward,
    .attention_core_backward = core_backward,
    .activation_forward = activation_forward,
    .activation_backward = activation_backward,
    .embedding_forward = embedding_forward,
    .embedding_backward = embedding_backward,
    .cross_entropy_forward = ce_forward,
    .cross_entropy_backward = ce_backward,
    .cross_entropy_grad = ce_grad,
    .adamw_step = adamw_step,
    .dropout_add_forward = dropout_add_forward,
    .dropout_add_backward = dropout_add_backward,
    .dropout_forward = dropout_forward,
    .dropout_backward = dropout_backward,
    .add_positions_forward = add_positions_forward,
    .add_positions_backward = add_positions_backward,
    .add = add,
    .linear_step = linear_step,
    .attention_step = attention_step,
    .activation_step = activation_step,
};

attn_status attn_engine_cpu_init(attn_engine *e, attn_precision p, attn_error *err) {
    attn_bf16_gemm *g = NULL;
    attn_status s = attn_precision_check(p, err);
    if (s == ATTN_OK && p == ATTN_PRECISION_BF16) s = attn_bf16_gemm_create(&g, err);
    if (s != ATTN_OK) {
        memset(e, 0, sizeof *e);
        return s;
    }
    *e = g ? (attn_engine){"cpu-bf16", ATTN_PRECISION_BF16, &CPU_OPS, g, 1}
           : (attn_engine){"cpu-fp32", ATTN_PRECISION_FP32, &CPU_OPS, NULL, 0};
    return ATTN_OK;
}

attn_bf16_gemm *attn_engine_cpu_gemm(const attn_engine *e) {
    return e && e->ops == &CPU_OPS ? gemm_of(e) : NULL;
}

int attn_engine_is_cpu(const attn_engine *e) {
    return e && e->ops == &CPU_OPS;
}
