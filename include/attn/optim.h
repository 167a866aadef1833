/* attn/optim.h — AdamW, warmup + cosine learning rate, gradient clipping.
 *
 * AdamW follows torch.optim.AdamW (PyTorch 1.13, single-tensor path) step
 * for step, in float32 with the scalar factors computed in double as Python
 * does:
 *     p *= 1 - lr * weight_decay            (decoupled decay; decay params only)
 *     m  = beta1 * m + (1 - beta1) * g
 *     v  = beta2 * v + (1 - beta2) * g * g
 *     p -= lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
 * Which parameters decay: those with ndim >= 2 (Linear weights and the
 * embedding tables) — nanoGPT's grouping; biases and LayerNorm scale/shift
 * (1-D) do not. attn_adamw_init records the choice per parameter.
 *
 * The optimizer keeps one m and one v per parameter element in a flat array
 * in parameter-list order (m[0..total), v[0..total)), plus the step count; a
 * checkpoint saves those and attn_adamw_load puts them back. */
#ifndef ATTN_OPTIM_H
#define ATTN_OPTIM_H

#include <stddef.h>
#include <stdint.h>

#include "attn/gemm.h"
#include "attn/param.h"
#include "attn/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct attn_adamw_config {
    double beta1, beta2; /* 0.9, 0.999 in PyTorch; nanoGPT's char model uses 0.99 */
    double eps;          /* 1e-8 */
    double weight_decay; /* 0.01 in PyTorch; nanoGPT 0.1 */
} attn_adamw_config;

struct attn_adamw_piece; /* internal: a run of one tensor's values */

/* The moments are one block each, the table's tensors one after the other
 * (parameter i at offset[i]: the checkpoint's and the CUDA engine's
 * layout); a step is one parallel pass over pieces of at most 16384 values
 * of one tensor each, cut once at init. */
typedef struct attn_adamw {
    attn_adamw_config cfg;
    int n_params;
    size_t total;   /* floats over all parameters */
    size_t *offset; /* n_params offsets into m / v */
    uint8_t *decay; /* n_params flags: 1 = weight decay applies */
    float *m, *v;   /* first and second moments, total each */
    int64_t step;   /* steps taken */
    int n_pieces;
    struct attn_adamw_piece *pieces; /* n_pieces, in the table's order */
    uint16_t **w16;                  /* n_params: a step's bf16 copies (attn_adamw_step_bf16) */
} attn_adamw;

/* PyTorch's defaults: betas (0.9, 0.999), eps 1e-8, weight decay 0.01. */
attn_adamw_config attn_adamw_defaults(void);

/* Zero moments for the parameters of list (only their shapes are read). */
attn_status attn_adamw_init(attn_adamw *opt, const attn_param_list *params,
                            const attn_adamw_config *cfg, attn_error *err);
void attn_adamw_free(attn_adamw *opt);

/* One update of every parameter with a gradient, at learning rate lr.
 * params must be the list given to init (same order and sizes). */
attn_status attn_adamw_step(attn_adamw *opt, const attn_param_list *params, double lr,
                            attn_error *err);

/* attn_adamw_step reading each gradient times grad_scale (in float32, as
 * torch's grad.mul_(clip_coef) then the step would): clipping folded into
 * the update's one pass. The gradients are left as they were. */
attn_status attn_adamw_step_scaled(attn_adamw *opt, const attn_param_list *params, double lr,
                                   float grad_scale, attn_error *err);

/* attn_adamw_step_scaled that also rounds to bf16, as it writes them, the
 * weights the bf16 engine bf16 holds copies of (those its current pass
 * used), into those copies, and carries them to the engine's next pass
 * (attn_bf16_gemm_carry_copies): the next forward does not read the fp32
 * weights again to round them. The same weights as attn_adamw_step_scaled,
 * bit for bit; bf16 NULL is that call. No other write to a weight may come
 * between this and the next pass (the trainer's loop guarantees it). */
attn_status attn_adamw_step_bf16(attn_adamw *opt, const attn_param_list *params, double lr,
                                 float grad_scale, attn_bf16_gemm *bf16, attn_error *err);

/* One tensor of torch.optim.AdamW's parameter groups: the parameter, its
 * gradient and its state (exp_avg, exp_avg_sq), numel floats each. */
typedef struct attn_adamw_tensor {
    float *param;
    const float *grad;
    float *exp_avg, *exp_avg_sq;
    size_t numel;
} attn_adamw_tensor;

/* torch.optim.AdamW.step for one parameter group whose state lives outside
 * attn (attn.torch.AdamW): the same update as attn_adamw_step, one pass
 * over each tensor (PyTorch 1.13's single-tensor path makes nine), at
 * step number `step` (>= 1, the state's step after its increment); weight
 * decay on every tensor, as torch applies a group's. */
attn_status attn_adamw_step_tensors(const attn_adamw_tensor *t, int count,
                                    const attn_adamw_config *cfg, double lr, int64_t step,
                                    attn_error *err);

/* torch.nn.utils.clip_grad_norm_(params, max_norm): returns the global L2
 * norm of all gradients (computed in double) and, when it exceeds max_norm,
 * scales every gradient by max_norm / (norm + 1e-6). max_norm <= 0 only
 * measures. */
double attn_clip_grad_norm(const attn_param_list *params, double max_norm);

/* The global L2 norm of all gradients (summed in double in a fixed order:
 * each tensor's squares in parts cut by its size alone, the tensors in the
 * table's order; the same at every thread count, whether the gradients lie
 * in an arena's block or apart), without changing them. */
double attn_grad_norm(const attn_param_list *params);

/* torch's clip factor for a norm: max_norm / (norm + 1e-6) in float32 when
 * norm > max_norm > 0, else exactly 1. */
float attn_clip_coef(double norm, double max_norm);

/* Learning rate at 0-based iteration it (nanoGPT's get_lr): linear warmup
 * lr_max * (it + 1) / (warmup + 1) for it < warmup, then cosine from lr_max
 * down to lr_min at it = decay_steps, lr_min after. */
double attn_lr_cosine(int64_t it, int64_t warmup, int64_t decay_steps, double lr_max,
                      double lr_min);

/* The learning-rate schedule after warmup_steps of linear warm-up. */
typedef enum attn_lr_schedule {
    ATTN_LR_COSINE = 0, /* nanoGPT's cosine from learning_rate to min_lr */
    ATTN_LR_WSD = 1     /* warmup-stable-decay: learning_rate until the last
                           ATTN_WSD_COOLDOWN of the run, then linear to min_lr */
} attn_lr_schedule;

#define ATTN_WSD_COOLDOWN 0.4 /* the share of the run WSD spends decaying */

#ifdef __cplusplus
}
#endif
#endif
