/* The chapter's building-block operations as plain loops (see attn/ops.h).
 * Deliberately simple: they are the reference the faster paths are tested
 * against. */
#include "attn/ops.h"

float attn_dot(const float *a, const float *b, size_t n) {
    float s = 0.0f;
    for (size_t i = 0; i < n; i++)
        s += a[i] * b[i];
    return s;
}

void attn_matmul(const float *A, const float *B, float *C, size_t m, size_t k, size_t n) {
    for (size_t i = 0; i < m; i++)
        for (size_t j = 0; j < n; j++) {
            float s = 0.0f;
            for (size_t p = 0; p < k; p++)
                s += A[i * k + p] * B[p * n + j];
            C[i * n + j] = s;
        }
}

void attn_matmul_bt(const float *A, const float *B, float *C, size_t m, size_t k, size_t n) {
    for (size_t i = 0; i < m; i++)
        for (size_t j = 0; j < n; j++)
            C[i * n + j] = attn_dot(A + i * k, B + j * k, k);
}

void attn_bmm_bt(const float *A, const float *B, float *C, size_t batch, size_t m, size_t k,
                 size_t n) {
    for (size_t b = 0; b < batch; b++)
        attn_matmul_bt(A + b * m * k, B + b * n * k, C + b * m * n, m, k, n);
}

void attn_sum_normalize(const float *x, float *y, size_t rows, size_t cols) {
    for (size_t r = 0; r < rows; r++) {
        float s = 0.0f;
        for (size_t c = 0; c < cols; c++)
            s += x[r * cols + c];
        for (size_t c = 0; c < cols; c++)
            y[r * cols + c] = x[r * cols + c] / s;
    }
}

void attn_tril_ones(float *out, size_t n) {
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < n; j++)
            out[i * n + j] = j <= i ? 1.0f : 0.0f;
}

void attn_triu_ones(float *out, size_t n, int diagonal) {
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < n; j++)
            out[i * n + j] = (long long)j - (long long)i >= (long long)diagonal ? 1.0f : 0.0f;
}

void attn_causal_fill(const float *x, float *y, size_t count, size_t T, float value) {
    for (size_t c = 0; c < count; c++)
        for (size_t i = 0; i < T; i++)
            for (size_t j = 0; j < T; j++) {
                const size_t idx = (c * T + i) * T + j;
                y[idx] = j > i ? value : x[idx];
            }
}

void attn_causal_multiply(const float *x, float *y, size_t count, size_t T) {
    for (size_t c = 0; c < count; c++)
        for (size_t i = 0; i < T; i++)
            for (size_t j = 0; j < T; j++) {
                const size_t idx = (c * T + i) * T + j;
                y[idx] = j > i ? 0.0f : x[idx];
            }
}
