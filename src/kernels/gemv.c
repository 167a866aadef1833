/* Matrix-vector products and bf16 conversion: portable versions and the
 * run-time choice of the AVX-512 ones (see gemv.h). */
#include "gemv.h"

#include "attn/cpu.h"

void attn_f32_to_bf16(const float *x, uint16_t *y, size_t n) {
#ifdef ATTN_GEMV_AVX512
    if (attn_cpu_has(ATTN_CPU_AVX512_BW)) {
        attn_f32_to_bf16_avx512(x, y, n);
        return;
    }
#endif
    attn_f32_to_bf16_scalar(x, y, n);
}

#define LANES 16

void attn_gemv_f32(const float *W, const float *b, const float *x, float *y, int in, int r0,
                   int r1) {
#ifdef ATTN_GEMV_AVX512
    if (attn_cpu_has(ATTN_CPU_AVX512_BW)) {
        attn_gemv_f32_avx512(W, b, x, y, in, r0, r1);
        return;
    }
#endif
    for (int o = r0; o < r1; o++) {
        const float *w = W + (size_t)o * (size_t)in;
        float acc[LANES] = {0};
        int i = 0;
        for (; i + LANES <= in; i += LANES)
            for (int l = 0; l < LANES; l++)
                acc[l] += w[i + l] * x[i + l];
        for (; i < in; i++)
            acc[i % LANES] += w[i] * x[i];
        float s = 0.0f;
        for (int l = 0; l < LANES; l++)
            s += acc[l];
        y[o] = (b ? b[o] : 0.0f) + s;
    }
}

void attn_gemv_bf16(const uint16_t *W, const float *b, const float *x, float *y, int in, int r0,
                    int r1) {
#ifdef ATTN_GEMV_AVX512
    if (attn_cpu_has(ATTN_CPU_AVX512_BW)) {
        attn_gemv_bf16_avx512(W, b, x, y, in, r0, r1);
        return;
    }
#endif
    for (int o = r0; o < r1; o++) {
        const uint16_t *w = W + (size_t)o * (size_t)in;
        float acc[LANES] = {0};
        int i = 0;
        for (; i + LANES <= in; i += LANES)
            for (int l = 0; l < LANES; l++)
                acc[l] += attn_bf16_to_f32(w[i + l]) * x[i + l];
        for (; i < in; i++)
            acc[i % LANES] += attn_bf16_to_f32(w[i]) * x[i];
        float s = 0.0f;
        for (int l = 0; l < LANES; l++)
            s += acc[l];
        y[o] = (b ? b[o] : 0.0f) + s;
    }
}
