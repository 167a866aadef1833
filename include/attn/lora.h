/* attn/lora.h — a low-rank adapter on a Linear (LoRA), as the book's
 * appendix E writes it (LoRALayer, LinearWithLoRA):
 *
 *   y = linear(x) + alpha * (x A) B
 *
 * Shapes: x (N, in_features), A (in_features, rank), B (rank,
 * out_features), y (N, out_features): the book's layouts
 * (torch.empty(in_dim, rank), torch.zeros(rank, out_dim)), so its
 * state_dict tensors are these. alpha scales the product as the book's
 * LoRALayer.forward does; the LoRA paper's (and PEFT's) alpha / rank is
 * this alpha set to alpha / rank.
 *
 * Init (attn_lora_draw, with the model's draw): A as torch's
 * kaiming_uniform_(A, a=sqrt(5)), whose fan_in is the tensor's dim 1, the
 * rank: U(-1/sqrt(rank), 1/sqrt(rank)) in row-major order; B zeros, so an
 * adapted Linear starts as the Linear.
 *
 * Names: an adapted Linear lists (attn_linear_params) "<linear>.linear.weight",
 * "<linear>.linear.bias", then "<linear>.lora.A", "<linear>.lora.B":
 * LinearWithLoRA's state_dict, the table's rule (attn/param.h: the book's
 * names). A file of the plain model names the base weight "<linear>.weight".
 *
 * The adapter's products run in fp32 on every engine (rank is small next to
 * the Linear's sizes), ATTN_LORA_ROWS rows at a time through its own
 * scratch: nothing is allocated per call, and each product's shape is fixed,
 * so the bits are the same at every thread count (attn/gemm.h). */
#ifndef ATTN_LORA_H
#define ATTN_LORA_H

#include <stddef.h>

#include "attn/param.h"
#include "attn/rng.h"
#include "attn/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define ATTN_LORA_ROWS 64       /* rows of x a product takes at a time */
#define ATTN_LORA_MAX_RANK 4096 /* attn_lora_init's limit */

typedef struct attn_lora {
    int in_features, out_features, rank;
    float alpha;
    float *A, *B;           /* (in_features, rank), (rank, out_features) */
    float *grad_A, *grad_B; /* same shapes; NULL: frozen */
    float *scratch;         /* own: ATTN_LORA_ROWS x 2 rank floats (x A, then its gradient) */
    int views;              /* 1: A, B and their gradients are an arena's (attn_lora_init_view) */
} attn_lora;

/* An adapter with its own memory (A drawn as above when rng != NULL, else
 * zero; B zero; gradients zeroed). INVALID_ARG for a size < 1 or a rank
 * past ATTN_LORA_MAX_RANK. */
attn_status attn_lora_init(attn_lora *l, int in_features, int out_features, int rank, float alpha,
                           attn_rng *rng, attn_error *err);
/* The same without memory for A, B and their gradients (a model's arena:
 * attn_lora_params lists them, attn_param_list_alloc places them); its
 * scratch is still its own. */
attn_status attn_lora_init_view(attn_lora *l, int in_features, int out_features, int rank,
                                float alpha, attn_error *err);
void attn_lora_free(attn_lora *l);

/* A's draw: n values of kaiming_uniform_(a=sqrt(5)) with fan_in rank. */
void attn_lora_draw(attn_rng *rng, float *A, size_t n, int rank);

/* Add "<prefix>A" (role LORA_A) and "<prefix>B" (role LORA_B) to list. */
attn_status attn_lora_params(attn_lora *l, const char *prefix, attn_param_list *list,
                             attn_error *err);

/* y (N rows, ldy apart) += alpha (x A) B, x's rows ldx apart. */
void attn_lora_forward(const attn_lora *l, const float *x, size_t ldx, float *y, size_t ldy,
                       size_t N);

/* The backward rule (every attn backward; docs/library.md#conventions):
 * it adds (+=) into dx and into the parameter gradients, never overwrites.
 * grad_A += x^T (alpha dy B^T), grad_B += alpha (x A)^T dy (each skipped
 * when NULL) and, when dx != NULL, dx (N rows, lddx apart) += alpha dy B^T
 * A^T. x as the forward's. */
void attn_lora_backward(attn_lora *l, const float *x, size_t ldx, const float *dy, size_t ldy,
                        float *dx, size_t lddx, size_t N);

#ifdef __cplusplus
}
#endif
#endif
