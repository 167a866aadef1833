/* One-token, KV-cached MultiHeadAttention for generation (see
 * attn/multi_head_attention.h): GEMV products, one query row per head. */
#include <math.h>
#include <string.h>

#include "attn/multi_head_attention.h"
#include "linear_step.h"

size_t attn_mha_bf16_numel(const attn_mha *m) {
    const size_t in = (size_t)m->d_in, out = (size_t)m->d_out;
    return 3 * out * in + out * out;
}

void attn_mha_bf16_copy(const attn_mha *m, uint16_t *w) {
    w += attn_linear_bf16_copy(&m->W_query, w);
    w += attn_linear_bf16_copy(&m->W_key, w);
    w += attn_linear_bf16_copy(&m->W_value, w);
    attn_linear_bf16_copy(&m->out_proj, w);
}

/* q, and the key and value rows at pos, as one loop of 3 d_out rows (one
 * barrier instead of three). */
static void qkv(const attn_mha *m, const float *x, float *k_row, float *v_row,
                const attn_mha_step_buf *b) {
    const int rows = m->d_out, nchunk = (rows + ATTN_STEP_ROWS - 1) / ATTN_STEP_ROWS;
    const size_t wsize = (size_t)m->d_out * (size_t)m->d_in;
#pragma omp for schedule(static)
    for (int k = 0; k < 3 * nchunk; k++) {
        const int which = k / nchunk, r0 = (k - which * nchunk) * ATTN_STEP_ROWS;
        const int r1 = r0 + ATTN_STEP_ROWS < rows ? r0 + ATTN_STEP_ROWS : rows;
        const attn_linear *lin = which == 0 ? &m->W_query : which == 1 ? &m->W_key : &m->W_value;
        float *y = which == 0 ? b->q : which == 1 ? k_row : v_row;
        const uint16_t *w = b->w_bf16 ? b->w_bf16 + (size_t)which * wsize : NULL;
        attn_linear_rows(lin, w, x, y, r0, r1);
    }
}

/* Head h's context row: softmax(q K^T / sqrt(head_dim)) V over keys 0..pos,
 * in the order of the batched reference (divide, subtract the max, expf). */
static void head(const attn_mha *m, int h, const float *K, const float *V, size_t pos,
                 const attn_mha_step_buf *b) {
    const size_t C = (size_t)m->d_out, hd = (size_t)m->head_dim;
    /* Same float32 divisor as the batched attention: sqrt(head_dim). */
    const float scale = (float)sqrt((double)hd);
    const float *q = b->q + (size_t)h * hd;
    float *sc = b->scores + (size_t)h * (size_t)m->context_length;
    float mx = -INFINITY;
    for (size_t j = 0; j <= pos; j++) {
        const float *kj = K + j * C + (size_t)h * hd;
        float s = 0.0f;
        for (size_t d = 0; d < hd; d++)
            s += q[d] * kj[d];
        s /= scale;
        sc[j] = s;
        if (s > mx) mx = s;
    }
    float sum = 0.0f;
    for (size_t j = 0; j <= pos; j++) {
        sc[j] = expf(sc[j] - mx);
        sum += sc[j];
    }
    float *o = b->ctx + (size_t)h * hd;
    memset(o, 0, hd * sizeof(float));
    for (size_t j = 0; j <= pos; j++) {
        const float wj = sc[j] / sum;
        const float *vj = V + j * C + (size_t)h * hd;
        for (size_t d = 0; d < hd; d++)
            o[d] += wj * vj[d];
    }
}

void attn_mha_step(const attn_mha *m, const float *x, float *k_cache, float *v_cache, int pos,
                   float *out, const attn_mha_step_buf *b) {
    const size_t C = (size_t)m->d_out;
    qkv(m, x, k_cache + (size_t)pos * C, v_cache + (size_t)pos * C, b);
#pragma omp for schedule(static)
    for (int h = 0; h < m->num_heads; h++)
        head(m, h, k_cache, v_cache, (size_t)pos, b);
    const uint16_t *wo = b->w_bf16 ? b->w_bf16 + 3 * C * (size_t)m->d_in : NULL;
    attn_linear_step(&m->out_proj, wo, b->ctx, out);
}
