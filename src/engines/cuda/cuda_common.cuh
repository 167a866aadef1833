/* Shared device helpers of the CUDA engine (internal). */
#ifndef ATTN_CUDA_COMMON_CUH
#define ATTN_CUDA_COMMON_CUH

#include <cuda_runtime.h>
#include <stdint.h>

#include "attn/status.h"

/* Philox4x32-10 (Salmon et al. 2011): counter (c0..c3), key (k0, k1);
 * returns the first output word. */
__device__ __forceinline__ uint32_t philox_first(uint32_t c0, uint32_t c1, uint32_t c2,
                                                 uint32_t c3, uint32_t k0, uint32_t k1) {
#pragma unroll
    for (int r = 0; r < 10; r++) {
        const uint32_t lo0 = 0xD2511F53u * c0, hi0 = __umulhi(0xD2511F53u, c0);
        const uint32_t lo1 = 0xCD9E8D57u * c2, hi1 = __umulhi(0xCD9E8D57u, c2);
        c0 = hi1 ^ c1 ^ k0;
        c1 = lo1;
        c2 = hi0 ^ c3 ^ k1;
        c3 = lo0;
        k0 += 0x9E3779B9u;
        k1 += 0xBB67AE85u;
    }
    return c0;
}

/* Dropout parameters of one site in one step. */
struct drop_site {
    uint32_t k0, k1;   /* seed */
    uint32_t site;     /* which dropout (see attn/cuda.h) */
    uint32_t step;     /* training step */
    double keep_prob;  /* 1 - p; >= 1 means no dropout */
    float scale;       /* 1 / (1 - p) as attn_dropout_scale */
};

__device__ __forceinline__ bool drop_keep(const drop_site &d, uint64_t idx) {
    const uint32_t u = philox_first((uint32_t)idx, (uint32_t)(idx >> 32), d.site, d.step, d.k0, d.k1);
    return (double)u * (1.0 / 4294967296.0) < d.keep_prob;
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
        v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

/* Launch the fused attention forward / backward (attention_cuda.cu).
 * qkv rows of ld_qkv floats, Q/K/V at column offsets 0, H*hd, 2*H*hd. */
cudaError_t attn_cu_flash_forward(const float *qkv, int ld_qkv, float *out, int ld_out, float *lse,
                                  int B, int T, int H, int hd, drop_site drop, cudaStream_t s);
/* D (B, H, T) scratch; dqkv gets dQ, dK, dV at the same column offsets. */
cudaError_t attn_cu_flash_backward(const float *qkv, int ld_qkv, const float *out,
                                   const float *d_out, int ld_out, const float *lse, float *D,
                                   float *dqkv, int B, int T, int H, int hd, drop_site drop,
                                   cudaStream_t s);

#endif
