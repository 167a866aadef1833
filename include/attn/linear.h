/* attn/linear.h — nn.Linear: y = x W^T + b.
 *
 * Shapes: x (N, in_features), W (out_features, in_features) as in PyTorch,
 * b (out_features), y (N, out_features). N is every leading dim flattened.
 *
 * A Linear may carry a low-rank adapter (attn/lora.h, the book's
 * LinearWithLoRA): y = x W^T + b + alpha (x A) B, its backward adding A's
 * and B's gradients; forward and backward run it, in fp32, from x.
 *
 * Initialisation reproduces torch.nn.Linear(in, out) after the same seed:
 * weight from U(-1/sqrt(in), 1/sqrt(in)) in row-major order, then the bias
 * from the same bound (kaiming_uniform_ with a = sqrt(5) reduces to this). */
#ifndef ATTN_LINEAR_H
#define ATTN_LINEAR_H

#include <stddef.h>
#include <stdint.h>

#include "attn/lora.h"
#include "attn/param.h"
#include "attn/rng.h"
#include "attn/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct attn_linear {
    int in_features;
    int out_features;
    int has_bias;
    float *weight;      /* (out_features, in_features) */
    float *bias;        /* (out_features) or NULL      */
    float *grad_weight; /* same shapes as the above    */
    float *grad_bias;
    struct attn_bf16_gemm *bf16; /* NULL: fp32 products (default); else bf16 products through
                                    this engine (attn/gemm.h; borrowed, set by the model) */
    int weight_given;            /* 1: weight and grad_weight are the owner's (init_into) */
    int views;                   /* 1: every buffer is a view (attn_linear_init_view) */
    int grad_unset;  /* 1: grad_weight holds no value yet (attn_param_list_zero_grad_deferred):
                        the next backward writes it instead of adding */
    attn_lora *lora; /* NULL, or the adapter it carries (borrowed: its owner's) */
} attn_linear;

/* Allocate parameters and zeroed gradients. With rng != NULL the weights are
 * drawn as torch.nn.Linear does; with rng == NULL they are zero. */
attn_status attn_linear_init(attn_linear *layer, int in_features, int out_features, int has_bias,
                             attn_rng *rng, attn_error *err);
/* The same with the weight and its gradient (out_features x in_features
 * floats each, zeroed) in the caller's storage, which must outlive the
 * layer and is not freed with it; NULL and NULL: attn_linear_init. A
 * module whose product covers several layers keeps their weights adjacent
 * (MultiHeadAttention's W_query, W_key, W_value: one QKV product, no
 * packing). */
attn_status attn_linear_init_into(attn_linear *layer, int in_features, int out_features,
                                  int has_bias, attn_rng *rng, float *weight, float *grad_weight,
                                  attn_error *err);
/* The same without memory of its own (a model's, attn/param.h): the
 * weight, bias and gradients stay NULL until the owner's table, made with
 * attn_linear_params, gets its arena (attn_param_list_alloc); freeing the
 * layer leaves them. */
attn_status attn_linear_init_view(attn_linear *layer, int in_features, int out_features,
                                  int has_bias, attn_error *err);
void attn_linear_free(attn_linear *layer);

/* torch.nn.Linear's draw of n values of its weight (is_bias 0:
 * kaiming_uniform_(a = sqrt(5)), that is U(-1/sqrt(in), 1/sqrt(in))) or of
 * its bias (U(-1/sqrt(in), 1/sqrt(in)) too), in_features in. */
void attn_linear_draw(attn_rng *rng, float *values, size_t n, int in_features, int is_bias);

/* Add "<prefix>weight" and, if present, "<prefix>bias" to list (viewed by
 * the layer's fields); the weight's gradient may be deferred (grad_unset).
 * A layer carrying an adapter (set lora before) lists LinearWithLoRA's
 * names: "<prefix>linear.weight", "<prefix>linear.bias", then the
 * adapter's "<prefix>lora.A", "<prefix>lora.B". */
attn_status attn_linear_params(attn_linear *layer, const char *prefix, attn_param_list *list,
                               attn_error *err);

/* y (N, out) = x (N, in) W^T + b. */
void attn_linear_forward(const attn_linear *layer, const float *x, float *y, size_t N);

/* The backward rule (every attn backward; docs/library.md#conventions):
 * it adds (+=) into dx and into the parameter gradients, never overwrites;
 * the caller zeroes them first. The one exception: a weight gradient
 * marked unset (grad_unset, by the trainer) is written. */

/* For a module writing a layer's weight gradient itself: the product's
 * beta for it, 0.0f when grad_unset (the mark then cleared), else 1.0f;
 * _settle zeroes an unset gradient before a caller adds into it. */
float attn_linear_grad_beta(attn_linear *layer);
void attn_linear_grad_settle(attn_linear *layer);

/* Accumulates (+=): grad_weight += dy^T x, grad_bias += sum_n dy, and, when
 * dx != NULL, dx (N, in) += dy W. A NULL gradient (a frozen tensor) is
 * skipped with its product. */
void attn_linear_backward(attn_linear *layer, const float *x, const float *dy, float *dx, size_t N);

/* The same pair on the bf16 engine (layer->bf16 not NULL) with the input
 * rounded to bf16 once, in the forward, and that copy x16 (N, in) kept for
 * the backward: the same products as from the fp32 x. For a layer without
 * an adapter (an adapter reads the fp32 x: a module keeping only x16 runs
 * an adapted layer through the fp32-input calls above). _forward_keep rounds
 * x into x16; _forward_x16 takes x16 as it is (made by the caller). The
 * parameter gradients accumulate as above; dx (N, in), when not NULL, is
 * dx = beta_x dx + dy W (beta_x 0 or 1; 0: written, not added to, for a
 * caller's own scratch). */
void attn_linear_forward_keep(const attn_linear *layer, const float *x, float *y, size_t N,
                              uint16_t *x16);
void attn_linear_forward_x16(const attn_linear *layer, const uint16_t *x16, float *y, size_t N);
void attn_linear_backward_x16(attn_linear *layer, const uint16_t *x16, const float *dy, float *dx,
                              float beta_x, size_t N);

#ifdef __cplusplus
}
#endif
#endif
