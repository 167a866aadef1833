/* The CUDA engine plug-in's table (internal): libattn-cuda.so exports one
 * attn_cuda_ops under ATTN_CUDA_PLUGIN_SYMBOL; libattn's attn_cuda_*
 * functions (src/engines/cuda_engine.c) open the plug-in on first use and call
 * through it. Each entry has the signature of the attn/cuda.h function of
 * the same name. Change ATTN_CUDA_PLUGIN_ABI whenever this table changes. */
#ifndef ATTN_CUDA_PLUGIN_H
#define ATTN_CUDA_PLUGIN_H

#include "attn/cuda.h"
#include "engines/plugin.h"

#ifdef __cplusplus
extern "C" {
#endif

#define ATTN_CUDA_PLUGIN_ABI 1u
#define ATTN_CUDA_PLUGIN_SYMBOL "attn_cuda_plugin_table"
#define ATTN_CUDA_PLUGIN_FILE "libattn-cuda.so"

typedef struct attn_cuda_ops {
    attn_plugin_header header;
    attn_status (*check)(attn_error *err);
    attn_status (*gpt_create)(attn_cuda_gpt **out, const attn_gpt *m, int max_B, int max_T,
                              attn_precision precision, attn_error *err);
    void (*gpt_free)(attn_cuda_gpt *g);
    attn_status (*gpt_upload)(attn_cuda_gpt *g, const attn_gpt *m, const attn_adamw *opt,
                              attn_error *err);
    attn_status (*gpt_download)(attn_cuda_gpt *g, const attn_gpt *m, const attn_adamw *opt,
                                attn_error *err);
    attn_status (*gpt_download_grads)(attn_cuda_gpt *g, const attn_gpt *m, attn_error *err);
    attn_status (*gpt_forward)(attn_cuda_gpt *g, const int32_t *ids, const int32_t *targets, int B,
                               int T, const attn_cuda_dropout *drop, float *loss, attn_error *err);
    attn_status (*gpt_logits)(attn_cuda_gpt *g, size_t row0, size_t n, float *out, attn_error *err);
    attn_status (*gpt_backward)(attn_cuda_gpt *g, attn_error *err);
    attn_status (*gpt_clip_grad_norm)(attn_cuda_gpt *g, double max_norm, double *norm,
                                      attn_error *err);
    attn_status (*gpt_adamw_step)(attn_cuda_gpt *g, attn_adamw *opt, double lr, attn_error *err);
    attn_status (*attention)(const float *qkv, int B, int T, int H, int hd, double drop_p,
                             const attn_cuda_dropout *drop, float *out, float *lse,
                             const float *d_out, float *d_qkv, attn_error *err);
} attn_cuda_ops;

/* The engine reads the host's model and optimizer structs directly. */
#define ATTN_CUDA_PLUGIN_LAYOUT                                                                    \
    (((uint64_t)sizeof(attn_gpt) << 40) | ((uint64_t)sizeof(attn_adamw) << 24) |                   \
     ((uint64_t)sizeof(attn_param_list) << 12) | (uint64_t)sizeof(attn_cuda_ops))

#ifdef __cplusplus
}
#endif
#endif
