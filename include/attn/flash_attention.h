/* attn/flash_attention.h — fused causal attention (FlashAttention-style) on CPU.
 *
 * Computes, for every batch b and head h, the chapter's
 *     context = dropout(softmax(masked(Q K^T) / sqrt(head_dim))) V
 * (with a sliding window, soft-cap and ALiBi when the problem asks:
 * attn/attention.h's scores)
 * without ever holding a (T, T) matrix: Q is cut into query tiles and K/V
 * into key tiles sized to the caches; an online softmax keeps a running row
 * max and sum and rescales the partial output; tiles above the diagonal are
 * skipped and only diagonal tiles are masked. The forward saves one
 * log-sum-exp per row; the backward recomputes the probabilities tile by tile
 * from it and D = rowsum(dO * O). Memory is O(B * T * H * head_dim).
 *
 * Layout: Q, K, V, O and their gradients are (B, T, H, head_dim) views with a
 * row stride, so the packed projection (B, T, 3 * d_out) of a
 * MultiHeadAttention can be used in place: element (b, t, h, d) of Q is
 * q[(b * T + t) * ld_q + h * head_dim + d]. The LSE is (B, H, T), contiguous.
 *
 * Dropout (on the attention weights, as nn.Dropout in the book's module) is
 * applied inside the kernel and reproduces PyTorch's mask bit for bit, for
 * any thread count and tile size:
 *   - torch-mkl: the (B, H, T, T) mask is the MCG31 stream
 *     x_k = a^k * x0 mod (2^31 - 1) over the flat index k, so every tile jumps
 *     straight to its own elements (modular exponentiation); nothing stored.
 *   - torch-cpu: MT19937 has no cheap jump-ahead, so the mask for the whole
 *     (B, H, T, T) tensor is drawn sequentially at attn_flash_dropout_draw and
 *     kept packed at 1 bit per element (B * H * T * T / 8 bytes).
 *   - given (ATTN_STREAM_GIVEN, attn_dropout_given): the caller's mask,
 *     packed into the same bits; or fill bits yourself (stream GIVEN, bits
 *     LSB first over the flat (B, H, T, T) order, p, B, H, T set).
 * Either way the generator is left exactly where PyTorch's dropout leaves it.
 *
 * Threads: OpenMP. The forward runs (batch, head, query tile) tasks with
 * dynamic scheduling; the backward runs one task per (batch, head), its key
 * tiles in order. Every output and gradient is bit-identical for any thread
 * count (tests/train_threads.sh trains through it at 1, 2 and 3 threads).
 *
 * SIMD: AVX-512 and AVX2+FMA micro-kernels are chosen at run time
 * (attn/cpu.h); a portable C path is always available. The environment
 * variable ATTN_SIMD caps the paths (attn/cpu.h): AUTO takes the best one
 * under the cap, and a path above it is refused. */
#ifndef ATTN_FLASH_ATTENTION_H
#define ATTN_FLASH_ATTENTION_H

#include <stddef.h>
#include <stdint.h>

#include "attn/attention.h"
#include "attn/cpu.h" /* attn_simd, attn_default_threads */
#include "attn/dropout.h"
#include "attn/engine.h"
#include "attn/rng.h"
#include "attn/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct attn_flash_options {
    int threads;          /* <= 0: attn_default_threads() */
    attn_simd simd;       /* ATTN_SIMD_AUTO */
    int block_q, block_k; /* tile sizes; <= 0: defaults (64, 64) */
    /* ATTN_PRECISION_FP32 (0, the exact reference) or _BF16: Q, K, V, dO and
     * the probabilities rounded to bf16 tile by tile, every product
     * accumulated in fp32 (AVX512-BF16 vdpbf16ps, whatever simd says);
     * softmax, LSE, D and all outputs stay fp32. BF16 on a CPU without
     * AVX512-BF16 fails with attn_precision_check's message. */
    attn_precision precision;
} attn_flash_options;

/* The micro-kernels opt selects on this CPU under ATTN_SIMD: "generic",
 * "avx2" or "avx512"; with precision bf16 "avx512-bf16" or "amx" (its
 * products; softmax on the fp32 path). NULL when attn_flash_forward would
 * refuse opt here. For reports (`attn bench mha`'s kernels=). */
const char *attn_flash_kernel_path(const attn_flash_options *opt);

/* The dropout of one forward pass, replayed by its backward. Zero-initialise
 * it (or p = 0) for no dropout. */
typedef struct attn_flash_dropout {
    double p; /* 0: no dropout */
    attn_dropout_stream stream;
    int B, H, T;
    uint32_t x0;     /* torch-mkl: the MCG31 seed drawn from the generator */
    uint8_t *bits;   /* torch-cpu, given: keep bits, flat (B, H, T, T) order, LSB first */
    size_t bits_cap; /* bytes allocated for bits (reused across draws) */
} attn_flash_dropout;

/* Draw the mask of nn.Dropout(p) applied to a (B, H, T, T) tensor, consuming
 * from rng exactly what PyTorch would (nothing when p == 0). */
attn_status attn_flash_dropout_draw(attn_flash_dropout *d, attn_rng *rng,
                                    attn_dropout_stream stream, double p, int B, int H, int T,
                                    attn_error *err);
void attn_flash_dropout_free(attn_flash_dropout *d);
/* Whether element (b, h, i, j) of the drawn mask is kept (tests, tools). */
int attn_flash_dropout_keep(const attn_flash_dropout *d, int b, int h, int i, int j);
/* The whole mask as B * H * T * T bytes (1 = kept), in memory order, as
 * attn_dropout_mask would have written it. O(B H T^2): for inspection only. */
void attn_flash_dropout_expand(const attn_flash_dropout *d, uint8_t *keep);

/* Scratch reused across calls; zero-initialise, free with
 * attn_flash_workspace_free. Grows when a call needs more. */
typedef struct attn_flash_workspace {
    void *mem;
    size_t bytes;
} attn_flash_workspace;
void attn_flash_workspace_free(attn_flash_workspace *ws);

/* One attention problem: inputs, forward output and the saved LSE. */
typedef struct attn_flash_problem {
    int B, T, H, head_dim;
    const float *q, *k, *v; /* (B, T, H, head_dim) views */
    size_t ld_q, ld_k, ld_v;
    float *o; /* forward writes (B, T, H, head_dim); backward reads it */
    size_t ld_o;
    float *lse;                        /* (B, H, T): forward writes, backward reads */
    const attn_flash_dropout *dropout; /* NULL or p == 0: none */
    int window; /* > 0: query i sees keys i - window + 1 .. i only (sliding window); the key
                   tiles outside every row's window are skipped */
    /* NULL: scores q.k / sqrt(head_dim). Else its softcap and ALiBi
     * (attn/attention.h's attn_score) transform each score tile; the LSE is
     * then of the transformed scores. Only those two fields are read. */
    const attn_attention_spec *scores;
} attn_flash_problem;

/* Gradients: d_o is read; dq, dk, dv are accumulated (+=). */
typedef struct attn_flash_grads {
    const float *d_o;
    size_t ld_do;
    float *dq, *dk, *dv;
    size_t ld_dq, ld_dk, ld_dv;
} attn_flash_grads;

attn_status attn_flash_forward(const attn_flash_problem *pb, const attn_flash_options *opt,
                               attn_flash_workspace *ws, attn_error *err);
/* The backward rule (every attn backward; docs/library.md#conventions):
 * it adds (+=) into dx and into the parameter gradients, never overwrites;
 * the caller zeroes them first. */

attn_status attn_flash_backward(const attn_flash_problem *pb, const attn_flash_grads *g,
                                const attn_flash_options *opt, attn_flash_workspace *ws,
                                attn_error *err);

/* The softmax weights of (batch b, head h) after attn_flash_forward on pb,
 * before dropout: p (T, T), row stride ld_p >= T, gets
 *   p[i][j] = exp(q_i . k_j / sqrt(head_dim) - lse_i) for j <= i, 0 above,
 * recomputed from pb's Q, K and saved LSE with the kernels the backward uses
 * to recompute them. Reads pb only (a forward's results are unchanged);
 * allocates O(T^2) scratch: for inspection (attn viz), not for hot loops. */
attn_status attn_flash_weights(const attn_flash_problem *pb, const attn_flash_options *opt, int b,
                               int h, float *p, size_t ld_p, attn_error *err);

#ifdef __cplusplus
}
#endif
#endif
