/* Incremental (KV-cached) GPT forward for generation (see attn/gpt.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attn/gelu.h"
#include "attn/gpt.h"

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
    c->k = malloc(L * cap * C * sizeof(float));
    c->v = malloc(L * cap * C * sizeof(float));
    c->x = malloc(C * sizeof(float));
    c->ln = malloc(C * sizeof(float));
    c->q = malloc(C * sizeof(float));
    c->att = malloc(C * sizeof(float));
    c->proj = malloc(C * sizeof(float));
    c->hidden = malloc(4 * C * sizeof(float));
    c->scores = malloc(cap * sizeof(float));
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

/* y (out) = W x + b for one row: the Linear forward with N = 1. */
static void linear1(const attn_linear *l, const float *x, float *y) {
    attn_linear_forward(l, x, y, 1);
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
    const size_t C = (size_t)cfg->emb_dim, H = (size_t)cfg->n_heads, hd = C / H;
    const size_t pos = (size_t)c->len, cap = (size_t)c->capacity;
    /* Same float32 divisor as the batched attention: sqrt(head_dim). */
    const float scale = (float)sqrt((double)hd);

    const float *te = m->tok_emb.weight + (size_t)token * C, *pe = m->pos_emb.weight + pos * C;
    for (size_t i = 0; i < C; i++)
        c->x[i] = te[i] + pe[i];

    for (int l = 0; l < cfg->n_layers; l++) {
        const attn_gpt_block *blk = &m->blocks[l];
        float *K = c->k + (size_t)l * cap * C, *V = c->v + (size_t)l * cap * C;
        attn_layernorm_forward(&blk->norm1, c->x, c->ln, NULL, NULL, 1);
        linear1(&blk->att.W_query, c->ln, c->q);
        linear1(&blk->att.W_key, c->ln, K + pos * C);
        linear1(&blk->att.W_value, c->ln, V + pos * C);
        for (size_t h = 0; h < H; h++) {
            const float *q = c->q + h * hd;
            float mx = -INFINITY;
            for (size_t j = 0; j <= pos; j++) {
                const float *kj = K + j * C + h * hd;
                float s = 0.0f;
                for (size_t d = 0; d < hd; d++)
                    s += q[d] * kj[d];
                s /= scale;
                c->scores[j] = s;
                if (s > mx) mx = s;
            }
            float sum = 0.0f;
            for (size_t j = 0; j <= pos; j++) {
                c->scores[j] = expf(c->scores[j] - mx);
                sum += c->scores[j];
            }
            float *o = c->att + h * hd;
            memset(o, 0, hd * sizeof(float));
            for (size_t j = 0; j <= pos; j++) {
                const float w = c->scores[j] / sum;
                const float *vj = V + j * C + h * hd;
                for (size_t d = 0; d < hd; d++)
                    o[d] += w * vj[d];
            }
        }
        linear1(&blk->att.out_proj, c->att, c->proj);
        for (size_t i = 0; i < C; i++)
            c->x[i] += c->proj[i];
        attn_layernorm_forward(&blk->norm2, c->x, c->ln, NULL, NULL, 1);
        linear1(&blk->ff.fc1, c->ln, c->hidden);
        attn_gelu_forward(c->hidden, c->hidden, 4 * C);
        linear1(&blk->ff.fc2, c->hidden, c->proj);
        for (size_t i = 0; i < C; i++)
            c->x[i] += c->proj[i];
    }
    attn_layernorm_forward(&m->final_norm, c->x, c->ln, NULL, NULL, 1);
    linear1(&m->out_head, c->ln, c->logits);
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
