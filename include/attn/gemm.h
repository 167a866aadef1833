/* attn/gemm.h — row-major sgemm spread over attn's OpenMP threads.
 *
 * OpenBLAS (pthreads build) keeps its own thread pool whose workers spin for
 * a while after each call; alternating it with OpenMP regions (the fused
 * attention kernel) makes the two pools fight over the cores. attn therefore
 * runs one pool: when OpenBLAS is set to one thread (openblas_set_num_threads(1)
 * or OPENBLAS_NUM_THREADS=1, as the attn program does), attn_sgemm splits C
 * into blocks over OpenMP threads, each a single-threaded OpenBLAS call. The
 * blocks depend on the product's shape alone (OpenBLAS rounds by a call's
 * shape), so C has the same bits at every thread count. When OpenBLAS has
 * several threads of its own, attn_sgemm is one plain call. */
#ifndef ATTN_GEMM_H
#define ATTN_GEMM_H

#include <stdint.h>

#include "attn/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* C (M, N) = alpha op(A) op(B) + beta C, all row-major; trans_a / trans_b
 * non-zero mean A is stored (K, M) / B is stored (N, K). threads <= 0:
 * attn_default_threads() (attn/flash_attention.h). */
void attn_sgemm(int threads, int trans_a, int trans_b, int M, int N, int K, float alpha,
                const float *A, int lda, const float *B, int ldb, float beta, float *C, int ldc);

/* ---- bf16 engine (--precision bf16) ----------------------------------------
 * The same products with A and B rounded to bf16 (nearest even) and fp32
 * accumulation into fp32 C, as PyTorch's CPU autocast runs its matmuls:
 * oneDNN's matmul (brgemm kernels using AVX512-BF16 vdpbf16ps), chosen by
 * measurement over OpenBLAS sgemm (1.5-2.5x on the GPT's shapes here).
 * An engine owns its oneDNN primitives (one per shape, made on first use)
 * and the bf16 copies of the operands (grown to the largest product, then
 * reused), so a training step allocates nothing after its first.
 * Not thread-safe: one engine per model. */
typedef struct attn_bf16_gemm attn_bf16_gemm;

/* Fails (ATTN_ERR_INVALID_ARG, attn_precision_check's message) on a CPU
 * without AVX512-BF16. */
attn_status attn_bf16_gemm_create(attn_bf16_gemm **out, attn_error *err);
void attn_bf16_gemm_free(attn_bf16_gemm *g);

/* attn_sgemm when g is NULL; else the bf16 product (alpha must be 1 and beta
 * 0 or 1, else, or if oneDNN fails, the fp32 attn_sgemm runs instead). */
void attn_gemm(attn_bf16_gemm *g, int threads, int trans_a, int trans_b, int M, int N, int K,
               float alpha, const float *A, int lda, const float *B, int ldb, float beta, float *C,
               int ldc);

/* Starts a pass (a forward and its backward): from here to the next
 * begin, each weight given to attn_gemm_weight / attn_gemm_linear_grads is
 * rounded to bf16 at its first use and that copy reused (a weight must not
 * change within a pass). The copies are kept in the engine, one per
 * weight (half the fp32 weights' bytes). Before the first pass each use
 * rounds its weight. No effect on g NULL. */
void attn_bf16_gemm_begin_pass(attn_bf16_gemm *g);

/* The copies of the weights inside values (n floats: a model's arena,
 * attn/param.h) as one block alike: W's copy at W's offset, lazily mapped
 * (a tensor never multiplied takes no memory). Weights elsewhere keep a
 * copy each. NOMEM (the engine as it was) when the block cannot be had. */
attn_status attn_bf16_gemm_use_block(attn_bf16_gemm *g, const float *values, size_t n,
                                     attn_error *err);

/* For the owner of the weights as it updates them (the optimizer), so that
 * the next pass need not round them again: the bf16 copy this pass holds
 * of weight W (n values), or of the part W is of a weight used as one
 * (MultiHeadAttention's Q, K, V block), NULL if it holds none (or g is
 * NULL). The caller overwrites it with attn_f32_to_bf16 of W's new values,
 * then calls attn_bf16_gemm_carry_copies: the next pass, and only that
 * one, uses each copy handed out whole (every part once) since this pass
 * began instead of rounding its weight (others are rounded as before).
 * Between the carry and the next begin no weight may change by any other
 * write. */
uint16_t *attn_bf16_gemm_weight_copy(attn_bf16_gemm *g, const float *W, size_t n);
void attn_bf16_gemm_carry_copies(attn_bf16_gemm *g);

/* C (M, N) = beta C + A W^T for a weight W (N, K) and A (M, K), all compact
 * row-major (beta 0 or 1): attn_gemm's product, with W's bf16 copy of the
 * pass. */
void attn_gemm_weight(attn_bf16_gemm *g, int threads, int M, int N, int K, const float *A,
                      const float *W, float beta, float *C);

/* A linear layer's two backward products (y = x W^T), with dy rounded to
 * bf16 once for both:
 *     dW (out, in) = beta_w dW + dy^T x      (beta_w 0 or 1)
 *     dx (N, in)  += dy W                    (skipped when dx is NULL)
 * x (N, in), dy (N, out) and W (out, in) compact row-major. Each product is
 * exactly what attn_gemm gives for it (two attn_sgemm calls when g is NULL).
 * dW NULL (a frozen weight): dx alone, the same bits (x is not read); dx
 * NULL too: nothing. */
void attn_gemm_linear_grads(attn_bf16_gemm *g, int threads, int N, int in, int out, const float *x,
                            const float *dy, const float *W, float beta_w, float *dW, float *dx);

/* The two above with the layer's input already in bf16 (as kept from its
 * forward, so that it is not rounded twice): A16 (M, K) / x16 (N, in)
 * compact. The products equal those on the fp32 operand whose rounding
 * A16 / x16 is (with g NULL: fp32 products on its exact widening). linear_grads_x16 also takes
 * beta_x (0 or 1): dx (N, in) = beta_x dx + dy W (0: dx need not be cleared first). */
void attn_gemm_weight_a16(attn_bf16_gemm *g, int threads, int M, int N, int K, const uint16_t *A16,
                          const float *W, float beta, float *C);
/* attn_gemm_weight that also leaves A's bf16 rounding in A16 (M, K), for
 * the backward's attn_gemm_linear_grads_x16 (with g NULL: the fp32 product
 * from A, A16 written all the same). */
void attn_gemm_weight_keep(attn_bf16_gemm *g, int threads, int M, int N, int K, const float *A,
                           const float *W, float beta, float *C, uint16_t *A16);
void attn_gemm_linear_grads_x16(attn_bf16_gemm *g, int threads, int N, int in, int out,
                                const uint16_t *x16, const float *dy, const float *W, float beta_w,
                                float *dW, float beta_x, float *dx);

/* A linear layer's backward from dy already rounded to bf16 (dy16 (N, out),
 * attn_gemm_round's), for a caller that runs its rows in chunks and makes
 * each product over many of them: the GPT's output head, whose dW (50257,
 * 768) is read and written once per product, and whose dx product runs
 * faster over all its rows than chunk by chunk (K = 50257: oneDNN 600 GFLOP/s
 * at 128 rows, 730 at 256):
 *     input_grad_dy16:  dx (N, in) = beta_x dx + dy16 W
 *     weight_grad_dy16: dW (out, in) = beta_w dW + dy16^T x, x (N, in) fp32
 *                       rounded here.
 * Both in fp32 on dy16's exact widening when g is NULL or oneDNN refuses
 * the shape. beta_x and beta_w 0 or 1; all compact row-major. */
void attn_gemm_round(int N, int out, const float *dy, uint16_t *dy16);
void attn_gemm_input_grad_dy16(attn_bf16_gemm *g, int threads, int N, int in, int out,
                               const uint16_t *dy16, const float *W, float beta_x, float *dx);
void attn_gemm_weight_grad_dy16(attn_bf16_gemm *g, int threads, int N, int in, int out,
                                const float *x, const uint16_t *dy16, float beta_w, float *dW);

#ifdef __cplusplus
}
#endif
#endif
