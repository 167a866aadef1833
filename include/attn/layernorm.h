/* attn/layernorm.h — the book's LayerNorm (chapter 4.2), and RMSNorm: the
 * GPT's two norms (config key "norm"), one struct, one switch (kind).
 *
 * Over the last dim of x (N, C):
 *   LayerNorm: mean, biased variance (unbiased=False),
 *     y = scale * (x - mean) / sqrt(var + eps) + shift,   eps = 1e-5;
 *     parameters "scale" (ones) and "shift" (zeros), both (C).
 *   RMSNorm (Zhang & Sennrich 2019, Llama's): no mean, no shift,
 *     y = scale * x / sqrt(mean(x^2) + eps),              eps = 1e-5;
 *     parameter "scale" (ones), (C). */
#ifndef ATTN_LAYERNORM_H
#define ATTN_LAYERNORM_H

#include <stddef.h>

#include "attn/param.h"
#include "attn/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define ATTN_LAYERNORM_EPS 1e-5f

/* Which norm (the values are the config's: 0 is the book's). */
typedef enum attn_norm_kind { ATTN_NORM_LAYERNORM = 0, ATTN_NORM_RMSNORM } attn_norm_kind;

typedef struct attn_layernorm {
    int C;
    float eps;
    float *scale, *shift;           /* (C); shift (and its grad) unused by RMSNorm */
    float *grad_scale, *grad_shift; /* (C) */
    attn_norm_kind kind;
    int views; /* 1: the tensors are views (attn_norm_init_view) */
} attn_layernorm;

/* scale = 1, shift = 0, grads zero. C <= 0 -> ATTN_ERR_INVALID_ARG. */
attn_status attn_layernorm_init(attn_layernorm *ln, int C, attn_error *err);
/* The same for either kind (attn_layernorm_init is kind LAYERNORM). */
attn_status attn_norm_init(attn_layernorm *ln, int C, attn_norm_kind kind, attn_error *err);
/* The same without memory of its own (a model's, attn/param.h): the
 * tensors are views the owner's arena fills (attn_layernorm_params, then
 * attn_param_list_alloc: scale 1, shift 0); freeing leaves them. */
attn_status attn_norm_init_view(attn_layernorm *ln, int C, attn_norm_kind kind, attn_error *err);
void attn_layernorm_free(attn_layernorm *ln);
/* Adds "<prefix>scale", "<prefix>shift" (RMSNorm: "<prefix>scale" only). */
attn_status attn_layernorm_params(attn_layernorm *ln, const char *prefix, attn_param_list *list,
                                  attn_error *err);

/* y (N, C); saves mean and rstd = 1/sqrt(var + eps) per row (N) for backward
 * (either may be NULL when no backward follows; RMSNorm: mean 0, rstd =
 * 1/sqrt(mean(x^2) + eps)). y may not alias x. */
void attn_layernorm_forward(const attn_layernorm *ln, const float *x, float *y, float *mean,
                            float *rstd, size_t N);

/* The backward rule (every attn backward; docs/library.md#conventions):
 * it adds (+=) into dx and into the parameter gradients, never overwrites;
 * the caller zeroes them first. */

/* Accumulates grad_scale, grad_shift (LayerNorm) and dx (N, C) += ... (dx
 * may be NULL). */
void attn_layernorm_backward(attn_layernorm *ln, const float *x, const float *mean,
                             const float *rstd, const float *dy, float *dx, size_t N);

#ifdef __cplusplus
}
#endif
#endif
