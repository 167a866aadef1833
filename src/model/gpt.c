/* The book's chapter-4 GPTModel: init, forward, backward (see attn/gpt.h). */
#include "attn/gpt.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn/cross_entropy.h"
#include "attn/gemm.h"
#include "attn/residual.h"
#include "base/buffers.h"
#include "base/parallel.h"
#include "gpt_block.h"

/* Tied: the head views tok_emb.weight, one tensor (as PyTorch's
 * named_parameters() lists a shared parameter once): both backward passes
 * accumulate into its gradient, the head's first (it may write the shared
 * gradient whole; the embedding's scatter adds after it): its mark. */
static attn_status tie(attn_gpt *m, attn_error *err) {
    attn_param_list *L = &m->params;
    attn_status s = attn_param_list_alias(L, "tok_emb.weight", &m->out_head.weight,
                                          &m->out_head.grad_weight, err);
    if (s == ATTN_OK)
        attn_param_list_find(L, "tok_emb.weight")->grad_unset = &m->out_head.grad_unset;
    return s;
}

/* The model's table, written once: its modules made without memory, each
 * listing its tensors (the fields that view them) in the book's
 * state_dict order, GPTModel.__init__'s: tok_emb, pos_emb, blocks (att,
 * ff, norm1, norm2), final_norm, out_head. The arena is made from it. */
static attn_status build(attn_gpt *m, attn_error *err) {
    const attn_gpt_config *cfg = &m->cfg;
    const int C = cfg->emb_dim;
    attn_param_list *L = &m->params;
    char p[ATTN_PARAM_NAME_MAX];
    attn_status s = attn_embedding_init_view(&m->tok_emb, cfg->vocab_size, C, err);
    if (s == ATTN_OK) s = attn_embedding_params(&m->tok_emb, "tok_emb.", L, err);
    if (s == ATTN_OK && cfg->pos_emb == ATTN_POS_LEARNED) { /* else no table */
        s = attn_embedding_init_view(&m->pos_emb, cfg->context_length, C, err);
        if (s == ATTN_OK) s = attn_embedding_params(&m->pos_emb, "pos_emb.", L, err);
    }
    for (int i = 0; i < cfg->n_layers && s == ATTN_OK; i++) {
        snprintf(p, sizeof p, "trf_blocks.%d.", i);
        s = attn_block_init_view(&m->blocks[i], cfg, err);
        if (s == ATTN_OK) s = attn_block_params(&m->blocks[i], p, L, err);
    }
    if (s == ATTN_OK) s = attn_norm_init_view(&m->final_norm, C, cfg->norm, err);
    if (s == ATTN_OK) s = attn_layernorm_params(&m->final_norm, "final_norm.", L, err);
    if (s == ATTN_OK) s = attn_linear_init_view(&m->out_head, C, cfg->vocab_size, 0, err);
    if (s == ATTN_OK)
        s = cfg->tie_weights ? tie(m, err) : attn_linear_params(&m->out_head, "out_head.", L, err);
    return s;
}

/* The book's init: each tensor drawn as its torch module draws it, in the
 * table's order, which is the constructor's (norms keep the arena's ones
 * and zeros). A tied model never draws it (attn_gpt_config_init_kind). */
static void draw_book(attn_gpt *m, attn_rng *rng) {
    for (int i = 0; i < m->params.count; i++) {
        attn_param *p = &m->params.items[i];
        if (p->role == ATTN_ROLE_MATRIX || p->role == ATTN_ROLE_BIAS)
            attn_linear_draw(rng, p->data, p->numel, p->fan_in, p->role == ATTN_ROLE_BIAS);
        else if (p->role == ATTN_ROLE_EMBEDDING)
            attn_embedding_draw(rng, p->data, p->numel);
    }
}

/* 1 when w is a projection back into the residual stream (att.out_proj,
 * ff.layers.2): GPT-2 scales their init by 1/sqrt(2 n_layers). */
static int residual_projection(const attn_gpt *m, const float *w) {
    for (int i = 0; i < m->cfg.n_layers; i++)
        if (w == m->blocks[i].att.out_proj.weight || w == m->blocks[i].ff.fc2.weight) return 1;
    return 0;
}

/* GPT-2's init: each matrix one normal_ in the table's order; vectors
 * (biases, norms) keep the arena's zeros and ones. */
static void draw_gpt2(attn_gpt *m, attn_rng *rng) {
    const float std = 0.02f, resid = (float)(0.02 / sqrt(2.0 * m->cfg.n_layers));
    for (int i = 0; i < m->params.count; i++) {
        attn_param *p = &m->params.items[i];
        if (p->ndim >= 2)
            attn_rng_normal(rng, p->data, p->numel, 0.0f,
                            residual_projection(m, p->data) ? resid : std);
    }
}

attn_status attn_gpt_init(attn_gpt *m, const attn_gpt_config *cfg, attn_rng *rng, attn_error *err) {
    memset(m, 0, sizeof *m);
    attn_status s = attn_gpt_config_validate(cfg, err);
    if (s != ATTN_OK) return s;
    m->cfg = *cfg;
    m->blocks = calloc((size_t)cfg->n_layers, sizeof *m->blocks);
    if (!m->blocks)
        return attn_fail(err, ATTN_ERR_NOMEM, "out of memory for %d blocks", cfg->n_layers);
    attn_param_list_init(&m->params);
    s = build(m, err);
    if (s == ATTN_OK) s = attn_param_list_alloc(&m->params, err);
    if (s == ATTN_OK && rng) {
        if (attn_gpt_config_init_kind(cfg) == ATTN_GPT_INIT_BOOK)
            draw_book(m, rng);
        else
            draw_gpt2(m, rng);
    }
    if (s != ATTN_OK) attn_gpt_free(m);
    return s;
}

/* The modules own nothing (their tensors are the arena's views). */
void attn_gpt_free(attn_gpt *m) {
    free(m->blocks);
    attn_param_list_free(&m->params);
    attn_bf16_gemm_free(m->bf16);
    memset(m, 0, sizeof *m);
}

static void use_engine(attn_gpt *m, attn_bf16_gemm *g) {
    for (int i = 0; i < m->cfg.n_layers; i++)
        attn_block_use_engine(&m->blocks[i], g);
    m->out_head.bf16 = g;
}

attn_status attn_gpt_set_precision(attn_gpt *m, attn_precision precision, attn_error *err) {
    attn_status s = attn_precision_check(precision, err);
    if (s != ATTN_OK) return s;
    if (precision == m->precision) return ATTN_OK;
    attn_bf16_gemm *g = NULL;
    if (precision == ATTN_PRECISION_BF16 && (s = attn_bf16_gemm_create(&g, err)) != ATTN_OK)
        return s;
    /* The weights' bf16 copies: one block of the arena's layout. */
    if (g && m->params.values &&
        (s = attn_bf16_gemm_use_block(g, m->params.values, m->params.values_numel, err))) {
        attn_bf16_gemm_free(g);
        return s;
    }
    use_engine(m, g);
    attn_bf16_gemm_free(m->bf16);
    m->bf16 = g;
    m->precision = precision;
    return ATTN_OK;
}

attn_status attn_gpt_set_trainable(attn_gpt *m, const char *prefix, int trainable,
                                   attn_error *err) {
    if (!prefix) return attn_fail(err, ATTN_ERR_INVALID_ARG, "set_trainable: no name prefix");
    return attn_param_list_set_trainable(&m->params, prefix, trainable, err);
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
 * of C, vocab V, L layers, ff the feed-forward's scratch width. */
typedef struct acts_sizes {
    size_t N, C, V, L, ff;
    size_t logit_rows, d_logit_rows; /* N and N; lean: a chunk's rows and none */
} acts_sizes;

/* The lean head's chunks: a multiple of the cross-entropy's row block,
 * so that its loss adds up exactly as the plain path's. */
#define HEAD_ROWS ATTN_GPT_HEAD_ROWS
#define HEAD_DW_ROWS ATTN_GPT_HEAD_DW_ROWS
_Static_assert(HEAD_DW_ROWS % HEAD_ROWS == 0, "the head's dW rows hold whole chunks");

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
                          (size_t)c->vocab_size,
                          (size_t)c->n_layers,
                          attn_feedforward_scratch(&m->blocks[0].ff),
                          lean ? (N < HEAD_ROWS ? N : HEAD_ROWS) : N,
                          lean ? 0 : N};
    a->lean = lean;
    a->B = B;
    a->T = T;
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

/* ---------------------------------------------------------------- forward */

static attn_status check_tokens(const attn_gpt *m, const int32_t *v, int B, int T, const char *what,
                                attn_error *err) {
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            const int32_t id = v[(size_t)b * (size_t)T + (size_t)t];
            if (id < 0 || id >= m->cfg.vocab_size)
                return attn_fail(err, ATTN_ERR_INVALID_ARG,
                                 "%s %ld at (batch %d, position %d) is outside [0, vocab_size %d)",
                                 what, (long)id, b, t, m->cfg.vocab_size);
        }
    return ATTN_OK;
}

static attn_status check_call(const attn_gpt *m, int B, int T, const attn_gpt_acts *a,
                              attn_error *err) {
    if (T > m->cfg.context_length)
        return attn_fail(err, ATTN_ERR_SHAPE, "sequence length %d exceeds context_length %d", T,
                         m->cfg.context_length);
    if (!a || B != a->B || T != a->T || a->n_layers != m->cfg.n_layers)
        return attn_fail(err, ATTN_ERR_SHAPE,
                         "activations were made for (B %d, T %d), not (B %d, T %d)", a ? a->B : 0,
                         a ? a->T : 0, B, T);
    return ATTN_OK;
}

static attn_status lean_needs_targets(attn_error *err) {
    return attn_fail(err, ATTN_ERR_INVALID_ARG,
                     "lean activations (attn_gpt_acts_init_lean) keep no logits: a forward "
                     "through them needs targets (it gives the loss)");
}

/* Row r of x += pos_emb[pos0 + r % T]. */
static void add_pos(const attn_gpt *m, float *x, long r, int T, int pos0) {
    const size_t C = (size_t)m->cfg.emb_dim, t = (size_t)pos0 + (size_t)r % (size_t)T;
    float *row = x + (size_t)r * C;
    const float *pe = m->pos_emb.weight + t * C;
    for (size_t k = 0; k < C; k++)
        row[k] += pe[k];
}

void attn_gpt_embed(const attn_gpt *m, const int32_t *ids, size_t N, int T, int pos0, float *x) {
    attn_embedding_forward(&m->tok_emb, ids, x, N);
    if (!m->pos_emb.weight) return; /* pos_emb none */
    const long rows = (long)N;
    /* Not even a one-thread region for a generated token. */
    if (N * (size_t)m->cfg.emb_dim < ATTN_PAR_MIN) {
        for (long r = 0; r < rows; r++)
            add_pos(m, x, r, T, pos0);
        return;
    }
#pragma omp parallel for schedule(static)
    for (long r = 0; r < rows; r++)
        add_pos(m, x, r, T, pos0);
}

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

/* The lean head over the N rows of a->lnf, HEAD_ROWS at a time in
 * a->logits: the loss, added up as attn_cross_entropy_forward adds it, and
 * with grads each chunk's dlogits written over its logits, then fed to the
 * head's two backward products (a->d_ln's rows, out_head's gradient). On
 * the bf16 engine the chunks' dlogits are kept in bf16 (the rounding the
 * products use anyway) and both products made once per HEAD_DW_ROWS rows:
 * the weight gradient's (V, C) fp32 sum is read and written once per
 * product (a quarter of the step's traffic at GPT-2's B4 T64 otherwise),
 * and the input gradient's product runs faster on more rows. */
static float head_chunks(attn_gpt *m, attn_gpt_acts *a, size_t N, int grads, float loss_scale,
                         int *stopped) {
    const size_t C = (size_t)m->cfg.emb_dim, V = (size_t)m->cfg.vocab_size;
    const int L = m->cfg.n_layers, stages = forward_stages(m, a, N, grads);
    const size_t dw_rows = N < HEAD_DW_ROWS ? N : HEAD_DW_ROWS;
    attn_linear *head = &m->out_head;
    const int keep16 =
        grads && head->bf16 && !head->has_bias &&
        (a->d_logits16 || (a->d_logits16 = malloc(dw_rows * V * sizeof(uint16_t))) != NULL);
    double total = 0.0;
    if (grads) memset(a->d_ln, 0, N * C * sizeof(float));
    size_t k0 = 0; /* first row whose dlogits wait in d_logits16 */
    for (size_t r0 = 0; r0 < N; r0 += HEAD_ROWS) {
        const size_t n = N - r0 < HEAD_ROWS ? N - r0 : HEAD_ROWS;
        attn_linear_forward(head, a->lnf + r0 * C, a->logits, n);
        attn_cross_entropy_accumulate(a->logits, a->targets + r0, a->lse + r0, n, V, &total);
        for (size_t r = 0; r < n; r++)
            a->target_logit[r0 + r] = a->logits[r * V + (size_t)a->targets[r0 + r]];
        if (!grads && r0 + n < N && a->poll &&
            a->poll(a->poll_user, L + (int)(r0 / HEAD_ROWS) + 1, stages)) {
            *stopped = 1;
            return NAN;
        }
        if (!grads) continue;
        attn_cross_entropy_backward_inplace(a->logits, a->targets + r0, a->lse + r0,
                                            loss_scale / (float)N, n, V);
        if (!keep16) {
            attn_linear_backward(head, a->lnf + r0 * C, a->logits, a->d_ln + r0 * C, n);
            continue;
        }
        attn_gemm_round((int)n, (int)V, a->logits, a->d_logits16 + (r0 - k0) * V);
        if (r0 + n - k0 == dw_rows || r0 + n == N) {
            const int rows = (int)(r0 + n - k0);
            attn_gemm_input_grad_dy16(head->bf16, 0, rows, (int)C, (int)V, a->d_logits16,
                                      head->weight, 1.0f, a->d_ln + k0 * C);
            if (head->grad_weight) /* else frozen */
                attn_gemm_weight_grad_dy16(head->bf16, 0, rows, (int)C, (int)V, a->lnf + k0 * C,
                                           a->d_logits16, attn_linear_grad_beta(head),
                                           head->grad_weight);
            k0 = r0 + n;
        }
    }
    return (float)(total / (double)N);
}

/* Everything after ids/targets are copied and checked; grad_scale non-NULL
 * (lean activations): the head's backward too, at that loss scale. */
static attn_status forward_core(attn_gpt *m, int B, int T, const attn_forward_mode *mode,
                                attn_gpt_acts *a, const float *grad_scale, float *loss,
                                attn_error *err) {
    const attn_gpt_config *c = &m->cfg;
    const size_t N = (size_t)B * (size_t)T, C = (size_t)c->emb_dim, V = (size_t)c->vocab_size;
    const attn_block_shape shape = {B, T, c->drop_rate};
    /* Each weight rounded to bf16 once for this forward and its backward. */
    attn_bf16_gemm_begin_pass(m->bf16);

    float *x = a->blocks[0].x_in;
    attn_gpt_embed(m, a->ids, N, T, 0, x);
    int dropped = attn_dropout_forward_inplace(x, a->keep_emb, c->drop_rate, mode, N * C);
    const int stages = forward_stages(m, a, N, grad_scale != NULL);
    for (int l = 0; l < c->n_layers; l++) {
        float *x_out = l + 1 < c->n_layers ? a->blocks[l + 1].x_in : a->x_final;
        attn_status s =
            attn_block_forward(&m->blocks[l], &a->blocks[l], &shape, mode, x_out, &dropped, err);
        if (s != ATTN_OK) return s;
        if (a->poll && a->poll(a->poll_user, l + 1, stages)) return abandoned(a, err);
    }
    a->dropout_used = dropped;
    attn_layernorm_forward(&m->final_norm, a->x_final, a->lnf, a->lnf_mean, a->lnf_rstd, N);
    a->loss = NAN;
    if (a->lean) {
        int stopped = 0;
        a->loss =
            head_chunks(m, a, N, grad_scale != NULL, grad_scale ? *grad_scale : 0.0f, &stopped);
        if (stopped) return abandoned(a, err);
    } else {
        attn_linear_forward(&m->out_head, a->lnf, a->logits, N);
        if (a->has_targets) {
            a->loss = attn_cross_entropy_forward(a->logits, a->targets, a->lse, N, V);
            for (size_t r = 0; r < N; r++)
                a->target_logit[r] = a->logits[r * V + (size_t)a->targets[r]];
        }
    }
    if (loss) *loss = a->loss;
    return ATTN_OK;
}

attn_status attn_gpt_forward(attn_gpt *m, const int32_t *ids, const int32_t *targets, int B, int T,
                             const attn_forward_mode *mode, attn_gpt_acts *a, float *loss,
                             attn_error *err) {
    attn_status s = check_call(m, B, T, a, err);
    if (s == ATTN_OK && a->lean && !targets) s = lean_needs_targets(err);
    if (s == ATTN_OK) s = check_tokens(m, ids, B, T, "token id", err);
    if (s == ATTN_OK && targets) s = check_tokens(m, targets, B, T, "target", err);
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

static attn_status copy_i64(const attn_gpt *m, const int64_t *src, int32_t *dst, int B, int T,
                            const char *what, attn_error *err) {
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            const size_t i = (size_t)b * (size_t)T + (size_t)t;
            if (src[i] < 0 || src[i] >= m->cfg.vocab_size)
                return attn_fail(err, ATTN_ERR_INVALID_ARG,
                                 "%s %lld at (batch %d, position %d) is outside [0, vocab_size %d)",
                                 what, (long long)src[i], b, t, m->cfg.vocab_size);
            dst[i] = (int32_t)src[i];
        }
    return ATTN_OK;
}

attn_status attn_gpt_forward_i64(attn_gpt *m, const int64_t *ids, const int64_t *targets, int B,
                                 int T, const attn_forward_mode *mode, attn_gpt_acts *a,
                                 float *loss, attn_error *err) {
    attn_status s = check_call(m, B, T, a, err);
    if (s == ATTN_OK && a->lean && !targets) s = lean_needs_targets(err);
    if (s != ATTN_OK) return s;
    a->has_targets = 0;
    s = copy_i64(m, ids, a->ids, B, T, "token id", err);
    if (s == ATTN_OK && targets) s = copy_i64(m, targets, a->targets, B, T, "target", err);
    if (s != ATTN_OK) return s;
    a->has_targets = targets != NULL;
    s = forward_core(m, B, T, mode, a, NULL, loss, err);
    if (s != ATTN_OK) a->has_targets = 0;
    return s;
}

/* --------------------------------------------------------------- backward */

/* The backward below the head: a->d_ln holds d(loss)/d(final_norm's output). */
static attn_status body_backward(attn_gpt *m, attn_gpt_acts *a, attn_error *err) {
    const attn_gpt_config *c = &m->cfg;
    const int B = a->B, T = a->T;
    const size_t N = (size_t)B * (size_t)T, C = (size_t)c->emb_dim;
    const size_t NC = N * C;
    const double p = c->drop_rate;
    const int dropped = a->dropout_used;
    memset(a->d_resid, 0, NC * sizeof(float));
    attn_layernorm_backward(&m->final_norm, a->x_final, a->lnf_mean, a->lnf_rstd, a->d_ln,
                            a->d_resid, N);

    /* d_resid holds d(loss)/d(residual stream) on the way down. */
    const attn_block_shape shape = {B, T, p};
    const attn_block_grads grads = {a->d_resid, a->d_tmp, a->d_ln, a->d_hidden};
    for (int l = c->n_layers - 1; l >= 0; l--) {
        attn_status s =
            attn_block_backward(&m->blocks[l], &a->blocks[l], &shape, dropped, &grads, err);
        if (s != ATTN_OK) return s;
    }
    /* drop_emb, then the two embedding tables. */
    if (dropped) {
        const float scale = attn_dropout_scale(p);
        for (size_t i = 0; i < NC; i++)
            a->d_resid[i] = a->keep_emb[i] ? a->d_resid[i] * scale : 0.0f;
    }
    attn_embedding_backward(&m->tok_emb, a->ids, a->d_resid, N);
    for (size_t b = 0; m->pos_emb.grad_weight && b < (size_t)B; b++)
        for (size_t t = 0; t < (size_t)T; t++) {
            float *g = m->pos_emb.grad_weight + t * C;
            const float *d = a->d_resid + (b * (size_t)T + t) * C;
            for (size_t k = 0; k < C; k++)
                g[k] += d[k];
        }
    return ATTN_OK;
}

static attn_status backward_state(const attn_gpt *m, const attn_gpt_acts *a, attn_error *err) {
    if (!a || a->n_layers != m->cfg.n_layers || !a->blocks)
        return attn_fail(err, ATTN_ERR_STATE, "backward needs the activations of a forward pass");
    if (!a->has_targets)
        return attn_fail(err, ATTN_ERR_STATE,
                         "backward needs a forward pass with targets (no loss to differentiate)");
    return ATTN_OK;
}

static attn_status backward(attn_gpt *m, attn_gpt_acts *a, float loss_scale, attn_error *err) {
    attn_status s = backward_state(m, a, err);
    if (s != ATTN_OK) return s;
    const size_t N = (size_t)a->B * (size_t)a->T, V = (size_t)m->cfg.vocab_size;
    if (a->lean) { /* each chunk's logits again (attn_gpt_forward_backward does not) */
        int unpolled;
        head_chunks(m, a, N, 1, loss_scale, &unpolled);
    } else {
        memset(a->d_logits, 0, N * V * sizeof(float)); /* every backward accumulates */
        attn_cross_entropy_backward(a->logits, a->targets, a->lse, loss_scale, a->d_logits, N, V);
        memset(a->d_ln, 0, N * (size_t)m->cfg.emb_dim * sizeof(float));
        attn_linear_backward(&m->out_head, a->lnf, a->d_logits, a->d_ln, N);
    }
    return body_backward(m, a, err);
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
    if (!a || a->n_layers != m->cfg.n_layers || !a->blocks)
        return attn_fail(err, ATTN_ERR_STATE, "backward needs the activations of a forward pass");
    if (a->lean || !d_logits)
        return attn_fail(err, ATTN_ERR_INVALID_ARG,
                         "backward from the logits' gradient needs plain activations "
                         "(attn_gpt_acts_init) and d_logits");
    const size_t N = (size_t)a->B * (size_t)a->T;
    memset(a->d_ln, 0, N * (size_t)m->cfg.emb_dim * sizeof(float));
    attn_linear_backward(&m->out_head, a->lnf, d_logits, a->d_ln, N);
    return body_backward(m, a, err);
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
    if (s == ATTN_OK) s = check_tokens(m, ids, B, T, "token id", err);
    if (s == ATTN_OK) s = check_tokens(m, targets, B, T, "target", err);
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
