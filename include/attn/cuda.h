/* attn/cuda.h — the GPT of gpt.h trained and run on one CUDA GPU.
 *
 * Shapes: ids/targets (B, T) int32 on the host, B <= max_B, T <= max_T
 * (given at create); C = emb_dim, V = vocab_size, H = n_heads.
 *
 * The engine keeps fp32 master copies of every parameter, its gradient and
 * the AdamW moments on the GPU, each in ONE flat buffer in the parameter
 * list's order (the same offsets as attn_adamw), so checkpoints stay the
 * CPU's safetensors files: attn_cuda_gpt_download copies the weights (and
 * moments) into the host model/optimizer, which the existing save code
 * writes; attn_cuda_gpt_upload does the reverse after a load or resume.
 *
 * One training step on the GPU: embeddings, LayerNorm, the GEMMs through
 * cuBLAS, a fused causal attention kernel forward and backward
 * (FlashAttention-style: online softmax, one log-sum-exp per row, no T x T
 * buffer), tanh-GELU, softmax + cross-entropy, global-norm clipping, AdamW.
 *   precision FP32: cuBLAS with CUBLAS_COMPUTE_32F (TF32 off);
 *   precision BF16: the GEMMs ask cuBLAS for CUBLAS_COMPUTE_32F_FAST_16BF
 *     (tensor cores, operands rounded inside cuBLAS, fp32 accumulate; on
 *     the H100 with cuBLAS 13.1 it picked its TF32 kernels for these
 *     shapes); activations, attention and master weights stay fp32.
 *
 * Determinism: no atomics anywhere; every reduction (bias and LayerNorm
 * gradients, embedding gradients, loss, gradient norm, attention dK/dV/dQ)
 * runs in a fixed order, so the same inputs give the same bits run to run on
 * the same GPU model and library versions.
 *
 * Dropout on the GPU is counter-based: Philox4x32-10 keyed by the run's seed,
 * with the counter (element index, site, step), site 0 = drop_emb, per layer
 * l: 1 + 3l attention weights, 2 + 3l / 3 + 3l the two drop_shortcut. An
 * element is kept when its first 32-bit output / 2^32 < 1 - p. Masks are
 * recomputed in backward, never stored. This is NOT PyTorch's CUDA stream
 * (nor the CPU path's MT19937 masks): a GPU run with dropout is reproducible
 * for a seed but differs from a CPU or PyTorch run with the same seed.
 *
 * The engine is a plug-in, libattn-cuda.so, beside libattn (it alone links
 * cuBLAS and the CUDA runtime): the first of these calls opens it, so a
 * program that never asks for the GPU loads neither. It is looked for in
 * $ATTN_PLUGIN_DIR when set, else beside libattn.so (or the program linked
 * with libattn.a), beside libattn-ompwait.so, and in the install library
 * folder. When it
 * cannot be used, every call returns an error that says why: the build
 * made no plug-in ("attn was built without CUDA ..."), the plug-in was not
 * found (the paths tried), it did not open (the dynamic loader's reason,
 * e.g. a missing libcublas), "no CUDA driver", "no CUDA device". */
#ifndef ATTN_CUDA_H
#define ATTN_CUDA_H

#include <stddef.h>
#include <stdint.h>

#include "attn/engine.h"
#include "attn/gpt.h"
#include "attn/optim.h"
#include "attn/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* 1 when this build made the CUDA engine plug-in (it may still be missing
 * at run time: attn_cuda_check says). */
int attn_cuda_compiled(void);

/* ATTN_OK when a CUDA GPU can be used (opening the plug-in on first use);
 * otherwise why not (see above). */
attn_status attn_cuda_check(attn_error *err);

/* Training-mode dropout for one forward: seed and step form the Philox key
 * and counter (see above); p is the model's drop_rate. */
typedef struct attn_cuda_dropout {
    uint64_t seed;
    uint64_t step;
} attn_cuda_dropout;

typedef struct attn_cuda_gpt attn_cuda_gpt; /* opaque */

/* ATTN_OK when the engine computes a model of cfg: the book's GPTModel
 * only; any other value of a variant key (attn_gpt_key_at) is refused
 * naming it, "norm rmsnorm is not on the cuda engine yet"
 * (ATTN_ERR_INVALID_ARG). Needs no GPU. */
attn_status attn_cuda_gpt_supports(const attn_gpt_config *cfg, attn_error *err);

/* Allocate the engine for m's config (attn_cuda_gpt_supports first) and
 * activations of up to (max_B, max_T), and upload m's weights (moments
 * start at zero). */
attn_status attn_cuda_gpt_create(attn_cuda_gpt **out, const attn_gpt *m, int max_B, int max_T,
                                 attn_precision precision, attn_error *err);
void attn_cuda_gpt_free(attn_cuda_gpt *g);

/* Host -> GPU: weights of m; when opt != NULL also its moments (opt must
 * have been made for m's parameter list). */
attn_status attn_cuda_gpt_upload(attn_cuda_gpt *g, const attn_gpt *m, const attn_adamw *opt,
                                 attn_error *err);
/* GPU -> host: weights into m (and moments into opt when not NULL). */
attn_status attn_cuda_gpt_download(attn_cuda_gpt *g, const attn_gpt *m, const attn_adamw *opt,
                                   attn_error *err);
/* GPU -> host: the gradients of the last backward into m's grad buffers. */
attn_status attn_cuda_gpt_download_grads(attn_cuda_gpt *g, const attn_gpt *m, attn_error *err);

/* Forward of (B, T) ids; with targets the mean cross-entropy goes to *loss
 * (may be NULL). drop == NULL: eval mode. Checks ids/targets like
 * attn_gpt_forward. */
attn_status attn_cuda_gpt_forward(attn_cuda_gpt *g, const int32_t *ids, const int32_t *targets,
                                  int B, int T, const attn_cuda_dropout *drop, float *loss,
                                  attn_error *err);
/* Copy rows [row0, row0 + n) of the last forward's (B*T, V) logits. */
attn_status attn_cuda_gpt_logits(attn_cuda_gpt *g, size_t row0, size_t n, float *out,
                                 attn_error *err);
/* The backward rule (every attn backward; docs/library.md#conventions):
 * it adds (+=) into dx and into the parameter gradients, never overwrites;
 * the caller zeroes them first. Exception: attn_cuda_gpt_backward takes no
 * caller arrays; it fills the engine's own device gradient buffer with one
 * backward's gradients (read them with attn_cuda_gpt_download_grads). */

/* Gradients of the last forward's mean loss (which had targets), written
 * (not accumulated) into the engine's gradient buffer. */
attn_status attn_cuda_gpt_backward(attn_cuda_gpt *g, attn_error *err);
/* attn_clip_grad_norm on the GPU's gradients: *norm (may be NULL) gets the
 * global L2 norm (double accumulation); max_norm <= 0 only measures. */
attn_status attn_cuda_gpt_clip_grad_norm(attn_cuda_gpt *g, double max_norm, double *norm,
                                         attn_error *err);
/* attn_adamw_step on the GPU; opt supplies the config and step count (its
 * step is incremented; its host moments are not touched). */
attn_status attn_cuda_gpt_adamw_step(attn_cuda_gpt *g, attn_adamw *opt, double lr, attn_error *err);

/* The fused attention kernels alone, on host arrays (tests, benchmarks).
 * qkv (B, T, 3*H*hd): Q in columns [0, H hd), K next, V last, head h at
 * h*hd within each; out (B, T, H*hd); lse (B, H, T) (may be NULL). When
 * d_out != NULL also the backward: d_qkv (B, T, 3*H*hd). drop_p > 0 applies
 * attention-weight dropout with drop (site 1). 1 <= hd <= 128. */
attn_status attn_cuda_attention(const float *qkv, int B, int T, int H, int hd, double drop_p,
                                const attn_cuda_dropout *drop, float *out, float *lse,
                                const float *d_out, float *d_qkv, attn_error *err);

#ifdef __cplusplus
}
#endif
#endif
