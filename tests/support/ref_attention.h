/* ref_attention.h — an independent double-precision reference forward of every
 * chapter-3 module, written as plain loops straight from the book's PyTorch
 * code (not from the library's kernels). Used by the gradient checks. */
#ifndef ATTN_TEST_REF_ATTENTION_H
#define ATTN_TEST_REF_ATTENTION_H

#include <stddef.h>
#include <stdint.h>

#include "attn/module.h"

/* params: one double array per entry of attn_module_params(m), same order and
 * layout (state_dict order and PyTorch shapes). keep: dropout keep masks,
 * one per attention cache (CausalAttention/MHA: keep[0] of (B, heads, T, T);
 * wrapper: keep[h] of (B, T, T) for head h), or NULL for no dropout; kept
 * weights are scaled by dropout_scale. x (B, T, d_in) -> y (B, T, out_dim). */
void ref_module_forward(const attn_module_config *cfg, const double *const *params,
                        const uint8_t *const *keep, double dropout_scale, const double *x, int B,
                        int T, double *y);

#endif
