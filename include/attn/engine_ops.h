/* attn/engine_ops.h — an engine as a table of ops (issue 48, item 3).
 *
 * A model's forward and backward (src/model/gpt_pass.c, gpt_block.c), its
 * one-token KV step (gpt_kv.c) and the trainer's update call the ops of one
 * engine and no kernel directly, as
 * ggml's backends fill one interface and say which ops they run
 * (supports_op). An op is named and shaped as attn's kernel for it is (the
 * header in brackets), with the engine first:
 *
 *   linear          y = x W^T + b, its backward; on the bf16 engine also
 *                   from a kept bf16 input (x16)         (attn/linear.h)
 *   layernorm       either norm, forward and backward    (attn/layernorm.h)
 *   linear_qkv      MultiHeadAttention's Q, K and V product: the three
 *                   Linears as one packed (d_out + 2 kv_dim, d_in) weight
 *                                                        (attn/multi_head_attention.h)
 *   attention_core  the one attention core (attn/attention.h's description)
 *                   on the packed q | k | v rows; out_proj is a linear op
 *                   (attn_mha_forward_ops)
 *   activation      the feed-forward's: GELU, ReLU^2, SwiGLU
 *                                                        (attn/activation.h)
 *   embedding       the table lookup and its backward    (attn/embedding.h)
 *   cross_entropy   the loss; its gradient, fused with the softmax's
 *                                                        (attn/cross_entropy.h)
 *   adamw           one update of a parameter table      (attn/optim.h)
 *   memory          the engine's buffers
 *   dropout_add     the residual: dropout(f) + shortcut  (attn/residual.h)
 *   dropout         drop_emb's, in place                 (attn/residual.h)
 *   add_positions   the learned position table's add     (attn/embedding.h)
 *   the step        generation's one token per sequence against the KV
 *                   cache: add, linear_step (GEMV), attention_step,
 *                   activation_step, and layernorm      (attn/gpt.h)
 *
 * The fp32 CPU engine (attn/engine_cpu.h) is the reference: every other
 * engine's op is held to it (tests/test_engine_ops.c runs every op each
 * engine supports on random inputs against it, with a tolerance per
 * precision). The backward rule of each op is its kernel's (every attn
 * backward; docs/library.md#conventions): it adds (+=) into dx and into the
 * parameter gradients, never overwrites; the caller zeroes them first. The
 * CUDA plug-in is not behind this table yet (docs/engines.md). */
#ifndef ATTN_ENGINE_OPS_H
#define ATTN_ENGINE_OPS_H

#include <stddef.h>
#include <stdint.h>

#include "attn/engine.h"
#include "attn/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The modules the ops take, as their kernels do (declared in their headers). */
struct attn_linear;
struct attn_layernorm;
struct attn_mha;
struct attn_attention_cache;
struct attn_forward_mode;
struct attn_feedforward;
struct attn_embedding;
struct attn_adamw;
struct attn_param_list;
struct attn_attention_spec;

/* The ops an engine may run; supports_op is asked for one of them. */
typedef enum attn_op {
    ATTN_OP_LINEAR = 0,
    ATTN_OP_LINEAR_BACKWARD,
    ATTN_OP_LINEAR_BACKWARD_DY16, /* the backward from a bf16 dy (the lean head's) */
    ATTN_OP_LINEAR_X16,           /* from a bf16 input it keeps or is given */
    ATTN_OP_LINEAR_BACKWARD_X16,  /* the backward from that kept input */
    ATTN_OP_LINEAR_QKV,           /* the attention's packed Q, K, V product */
    ATTN_OP_LINEAR_QKV_BACKWARD,
    ATTN_OP_LAYERNORM,
    ATTN_OP_LAYERNORM_BACKWARD,
    ATTN_OP_ATTENTION_CORE, /* the one attention core on the packed qkv */
    ATTN_OP_ATTENTION_CORE_BACKWARD,
    ATTN_OP_ACTIVATION,
    ATTN_OP_ACTIVATION_BACKWARD,
    ATTN_OP_EMBEDDING,
    ATTN_OP_EMBEDDING_BACKWARD,
    ATTN_OP_CROSS_ENTROPY,          /* the loss (and each row's log-sum-exp)     */
    ATTN_OP_CROSS_ENTROPY_BACKWARD, /* dlogits += its gradient                   */
    ATTN_OP_CROSS_ENTROPY_GRAD,     /* dlogits = its gradient (may be the logits) */
    ATTN_OP_ADAMW,
    ATTN_OP_DROPOUT_ADD,            /* out = dropout(f) + shortcut (the residual) */
    ATTN_OP_DROPOUT_ADD_BACKWARD,   /* df += its gradient                          */
    ATTN_OP_DROPOUT,                /* x = dropout(x), in place (drop_emb)         */
    ATTN_OP_DROPOUT_BACKWARD,       /* dx = its gradient, in place                 */
    ATTN_OP_ADD_POSITIONS,          /* x's rows += a position table's rows         */
    ATTN_OP_ADD_POSITIONS_BACKWARD, /* the table's gradient += x's rows            */
    ATTN_OP_ADD,                    /* x += y (the step's residual)                */
    ATTN_OP_LINEAR_STEP,            /* the step's y = x W^T + b, n rows (GEMV)     */
    ATTN_OP_ATTENTION_STEP,         /* the step's query against the KV cache       */
    ATTN_OP_ACTIVATION_STEP,        /* the step's feed-forward activation          */
    ATTN_OP_COUNT
} attn_op;

/* "linear", "layernorm_backward", ...: the op's name (NULL out of range). */
const char *attn_op_name(attn_op op);

/* What supports_op is asked: the op, the precision of its arithmetic (the
 * bf16 engine's products: BF16; every op it runs in fp32: FP32; the
 * step's linear_step: its weight copy's, on either CPU engine) and its
 * shape: rows (N, or B T; the step's: the sequences), in and out (a
 * linear's features; a norm's C in in; linear_qkv's d_in and packed width
 * d_out + 2 kv_dim; attention_core's d_in, d_out; the
 * cross-entropy's V in out; the step's activation: C, fc1's out), and the
 * attention's description (NULL: the book's). */
typedef struct attn_op_desc {
    attn_op op;
    attn_precision precision;
    size_t rows;
    int in, out;
    const struct attn_attention_spec *spec;
} attn_op_desc;

typedef struct attn_engine attn_engine;

/* The table an engine fills. Every entry is set; supports_op says which
 * calls the engine runs, and a caller asks it before the first call (an
 * entry called for an op the engine refuses computes nothing meaningful). */
typedef struct attn_engine_ops {
    /* ATTN_OK when e runs d; else ATTN_ERR_INVALID_ARG naming the engine,
     * the op and why. */
    attn_status (*supports_op)(const attn_engine *e, const attn_op_desc *d, attn_error *err);

    /* ---- memory: the engine's buffers (64-byte aligned; NULL when out of
     * memory) and its state. */
    void *(*alloc)(const attn_engine *e, size_t bytes);
    void (*free)(const attn_engine *e, void *p);
    void (*release)(attn_engine *e); /* what the engine owns (attn_engine_free) */
    /* A forward and its backward begin (the bf16 engine rounds each weight
     * once a pass). */
    void (*begin_pass)(const attn_engine *e);

    /* ---- linear (attn/linear.h): y (N, out) = x W^T + b; the backward
     * accumulates the weight's and bias's gradients and dx (N, in) += dy W
     * (dx may be NULL). backward_dy16: from dy already rounded to bf16
     * (dy16 (N, out), attn_gemm_round's), dx (N, in) += dy16 W and the
     * weight's gradient; the layer has no bias and no adapter. round: dy16
     * = bf16(dy). */
    void (*linear_forward)(const attn_engine *e, const struct attn_linear *l, const float *x,
                           float *y, size_t N);
    void (*linear_backward)(const attn_engine *e, struct attn_linear *l, const float *x,
                            const float *dy, float *dx, size_t N);
    void (*linear_round)(const attn_engine *e, size_t N, int out, const float *dy, uint16_t *dy16);
    void (*linear_backward_dy16)(const attn_engine *e, struct attn_linear *l, const float *x,
                                 const uint16_t *dy16, float *dx, size_t N);
    /* The bf16 engine's kept input (attn_linear_forward_keep, _x16): the
     * forward with x rounds x to bf16 into x16 (N, in) and keeps it, without
     * x (NULL) it reads x16 as given; the backward multiplies by that x16,
     * dx = beta_x dx + dy W (beta_x 0 or 1: 0 writes dx) and the parameter
     * gradients as linear_backward. The layer has no adapter (an adapter
     * reads the fp32 x). */
    void (*linear_forward_x16)(const attn_engine *e, const struct attn_linear *l, const float *x,
                               uint16_t *x16, float *y, size_t N);
    void (*linear_backward_x16)(const attn_engine *e, struct attn_linear *l, const uint16_t *x16,
                                const float *dy, float *dx, float beta_x, size_t N);

    /* ---- layernorm (attn/layernorm.h) */
    void (*layernorm_forward)(const attn_engine *e, const struct attn_layernorm *ln, const float *x,
                              float *y, float *mean, float *rstd, size_t N);
    void (*layernorm_backward)(const attn_engine *e, struct attn_layernorm *ln, const float *x,
                               const float *mean, const float *rstd, const float *dy, float *dx,
                               size_t N);

    /* ---- linear_qkv, attention_core: MultiHeadAttention's fused path
     * (attn/multi_head_attention.h) in two ops, its state in cache (B T
     * rows of the packed width d3 = d_out + 2 kv_dim, made by linear_qkv's
     * forward). linear_qkv: the cache's qkv (B T, d3) = x W^T + b over
     * [W_query; W_key; W_value] in one product (the three adjacent weights,
     * else a packed copy), each adapter added into its columns; on the bf16
     * engine x rounded once and kept. Its backward, from the cache's d_qkv:
     * each weight's gradient (a frozen one's skipped) and bias's, and dx
     * (B T, d_in) += d_qkv W (dx may be NULL). attention_core: QK-norm,
     * RoPE, the grouped K/V repeat, the dropout draw (mode's) and the flash
     * kernel on the cache's qkv -> cache->context (B T, d_out); its backward
     * from cache->d_context writes the cache's d_qkv. */
    attn_status (*linear_qkv_forward)(const attn_engine *e, const struct attn_mha *m,
                                      const float *x, int B, int T,
                                      struct attn_attention_cache *cache, attn_error *err);
    attn_status (*linear_qkv_backward)(const attn_engine *e, struct attn_mha *m, const float *x,
                                       float *dx, int B, int T,
                                       const struct attn_attention_cache *cache, attn_error *err);
    attn_status (*attention_core_forward)(const attn_engine *e, const struct attn_mha *m, int B,
                                          int T, const struct attn_forward_mode *mode,
                                          struct attn_attention_cache *cache, attn_error *err);
    attn_status (*attention_core_backward)(const attn_engine *e, struct attn_mha *m, int B, int T,
                                           const struct attn_attention_cache *cache,
                                           attn_error *err);

    /* ---- activation (attn/activation.h, attn_act_forward; act an attn_act): x (N, width:
     * hidden, SwiGLU's 2 hidden) -> y (N, hidden), in fp32; y NULL: into
     * y16 rounded to bf16 instead (GELU only: the bf16 engine's input to the
     * next product). The backward: dx (N, width) += act'(x) dy; for GELU
     * and ReLU^2 dx may be dy (then dx = act'(x) dy, in place). */
    void (*activation_forward)(const attn_engine *e, int act, const float *x, float *y,
                               uint16_t *y16, size_t N, int hidden);
    void (*activation_backward)(const attn_engine *e, int act, const float *x, float *dy, float *dx,
                                size_t N, int hidden);

    /* ---- embedding (attn/embedding.h): out (N, dim) = weight[ids]; the
     * backward adds dout's rows into the table's gradient. */
    void (*embedding_forward)(const attn_engine *e, const struct attn_embedding *emb,
                              const int32_t *ids, float *out, size_t N);
    void (*embedding_backward)(const attn_engine *e, struct attn_embedding *emb, const int32_t *ids,
                               const float *dout, size_t N);

    /* ---- cross_entropy (attn/cross_entropy.h), logits (N, V): forward
     * adds the rows' losses into *total (attn_cross_entropy_accumulate:
     * the mean loss is *total / N from 0) and writes lse (N, may be NULL);
     * backward: dlogits += (softmax - onehot) dloss / N; grad: dlogits =
     * (softmax - onehot) scale (dlogits may be logits). */
    void (*cross_entropy_forward)(const attn_engine *e, const float *logits, const int32_t *targets,
                                  float *lse, size_t N, size_t V, double *total);
    void (*cross_entropy_backward)(const attn_engine *e, const float *logits,
                                   const int32_t *targets, const float *lse, float dloss,
                                   float *dlogits, size_t N, size_t V);
    void (*cross_entropy_grad)(const attn_engine *e, const float *logits, const int32_t *targets,
                               const float *lse, float scale, float *dlogits, size_t N, size_t V);

    /* ---- adamw (attn/optim.h): attn_adamw_step_scaled over params, the
     * gradients read times grad_scale; an engine with copies of the
     * weights (the bf16 engine) refreshes them as it writes the weights. */
    attn_status (*adamw_step)(const attn_engine *e, struct attn_adamw *opt,
                              const struct attn_param_list *params, double lr, float grad_scale,
                              attn_error *err);

    /* ---- dropout_add, dropout (attn/residual.h): with mode training and
     * p > 0 a mask is drawn into keep (n) from mode's stream (PyTorch's)
     * and they return 1, else keep is untouched and they return 0.
     * dropout_add: out = dropout(f) + shortcut (out may be shortcut); its
     * backward: df += dout, masked and scaled when dropped. dropout: x =
     * dropout(x); its backward in place, dx = keep ? dx / (1 - p) : 0. */
    int (*dropout_add_forward)(const attn_engine *e, const float *f, const float *shortcut,
                               float *out, uint8_t *keep, double p,
                               const struct attn_forward_mode *mode, size_t n);
    void (*dropout_add_backward)(const attn_engine *e, const float *dout, const uint8_t *keep,
                                 double p, int dropped, float *df, size_t n);
    int (*dropout_forward)(const attn_engine *e, float *x, uint8_t *keep, double p,
                           const struct attn_forward_mode *mode, size_t n);
    void (*dropout_backward)(const attn_engine *e, float *dx, const uint8_t *keep, double p,
                             size_t n);

    /* ---- add_positions (attn/embedding.h): x (N, dim) row r +=
     * table[pos0 + r % T]; the backward (pos0 0) adds dx's rows, in order,
     * into the table's gradient. */
    void (*add_positions_forward)(const attn_engine *e, const struct attn_embedding *table,
                                  float *x, size_t N, int T, int pos0);
    void (*add_positions_backward)(const attn_engine *e, struct attn_embedding *table,
                                   const float *dx, size_t N, int T);

    /* ---- the one-token step (generation, eval mode; attn/gpt.h's KV
     * cache): n sequences' tokens at position pos. The model runs a token
     * in ONE parallel region of its own team; these entries are called by
     * every thread of it and split their rows or heads with orphaned
     * `omp for` (ending in a barrier), add inside the model's `omp single`
     * (as layernorm_forward is, mean and rstd NULL). A product's weight is
     * the Linear's fp32 one (w16 NULL) or its bf16 copy w16 (out, in)
     * rounded to nearest even (attn_linear_bf16_copy), fp32 sums: the op's
     * precision is its copy's, asked when the KV cache is made.
     *   add: x += y, n elements, on the calling thread.
     *   linear_step: y row s (at y + s ldy) = x row s (at x + s ldx) W^T + b;
     *     wait 0: no barrier at the end, when the next op reads nothing this
     *     one writes, or (fc1, then activation_step over the same hidden
     *     width) only the rows each thread wrote: the engine splits y's rows
     *     and the activation's in the same static chunks. An engine may
     *     always wait.
     *   attention_step: attn_mha_step_core (attn/multi_head_attention.h):
     *     q (n, d_out) and the caches' rows at pos (sequence s's at
     *     s kv_stride) hold the tokens' queries, keys and values; ctx (n,
     *     d_out) = the heads' outputs; scores (n, heads, context_length).
     *   activation_step: attn_feedforward_act_step, hidden (n,
     *     fc1.out_features) in place, its rows split in linear_step's chunks. */
    void (*add)(const attn_engine *e, float *x, const float *y, size_t n);
    void (*linear_step)(const attn_engine *e, const struct attn_linear *l, const uint16_t *w16,
                        const float *x, size_t ldx, float *y, size_t ldy, int n, int wait);
    void (*attention_step)(const attn_engine *e, const struct attn_mha *m, int n, float *q,
                           float *k_cache, float *v_cache, size_t kv_stride, int pos, float *ctx,
                           float *scores);
    void (*activation_step)(const attn_engine *e, const struct attn_feedforward *ff, float *hidden,
                            int n);
} attn_engine_ops;

/* An engine: its name ("cpu-fp32", "cpu-bf16"), the precision of its
 * products, its table and its state. Made by the engine's own init
 * (attn_engine_cpu_init), freed with attn_engine_free. */
struct attn_engine {
    const char *name;
    attn_precision precision;
    const attn_engine_ops *ops;
    void *state;    /* the engine's (the CPU engine's: its bf16 GEMM engine, or NULL) */
    int owns_state; /* 1: attn_engine_free releases state */
};

/* e->ops->supports_op(e, d, err), after checking d's op is one of
 * attn_op's (else ATTN_ERR_INVALID_ARG). */
attn_status attn_engine_supports_op(const attn_engine *e, const attn_op_desc *d, attn_error *err);

/* The engine's buffers (e->ops->alloc / free); bytes 0 -> NULL. */
void *attn_engine_alloc(const attn_engine *e, size_t bytes);
void attn_engine_free_buffer(const attn_engine *e, void *p);

/* Releases what e owns (its ops' release) and clears e; NULL or a cleared
 * engine: nothing. */
void attn_engine_free(attn_engine *e);

#ifdef __cplusplus
}
#endif
#endif
