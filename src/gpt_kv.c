/* Incremental (KV-cached) GPT forward for generation (see attn/gpt.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "alloc_huge.h"
#include "attn/flash_attention.h"
#include "attn/gelu.h"
#include "attn/gpt.h"
#include "gemv.h"

void attn_gpt_kv_free(attn_gpt_kv_cache *c) {
    free(c->k);
    free(c->v);
    free(c->x);
    free(c->ln);
    free(c->q);
    free(c->att);
    free(c->proj);
    free(c->hidden);
    free(c->scores);
    free(c->logits);
    free(c->w_bf16);
    memset(c, 0, sizeof *c);
}

attn_status attn_gpt_kv_init(attn_gpt_kv_cache *c, const attn_gpt *m, attn_error *err) {
    memset(c, 0, sizeof *c);
    const size_t C = (size_t)m->cfg.emb_dim, L = (size_t)m->cfg.n_layers;
    const size_t cap = (size_t)m->cfg.context_length;
    c->capacity = (int)cap;
    c->C = (int)C;
    c->H = m->cfg.n_heads;
    c->n_layers = (int)L;
    /* A second thread pays off only when a token streams enough weight bytes
     * to hide the barriers between the products (several MB). */
    c->threads = 12 * C * C * L * sizeof(float) >= ((size_t)8 << 20) ? attn_default_threads() : 1;
    /* Zeroed (touched now, not a page per few tokens while generating) and
     * on huge pages: a step reads every layer's cached rows. */
    c->k = attn_calloc_streamed(L * cap * C, sizeof(float));
    c->v = attn_calloc_streamed(L * cap * C, sizeof(float));
    c->x = malloc(C * sizeof(float));
    c->ln = malloc(C * sizeof(float));
    c->q = malloc(C * sizeof(float));
    c->att = malloc(C * sizeof(float));
    c->proj = malloc(C * sizeof(float));
    c->hidden = malloc(4 * C * sizeof(float));
    c->scores = malloc((size_t)c->H * cap * sizeof(float));
    c->logits = malloc((size_t)m->cfg.vocab_size * sizeof(float));
    if (!c->k || !c->v || !c->x || !c->ln || !c->q || !c->att || !c->proj || !c->hidden ||
        !c->scores || !c->logits) {
        attn_gpt_kv_free(c);
        return attn_fail(err, ATTN_ERR_NOMEM, "out of memory for the KV cache");
    }
    return ATTN_OK;
}

void attn_gpt_kv_reset(attn_gpt_kv_cache *c) {
    c->len = 0;
}

/* bf16 copies: per layer W_query, W_key, W_value, out_proj (C x C each),
 * fc1 (4C x C), fc2 (C x 4C); then out_head (V x C). */
static size_t layer_bf16(size_t C) {
    return 12 * C * C;
}

attn_status attn_gpt_kv_set_precision(attn_gpt_kv_cache *c, const attn_gpt *m,
                                      attn_precision precision, attn_error *err) {
    if (precision != ATTN_PRECISION_FP32 && precision != ATTN_PRECISION_BF16)
        return attn_fail(err, ATTN_ERR_INVALID_ARG, "unknown precision %d (fp32 or bf16)",
                         (int)precision);
    free(c->w_bf16);
    c->w_bf16 = NULL;
    c->precision = ATTN_PRECISION_FP32;
    if (precision == ATTN_PRECISION_FP32) return ATTN_OK;
    const size_t C = (size_t)m->cfg.emb_dim, V = (size_t)m->cfg.vocab_size;
    const size_t per = layer_bf16(C);
    c->w_bf16 = attn_calloc_streamed(per * (size_t)m->cfg.n_layers + V * C, sizeof(uint16_t));
    if (!c->w_bf16) return attn_fail(err, ATTN_ERR_NOMEM, "out of memory for bf16 weights");
    for (int l = 0; l < m->cfg.n_layers; l++) {
        const attn_gpt_block *b = &m->blocks[l];
        uint16_t *w = c->w_bf16 + (size_t)l * per;
        attn_f32_to_bf16(b->att.W_query.weight, w, C * C);
        attn_f32_to_bf16(b->att.W_key.weight, w + C * C, C * C);
        attn_f32_to_bf16(b->att.W_value.weight, w + 2 * C * C, C * C);
        attn_f32_to_bf16(b->att.out_proj.weight, w + 3 * C * C, C * C);
        attn_f32_to_bf16(b->ff.fc1.weight, w + 4 * C * C, 4 * C * C);
        attn_f32_to_bf16(b->ff.fc2.weight, w + 8 * C * C, 4 * C * C);
    }
    attn_f32_to_bf16(m->out_head.weight, c->w_bf16 + per * (size_t)m->cfg.n_layers, V * C);
    c->precision = ATTN_PRECISION_BF16;
    return ATTN_OK;
}

/* Rows of y = W x (+ b) per scheduling chunk: whole cache lines of y. */
#define ROWS 16

/* Inside a parallel region: every thread takes its chunks of y's rows. */
static void gemv(const float *W, const uint16_t *Wb, const float *b, const float *x, float *y,
                 int out, int in) {
#pragma omp for schedule(static)
    for (int r = 0; r < out; r += ROWS) {
        const int r1 = r + ROWS < out ? r + ROWS : out;
        if (Wb)
            attn_gemv_bf16(Wb, b, x, y, in, r, r1);
        else
            attn_gemv_f32(W, b, x, y, in, r, r1);
    }
}

/* Every block for the token at c->len: called by each thread of a team (the
 * worksharing below splits the rows and heads) or alone, serially. */
static void layers(const attn_gpt *m, attn_gpt_kv_cache *c, const uint16_t *wb) {
    const attn_gpt_config *cfg = &m->cfg;
    const size_t C = (size_t)cfg->emb_dim, H = (size_t)cfg->n_heads, hd = C / H;
    const size_t pos = (size_t)c->len, cap = (size_t)c->capacity;
    const int Ci = (int)C, C4 = 4 * Ci, nh = (int)H;
    /* Same float32 divisor as the batched attention: sqrt(head_dim). */
    const float scale = (float)sqrt((double)hd);
    const size_t per = layer_bf16(C);
    for (int l = 0; l < cfg->n_layers; l++) {
        const attn_gpt_block *blk = &m->blocks[l];
        float *K = c->k + (size_t)l * cap * C, *V = c->v + (size_t)l * cap * C;
        const uint16_t *w = wb ? wb + (size_t)l * per : NULL;
#pragma omp single
        attn_layernorm_forward(&blk->norm1, c->x, c->ln, NULL, NULL, 1);
        /* Q, K and V rows as one loop of 3C rows. */
        const int nchunk = (Ci + ROWS - 1) / ROWS;
#pragma omp for schedule(static)
        for (int k = 0; k < 3 * nchunk; k++) {
            const int which = k / nchunk, r0 = (k - which * nchunk) * ROWS;
            const int r1 = r0 + ROWS < Ci ? r0 + ROWS : Ci;
            const attn_linear *lin = which == 0   ? &blk->att.W_query
                                     : which == 1 ? &blk->att.W_key
                                                  : &blk->att.W_value;
            float *y = which == 0 ? c->q : which == 1 ? K + pos * C : V + pos * C;
            if (w)
                attn_gemv_bf16(w + (size_t)which * C * C, lin->bias, c->ln, y, Ci, r0, r1);
            else
                attn_gemv_f32(lin->weight, lin->bias, c->ln, y, Ci, r0, r1);
        }
#pragma omp for schedule(static)
        for (int h = 0; h < nh; h++) {
            const float *q = c->q + (size_t)h * hd;
            float *sc = c->scores + (size_t)h * cap;
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
            float *o = c->att + (size_t)h * hd;
            memset(o, 0, hd * sizeof(float));
            for (size_t j = 0; j <= pos; j++) {
                const float wj = sc[j] / sum;
                const float *vj = V + j * C + (size_t)h * hd;
                for (size_t d = 0; d < hd; d++)
                    o[d] += wj * vj[d];
            }
        }
        gemv(blk->att.out_proj.weight, w ? w + 3 * C * C : NULL, blk->att.out_proj.bias, c->att,
             c->proj, Ci, Ci);
#pragma omp single
        {
            for (size_t i = 0; i < C; i++)
                c->x[i] += c->proj[i];
            attn_layernorm_forward(&blk->norm2, c->x, c->ln, NULL, NULL, 1);
        }
        /* fc1 then GELU on the same rows, while they are in cache. */
#pragma omp for schedule(static)
        for (int r = 0; r < C4; r += ROWS) {
            const int r1 = r + ROWS < C4 ? r + ROWS : C4;
            if (w)
                attn_gemv_bf16(w + 4 * C * C, blk->ff.fc1.bias, c->ln, c->hidden, Ci, r, r1);
            else
                attn_gemv_f32(blk->ff.fc1.weight, blk->ff.fc1.bias, c->ln, c->hidden, Ci, r, r1);
            attn_gelu_forward(c->hidden + r, c->hidden + r, (size_t)(r1 - r));
        }
        gemv(blk->ff.fc2.weight, w ? w + 8 * C * C : NULL, blk->ff.fc2.bias, c->hidden, c->proj, Ci,
             C4);
#pragma omp single
        for (size_t i = 0; i < C; i++)
            c->x[i] += c->proj[i];
    }
}

attn_status attn_gpt_kv_step(const attn_gpt *m, attn_gpt_kv_cache *c, int32_t token, float *logits,
                             attn_error *err) {
    const attn_gpt_config *cfg = &m->cfg;
    if (c->capacity != cfg->context_length || c->C != cfg->emb_dim || c->H != cfg->n_heads ||
        c->n_layers != cfg->n_layers)
        return attn_fail(err, ATTN_ERR_SHAPE, "KV cache was made for another model config");
    if (c->len >= c->capacity)
        return attn_fail(err, ATTN_ERR_STATE,
                         "KV cache is full (context_length %d): slide the window by re-priming "
                         "with attn_gpt_kv_prefill",
                         c->capacity);
    if (token < 0 || token >= cfg->vocab_size)
        return attn_fail(err, ATTN_ERR_INVALID_ARG, "token id %ld is outside [0, vocab_size %d)",
                         (long)token, cfg->vocab_size);
    const size_t C = (size_t)cfg->emb_dim, pos = (size_t)c->len;
    const int Ci = (int)C;
    const uint16_t *wb = c->precision == ATTN_PRECISION_BF16 ? c->w_bf16 : NULL;
    const size_t per = layer_bf16(C);

    const float *te = m->tok_emb.weight + (size_t)token * C, *pe = m->pos_emb.weight + pos * C;
    for (size_t i = 0; i < C; i++)
        c->x[i] = te[i] + pe[i];

    /* One team for the whole token (a region per product would cost more
     * than the small products themselves); none at all on one thread. */
    const int nt = c->threads > 0 ? c->threads : 1;
    if (nt > 1) {
#pragma omp parallel num_threads(nt)
        layers(m, c, wb);
    } else {
        layers(m, c, wb);
    }
    attn_layernorm_forward(&m->final_norm, c->x, c->ln, NULL, NULL, 1);
    const uint16_t *wo = wb ? wb + per * (size_t)cfg->n_layers : NULL;
    if (wo)
        attn_gemv_bf16(wo, NULL, c->ln, c->logits, Ci, 0, cfg->vocab_size);
    else
        attn_gemv_f32(m->out_head.weight, NULL, c->ln, c->logits, Ci, 0, cfg->vocab_size);
    if (logits) memcpy(logits, c->logits, (size_t)cfg->vocab_size * sizeof(float));
    c->len++;
    return ATTN_OK;
}

attn_status attn_gpt_kv_prefill(const attn_gpt *m, attn_gpt_kv_cache *c, const int32_t *ids, int n,
                                float *logits, attn_error *err) {
    if (n < 1 || n > c->capacity)
        return attn_fail(err, ATTN_ERR_SHAPE, "prefill length %d must be in [1, context_length %d]",
                         n, c->capacity);
    c->len = 0;
    for (int i = 0; i < n; i++) {
        attn_status s = attn_gpt_kv_step(m, c, ids[i], i + 1 == n ? logits : NULL, err);
        if (s != ATTN_OK) {
            c->len = 0;
            return s;
        }
    }
    return ATTN_OK;
}
