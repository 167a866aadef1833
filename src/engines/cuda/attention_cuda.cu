/* Fused causal attention on the GPU (FlashAttention-style), fp32.
 *
 * A block handles one (batch, head) and a tile of 32 rows; its 8 warps own
 * 4 rows each, and a warp's 32 lanes take the 32 columns of the tile on the
 * other side (lane = key in the forward and dQ kernels, lane = query in the
 * dK/dV kernel), so each lane computes 4 dot products per shared-memory
 * load. Partial products over the tile are then summed by broadcasting each
 * lane's weight with a shuffle, lane d owning output dims d, d+32, ...
 * Online softmax in the forward; the backward recomputes the probabilities
 * from the saved log-sum-exp. dQ and dK/dV come from two kernels that each
 * own their outputs, so there are no atomics and the results do not depend
 * on scheduling. Shared rows are padded to hd + 1 floats: lane-per-row reads
 * then hit distinct banks. */
#include "cuda_common.cuh"

#include <math.h>

#define TILE 32
#define ROWS_PER_WARP 4
#define WARPS 8

/* Rows r0.. of one head (hd columns at col) into a TILE x ld_dst tile,
 * zero past T and in the padding columns [hd, hd4): zeros add nothing to
 * the dot products, so every loop can run over hd4 in float4 steps. */
static __device__ __forceinline__ void load_tile(float *dst, int ld_dst, const float *src, int ld,
                                                 int col, int r0, int T, int b, int hd, int hd4) {
    for (int e = threadIdx.x; e < TILE * hd4; e += blockDim.x) {
        const int r = e / hd4, d = e % hd4;
        const int t = r0 + r;
        dst[r * ld_dst + d] = t < T && d < hd ? src[((size_t)b * T + t) * ld + col + d] : 0.0f;
    }
}

static __device__ __forceinline__ float dot4(float4 a, float4 b, float acc) {
    acc = fmaf(a.x, b.x, acc);
    acc = fmaf(a.y, b.y, acc);
    acc = fmaf(a.z, b.z, acc);
    return fmaf(a.w, b.w, acc);
}

static __device__ __forceinline__ float at4(float4 v, int u) {
    return u == 0 ? v.x : u == 1 ? v.y : u == 2 ? v.z : v.w;
}

/* Shared-memory layout (floats): tiles read by one lane per row use a row
 * stride of hd4 + 4 (16-byte rows that land in distinct banks per quarter
 * warp); tiles read as a broadcast row use hd4. */
#define HD4(hd) (((hd) + 3) & ~3)

template <int NK>
__global__ void __launch_bounds__(256) flash_fwd(const float *__restrict__ qkv, int ld, float *out,
                                                  int ld_out, float *lse, int T, int H, int hd,
                                                  float sm_scale, drop_site drop) {
    extern __shared__ float4 sh4[];
    const int hd4 = HD4(hd), ldk = hd4 + 4;
    float *Qs = (float *)sh4;     /* TILE x hd4, broadcast rows */
    float *Ks = Qs + TILE * hd4;  /* TILE x ldk, lane rows */
    float *Vs = Ks + TILE * ldk;  /* TILE x hd4, read along d */
    float *Ps = Vs + TILE * hd4;  /* WARPS x 4 x TILE */
    const int bh = blockIdx.y, b = bh / H, h = bh % H;
    const int i0 = blockIdx.x * TILE;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int C = H * hd;
    const bool dropping = drop.keep_prob < 1.0;
    float *Pw = Ps + warp * ROWS_PER_WARP * TILE;
    load_tile(Qs, hd4, qkv, ld, h * hd, i0, T, b, hd, hd4);

    float m[ROWS_PER_WARP], l[ROWS_PER_WARP], o[ROWS_PER_WARP][NK];
#pragma unroll
    for (int r = 0; r < ROWS_PER_WARP; r++) {
        m[r] = -INFINITY;
        l[r] = 0.0f;
#pragma unroll
        for (int k = 0; k < NK; k++)
            o[r][k] = 0.0f;
    }
    const int last_row = min(i0 + TILE, T) - 1;
    const int warp_last = min(i0 + warp * ROWS_PER_WARP + ROWS_PER_WARP, T) - 1;
    for (int j0 = 0; j0 <= last_row; j0 += TILE) {
        __syncthreads();
        load_tile(Ks, ldk, qkv, ld, C + h * hd, j0, T, b, hd, hd4);
        load_tile(Vs, hd4, qkv, ld, 2 * C + h * hd, j0, T, b, hd, hd4);
        __syncthreads();
        const int j = j0 + lane;
        float s[ROWS_PER_WARP];
#pragma unroll
        for (int r = 0; r < ROWS_PER_WARP; r++)
            s[r] = 0.0f;
        const float4 *k4 = (const float4 *)(Ks + lane * ldk);
        const float4 *q4 = (const float4 *)(Qs + warp * ROWS_PER_WARP * hd4);
        for (int d = 0; d < hd4 / 4; d++) {
            const float4 kv = k4[d];
#pragma unroll
            for (int r = 0; r < ROWS_PER_WARP; r++)
                s[r] = dot4(q4[r * (hd4 / 4) + d], kv, s[r]);
        }
#pragma unroll
        for (int r = 0; r < ROWS_PER_WARP; r++) {
            const int i = i0 + warp * ROWS_PER_WARP + r;
            float pd = 0.0f;
            if (i < T) { /* uniform across the warp */
                const bool valid = j <= i && j < T;
                const float sc = valid ? s[r] * sm_scale : -INFINITY;
                const float m_new = fmaxf(m[r], warp_max(sc));
                const float p = valid ? expf(sc - m_new) : 0.0f;
                const float alpha = expf(m[r] - m_new); /* m[r] = -inf -> 0 */
                l[r] = l[r] * alpha + warp_sum(p);
                m[r] = m_new;
                pd = p;
                if (dropping && valid)
                    pd = drop_keep(drop, (((size_t)bh * T + i) * T + j)) ? p * drop.scale : 0.0f;
#pragma unroll
                for (int k = 0; k < NK; k++)
                    o[r][k] *= alpha;
            }
            Pw[r * TILE + lane] = pd;
        }
        __syncwarp();
        if (warp_last >= j0) {
            const int jn = (min(TILE, warp_last - j0 + 1) + 3) & ~3;
            for (int jj = 0; jj < jn; jj += 4) {
                float4 p4[ROWS_PER_WARP];
#pragma unroll
                for (int r = 0; r < ROWS_PER_WARP; r++)
                    p4[r] = *(const float4 *)(Pw + r * TILE + jj);
#pragma unroll
                for (int u = 0; u < 4; u++)
#pragma unroll
                    for (int k = 0; k < NK; k++) {
                        const int d = lane + 32 * k;
                        const float v = d < hd4 ? Vs[(jj + u) * hd4 + d] : 0.0f;
#pragma unroll
                        for (int r = 0; r < ROWS_PER_WARP; r++)
                            o[r][k] = fmaf(at4(p4[r], u), v, o[r][k]);
                    }
            }
        }
        __syncwarp();
    }
#pragma unroll
    for (int r = 0; r < ROWS_PER_WARP; r++) {
        const int i = i0 + warp * ROWS_PER_WARP + r;
        if (i >= T) continue;
        const float inv = 1.0f / l[r];
#pragma unroll
        for (int k = 0; k < NK; k++) {
            const int d = lane + 32 * k;
            if (d < hd) out[((size_t)b * T + i) * ld_out + h * hd + d] = o[r][k] * inv;
        }
        if (lane == 0 && lse) lse[(size_t)bh * T + i] = m[r] + logf(l[r]);
    }
}

/* D[b, h, i] = sum_d dO[i, d] * O[i, d]: one warp per row. */
__global__ void flash_bwd_d(const float *out, const float *d_out, int ld_out, float *D, int B, int T,
                            int H, int hd) {
    const size_t row = (size_t)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    const int lane = threadIdx.x % 32;
    if (row >= (size_t)B * H * T) return;
    const int i = (int)(row % T), bh = (int)(row / T), b = bh / H, h = bh % H;
    const size_t base = ((size_t)b * T + i) * ld_out + (size_t)h * hd;
    float s = 0.0f;
    for (int d = lane; d < hd; d += 32)
        s = fmaf(d_out[base + d], out[base + d], s);
    s = warp_sum(s);
    if (lane == 0) D[row] = s;
}

/* dQ: block = 32 query rows of one (b, h); lane = key within each tile. */
template <int NK>
__global__ void __launch_bounds__(256) flash_bwd_dq(const float *__restrict__ qkv, int ld,
                                                     const float *d_out, int ld_out,
                                                     const float *lse, const float *D, float *dqkv,
                                                     int T, int H, int hd, float sm_scale,
                                                     drop_site drop) {
    extern __shared__ float4 sh4[];
    const int hd4 = HD4(hd), ldk = hd4 + 4;
    float *Qs = (float *)sh4, *dOs = Qs + TILE * hd4; /* broadcast rows */
    float *Ks = dOs + TILE * hd4, *Vs = Ks + TILE * ldk; /* lane rows */
    float *DSs = Vs + TILE * ldk;                         /* WARPS x 4 x TILE */
    const int bh = blockIdx.y, b = bh / H, h = bh % H;
    const int i0 = blockIdx.x * TILE;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int C = H * hd;
    const bool dropping = drop.keep_prob < 1.0;
    float *DSw = DSs + warp * ROWS_PER_WARP * TILE;
    load_tile(Qs, hd4, qkv, ld, h * hd, i0, T, b, hd, hd4);
    load_tile(dOs, hd4, d_out, ld_out, h * hd, i0, T, b, hd, hd4);
    float lse_r[ROWS_PER_WARP], D_r[ROWS_PER_WARP], dq[ROWS_PER_WARP][NK];
#pragma unroll
    for (int r = 0; r < ROWS_PER_WARP; r++) {
        const int i = i0 + warp * ROWS_PER_WARP + r;
        lse_r[r] = i < T ? lse[(size_t)bh * T + i] : 0.0f;
        D_r[r] = i < T ? D[(size_t)bh * T + i] : 0.0f;
#pragma unroll
        for (int k = 0; k < NK; k++)
            dq[r][k] = 0.0f;
    }
    const int last_row = min(i0 + TILE, T) - 1;
    const int warp_last = min(i0 + warp * ROWS_PER_WARP + ROWS_PER_WARP, T) - 1;
    for (int j0 = 0; j0 <= last_row; j0 += TILE) {
        __syncthreads();
        load_tile(Ks, ldk, qkv, ld, C + h * hd, j0, T, b, hd, hd4);
        load_tile(Vs, ldk, qkv, ld, 2 * C + h * hd, j0, T, b, hd, hd4);
        __syncthreads();
        const int j = j0 + lane;
        float s[ROWS_PER_WARP], dp[ROWS_PER_WARP];
#pragma unroll
        for (int r = 0; r < ROWS_PER_WARP; r++)
            s[r] = dp[r] = 0.0f;
        const float4 *k4 = (const float4 *)(Ks + lane * ldk), *v4 = (const float4 *)(Vs + lane * ldk);
        const float4 *q4 = (const float4 *)(Qs + warp * ROWS_PER_WARP * hd4);
        const float4 *o4 = (const float4 *)(dOs + warp * ROWS_PER_WARP * hd4);
        for (int d = 0; d < hd4 / 4; d++) {
            const float4 kv = k4[d], vv = v4[d];
#pragma unroll
            for (int r = 0; r < ROWS_PER_WARP; r++) {
                s[r] = dot4(q4[r * (hd4 / 4) + d], kv, s[r]);
                dp[r] = dot4(o4[r * (hd4 / 4) + d], vv, dp[r]);
            }
        }
#pragma unroll
        for (int r = 0; r < ROWS_PER_WARP; r++) {
            const int i = i0 + warp * ROWS_PER_WARP + r;
            const bool valid = i < T && j <= i && j < T;
            const float p = valid ? expf(s[r] * sm_scale - lse_r[r]) : 0.0f;
            float z = 1.0f;
            if (dropping && valid)
                z = drop_keep(drop, (((size_t)bh * T + i) * T + j)) ? drop.scale : 0.0f;
            DSw[r * TILE + lane] = p * (dp[r] * z - D_r[r]);
        }
        __syncwarp();
        if (warp_last >= j0) {
            const int jn = (min(TILE, warp_last - j0 + 1) + 3) & ~3;
            for (int jj = 0; jj < jn; jj += 4) {
                float4 d4[ROWS_PER_WARP];
#pragma unroll
                for (int r = 0; r < ROWS_PER_WARP; r++)
                    d4[r] = *(const float4 *)(DSw + r * TILE + jj);
#pragma unroll
                for (int u = 0; u < 4; u++)
#pragma unroll
                    for (int k = 0; k < NK; k++) {
                        const int d = lane + 32 * k;
                        const float kv = d < hd4 ? Ks[(jj + u) * ldk + d] : 0.0f;
#pragma unroll
                        for (int r = 0; r < ROWS_PER_WARP; r++)
                            dq[r][k] = fmaf(at4(d4[r], u), kv, dq[r][k]);
                    }
            }
        }
        __syncwarp();
    }
#pragma unroll
    for (int r = 0; r < ROWS_PER_WARP; r++) {
        const int i = i0 + warp * ROWS_PER_WARP + r;
        if (i >= T) continue;
#pragma unroll
        for (int k = 0; k < NK; k++) {
            const int d = lane + 32 * k;
            if (d < hd) dqkv[((size_t)b * T + i) * ld + h * hd + d] = dq[r][k] * sm_scale;
        }
    }
}

/* dK, dV: block = 32 keys of one (b, h); lane = query within each tile. */
template <int NK>
__global__ void __launch_bounds__(256) flash_bwd_dkv(const float *__restrict__ qkv, int ld,
                                                      const float *d_out, int ld_out,
                                                      const float *lse, const float *D,
                                                      float *dqkv, int T, int H, int hd,
                                                      float sm_scale, drop_site drop) {
    extern __shared__ float4 sh4[];
    const int hd4 = HD4(hd), ldk = hd4 + 4;
    float *Ks = (float *)sh4, *Vs = Ks + TILE * hd4;     /* broadcast rows */
    float *Qs = Vs + TILE * hd4, *dOs = Qs + TILE * ldk; /* lane rows */
    float *PZs = dOs + TILE * ldk, *DSs = PZs + WARPS * ROWS_PER_WARP * TILE;
    float *lse_s = DSs + WARPS * ROWS_PER_WARP * TILE, *D_s = lse_s + TILE;
    const int bh = blockIdx.y, b = bh / H, h = bh % H;
    const int j0 = blockIdx.x * TILE;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int C = H * hd;
    const bool dropping = drop.keep_prob < 1.0;
    float *PZw = PZs + warp * ROWS_PER_WARP * TILE, *DSw = DSs + warp * ROWS_PER_WARP * TILE;
    load_tile(Ks, hd4, qkv, ld, C + h * hd, j0, T, b, hd, hd4);
    load_tile(Vs, hd4, qkv, ld, 2 * C + h * hd, j0, T, b, hd, hd4);
    float dk[ROWS_PER_WARP][NK], dv[ROWS_PER_WARP][NK];
#pragma unroll
    for (int r = 0; r < ROWS_PER_WARP; r++)
#pragma unroll
        for (int k = 0; k < NK; k++)
            dk[r][k] = dv[r][k] = 0.0f;
    const int warp_first = j0 + warp * ROWS_PER_WARP; /* the warp's first key */
    for (int q0 = j0; q0 < T; q0 += TILE) {
        __syncthreads();
        load_tile(Qs, ldk, qkv, ld, h * hd, q0, T, b, hd, hd4);
        load_tile(dOs, ldk, d_out, ld_out, h * hd, q0, T, b, hd, hd4);
        if (threadIdx.x < TILE) {
            const int i = q0 + threadIdx.x;
            lse_s[threadIdx.x] = i < T ? lse[(size_t)bh * T + i] : 0.0f;
            D_s[threadIdx.x] = i < T ? D[(size_t)bh * T + i] : 0.0f;
        }
        __syncthreads();
        const int i = q0 + lane;
        float s[ROWS_PER_WARP], dp[ROWS_PER_WARP];
#pragma unroll
        for (int r = 0; r < ROWS_PER_WARP; r++)
            s[r] = dp[r] = 0.0f;
        const float4 *q4 = (const float4 *)(Qs + lane * ldk), *o4 = (const float4 *)(dOs + lane * ldk);
        const float4 *k4 = (const float4 *)(Ks + warp * ROWS_PER_WARP * hd4);
        const float4 *v4 = (const float4 *)(Vs + warp * ROWS_PER_WARP * hd4);
        for (int d = 0; d < hd4 / 4; d++) {
            const float4 qv = q4[d], ov = o4[d];
#pragma unroll
            for (int r = 0; r < ROWS_PER_WARP; r++) {
                s[r] = dot4(k4[r * (hd4 / 4) + d], qv, s[r]);
                dp[r] = dot4(v4[r * (hd4 / 4) + d], ov, dp[r]);
            }
        }
#pragma unroll
        for (int r = 0; r < ROWS_PER_WARP; r++) {
            const int j = warp_first + r;
            const bool valid = j < T && i >= j && i < T;
            const float p = valid ? expf(s[r] * sm_scale - lse_s[lane]) : 0.0f;
            float z = 1.0f;
            if (dropping && valid)
                z = drop_keep(drop, (((size_t)bh * T + i) * T + j)) ? drop.scale : 0.0f;
            PZw[r * TILE + lane] = p * z;
            DSw[r * TILE + lane] = p * (dp[r] * z - D_s[lane]);
        }
        __syncwarp();
        /* rows i < the warp's first key contribute nothing */
        const int first = max(0, warp_first - q0) & ~3;
        const int last = (min(TILE, T - q0) + 3) & ~3;
        for (int ii = first; ii < last; ii += 4) {
            float4 pz4[ROWS_PER_WARP], ds4[ROWS_PER_WARP];
#pragma unroll
            for (int r = 0; r < ROWS_PER_WARP; r++) {
                pz4[r] = *(const float4 *)(PZw + r * TILE + ii);
                ds4[r] = *(const float4 *)(DSw + r * TILE + ii);
            }
#pragma unroll
            for (int u = 0; u < 4; u++)
#pragma unroll
                for (int k = 0; k < NK; k++) {
                    const int d = lane + 32 * k;
                    const float ov = d < hd4 ? dOs[(ii + u) * ldk + d] : 0.0f;
                    const float qv = d < hd4 ? Qs[(ii + u) * ldk + d] : 0.0f;
#pragma unroll
                    for (int r = 0; r < ROWS_PER_WARP; r++) {
                        dv[r][k] = fmaf(at4(pz4[r], u), ov, dv[r][k]);
                        dk[r][k] = fmaf(at4(ds4[r], u), qv, dk[r][k]);
                    }
                }
        }
        __syncwarp();
    }
#pragma unroll
    for (int r = 0; r < ROWS_PER_WARP; r++) {
        const int j = j0 + warp * ROWS_PER_WARP + r;
        if (j >= T) continue;
#pragma unroll
        for (int k = 0; k < NK; k++) {
            const int d = lane + 32 * k;
            if (d < hd) {
                const size_t base = ((size_t)b * T + j) * ld + h * hd + d;
                dqkv[base + C] = dk[r][k] * sm_scale;
                dqkv[base + 2 * C] = dv[r][k];
            }
        }
    }
}

template <int NK>
static cudaError_t launch_fwd(const float *qkv, int ld, float *out, int ld_out, float *lse, int B,
                              int T, int H, int hd, drop_site drop, cudaStream_t s) {
    const size_t hd4 = HD4(hd);
    const size_t smem = (TILE * (3 * hd4 + 4) + WARPS * ROWS_PER_WARP * TILE) * sizeof(float);
    cudaError_t e = cudaFuncSetAttribute(flash_fwd<NK>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         (int)smem);
    if (e != cudaSuccess) return e;
    dim3 grid((T + TILE - 1) / TILE, B * H);
    flash_fwd<NK><<<grid, WARPS * 32, smem, s>>>(qkv, ld, out, ld_out, lse, T, H, hd,
                                                  1.0f / sqrtf((float)hd), drop);
    return cudaGetLastError();
}

template <int NK>
static cudaError_t launch_bwd(const float *qkv, int ld, const float *d_out, int ld_out,
                              const float *lse, const float *D, float *dqkv, int B, int T, int H,
                              int hd, drop_site drop, cudaStream_t s) {
    const size_t hd4 = HD4(hd);
    const size_t smem =
        (TILE * (4 * hd4 + 8) + 2 * WARPS * ROWS_PER_WARP * TILE + 2 * TILE) * sizeof(float);
    cudaError_t e = cudaFuncSetAttribute(flash_bwd_dq<NK>,
                                         cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
    if (e == cudaSuccess)
        e = cudaFuncSetAttribute(flash_bwd_dkv<NK>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 (int)smem);
    if (e != cudaSuccess) return e;
    dim3 grid((T + TILE - 1) / TILE, B * H);
    const float sc = 1.0f / sqrtf((float)hd);
    flash_bwd_dq<NK><<<grid, WARPS * 32, smem, s>>>(qkv, ld, d_out, ld_out, lse, D, dqkv, T, H, hd,
                                                     sc, drop);
    if ((e = cudaGetLastError()) != cudaSuccess) return e;
    flash_bwd_dkv<NK><<<grid, WARPS * 32, smem, s>>>(qkv, ld, d_out, ld_out, lse, D, dqkv, T, H,
                                                      hd, sc, drop);
    return cudaGetLastError();
}

cudaError_t attn_cu_flash_forward(const float *qkv, int ld_qkv, float *out, int ld_out, float *lse,
                                  int B, int T, int H, int hd, drop_site drop, cudaStream_t s) {
    switch ((hd + 31) / 32) {
    case 1: return launch_fwd<1>(qkv, ld_qkv, out, ld_out, lse, B, T, H, hd, drop, s);
    case 2: return launch_fwd<2>(qkv, ld_qkv, out, ld_out, lse, B, T, H, hd, drop, s);
    case 3: return launch_fwd<3>(qkv, ld_qkv, out, ld_out, lse, B, T, H, hd, drop, s);
    case 4: return launch_fwd<4>(qkv, ld_qkv, out, ld_out, lse, B, T, H, hd, drop, s);
    default: return cudaErrorInvalidValue;
    }
}

cudaError_t attn_cu_flash_backward(const float *qkv, int ld_qkv, const float *out,
                                   const float *d_out, int ld_out, const float *lse, float *D,
                                   float *dqkv, int B, int T, int H, int hd, drop_site drop,
                                   cudaStream_t s) {
    const size_t rows = (size_t)B * H * T;
    flash_bwd_d<<<(unsigned)((rows + 7) / 8), 256, 0, s>>>(out, d_out, ld_out, D, B, T, H, hd);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) return e;
    switch ((hd + 31) / 32) {
    case 1: return launch_bwd<1>(qkv, ld_qkv, d_out, ld_out, lse, D, dqkv, B, T, H, hd, drop, s);
    case 2: return launch_bwd<2>(qkv, ld_qkv, d_out, ld_out, lse, D, dqkv, B, T, H, hd, drop, s);
    case 3: return launch_bwd<3>(qkv, ld_qkv, d_out, ld_out, lse, D, dqkv, B, T, H, hd, drop, s);
    case 4: return launch_bwd<4>(qkv, ld_qkv, d_out, ld_out, lse, D, dqkv, B, T, H, hd, drop, s);
    default: return cudaErrorInvalidValue;
    }
}
