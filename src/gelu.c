/* The book's tanh-form GELU (see attn/gelu.h). */
#include "attn/gelu.h"

#include <math.h>

/* sqrt(2 / pi) as the book computes it: torch.sqrt(torch.tensor(2.0 / pi)) in float32. */
#define GELU_K 0.7978845608028654f
#define GELU_A 0.044715f

void attn_gelu_forward(const float *x, float *y, size_t n) {
#pragma omp parallel for schedule(static) if (n >= 65536)
    for (size_t i = 0; i < n; i++) {
        const float v = x[i];
        y[i] = 0.5f * v * (1.0f + tanhf(GELU_K * (v + GELU_A * (v * v * v))));
    }
}

static inline float gelu_grad(float v) {
    const float t = tanhf(GELU_K * (v + GELU_A * (v * v * v)));
    /* d/dv [0.5 v (1 + t)] = 0.5 (1 + t) + 0.5 v (1 - t^2) K (1 + 3 A v^2) */
    return 0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * GELU_K * (1.0f + 3.0f * GELU_A * v * v);
}

void attn_gelu_backward(const float *x, const float *dy, float *dx, size_t n) {
#pragma omp parallel for schedule(static) if (n >= 65536)
    for (size_t i = 0; i < n; i++)
        dx[i] += gelu_grad(x[i]) * dy[i];
}

void attn_gelu_backward_inplace(const float *x, float *d, size_t n) {
#pragma omp parallel for schedule(static) if (n >= 65536)
    for (size_t i = 0; i < n; i++)
        d[i] *= gelu_grad(x[i]);
}
