/* Softmax over the last dimension (see attn/softmax.h). */
#include "attn/softmax.h"

#include <math.h>

/* Same order of operations as PyTorch's CPU kernel: max, exp(x - max), sum,
 * then multiply by 1 / sum. */
void attn_softmax_forward(const float *x, float *y, size_t rows, size_t cols) {
    for (size_t r = 0; r < rows; r++) {
        const float *xr = x + r * cols;
        float *yr = y + r * cols;
        float mx = -INFINITY;
        for (size_t c = 0; c < cols; c++)
            if (xr[c] > mx) mx = xr[c];
        if (mx == -INFINITY) { /* fully masked row: zeros, not NaN */
            for (size_t c = 0; c < cols; c++)
                yr[c] = 0.0f;
            continue;
        }
        float sum = 0.0f;
        for (size_t c = 0; c < cols; c++) {
            yr[c] = expf(xr[c] - mx);
            sum += yr[c];
        }
        const float inv = 1.0f / sum;
        for (size_t c = 0; c < cols; c++)
            yr[c] *= inv;
    }
}

/* The chapter's exp(x) / sum(exp(x)): overflows for large scores, on purpose. */
void attn_softmax_naive(const float *x, float *y, size_t rows, size_t cols) {
    for (size_t r = 0; r < rows; r++) {
        const float *xr = x + r * cols;
        float *yr = y + r * cols;
        float sum = 0.0f;
        for (size_t c = 0; c < cols; c++)
            sum += expf(xr[c]);
        for (size_t c = 0; c < cols; c++)
            yr[c] = expf(xr[c]) / sum;
    }
}

void attn_softmax_backward(const float *y, const float *dy, float *dx, size_t rows, size_t cols) {
    for (size_t r = 0; r < rows; r++) {
        const float *yr = y + r * cols, *dyr = dy + r * cols;
        float *dxr = dx + r * cols;
        float dot = 0.0f;
        for (size_t c = 0; c < cols; c++)
            dot += dyr[c] * yr[c];
        for (size_t c = 0; c < cols; c++)
            dxr[c] += yr[c] * (dyr[c] - dot);
    }
}
