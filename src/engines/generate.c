/* Text generation: KV cache + sampler + sliding window + stop string (see
 * attn/generate.h). The order of work matches `attn generate` exactly: a
 * sampled token is fed to the cache only when the next one is asked for. */
#include "attn/generate.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "attn/cuda.h"
#include "attn/gpt_family.h"

void attn_generate_options_default(attn_generate_options *o) {
    memset(o, 0, sizeof *o);
    o->temperature = 0.8;
    o->top_k = 200;
    o->top_p = 1.0;
    o->seed = 1337;
}

attn_status attn_generate_prepare(attn_gpt *m, const attn_generate_options *o, attn_error *err) {
    if (o->device != ATTN_DEVICE_CPU || o->precision != ATTN_PRECISION_BF16) return ATTN_OK;
    return attn_gpt_keep_bf16_weights(m, err);
}

/* The options' checks (before anything is allocated). */
static attn_status check_options(const attn_gpt *model, const attn_tokenizer *tok,
                                 const attn_generate_options *o, attn_error *err) {
    const int ctx = model->cfg.context_length, V = model->cfg.vocab_size;
    if (!(o->temperature >= 0) || !isfinite(o->temperature))
        return attn_fail(err, ATTN_ERR_INVALID_ARG, "temperature must be >= 0 and finite, not %g",
                         o->temperature);
    if (o->top_k < 0)
        return attn_fail(err, ATTN_ERR_INVALID_ARG, "top_k must be >= 0, not %d", o->top_k);
    if (!(o->top_p > 0 && o->top_p <= 1))
        return attn_fail(err, ATTN_ERR_INVALID_ARG, "top_p must be in (0, 1], not %g", o->top_p);
    if (o->window_keep < 0 || o->window_keep > ctx)
        return attn_fail(err, ATTN_ERR_INVALID_ARG,
                         "window_keep must be in [0, %d] (0 = context_length / 2), not %d", ctx,
                         o->window_keep);
    if (o->num_samples < 0)
        return attn_fail(err, ATTN_ERR_INVALID_ARG, "num_samples must be >= 1, not %d",
                         o->num_samples);
    if (o->num_samples > 1 && o->device == ATTN_DEVICE_CUDA)
        return attn_fail(err, ATTN_ERR_INVALID_ARG,
                         "num_samples %d: the CUDA engine decodes one sample at a time",
                         o->num_samples);
    if (tok->vocab_size != V)
        return attn_fail(err, ATTN_ERR_INVALID_ARG,
                         "the tokenizer has %d tokens but the model's vocab_size is %d",
                         tok->vocab_size, V);
    return o->device == ATTN_DEVICE_CUDA ? attn_gpt_check_fp32(model, "the cuda engine", err)
                                         : ATTN_OK;
}

/* The host-side buffers: candidates, the stop string, each sample's tail. */
static int alloc_host(attn_generator *g, const attn_generate_options *o) {
    const int N = g->num_samples, V = g->model->cfg.vocab_size;
    const size_t ctx = (size_t)g->model->cfg.context_length;
    g->samples = calloc((size_t)N, sizeof *g->samples);
    g->cand = malloc((size_t)V * sizeof *g->cand);
    g->ids = malloc((size_t)N * ctx * sizeof *g->ids);
    g->stop = malloc(g->stop_len + 1);
    if (!g->samples || !g->cand || !g->ids || !g->stop) return 1;
    for (int i = 0; i < N; i++) {
        g->samples[i].pending = -1;
        if (!(g->samples[i].tail = malloc(g->stop_len + 1))) return 1;
    }
    if (g->stop_len) memcpy(g->stop, o->stop, g->stop_len);
    g->stop[g->stop_len] = '\0';
    g->opt.stop = g->stop;
    return 0;
}

attn_status attn_generator_init(attn_generator *g, const attn_gpt *model, const attn_tokenizer *tok,
                                const attn_generate_options *o, attn_error *err) {
    memset(g, 0, sizeof *g);
    attn_status s = attn_gpt_check_language_model(model, "generation", err);
    if (!s) s = check_options(model, tok, o, err);
    if (s) return s;
    g->model = model;
    g->tok = tok;
    g->opt = *o;
    g->num_samples = o->num_samples > 1 ? o->num_samples : 1;
    g->stop_len = o->stop ? strlen(o->stop) : 0;
    if (alloc_host(g, o)) {
        attn_generator_free(g);
        return attn_fail(err, ATTN_ERR_NOMEM, "out of memory for the generator");
    }
    const int ctx = model->cfg.context_length, V = model->cfg.vocab_size;
    if (o->device == ATTN_DEVICE_CUDA) {
        if (!(g->gpu_logits = malloc((size_t)V * sizeof *g->gpu_logits)))
            s = attn_fail(err, ATTN_ERR_NOMEM, "out of memory for the generator");
        else
            s = attn_cuda_gpt_create(&g->gpu, model, 1, ctx, o->precision, err);
    } else {
        s = attn_gpt_kv_init_batch(&g->cache, model, g->num_samples, err);
        if (!s && o->precision != ATTN_PRECISION_FP32)
            s = attn_gpt_kv_set_precision(&g->cache, model, o->precision, err);
    }
    if (s) attn_generator_free(g);
    return s;
}

/* Run each sample's n tokens (g->ids, (N, n)) from position 0: the next
 * tokens' logits are ready. */
static attn_status prime(attn_generator *g, int n, attn_error *err) {
    if (!g->gpu) return attn_gpt_kv_prefill_batch(g->model, &g->cache, g->ids, n, NULL, err);
    attn_status s = attn_cuda_gpt_forward(g->gpu, g->ids, NULL, 1, n, NULL, NULL, err);
    if (!s) s = attn_cuda_gpt_logits(g->gpu, (size_t)n - 1, 1, g->gpu_logits, err);
    g->gpu_len = n;
    return s;
}

/* Re-prime with the last n tokens of every sample's history. */
static attn_status prime_tail(attn_generator *g, int n, attn_error *err) {
    for (int i = 0; i < g->num_samples; i++)
        memcpy(g->ids + (size_t)i * (size_t)n,
               g->hist + (size_t)i * (size_t)g->cap_hist + (g->n_hist - n),
               (size_t)n * sizeof *g->ids);
    return prime(g, n, err);
}

static const float *current_logits(const attn_generator *g) {
    return g->gpu ? g->gpu_logits : g->cache.logits;
}

/* Room in g->hist for n prompt tokens (and a full window) per sample. */
static attn_status hist_room(attn_generator *g, size_t n, attn_error *err) {
    const int ctx = g->model->cfg.context_length;
    if (n > (size_t)(INT32_MAX - ctx - 1))
        return attn_fail(err, ATTN_ERR_INVALID_ARG, "the prompt is too long");
    int need = (int)n > ctx ? (int)n : ctx;
    if (need + 1 > g->cap_hist) {
        if ((size_t)(need + 1) > SIZE_MAX / sizeof(int32_t) / (size_t)g->num_samples)
            return attn_fail(err, ATTN_ERR_NOMEM, "out of memory for the prompt");
        int32_t *h = realloc(g->hist, (size_t)(need + 1) * (size_t)g->num_samples * sizeof *h);
        if (!h) return attn_fail(err, ATTN_ERR_NOMEM, "out of memory for the prompt");
        g->hist = h;
        g->cap_hist = need + 1;
    }
    return ATTN_OK;
}

/* Start from the n_hist prompt tokens in g->hist's first row. */
static attn_status start(attn_generator *g, int n_hist, attn_error *err) {
    const int ctx = g->model->cfg.context_length;
    /* Only the last ctx prompt tokens are read. */
    int window = n_hist < ctx ? n_hist : ctx;
    if (window < n_hist) memmove(g->hist, g->hist + n_hist - window, (size_t)window * 4);
    for (int i = 1; i < g->num_samples; i++)
        memcpy(g->hist + (size_t)i * (size_t)g->cap_hist, g->hist, (size_t)window * 4);
    g->n_hist = window;
    attn_status s = prime_tail(g, window, err);
    if (s) return s;
    g->has_pending = 0;
    g->stopped = 0;
    g->produced = 0;
    for (int i = 0; i < g->num_samples; i++) {
        attn_generator_sample *p = &g->samples[i];
        p->pending = -1;
        p->stopped = 0;
        p->tail_len = 0;
        attn_rng_seed(&p->rng, g->opt.seed + (uint64_t)i);
    }
    g->primed = 1;
    return ATTN_OK;
}

attn_status attn_generator_prompt(attn_generator *g, const char *text, size_t n, attn_error *err) {
    size_t cap = 0; /* room for the prompt's tokens */
    attn_status s = attn_tokenizer_max_ids(g->tok, text, n, &cap, err);
    if (s) return s;
    if (n == 0 || cap == 0) return attn_fail(err, ATTN_ERR_INVALID_ARG, "the prompt is empty");
    if ((s = hist_room(g, cap, err))) return s;
    size_t got = 0;
    g->primed = 0;
    s = attn_tokenizer_encode_ex(g->tok, text, n, g->opt.allow_special, g->hist, cap, &got, err);
    return s ? s : start(g, (int)got, err);
}

attn_status attn_generator_prompt_ids(attn_generator *g, const int32_t *ids, size_t n,
                                      attn_error *err) {
    if (n == 0) return attn_fail(err, ATTN_ERR_INVALID_ARG, "the prompt is empty");
    for (size_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= g->model->cfg.vocab_size)
            return attn_fail(err, ATTN_ERR_INVALID_ARG,
                             "token id %d at position %zu is outside the vocabulary (size %d)",
                             (int)ids[i], i, g->model->cfg.vocab_size);
    attn_status s = hist_room(g, n, err);
    if (s) return s;
    g->primed = 0;
    memcpy(g->hist, ids, n * sizeof *ids);
    return start(g, (int)n, err);
}

/* Feed the tokens sampled last: one cache step, or re-prime when full. */
static attn_status feed(attn_generator *g, attn_error *err) {
    const int ctx = g->model->cfg.context_length, N = g->num_samples;
    if (g->n_hist == ctx) {
        for (int i = 0; i < N; i++) {
            int32_t *h = g->hist + (size_t)i * (size_t)g->cap_hist;
            memmove(h, h + 1, (size_t)(ctx - 1) * sizeof *h);
        }
        g->n_hist--;
    }
    for (int i = 0; i < N; i++) {
        g->hist[(size_t)i * (size_t)g->cap_hist + (size_t)g->n_hist] = g->samples[i].pending;
        g->ids[i] = g->samples[i].pending;
    }
    g->n_hist++;
    if (g->gpu ? g->gpu_len == ctx : g->cache.len == g->cache.capacity) {
        int keep = g->opt.window_keep ? g->opt.window_keep : (ctx / 2 > 0 ? ctx / 2 : 1);
        if (keep > g->n_hist) keep = g->n_hist;
        return prime_tail(g, keep, err);
    }
    if (g->gpu) /* no cache there: rerun the window one token longer */
        return prime_tail(g, g->gpu_len + 1, err);
    return attn_gpt_kv_step_batch(g->model, &g->cache, g->ids, NULL, err);
}

/* Bring the cache up to date (feed the pending tokens) before a draw. */
static attn_status ready(attn_generator *g, attn_error *err) {
    if (!g->primed) return attn_fail(err, ATTN_ERR_STATE, "generator: no prompt given");
    if (g->stopped)
        return attn_fail(err, ATTN_ERR_STATE, "generator: the stop string was generated");
    if (g->has_pending) {
        attn_status s = feed(g, err);
        if (s) return s;
        g->has_pending = 0;
    }
    return ATTN_OK;
}

attn_status attn_generator_logits(attn_generator *g, const float **logits, attn_error *err) {
    attn_status s = ready(g, err);
    if (s) return s;
    *logits = current_logits(g);
    return ATTN_OK;
}

/* Keep the last stop_len generated bytes; note when they are the stop string. */
static void track_stop(const attn_generator *g, attn_generator_sample *p, const char *b, size_t k) {
    if (!g->stop_len) return;
    for (size_t i = 0; i < k; i++) {
        if (p->tail_len == g->stop_len) {
            memmove(p->tail, p->tail + 1, g->stop_len - 1);
            p->tail_len--;
        }
        p->tail[p->tail_len++] = b[i];
    }
    if (p->tail_len == g->stop_len && memcmp(p->tail, g->stop, g->stop_len) == 0) p->stopped = 1;
}

/* Sample i's next token from its logits row; a stopped sample repeats its
 * last token (the batch steps on; nobody reads it). */
static int32_t draw(attn_generator *g, int i, const char **bytes, size_t *len) {
    attn_generator_sample *p = &g->samples[i];
    const int V = g->model->cfg.vocab_size;
    if (p->stopped) {
        p->pending = g->hist[(size_t)i * (size_t)g->cap_hist + (size_t)g->n_hist - 1];
        return -1;
    }
    const int t = attn_sample_next(current_logits(g) + (size_t)i * (size_t)V, V, g->opt.temperature,
                                   g->opt.top_k, g->opt.top_p, &p->rng, g->cand);
    p->pending = t;
    size_t k = 0;
    const char *b = attn_tokenizer_token(g->tok, t, p->piece, &k);
    if (!b) b = "", k = 0; /* not reached: vocab_size is the tokenizer's */
    track_stop(g, p, b, k);
    if (bytes) *bytes = b;
    if (len) *len = k;
    return t;
}

attn_status attn_generator_next_tokens(attn_generator *g, int32_t *ids, attn_error *err) {
    attn_status s = ready(g, err);
    if (s) return s;
    int all = 1;
    for (int i = 0; i < g->num_samples; i++) {
        const int32_t t = draw(g, i, NULL, NULL);
        if (ids) ids[i] = t;
        all = all && g->samples[i].stopped;
    }
    g->has_pending = 1;
    g->produced++;
    g->stopped = all;
    return ATTN_OK;
}

attn_status attn_generator_next_token(attn_generator *g, int32_t *id, const char **bytes,
                                      size_t *len, attn_error *err) {
    if (g->num_samples != 1)
        return attn_fail(err, ATTN_ERR_STATE,
                         "generator of %d samples: draw with attn_generator_next_tokens",
                         g->num_samples);
    attn_status s = ready(g, err);
    if (s) return s;
    const char *b = "";
    size_t k = 0;
    const int32_t t = draw(g, 0, &b, &k);
    g->has_pending = 1;
    g->produced++;
    g->stopped = g->samples[0].stopped;
    if (id) *id = t;
    if (bytes) *bytes = b;
    if (len) *len = k;
    return ATTN_OK;
}

attn_status attn_generator_next(attn_generator *g, int32_t *id, char *utf8, int *len,
                                attn_error *err) {
    const char *b;
    size_t k;
    attn_status s = attn_generator_next_token(g, id, &b, &k, err);
    if (s) return s;
    if (utf8 && k > 7)
        return attn_fail(err, ATTN_ERR_INVALID_ARG,
                         "token of %zu bytes: read it with attn_generator_next_token", k);
    if (utf8) {
        memcpy(utf8, b, k);
        utf8[k] = '\0';
    }
    if (len) *len = (int)k;
    return ATTN_OK;
}

void attn_generator_free(attn_generator *g) {
    attn_gpt_kv_free(&g->cache);
    attn_cuda_gpt_free(g->gpu);
    for (int i = 0; g->samples && i < g->num_samples; i++)
        free(g->samples[i].tail);
    free(g->samples);
    free(g->gpu_logits);
    free(g->cand);
    free(g->hist);
    free(g->ids);
    free(g->stop);
    memset(g, 0, sizeof *g);
}
