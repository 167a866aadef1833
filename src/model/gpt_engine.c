/* The engine a GPT's passes call (attn/gpt.h: attn_gpt_set_engine,
 * attn_gpt_set_precision): every op its layer list needs is asked of the
 * engine's supports_op before the engine is taken. */
#include <string.h>

#include "attn/engine_cpu.h"
#include "attn/gemm.h"
#include "attn/gpt.h"
#include "attn/gpt_family.h"
#include "gpt_block.h"

/* Asks e for op at precision p over (in, out) (rows: any). */
static attn_status ask(const attn_engine *e, attn_op op, attn_precision p, int in, int out,
                       const attn_attention_spec *spec, attn_error *err) {
    const attn_op_desc d = {op, p, 0, in, out, spec};
    return attn_engine_supports_op(e, &d, err);
}

/* A norm's two ops, in fp32. */
static attn_status norm_ops(const attn_engine *e, int C, attn_error *err) {
    attn_status s = ask(e, ATTN_OP_LAYERNORM, ATTN_PRECISION_FP32, C, 0, NULL, err);
    return s == ATTN_OK ? ask(e, ATTN_OP_LAYERNORM_BACKWARD, ATTN_PRECISION_FP32, C, 0, NULL, err)
                        : s;
}

/* A block's: the attention's packed product and core, its Linears
 * (out_proj, the feed-forward's; on a bf16 engine with their kept bf16
 * inputs too) and activation, the two norms. */
static attn_status block_ops(const attn_engine *e, const attn_gpt_block *b, attn_error *err) {
    const attn_precision f = ATTN_PRECISION_FP32, x = e->precision;
    const int C = b->norm1.C, W1 = b->ff.fc1.out_features, H = b->ff.hidden;
    const attn_mha *a = &b->att;
    const int D = a->d_out, D3 = a->d_out + 2 * a->kv_dim;
    attn_status s = ask(e, ATTN_OP_LINEAR_QKV, x, a->d_in, D3, &a->spec, err);
    if (s == ATTN_OK) s = ask(e, ATTN_OP_LINEAR_QKV_BACKWARD, x, a->d_in, D3, &a->spec, err);
    if (s == ATTN_OK) s = ask(e, ATTN_OP_ATTENTION_CORE, x, a->d_in, D, &a->spec, err);
    if (s == ATTN_OK) s = ask(e, ATTN_OP_ATTENTION_CORE_BACKWARD, x, a->d_in, D, &a->spec, err);
    const attn_op lin[] = {ATTN_OP_LINEAR, ATTN_OP_LINEAR_BACKWARD, ATTN_OP_LINEAR_X16,
                           ATTN_OP_LINEAR_BACKWARD_X16};
    for (int i = 0; s == ATTN_OK && i < (x == ATTN_PRECISION_BF16 ? 4 : 2); i++) {
        s = ask(e, lin[i], x, D, C, NULL, err);
        if (s == ATTN_OK) s = ask(e, lin[i], x, C, W1, NULL, err);
        if (s == ATTN_OK) s = ask(e, lin[i], x, H, C, NULL, err);
    }
    if (s == ATTN_OK) s = ask(e, ATTN_OP_ACTIVATION, f, W1, H, NULL, err);
    if (s == ATTN_OK) s = ask(e, ATTN_OP_ACTIVATION_BACKWARD, f, W1, H, NULL, err);
    return s == ATTN_OK ? norm_ops(e, C, err) : s;
}

/* The ops one layer of the list calls (forward and backward); products at
 * e's precision, the rest in fp32. */
static attn_status layer_ops(const attn_gpt *m, const attn_gpt_layer *l, const attn_engine *e,
                             attn_error *err) {
    const attn_precision f = ATTN_PRECISION_FP32, x = e->precision;
    const int C = m->cfg.emb_dim, V = attn_gpt_head_width(m);
    attn_status s = ATTN_OK;
    switch (l->kind) {
    case ATTN_GPT_LAYER_EMBEDDING:
        s = ask(e, ATTN_OP_EMBEDDING, f, 0, C, NULL, err);
        return s == ATTN_OK ? ask(e, ATTN_OP_EMBEDDING_BACKWARD, f, 0, C, NULL, err) : s;
    case ATTN_GPT_LAYER_BLOCK: return block_ops(e, &m->blocks[l->index], err);
    case ATTN_GPT_LAYER_NORM: return norm_ops(e, C, err);
    case ATTN_GPT_LAYER_HEAD:
        s = ask(e, ATTN_OP_LINEAR, x, C, V, NULL, err);
        if (s == ATTN_OK) s = ask(e, ATTN_OP_LINEAR_BACKWARD, x, C, V, NULL, err);
        for (int op = ATTN_OP_CROSS_ENTROPY; s == ATTN_OK && op <= ATTN_OP_CROSS_ENTROPY_GRAD; op++)
            s = ask(e, (attn_op)op, f, 0, V, NULL, err);
        return s == ATTN_OK ? ask(e, ATTN_OP_ADAMW, f, 0, 0, NULL, err) : s; /* the trainer's */
    }
    return s;
}

static attn_status check_engine(const attn_gpt *m, const attn_engine *e, attn_error *err) {
    if (!e || !e->ops) return attn_fail(err, ATTN_ERR_INVALID_ARG, "set_engine: no engine");
    for (int i = 0; i < m->n_list; i++) {
        attn_status s = layer_ops(m, &m->layers[i], e, err);
        if (s != ATTN_OK) return s;
    }
    return ATTN_OK;
}

/* Every module's products on g (NULL: fp32), so that the CPU engine's ops
 * run them as they are. */
static void use_gemm(attn_gpt *m, attn_bf16_gemm *g) {
    for (int i = 0; i < m->cfg.n_layers; i++)
        attn_block_use_engine(&m->blocks[i], g);
    m->out_head.bf16 = g;
    m->bf16 = g;
}

/* Takes e (checked) as m's engine, releasing the one m owned (unless e is
 * that one). */
static void take(attn_gpt *m, const attn_engine *e) {
    attn_engine old = m->engine;
    const int same = old.ops == e->ops && old.state == e->state;
    m->engine = *e;
    if (same) m->engine.owns_state |= old.owns_state;
    m->precision = e->precision;
    use_gemm(m, attn_engine_cpu_gemm(e));
    if (!same) attn_engine_free(&old);
}

attn_status attn_gpt_set_engine(attn_gpt *m, const attn_engine *e, attn_error *err) {
    attn_status s = check_engine(m, e, err);
    if (s != ATTN_OK) return s;
    attn_engine borrowed = *e;
    borrowed.owns_state = 0;
    take(m, &borrowed);
    return ATTN_OK;
}

attn_status attn_gpt_set_precision(attn_gpt *m, attn_precision precision, attn_error *err) {
    attn_status s = attn_precision_check(precision, err);
    if (s != ATTN_OK) return s;
    if (precision == m->precision && attn_engine_is_cpu(&m->engine)) return ATTN_OK;
    attn_engine e;
    if ((s = attn_engine_cpu_init(&e, precision, err)) != ATTN_OK) return s;
    attn_bf16_gemm *g = attn_engine_cpu_gemm(&e);
    /* The weights' bf16 copies: one block of the arena's layout. */
    if (g && m->params.values)
        s = attn_bf16_gemm_use_block(g, m->params.values, m->params.values_numel, err);
    if (s == ATTN_OK) s = check_engine(m, &e, err);
    if (s != ATTN_OK) {
        attn_engine_free(&e);
        return s;
    }
    take(m, &e);
    return ATTN_OK;
}

/* ------------------------------------------------------- the KV step's ops */

/* The step's products at p, each Linear of a block and the head. */
static attn_status step_products(const attn_gpt *m, attn_precision p, int batch, attn_error *err) {
    const attn_gpt_block *blk = &m->blocks[0]; /* the blocks are alike */
    const attn_linear *l[] = {&blk->att.W_query,  &blk->att.W_key, &blk->att.W_value,
                              &blk->att.out_proj, &blk->ff.fc1,    &blk->ff.fc2,
                              &m->out_head};
    attn_status s = ATTN_OK;
    for (size_t i = 0; s == ATTN_OK && i < sizeof l / sizeof *l; i++) {
        const attn_op_desc d = {ATTN_OP_LINEAR_STEP, p,   (size_t)batch, l[i]->in_features,
                                l[i]->out_features,  NULL};
        s = attn_engine_supports_op(&m->engine, &d, err);
    }
    return s;
}

attn_status attn_gpt_step_ops(const attn_gpt *m, attn_precision p, int batch, attn_error *err) {
    const attn_engine *e = &m->engine;
    const attn_precision f = ATTN_PRECISION_FP32;
    const int C = m->cfg.emb_dim, H = m->blocks[0].ff.fc1.out_features;
    const attn_op_desc d[] = {
        {ATTN_OP_EMBEDDING, f, (size_t)batch, 0, C, NULL},
        {ATTN_OP_LAYERNORM, f, (size_t)batch, C, 0, NULL},
        {ATTN_OP_ADD, f, (size_t)batch, C, C, NULL},
        {ATTN_OP_ATTENTION_STEP, f, (size_t)batch, C, C, &m->blocks[0].att.spec},
        {ATTN_OP_ACTIVATION_STEP, f, (size_t)batch, C, H, NULL},
        {ATTN_OP_ADD_POSITIONS, f, (size_t)batch, 0, C, NULL}, /* last: with a table only */
    };
    const size_t n = sizeof d / sizeof *d - (m->pos_emb.weight ? 0 : 1);
    attn_status s = ATTN_OK;
    for (size_t i = 0; s == ATTN_OK && i < n; i++)
        s = attn_engine_supports_op(e, &d[i], err);
    return s == ATTN_OK ? step_products(m, p, batch, err) : s;
}
