/* One-token, KV-cached MultiHeadAttention for generation (see
 * attn/multi_head_attention.h): GEMV products, one query row per head; the
 * variants' math is attn/attention.h's, as in the batched reference. */
#include <math.h>
#include <string.h>

#include "attn/multi_head_attention.h"
#include "nn/linear_step.h"

/* Where weight `which` (0 W_query, 1 W_key, 2 W_value, 3 out_proj) starts in
 * attn_mha_bf16_copy's layout: the four one after the other. */
static size_t bf16_offset(const attn_mha *m, int which) {
    const size_t in = (size_t)m->d_in, wq = (size_t)m->d_out * in, wk = (size_t)m->kv_dim * in;
    return which == 0 ? 0 : wq + (size_t)(which - 1) * wk;
}

size_t attn_mha_bf16_numel(const attn_mha *m) {
    return bf16_offset(m, 3) + (size_t)m->d_out * (size_t)m->d_out;
}

void attn_mha_bf16_copy(const attn_mha *m, uint16_t *w) {
    w += attn_linear_bf16_copy(&m->W_query, w);
    w += attn_linear_bf16_copy(&m->W_key, w);
    w += attn_linear_bf16_copy(&m->W_value, w);
    attn_linear_bf16_copy(&m->out_proj, w);
}

int attn_mha_step_rows(const attn_mha *m) {
    const int W = m->spec.window;
    return W > 0 && W < m->context_length ? W : m->context_length;
}

/* q, and the key and value rows, as one loop of d_out + 2 kv_dim rows (one
 * barrier instead of three), for the n sequences (cache rows kv_stride
 * apart). */
static void qkv(const attn_mha *m, int n, const float *x, float *k_row, float *v_row,
                size_t kv_stride, const attn_mha_step_buf *b) {
    const int nq = (m->d_out + ATTN_STEP_ROWS - 1) / ATTN_STEP_ROWS;
    const int nk = (m->kv_dim + ATTN_STEP_ROWS - 1) / ATTN_STEP_ROWS;
#pragma omp for schedule(static)
    for (int k = 0; k < nq + 2 * nk; k++) {
        const int which = k < nq ? 0 : k < nq + nk ? 1 : 2;
        const int r0 = (which == 0 ? k : which == 1 ? k - nq : k - nq - nk) * ATTN_STEP_ROWS;
        const int rows = which == 0 ? m->d_out : m->kv_dim;
        const int r1 = r0 + ATTN_STEP_ROWS < rows ? r0 + ATTN_STEP_ROWS : rows;
        const attn_linear *lin = which == 0 ? &m->W_query : which == 1 ? &m->W_key : &m->W_value;
        float *y = which == 0 ? b->q : which == 1 ? k_row : v_row;
        const size_t ldy = which == 0 ? (size_t)m->d_out : kv_stride;
        const uint16_t *w = b->w_bf16 ? b->w_bf16 + bf16_offset(m, which) : NULL;
        attn_linear_rows_n(lin, w, x, (size_t)m->d_in, y, ldy, n, r0, r1);
    }
}

/* QK-norm and RoPE on this token's q and k (the batched path's functions,
 * one row each). ctx is free scratch until the heads run. */
static void prepare_qk(const attn_mha *m, float *k_row, int pos, const attn_mha_step_buf *b) {
    const attn_attention_spec *sp = &m->spec;
    if (sp->qk_norm) {
        attn_layernorm_forward(&m->q_norm, b->q, b->ctx, NULL, NULL, (size_t)m->num_heads);
        memcpy(b->q, b->ctx, (size_t)m->d_out * sizeof(float));
        attn_layernorm_forward(&m->k_norm, k_row, b->ctx, NULL, NULL, (size_t)sp->kv_heads);
        memcpy(k_row, b->ctx, (size_t)m->kv_dim * sizeof(float));
    }
    attn_rope_apply(sp, b->q, 1, 1, (size_t)m->d_out, m->num_heads, pos, 0);
    attn_rope_apply(sp, k_row, 1, 1, (size_t)m->kv_dim, sp->kv_heads, pos, 0);
}

/* Head h's context row: softmax(scores) V over the keys the query sees
 * (0..pos, or the window's last ones), in the order of the batched
 * reference (divide, subtract the max, expf). */
static void head(const attn_mha *m, int h, const float *K, const float *V, int pos,
                 const attn_mha_step_buf *b) {
    const attn_attention_spec *sp = &m->spec;
    const size_t ldk = (size_t)m->kv_dim, hd = (size_t)m->head_dim;
    const size_t kvo = (size_t)attn_attention_kv_head(sp, h) * hd;
    const int rows = attn_mha_step_rows(m), book = attn_attention_is_book(sp);
    const int j0 = sp->window > 0 && pos - sp->window + 1 > 0 ? pos - sp->window + 1 : 0;
    const float slope =
        sp->positions == ATTN_POSITIONS_ALIBI ? attn_alibi_slope(m->num_heads, h) : 0.0f;
    /* Same float32 divisor as the batched attention: sqrt(head_dim). */
    const float scale = (float)sqrt((double)hd);
    const float *q = b->q + (size_t)h * hd;
    float *sc = b->scores + (size_t)h * (size_t)m->context_length;
    float mx = -INFINITY;
    for (int j = j0; j <= pos; j++) {
        const float *kj = K + (size_t)(j % rows) * ldk + kvo;
        float s = 0.0f;
        for (size_t d = 0; d < hd; d++)
            s += q[d] * kj[d];
        s = book ? s / scale : attn_score(sp, s, slope, pos, j);
        sc[j - j0] = s;
        if (s > mx) mx = s;
    }
    const int n = pos - j0 + 1;
    float sum = 0.0f;
    for (int j = 0; j < n; j++) {
        sc[j] = expf(sc[j] - mx);
        sum += sc[j];
    }
    float *o = b->ctx + (size_t)h * hd;
    memset(o, 0, hd * sizeof(float));
    for (int j = j0; j <= pos; j++) {
        const float wj = sc[j - j0] / sum;
        const float *vj = V + (size_t)(j % rows) * ldk + kvo;
        for (size_t d = 0; d < hd; d++)
            o[d] += wj * vj[d];
    }
}

/* Sequence s's view of the scratch. */
static attn_mha_step_buf seq_buf(const attn_mha *m, const attn_mha_step_buf *b, int s) {
    attn_mha_step_buf v = *b;
    v.q += (size_t)s * (size_t)m->d_out;
    v.ctx += (size_t)s * (size_t)m->d_out;
    v.scores += (size_t)s * (size_t)m->num_heads * (size_t)m->context_length;
    return v;
}

void attn_mha_step_core(const attn_mha *m, int n, float *q, float *k_cache, float *v_cache,
                        size_t kv_stride, int pos, float *ctx, float *scores) {
    const size_t row = (size_t)(pos % attn_mha_step_rows(m)) * (size_t)m->kv_dim;
    const attn_mha_step_buf b = {NULL, q, ctx, scores};
    if (!attn_attention_is_book(&m->spec)) {
#pragma omp single
        for (int s = 0; s < n; s++) {
            const attn_mha_step_buf v = seq_buf(m, &b, s);
            prepare_qk(m, k_cache + (size_t)s * kv_stride + row, pos, &v);
        }
    }
    const int H = m->num_heads;
#pragma omp for schedule(static)
    for (int sh = 0; sh < n * H; sh++) {
        const attn_mha_step_buf v = seq_buf(m, &b, sh / H);
        const size_t at = (size_t)(sh / H) * kv_stride;
        head(m, sh % H, k_cache + at, v_cache + at, pos, &v);
    }
}

void attn_mha_step_batch(const attn_mha *m, int n, const float *x, float *k_cache, float *v_cache,
                         size_t kv_stride, int pos, float *out, const attn_mha_step_buf *b) {
    const size_t row = (size_t)(pos % attn_mha_step_rows(m)) * (size_t)m->kv_dim;
    qkv(m, n, x, k_cache + row, v_cache + row, kv_stride, b);
    attn_mha_step_core(m, n, b->q, k_cache, v_cache, kv_stride, pos, b->ctx, b->scores);
    const uint16_t *wo = b->w_bf16 ? b->w_bf16 + bf16_offset(m, 3) : NULL;
    attn_linear_step_n(&m->out_proj, wo, b->ctx, (size_t)m->d_out, out, n);
}

void attn_mha_step(const attn_mha *m, const float *x, float *k_cache, float *v_cache, int pos,
                   float *out, const attn_mha_step_buf *b) {
    attn_mha_step_batch(m, 1, x, k_cache, v_cache, 0, pos, out, b);
}
