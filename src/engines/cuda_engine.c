/* The CUDA engine's entry points (attn/cuda.h): each opens libattn-cuda.so
 * on first use (plugin.h) and calls the engine through its table, so
 * libattn itself links neither cuBLAS nor the CUDA runtime. */
#include "attn/cuda.h"

#include "attn/gpt_family.h"
#include "cuda/cuda_plugin.h"

int attn_cuda_compiled(void) {
#ifdef ATTN_CUDA_NOT_BUILT
    return 0;
#else
    return 1;
#endif
}

static attn_status engine(const attn_cuda_ops **ops, attn_error *err) {
    const attn_plugin_header *t = NULL;
    attn_status s = attn_engine_plugin(ATTN_PLUGIN_CUDA, &t, err);
    *ops = (const attn_cuda_ops *)t;
    return s;
}

/* An attn_cuda_gpt exists only once the plug-in was opened: its table. */
static const attn_cuda_ops *loaded(void) {
    const attn_cuda_ops *ops = NULL;
    engine(&ops, NULL);
    return ops;
}

#define NOT_CREATED(err) attn_fail((err), ATTN_ERR_STATE, "no CUDA engine was created")

attn_status attn_cuda_check(attn_error *err) {
    const attn_cuda_ops *ops;
    attn_status s = engine(&ops, err);
    return s ? s : ops->check(err);
}

/* The engine's kernels are the book's GPTModel; a variant waits for a
 * device to write and test its kernels on. */
attn_status attn_cuda_gpt_supports(const attn_gpt_config *cfg, attn_error *err) {
    char what[96];
    if (attn_gpt_config_first_variant(cfg, what, sizeof what) < 0) return ATTN_OK;
    return attn_fail(err, ATTN_ERR_INVALID_ARG, "%s is not on the cuda engine yet", what);
}

attn_status attn_cuda_gpt_create(attn_cuda_gpt **out, const attn_gpt *m, int max_B, int max_T,
                                 attn_precision precision, attn_error *err) {
    const attn_cuda_ops *ops;
    *out = NULL;
    attn_status s = attn_cuda_gpt_supports(&m->cfg, err);
    if (!s) s = attn_gpt_check_language_model(m, "the cuda engine", err);
    if (!s) s = attn_gpt_check_fp32(m, "the cuda engine", err);
    if (s) return s;
    s = engine(&ops, err);
    return s ? s : ops->gpt_create(out, m, max_B, max_T, precision, err);
}

void attn_cuda_gpt_free(attn_cuda_gpt *g) {
    if (g) loaded()->gpt_free(g);
}

attn_status attn_cuda_gpt_upload(attn_cuda_gpt *g, const attn_gpt *m, const attn_adamw *opt,
                                 attn_error *err) {
    return g ? loaded()->gpt_upload(g, m, opt, err) : NOT_CREATED(err);
}

attn_status attn_cuda_gpt_download(attn_cuda_gpt *g, const attn_gpt *m, const attn_adamw *opt,
                                   attn_error *err) {
    return g ? loaded()->gpt_download(g, m, opt, err) : NOT_CREATED(err);
}

attn_status attn_cuda_gpt_download_grads(attn_cuda_gpt *g, const attn_gpt *m, attn_error *err) {
    return g ? loaded()->gpt_download_grads(g, m, err) : NOT_CREATED(err);
}

attn_status attn_cuda_gpt_forward(attn_cuda_gpt *g, const int32_t *ids, const int32_t *targets,
                                  int B, int T, const attn_cuda_dropout *drop, float *loss,
                                  attn_error *err) {
    return g ? loaded()->gpt_forward(g, ids, targets, B, T, drop, loss, err) : NOT_CREATED(err);
}

attn_status attn_cuda_gpt_logits(attn_cuda_gpt *g, size_t row0, size_t n, float *out,
                                 attn_error *err) {
    return g ? loaded()->gpt_logits(g, row0, n, out, err) : NOT_CREATED(err);
}

attn_status attn_cuda_gpt_backward(attn_cuda_gpt *g, attn_error *err) {
    return g ? loaded()->gpt_backward(g, err) : NOT_CREATED(err);
}

attn_status attn_cuda_gpt_clip_grad_norm(attn_cuda_gpt *g, double max_norm, double *norm,
                                         attn_error *err) {
    return g ? loaded()->gpt_clip_grad_norm(g, max_norm, norm, err) : NOT_CREATED(err);
}

attn_status attn_cuda_gpt_adamw_step(attn_cuda_gpt *g, attn_adamw *opt, double lr,
                                     attn_error *err) {
    return g ? loaded()->gpt_adamw_step(g, opt, lr, err) : NOT_CREATED(err);
}

attn_status attn_cuda_attention(const float *qkv, int B, int T, int H, int hd, double drop_p,
                                const attn_cuda_dropout *drop, float *out, float *lse,
                                const float *d_out, float *d_qkv, attn_error *err) {
    const attn_cuda_ops *ops;
    attn_status s = engine(&ops, err);
    return s ? s : ops->attention(qkv, B, T, H, hd, drop_p, drop, out, lse, d_out, d_qkv, err);
}
