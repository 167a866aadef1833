/* The CUDA engine's entry points in a build without CUDA (see attn/cuda.h):
 * each one says so, so the CLI can name the reason. */
#include "attn/cuda.h"

#define NO_CUDA(err)                                                                               \
    attn_fail((err), ATTN_ERR_STATE,                                                               \
              "attn was built without CUDA (no nvcc found at configure time)")

int attn_cuda_compiled(void) {
    return 0;
}

attn_status attn_cuda_check(attn_error *err) {
    return NO_CUDA(err);
}

attn_status attn_cuda_gpt_create(attn_cuda_gpt **out, const attn_gpt *m, int max_B, int max_T,
                                 attn_precision precision, attn_error *err) {
    (void)m, (void)max_B, (void)max_T, (void)precision;
    *out = NULL;
    return NO_CUDA(err);
}

void attn_cuda_gpt_free(attn_cuda_gpt *g) {
    (void)g;
}

attn_status attn_cuda_gpt_upload(attn_cuda_gpt *g, const attn_gpt *m, const attn_adamw *opt,
                                 attn_error *err) {
    (void)g, (void)m, (void)opt;
    return NO_CUDA(err);
}

attn_status attn_cuda_gpt_download(attn_cuda_gpt *g, const attn_gpt *m, const attn_adamw *opt,
                                   attn_error *err) {
    (void)g, (void)m, (void)opt;
    return NO_CUDA(err);
}

attn_status attn_cuda_gpt_download_grads(attn_cuda_gpt *g, const attn_gpt *m, attn_error *err) {
    (void)g, (void)m;
    return NO_CUDA(err);
}

attn_status attn_cuda_gpt_forward(attn_cuda_gpt *g, const int32_t *ids, const int32_t *targets,
                                  int B, int T, const attn_cuda_dropout *drop, float *loss,
                                  attn_error *err) {
    (void)g, (void)ids, (void)targets, (void)B, (void)T, (void)drop, (void)loss;
    return NO_CUDA(err);
}

attn_status attn_cuda_gpt_logits(attn_cuda_gpt *g, size_t row0, size_t n, float *out,
                                 attn_error *err) {
    (void)g, (void)row0, (void)n, (void)out;
    return NO_CUDA(err);
}

attn_status attn_cuda_gpt_backward(attn_cuda_gpt *g, attn_error *err) {
    (void)g;
    return NO_CUDA(err);
}

attn_status attn_cuda_gpt_clip_grad_norm(attn_cuda_gpt *g, double max_norm, double *norm,
                                         attn_error *err) {
    (void)g, (void)max_norm, (void)norm;
    return NO_CUDA(err);
}

attn_status attn_cuda_gpt_adamw_step(attn_cuda_gpt *g, attn_adamw *opt, double lr,
                                     attn_error *err) {
    (void)g, (void)opt, (void)lr;
    return NO_CUDA(err);
}

attn_status attn_cuda_attention(const float *qkv, int B, int T, int H, int hd, double drop_p,
                                const attn_cuda_dropout *drop, float *out, float *lse,
                                const float *d_out, float *d_qkv, attn_error *err) {
    (void)qkv, (void)B, (void)T, (void)H, (void)hd, (void)drop_p, (void)drop, (void)out, (void)lse,
        (void)d_out, (void)d_qkv;
    return NO_CUDA(err);
}
