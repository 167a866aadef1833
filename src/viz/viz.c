/* attn viz's data: a prompt (plus sampled characters) through the GPT's own
 * forward, every layer's attention weights read back (see attn/viz.h). */
#define _POSIX_C_SOURCE 200809L /* strdup */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn/attention_weights.h"
#include "attn/fileio.h"
#include "attn/generate.h"
#include "attn/sample.h"
#include "attn/viz.h"

void attn_viz_options_default(attn_viz_options *o) {
    o->generate = 0;
    o->temperature = 0.8;
    o->top_k = 200;
    o->seed = 1337;
}

int attn_viz_char_label(uint32_t c, char *out) {
    uint32_t shown = c;
    if (c == ' ')
        shown = 0x2423;
    else if (c == '\n')
        shown = 0x21B5;
    else if (c == '\t')
        shown = 0x21E5;
    else if (c < 0x20 || c == 0x7F)
        shown = 0xFFFD;
    int k = attn_utf8_put(shown, out);
    out[k] = '\0';
    return k;
}

/* Token id as shown (malloc'd): its bytes through attn_utf8_display. */
static char *token_text(const attn_tokenizer *tok, int32_t id) {
    char tmp[4];
    size_t n = 0;
    const char *b = attn_tokenizer_token(tok, id, tmp, &n);
    char *out = malloc(ATTN_UTF8_DISPLAY_CAP(n));
    if (!out) return NULL;
    attn_utf8_display disp = {{0}, 0};
    size_t k = b ? attn_utf8_display_put(&disp, b, n, out) : 0;
    attn_utf8_display_end(&disp, out + k);
    return out;
}

/* A token's text as a label: each character as attn_viz_char_label shows
 * it (text is valid UTF-8). Returns the bytes written (NUL-terminated). */
static size_t text_label(const char *text, char *out) {
    const unsigned char *s = (const unsigned char *)text;
    size_t o = 0;
    while (*s) {
        const int len = *s < 0x80 ? 1 : *s < 0xE0 ? 2 : *s < 0xF0 ? 3 : 4;
        uint32_t c = len == 1 ? *s : (uint32_t)(*s & (0x7F >> len));
        for (int k = 1; k < len; k++)
            c = c << 6 | (s[k] & 0x3F);
        s += len;
        o += (size_t)attn_viz_char_label(c, out + o);
    }
    out[o] = '\0';
    return o;
}

void attn_viz_data_free(attn_viz_data *d) {
    for (int t = 0; d->texts && t < d->T; t++)
        free(d->texts[t]);
    for (int k = 0; d->steps && k < d->n_generated; k++) {
        free(d->steps[k].text);
        for (int t = 0; t < ATTN_VIZ_TOP; t++)
            free(d->steps[k].top_text[t]);
    }
    free(d->texts);
    free(d->ids);
    free(d->chars);
    free(d->attention);
    free(d->steps);
    free(d->source);
    memset(d, 0, sizeof *d);
}

/* The top five of probs (ties by lower id) into st. */
static void top_five(const attn_tokenizer *tok, const float *probs, int V, attn_viz_step *st) {
    for (int t = 0; t < ATTN_VIZ_TOP; t++) {
        int best = -1;
        for (int v = 0; v < V; v++) {
            int used = 0;
            for (int u = 0; u < t; u++)
                used |= st->top_id[u] == v;
            if (!used && (best < 0 || probs[v] > probs[best])) best = v;
        }
        st->top_id[t] = best;
        st->top_p[t] = best >= 0 ? probs[best] : 0.0f;
        st->top_ch[t] = best >= 0 && tok->chars ? tok->chars[best] : 0;
        st->top_text[t] = token_text(tok, best);
    }
}

/* Sample the generated tokens after the prompt's d->ids with attn generate's
 * generator (attn/generate.h: same draws for the same seed/temperature/
 * top-k), recording each draw's probability and top five. */
static attn_status sample_more(const attn_gpt *m, const attn_tokenizer *tok, attn_viz_data *d,
                               attn_error *err) {
    const int V = m->cfg.vocab_size, P = d->n_prompt, N = d->n_generated;
    float *probs = malloc((size_t)V * sizeof *probs);
    if (!probs) return attn_fail(err, ATTN_ERR_NOMEM, "viz: out of memory for sampling");
    attn_generate_options go;
    attn_generate_options_default(&go);
    go.temperature = d->opt.temperature;
    go.top_k = d->opt.top_k;
    go.seed = d->opt.seed;
    attn_generator g;
    attn_status s = attn_generator_init(&g, m, tok, &go, err);
    if (s) {
        free(probs);
        return s;
    }
    s = attn_generator_prompt_ids(&g, d->ids, (size_t)P, err);
    for (int k = 0; k < N && s == ATTN_OK; k++) {
        attn_viz_step *st = &d->steps[k];
        const float *logits;
        int32_t id;
        if ((s = attn_generator_logits(&g, &logits, err))) break;
        attn_sample_probs(logits, V, d->opt.temperature, probs);
        if ((s = attn_generator_next_token(&g, &id, NULL, NULL, err))) break;
        st->id = id;
        st->ch = tok->chars ? tok->chars[id] : 0;
        st->p = probs[id];
        st->text = token_text(tok, id);
        top_five(tok, probs, V, st);
        int ok = st->text != NULL;
        for (int t = 0; t < ATTN_VIZ_TOP; t++)
            ok &= st->top_text[t] != NULL;
        if (!ok) s = attn_fail(err, ATTN_ERR_NOMEM, "viz: out of memory for the tokens");
        d->ids[P + k] = id;
    }
    attn_generator_free(&g);
    free(probs);
    return s;
}

/* The options, and the tokenizer against the model. */
static attn_status check_options(const attn_gpt_config *c, const attn_tokenizer *tok,
                                 const attn_viz_options *o, attn_error *err) {
    if (o->generate < 0)
        return attn_fail(err, ATTN_ERR_INVALID_ARG, "generate must be >= 0, got %d", o->generate);
    if (!(o->temperature >= 0) || !isfinite(o->temperature)) /* as attn_generate_options_check */
        return attn_fail(err, ATTN_ERR_INVALID_ARG, "temperature must be >= 0 and finite, not %g",
                         o->temperature);
    if (o->top_k < 0)
        return attn_fail(err, ATTN_ERR_INVALID_ARG, "top_k must be >= 0, got %d", o->top_k);
    if (tok->vocab_size != c->vocab_size)
        return attn_fail(err, ATTN_ERR_SHAPE,
                         "viz: the tokenizer has %d tokens, the model's vocab_size is %d",
                         tok->vocab_size, c->vocab_size);
    return ATTN_OK;
}

/* The prompt's tokens (*ids, malloc'd, *count of them) with generate more
 * after them: every character must be known, the dropped ones too (as attn
 * generate); too long, the first *dropped tokens go. */
static attn_status fit_prompt(const attn_gpt_config *c, const attn_tokenizer *tok, int generate,
                              const char *prompt, size_t n, int32_t **ids, size_t *count,
                              size_t *dropped, attn_error *err) {
    size_t cap = 0;
    *ids = NULL;
    attn_status s = attn_tokenizer_max_ids(tok, prompt, n, &cap, err);
    if (s != ATTN_OK) return s;
    if (n == 0 || cap == 0) return attn_fail(err, ATTN_ERR_INVALID_ARG, "the prompt is empty");
    if (generate >= c->context_length)
        return attn_fail(err, ATTN_ERR_INVALID_ARG,
                         "generate asks for %d tokens; the model sees at most context_length "
                         "= %d, one prompt token included: at most %d",
                         generate, c->context_length, c->context_length - 1);
    if (!(*ids = malloc(cap * sizeof **ids)))
        return attn_fail(err, ATTN_ERR_NOMEM, "viz: out of memory for the prompt");
    s = attn_tokenizer_encode_ex(tok, prompt, n, 0, *ids, cap, count, err);
    if (s != ATTN_OK) {
        free(*ids);
        *ids = NULL;
        return s;
    }
    /* Too long: keep the last tokens that leave room for the generated. */
    const size_t room = (size_t)(c->context_length - generate);
    *dropped = *count > room ? *count - room : 0;
    return ATTN_OK;
}

/* d's sizes and buffers for count prompt characters and o->generate more. */
static attn_status alloc_data(attn_viz_data *d, const attn_gpt_config *c, const attn_viz_options *o,
                              size_t count, size_t dropped, const char *source, attn_error *err) {
    const int T = (int)count + o->generate;
    d->n_layers = c->n_layers;
    d->n_heads = c->n_heads;
    d->T = T;
    d->n_prompt = (int)count;
    d->n_generated = o->generate;
    d->prompt_dropped = (int)dropped;
    d->cfg = *c;
    d->opt = *o;
    const size_t TT = (size_t)T * (size_t)T, LH = (size_t)c->n_layers * (size_t)c->n_heads;
    d->ids = malloc((size_t)T * sizeof *d->ids);
    d->chars = calloc((size_t)T, sizeof *d->chars);
    d->texts = calloc((size_t)T, sizeof *d->texts);
    d->attention = malloc(LH * TT * sizeof *d->attention);
    d->steps = calloc(o->generate ? (size_t)o->generate : 1, sizeof *d->steps);
    if (source) d->source = strdup(source);
    if (!d->ids || !d->chars || !d->texts || !d->attention || !d->steps || (source && !d->source)) {
        attn_viz_data_free(d);
        return attn_fail(err, ATTN_ERR_NOMEM, "viz: out of memory for %d tokens", T);
    }
    return ATTN_OK;
}

/* The whole sequence d->ids through the training forward (eval mode):
 * every layer's attention weights, then the characters. */
static attn_status read_attention(attn_gpt *m, const attn_tokenizer *tok, attn_viz_data *d,
                                  attn_error *err) {
    const attn_gpt_config *c = &m->cfg;
    const int T = d->T;
    const size_t TT = (size_t)T * (size_t)T;
    attn_gpt_acts acts;
    memset(&acts, 0, sizeof acts);
    attn_status s = attn_gpt_acts_init(&acts, m, 1, T, err);
    if (s == ATTN_OK) s = attn_gpt_forward(m, d->ids, NULL, 1, T, NULL, &acts, NULL, err);
    for (int l = 0; l < c->n_layers && s == ATTN_OK; l++)
        s = attn_gpt_attention_weights(m, &acts, l, 0, d->attention + (size_t)l * c->n_heads * TT,
                                       err);
    attn_gpt_acts_free(&acts);
    for (int t = 0; t < T && s == ATTN_OK; t++) {
        if (tok->chars) d->chars[t] = tok->chars[d->ids[t]];
        if (!(d->texts[t] = token_text(tok, d->ids[t])))
            s = attn_fail(err, ATTN_ERR_NOMEM, "viz: out of memory for the tokens");
    }
    return s;
}

attn_status attn_viz_compute(attn_gpt *m, const attn_tokenizer *tok, const char *prompt, size_t n,
                             const attn_viz_options *opt, const char *source, attn_viz_data *d,
                             attn_error *err) {
    memset(d, 0, sizeof *d);
    attn_viz_options o;
    attn_viz_options_default(&o);
    if (opt) o = *opt;
    size_t count = 0, dropped = 0;
    int32_t *ids = NULL;
    attn_status s = check_options(&m->cfg, tok, &o, err);
    if (s == ATTN_OK)
        s = fit_prompt(&m->cfg, tok, o.generate, prompt, n, &ids, &count, &dropped, err);
    if (s == ATTN_OK) s = alloc_data(d, &m->cfg, &o, count - dropped, dropped, source, err);
    if (s == ATTN_OK) memcpy(d->ids, ids + dropped, (count - dropped) * sizeof *ids);
    if (s == ATTN_OK) d->unit = tok->kind == ATTN_TOKENIZER_CHAR ? "characters" : "tokens";
    free(ids);
    if (s != ATTN_OK) return s;
    if (o.generate > 0) s = sample_more(m, tok, d, err);
    if (s == ATTN_OK) s = read_attention(m, tok, d, err);
    if (s != ATTN_OK) attn_viz_data_free(d);
    return s;
}

static attn_status check_head(const attn_viz_data *d, int layer, int head, attn_error *err) {
    if (layer < 0 || layer >= d->n_layers)
        return attn_fail(err, ATTN_ERR_INVALID_ARG, "layer %d is outside 0..%d", layer,
                         d->n_layers - 1);
    if (head < 0 || head >= d->n_heads)
        return attn_fail(err, ATTN_ERR_INVALID_ARG, "head %d is outside 0..%d", head,
                         d->n_heads - 1);
    return ATTN_OK;
}

attn_status attn_viz_head_svg(const attn_viz_data *d, int layer, int head, char **out,
                              attn_error *err) {
    *out = NULL;
    attn_status s = check_head(d, layer, head, err);
    if (s != ATTN_OK) return s;
    const int T = d->T;
    size_t room = 0; /* each character's label is at most 4 bytes */
    for (int t = 0; t < T; t++)
        room += 4 * strlen(d->texts[t]) + 1;
    char *store = malloc(room);
    const char **labels = malloc((size_t)T * sizeof *labels);
    if (!store || !labels) {
        free(store);
        free(labels);
        return attn_fail(err, ATTN_ERR_NOMEM, "viz: out of memory");
    }
    for (size_t t = 0, at = 0; t < (size_t)T; t++) {
        labels[t] = store + at;
        at += text_label(d->texts[t], store + at) + 1;
    }
    char title[160], sub[200];
    snprintf(title, sizeof title, "Attention weights, layer %d, head %d (%d %s%s)", layer, head, T,
             d->unit ? d->unit : "characters", d->n_generated ? ", generated ones included" : "");
    snprintf(sub, sizeof sub,
             "softmax(Q K^T / sqrt(%d)), eval mode; blank above the diagonal: masked",
             d->cfg.emb_dim / d->cfg.n_heads);
    attn_viz_heatmap h = {.rows = T,
                          .cols = T,
                          .values = d->attention + ((size_t)layer * d->n_heads + head) * T * T,
                          .row_labels = labels,
                          .col_labels = labels,
                          .title = title,
                          .subtitle = sub,
                          .show_values = T <= 12,
                          .decimals = 2,
                          .causal = 1};
    s = attn_viz_heatmap_svg(&h, out, err);
    free(store);
    free(labels);
    return s;
}

attn_status attn_viz_write_head_svg(const attn_viz_data *d, int layer, int head, const char *path,
                                    attn_error *err) {
    char *svg = NULL;
    attn_status s = attn_viz_head_svg(d, layer, head, &svg, err);
    if (s == ATTN_OK) s = attn_file_write_atomic(path, svg, strlen(svg), err);
    free(svg);
    return s;
}
