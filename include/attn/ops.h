/* attn/ops.h — the chapter's building-block operations on plain arrays.
 *
 * All matrices are row-major float32. These are the readable reference forms
 * the chapter walks through (loops you can step through); the modules use
 * them, and the fused kernels are tested against them. */
#ifndef ATTN_OPS_H
#define ATTN_OPS_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Dot product of two n-vectors (the chapter's first "attention score"). */
float attn_dot(const float *a, const float *b, size_t n);

/* C (m, n) = A (m, k) @ B (k, n). */
void attn_matmul(const float *A, const float *B, float *C, size_t m, size_t k, size_t n);

/* C (m, n) = A (m, k) @ B^T where B is (n, k)  — e.g. queries @ keys.T. */
void attn_matmul_bt(const float *A, const float *B, float *C, size_t m, size_t k, size_t n);

/* Batched C[i] = A[i] @ B[i]^T for i < batch (the chapter's 4-D example:
 * (b, heads, T, d) @ (b, heads, d, T) with batch = b * heads). */
void attn_bmm_bt(const float *A, const float *B, float *C, size_t batch, size_t m, size_t k,
                 size_t n);

/* y = x / sum(x) over each row of (rows, cols) — the chapter's "simple
 * normalisation"; also the renormalisation after a tril multiply. */
void attn_sum_normalize(const float *x, float *y, size_t rows, size_t cols);

/* torch.tril(torch.ones(n, n)) and torch.triu(torch.ones(n, n), diagonal). */
void attn_tril_ones(float *out, size_t n);
void attn_triu_ones(float *out, size_t n, int diagonal);

/* scores (rows of a (..., T, T) stack) with entries above the diagonal set to
 * value (the chapter's masked_fill(mask.bool(), -inf)); count = number of
 * (T, T) matrices. In place allowed. */
void attn_causal_fill(const float *x, float *y, size_t count, size_t T, float value);

/* y = x * tril(ones) for count (T, T) matrices. */
void attn_causal_multiply(const float *x, float *y, size_t count, size_t T);

#ifdef __cplusplus
}
#endif
#endif
