/* Matrix-vector products and bf16 conversion: portable versions and the
 * run-time choice of the AVX-512 or AVX2 ones (see gemv.h). */
#include "gemv.h"

/* Asked on every product (a chunk of rows): one read of ATTN_SIMD. */
attn_simd attn_gemv_path(void) {
#ifdef ATTN_GEMV_AVX512
    const attn_cpu_level l = attn_cpu_level_used();
    if (l >= ATTN_CPU_LEVEL_AVX512) return ATTN_SIMD_AVX512; /* attn_cpu_has(AVX512_BW) */
    if (l >= ATTN_CPU_LEVEL_AVX2) return ATTN_SIMD_AVX2;
#endif
    return ATTN_SIMD_GENERIC;
}

void attn_f32_to_bf16(const float *x, uint16_t *y, size_t n) {
#ifdef ATTN_GEMV_AVX512
    switch (attn_gemv_path()) {
    case ATTN_SIMD_AVX512: attn_f32_to_bf16_avx512(x, y, n); return;
    case ATTN_SIMD_AVX2: attn_f32_to_bf16_avx2(x, y, n); return;
    default: break;
    }
#endif
    attn_f32_to_bf16_scalar(x, y, n);
}

#define LANES 16

/* One row against one sequence: 16 lanes, then their sum in order. */
#define GEMV_DOT(CONV)                                                                             \
    float acc[LANES] = {0};                                                                        \
    int i = 0;                                                                                     \
    for (; i + LANES <= in; i += LANES)                                                            \
        for (int l = 0; l < LANES; l++)                                                            \
            acc[l] += CONV(w[i + l]) * xs[i + l];                                                  \
    for (; i < in; i++)                                                                            \
        acc[i % LANES] += CONV(w[i]) * xs[i];                                                      \
    float sum = 0.0f;                                                                              \
    for (int l = 0; l < LANES; l++)                                                                \
        sum += acc[l];

#define AS_F32(v) (v)

void attn_gemv_f32_n(const float *W, const float *b, const float *x, size_t ldx, float *y,
                     size_t ldy, int n, int in, int r0, int r1) {
#ifdef ATTN_GEMV_AVX512
    switch (attn_gemv_path()) {
    case ATTN_SIMD_AVX512: attn_gemv_f32_avx512(W, b, x, ldx, y, ldy, n, in, r0, r1); return;
    case ATTN_SIMD_AVX2: attn_gemv_f32_avx2(W, b, x, ldx, y, ldy, n, in, r0, r1); return;
    default: break;
    }
#endif
    for (int o = r0; o < r1; o++)
        for (int s = 0; s < n; s++) {
            const float *w = W + (size_t)o * (size_t)in, *xs = x + (size_t)s * ldx;
            GEMV_DOT(AS_F32)
            y[(size_t)s * ldy + (size_t)o] = (b ? b[o] : 0.0f) + sum;
        }
}

void attn_gemv_bf16_n(const uint16_t *W, const float *b, const float *x, size_t ldx, float *y,
                      size_t ldy, int n, int in, int r0, int r1) {
#ifdef ATTN_GEMV_AVX512
    switch (attn_gemv_path()) {
    case ATTN_SIMD_AVX512: attn_gemv_bf16_avx512(W, b, x, ldx, y, ldy, n, in, r0, r1); return;
    case ATTN_SIMD_AVX2: attn_gemv_bf16_avx2(W, b, x, ldx, y, ldy, n, in, r0, r1); return;
    default: break;
    }
#endif
    for (int o = r0; o < r1; o++)
        for (int s = 0; s < n; s++) {
            const uint16_t *w = W + (size_t)o * (size_t)in;
            const float *xs = x + (size_t)s * ldx;
            GEMV_DOT(attn_bf16_to_f32)
            y[(size_t)s * ldy + (size_t)o] = (b ? b[o] : 0.0f) + sum;
        }
}
