/* Internal: the SwiGLU row kernels behind attn/activation.h, one per
 * instruction set. Same arithmetic, in the same order, as activation.c's
 * scalar loops; only exp differs (attn_exp16 / attn_exp8, ~1 ulp, for
 * libm's expf): the AVX2 and AVX-512 kernels give the same bits. */
#ifndef ATTN_ACTIVATION_KERNELS_H
#define ATTN_ACTIVATION_KERNELS_H

#include <stddef.h>

/* y[i] = silu(a[i]) * b[i], i < n. */
void attn_swiglu_pair_avx512(const float *a, const float *b, float *y, size_t n);
/* da[i] += d[i] b[i] silu'(a[i]), db[i] += d[i] silu(a[i]), i < n. */
void attn_swiglu_grad_avx512(const float *a, const float *b, const float *d, float *da, float *db,
                             size_t n);
/* The same two on AVX2 + FMA. */
void attn_swiglu_pair_avx2(const float *a, const float *b, float *y, size_t n);
void attn_swiglu_grad_avx2(const float *a, const float *b, const float *d, float *da, float *db,
                           size_t n);

#endif
