/* libattn-cuda.so's one exported symbol: the table libattn opens
 * (cuda_plugin.h). The engine's functions themselves are hidden in the
 * plug-in (built with -fvisibility=hidden), so they never clash with
 * libattn's entry points of the same names. */
#include "cuda_plugin.h"

#include "attn/version.h"

__attribute__((visibility("default"))) const attn_cuda_ops attn_cuda_plugin_table = {
    .header = {ATTN_PLUGIN_CUDA, ATTN_CUDA_PLUGIN_ABI, ATTN_VERSION, ATTN_CUDA_PLUGIN_LAYOUT},
    .check = attn_cuda_check,
    .gpt_create = attn_cuda_gpt_create,
    .gpt_free = attn_cuda_gpt_free,
    .gpt_upload = attn_cuda_gpt_upload,
    .gpt_download = attn_cuda_gpt_download,
    .gpt_download_grads = attn_cuda_gpt_download_grads,
    .gpt_forward = attn_cuda_gpt_forward,
    .gpt_logits = attn_cuda_gpt_logits,
    .gpt_backward = attn_cuda_gpt_backward,
    .gpt_clip_grad_norm = attn_cuda_gpt_clip_grad_norm,
    .gpt_adamw_step = attn_cuda_gpt_adamw_step,
    .attention = attn_cuda_attention,
};
