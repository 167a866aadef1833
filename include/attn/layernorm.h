/* attn/layernorm.h — the book's LayerNorm (chapter 4.2).
 *
 * Over the last dim of x (N, C): mean, biased variance (unbiased=False),
 *   y = scale * (x - mean) / sqrt(var + eps) + shift,   eps = 1e-5.
 * Parameters "scale" (ones) and "shift" (zeros), both (C). */
#ifndef ATTN_LAYERNORM_H
#define ATTN_LAYERNORM_H

#include <stddef.h>

#include "attn/param.h"
#include "attn/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define ATTN_LAYERNORM_EPS 1e-5f

typedef struct attn_layernorm {
    int C;
    float eps;
    float *scale, *shift;           /* (C) */
    float *grad_scale, *grad_shift; /* (C) */
} attn_layernorm;

/* scale = 1, shift = 0, grads zero. C <= 0 -> ATTN_ERR_INVALID_ARG. */
attn_status attn_layernorm_init(attn_layernorm *ln, int C, attn_error *err);
void attn_layernorm_free(attn_layernorm *ln);
/* Adds "<prefix>scale", "<prefix>shift". */
attn_status attn_layernorm_params(attn_layernorm *ln, const char *prefix, attn_param_list *list,
                                  attn_error *err);

/* y (N, C); saves mean and rstd = 1/sqrt(var + eps) per row (N) for backward
 * (either may be NULL when no backward follows). y may not alias x. */
void attn_layernorm_forward(const attn_layernorm *ln, const float *x, float *y, float *mean,
                            float *rstd, size_t N);

/* Accumulates grad_scale, grad_shift and dx (N, C) += ... (dx may be NULL). */
void attn_layernorm_backward(attn_layernorm *ln, const float *x, const float *mean,
                             const float *rstd, const float *dy, float *dx, size_t N);

#ifdef __cplusplus
}
#endif
#endif
