/* Double-precision reference forms of the GPT layers, for finite-difference
 * gradient checks (tests/test_gpt_layers.c, tests/test_gpt.c,
 * tests/test_seed004_attention.c). Plain loops, written from the book's
 * definitions, sharing no code with src/. */
#ifndef ATTN_TEST_GPT_REF_H
#define ATTN_TEST_GPT_REF_H

#include <stddef.h>
#include <stdint.h>

#include "attn/gpt.h"

/* y (N, C) = LayerNorm(x) with eps 1e-5, biased variance. */
void gref_layernorm(const double *x, const double *scale, const double *shift, double *y, size_t N,
                    size_t C);
double gref_gelu(double x);
/* y (N, out) = x W^T + b (b may be NULL). */
void gref_linear(const double *x, const double *W, const double *b, double *y, size_t N, size_t in,
                 size_t out);
/* mean of logsumexp(row) - row[target] over the rows whose target is not
 * -100 (PyTorch's ignore_index; none: NaN). */
double gref_cross_entropy(const double *logits, const int32_t *targets, size_t N, size_t V);
/* Causal scaled-dot-product attention of H heads over (B, T, H*hd) projections,
 * out (B, T, H*hd). */
void gref_causal_attention(const double *Q, const double *K, const double *V, double *out, size_t B,
                           size_t T, size_t H, size_t hd);

/* The whole GPT (eval mode) in double with parameters pd[i] for
 * attn_gpt_params(m)->items[i]; logits (B*T*V, V the head's width) may be
 * NULL; returns the loss when targets != NULL, else 0. A head of its own
 * width and bias, and LoRA adapters (the book's LinearWithLoRA names, alpha
 * (x A) B added), are read from the table. */
double gref_gpt_forward(const attn_gpt *m, double *const *pd, const int32_t *ids,
                        const int32_t *targets, size_t B, size_t T, double *logits);

/* Double copies of every parameter of a list (free with gref_params_free). */
double **gref_params_copy(const attn_param_list *list);
void gref_params_free(double **pd, const attn_param_list *list);

/* Fill n floats with a deterministic pseudo-random pattern in [-a, a). */
void gref_fill(float *x, size_t n, uint32_t seed, float a);

#endif
