/* The GPT's forward and backward (see attn/gpt.h): both walk the model's
 * layer list (attn/gpt_family.h), a step per kind of layer; the backward
 * walks down from the head to the lowest layer holding a trainable tensor.
 * Every kernel is reached through the model's engine (attn/engine_ops.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn/cross_entropy.h"
#include "attn/gpt_family.h"
#include "gpt_block.h"

/* The lean head's chunks: a multiple of the cross-entropy's row block,
 * so that its loss adds up exactly as the plain path's. */
#define HEAD_ROWS ATTN_GPT_HEAD_ROWS
#define HEAD_DW_ROWS ATTN_GPT_HEAD_DW_ROWS
_Static_assert(HEAD_DW_ROWS % HEAD_ROWS == 0, "the head's dW rows hold whole chunks");

/* ------------------------------------------------------------- the checks */

/* Token ids are in [0, vocab_size), targets in [0, the head's width) or
 * ATTN_IGNORE_INDEX (no loss, no gradient). */
/* logits[n, targets[n]] of each row (0 for an ignored one): a row's loss
 * is lse - this. */
static void target_logits(const float *logits, const int32_t *targets, float *out, size_t n,
                          size_t V) {
    for (size_t r = 0; r < n; r++)
        out[r] = targets[r] == ATTN_IGNORE_INDEX ? 0.0f : logits[r * V + (size_t)targets[r]];
}

static int limit(const attn_gpt *m, int targets, const char **name) {
    const int width = attn_gpt_head_width(m);
    *name = !targets || width == m->cfg.vocab_size ? "vocab_size" : "the head's width";
    return targets ? width : m->cfg.vocab_size;
}

static attn_status check_tokens(const attn_gpt *m, const int32_t *v, int B, int T, int targets,
                                attn_error *err) {
    const char *name;
    const int hi = limit(m, targets, &name);
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            const int32_t id = v[(size_t)b * (size_t)T + (size_t)t];
            if ((id < 0 || id >= hi) && !(targets && id == ATTN_IGNORE_INDEX))
                return attn_fail(err, ATTN_ERR_INVALID_ARG,
                                 "%s %ld at (batch %d, position %d) is outside [0, %s %d)",
                                 targets ? "target" : "token id", (long)id, b, t, name, hi);
        }
    return ATTN_OK;
}

static attn_status copy_i64(const attn_gpt *m, const int64_t *src, int32_t *dst, int B, int T,
                            int targets, attn_error *err) {
    const char *name;
    const int hi = limit(m, targets, &name);
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            const size_t i = (size_t)b * (size_t)T + (size_t)t;
            if ((src[i] < 0 || src[i] >= hi) && !(targets && src[i] == ATTN_IGNORE_INDEX))
                return attn_fail(err, ATTN_ERR_INVALID_ARG,
                                 "%s %lld at (batch %d, position %d) is outside [0, %s %d)",
                                 targets ? "target" : "token id", (long long)src[i], b, t, name,
                                 hi);
            dst[i] = (int32_t)src[i];
        }
    return ATTN_OK;
}

static attn_status check_call(const attn_gpt *m, int B, int T, const attn_gpt_acts *a,
                              attn_error *err) {
    attn_status s = attn_gpt_check_fp32(m, "forward", err);
    if (s) return s;
    if (T > m->cfg.context_length)
        return attn_fail(err, ATTN_ERR_SHAPE, "sequence length %d exceeds context_length %d", T,
                         m->cfg.context_length);
    if (!a || B > a->B_max || T > a->T_max || a->n_layers != m->cfg.n_layers)
        return attn_fail(err, ATTN_ERR_SHAPE,
                         "activations were made for (B %d, T %d): a batch of (B %d, T %d) "
                         "exceeds them",
                         a ? a->B_max : 0, a ? a->T_max : 0, B, T);
    return ATTN_OK;
}

static attn_status lean_needs_targets(attn_error *err) {
    return attn_fail(err, ATTN_ERR_INVALID_ARG,
                     "lean activations (attn_gpt_acts_init_lean) keep no logits: a forward "
                     "through them needs targets (it gives the loss)");
}

/* ---------------------------------------------------------- the embedding */

void attn_gpt_embed(const attn_gpt *m, const int32_t *ids, size_t N, int T, int pos0, float *x) {
    const attn_engine *e = &m->engine;
    e->ops->embedding_forward(e, &m->tok_emb, ids, x, N);
    if (m->pos_emb.weight) /* else pos_emb none */
        e->ops->add_positions_forward(e, &m->pos_emb, x, N, T, pos0);
}

/* drop_emb, then the two embedding tables, from the gradient d of x. */
static void embedding_backward(attn_gpt *m, attn_gpt_acts *a, float *d) {
    const attn_engine *e = &m->engine;
    const size_t N = (size_t)a->B * (size_t)a->T;
    if (a->dropout_used)
        e->ops->dropout_backward(e, d, a->keep_emb, m->cfg.drop_rate, N * (size_t)m->cfg.emb_dim);
    e->ops->embedding_backward(e, &m->tok_emb, a->ids, d, N);
    if (m->pos_emb.weight) e->ops->add_positions_backward(e, &m->pos_emb, d, N, a->T);
}

/* ---------------------------------------------------- between the layers */

/* Where layer i writes its output, the next layer's input: the residual
 * stream entering the next block or leaving the last, the final norm's
 * output, the logits. */
static float *output_of(const attn_gpt *m, attn_gpt_acts *a, int i) {
    const attn_gpt_layer *l = &m->layers[i];
    if (l->kind == ATTN_GPT_LAYER_NORM) return a->lnf;
    if (l->kind == ATTN_GPT_LAYER_HEAD) return a->logits;
    const attn_gpt_layer *next = &m->layers[i + 1];
    return next->kind == ATTN_GPT_LAYER_BLOCK ? a->blocks[next->index].x_in : a->x_final;
}

/* Where the gradient of layer i's output lands: the final norm's in d_ln,
 * the residual stream's in d_resid (each block's backward updates it in
 * place). */
static float *grad_of(const attn_gpt *m, attn_gpt_acts *a, int i) {
    return m->layers[i].kind == ATTN_GPT_LAYER_NORM ? a->d_ln : a->d_resid;
}

/* The head's input gradient, or NULL when no layer below the head trains
 * (the backward stops at the head: its dx product is skipped). */
static float *head_dx(const attn_gpt *m, attn_gpt_acts *a) {
    const int h = m->n_list - 1;
    return attn_gpt_backward_stop(m) < h ? grad_of(m, a, h - 1) : NULL;
}

/* ---------------------------------------------------------------- the head */

/* A forward's stages for acts->poll: the blocks, then the head (the lean
 * head's chunks in a forward without gradients). */
static int forward_stages(const attn_gpt *m, const attn_gpt_acts *a, size_t N, int grads) {
    const size_t head = a->lean && !grads ? (N + HEAD_ROWS - 1) / HEAD_ROWS : 1;
    return m->cfg.n_layers + (int)head;
}

static attn_status abandoned(attn_gpt_acts *a, attn_error *err) {
    a->loss = NAN;
    return attn_fail(err, ATTN_ERR_STATE, "the forward was stopped (its poll asked)");
}

/* 1 when the engine takes the head's backward from a bf16 dlogits. */
static int head_dy16(const attn_gpt *m) {
    const attn_op_desc d = {ATTN_OP_LINEAR_BACKWARD_DY16, ATTN_PRECISION_BF16,      0,
                            m->out_head.in_features,      m->out_head.out_features, NULL};
    return attn_engine_supports_op(&m->engine, &d, NULL) == ATTN_OK;
}

/* The lean head over the N rows of x, HEAD_ROWS at a time in a->logits:
 * the loss, added up as attn_cross_entropy_forward adds it, and with grads
 * each chunk's dlogits written over its logits, then fed to the head's two
 * backward products (dx's rows, out_head's gradient). On the bf16 engine
 * the chunks' dlogits are kept in bf16 (the rounding the products use
 * anyway) and both products made once per HEAD_DW_ROWS rows: the weight
 * gradient's (V, C) fp32 sum is read and written once per product (a
 * quarter of the step's traffic at GPT-2's B4 T64 otherwise), and the
 * input gradient's product runs faster on more rows. */
static float head_chunks(attn_gpt *m, attn_gpt_acts *a, const float *x, float *dx, size_t N,
                         int grads, float loss_scale, int *stopped) {
    attn_linear *head = &m->out_head;
    const attn_engine *e = &m->engine;
    const size_t C = (size_t)head->in_features, V = (size_t)head->out_features;
    const int L = m->cfg.n_layers, stages = forward_stages(m, a, N, grads);
    const size_t dw_rows = N < HEAD_DW_ROWS ? N : HEAD_DW_ROWS;
    const size_t cap = (size_t)a->B_max * (size_t)a->T_max; /* d_logits16 for the largest N */
    const size_t cap_rows = cap < HEAD_DW_ROWS ? cap : HEAD_DW_ROWS;
    const int keep16 =
        grads && !head->has_bias && !head->lora && head_dy16(m) &&
        (a->d_logits16 || (a->d_logits16 = malloc(cap_rows * V * sizeof(uint16_t))) != NULL);
    /* the mean is over the rows not ignored (all N: the bits as before) */
    const size_t counted = attn_cross_entropy_count(a->targets, N);
    double total = 0.0;
    if (grads && dx) memset(dx, 0, N * C * sizeof(float));
    size_t k0 = 0; /* first row whose dlogits wait in d_logits16 */
    for (size_t r0 = 0; r0 < N; r0 += HEAD_ROWS) {
        const size_t n = N - r0 < HEAD_ROWS ? N - r0 : HEAD_ROWS;
        e->ops->linear_forward(e, head, x + r0 * C, a->logits, n);
        e->ops->cross_entropy_forward(e, a->logits, a->targets + r0, a->lse + r0, n, V, &total);
        target_logits(a->logits, a->targets + r0, a->target_logit + r0, n, V);
        if (!grads && r0 + n < N && a->poll &&
            a->poll(a->poll_user, L + (int)(r0 / HEAD_ROWS) + 1, stages)) {
            *stopped = 1;
            return NAN;
        }
        if (!grads) continue;
        e->ops->cross_entropy_grad(e, a->logits, a->targets + r0, a->lse + r0,
                                   loss_scale / (float)counted, a->logits, n, V);
        if (!keep16) {
            e->ops->linear_backward(e, head, x + r0 * C, a->logits, dx ? dx + r0 * C : NULL, n);
            continue;
        }
        e->ops->linear_round(e, n, (int)V, a->logits, a->d_logits16 + (r0 - k0) * V);
        if (r0 + n - k0 == dw_rows || r0 + n == N) { /* dlogits16's rows [k0, r0 + n) */
            e->ops->linear_backward_dy16(e, head, x + k0 * C, a->d_logits16,
                                         dx ? dx + k0 * C : NULL, r0 + n - k0);
            k0 = r0 + n;
        }
    }
    return (float)(total / (double)counted);
}

/* The head's forward from x: the logits (lean: chunk by chunk, the loss,
 * and with grad_scale its backward too) and, with targets, the loss. */
static attn_status head_forward(attn_gpt *m, attn_gpt_acts *a, const float *x, size_t N,
                                const float *grad_scale, attn_error *err) {
    const size_t V = (size_t)attn_gpt_head_width(m);
    if (a->lean) {
        int stopped = 0;
        float *dx = grad_scale ? head_dx(m, a) : NULL;
        a->loss = head_chunks(m, a, x, dx, N, grad_scale != NULL, grad_scale ? *grad_scale : 0.0f,
                              &stopped);
        return stopped ? abandoned(a, err) : ATTN_OK;
    }
    const attn_engine *e = &m->engine;
    e->ops->linear_forward(e, &m->out_head, x, a->logits, N);
    if (a->has_targets) { /* attn_cross_entropy_forward's mean, over the counted rows */
        double total = 0.0;
        e->ops->cross_entropy_forward(e, a->logits, a->targets, a->lse, N, V, &total);
        a->loss = (float)(total / (double)attn_cross_entropy_count(a->targets, N));
        target_logits(a->logits, a->targets, a->target_logit, N, V);
    }
    return ATTN_OK;
}

/* --------------------------------------------------------------- forward */

/* One forward's shape and mode, and what its layers report. */
typedef struct pass {
    int B, T;
    size_t N;
    const attn_forward_mode *mode;
    const float *grad_scale; /* lean: the head's backward too, at this loss scale */
    int dropped;             /* a dropout mask was drawn */
    int stages;              /* acts->poll's count */
} pass;

/* Layer i from x (its input; the embedding's are the ids) into out. */
static attn_status layer_forward(attn_gpt *m, int i, attn_gpt_acts *a, const float *x, float *out,
                                 pass *p, attn_error *err) {
    const attn_gpt_layer *l = &m->layers[i];
    const attn_block_shape shape = {p->B, p->T, m->cfg.drop_rate};
    attn_status s = ATTN_OK;
    switch (l->kind) {
    case ATTN_GPT_LAYER_EMBEDDING:
        attn_gpt_embed(m, a->ids, p->N, p->T, 0, out);
        p->dropped |= m->engine.ops->dropout_forward(&m->engine, out, a->keep_emb, m->cfg.drop_rate,
                                                     p->mode, p->N * (size_t)m->cfg.emb_dim);
        break;
    case ATTN_GPT_LAYER_BLOCK:
        s = attn_block_forward(&m->engine, &m->blocks[l->index], &a->blocks[l->index], &shape,
                               p->mode, out, &p->dropped, err);
        if (s == ATTN_OK && a->poll && a->poll(a->poll_user, l->index + 1, p->stages))
            s = abandoned(a, err);
        break;
    case ATTN_GPT_LAYER_NORM:
        m->engine.ops->layernorm_forward(&m->engine, &m->final_norm, x, out, a->lnf_mean,
                                         a->lnf_rstd, p->N);
        break;
    case ATTN_GPT_LAYER_HEAD:
        a->dropout_used = p->dropped;
        s = head_forward(m, a, x, p->N, p->grad_scale, err);
        break;
    }
    return s;
}

/* Everything after ids/targets are copied and checked; grad_scale non-NULL
 * (lean activations): the head's backward too, at that loss scale. */
static attn_status forward_core(attn_gpt *m, int B, int T, const attn_forward_mode *mode,
                                attn_gpt_acts *a, const float *grad_scale, float *loss,
                                attn_error *err) {
    const size_t N = (size_t)B * (size_t)T;
    pass p = {B, T, N, mode, grad_scale, 0, forward_stages(m, a, N, grad_scale != NULL)};
    a->B = B; /* the first N rows of every buffer, laid out for (B, T) */
    a->T = T;
    /* Each weight rounded to bf16 once for this forward and its backward. */
    m->engine.ops->begin_pass(&m->engine);
    a->loss = NAN;
    const float *x = NULL;
    for (int i = 0; i < m->n_list; i++) {
        float *out = output_of(m, a, i);
        attn_status s = layer_forward(m, i, a, x, out, &p, err);
        if (s != ATTN_OK) return s;
        x = out;
    }
    if (loss) *loss = a->loss;
    return ATTN_OK;
}

attn_status attn_gpt_forward(attn_gpt *m, const int32_t *ids, const int32_t *targets, int B, int T,
                             const attn_forward_mode *mode, attn_gpt_acts *a, float *loss,
                             attn_error *err) {
    attn_status s = check_call(m, B, T, a, err);
    if (s == ATTN_OK && a->lean && !targets) s = lean_needs_targets(err);
    if (s == ATTN_OK) s = check_tokens(m, ids, B, T, 0, err);
    if (s == ATTN_OK && targets) s = check_tokens(m, targets, B, T, 1, err);
    if (s != ATTN_OK) {
        if (a && a->n_layers == m->cfg.n_layers) a->has_targets = 0;
        return s;
    }
    const size_t N = (size_t)B * (size_t)T;
    memcpy(a->ids, ids, N * sizeof(int32_t));
    a->has_targets = targets != NULL;
    if (targets) memcpy(a->targets, targets, N * sizeof(int32_t));
    s = forward_core(m, B, T, mode, a, NULL, loss, err);
    if (s != ATTN_OK) a->has_targets = 0;
    return s;
}

attn_status attn_gpt_forward_i64(attn_gpt *m, const int64_t *ids, const int64_t *targets, int B,
                                 int T, const attn_forward_mode *mode, attn_gpt_acts *a,
                                 float *loss, attn_error *err) {
    attn_status s = check_call(m, B, T, a, err);
    if (s == ATTN_OK && a->lean && !targets) s = lean_needs_targets(err);
    if (s != ATTN_OK) return s;
    a->has_targets = 0;
    s = copy_i64(m, ids, a->ids, B, T, 0, err);
    if (s == ATTN_OK && targets) s = copy_i64(m, targets, a->targets, B, T, 1, err);
    if (s != ATTN_OK) return s;
    a->has_targets = targets != NULL;
    s = forward_core(m, B, T, mode, a, NULL, loss, err);
    if (s != ATTN_OK) a->has_targets = 0;
    return s;
}

/* --------------------------------------------------------------- backward */

/* Layer i's backward (below the head) from the gradient of its output. */
static attn_status layer_backward(attn_gpt *m, int i, attn_gpt_acts *a, attn_error *err) {
    const attn_gpt_layer *l = &m->layers[i];
    const size_t N = (size_t)a->B * (size_t)a->T;
    switch (l->kind) {
    case ATTN_GPT_LAYER_EMBEDDING: embedding_backward(m, a, grad_of(m, a, i)); return ATTN_OK;
    case ATTN_GPT_LAYER_BLOCK: {
        const attn_block_shape shape = {a->B, a->T, m->cfg.drop_rate};
        const attn_block_grads g = {a->d_resid, a->d_tmp, a->d_ln, a->d_hidden};
        return attn_block_backward(&m->engine, &m->blocks[l->index], &a->blocks[l->index], &shape,
                                   a->dropout_used, &g, err);
    }
    case ATTN_GPT_LAYER_NORM: {
        float *dx = grad_of(m, a, i - 1);
        memset(dx, 0, N * (size_t)m->cfg.emb_dim * sizeof(float));
        m->engine.ops->layernorm_backward(&m->engine, &m->final_norm, output_of(m, a, i - 1),
                                          a->lnf_mean, a->lnf_rstd, grad_of(m, a, i), dx, N);
        return ATTN_OK;
    }
    case ATTN_GPT_LAYER_HEAD: break;
    }
    return attn_fail(err, ATTN_ERR_STATE, "the head's backward is not a body layer's");
}

/* The backward below the head: from layer n_list - 2 down to the lowest
 * holding a trainable tensor (below it no gradient is wanted). */
static attn_status body_backward(attn_gpt *m, attn_gpt_acts *a, attn_error *err) {
    const int stop = attn_gpt_backward_stop(m);
    for (int i = m->n_list - 2; i >= stop; i--) {
        attn_status s = layer_backward(m, i, a, err);
        if (s != ATTN_OK) return s;
    }
    return ATTN_OK;
}

static attn_status backward_state(const attn_gpt *m, const attn_gpt_acts *a, attn_error *err) {
    attn_status s = attn_gpt_check_fp32(m, "backward", err);
    if (s) return s;
    if (!a || a->n_layers != m->cfg.n_layers || !a->blocks)
        return attn_fail(err, ATTN_ERR_STATE, "backward needs the activations of a forward pass");
    if (!a->has_targets)
        return attn_fail(err, ATTN_ERR_STATE,
                         "backward needs a forward pass with targets (no loss to differentiate)");
    return ATTN_OK;
}

/* The head's backward from d_logits (N, V) into head_dx, then the body's. */
static attn_status from_logits(attn_gpt *m, attn_gpt_acts *a, const float *d_logits,
                               attn_error *err) {
    const size_t N = (size_t)a->B * (size_t)a->T;
    float *dx = head_dx(m, a);
    if (dx) memset(dx, 0, N * (size_t)m->out_head.in_features * sizeof(float));
    m->engine.ops->linear_backward(&m->engine, &m->out_head, output_of(m, a, m->n_list - 2),
                                   d_logits, dx, N);
    return body_backward(m, a, err);
}

static attn_status backward(attn_gpt *m, attn_gpt_acts *a, float loss_scale, attn_error *err) {
    attn_status s = backward_state(m, a, err);
    if (s != ATTN_OK) return s;
    const size_t N = (size_t)a->B * (size_t)a->T, V = (size_t)attn_gpt_head_width(m);
    if (a->lean) { /* each chunk's logits again (attn_gpt_forward_backward does not) */
        int unpolled;
        head_chunks(m, a, output_of(m, a, m->n_list - 2), head_dx(m, a), N, 1, loss_scale,
                    &unpolled);
        return body_backward(m, a, err);
    }
    memset(a->d_logits, 0, N * V * sizeof(float)); /* every backward accumulates */
    m->engine.ops->cross_entropy_backward(&m->engine, a->logits, a->targets, a->lse, loss_scale,
                                          a->d_logits, N, V);
    return from_logits(m, a, a->d_logits, err);
}

/* Each backward ends so, whatever its status: no gradient left unset
 * (attn_gpt_zero_grad_deferred). */
static attn_status settled(attn_gpt *m, attn_status s) {
    attn_param_list_settle_grad(&m->params);
    return s;
}

attn_status attn_gpt_backward(attn_gpt *m, attn_gpt_acts *a, float loss_scale, attn_error *err) {
    return settled(m, backward(m, a, loss_scale, err));
}

static attn_status backward_logits(attn_gpt *m, attn_gpt_acts *a, const float *d_logits,
                                   attn_error *err) {
    attn_status s = attn_gpt_check_fp32(m, "backward", err);
    if (s) return s;
    if (!a || a->n_layers != m->cfg.n_layers || !a->blocks)
        return attn_fail(err, ATTN_ERR_STATE, "backward needs the activations of a forward pass");
    if (a->lean || !d_logits)
        return attn_fail(err, ATTN_ERR_INVALID_ARG,
                         "backward from the logits' gradient needs plain activations "
                         "(attn_gpt_acts_init) and d_logits");
    return from_logits(m, a, d_logits, err);
}

attn_status attn_gpt_backward_logits(attn_gpt *m, attn_gpt_acts *a, const float *d_logits,
                                     attn_error *err) {
    return settled(m, backward_logits(m, a, d_logits, err));
}

static attn_status forward_backward(attn_gpt *m, const int32_t *ids, const int32_t *targets, int B,
                                    int T, const attn_forward_mode *mode, attn_gpt_acts *a,
                                    float loss_scale, float *loss, attn_error *err) {
    if (!targets) return attn_fail(err, ATTN_ERR_INVALID_ARG, "forward_backward needs targets");
    if (!a || !a->lean) {
        attn_status s = attn_gpt_forward(m, ids, targets, B, T, mode, a, loss, err);
        return s != ATTN_OK ? s : backward(m, a, loss_scale, err);
    }
    attn_status s = check_call(m, B, T, a, err);
    if (s == ATTN_OK) s = check_tokens(m, ids, B, T, 0, err);
    if (s == ATTN_OK) s = check_tokens(m, targets, B, T, 1, err);
    a->has_targets = 0;
    if (s != ATTN_OK) return s;
    const size_t N = (size_t)B * (size_t)T;
    memcpy(a->ids, ids, N * sizeof(int32_t));
    memcpy(a->targets, targets, N * sizeof(int32_t));
    a->has_targets = 1;
    s = forward_core(m, B, T, mode, a, &loss_scale, loss, err);
    if (s == ATTN_OK) s = body_backward(m, a, err);
    if (s != ATTN_OK) a->has_targets = 0;
    return s;
}

attn_status attn_gpt_forward_backward(attn_gpt *m, const int32_t *ids, const int32_t *targets,
                                      int B, int T, const attn_forward_mode *mode, attn_gpt_acts *a,
                                      float loss_scale, float *loss, attn_error *err) {
    return settled(m, forward_backward(m, ids, targets, B, T, mode, a, loss_scale, loss, err));
}
