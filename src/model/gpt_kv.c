/* Incremental (KV-cached) GPT forward for generation (see attn/gpt.h). */
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "attn/flash_attention.h"
#include "attn/gpt.h"
#include "attn/gpt_family.h"
#include "attn/membudget.h"
#include "base/alloc_huge.h"
#include "base/buffers.h"
#include "gpt_block.h"
#include "nn/linear_step.h"

/* Element counts of the cache's buffers (0: none). */
typedef struct kv_sizes {
    size_t kv, C, hidden, scores, V;
} kv_sizes;

/* The cache's buffers, listed once. k and v are zeroed (touched now, not a
 * page per few tokens while generating) and on huge pages: a step reads
 * every layer's cached rows. w_bf16 is attn_gpt_kv_set_precision's. */
static int kv_buffers(attn_gpt_kv_cache *c, const kv_sizes *s, attn_bufs_op op) {
    const attn_buf t[] = {
        ATTN_BUF_KIND(c->k, s->kv, ATTN_BUF_STREAMED),
        ATTN_BUF_KIND(c->v, s->kv, ATTN_BUF_STREAMED),
        ATTN_BUF(c->x, s->C),
        ATTN_BUF(c->ln, s->C),
        ATTN_BUF(c->q, s->C),
        ATTN_BUF(c->att, s->C),
        ATTN_BUF(c->proj, s->C),
        ATTN_BUF(c->hidden, s->hidden),
        ATTN_BUF(c->scores, s->scores),
        ATTN_BUF(c->logits, s->V),
        ATTN_BUF(c->w_bf16, 0),
    };
    return ATTN_BUFS(t, op);
}

void attn_gpt_kv_free(attn_gpt_kv_cache *c) {
    const kv_sizes none = {0};
    kv_buffers(c, &none, ATTN_BUFS_FREE);
    memset(c, 0, sizeof *c);
}

/* Tokens a cache takes: context_length, or with a window and no learned
 * table (positions past context_length exist) as many as an int counts. */
static int kv_capacity(const attn_gpt *m) {
    const int ring = m->cfg.window > 0 && m->cfg.window < m->cfg.context_length;
    return ring && m->cfg.pos_emb != ATTN_POS_LEARNED ? INT_MAX : m->cfg.context_length;
}

/* A second thread pays off only when a token streams enough weight bytes
 * to hide the barriers between the products (several MB). */
static int kv_threads(const attn_gpt *m) {
    const size_t weights = attn_block_bf16_numel(&m->blocks[0]) * (size_t)m->cfg.n_layers;
    return weights * sizeof(float) >= ((size_t)8 << 20) ? attn_default_threads() : 1;
}

attn_status attn_gpt_kv_init(attn_gpt_kv_cache *c, const attn_gpt *m, attn_error *err) {
    return attn_gpt_kv_init_batch(c, m, 1, err);
}

/* The element counts for batch sequences; 0 when one would overflow. */
static int kv_count(const attn_gpt *m, const attn_gpt_kv_cache *c, int batch, kv_sizes *s) {
    const double B = batch, L = m->cfg.n_layers, C = m->cfg.emb_dim;
    const double kv = L * B * c->rows * (double)c->kv_dim, V = B * attn_gpt_head_width(m);
    const double sc = B * c->H * (double)m->cfg.context_length;
    const double hid = B * m->blocks[0].ff.fc1.out_features;
    const double most = (double)(SIZE_MAX / 8);
    if (kv > most || V > most || sc > most || hid > most || B * C > most) return 0;
    *s = (kv_sizes){(size_t)kv, (size_t)(B * C), (size_t)hid, (size_t)sc, (size_t)V};
    return 1;
}

attn_status attn_gpt_kv_init_batch(attn_gpt_kv_cache *c, const attn_gpt *m, int batch,
                                   attn_error *err) {
    memset(c, 0, sizeof *c);
    if (batch < 1) return attn_fail(err, ATTN_ERR_INVALID_ARG, "KV cache: batch %d < 1", batch);
    if (m->n_adapters)
        return attn_fail(err, ATTN_ERR_INVALID_ARG,
                         "KV cache: the model's Linears carry LoRA adapters, which the one-token "
                         "step does not run");
    attn_status st = attn_gpt_step_ops(m, ATTN_PRECISION_FP32, batch, err);
    if (st != ATTN_OK) return st;
    c->ops = m->engine.ops; /* the engine asked: a step refuses another */
    const size_t L = (size_t)m->cfg.n_layers;
    c->rows = attn_mha_step_rows(&m->blocks[0].att);
    c->kv_dim = m->blocks[0].att.kv_dim;
    c->capacity = kv_capacity(m);
    c->C = m->cfg.emb_dim;
    c->H = m->cfg.n_heads;
    c->n_layers = (int)L;
    c->batch = batch;
    c->threads = kv_threads(m);
    kv_sizes s;
    if (!kv_count(m, c, batch, &s))
        return attn_fail(err, ATTN_ERR_NOMEM, "KV cache: batch %d is too large", batch);
    /* Checked against the machine before anything is allocated. */
    const double need = 4.0 * (2.0 * (double)s.kv + 5.0 * (double)s.C + (double)s.hidden +
                               (double)s.scores + (double)s.V);
    st = attn_mem_check(need, 0, "the KV cache", err);
    if (st) return st;
    if (kv_buffers(c, &s, ATTN_BUFS_ALLOC) != 0) {
        attn_gpt_kv_free(c);
        return attn_fail(err, ATTN_ERR_NOMEM, "out of memory for the KV cache");
    }
    return ATTN_OK;
}

void attn_gpt_kv_reset(attn_gpt_kv_cache *c) {
    c->len = 0;
}

size_t attn_gpt_kv_weight_numel(const attn_gpt *m) {
    const size_t per = attn_block_bf16_numel(&m->blocks[0]);
    return per * (size_t)m->cfg.n_layers + (size_t)attn_gpt_head_width(m) * (size_t)m->cfg.emb_dim;
}

/* Every weight the keep releases is m's own arena's (checked before any
 * is): bound storage is the caller's. */
static int releasable(const attn_gpt *m) {
    const float *a = m->params.values;
    const size_t n = m->params.values_numel;
    for (int b = 0; b < m->cfg.n_layers; b++)
        if (!attn_block_step_weights_within(&m->blocks[b], a, n)) return 0;
    return attn_linear_weight_within(&m->out_head, a, n);
}

attn_status attn_gpt_keep_bf16_weights(attn_gpt *m, attn_error *err) {
    if (m->w_bf16) return ATTN_OK;
    if (m->n_adapters)
        return attn_fail(err, ATTN_ERR_INVALID_ARG,
                         "bf16 weights: the model's Linears carry LoRA adapters, which the "
                         "one-token step does not run");
    attn_status s = attn_gpt_step_ops(m, ATTN_PRECISION_BF16, 1, err);
    if (s != ATTN_OK) return s;
    if (!releasable(m))
        return attn_fail(err, ATTN_ERR_STATE,
                         "bf16 weights: the model's Linear weights are not its own arena's "
                         "(bound storage is the caller's, never released)");
    const size_t per = attn_block_bf16_numel(&m->blocks[0]);
    /* Not zeroed: the copy writes every element, its pages first touched
     * as the fp32 ones go. */
    uint16_t *w = attn_alloc_huge(attn_gpt_kv_weight_numel(m) * sizeof(uint16_t));
    if (!w) return attn_fail(err, ATTN_ERR_NOMEM, "out of memory for bf16 weights");
    m->w_bf16 = w;
    /* The fp32 pages go as the copy grows. */
    for (int l = 0; l < m->cfg.n_layers; l++, w += per)
        attn_block_bf16_copy(&m->blocks[l], w, 1);
    if (m->out_head.weight == m->tok_emb.weight) /* tied: the embedding the step reads */
        attn_linear_bf16_copy(&m->out_head, w);
    else
        attn_linear_bf16_move(&m->out_head, w);
    return ATTN_OK;
}

/* bf16 copies: each block's (attn_block_bf16_copy), then out_head (V x C);
 * a model that keeps only bf16 weights lends its own. */
attn_status attn_gpt_kv_set_precision(attn_gpt_kv_cache *c, const attn_gpt *m,
                                      attn_precision precision, attn_error *err) {
    if (precision != ATTN_PRECISION_FP32 && precision != ATTN_PRECISION_BF16)
        return attn_fail(err, ATTN_ERR_INVALID_ARG, "unknown precision %d (fp32 or bf16)",
                         (int)precision);
    free(c->w_bf16);
    c->w_bf16 = NULL;
    c->precision = ATTN_PRECISION_FP32;
    if (precision == ATTN_PRECISION_FP32) return attn_gpt_check_fp32(m, "KV cache at fp32", err);
    attn_status s = attn_gpt_step_ops(m, precision, c->batch, err);
    if (s != ATTN_OK) return s;
    if (m->w_bf16) {
        c->precision = ATTN_PRECISION_BF16;
        return ATTN_OK;
    }
    const size_t per = attn_block_bf16_numel(&m->blocks[0]);
    const size_t head = (size_t)attn_gpt_head_width(m) * (size_t)m->cfg.emb_dim;
    c->w_bf16 = attn_calloc_streamed(per * (size_t)m->cfg.n_layers + head, sizeof(uint16_t));
    if (!c->w_bf16) return attn_fail(err, ATTN_ERR_NOMEM, "out of memory for bf16 weights");
    uint16_t *w = c->w_bf16;
    for (int l = 0; l < m->cfg.n_layers; l++, w += per)
        attn_block_bf16_copy(&m->blocks[l], w, 0);
    attn_linear_bf16_copy(&m->out_head, w);
    c->precision = ATTN_PRECISION_BF16;
    return ATTN_OK;
}

/* The family's list has a final norm (attn/gpt_family.h). */
static int has_norm(const attn_gpt *m) {
    for (int i = 0; i < m->n_list; i++)
        if (m->layers[i].kind == ATTN_GPT_LAYER_NORM) return 1;
    return 0;
}

/* Every block for the batch's tokens at c->len, then (head) the final
 * norm and the output head: called by each thread of a team (the
 * worksharing splits the rows and heads) or alone, serially. */
static void layers(const attn_gpt *m, attn_gpt_kv_cache *c, const uint16_t *wb, int head) {
    const int n = c->batch;
    const size_t per_seq = (size_t)c->rows * (size_t)c->kv_dim;
    const size_t per_layer = per_seq * (size_t)n;
    const size_t per = attn_block_bf16_numel(&m->blocks[0]);
    const attn_engine *e = &m->engine;
    attn_block_step_buf b = {c->x, c->ln, c->proj, c->hidden, {NULL, c->q, c->att, c->scores}};
    for (int l = 0; l < c->n_layers; l++) {
        b.att.w_bf16 = wb ? wb + (size_t)l * per : NULL;
        attn_block_step(e, &m->blocks[l], n, c->k + (size_t)l * per_layer,
                        c->v + (size_t)l * per_layer, per_seq, c->len, &b);
    }
    if (!head) return;
#pragma omp single
    {
        if (has_norm(m))
            e->ops->layernorm_forward(e, &m->final_norm, c->x, c->ln, NULL, NULL, (size_t)n);
        else
            memcpy(c->ln, c->x, (size_t)n * (size_t)c->C * sizeof(float));
    }
    /* The largest matrix (V x C): its rows split over the team as well. */
    const uint16_t *wo = wb ? wb + per * (size_t)c->n_layers : NULL;
    const size_t V = (size_t)m->out_head.out_features;
    e->ops->linear_step(e, &m->out_head, wo, c->ln, (size_t)c->C, c->logits, V, n, 1);
}

/* The cache fits m and has room for a token. */
static attn_status kv_check(const attn_gpt *m, const attn_gpt_kv_cache *c, attn_error *err) {
    const attn_gpt_config *cfg = &m->cfg;
    attn_status s;
    if (c->capacity != kv_capacity(m) || c->rows != attn_mha_step_rows(&m->blocks[0].att) ||
        c->kv_dim != m->blocks[0].att.kv_dim || c->C != cfg->emb_dim || c->H != cfg->n_heads ||
        c->n_layers != cfg->n_layers)
        return attn_fail(err, ATTN_ERR_SHAPE, "KV cache was made for another model config");
    if (c->ops != m->engine.ops)
        return attn_fail(err, ATTN_ERR_STATE,
                         "KV cache was made for another engine than the model's %s: make it "
                         "again (attn_gpt_kv_init)",
                         m->engine.name);
    if (c->precision != ATTN_PRECISION_BF16 && (s = attn_gpt_check_fp32(m, "KV step at fp32", err)))
        return s;
    if (c->precision == ATTN_PRECISION_BF16 && !c->w_bf16 && !m->w_bf16)
        return attn_fail(err, ATTN_ERR_STATE,
                         "KV cache at bf16 steps on the model's bf16 weights, which this model "
                         "does not keep: attn_gpt_kv_set_precision again");
    if (c->len >= c->capacity)
        return attn_fail(err, ATTN_ERR_STATE,
                         "KV cache is full (%d tokens): slide the window by re-priming "
                         "with attn_gpt_kv_prefill",
                         c->capacity);
    return ATTN_OK;
}

/* One step of every sequence; head 0 skips the output head (a prompt
 * token whose logits nobody reads). */
static attn_status step(const attn_gpt *m, attn_gpt_kv_cache *c, const int32_t *tokens, size_t ld,
                        int head, attn_error *err) {
    attn_status s = kv_check(m, c, err);
    if (s) return s;
    for (int i = 0; i < c->batch; i++)
        if (tokens[(size_t)i * ld] < 0 || tokens[(size_t)i * ld] >= m->cfg.vocab_size)
            return attn_fail(err, ATTN_ERR_INVALID_ARG,
                             "token id %ld is outside [0, vocab_size %d)",
                             (long)tokens[(size_t)i * ld], m->cfg.vocab_size);
    for (int i = 0; i < c->batch; i++)
        attn_gpt_embed(m, tokens + (size_t)i * ld, 1, 1, c->len, c->x + (size_t)i * c->C);
    const uint16_t *wb =
        c->precision != ATTN_PRECISION_BF16 ? NULL : (c->w_bf16 ? c->w_bf16 : m->w_bf16);
    /* One team for the whole token (a region per product would cost more
     * than the small products themselves); none at all on one thread. */
    const int nt = c->threads > 0 ? c->threads : 1;
    if (nt > 1) {
#pragma omp parallel num_threads(nt)
        layers(m, c, wb, head);
    } else {
        layers(m, c, wb, head);
    }
    c->len++;
    return ATTN_OK;
}

attn_status attn_gpt_kv_step_batch(const attn_gpt *m, attn_gpt_kv_cache *c, const int32_t *tokens,
                                   float *logits, attn_error *err) {
    attn_status s = step(m, c, tokens, 1, 1, err);
    if (!s && logits)
        memcpy(logits, c->logits,
               (size_t)c->batch * (size_t)attn_gpt_head_width(m) * sizeof(float));
    return s;
}

attn_status attn_gpt_kv_step(const attn_gpt *m, attn_gpt_kv_cache *c, int32_t token, float *logits,
                             attn_error *err) {
    if (c->batch != 1)
        return attn_fail(err, ATTN_ERR_STATE,
                         "KV cache of %d sequences: step them with attn_gpt_kv_step_batch",
                         c->batch);
    return attn_gpt_kv_step_batch(m, c, &token, logits, err);
}

attn_status attn_gpt_kv_prefill_batch(const attn_gpt *m, attn_gpt_kv_cache *c, const int32_t *ids,
                                      int n, float *logits, attn_error *err) {
    if (n < 1 || n > m->cfg.context_length)
        return attn_fail(err, ATTN_ERR_SHAPE, "prefill length %d must be in [1, context_length %d]",
                         n, m->cfg.context_length);
    c->len = 0;
    for (int i = 0; i < n; i++) {
        attn_status s = step(m, c, ids + i, (size_t)n, i + 1 == n, err);
        if (s != ATTN_OK) {
            c->len = 0;
            return s;
        }
    }
    if (logits)
        memcpy(logits, c->logits,
               (size_t)c->batch * (size_t)attn_gpt_head_width(m) * sizeof(float));
    return ATTN_OK;
}

attn_status attn_gpt_kv_prefill(const attn_gpt *m, attn_gpt_kv_cache *c, const int32_t *ids, int n,
                                float *logits, attn_error *err) {
    if (c->batch != 1)
        return attn_fail(err, ATTN_ERR_STATE,
                         "KV cache of %d sequences: prime them with attn_gpt_kv_prefill_batch",
                         c->batch);
    return attn_gpt_kv_prefill_batch(m, c, ids, n, logits, err);
}

attn_status attn_gpt_kv_feed_batch(const attn_gpt *m, attn_gpt_kv_cache *c, const int32_t *ids,
                                   int n, float *logits, attn_error *err) {
    attn_status s = kv_check(m, c, err);
    if (s) return s;
    if (n < 1 || n > c->capacity - c->len)
        return attn_fail(err, n < 1 ? ATTN_ERR_SHAPE : ATTN_ERR_STATE,
                         "KV cache holds %d of its %d tokens: %d more do not fit", c->len,
                         c->capacity, n);
    const size_t all = (size_t)c->batch * (size_t)n;
    for (size_t i = 0; i < all; i++)
        if (ids[i] < 0 || ids[i] >= m->cfg.vocab_size)
            return attn_fail(err, ATTN_ERR_INVALID_ARG,
                             "token id %ld at index %zu is outside [0, vocab_size %d)",
                             (long)ids[i], i, m->cfg.vocab_size);
    c->threads = kv_threads(m); /* the thread count asked for now */
    const size_t V = (size_t)attn_gpt_head_width(m);
    for (int t = 0; t < n; t++) {
        s = step(m, c, ids + t, (size_t)n, logits != NULL, err);
        if (s) return s; /* (checked above: not reached) */
        for (int b = 0; logits && b < c->batch; b++)
            memcpy(logits + ((size_t)b * (size_t)n + (size_t)t) * V, c->logits + (size_t)b * V,
                   V * sizeof(float));
    }
    return ATTN_OK;
}
