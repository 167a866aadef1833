/* Scaled dot-product attention over (batch, head) blocks (see attention_core.h).
 * The order of operations follows the book's modules in PyTorch: scores =
 * Q K^T, masked_fill(-inf), divide by sqrt(head_dim) (a float32 scalar, as
 * PyTorch casts the Python float), softmax, dropout, weights @ V. */
#include "attention_core.h"

#include <cblas.h>
#include <math.h>
#include <string.h>

#include "attn/softmax.h"

static float score_scale(int hd) {
    return (float)sqrt((double)hd);
}

attn_status attn_core_forward(const attn_core_shape *s, const float *Q, const float *K,
                              const float *V, float *weights, float *dropped, uint8_t *keep,
                              int *dropout_applied, double p, const attn_forward_mode *mode,
                              float *out, attn_error *err) {
    const int T = s->T, hd = s->hd, ld = s->heads * s->hd;
    const size_t TT = (size_t)T * (size_t)T;
    const size_t nw = (size_t)s->B * (size_t)s->heads * TT;
    const int use_dropout = mode && mode->training && p > 0.0;
    if (use_dropout && !mode->rng)
        return attn_fail(err, ATTN_ERR_INVALID_ARG,
                         "training with dropout %g needs a random generator (mode->rng is NULL)",
                         p);
    const float scale = score_scale(hd);
    for (int b = 0; b < s->B; b++) {
        for (int h = 0; h < s->heads; h++) {
            const size_t off = (size_t)b * (size_t)T * (size_t)ld + (size_t)h * (size_t)hd;
            float *w = weights + ((size_t)b * (size_t)s->heads + (size_t)h) * TT;
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, T, hd, 1.0f, Q + off, ld,
                        K + off, ld, 0.0f, w, T);
            for (int i = 0; i < T; i++) {
                float *row = w + (size_t)i * (size_t)T;
                for (int j = 0; j < T; j++)
                    row[j] = (s->causal && j > i) ? -INFINITY : row[j] / scale;
            }
            attn_softmax_forward(w, w, (size_t)T, (size_t)T);
        }
    }
    if (use_dropout) {
        /* One mask for the whole (B, heads, T, T) tensor, as nn.Dropout draws it. */
        attn_dropout_mask(mode->rng, mode->stream, p, keep, nw);
        attn_dropout_apply(weights, keep, p, dropped, nw);
    } else if (dropped != weights) {
        memcpy(dropped, weights, nw * sizeof(float));
    }
    *dropout_applied = use_dropout;
    for (int b = 0; b < s->B; b++) {
        for (int h = 0; h < s->heads; h++) {
            const size_t off = (size_t)b * (size_t)T * (size_t)ld + (size_t)h * (size_t)hd;
            const float *w = dropped + ((size_t)b * (size_t)s->heads + (size_t)h) * TT;
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, hd, T, 1.0f, w, T, V + off,
                        ld, 0.0f, out + off, ld);
        }
    }
    return ATTN_OK;
}

void attn_core_backward(const attn_core_shape *s, const float *Q, const float *K, const float *V,
                        const float *weights, const float *dropped, const uint8_t *keep,
                        int dropout_applied, double p, const float *d_out, float *dQ, float *dK,
                        float *dV, float *scratch) {
    const int T = s->T, hd = s->hd, ld = s->heads * s->hd;
    const size_t TT = (size_t)T * (size_t)T;
    const float scale = score_scale(hd);
    float *dP = scratch;      /* d(dropped weights), (T, T) */
    float *dS = scratch + TT; /* d(scores), (T, T)          */
    for (int b = 0; b < s->B; b++) {
        for (int h = 0; h < s->heads; h++) {
            const size_t off = (size_t)b * (size_t)T * (size_t)ld + (size_t)h * (size_t)hd;
            const size_t woff = ((size_t)b * (size_t)s->heads + (size_t)h) * TT;
            const float *w = weights + woff, *wd = dropped + woff;
            /* out = wd V: dwd = d_out V^T, dV = wd^T d_out. */
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, T, hd, 1.0f, d_out + off, ld,
                        V + off, ld, 0.0f, dP, T);
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, T, hd, T, 1.0f, wd, T, d_out + off,
                        ld, 0.0f, dV + off, ld);
            if (dropout_applied) { /* dw = dwd * keep * scale, reusing dS as the target */
                memset(dS, 0, TT * sizeof(float));
                attn_dropout_backward(dP, keep + woff, p, dS, TT);
                memcpy(dP, dS, TT * sizeof(float));
            }
            memset(dS, 0, TT * sizeof(float));
            attn_softmax_backward(w, dP, dS, (size_t)T, (size_t)T);
            /* Masked entries have w = 0 so their gradient is already 0. */
            for (size_t i = 0; i < TT; i++)
                dS[i] /= scale;
            /* scores = Q K^T: dQ = dS K, dK = dS^T Q. */
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, hd, T, 1.0f, dS, T, K + off,
                        ld, 0.0f, dQ + off, ld);
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, T, hd, T, 1.0f, dS, T, Q + off, ld,
                        0.0f, dK + off, ld);
        }
    }
}

attn_status attn_check_dropout(double p, const char *what, attn_error *err) {
    if (!(p >= 0.0 && p < 1.0)) /* also rejects NaN */
        return attn_fail(err, ATTN_ERR_INVALID_ARG, "%s: dropout must be in [0, 1), got %g", what,
                         p);
    return ATTN_OK;
}
