/* The GPT's TransformerBlock, written once (internal): the training forward,
 * its backward and the one-token KV-cached step all run these, so a change
 * to the block (another activation, norm or attention) goes here and into
 * the modules it calls.
 *
 * Shapes: C = emb_dim, N = B * T rows; x is the residual stream.
 *   x_mid = x_in + drop_shortcut(att(norm1(x_in)))     (N, C)
 *   x_out = x_mid + drop_shortcut(ff(norm2(x_mid)))    (N, C)
 * The variant keys live in the modules: norm1/norm2 switch LayerNorm /
 * RMSNorm inside attn_layernorm_* (layernorm.h), ff its activation inside
 * attn_feedforward_* (feedforward.h); the block itself is the same for all.
 * The forward saves what the backward reads in attn_gpt_block_acts
 * (attn/gpt.h). */
#ifndef ATTN_SRC_GPT_BLOCK_H
#define ATTN_SRC_GPT_BLOCK_H

#include <stddef.h>
#include <stdint.h>

#include "attn/gpt.h"

/* The block's modules, without memory: their tensors are views of the
 * model's arena (attn/param.h). params lists them, "<prefix>att.", "ff.",
 * "norm1.", "norm2." in that order (TransformerBlock.__init__'s, which is
 * also its draw order). */
attn_status attn_block_init_view(attn_gpt_block *blk, const attn_gpt_config *cfg, attn_error *err);
attn_status attn_block_params(attn_gpt_block *blk, const char *prefix, attn_param_list *list,
                              attn_error *err);
/* Every product of the block through g (NULL: fp32; attn/gemm.h). */
void attn_block_use_engine(attn_gpt_block *blk, struct attn_bf16_gemm *g);

/* A batched pass: (B, T) rows and drop_shortcut's rate. */
typedef struct attn_block_shape {
    int B, T;
    double drop_rate;
} attn_block_shape;

/* a's buffers for (B, T) (a is zeroed first); on failure the caller frees
 * it with attn_block_acts_free. */
attn_status attn_block_acts_init(attn_gpt_block_acts *a, const attn_gpt_block *blk, int B, int T,
                                 attn_error *err);
void attn_block_acts_free(attn_gpt_block_acts *a);

/* The forward and backward run on engine e's ops (attn/engine_ops.h).
 * x_out (N, C) = block(a->x_in), saving a's activations; dropout masks are
 * drawn from mode in PyTorch's order (att's weights, then the two
 * drop_shortcuts). Sets *dropped when a mask was drawn. */
attn_status attn_block_forward(const attn_engine *e, const attn_gpt_block *blk,
                               attn_gpt_block_acts *a, const attn_block_shape *s,
                               const attn_forward_mode *mode, float *x_out, int *dropped,
                               attn_error *err);

/* Backward scratch, (N, C) each but d_hidden (N, attn_feedforward_scratch(ff)). */
typedef struct attn_block_grads {
    float *d_resid; /* in: d loss / d x_out; out: d loss / d x_in */
    float *d_tmp, *d_ln, *d_hidden;
} attn_block_grads;

/* Accumulates the block's parameter grads; dropped as the forward set it. */
attn_status attn_block_backward(const attn_engine *e, attn_gpt_block *blk,
                                const attn_gpt_block_acts *a, const attn_block_shape *s,
                                int dropped, const attn_block_grads *g, attn_error *err);

/* n tokens' scratch (one per sequence): x (n, C) is the residual stream,
 * updated in place. */
typedef struct attn_block_step_buf {
    float *x, *ln, *proj; /* (n, C) each */
    float *hidden;        /* (n, ff.fc1.out_features) */
    attn_mha_step_buf att;
} attn_block_step_buf;

/* x = block(x) for the n sequences' tokens at pos (eval mode) on e's step
 * ops (attn/engine_ops.h), their keys and values written into row pos of
 * k_cache, v_cache (context_length, C; sequence s's kv_stride after the
 * first's). att.w_bf16 NULL: the fp32 weights; else attn_block_bf16_copy's
 * values. Call from every thread of a team (the products' rows and the
 * heads are split) or from one thread alone. */
void attn_block_step(const attn_engine *e, const attn_gpt_block *blk, int n, float *k_cache,
                     float *v_cache, size_t kv_stride, int pos, const attn_block_step_buf *b);

/* The block's weights in bf16 for the step: att's W_query, W_key, W_value,
 * out_proj, then ff's fc1, fc2 (attn_linear_bf16_copy's each). */
size_t attn_block_bf16_numel(const attn_gpt_block *blk);
/* release: each fp32 weight's pages handed back as it goes
 * (attn_linear_bf16_move): for attn_gpt_keep_bf16_weights. */
void attn_block_bf16_copy(const attn_gpt_block *blk, uint16_t *w, int release);
/* 1 when every weight the step streams lies within lo[0..n). */
int attn_block_step_weights_within(const attn_gpt_block *blk, const float *lo, size_t n);

/* Asks m's engine for every op the one-token step calls for batch
 * sequences, its products at p (the KV cache's weights): the first it
 * refuses is the status. In gpt_engine.c. */
attn_status attn_gpt_step_ops(const attn_gpt *m, attn_precision p, int batch, attn_error *err);

/* x (N, C) = tok_emb[ids] + pos_emb[pos0 + r % T] for rows r (pos_emb
 * "none": tok_emb[ids] alone): the input of the first block, for the
 * batched forward (pos0 0) and the step (N = T = 1, pos0 = the token's
 * position). In gpt_pass.c. */
void attn_gpt_embed(const attn_gpt *m, const int32_t *ids, size_t N, int T, int pos0, float *x);

#endif
