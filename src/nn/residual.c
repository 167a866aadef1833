/* Dropout + residual add (see attn/residual.h). */
#include "attn/residual.h"

#include "base/parallel.h"

int attn_dropout_active(const attn_forward_mode *mode, double p) {
    /* PyTorch's CPU dropout draws nothing when p == 0 or in eval mode. */
    return mode && mode->training && p > 0.0;
}

int attn_residual_dropout_forward(const float *f, const float *shortcut, float *out, uint8_t *keep,
                                  double p, const attn_forward_mode *mode, size_t n) {
    if (!attn_dropout_active(mode, p)) {
#pragma omp parallel for schedule(static) if (n >= ATTN_PAR_MIN)
        for (size_t i = 0; i < n; i++)
            out[i] = f[i] + shortcut[i];
        return 0;
    }
    attn_dropout_mask(mode->rng, mode->stream, p, keep, n);
    const float scale = attn_dropout_scale(p);
#pragma omp parallel for schedule(static) if (n >= ATTN_PAR_MIN)
    for (size_t i = 0; i < n; i++)
        out[i] = (keep[i] ? f[i] * scale : 0.0f) + shortcut[i];
    return 1;
}

void attn_residual_dropout_backward(const float *dout, const uint8_t *keep, double p, int dropped,
                                    float *df, size_t n) {
    if (!dropped) {
#pragma omp parallel for schedule(static) if (n >= ATTN_PAR_MIN)
        for (size_t i = 0; i < n; i++)
            df[i] += dout[i];
        return;
    }
    attn_dropout_backward(dout, keep, p, df, n);
}

int attn_dropout_forward_inplace(float *x, uint8_t *keep, double p, const attn_forward_mode *mode,
                                 size_t n) {
    if (!attn_dropout_active(mode, p)) return 0;
    attn_dropout_mask(mode->rng, mode->stream, p, keep, n);
    attn_dropout_apply(x, keep, p, x, n);
    return 1;
}

void attn_dropout_backward_inplace(float *dx, const uint8_t *keep, double p, size_t n) {
    attn_dropout_apply(dx, keep, p, dx, n);
}

void attn_add(float *x, const float *y, size_t n) {
    for (size_t i = 0; i < n; i++)
        x[i] += y[i];
}
