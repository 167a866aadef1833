/* Matrix-vector products for one-token steps (internal): y = W x (+ b) with
 * W (out, in) row-major, in fp32 or bf16 (the upper 16 bits of the fp32
 * value, rounded to nearest even). Memory-bound: W is streamed once; callers
 * split the rows over threads. Also the bf16 conversions the bf16 engine
 * shares. */
#ifndef ATTN_SRC_GEMV_H
#define ATTN_SRC_GEMV_H

#include <stddef.h>
#include <stdint.h>

#include "attn/cpu.h"

/* Batched: y[s ldy + o] = (b ? b[o] : 0) + sum_i W[o, i] x[s ldx + i] for
 * the n sequences s and rows o in [r0, r1). Each weight row is read once
 * for all n (a memory-bound gemv becomes a small gemm). Every sum runs in
 * lanes then adds them (AVX-512 and AVX2: 64, the same bits; portable C:
 * 16), in the same order for any n: not the order of sgemm (within a few
 * ulps of it), and a batch equals its rows one by one bit for bit. */
void attn_gemv_f32_n(const float *W, const float *b, const float *x, size_t ldx, float *y,
                     size_t ldy, int n, int in, int r0, int r1);
/* Same with bf16 weights, widened exactly to fp32 (fp32 x, fp32 sums). */
void attn_gemv_bf16_n(const uint16_t *W, const float *b, const float *x, size_t ldx, float *y,
                      size_t ldy, int n, int in, int r0, int r1);

/* One sequence (n = 1). */
static inline void attn_gemv_f32(const float *W, const float *b, const float *x, float *y, int in,
                                 int r0, int r1) {
    attn_gemv_f32_n(W, b, x, 0, y, 0, 1, in, r0, r1);
}
static inline void attn_gemv_bf16(const uint16_t *W, const float *b, const float *x, float *y,
                                  int in, int r0, int r1) {
    attn_gemv_bf16_n(W, b, x, 0, y, 0, 1, in, r0, r1);
}

/* Round fp32 to bf16 (nearest even; NaN stays NaN) and back (exact). */
void attn_f32_to_bf16(const float *x, uint16_t *y, size_t n);
static inline void attn_f32_to_bf16_scalar(const float *x, uint16_t *y, size_t n) {
    for (size_t i = 0; i < n; i++) {
        union {
            float f;
            uint32_t u;
        } v = {x[i]};
        const uint32_t u = v.u;
        if ((u & 0x7fffffffu) > 0x7f800000u) /* NaN: keep it quiet, not rounded to inf */
            y[i] = (uint16_t)((u >> 16) | 0x40u);
        else
            y[i] = (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
    }
}
static inline float attn_bf16_to_f32(uint16_t h) {
    union {
        uint32_t u;
        float f;
    } v = {(uint32_t)h << 16};
    return v.f;
}

/* The kernels the products above run on this CPU under ATTN_SIMD:
 * ATTN_SIMD_AVX512, _AVX2 (the same bits) or _GENERIC (portable C). */
attn_simd attn_gemv_path(void);

/* Kernels with AVX-512 (gemv_avx512.c), on x86 only; called when
 * attn_cpu_has(ATTN_CPU_AVX512_BW). The AVX2 + FMA ones (gemv_avx2.c) sum
 * in the AVX-512 ones' order, bit for bit; called when
 * attn_simd_supported(ATTN_SIMD_AVX2). */
#if defined(__x86_64__) && defined(__GNUC__)
#define ATTN_GEMV_AVX512 1
void attn_f32_to_bf16_avx512(const float *x, uint16_t *y, size_t n);
void attn_gemv_f32_avx512(const float *W, const float *b, const float *x, size_t ldx, float *y,
                          size_t ldy, int n, int in, int r0, int r1);
void attn_gemv_bf16_avx512(const uint16_t *W, const float *b, const float *x, size_t ldx, float *y,
                           size_t ldy, int n, int in, int r0, int r1);
void attn_f32_to_bf16_avx2(const float *x, uint16_t *y, size_t n);
void attn_gemv_f32_avx2(const float *W, const float *b, const float *x, size_t ldx, float *y,
                        size_t ldy, int n, int in, int r0, int r1);
void attn_gemv_bf16_avx2(const uint16_t *W, const float *b, const float *x, size_t ldx, float *y,
                         size_t ldy, int n, int in, int r0, int r1);
#endif

#endif
