/* attn/multi_head_attention.h — multi-head attention (chapter 3.6).
 *
 * MultiHeadAttentionWrapper: num_heads independent CausalAttention(d_in,
 * d_out) heads run in turn on the same x; outputs concatenated on the last
 * dim -> (B, T, num_heads * d_out). Parameters "heads.<i>.W_query.weight"...
 *
 * MultiHeadAttention (weight splits): W_query/W_key/W_value are
 * Linear(d_in, d_out, qkv_bias); the d_out columns are split into num_heads
 * heads of head_dim = d_out / num_heads; causal softmax(QK^T / sqrt(head_dim))
 * per head, dropout on the (B, heads, T, T) weights, heads concatenated, then
 * out_proj = Linear(d_out, d_out) with bias. Parameters are created in the
 * book's order: W_query, W_key, W_value, out_proj. */
#ifndef ATTN_MULTI_HEAD_ATTENTION_H
#define ATTN_MULTI_HEAD_ATTENTION_H

#include <stddef.h>
#include <stdint.h>

#include "attn/attention.h"
#include "attn/causal_attention.h"
#include "attn/flash_attention.h"
#include "attn/layernorm.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct attn_mha_wrapper {
    int d_in, d_out, context_length, num_heads, qkv_bias;
    double dropout;
    attn_causal_attention *heads; /* num_heads of them */
} attn_mha_wrapper;

/* Per-head caches plus the per-head output scratch. */
typedef struct attn_mha_wrapper_cache {
    int B, T, num_heads, d_out;
    attn_attention_cache *heads;
    float *head_out; /* (B, T, d_out) scratch for one head's output */
} attn_mha_wrapper_cache;

attn_status attn_mha_wrapper_init(attn_mha_wrapper *m, int d_in, int d_out, int context_length,
                                  double dropout, int num_heads, int qkv_bias, attn_rng *rng,
                                  attn_error *err);
void attn_mha_wrapper_free(attn_mha_wrapper *m);
attn_status attn_mha_wrapper_params(attn_mha_wrapper *m, const char *prefix, attn_param_list *list,
                                    attn_error *err);
attn_status attn_mha_wrapper_cache_init(attn_mha_wrapper_cache *cache, const attn_mha_wrapper *m,
                                        int B, int T, attn_error *err);
void attn_mha_wrapper_cache_free(attn_mha_wrapper_cache *cache);
/* out is (B, T, num_heads * d_out). Dropout masks are drawn head by head;
 * mode NULL = eval (no dropout). dx may be NULL in the backward. */
attn_status attn_mha_wrapper_forward(const attn_mha_wrapper *m, const float *x, int B, int T,
                                     float *out, const attn_forward_mode *mode,
                                     attn_mha_wrapper_cache *cache, attn_error *err);
/* The backward rule (every attn backward; docs/library.md#conventions):
 * it adds (+=) into dx and into the parameter gradients, never overwrites;
 * the caller zeroes them first. */

attn_status attn_mha_wrapper_backward(attn_mha_wrapper *m, const float *x, int B, int T,
                                      const float *d_out, float *dx, attn_mha_wrapper_cache *cache,
                                      attn_error *err);

/* Which implementation attn_mha_forward/backward run. Both give the same
 * results (to float rounding) and draw the same dropout masks.
 *   FUSED (the default, 0): Q, K, V from one sgemm against a packed
 *     (3 d_out, d_in) copy of W_query/W_key/W_value, then the fused tiled
 *     attention kernel (attn/flash_attention.h): no (B, heads, T, T) tensor,
 *     memory O(B T d_out), threaded and vectorised.
 *   REFERENCE: the chapter's step-by-step computation with the (B, heads,
 *     T, T) weights kept in the cache (attn chapter3 prints from it). */
typedef enum attn_mha_path { ATTN_MHA_FUSED = 0, ATTN_MHA_REFERENCE = 1 } attn_mha_path;

typedef struct attn_mha {
    int d_in, d_out, context_length, num_heads, head_dim, qkv_bias;
    double dropout;
    attn_linear W_query, W_key, W_value, out_proj; /* W_key, W_value: (kv_dim, d_in) */
    float *w_qkv, *grad_w_qkv; /* a module made alone: the storage of W_query, W_key,
                                  W_value's weights (and gradients), adjacent: (d_out +
                                  2 kv_dim, d_in); NULL in a model's arena, which keeps them
                                  adjacent itself (one group) */
    attn_attention_spec spec;  /* the call's variants (attn/attention.h); the book's by default */
    int kv_dim;                /* kv_heads * head_dim (d_out unless grouped-query) */
    attn_layernorm q_norm, k_norm; /* spec.qk_norm: RMSNorm(head_dim) each, "q_norm.scale" */
    attn_mha_path path;            /* ATTN_MHA_FUSED after attn_mha_init */
    attn_flash_options flash;      /* threads / SIMD / tiles of the fused path (zeros: defaults) */
    struct attn_bf16_gemm *bf16;   /* NULL: fp32; else the fused path's projections and its
                                      attention kernel in bf16 (attn/gemm.h,
                                      attn_flash_options.precision; borrowed; set out_proj.bf16
                                      alike) */
} attn_mha;

/* Fails with a message when d_out % num_heads != 0, any dim <= 0 or dropout
 * is outside [0, 1). */
attn_status attn_mha_init(attn_mha *m, int d_in, int d_out, int context_length, double dropout,
                          int num_heads, int qkv_bias, attn_rng *rng, attn_error *err);
/* The same with the variants of spec (heads, kv_heads, window, positions,
 * qk_norm, softcap, dropout; head_dim is d_out / heads): W_key and W_value
 * are Linear(d_in, kv_heads * head_dim), drawn in the same order; with
 * qk_norm, "q_norm.scale" and "k_norm.scale" (head_dim, ones) follow
 * out_proj. Per head: q, k = rope(qk_norm(x W^T)), then attn/attention.h's
 * scores. Every variant runs on either path: on FUSED, QK-norm, RoPE and the
 * K/V head mapping around the kernel, the window, soft-cap and ALiBi in its
 * score tile (attn_flash_problem). */
attn_status attn_mha_init_spec(attn_mha *m, int d_in, int d_out, int context_length,
                               const attn_attention_spec *spec, int qkv_bias, attn_rng *rng,
                               attn_error *err);
/* The same without memory of its own (a model's, attn/param.h): every
 * tensor is a view the owner's arena fills (attn_mha_params, then
 * attn_param_list_alloc, which keeps the three projections' weights
 * adjacent); no draws. */
attn_status attn_mha_init_view(attn_mha *m, int d_in, int d_out, int context_length,
                               const attn_attention_spec *spec, int qkv_bias, attn_error *err);
void attn_mha_free(attn_mha *m);
attn_status attn_mha_params(attn_mha *m, const char *prefix, attn_param_list *list,
                            attn_error *err);
/* A cache for m's path: FUSED allocates only O(B T d_out) buffers (the fused
 * state is added on first use); REFERENCE is attn_attention_cache_init(cache,
 * B, T, num_heads, d_out). A cache from attn_attention_cache_init works with
 * either path. */
attn_status attn_mha_cache_init(attn_attention_cache *cache, const attn_mha *m, int B, int T,
                                attn_error *err);
/* A cache for either path: attn_attention_cache_init's, plus what m's
 * variants need (QK-norm's saved inputs). */
attn_status attn_mha_cache_init_any(attn_attention_cache *cache, const attn_mha *m, int B, int T,
                                    attn_error *err);
/* cache: attn_mha_cache_init, or attn_attention_cache_init(cache, B, T,
 * num_heads, d_out). mode NULL = eval (no dropout); dx may be NULL in the
 * backward. */
attn_status attn_mha_forward(const attn_mha *m, const float *x, int B, int T, float *out,
                             const attn_forward_mode *mode, attn_attention_cache *cache,
                             attn_error *err);
attn_status attn_mha_backward(attn_mha *m, const float *x, int B, int T, const float *d_out,
                              float *dx, const attn_attention_cache *cache, attn_error *err);
/* The same two on engine e's ops (attn/engine_ops.h), the fused path only
 * (else ATTN_ERR_INVALID_ARG): the packed Q, K, V product (linear_qkv), the
 * attention core (attention_core), out_proj through the linear op (on a
 * bf16 engine from the context rounded once and kept: linear_x16). The
 * module's own fused calls above run the same sequence on the kernels. The
 * model's blocks call these. */
struct attn_engine;
attn_status attn_mha_forward_ops(const struct attn_engine *e, const attn_mha *m, const float *x,
                                 int B, int T, float *out, const attn_forward_mode *mode,
                                 attn_attention_cache *cache, attn_error *err);
attn_status attn_mha_backward_ops(const struct attn_engine *e, attn_mha *m, const float *x, int B,
                                  int T, const float *d_out, float *dx,
                                  const attn_attention_cache *cache, attn_error *err);

/* One token at a time (generation, eval mode: no dropout), against a KV cache
 * of the keys and values of earlier positions:
 *   x (d_in) at position pos -> out (d_out);
 *   k_cache, v_cache (context_length, kv_dim): rows 0..pos-1 hold the earlier
 *   tokens' keys and values; the step writes row pos and attends over 0..pos.
 *   With a window W (spec.window) the cache is a ring of rows
 *   attn_mha_step_rows(m) = min(W, context_length): position p lives in row
 *   p % rows, so pos may run past context_length at constant memory (keys
 *   are rotated at their own position before they are stored).
 * Equals row pos of attn_mha_forward on the same prefix to a few ulps (the
 * matrix-vector products sum in their own order). The step splits its rows
 * and heads with OpenMP worksharing: call it from every thread of a team, or
 * from one thread outside any team. */
typedef struct attn_mha_step_buf {
    const uint16_t *w_bf16; /* NULL: the fp32 weights; else attn_mha_bf16_copy's values */
    float *q;               /* (d_out) scratch */
    float *ctx;             /* (d_out) scratch: the heads' outputs before out_proj */
    float *scores;          /* (num_heads, context_length) scratch */
} attn_mha_step_buf;

void attn_mha_step(const attn_mha *m, const float *x, float *k_cache, float *v_cache, int pos,
                   float *out, const attn_mha_step_buf *buf);

/* n sequences at the same position at once: x (n, d_in), out (n, d_out);
 * sequence s's cache at k_cache + s kv_stride (and v_cache's); buf's q and
 * ctx are (n, d_out), scores (n, num_heads, context_length). Each weight row
 * is read once for the n; each sequence equals attn_mha_step on it alone,
 * bit for bit. */
void attn_mha_step_batch(const attn_mha *m, int n, const float *x, float *k_cache, float *v_cache,
                         size_t kv_stride, int pos, float *out, const attn_mha_step_buf *buf);

/* The step's attention core, attn_mha_step_batch without its products:
 * q (n, d_out) holds the n tokens' queries and the caches' row
 * pos % attn_mha_step_rows(m) their keys and values (as W_query, W_key,
 * W_value wrote them); the variant's QK-norm and RoPE are applied to q and
 * that key row, then ctx (n, d_out) = each head's softmax(q K^T) V over the
 * keys the query sees; scores (n, num_heads, context_length) scratch.
 * Work-shared as attn_mha_step_batch. */
void attn_mha_step_core(const attn_mha *m, int n, float *q, float *k_cache, float *v_cache,
                        size_t kv_stride, int pos, float *ctx, float *scores);

/* Rows of the step's KV cache: context_length, or the window when smaller. */
int attn_mha_step_rows(const attn_mha *m);

/* bf16 weights for attn_mha_step (half the bytes a token streams; sums stay
 * fp32): W_query, W_key, W_value (d_out, d_in) then out_proj (d_out, d_out),
 * rounded to nearest even, back to back. Copy again after the weights change. */
size_t attn_mha_bf16_numel(const attn_mha *m);
void attn_mha_bf16_copy(const attn_mha *m, uint16_t *w);

#ifdef __cplusplus
}
#endif
#endif
