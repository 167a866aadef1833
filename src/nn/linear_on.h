/* Internal: a Linear's forward and backward on engine e's linear op, or
 * (e NULL: a module's own path) on its kernel (attn/linear.h), so that a
 * module's sequence of calls is written once for both. Not public API.
 *   forward: x16 NULL: y = x W^T + b; x16 and x: x rounded into x16 and
 *   kept (the _x16 op); x16 alone: from x16 as given.
 *   backward: x16 NULL: from x (dx += dy W); else from x16, dx = beta_x dx
 *   + dy W. */
#ifndef ATTN_NN_LINEAR_ON_H
#define ATTN_NN_LINEAR_ON_H

#include <stddef.h>
#include <stdint.h>

#include "attn/linear.h"

struct attn_engine;

void attn_linear_forward_on(const struct attn_engine *e, const attn_linear *l, const float *x,
                            uint16_t *x16, float *y, size_t N);
void attn_linear_backward_on(const struct attn_engine *e, attn_linear *l, const float *x,
                             const uint16_t *x16, const float *dy, float *dx, float beta_x,
                             size_t N);

#endif
