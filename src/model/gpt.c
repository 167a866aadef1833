/* The GPT: init (its family's build, gpt_build.c), freezing,
 * gradients, activations (see attn/gpt.h); its engine is gpt_engine.c's, the
 * passes gpt_pass.c's. */
#include "attn/gpt.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn/cross_entropy.h"
#include "attn/engine_cpu.h"
#include "attn/gemm.h"
#include "attn/residual.h"
#include "base/buffers.h"
#include "base/parallel.h"
#include "gpt_block.h"
#include "gpt_build.h"

attn_status attn_gpt_init_family(attn_gpt *m, const attn_gpt_config *cfg, attn_gpt_build_fn build,
                                 const attn_gpt_build *opts, attn_rng *rng, attn_error *err) {
    memset(m, 0, sizeof *m);
    attn_status s = attn_gpt_config_validate(cfg, err);
    if (s != ATTN_OK) return s;
    m->cfg = *cfg;
    m->blocks = calloc((size_t)cfg->n_layers, sizeof *m->blocks);
    if (!m->blocks)
        return attn_fail(err, ATTN_ERR_NOMEM, "out of memory for %d blocks", cfg->n_layers);
    attn_param_list_init(&m->params);
    s = attn_engine_cpu_init(&m->engine, ATTN_PRECISION_FP32, err);
    if (s == ATTN_OK) s = attn_gpt_build_run(m, build, opts, err);
    if (s == ATTN_OK) s = attn_param_list_alloc(&m->params, err);
    if (s == ATTN_OK && rng) attn_gpt_draw(m, rng);
    if (s != ATTN_OK) attn_gpt_free(m);
    return s;
}

attn_status attn_gpt_init(attn_gpt *m, const attn_gpt_config *cfg, attn_rng *rng, attn_error *err) {
    return attn_gpt_init_family(m, cfg, NULL, NULL, rng, err);
}

/* The modules own nothing (their tensors are the arena's views); the
 * adapters own their scratch. */
void attn_gpt_free(attn_gpt *m) {
    free(m->blocks);
    for (int i = 0; i < m->n_adapters; i++)
        attn_lora_free(&m->adapters[i]);
    free(m->adapters);
    free(m->layers);
    attn_param_list_free(&m->params);
    attn_engine_free(&m->engine);
    free(m->w_bf16);
    memset(m, 0, sizeof *m);
}

attn_status attn_gpt_set_trainable(attn_gpt *m, const char *prefix, int trainable,
                                   attn_error *err) {
    if (!prefix) return attn_fail(err, ATTN_ERR_INVALID_ARG, "set_trainable: no name prefix");
    return attn_param_list_set_trainable(&m->params, prefix, trainable, err);
}

attn_status attn_gpt_check_fp32(const attn_gpt *m, const char *what, attn_error *err) {
    if (!m->w_bf16) return ATTN_OK;
    return attn_fail(err, ATTN_ERR_STATE,
                     "%s: the model keeps only bf16 copies of its Linear weights (loaded for "
                     "bf16 generation, attn_gpt_keep_bf16_weights): load it again for anything "
                     "else",
                     what);
}

const attn_param_list *attn_gpt_params(const attn_gpt *m) {
    return &m->params;
}

size_t attn_gpt_num_params(const attn_gpt *m) {
    return attn_param_list_numel(&m->params);
}

void attn_gpt_zero_grad(attn_gpt *m) {
    attn_param_list_zero_grad(&m->params);
}

/* fp32: OpenBLAS clears C itself for beta 0, block by block, slower than
 * one pass over all the gradients (GPT-2 124M: 0.69 -> 0.71 s a step);
 * oneDNN writes C without reading it (bf16 step 0.47 -> 0.42 s). */
void attn_gpt_zero_grad_deferred(attn_gpt *m) {
    if (m->bf16)
        attn_param_list_zero_grad_deferred(&m->params);
    else
        attn_param_list_zero_grad(&m->params);
}

/* ------------------------------------------------------------ activations */

/* The acts' own buffers (each block's are the block's), listed once: N rows
 * of C, the head's width V, L layers, ff the feed-forward's scratch width. */
typedef struct acts_sizes {
    size_t N, C, V, L, ff;
    size_t logit_rows, d_logit_rows; /* N and N; lean: a chunk's rows and none */
} acts_sizes;

/* The lean head's chunks: a multiple of the cross-entropy's row block,
 * so that its loss adds up exactly as the plain path's. */
#define HEAD_ROWS ATTN_GPT_HEAD_ROWS

static int acts_buffers(attn_gpt_acts *a, const acts_sizes *s, attn_bufs_op op) {
    const attn_buf t[] = {
        ATTN_BUF(a->ids, s->N),
        ATTN_BUF(a->targets, s->N),
        ATTN_BUF(a->keep_emb, s->N * s->C),
        ATTN_BUF(a->blocks, s->L),
        ATTN_BUF(a->x_final, s->N * s->C),
        ATTN_BUF(a->lnf, s->N * s->C),
        ATTN_BUF(a->lnf_mean, s->N),
        ATTN_BUF(a->lnf_rstd, s->N),
        ATTN_BUF(a->logits, s->logit_rows * s->V),
        ATTN_BUF(a->lse, s->N),
        ATTN_BUF(a->target_logit, s->N),
        ATTN_BUF(a->d_resid, s->N * s->C),
        ATTN_BUF(a->d_tmp, s->N * s->C),
        ATTN_BUF(a->d_ln, s->N * s->C),
        ATTN_BUF(a->d_hidden, s->N * s->ff),
        ATTN_BUF(a->d_logits, s->d_logit_rows * s->V),
        ATTN_BUF(a->d_logits16, 0), /* made on first use (head_chunks) */
    };
    return ATTN_BUFS(t, op);
}

void attn_gpt_acts_free(attn_gpt_acts *a) {
    for (int l = 0; a->blocks && l < a->n_layers; l++)
        attn_block_acts_free(&a->blocks[l]);
    const acts_sizes none = {0};
    acts_buffers(a, &none, ATTN_BUFS_FREE);
    memset(a, 0, sizeof *a);
}

attn_status attn_gpt_check_shape(const attn_gpt_config *c, int B, int T, attn_error *err) {
    if (B < 1)
        return attn_fail(err, ATTN_ERR_SHAPE,
                         "GPT: the batch is empty (B = %d): ids must be (B, T) with B >= 1", B);
    if (T < 1)
        return attn_fail(err, ATTN_ERR_SHAPE,
                         "GPT: the sequences are empty (T = %d): ids must be (B, T) with T >= 1",
                         T);
    if (T > c->context_length)
        return attn_fail(err, ATTN_ERR_SHAPE, "sequence length %d exceeds context_length %d", T,
                         c->context_length);
    return ATTN_OK;
}

static attn_status acts_init(attn_gpt_acts *a, const attn_gpt *m, int B, int T, int lean,
                             attn_error *err) {
    memset(a, 0, sizeof *a);
    const attn_gpt_config *c = &m->cfg;
    const attn_status shape = attn_gpt_check_shape(c, B, T, err);
    if (shape != ATTN_OK) return shape;
    const size_t N = (size_t)B * (size_t)T;
    const acts_sizes s = {N,
                          (size_t)c->emb_dim,
                          (size_t)attn_gpt_head_width(m),
                          (size_t)c->n_layers,
                          attn_feedforward_scratch(&m->blocks[0].ff),
                          lean ? (N < HEAD_ROWS ? N : HEAD_ROWS) : N,
                          lean ? 0 : N};
    a->lean = lean;
    a->B = a->B_max = B;
    a->T = a->T_max = T;
    a->loss = NAN;
    if (acts_buffers(a, &s, ATTN_BUFS_ALLOC) != 0)
        return attn_fail(err, ATTN_ERR_NOMEM, "out of memory for activations of (B %d, T %d)", B,
                         T);
    a->n_layers = c->n_layers;
    for (int l = 0; l < a->n_layers; l++) {
        attn_status st = attn_block_acts_init(&a->blocks[l], &m->blocks[l], B, T, err);
        if (st != ATTN_OK) {
            attn_gpt_acts_free(a);
            return st;
        }
    }
    return ATTN_OK;
}

attn_status attn_gpt_acts_init(attn_gpt_acts *a, const attn_gpt *m, int B, int T, attn_error *err) {
    return acts_init(a, m, B, T, 0, err);
}

attn_status attn_gpt_acts_init_lean(attn_gpt_acts *a, const attn_gpt *m, int B, int T,
                                    attn_error *err) {
    return acts_init(a, m, B, T, 1, err);
}

/* Rows of the shape covering both (B, T) and acts' own, or of (B, T) alone
 * where covering both would more than double the larger's rows (a batch of
 * many short rows after one long row). */
static void cover(const attn_gpt_acts *a, int B, int T, int *Bc, int *Tc) {
    const size_t want = (size_t)B * (size_t)T, have = (size_t)a->B_max * (size_t)a->T_max;
    const int b = B > a->B_max ? B : a->B_max, t = T > a->T_max ? T : a->T_max;
    const size_t both = (size_t)b * (size_t)t;
    const int alone = both > 2 * (want > have ? want : have);
    *Bc = alone ? B : b;
    *Tc = alone ? T : t;
}

attn_status attn_gpt_acts_reserve(attn_gpt_acts *a, const attn_gpt *m, int B, int T, int lean,
                                  attn_error *err) {
    const attn_status shape = attn_gpt_check_shape(&m->cfg, B, T, err);
    if (shape != ATTN_OK) return shape;
    const int made = a->blocks && a->n_layers == m->cfg.n_layers && a->lean == lean;
    if (made && B <= a->B_max && T <= a->T_max) return ATTN_OK;
    int Bc = B, Tc = T;
    if (made) cover(a, B, T, &Bc, &Tc);
    if (a->blocks) attn_gpt_acts_free(a);
    return acts_init(a, m, Bc, Tc, lean, err);
}
