/* attn/seed004_attention.h — seed 004's own attention modules.
 *
 * AttentionHead(config): x (B, T, embedding_dim) -> (B, T, head_size)
 *   Q = Q_weights(x), K = K_weights(x), V = V_weights(x)    Linear(E, hs, use_bias)
 *   scores = Q K^T, masked_fill(tril(ones) == 0, -inf)       (B, T, T)
 *   scores = scores / sqrt(head_size)      (scaling AFTER masking, as seed 004)
 *   weights = dropout(softmax(scores))     (dropout on the attention weights)
 *   out = weights V
 * Parameters: "Q_weights.weight", ["Q_weights.bias"], "K_weights.*",
 * "V_weights.*", drawn in that order as nn.Linear does.
 *
 * MultiHeadAttention(config): heads_num AttentionHeads on the same x,
 * concatenated on the last dim (B, T, heads_num * head_size = E), then
 * linear = Linear(E, E) (always with bias, as seed 004's nn.Linear default),
 * then dropout on the output. Parameters "heads.<i>.Q_weights.weight", ...,
 * "linear.weight", "linear.bias". Training-mode dropout masks are drawn head
 * by head (attention weights), then the output mask — PyTorch's order. */
#ifndef ATTN_SEED004_ATTENTION_H
#define ATTN_SEED004_ATTENTION_H

#include <stdint.h>

#include "attn/dropout.h"
#include "attn/linear.h"
#include "attn/param.h"
#include "attn/rng.h"
#include "attn/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct attn_seed004_head {
    int embedding_dim, head_size, context_size, use_bias;
    double dropout_rate;
    attn_linear Q_weights, K_weights, V_weights;
} attn_seed004_head;

typedef struct attn_seed004_head_cache {
    int B, T, head_size;
    float *Q, *K, *V; /* (B, T, head_size) */
    float *weights;   /* (B, T, T) softmax output */
    float *dropped;   /* (B, T, T) after dropout */
    uint8_t *keep;    /* (B, T, T) */
    int dropout_applied;
    float *d_weights;    /* max(B, 2) (T, T) backward scratch */
    float *dQ, *dK, *dV; /* (B, T, head_size) backward scratch */
} attn_seed004_head_cache;

/* Fails with a message when a dim <= 0 or dropout_rate outside [0, 1).
 * rng != NULL: PyTorch-compatible init; NULL: zeros. */
attn_status attn_seed004_head_init(attn_seed004_head *h, int embedding_dim, int head_size,
                                   int context_size, double dropout_rate, int use_bias,
                                   attn_rng *rng, attn_error *err);
void attn_seed004_head_free(attn_seed004_head *h);
attn_status attn_seed004_head_params(attn_seed004_head *h, const char *prefix,
                                     attn_param_list *list, attn_error *err);
attn_status attn_seed004_head_cache_init(attn_seed004_head_cache *c, const attn_seed004_head *h,
                                         int B, int T, attn_error *err);
void attn_seed004_head_cache_free(attn_seed004_head_cache *c);

/* out (B, T, head_size). Fails when T > context_size or the cache shape
 * differs. mode NULL = eval (no dropout). */
attn_status attn_seed004_head_forward(const attn_seed004_head *h, const float *x, int B, int T,
                                      float *out, const attn_forward_mode *mode,
                                      attn_seed004_head_cache *cache, attn_error *err);
/* The backward rule (every attn backward; docs/library.md#conventions):
 * it adds (+=) into dx and into the parameter gradients, never overwrites;
 * the caller zeroes them first. */

/* Accumulates parameter grads and dx (B, T, E) += ... (dx may be NULL). */
attn_status attn_seed004_head_backward(attn_seed004_head *h, const float *x, int B, int T,
                                       const float *d_out, float *dx,
                                       attn_seed004_head_cache *cache, attn_error *err);

typedef struct attn_seed004_mha {
    int embedding_dim, heads_num, head_size, context_size, use_bias;
    double dropout_rate;
    attn_seed004_head *heads; /* heads_num */
    attn_linear linear;       /* Linear(E, E) with bias */
} attn_seed004_mha;

typedef struct attn_seed004_mha_cache {
    int B, T, n_heads;
    attn_seed004_head_cache *heads;
    float *head_out; /* (B, T, head_size) scratch */
    float *concat;   /* (B, T, E) heads concatenated */
    float *proj;     /* (B, T, E) linear output before dropout */
    uint8_t *keep;   /* (B, T, E) output dropout mask */
    int dropout_applied;
    float *d_proj;   /* (B, T, E) backward scratch */
    float *d_concat; /* (B, T, E) backward scratch */
    float *d_head;   /* (B, T, head_size) backward scratch */
} attn_seed004_mha_cache;

/* Fails when embedding_dim % heads_num != 0 (head_size = E / heads_num). */
attn_status attn_seed004_mha_init(attn_seed004_mha *m, int embedding_dim, int heads_num,
                                  int context_size, double dropout_rate, int use_bias,
                                  attn_rng *rng, attn_error *err);
void attn_seed004_mha_free(attn_seed004_mha *m);
attn_status attn_seed004_mha_params(attn_seed004_mha *m, const char *prefix, attn_param_list *list,
                                    attn_error *err);
attn_status attn_seed004_mha_cache_init(attn_seed004_mha_cache *c, const attn_seed004_mha *m, int B,
                                        int T, attn_error *err);
void attn_seed004_mha_cache_free(attn_seed004_mha_cache *c);
/* out (B, T, E). mode NULL = eval (no dropout); dx may be NULL in the
 * backward. */
attn_status attn_seed004_mha_forward(const attn_seed004_mha *m, const float *x, int B, int T,
                                     float *out, const attn_forward_mode *mode,
                                     attn_seed004_mha_cache *cache, attn_error *err);
attn_status attn_seed004_mha_backward(attn_seed004_mha *m, const float *x, int B, int T,
                                      const float *d_out, float *dx, attn_seed004_mha_cache *cache,
                                      attn_error *err);

#ifdef __cplusplus
}
#endif
#endif
