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

/* Head h's ALiBi slope, one at a time (heads <= 1 << 16: a table on the
 * stack would not do for every count): 2^(-8 (h+1) / m) for the largest
 * power of two m <= heads, the odd steps of 2 m's slopes after it. */
float attn_alibi_slope(int heads, int h) {
    int m = 1;
    while (2 * m <= heads)
        m *= 2;
    return h < m ? (float)pow(2.0, -8.0 * (h + 1) / m)
                 : (float)pow(2.0, -8.0 * (2 * (h - m) + 1) / (2 * m));
}

/* The spec a shape computes: its own, or the book's (causal as the shape says). */
static attn_attention_spec spec_of(const attn_core_shape *s) {
    if (s->spec) return *s->spec;
    attn_attention_spec b = attn_attention_book(s->heads, s->hd, 0.0);
    b.causal = s->causal;
    return b;
}

/* Rows of one (batch, head) block: queries at b, h; keys and values at b
 * and h's key/value head. */
typedef struct block_off {
    size_t q, kv;
} block_off;

static block_off offsets(const attn_core_shape *s, const attn_attention_spec *sp, int b, int h) {
    const int kvh = attn_attention_kv_heads(sp);
    const size_t T = (size_t)s->T, hd = (size_t)s->hd;
    block_off o = {(size_t)b * T * (size_t)s->heads * hd + (size_t)h * hd,
                   (size_t)b * T * (size_t)kvh * hd + (size_t)attn_attention_kv_head(sp, h) * hd};
    return o;
}

attn_status attn_core_forward(const attn_core_shape *s, const float *Q, const float *K,
                              const float *V, float *weights, float *dropped, uint8_t *keep,
                              int *dropout_applied, double p, const attn_forward_mode *mode,
                              float *out, attn_error *err) {
    const attn_attention_spec sp = spec_of(s);
    const int T = s->T, hd = s->hd, ld = s->heads * s->hd;
    const int ldk = attn_attention_kv_heads(&sp) * s->hd;
    const size_t TT = (size_t)T * (size_t)T;
    const size_t nw = (size_t)s->B * (size_t)s->heads * TT;
    const int use_dropout = mode && mode->training && p > 0.0;
    if (use_dropout && !mode->rng)
        return attn_fail(err, ATTN_ERR_INVALID_ARG,
                         "training with dropout %g needs a random generator (mode->rng is NULL)",
                         p);
    const int book = attn_attention_is_book(&sp);
    const float scale = score_scale(hd);
    for (int b = 0; b < s->B; b++) {
        for (int h = 0; h < s->heads; h++) {
            const block_off o = offsets(s, &sp, b, h);
            float *w = weights + ((size_t)b * (size_t)s->heads + (size_t)h) * TT;
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, T, hd, 1.0f, Q + o.q, ld,
                        K + o.kv, ldk, 0.0f, w, T);
            const float slope =
                sp.positions == ATTN_POSITIONS_ALIBI ? attn_alibi_slope(s->heads, h) : 0.0f;
            for (int i = 0; i < T; i++) {
                float *row = w + (size_t)i * (size_t)T;
                for (int j = 0; j < T; j++)
                    row[j] = book ? ((s->causal && j > i) ? -INFINITY : row[j] / scale)
                                  : attn_score(&sp, row[j], slope, i, j);
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
            const block_off o = offsets(s, &sp, b, h);
            const float *w = dropped + ((size_t)b * (size_t)s->heads + (size_t)h) * TT;
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, hd, T, 1.0f, w, T, V + o.kv,
                        ldk, 0.0f, out + o.q, ld);
        }
    }
    return ATTN_OK;
}

void attn_core_backward(const attn_core_shape *s, const float *Q, const float *K, const float *V,
                        const float *weights, const float *dropped, const uint8_t *keep,
                        int dropout_applied, double p, const float *d_out, float *dQ, float *dK,
                        float *dV, float *scratch) {
    const attn_attention_spec sp = spec_of(s);
    const int T = s->T, hd = s->hd, ld = s->heads * s->hd;
    const int ldk = attn_attention_kv_heads(&sp) * s->hd;
    const size_t TT = (size_t)T * (size_t)T;
    const float scale = score_scale(hd);
    float *dP = scratch;      /* d(dropped weights), (T, T) */
    float *dS = scratch + TT; /* d(scores), (T, T)          */
    for (int b = 0; b < s->B; b++) {
        for (int h = 0; h < s->heads; h++) {
            const block_off o = offsets(s, &sp, b, h);
            const size_t woff = ((size_t)b * (size_t)s->heads + (size_t)h) * TT;
            const float *w = weights + woff, *wd = dropped + woff;
            /* A key/value head's gradient sums over its group's query heads,
             * in head order: the group's first head overwrites. */
            const int first =
                h == 0 || attn_attention_kv_head(&sp, h - 1) != attn_attention_kv_head(&sp, h);
            const float beta = first ? 0.0f : 1.0f;
            /* out = wd V: dwd = d_out V^T, dV = wd^T d_out. */
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, T, hd, 1.0f, d_out + o.q, ld,
                        V + o.kv, ldk, 0.0f, dP, T);
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, T, hd, T, 1.0f, wd, T, d_out + o.q,
                        ld, beta, dV + o.kv, ldk);
            if (dropout_applied) { /* dw = dwd * keep * scale, reusing dS as the target */
                memset(dS, 0, TT * sizeof(float));
                attn_dropout_backward(dP, keep + woff, p, dS, TT);
                memcpy(dP, dS, TT * sizeof(float));
            }
            memset(dS, 0, TT * sizeof(float));
            attn_softmax_backward(w, dP, dS, (size_t)T, (size_t)T);
            /* Masked entries have w = 0 so their gradient is already 0. */
            if (sp.softcap > 0.0) {
                /* d score / d dot needs the raw dot products again (dP is free now). */
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, T, hd, 1.0f, Q + o.q, ld,
                            K + o.kv, ldk, 0.0f, dP, T);
                for (size_t i = 0; i < TT; i++)
                    dS[i] *= attn_score_grad(&sp, dP[i]);
            } else {
                for (size_t i = 0; i < TT; i++)
                    dS[i] /= scale;
            }
            /* scores = Q K^T: dQ = dS K, dK = dS^T Q. */
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, hd, T, 1.0f, dS, T, K + o.kv,
                        ldk, 0.0f, dQ + o.q, ld);
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, T, hd, T, 1.0f, dS, T, Q + o.q, ld,
                        beta, dK + o.kv, ldk);
        }
    }
}

attn_status attn_check_dropout(double p, const char *what, attn_error *err) {
    if (!(p >= 0.0 && p < 1.0)) /* also rejects NaN */
        return attn_fail(err, ATTN_ERR_INVALID_ARG, "%s: dropout must be in [0, 1), got %g", what,
                         p);
    return ATTN_OK;
}

/* ------------------------------------------------ the attention spec */

attn_attention_spec attn_attention_book(int heads, int head_dim, double dropout) {
    attn_attention_spec s;
    memset(&s, 0, sizeof s);
    s.heads = heads;
    s.kv_heads = heads;
    s.head_dim = head_dim;
    s.causal = 1;
    s.dropout = dropout;
    return s;
}

int attn_attention_kv_heads(const attn_attention_spec *s) {
    return s->kv_heads > 0 ? s->kv_heads : s->heads;
}

int attn_attention_kv_head(const attn_attention_spec *s, int h) {
    return h / (s->heads / attn_attention_kv_heads(s));
}

int attn_attention_is_book(const attn_attention_spec *s) {
    return attn_attention_kv_heads(s) == s->heads && s->window == 0 &&
           s->positions == ATTN_POSITIONS_NONE && !s->qk_norm && s->softcap == 0.0;
}

attn_status attn_attention_check(const attn_attention_spec *s, const char *what, attn_error *err) {
    const int kv = attn_attention_kv_heads(s);
    if (s->heads <= 0 || s->head_dim <= 0)
        return attn_fail(err, ATTN_ERR_INVALID_ARG,
                         "%s: heads and head_dim must be > 0 (got %d, %d)", what, s->heads,
                         s->head_dim);
    if (kv > s->heads || s->heads % kv != 0)
        return attn_fail(err, ATTN_ERR_INVALID_ARG, "%s: n_kv_heads %d must divide n_heads %d",
                         what, kv, s->heads);
    if (s->window < 0 || (s->window > 0 && !s->causal))
        return attn_fail(err, ATTN_ERR_INVALID_ARG,
                         "%s: window %d must be >= 0, and a window needs causal attention", what,
                         s->window);
    if ((unsigned)s->positions > ATTN_POSITIONS_ALIBI)
        return attn_fail(err, ATTN_ERR_INVALID_ARG, "%s: unknown position scheme %d", what,
                         (int)s->positions);
    if (!(s->rope_theta >= 0.0 && s->rope_theta <= 1e12) ||
        !(s->rope_fraction >= 0.0 && s->rope_fraction <= 1.0))
        return attn_fail(
            err, ATTN_ERR_INVALID_ARG,
            "%s: rope theta must be in [0, 1e12] and its fraction in [0, 1] (got %g, %g)", what,
            s->rope_theta, s->rope_fraction);
    if (s->positions == ATTN_POSITIONS_ROPE && attn_rope_dims(s) < 2)
        return attn_fail(err, ATTN_ERR_INVALID_ARG,
                         "%s: RoPE needs at least 2 rotated dims (head_dim %d, fraction %g)", what,
                         s->head_dim, s->rope_fraction);
    if (!(s->softcap >= 0.0 && s->softcap <= 1e6))
        return attn_fail(err, ATTN_ERR_INVALID_ARG, "%s: softcap must be in [0, 1e6] (got %g)",
                         what, s->softcap);
    return attn_check_dropout(s->dropout, what, err);
}

int attn_rope_dims(const attn_attention_spec *s) {
    if (s->positions != ATTN_POSITIONS_ROPE) return 0;
    const double f = s->rope_fraction > 0.0 ? s->rope_fraction : 1.0;
    return 2 * (int)floor(f * s->head_dim / 2.0);
}

int attn_score_masked(const attn_attention_spec *s, int i, int j) {
    return (s->causal && j > i) || (s->window > 0 && i - j >= s->window);
}

float attn_score(const attn_attention_spec *s, float dot, float slope, int i, int j) {
    if (attn_score_masked(s, i, j)) return -INFINITY;
    float v = dot / score_scale(s->head_dim);
    if (s->softcap > 0.0) v = (float)s->softcap * tanhf(v / (float)s->softcap);
    if (s->positions == ATTN_POSITIONS_ALIBI) v += slope * (float)(j - i);
    return v;
}

float attn_score_grad(const attn_attention_spec *s, float dot) {
    const float scale = score_scale(s->head_dim);
    if (s->softcap <= 0.0) return 1.0f / scale;
    const float t = tanhf(dot / scale / (float)s->softcap);
    return (1.0f - t * t) / scale;
}

void attn_rope_apply(const attn_attention_spec *s, float *x, size_t rows, int T, size_t ld,
                     int n_heads, int pos0, int inverse) {
    const int rot = attn_rope_dims(s), half = rot / 2;
    if (rot == 0) return;
    const double theta = s->rope_theta > 0.0 ? s->rope_theta : 10000.0;
    /* theta^(-2d / rot) once per call for the usual head dims (float32, as
     * the PyTorch reference's table); past 512 dims, per use. */
    enum { INV_MAX = 256 };
    float inv_tab[INV_MAX];
    for (int d = 0; d < half && d < INV_MAX; d++)
        inv_tab[d] = (float)(1.0 / pow(theta, (double)(2 * d) / rot));
    /* Rows are independent: split them (same bits at any thread count). */
    const long nrows = (long)rows;
#pragma omp parallel for schedule(static) if (rows * (size_t)half * (size_t)n_heads >= 65536)
    for (long ri = 0; ri < nrows; ri++) {
        const size_t r = (size_t)ri;
        const float pos = (float)(pos0 + (int)(r % (size_t)T));
        for (int d = 0; d < half; d++) {
            const float inv =
                d < INV_MAX ? inv_tab[d] : (float)(1.0 / pow(theta, (double)(2 * d) / rot));
            const float ang = pos * inv;
            const float c = (float)cos((double)ang);
            const float sn = inverse ? -(float)sin((double)ang) : (float)sin((double)ang);
            for (int h = 0; h < n_heads; h++) {
                float *v = x + r * ld + (size_t)h * (size_t)s->head_dim;
                const float a = v[d], b = v[d + half];
                v[d] = a * c - b * sn;
                v[d + half] = b * c + a * sn;
            }
        }
    }
}
