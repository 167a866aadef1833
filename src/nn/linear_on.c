/* A Linear's forward and backward on an engine's op or on the kernel (see
 * linear_on.h). */
#include "linear_on.h"

#include "attn/engine_ops.h"

void attn_linear_forward_on(const attn_engine *e, const attn_linear *l, const float *x,
                            uint16_t *x16, float *y, size_t N) {
    if (e && x16)
        e->ops->linear_forward_x16(e, l, x, x16, y, N);
    else if (e)
        e->ops->linear_forward(e, l, x, y, N);
    else if (x16 && x)
        attn_linear_forward_keep(l, x, y, N, x16);
    else if (x16)
        attn_linear_forward_x16(l, x16, y, N);
    else
        attn_linear_forward(l, x, y, N);
}

void attn_linear_backward_on(const attn_engine *e, attn_linear *l, const float *x,
                             const uint16_t *x16, const float *dy, float *dx, float beta_x,
                             size_t N) {
    if (e && x16)
        e->ops->linear_backward_x16(e, l, x16, dy, dx, beta_x, N);
    else if (e)
        e->ops->linear_backward(e, l, x, dy, dx, N);
    else if (x16)
        attn_linear_backward_x16(l, x16, dy, dx, beta_x, N);
    else
        attn_linear_backward(l, x, dy, dx, N);
}
