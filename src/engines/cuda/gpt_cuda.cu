/* The GPT of gpt.h on one CUDA GPU (see attn/cuda.h): forward, backward,
 * clipping and AdamW, with fp32 master weights in flat buffers laid out as
 * the parameter list. Every reduction runs in a fixed order (no atomics). */
#include "attn/cuda.h"

#include <cublas_v2.h>
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_common.cuh"

#define LN_EPS 1e-5f
#define GELU_K 0.7978845608028654f
#define GELU_A 0.044715f
#define COL_SEGMENTS 64 /* row segments of the two-pass column sums */

/* ------------------------------------------------------------- kernels */

/* x[n, :] = tok[ids[n], :] + pos[n % T, :], then drop_emb. */
__global__ void k_embed(const int32_t *ids, const float *tok, const float *pos, float *x, size_t N,
                        int T, int C, drop_site drop) {
    const size_t e = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= N * C) return;
    const size_t n = e / C;
    const int c = (int)(e % C);
    float v = tok[(size_t)ids[n] * C + c] + pos[(size_t)(n % T) * C + c];
    if (drop.keep_prob < 1.0) v = drop_keep(drop, e) ? v * drop.scale : 0.0f;
    x[e] = v;
}

/* LayerNorm of one row per warp (two passes over the row: mean, then the
 * biased variance). */
__global__ void k_layernorm(const float *x, const float *w, const float *b, float *y, float *mean,
                            float *rstd, size_t N, int C) {
    const size_t row = (size_t)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    const int lane = threadIdx.x % 32;
    if (row >= N) return;
    const float *xr = x + row * C;
    float s = 0.0f;
    for (int c = lane; c < C; c += 32)
        s += xr[c];
    const float m = warp_sum(s) / (float)C;
    float v = 0.0f;
    for (int c = lane; c < C; c += 32) {
        const float d = xr[c] - m;
        v = fmaf(d, d, v);
    }
    const float r = 1.0f / sqrtf(warp_sum(v) / (float)C + LN_EPS);
    float *yr = y + row * C;
    for (int c = lane; c < C; c += 32)
        yr[c] = (xr[c] - m) * r * w[c] + b[c];
    if (lane == 0) {
        mean[row] = m;
        rstd[row] = r;
    }
}

/* dx (+)= rstd * (g - mean(g) - xhat * mean(g * xhat)), g = dy * w. */
__global__ void k_layernorm_dx(const float *x, const float *mean, const float *rstd, const float *w,
                               const float *dy, float *dx, size_t N, int C, int accumulate) {
    const size_t row = (size_t)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    const int lane = threadIdx.x % 32;
    if (row >= N) return;
    const float *xr = x + row * C, *dyr = dy + row * C;
    const float m = mean[row], r = rstd[row];
    float sg = 0.0f, sgx = 0.0f;
    for (int c = lane; c < C; c += 32) {
        const float g = dyr[c] * w[c];
        sg += g;
        sgx += g * (xr[c] - m) * r;
    }
    const float mg = warp_sum(sg) / (float)C, mgx = warp_sum(sgx) / (float)C;
    float *dxr = dx + row * C;
    for (int c = lane; c < C; c += 32) {
        const float xhat = (xr[c] - m) * r;
        const float v = r * (dyr[c] * w[c] - mg - xhat * mgx);
        dxr[c] = accumulate ? dxr[c] + v : v;
    }
}

/* Column sums, pass 1: partial[seg, c] over the rows of segment seg, in row
 * order. mode 0: sum dy; mode 1: sum dy * xhat and (into partial2) sum dy. */
__global__ void k_colsum_partial(const float *dy, int ld, const float *x, const float *mean,
                                 const float *rstd, size_t N, int C, float *partial,
                                 float *partial2) {
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    const int seg = blockIdx.y;
    if (c >= C) return;
    const size_t per = (N + gridDim.y - 1) / gridDim.y;
    const size_t r0 = seg * per, r1 = r0 + per < N ? r0 + per : N;
    float s = 0.0f, s2 = 0.0f;
    for (size_t n = r0; n < r1; n++) {
        const float g = dy[n * ld + c];
        if (x) {
            s = fmaf(g, (x[n * C + c] - mean[n]) * rstd[n], s);
            s2 += g;
        } else {
            s += g;
        }
    }
    partial[(size_t)seg * C + c] = s;
    if (x) partial2[(size_t)seg * C + c] = s2;
}

/* Pass 2: out[c] += sum over segments, in segment order. */
__global__ void k_colsum_final(const float *partial, int segs, int C, float *out) {
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C) return;
    float s = 0.0f;
    for (int k = 0; k < segs; k++)
        s += partial[(size_t)k * C + c];
    out[c] += s;
}

/* y[n, c] += bias[c] for an (N, ld) slice of width C. */
__global__ void k_add_bias(float *y, int ld, const float *bias, size_t N, int C) {
    const size_t e = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= N * C) return;
    const size_t n = e / C;
    const int c = (int)(e % C);
    y[n * ld + c] += bias[c];
}

/* out = resid + dropout(y). */
__global__ void k_residual(const float *resid, const float *y, float *out, size_t n,
                           drop_site drop) {
    const size_t e = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= n) return;
    float v = y[e];
    if (drop.keep_prob < 1.0) v = drop_keep(drop, e) ? v * drop.scale : 0.0f;
    out[e] = resid[e] + v;
}

/* out = dropout'(d): the gradient through a dropout (mask recomputed). */
__global__ void k_dropout_bwd(const float *d, float *out, size_t n, drop_site drop) {
    const size_t e = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= n) return;
    out[e] = drop_keep(drop, e) ? d[e] * drop.scale : 0.0f;
}

__device__ __forceinline__ float gelu_t(float v) {
    return tanhf(GELU_K * (v + GELU_A * (v * v * v)));
}

__global__ void k_gelu(const float *x, float *y, size_t n) {
    const size_t e = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= n) return;
    const float v = x[e];
    y[e] = 0.5f * v * (1.0f + gelu_t(v));
}

__global__ void k_gelu_bwd(const float *x, float *d, size_t n) {
    const size_t e = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= n) return;
    const float v = x[e], t = gelu_t(v);
    d[e] *= 0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * GELU_K * (1.0f + 3.0f * GELU_A * v * v);
}

/* Per row: lse and (with targets) the row's loss; one warp per row. */
__global__ void k_xent(const float *logits, const int32_t *targets, float *lse, float *losses,
                       size_t N, int V) {
    const size_t row = (size_t)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    const int lane = threadIdx.x % 32;
    if (row >= N) return;
    const float *lr = logits + row * V;
    float m = -INFINITY;
    for (int v = lane; v < V; v += 32)
        m = fmaxf(m, lr[v]);
    m = warp_max(m);
    float s = 0.0f;
    for (int v = lane; v < V; v += 32)
        s += expf(lr[v] - m);
    s = warp_sum(s);
    if (lane == 0) {
        const float l = m + logf(s);
        lse[row] = l;
        if (targets) losses[row] = l - lr[targets[row]];
    }
}

/* Mean of n floats by one block, fixed order (double accumulation). */
__global__ void k_mean(const float *x, size_t n, float *out) {
    __shared__ double sh[1024];
    double s = 0.0;
    for (size_t i = threadIdx.x; i < n; i += blockDim.x)
        s += x[i];
    sh[threadIdx.x] = s;
    __syncthreads();
    for (int w = blockDim.x / 2; w > 0; w >>= 1) {
        if ((int)threadIdx.x < w) sh[threadIdx.x] += sh[threadIdx.x + w];
        __syncthreads();
    }
    if (threadIdx.x == 0) *out = (float)(sh[0] / (double)n);
}

/* dlogits = (softmax(logits) - onehot(target)) * scale. */
__global__ void k_xent_bwd(const float *logits, const int32_t *targets, const float *lse,
                           float *dlogits, size_t N, int V, float scale) {
    const size_t e = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= N * V) return;
    const size_t n = e / V;
    const int v = (int)(e % V);
    const float p = expf(logits[e] - lse[n]);
    dlogits[e] = (p - (v == targets[n] ? 1.0f : 0.0f)) * scale;
}

/* Embedding gradients. Token table, pass 1: thread (segment, c) adds its
 * rows' d into partial[seg, id, c] in row order (it alone owns that
 * column of that segment). */
__global__ void k_tok_grad_partial(const int32_t *ids, const float *d, size_t N, int C, int V,
                                   float *partial) {
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    const int seg = blockIdx.y;
    if (c >= C) return;
    float *p = partial + (size_t)seg * V * C;
    for (int v = 0; v < V; v++)
        p[(size_t)v * C + c] = 0.0f;
    const size_t per = (N + gridDim.y - 1) / gridDim.y;
    const size_t r0 = seg * per, r1 = r0 + per < N ? r0 + per : N;
    for (size_t n = r0; n < r1; n++)
        p[(size_t)ids[n] * C + c] += d[n * C + c];
}

__global__ void k_tok_grad_final(const float *partial, int segs, size_t VC, float *g) {
    const size_t e = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= VC) return;
    float s = 0.0f;
    for (int k = 0; k < segs; k++)
        s += partial[(size_t)k * VC + e];
    g[e] += s;
}

/* pos grad[t, c] += sum_b d[b, t, c], b in order. */
__global__ void k_pos_grad(const float *d, int B, int T, int C, float *g) {
    const size_t e = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= (size_t)T * C) return;
    float s = 0.0f;
    for (int b = 0; b < B; b++)
        s += d[(size_t)b * T * C + e];
    g[e] += s;
}

/* Sum of squares, pass 1: block k sums a fixed slice in double. */
__global__ void k_sumsq_partial(const float *x, size_t n, double *partial) {
    __shared__ double sh[256];
    const size_t per = (n + gridDim.x - 1) / gridDim.x;
    const size_t r0 = blockIdx.x * per, r1 = r0 + per < n ? r0 + per : n;
    double s = 0.0;
    for (size_t i = r0 + threadIdx.x; i < r1; i += blockDim.x)
        s += (double)x[i] * (double)x[i];
    sh[threadIdx.x] = s;
    __syncthreads();
    for (int w = blockDim.x / 2; w > 0; w >>= 1) {
        if ((int)threadIdx.x < w) sh[threadIdx.x] += sh[threadIdx.x + w];
        __syncthreads();
    }
    if (threadIdx.x == 0) partial[blockIdx.x] = sh[0];
}

__global__ void k_sum_double(const double *partial, int n, double *out) {
    if (threadIdx.x != 0 || blockIdx.x != 0) return;
    double s = 0.0;
    for (int i = 0; i < n; i++)
        s += partial[i];
    *out = s;
}

__global__ void k_scale(float *x, size_t n, float s) {
    const size_t e = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (e < n) x[e] *= s;
}

/* AdamW as attn_adamw_step (same float operations). */
__global__ void k_adamw(float *w, const float *g, float *m, float *v, size_t n, int decay,
                        float decay_f, float b1f, float omb1, float b2f, float omb2,
                        float bc2_sqrt, float neg_step, float eps) {
    const size_t k = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= n) return;
    float wk = w[k];
    if (decay) wk = wk * decay_f;
    const float gk = g[k];
    const float mk = m[k] * b1f + omb1 * gk;
    const float vk = v[k] * b2f + omb2 * (gk * gk);
    const float denom = sqrtf(vk) / bc2_sqrt + eps;
    w[k] = wk + neg_step * (mk / denom);
    m[k] = mk;
    v[k] = vk;
}

/* --------------------------------------------------------------- engine */

struct layer_off { /* offsets into the flat parameter buffer */
    size_t ln1_w, ln1_b, wq, wk, wv, bq, bk, bv, wo, bo, ln2_w, ln2_b, w1, b1, w2, b2;
};

struct layer_acts {
    float *x_in, *ln1, *ln1_mean, *ln1_rstd, *qkv, *atto, *lse, *x_mid, *ln2, *ln2_mean, *ln2_rstd,
        *h_pre, *h_post;
};

struct attn_cuda_gpt {
    attn_gpt_config cfg;
    attn_precision precision;
    int max_B, max_T, B, T;
    int n_params;
    size_t total;
    size_t *offset, *numel;
    int *ndim;
    float *params, *grads, *m, *v;
    size_t tok, pos, lnf_w, lnf_b, head;
    layer_off *lo;
    int qkv_packed; /* W_query, W_key, W_value adjacent: one GEMM */
    layer_acts *la;
    float *x_final, *lnf, *lnf_mean, *lnf_rstd, *logits, *lse, *losses, *loss_d;
    float *scratch_c, *d_resid, *d_tmp, *d_ln, *d_hidden, *d_qkv, *d_atto, *d_logits, *att_D;
    float *col_part, *col_part2, *tok_part;
    double *norm_part, *norm_d;
    int32_t *ids, *targets;
    int has_targets, dropout_used;
    attn_cuda_dropout drop;
    cublasHandle_t blas;
    cudaStream_t stream;
};

#define CU(call)                                                                                   \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess)                                                                     \
            return attn_fail(err, ATTN_ERR_STATE, "CUDA error %s at %s:%d", cudaGetErrorString(e_), \
                             __FILE__, __LINE__);                                                  \
    } while (0)
#define CB(call)                                                                                   \
    do {                                                                                           \
        cublasStatus_t s_ = (call);                                                                \
        if (s_ != CUBLAS_STATUS_SUCCESS)                                                           \
            return attn_fail(err, ATTN_ERR_STATE, "cuBLAS error %d at %s:%d", (int)s_, __FILE__,  \
                             __LINE__);                                                            \
    } while (0)
#define LAUNCHED() CU(cudaGetLastError())

static unsigned blocks(size_t n, unsigned t) { return (unsigned)((n + t - 1) / t); }

extern "C" attn_status attn_cuda_check(attn_error *err) {
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e == cudaSuccess && n > 0) return ATTN_OK;
    /* The runtime opens the driver itself: when it is not loaded now, it was
     * not found (a machine without the NVIDIA driver). */
    if (e != cudaSuccess && !dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD))
        return attn_fail(err, ATTN_ERR_STATE,
                         "no CUDA driver (libcuda.so.1 is not installed), so no CUDA device: %s",
                         cudaGetErrorString(e));
    return attn_fail(err, ATTN_ERR_STATE, "no CUDA device: %s",
                     e != cudaSuccess ? cudaGetErrorString(e) : "none found");
}

/* C = op(A) op(B) (+ beta C), column-major as cuBLAS sees it. */
static cublasStatus_t gemm(attn_cuda_gpt *g, cublasOperation_t ta, cublasOperation_t tb, int m,
                           int n, int k, const float *A, int lda, const float *B, int ldb,
                           float beta, float *Cm, int ldc) {
    const float one = 1.0f;
    const cublasComputeType_t ct = g->precision == ATTN_PRECISION_BF16
                                       ? CUBLAS_COMPUTE_32F_FAST_16BF
                                       : CUBLAS_COMPUTE_32F;
    return cublasGemmEx(g->blas, ta, tb, m, n, k, &one, A, CUDA_R_32F, lda, B, CUDA_R_32F, ldb,
                        &beta, Cm, CUDA_R_32F, ldc, ct, CUBLAS_GEMM_DEFAULT);
}

/* y (N, out; row stride ldy) = x (N, in; stride ldx) W^T (+ bias). */
static attn_status linear_fwd(attn_cuda_gpt *g, const float *x, int ldx, size_t w, size_t bias,
                              int has_bias, float *y, int ldy, int N, int in, int out,
                              attn_error *err) {
    CB(gemm(g, CUBLAS_OP_T, CUBLAS_OP_N, out, N, in, g->params + w, in, x, ldx, 0.0f, y, ldy));
    if (has_bias) {
        k_add_bias<<<blocks((size_t)N * out, 256), 256, 0, g->stream>>>(y, ldy, g->params + bias,
                                                                         (size_t)N, out);
        LAUNCHED();
    }
    return ATTN_OK;
}

/* out[c] += column sums of dy (N, C; stride ld) — fixed order. */
static attn_status colsum(attn_cuda_gpt *g, const float *dy, int ld, int N, int C, float *out,
                          attn_error *err) {
    dim3 grid(blocks((size_t)C, 128), COL_SEGMENTS);
    k_colsum_partial<<<grid, 128, 0, g->stream>>>(dy, ld, NULL, NULL, NULL, (size_t)N, C,
                                                  g->col_part, NULL);
    LAUNCHED();
    k_colsum_final<<<blocks((size_t)C, 128), 128, 0, g->stream>>>(g->col_part, COL_SEGMENTS, C,
                                                                   out);
    LAUNCHED();
    return ATTN_OK;
}

/* Gradients of a linear: dW += dy^T x, db += colsum(dy), dx (+)= dy W. */
static attn_status linear_bwd(attn_cuda_gpt *g, const float *x, int ldx, const float *dy, int ldy,
                              size_t w, size_t bias, int has_bias, float *dx, int lddx,
                              float dx_beta, int N, int in, int out, attn_error *err) {
    CB(gemm(g, CUBLAS_OP_N, CUBLAS_OP_T, in, out, N, x, ldx, dy, ldy, 1.0f, g->grads + w, in));
    if (has_bias) {
        attn_status s = colsum(g, dy, ldy, N, out, g->grads + bias, err);
        if (s) return s;
    }
    if (dx)
        CB(gemm(g, CUBLAS_OP_N, CUBLAS_OP_N, in, N, out, g->params + w, in, dy, ldy, dx_beta, dx,
                lddx));
    return ATTN_OK;
}

static attn_status layernorm_bwd(attn_cuda_gpt *g, const float *x, const float *mean,
                                 const float *rstd, size_t wofs, size_t bofs, const float *dy,
                                 float *dx, int N, int C, attn_error *err) {
    dim3 grid(blocks((size_t)C, 128), COL_SEGMENTS);
    k_colsum_partial<<<grid, 128, 0, g->stream>>>(dy, C, x, mean, rstd, (size_t)N, C, g->col_part,
                                                  g->col_part2);
    LAUNCHED();
    k_colsum_final<<<blocks((size_t)C, 128), 128, 0, g->stream>>>(g->col_part, COL_SEGMENTS, C,
                                                                   g->grads + wofs);
    LAUNCHED();
    k_colsum_final<<<blocks((size_t)C, 128), 128, 0, g->stream>>>(g->col_part2, COL_SEGMENTS, C,
                                                                   g->grads + bofs);
    LAUNCHED();
    k_layernorm_dx<<<blocks((size_t)N, 8), 256, 0, g->stream>>>(x, mean, rstd, g->params + wofs,
                                                                dy, dx, (size_t)N, C, 1);
    LAUNCHED();
    return ATTN_OK;
}

static drop_site site(const attn_cuda_gpt *g, int which) {
    drop_site d;
    d.k0 = (uint32_t)g->drop.seed;
    d.k1 = (uint32_t)(g->drop.seed >> 32);
    d.site = (uint32_t)which;
    d.step = (uint32_t)g->drop.step;
    const double p = g->dropout_used ? g->cfg.drop_rate : 0.0;
    d.keep_prob = 1.0 - p;
    d.scale = 1.0f / (float)(1.0 - p);
    return d;
}

static void *dev_alloc(size_t bytes, int *fail) {
    void *p = NULL;
    if (*fail) return NULL;
    if (cudaMalloc(&p, bytes ? bytes : 4) != cudaSuccess) {
        *fail = 1;
        return NULL;
    }
    return p;
}

extern "C" void attn_cuda_gpt_free(attn_cuda_gpt *g) {
    if (!g) return;
    void *bufs[] = {g->params, g->grads, g->m, g->v, g->x_final, g->lnf, g->lnf_mean, g->lnf_rstd,
                    g->logits, g->lse, g->losses, g->loss_d, g->scratch_c, g->d_resid, g->d_tmp,
                    g->d_ln, g->d_hidden, g->d_qkv, g->d_atto, g->d_logits, g->att_D, g->col_part,
                    g->col_part2, g->tok_part, g->norm_part, g->norm_d, g->ids, g->targets};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        if (bufs[i]) cudaFree(bufs[i]);
    if (g->la)
        for (int l = 0; l < g->cfg.n_layers; l++) {
            layer_acts *a = &g->la[l];
            float *lb[] = {a->x_in, a->ln1, a->ln1_mean, a->ln1_rstd, a->qkv, a->atto, a->lse,
                           a->x_mid, a->ln2, a->ln2_mean, a->ln2_rstd, a->h_pre, a->h_post};
            for (size_t i = 0; i < sizeof lb / sizeof lb[0]; i++)
                if (lb[i]) cudaFree(lb[i]);
        }
    if (g->blas) cublasDestroy(g->blas);
    if (g->stream) cudaStreamDestroy(g->stream);
    free(g->la);
    free(g->lo);
    free(g->offset);
    free(g->numel);
    free(g->ndim);
    free(g);
}

static size_t find_off(const attn_gpt *m, const attn_cuda_gpt *g, const char *name, int *missing) {
    const attn_param_list *pl = &m->params;
    for (int i = 0; i < pl->count; i++)
        if (strcmp(pl->items[i].name, name) == 0) return g->offset[i];
    *missing = 1;
    return 0;
}

extern "C" attn_status attn_cuda_gpt_create(attn_cuda_gpt **out, const attn_gpt *m, int max_B,
                                            int max_T, attn_precision precision,
                                            attn_error *err) {
    *out = NULL;
    attn_status st = attn_cuda_check(err);
    if (st) return st;
    const attn_gpt_config *c = &m->cfg;
    if (max_B < 1 || max_T < 1 || max_T > c->context_length)
        return attn_fail(err, ATTN_ERR_SHAPE, "GPU workspace (B %d, T %d) must have B >= 1 and "
                         "1 <= T <= context_length %d", max_B, max_T, c->context_length);
    const int hd = c->emb_dim / c->n_heads;
    if (hd > 128)
        return attn_fail(err, ATTN_ERR_INVALID_ARG,
                         "the CUDA attention kernel supports head_dim <= 128, not %d", hd);
    attn_cuda_gpt *g = (attn_cuda_gpt *)calloc(1, sizeof *g);
    if (!g) return attn_fail(err, ATTN_ERR_NOMEM, "out of memory for the CUDA engine");
    g->cfg = *c;
    g->precision = precision;
    g->max_B = max_B;
    g->max_T = max_T;
    const attn_param_list *pl = &m->params;
    g->n_params = pl->count;
    g->offset = (size_t *)calloc((size_t)pl->count + 1, sizeof(size_t));
    g->numel = (size_t *)calloc((size_t)pl->count + 1, sizeof(size_t));
    g->ndim = (int *)calloc((size_t)pl->count + 1, sizeof(int));
    g->lo = (layer_off *)calloc((size_t)c->n_layers, sizeof(layer_off));
    g->la = (layer_acts *)calloc((size_t)c->n_layers, sizeof(layer_acts));
    if (!g->offset || !g->numel || !g->ndim || !g->lo || !g->la) {
        attn_cuda_gpt_free(g);
        return attn_fail(err, ATTN_ERR_NOMEM, "out of memory for the CUDA engine");
    }
    size_t off = 0;
    for (int i = 0; i < pl->count; i++) {
        g->offset[i] = off;
        g->numel[i] = pl->items[i].numel;
        g->ndim[i] = pl->items[i].ndim;
        off += pl->items[i].numel;
    }
    g->total = off;
    int missing = 0;
    g->tok = find_off(m, g, "tok_emb.weight", &missing);
    g->pos = find_off(m, g, "pos_emb.weight", &missing);
    g->lnf_w = find_off(m, g, "final_norm.scale", &missing);
    g->lnf_b = find_off(m, g, "final_norm.shift", &missing);
    g->head = find_off(m, g, "out_head.weight", &missing);
    const size_t C = (size_t)c->emb_dim;
    g->qkv_packed = !c->qkv_bias;
    for (int l = 0; l < c->n_layers; l++) {
        char nm[ATTN_PARAM_NAME_MAX];
        layer_off *o = &g->lo[l];
#define OFF(field, suffix)                                                                         \
    snprintf(nm, sizeof nm, "trf_blocks.%d.%s", l, suffix);                                        \
    o->field = find_off(m, g, nm, &missing)
        OFF(ln1_w, "norm1.scale");
        OFF(ln1_b, "norm1.shift");
        OFF(ln2_w, "norm2.scale");
        OFF(ln2_b, "norm2.shift");
        OFF(wq, "att.W_query.weight");
        OFF(wk, "att.W_key.weight");
        OFF(wv, "att.W_value.weight");
        OFF(wo, "att.out_proj.weight");
        OFF(bo, "att.out_proj.bias");
        OFF(w1, "ff.layers.0.weight");
        OFF(b1, "ff.layers.0.bias");
        OFF(w2, "ff.layers.2.weight");
        OFF(b2, "ff.layers.2.bias");
        if (c->qkv_bias) {
            OFF(bq, "att.W_query.bias");
            OFF(bk, "att.W_key.bias");
            OFF(bv, "att.W_value.bias");
        }
#undef OFF
        if (o->wk != o->wq + C * C || o->wv != o->wk + C * C) g->qkv_packed = 0;
    }
    if (missing) {
        attn_cuda_gpt_free(g);
        return attn_fail(err, ATTN_ERR_STATE, "the model's parameter list is not the GPT's");
    }
    const size_t N = (size_t)max_B * (size_t)max_T, V = (size_t)c->vocab_size;
    const size_t H = (size_t)c->n_heads;
    const size_t F = sizeof(float);
    int fail = 0;
    if (cudaStreamCreate(&g->stream) != cudaSuccess) fail = 1;
    if (!fail && cublasCreate(&g->blas) != CUBLAS_STATUS_SUCCESS) fail = 1;
    if (!fail) {
        cublasSetStream(g->blas, g->stream);
        /* plain fp32: no TF32 unless bf16 was asked for */
        cublasSetMathMode(g->blas, CUBLAS_PEDANTIC_MATH);
        if (precision == ATTN_PRECISION_BF16) cublasSetMathMode(g->blas, CUBLAS_DEFAULT_MATH);
    }
    g->params = (float *)dev_alloc(g->total * F, &fail);
    g->grads = (float *)dev_alloc(g->total * F, &fail);
    g->m = (float *)dev_alloc(g->total * F, &fail);
    g->v = (float *)dev_alloc(g->total * F, &fail);
    for (int l = 0; l < c->n_layers; l++) {
        layer_acts *a = &g->la[l];
        a->x_in = (float *)dev_alloc(N * C * F, &fail);
        a->ln1 = (float *)dev_alloc(N * C * F, &fail);
        a->ln1_mean = (float *)dev_alloc(N * F, &fail);
        a->ln1_rstd = (float *)dev_alloc(N * F, &fail);
        a->qkv = (float *)dev_alloc(N * 3 * C * F, &fail);
        a->atto = (float *)dev_alloc(N * C * F, &fail);
        a->lse = (float *)dev_alloc(N * H * F, &fail);
        a->x_mid = (float *)dev_alloc(N * C * F, &fail);
        a->ln2 = (float *)dev_alloc(N * C * F, &fail);
        a->ln2_mean = (float *)dev_alloc(N * F, &fail);
        a->ln2_rstd = (float *)dev_alloc(N * F, &fail);
        a->h_pre = (float *)dev_alloc(N * 4 * C * F, &fail);
        a->h_post = (float *)dev_alloc(N * 4 * C * F, &fail);
    }
    g->x_final = (float *)dev_alloc(N * C * F, &fail);
    g->lnf = (float *)dev_alloc(N * C * F, &fail);
    g->lnf_mean = (float *)dev_alloc(N * F, &fail);
    g->lnf_rstd = (float *)dev_alloc(N * F, &fail);
    g->logits = (float *)dev_alloc(N * V * F, &fail);
    g->lse = (float *)dev_alloc(N * F, &fail);
    g->losses = (float *)dev_alloc(N * F, &fail);
    g->loss_d = (float *)dev_alloc(F, &fail);
    g->scratch_c = (float *)dev_alloc(N * C * F, &fail);
    g->d_resid = (float *)dev_alloc(N * C * F, &fail);
    g->d_tmp = (float *)dev_alloc(N * C * F, &fail);
    g->d_ln = (float *)dev_alloc(N * C * F, &fail);
    g->d_hidden = (float *)dev_alloc(N * 4 * C * F, &fail);
    g->d_qkv = (float *)dev_alloc(N * 3 * C * F, &fail);
    g->d_atto = (float *)dev_alloc(N * C * F, &fail);
    g->d_logits = (float *)dev_alloc(N * V * F, &fail);
    g->att_D = (float *)dev_alloc(N * H * F, &fail);
    const size_t widest = 4 * C > V ? 4 * C : V;
    g->col_part = (float *)dev_alloc(COL_SEGMENTS * widest * F, &fail);
    g->col_part2 = (float *)dev_alloc(COL_SEGMENTS * widest * F, &fail);
    g->tok_part = (float *)dev_alloc((size_t)COL_SEGMENTS * V * C * F, &fail);
    g->norm_part = (double *)dev_alloc(1024 * sizeof(double), &fail);
    g->norm_d = (double *)dev_alloc(sizeof(double), &fail);
    g->ids = (int32_t *)dev_alloc(N * sizeof(int32_t), &fail);
    g->targets = (int32_t *)dev_alloc(N * sizeof(int32_t), &fail);
    if (fail) {
        attn_cuda_gpt_free(g);
        return attn_fail(err, ATTN_ERR_NOMEM,
                         "cannot allocate the CUDA engine for (B %d, T %d) on the GPU", max_B,
                         max_T);
    }
    if (cudaMemset(g->m, 0, g->total * F) != cudaSuccess ||
        cudaMemset(g->v, 0, g->total * F) != cudaSuccess ||
        cudaMemset(g->grads, 0, g->total * F) != cudaSuccess) {
        attn_cuda_gpt_free(g);
        return attn_fail(err, ATTN_ERR_STATE, "cudaMemset failed");
    }
    st = attn_cuda_gpt_upload(g, m, NULL, err);
    if (st) {
        attn_cuda_gpt_free(g);
        return st;
    }
    *out = g;
    return ATTN_OK;
}

extern "C" attn_status attn_cuda_gpt_upload(attn_cuda_gpt *g, const attn_gpt *m,
                                            const attn_adamw *opt, attn_error *err) {
    const attn_param_list *pl = &m->params;
    if (pl->count != g->n_params || (opt && opt->total != g->total))
        return attn_fail(err, ATTN_ERR_STATE, "model/optimizer do not match the CUDA engine");
    for (int i = 0; i < pl->count; i++) {
        const attn_param *p = &pl->items[i];
        if (p->numel != g->numel[i])
            return attn_fail(err, ATTN_ERR_SHAPE, "parameter %s does not match the CUDA engine",
                             p->name);
        CU(cudaMemcpy(g->params + g->offset[i], p->data, p->numel * sizeof(float),
                      cudaMemcpyHostToDevice));
    }
    if (opt) {
        CU(cudaMemcpy(g->m, opt->m, g->total * sizeof(float), cudaMemcpyHostToDevice));
        CU(cudaMemcpy(g->v, opt->v, g->total * sizeof(float), cudaMemcpyHostToDevice));
    }
    return ATTN_OK;
}

extern "C" attn_status attn_cuda_gpt_download(attn_cuda_gpt *g, const attn_gpt *m,
                                              const attn_adamw *opt, attn_error *err) {
    const attn_param_list *pl = &m->params;
    if (pl->count != g->n_params || (opt && opt->total != g->total))
        return attn_fail(err, ATTN_ERR_STATE, "model/optimizer do not match the CUDA engine");
    CU(cudaStreamSynchronize(g->stream));
    for (int i = 0; i < pl->count; i++)
        CU(cudaMemcpy(pl->items[i].data, g->params + g->offset[i], g->numel[i] * sizeof(float),
                      cudaMemcpyDeviceToHost));
    if (opt) {
        CU(cudaMemcpy(opt->m, g->m, g->total * sizeof(float), cudaMemcpyDeviceToHost));
        CU(cudaMemcpy(opt->v, g->v, g->total * sizeof(float), cudaMemcpyDeviceToHost));
    }
    return ATTN_OK;
}

extern "C" attn_status attn_cuda_gpt_download_grads(attn_cuda_gpt *g, const attn_gpt *m,
                                                    attn_error *err) {
    const attn_param_list *pl = &m->params;
    if (pl->count != g->n_params)
        return attn_fail(err, ATTN_ERR_STATE, "model does not match the CUDA engine");
    CU(cudaStreamSynchronize(g->stream));
    for (int i = 0; i < pl->count; i++)
        if (pl->items[i].grad)
            CU(cudaMemcpy(pl->items[i].grad, g->grads + g->offset[i],
                          g->numel[i] * sizeof(float), cudaMemcpyDeviceToHost));
    return ATTN_OK;
}

static attn_status check_ids(const attn_cuda_gpt *g, const int32_t *v, size_t N, int T,
                             const char *what, attn_error *err) {
    for (size_t i = 0; i < N; i++)
        if (v[i] < 0 || v[i] >= g->cfg.vocab_size)
            return attn_fail(err, ATTN_ERR_INVALID_ARG,
                             "%s %ld at (batch %d, position %d) is outside [0, vocab_size %d)",
                             what, (long)v[i], (int)(i / (size_t)T), (int)(i % (size_t)T),
                             g->cfg.vocab_size);
    return ATTN_OK;
}

extern "C" attn_status attn_cuda_gpt_forward(attn_cuda_gpt *g, const int32_t *ids,
                                             const int32_t *targets, int B, int T,
                                             const attn_cuda_dropout *drop, float *loss,
                                             attn_error *err) {
    g->has_targets = 0;
    if (B < 1 || T < 1 || B > g->max_B || T > g->max_T)
        return attn_fail(err, ATTN_ERR_SHAPE,
                         "(B %d, T %d) does not fit the CUDA workspace (B <= %d, T <= %d)", B, T,
                         g->max_B, g->max_T);
    const size_t N = (size_t)B * (size_t)T;
    attn_status st = check_ids(g, ids, N, T, "token id", err);
    if (!st && targets) st = check_ids(g, targets, N, T, "target", err);
    if (st) return st;
    const attn_gpt_config *c = &g->cfg;
    const int C = c->emb_dim, V = c->vocab_size, H = c->n_heads, hd = C / H;
    const int Ni = (int)N;
    g->B = B;
    g->T = T;
    g->dropout_used = drop != NULL && c->drop_rate > 0;
    if (drop) g->drop = *drop;
    CU(cudaMemcpyAsync(g->ids, ids, N * sizeof(int32_t), cudaMemcpyHostToDevice, g->stream));
    if (targets)
        CU(cudaMemcpyAsync(g->targets, targets, N * sizeof(int32_t), cudaMemcpyHostToDevice,
                           g->stream));
    float *x = g->la[0].x_in;
    k_embed<<<blocks(N * C, 256), 256, 0, g->stream>>>(g->ids, g->params + g->tok,
                                                       g->params + g->pos, x, N, T, C, site(g, 0));
    LAUNCHED();
    for (int l = 0; l < c->n_layers; l++) {
        layer_acts *a = &g->la[l];
        const layer_off *o = &g->lo[l];
        float *x_out = l + 1 < c->n_layers ? g->la[l + 1].x_in : g->x_final;
        k_layernorm<<<blocks(N, 8), 256, 0, g->stream>>>(a->x_in, g->params + o->ln1_w,
                                                         g->params + o->ln1_b, a->ln1, a->ln1_mean,
                                                         a->ln1_rstd, N, C);
        LAUNCHED();
        if (g->qkv_packed) {
            if ((st = linear_fwd(g, a->ln1, C, o->wq, 0, 0, a->qkv, 3 * C, Ni, C, 3 * C, err)))
                return st;
        } else {
            const size_t w[3] = {o->wq, o->wk, o->wv}, b[3] = {o->bq, o->bk, o->bv};
            for (int k = 0; k < 3; k++)
                if ((st = linear_fwd(g, a->ln1, C, w[k], b[k], c->qkv_bias, a->qkv + k * C, 3 * C,
                                     Ni, C, C, err)))
                    return st;
        }
        CU(attn_cu_flash_forward(a->qkv, 3 * C, a->atto, C, a->lse, B, T, H, hd, site(g, 1 + 3 * l),
                                 g->stream));
        if ((st = linear_fwd(g, a->atto, C, o->wo, o->bo, 1, g->scratch_c, C, Ni, C, C, err)))
            return st;
        k_residual<<<blocks(N * C, 256), 256, 0, g->stream>>>(a->x_in, g->scratch_c, a->x_mid,
                                                              N * C, site(g, 2 + 3 * l));
        LAUNCHED();
        k_layernorm<<<blocks(N, 8), 256, 0, g->stream>>>(a->x_mid, g->params + o->ln2_w,
                                                         g->params + o->ln2_b, a->ln2, a->ln2_mean,
                                                         a->ln2_rstd, N, C);
        LAUNCHED();
        if ((st = linear_fwd(g, a->ln2, C, o->w1, o->b1, 1, a->h_pre, 4 * C, Ni, C, 4 * C, err)))
            return st;
        k_gelu<<<blocks(N * 4 * C, 256), 256, 0, g->stream>>>(a->h_pre, a->h_post, N * 4 * C);
        LAUNCHED();
        if ((st = linear_fwd(g, a->h_post, 4 * C, o->w2, o->b2, 1, g->scratch_c, C, Ni, 4 * C, C,
                             err)))
            return st;
        k_residual<<<blocks(N * C, 256), 256, 0, g->stream>>>(a->x_mid, g->scratch_c, x_out,
                                                              N * C, site(g, 3 + 3 * l));
        LAUNCHED();
    }
    k_layernorm<<<blocks(N, 8), 256, 0, g->stream>>>(g->x_final, g->params + g->lnf_w,
                                                     g->params + g->lnf_b, g->lnf, g->lnf_mean,
                                                     g->lnf_rstd, N, C);
    LAUNCHED();
    if ((st = linear_fwd(g, g->lnf, C, g->head, 0, 0, g->logits, V, Ni, C, V, err))) return st;
    k_xent<<<blocks(N, 8), 256, 0, g->stream>>>(g->logits, targets ? g->targets : NULL, g->lse,
                                                g->losses, N, V);
    LAUNCHED();
    float lv = NAN;
    if (targets) {
        k_mean<<<1, 1024, 0, g->stream>>>(g->losses, N, g->loss_d);
        LAUNCHED();
        CU(cudaMemcpyAsync(&lv, g->loss_d, sizeof lv, cudaMemcpyDeviceToHost, g->stream));
        CU(cudaStreamSynchronize(g->stream));
        g->has_targets = 1;
    }
    if (loss) *loss = lv;
    return ATTN_OK;
}

extern "C" attn_status attn_cuda_gpt_logits(attn_cuda_gpt *g, size_t row0, size_t n, float *out,
                                            attn_error *err) {
    const size_t V = (size_t)g->cfg.vocab_size, N = (size_t)g->B * (size_t)g->T;
    if (row0 + n > N)
        return attn_fail(err, ATTN_ERR_SHAPE, "logit rows [%zu, %zu) outside the last forward's %zu",
                         row0, row0 + n, N);
    CU(cudaMemcpyAsync(out, g->logits + row0 * V, n * V * sizeof(float), cudaMemcpyDeviceToHost,
                       g->stream));
    CU(cudaStreamSynchronize(g->stream));
    return ATTN_OK;
}

extern "C" attn_status attn_cuda_gpt_backward(attn_cuda_gpt *g, attn_error *err) {
    if (!g->has_targets)
        return attn_fail(err, ATTN_ERR_STATE,
                         "backward needs a forward pass with targets (no loss to differentiate)");
    const attn_gpt_config *c = &g->cfg;
    const int B = g->B, T = g->T, C = c->emb_dim, V = c->vocab_size, H = c->n_heads, hd = C / H;
    const size_t N = (size_t)B * (size_t)T, NC = N * (size_t)C;
    const int Ni = (int)N;
    attn_status st;
    CU(cudaMemsetAsync(g->grads, 0, g->total * sizeof(float), g->stream));
    k_xent_bwd<<<blocks(N * V, 256), 256, 0, g->stream>>>(g->logits, g->targets, g->lse,
                                                          g->d_logits, N, V, 1.0f / (float)N);
    LAUNCHED();
    if ((st = linear_bwd(g, g->lnf, C, g->d_logits, V, g->head, 0, 0, g->d_ln, C, 0.0f, Ni, C, V,
                         err)))
        return st;
    CU(cudaMemsetAsync(g->d_resid, 0, NC * sizeof(float), g->stream));
    if ((st = layernorm_bwd(g, g->x_final, g->lnf_mean, g->lnf_rstd, g->lnf_w, g->lnf_b, g->d_ln,
                            g->d_resid, Ni, C, err)))
        return st;
    for (int l = c->n_layers - 1; l >= 0; l--) {
        layer_acts *a = &g->la[l];
        const layer_off *o = &g->lo[l];
        /* x_out = x_mid + drop(ff(norm2(x_mid))) */
        const float *dff = g->d_resid;
        if (g->dropout_used) {
            k_dropout_bwd<<<blocks(NC, 256), 256, 0, g->stream>>>(g->d_resid, g->d_tmp, NC,
                                                                  site(g, 3 + 3 * l));
            LAUNCHED();
            dff = g->d_tmp;
        }
        if ((st = linear_bwd(g, a->h_post, 4 * C, dff, C, o->w2, o->b2, 1, g->d_hidden, 4 * C, 0.0f,
                             Ni, 4 * C, C, err)))
            return st;
        k_gelu_bwd<<<blocks(N * 4 * C, 256), 256, 0, g->stream>>>(a->h_pre, g->d_hidden,
                                                                   N * 4 * C);
        LAUNCHED();
        if ((st = linear_bwd(g, a->ln2, C, g->d_hidden, 4 * C, o->w1, o->b1, 1, g->d_ln, C, 0.0f,
                             Ni, C, 4 * C, err)))
            return st;
        if ((st = layernorm_bwd(g, a->x_mid, a->ln2_mean, a->ln2_rstd, o->ln2_w, o->ln2_b, g->d_ln,
                                g->d_resid, Ni, C, err)))
            return st;
        /* x_mid = x_in + drop(att(norm1(x_in))) */
        const float *datt = g->d_resid;
        if (g->dropout_used) {
            k_dropout_bwd<<<blocks(NC, 256), 256, 0, g->stream>>>(g->d_resid, g->d_tmp, NC,
                                                                  site(g, 2 + 3 * l));
            LAUNCHED();
            datt = g->d_tmp;
        }
        if ((st = linear_bwd(g, a->atto, C, datt, C, o->wo, o->bo, 1, g->d_atto, C, 0.0f, Ni, C, C,
                             err)))
            return st;
        CU(attn_cu_flash_backward(a->qkv, 3 * C, a->atto, g->d_atto, C, a->lse, g->att_D, g->d_qkv,
                                  B, T, H, hd, site(g, 1 + 3 * l), g->stream));
        if (g->qkv_packed) {
            if ((st = linear_bwd(g, a->ln1, C, g->d_qkv, 3 * C, o->wq, 0, 0, g->d_ln, C, 0.0f, Ni,
                                 C, 3 * C, err)))
                return st;
        } else {
            const size_t w[3] = {o->wq, o->wk, o->wv}, b[3] = {o->bq, o->bk, o->bv};
            for (int k = 0; k < 3; k++)
                if ((st = linear_bwd(g, a->ln1, C, g->d_qkv + k * C, 3 * C, w[k], b[k],
                                     c->qkv_bias, g->d_ln, C, k ? 1.0f : 0.0f, Ni, C, C, err)))
                    return st;
        }
        if ((st = layernorm_bwd(g, a->x_in, a->ln1_mean, a->ln1_rstd, o->ln1_w, o->ln1_b, g->d_ln,
                                g->d_resid, Ni, C, err)))
            return st;
    }
    const float *demb = g->d_resid;
    if (g->dropout_used) {
        k_dropout_bwd<<<blocks(NC, 256), 256, 0, g->stream>>>(g->d_resid, g->d_tmp, NC, site(g, 0));
        LAUNCHED();
        demb = g->d_tmp;
    }
    dim3 grid(blocks((size_t)C, 128), COL_SEGMENTS);
    k_tok_grad_partial<<<grid, 128, 0, g->stream>>>(g->ids, demb, N, C, V, g->tok_part);
    LAUNCHED();
    k_tok_grad_final<<<blocks((size_t)V * C, 256), 256, 0, g->stream>>>(
        g->tok_part, COL_SEGMENTS, (size_t)V * C, g->grads + g->tok);
    LAUNCHED();
    k_pos_grad<<<blocks((size_t)T * C, 256), 256, 0, g->stream>>>(demb, B, T, C,
                                                                  g->grads + g->pos);
    LAUNCHED();
    return ATTN_OK;
}

extern "C" attn_status attn_cuda_gpt_clip_grad_norm(attn_cuda_gpt *g, double max_norm,
                                                    double *norm, attn_error *err) {
    k_sumsq_partial<<<1024, 256, 0, g->stream>>>(g->grads, g->total, g->norm_part);
    LAUNCHED();
    k_sum_double<<<1, 32, 0, g->stream>>>(g->norm_part, 1024, g->norm_d);
    LAUNCHED();
    double ss = 0;
    CU(cudaMemcpyAsync(&ss, g->norm_d, sizeof ss, cudaMemcpyDeviceToHost, g->stream));
    CU(cudaStreamSynchronize(g->stream));
    const double nrm = sqrt(ss);
    if (max_norm > 0 && nrm > max_norm) {
        const float coef = (float)max_norm / ((float)nrm + 1e-6f);
        k_scale<<<blocks(g->total, 256), 256, 0, g->stream>>>(g->grads, g->total, coef);
        LAUNCHED();
    }
    if (norm) *norm = nrm;
    return ATTN_OK;
}

extern "C" attn_status attn_cuda_gpt_adamw_step(attn_cuda_gpt *g, attn_adamw *opt, double lr,
                                                attn_error *err) {
    if (opt->total != g->total || opt->n_params != g->n_params)
        return attn_fail(err, ATTN_ERR_STATE, "AdamW was set up for another model");
    opt->step++;
    const double b1 = opt->cfg.beta1, b2 = opt->cfg.beta2, t = (double)opt->step;
    const float decay_f = (float)(1.0 - lr * opt->cfg.weight_decay);
    const float bc2_sqrt = (float)sqrt(1.0 - pow(b2, t));
    const float neg_step = (float)(-(lr / (1.0 - pow(b1, t))));
    for (int i = 0; i < g->n_params; i++) {
        const size_t o = g->offset[i], n = g->numel[i];
        const int decay = opt->decay[i] && opt->cfg.weight_decay != 0;
        k_adamw<<<blocks(n, 256), 256, 0, g->stream>>>(
            g->params + o, g->grads + o, g->m + o, g->v + o, n, decay, decay_f, (float)b1,
            (float)(1.0 - b1), (float)b2, (float)(1.0 - b2), bc2_sqrt, neg_step,
            (float)opt->cfg.eps);
        LAUNCHED();
    }
    return ATTN_OK;
}

/* ------------------------------------------------ attention on host data */

extern "C" attn_status attn_cuda_attention(const float *qkv, int B, int T, int H, int hd,
                                           double drop_p, const attn_cuda_dropout *drop,
                                           float *out, float *lse, const float *d_out,
                                           float *d_qkv, attn_error *err) {
    attn_status st = attn_cuda_check(err);
    if (st) return st;
    if (B < 1 || T < 1 || H < 1 || hd < 1 || hd > 128)
        return attn_fail(err, ATTN_ERR_SHAPE,
                         "attention shape (B %d, T %d, H %d, hd %d) needs all >= 1, hd <= 128", B,
                         T, H, hd);
    const size_t N = (size_t)B * T, C = (size_t)H * hd, F = sizeof(float);
    float *dq = NULL, *dout_d = NULL, *dlse = NULL, *ddo = NULL, *ddqkv = NULL, *dD = NULL;
    int fail = 0;
    dq = (float *)dev_alloc(N * 3 * C * F, &fail);
    dout_d = (float *)dev_alloc(N * C * F, &fail);
    dlse = (float *)dev_alloc(N * H * F, &fail);
    if (d_out) {
        ddo = (float *)dev_alloc(N * C * F, &fail);
        ddqkv = (float *)dev_alloc(N * 3 * C * F, &fail);
        dD = (float *)dev_alloc(N * H * F, &fail);
    }
    drop_site ds;
    memset(&ds, 0, sizeof ds);
    ds.keep_prob = drop && drop_p > 0 ? 1.0 - drop_p : 1.0;
    ds.scale = drop && drop_p > 0 ? 1.0f / (float)(1.0 - drop_p) : 1.0f;
    if (drop) {
        ds.k0 = (uint32_t)drop->seed;
        ds.k1 = (uint32_t)(drop->seed >> 32);
        ds.step = (uint32_t)drop->step;
    }
    ds.site = 1;
    cudaError_t e = fail ? cudaErrorMemoryAllocation : cudaSuccess;
    if (!e) e = cudaMemcpy(dq, qkv, N * 3 * C * F, cudaMemcpyHostToDevice);
    if (!e) e = attn_cu_flash_forward(dq, (int)(3 * C), dout_d, (int)C, dlse, B, T, H, hd, ds, 0);
    if (!e && d_out) e = cudaMemcpy(ddo, d_out, N * C * F, cudaMemcpyHostToDevice);
    if (!e && d_out)
        e = attn_cu_flash_backward(dq, (int)(3 * C), dout_d, ddo, (int)C, dlse, dD, ddqkv, B, T, H,
                                   hd, ds, 0);
    if (!e) e = cudaDeviceSynchronize();
    if (!e) e = cudaMemcpy(out, dout_d, N * C * F, cudaMemcpyDeviceToHost);
    if (!e && lse) e = cudaMemcpy(lse, dlse, N * H * F, cudaMemcpyDeviceToHost);
    if (!e && d_out) e = cudaMemcpy(d_qkv, ddqkv, N * 3 * C * F, cudaMemcpyDeviceToHost);
    float *all[] = {dq, dout_d, dlse, ddo, ddqkv, dD};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        if (all[i]) cudaFree(all[i]);
    if (e) return attn_fail(err, ATTN_ERR_STATE, "CUDA attention failed: %s", cudaGetErrorString(e));
    return ATTN_OK;
}
