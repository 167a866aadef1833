/* Internal: the cross-entropy's row loops behind attn/cross_entropy.h, one
 * per instruction set, with the same order of operations: exp(x - shift)
 * (attn_exp16 on AVX-512, attn_exp8 on AVX2 (the same bits), libm's expf
 * in C: ~1 ulp apart) summed in double
 * over 16 lanes (lane j takes the columns v = j mod 16), the lanes then
 * added in order 0..15. A GPT-2 row is 50,257 wide: libm's double exp per
 * element cost a fused head + loss half a second a step. */
#ifndef ATTN_CE_KERNELS_H
#define ATTN_CE_KERNELS_H

#include <stddef.h>

#define ATTN_CE_LANES 16

/* max(row[0..V)), V >= 1. */
float attn_ce_max_avx512(const float *row, size_t V);
/* sum_v exp(row[v] - mx), in the lane order above. */
double attn_ce_sumexp_avx512(const float *row, size_t V, float mx);
/* d[v] = (add ? d[v] : 0) + exp(x[v] - lse) * scale; d may be x. */
void attn_ce_grad_row_avx512(const float *x, float *d, size_t V, float lse, float scale, int add);
/* The same three on AVX2 + FMA. */
float attn_ce_max_avx2(const float *row, size_t V);
double attn_ce_sumexp_avx2(const float *row, size_t V, float mx);
void attn_ce_grad_row_avx2(const float *x, float *d, size_t V, float lse, float scale, int add);

#endif
