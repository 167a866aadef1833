/* attn/feedforward.h — the book's FeedForward (chapter 4.3):
 *   nn.Sequential(Linear(C, 4C), GELU(), Linear(4C, C))
 * x (N, C) -> y (N, C). Parameters "layers.0.weight" (4C, C),
 * "layers.0.bias" (4C), "layers.2.weight" (C, 4C), "layers.2.bias" (C),
 * drawn in that order as nn.Linear does.
 *
 * The activation is the config's "act" (attn/activation.h), the rest keeps
 * the book's shape, names and biases:
 *   gelu    (the book's)  Linear(C, 4C), GELU,  Linear(4C, C)
 *   relu2                 Linear(C, 4C), ReLU^2, Linear(4C, C)
 *   swiglu                Linear(C, 2H), SwiGLU, Linear(H, C), H = 8 ceil(C/3):
 *     layers.0's output row is [gate | value] (H each); H is Llama's 2/3 of
 *     4C rounded up to a multiple of 8, so the block keeps about the book's
 *     8 C^2 feed-forward weights (exactly for C divisible by 3: 2048 for
 *     C = 768). */
#ifndef ATTN_FEEDFORWARD_H
#define ATTN_FEEDFORWARD_H

#include <stddef.h>
#include <stdint.h>

#include "attn/activation.h"
#include "attn/linear.h"
#include "attn/param.h"
#include "attn/rng.h"
#include "attn/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct attn_feedforward {
    int C, hidden;   /* hidden = layers.2's input width: 4 C (swiglu: H) */
    attn_act act;    /* the activation between the two Linears */
    attn_linear fc1; /* layers.0: (hidden, C), swiglu (2 H, C) */
    attn_linear fc2; /* layers.2: (C, hidden) */
} attn_feedforward;

/* Saved activations for N rows. */
typedef struct attn_feedforward_cache {
    size_t N;
    float *h; /* (N, fc1.out_features) fc1 output (the activation's input) */
    float *g; /* (N, hidden) the activation's output (fc2 input) */
    /* The bf16 engine with GELU: the products' inputs in bf16, rounded once
     * in the forward and kept for the backward (allocated at the first such
     * forward): x16 (N, C) the layer's input (fc1's operand) and g16
     * (N, hidden) the activation's output, made in GELU's pass instead of
     * g (fc2's operand). g_in_bf16 says the last forward wrote them, not g. */
    uint16_t *x16, *g16;
    int g_in_bf16;
} attn_feedforward_cache;

/* hidden for emb_dim C and act: 4 C, or 8 ceil(C / 3) for swiglu. */
int attn_feedforward_hidden(int C, attn_act act);

/* The book's FeedForward (gelu); _act: with activation act. */
attn_status attn_feedforward_init(attn_feedforward *ff, int C, attn_rng *rng, attn_error *err);
attn_status attn_feedforward_init_act(attn_feedforward *ff, int C, attn_act act, attn_rng *rng,
                                      attn_error *err);
/* The same without memory of its own (a model's, attn/param.h): both
 * Linears are views (attn_linear_init_view) the owner's arena fills. */
attn_status attn_feedforward_init_view(attn_feedforward *ff, int C, attn_act act, attn_error *err);
void attn_feedforward_free(attn_feedforward *ff);
attn_status attn_feedforward_params(attn_feedforward *ff, const char *prefix, attn_param_list *list,
                                    attn_error *err);

attn_status attn_feedforward_cache_init(attn_feedforward_cache *cache, const attn_feedforward *ff,
                                        size_t N, attn_error *err);
void attn_feedforward_cache_free(attn_feedforward_cache *cache);

/* y (N, C); N must not exceed cache->N. */
void attn_feedforward_forward(const attn_feedforward *ff, const float *x, float *y, size_t N,
                              attn_feedforward_cache *cache);
/* The backward rule (every attn backward; docs/library.md#conventions):
 * it adds (+=) into dx and into the parameter gradients, never overwrites;
 * the caller zeroes them first. */

/* Accumulates parameter grads and dx (N, C) += ... (dx may be NULL).
 * d_hidden is (N, attn_feedforward_scratch(ff)) scratch, overwritten. */
void attn_feedforward_backward(attn_feedforward *ff, const float *x, const float *dy, float *dx,
                               size_t N, const attn_feedforward_cache *cache, float *d_hidden);
/* The same two on engine e's ops (attn/engine_ops.h): fc1 and fc2 through
 * its linear op (with the kept bf16 inputs on a bf16 engine), the
 * activation through its activation op; the module's own calls above run
 * the same sequence on the kernels. The model's blocks call these. */
struct attn_engine;
void attn_feedforward_forward_ops(const struct attn_engine *e, const attn_feedforward *ff,
                                  const float *x, float *y, size_t N,
                                  attn_feedforward_cache *cache);
void attn_feedforward_backward_ops(const struct attn_engine *e, attn_feedforward *ff,
                                   const float *x, const float *dy, float *dx, size_t N,
                                   const attn_feedforward_cache *cache, float *d_hidden);

/* Floats per row of backward's d_hidden: hidden (swiglu: 3 H, the
 * activation's input and output gradients). */
size_t attn_feedforward_scratch(const attn_feedforward *ff);

/* One row (generation): y (C) = forward of x (C), hidden (fc1.out_features) scratch,
 * through the matrix-vector kernels; w_bf16 NULL (the fp32 weights) or
 * attn_feedforward_bf16_copy's values. Equals a row of
 * attn_feedforward_forward to a few ulps. Splits its rows with OpenMP
 * worksharing: call it from every thread of a team, or from one thread
 * outside any team. */
void attn_feedforward_step(const attn_feedforward *ff, const uint16_t *w_bf16, const float *x,
                           float *hidden, float *y);

/* n rows at once (n sequences' tokens): x, y (n, C), hidden (n,
 * fc1.out_features); each weight row is read once for the n rows, and each
 * row equals attn_feedforward_step on it alone bit for bit. */
void attn_feedforward_step_batch(const attn_feedforward *ff, const uint16_t *w_bf16, int n,
                                 const float *x, float *hidden, float *y);

/* The step's activation alone, in place on hidden (n, fc1.out_features)
 * as fc1 wrote it (SwiGLU: each gate row's output over its first half),
 * work-shared as attn_feedforward_step_batch: fc1, this, fc2 is that
 * function bit for bit. */
void attn_feedforward_act_step(const attn_feedforward *ff, float *hidden, int n);

/* bf16 weights for the step: layers.0 then layers.2, rounded to nearest
 * even, back to back. */
size_t attn_feedforward_bf16_numel(const attn_feedforward *ff);
void attn_feedforward_bf16_copy(const attn_feedforward *ff, uint16_t *w);

#ifdef __cplusplus
}
#endif
#endif
