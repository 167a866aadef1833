/* The GPT's TransformerBlock: forward, backward and the one-token step (see
 * gpt_block.h). */
#include "gpt_block.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buffers.h"
#include "nn/linear_step.h"

attn_status attn_block_init_view(attn_gpt_block *blk, const attn_gpt_config *cfg, attn_error *err) {
    const int C = cfg->emb_dim;
    const attn_attention_spec spec = attn_gpt_attention_spec(cfg);
    attn_status s =
        attn_mha_init_view(&blk->att, C, C, cfg->context_length, &spec, cfg->qkv_bias, err);
    if (s == ATTN_OK) s = attn_feedforward_init_view(&blk->ff, C, cfg->act, err);
    if (s == ATTN_OK) s = attn_norm_init_view(&blk->norm1, C, cfg->norm, err);
    if (s == ATTN_OK) s = attn_norm_init_view(&blk->norm2, C, cfg->norm, err);
    return s;
}

attn_status attn_block_params(attn_gpt_block *blk, const char *prefix, attn_param_list *list,
                              attn_error *err) {
    static const char *const part[] = {"att.", "ff.", "norm1.", "norm2."};
    char p[4][ATTN_PARAM_NAME_MAX];
    for (int i = 0; i < 4; i++) {
        int n = snprintf(p[i], sizeof p[i], "%s%s", prefix, part[i]);
        if (n < 0 || (size_t)n >= sizeof p[i])
            return attn_fail(err, ATTN_ERR_INVALID_ARG, "parameter prefix '%s' is too long",
                             prefix);
    }
    attn_status s = attn_mha_params(&blk->att, p[0], list, err);
    if (s == ATTN_OK) s = attn_feedforward_params(&blk->ff, p[1], list, err);
    if (s == ATTN_OK) s = attn_layernorm_params(&blk->norm1, p[2], list, err);
    if (s == ATTN_OK) s = attn_layernorm_params(&blk->norm2, p[3], list, err);
    return s;
}

void attn_block_use_engine(attn_gpt_block *blk, struct attn_bf16_gemm *g) {
    blk->att.bf16 = g;
    blk->att.W_query.bf16 = blk->att.W_key.bf16 = blk->att.W_value.bf16 = g;
    blk->att.out_proj.bf16 = g;
    blk->ff.fc1.bf16 = blk->ff.fc2.bf16 = g;
}

/* The block's own buffers (att's and ff's caches are theirs), listed once:
 * N rows of C. */
static int acts_buffers(attn_gpt_block_acts *a, size_t N, size_t C, attn_bufs_op op) {
    const size_t NC = N * C;
    const attn_buf t[] = {
        ATTN_BUF(a->x_in, NC),    ATTN_BUF(a->ln1, NC),     ATTN_BUF(a->ln1_mean, N),
        ATTN_BUF(a->ln1_rstd, N), ATTN_BUF(a->att_out, NC), ATTN_BUF(a->keep1, NC),
        ATTN_BUF(a->x_mid, NC),   ATTN_BUF(a->ln2, NC),     ATTN_BUF(a->ln2_mean, N),
        ATTN_BUF(a->ln2_rstd, N), ATTN_BUF(a->ff_out, NC),  ATTN_BUF(a->keep2, NC),
    };
    return ATTN_BUFS(t, op);
}

attn_status attn_block_acts_init(attn_gpt_block_acts *a, const attn_gpt_block *blk, int B, int T,
                                 attn_error *err) {
    const size_t N = (size_t)B * (size_t)T;
    memset(a, 0, sizeof *a);
    if (acts_buffers(a, N, (size_t)blk->norm1.C, ATTN_BUFS_ALLOC) != 0)
        return attn_fail(err, ATTN_ERR_NOMEM, "out of memory for activations of (B %d, T %d)", B,
                         T);
    /* The MHA's own path decides the cache: no (B, heads, T, T) buffers on the fused path. */
    attn_status s = attn_mha_cache_init(&a->att, &blk->att, B, T, err);
    if (s == ATTN_OK) s = attn_feedforward_cache_init(&a->ff, &blk->ff, N, err);
    return s;
}

void attn_block_acts_free(attn_gpt_block_acts *a) {
    acts_buffers(a, 0, 0, ATTN_BUFS_FREE);
    attn_attention_cache_free(&a->att);
    attn_feedforward_cache_free(&a->ff);
    memset(a, 0, sizeof *a);
}

attn_status attn_block_forward(const attn_engine *e, const attn_gpt_block *blk,
                               attn_gpt_block_acts *a, const attn_block_shape *s,
                               const attn_forward_mode *mode, float *x_out, int *dropped,
                               attn_error *err) {
    const attn_engine_ops *op = e->ops;
    const size_t N = (size_t)s->B * (size_t)s->T, NC = N * (size_t)blk->norm1.C;
    const double p = s->drop_rate;
    op->layernorm_forward(e, &blk->norm1, a->x_in, a->ln1, a->ln1_mean, a->ln1_rstd, N);
    attn_status st =
        attn_mha_forward_ops(e, &blk->att, a->ln1, s->B, s->T, a->att_out, mode, &a->att, err);
    if (st != ATTN_OK) return st;
    *dropped |= op->dropout_add_forward(e, a->att_out, a->x_in, a->x_mid, a->keep1, p, mode, NC);
    op->layernorm_forward(e, &blk->norm2, a->x_mid, a->ln2, a->ln2_mean, a->ln2_rstd, N);
    attn_feedforward_forward_ops(e, &blk->ff, a->ln2, a->ff_out, N, &a->ff);
    *dropped |= op->dropout_add_forward(e, a->ff_out, a->x_mid, x_out, a->keep2, p, mode, NC);
    return ATTN_OK;
}

attn_status attn_block_backward(const attn_engine *e, attn_gpt_block *blk,
                                const attn_gpt_block_acts *a, const attn_block_shape *s,
                                int dropped, const attn_block_grads *g, attn_error *err) {
    const attn_engine_ops *op = e->ops;
    const size_t N = (size_t)s->B * (size_t)s->T, NC = N * (size_t)blk->norm1.C;
    const double p = s->drop_rate;
    /* x_out = x_mid + drop(ff(norm2(x_mid))) */
    memset(g->d_tmp, 0, NC * sizeof(float));
    op->dropout_add_backward(e, g->d_resid, a->keep2, p, dropped, g->d_tmp, NC);
    memset(g->d_ln, 0, NC * sizeof(float));
    attn_feedforward_backward_ops(e, &blk->ff, a->ln2, g->d_tmp, g->d_ln, N, &a->ff, g->d_hidden);
    op->layernorm_backward(e, &blk->norm2, a->x_mid, a->ln2_mean, a->ln2_rstd, g->d_ln, g->d_resid,
                           N);
    /* x_mid = x_in + drop(att(norm1(x_in))) */
    memset(g->d_tmp, 0, NC * sizeof(float));
    op->dropout_add_backward(e, g->d_resid, a->keep1, p, dropped, g->d_tmp, NC);
    memset(g->d_ln, 0, NC * sizeof(float));
    attn_status st =
        attn_mha_backward_ops(e, &blk->att, a->ln1, s->B, s->T, g->d_tmp, g->d_ln, &a->att, err);
    if (st != ATTN_OK) return st;
    op->layernorm_backward(e, &blk->norm1, a->x_in, a->ln1_mean, a->ln1_rstd, g->d_ln, g->d_resid,
                           N);
    return ATTN_OK;
}

/* The block's Linears in the order of its bf16 copy for the step, each
 * with its copy (w NULL: the fp32 weights). */
enum { STEP_LINEARS = 6 };
static void step_linears(const attn_gpt_block *blk, const uint16_t *w,
                         const attn_linear *l[STEP_LINEARS], const uint16_t *w16[STEP_LINEARS]) {
    l[0] = &blk->att.W_query, l[1] = &blk->att.W_key, l[2] = &blk->att.W_value;
    l[3] = &blk->att.out_proj, l[4] = &blk->ff.fc1, l[5] = &blk->ff.fc2;
    for (int i = 0; i < STEP_LINEARS; i++) {
        w16[i] = w;
        if (w) w += (size_t)l[i]->out_features * (size_t)l[i]->in_features;
    }
}

/* The block's step on e's step ops: one barrier for q, k and v (k and v
 * written into the caches' row for pos), the attention core, out_proj,
 * fc1, the activation, fc2; the norms and the residual adds in a single. */
void attn_block_step(const attn_engine *e, const attn_gpt_block *blk, int n, float *k_cache,
                     float *v_cache, size_t kv_stride, int pos, const attn_block_step_buf *b) {
    const attn_engine_ops *op = e->ops;
    const attn_mha *att = &blk->att;
    const size_t C = (size_t)blk->norm1.C, nC = (size_t)n * C, D = (size_t)att->d_out;
    const size_t row = (size_t)(pos % attn_mha_step_rows(att)) * (size_t)att->kv_dim;
    const size_t W1 = (size_t)blk->ff.fc1.out_features;
    const attn_linear *l[STEP_LINEARS];
    const uint16_t *w[STEP_LINEARS];
    step_linears(blk, b->att.w_bf16, l, w);
#pragma omp single
    op->layernorm_forward(e, &blk->norm1, b->x, b->ln, NULL, NULL, (size_t)n);
    op->linear_step(e, l[0], w[0], b->ln, C, b->att.q, D, n, 0);
    op->linear_step(e, l[1], w[1], b->ln, C, k_cache + row, kv_stride, n, 0);
    op->linear_step(e, l[2], w[2], b->ln, C, v_cache + row, kv_stride, n, 1);
    op->attention_step(e, att, n, b->att.q, k_cache, v_cache, kv_stride, pos, b->att.ctx,
                       b->att.scores);
    op->linear_step(e, l[3], w[3], b->att.ctx, D, b->proj, D, n, 1);
#pragma omp single
    {
        op->add(e, b->x, b->proj, nC);
        op->layernorm_forward(e, &blk->norm2, b->x, b->ln, NULL, NULL, (size_t)n);
    }
    /* The activation reads only the rows of fc1 it is split as (W1 == the
     * hidden width): no barrier between them; SwiGLU's pairs are H apart. */
    op->linear_step(e, l[4], w[4], b->ln, C, b->hidden, W1, n, blk->ff.act == ATTN_ACT_SWIGLU);
    op->activation_step(e, &blk->ff, b->hidden, n);
    op->linear_step(e, l[5], w[5], b->hidden, W1, b->proj, C, n, 1);
#pragma omp single
    op->add(e, b->x, b->proj, nC);
}

size_t attn_block_bf16_numel(const attn_gpt_block *blk) {
    const attn_linear *l[STEP_LINEARS];
    const uint16_t *w[STEP_LINEARS];
    step_linears(blk, NULL, l, w);
    size_t n = 0;
    for (int i = 0; i < STEP_LINEARS; i++)
        n += (size_t)l[i]->out_features * (size_t)l[i]->in_features;
    return n;
}

void attn_block_bf16_copy(const attn_gpt_block *blk, uint16_t *w, int release) {
    const attn_linear *l[STEP_LINEARS];
    const uint16_t *w16[STEP_LINEARS];
    step_linears(blk, w, l, w16);
    for (int i = 0; i < STEP_LINEARS; i++) {
        uint16_t *to = w + (w16[i] - w);
        if (release)
            attn_linear_bf16_move(l[i], to);
        else
            attn_linear_bf16_copy(l[i], to);
    }
}

int attn_block_step_weights_within(const attn_gpt_block *blk, const float *lo, size_t n) {
    const attn_linear *l[STEP_LINEARS];
    const uint16_t *w16[STEP_LINEARS];
    step_linears(blk, NULL, l, w16);
    for (int i = 0; i < STEP_LINEARS; i++)
        if (!attn_linear_weight_within(l[i], lo, n)) return 0;
    return 1;
}
