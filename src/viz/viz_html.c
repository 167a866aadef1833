/* attn viz's page (see attn/viz.h): one self-contained HTML file, the data
 * as JSON in <script type="application/json" id="attn-data">, then the
 * inline style and script below that draw the head view, the generated
 * characters and the model view from it. No network, no external fonts. */
#include <stdlib.h>
#include <string.h>

#include "attn/fileio.h"
#include "attn/viz.h"
#include "viz_buf.h"

/* The page's style, error collector, body and script, one line each. */
#include "page.inc"

static void put_lines(attn_text *b, const char *const *lines) {
    for (; *lines; lines++)
        attn_text_puts(b, *lines);
}

static void put_text(attn_text *b, const char *text) {
    attn_vbuf_json_str(b, text ? text : "");
}

/* The attn-data JSON (schema: docs/viz.md, "The page's data"). Weights with 6
 * decimals: 5e-7 at most from the float, a fraction of a screen shade. */
static void put_json(attn_text *b, const attn_viz_data *d) {
    const attn_gpt_config *c = &d->cfg;
    const int T = d->T;
    attn_text_puts(b, "{\"format\":\"attn-viz\",\"version\":1,\"source\":");
    attn_vbuf_json_str(b, d->source ? d->source : "");
    attn_text_printf(b, ",\"unit\":\"%s\"", d->unit ? d->unit : "characters"); /* a literal */
    attn_text_printf(b,
                     ",\"config\":{\"vocab_size\":%d,\"context_length\":%d,\"emb_dim\":%d,"
                     "\"n_heads\":%d,\"n_layers\":%d,\"drop_rate\":%.9g,\"qkv_bias\":%s}",
                     c->vocab_size, c->context_length, c->emb_dim, c->n_heads, c->n_layers,
                     c->drop_rate, c->qkv_bias ? "true" : "false");
    attn_text_printf(b, ",\"n_layers\":%d,\"n_heads\":%d,\"n_prompt\":%d,\"prompt_dropped\":%d",
                     d->n_layers, d->n_heads, d->n_prompt, d->prompt_dropped);
    attn_text_printf(b, ",\"sampling\":{\"temperature\":%.9g,\"top_k\":%d,\"seed\":%llu}",
                     d->opt.temperature, d->opt.top_k, (unsigned long long)d->opt.seed);
    attn_text_puts(b, ",\n\"tokens\":[");
    for (int t = 0; t < T; t++) {
        if (t) attn_text_putn(b, ",", 1);
        put_text(b, d->texts[t]);
    }
    attn_text_puts(b, "],\n\"token_ids\":[");
    for (int t = 0; t < T; t++)
        attn_text_printf(b, "%s%d", t ? "," : "", (int)d->ids[t]);
    attn_text_puts(b, "],\n\"generated\":[");
    for (int k = 0; k < d->n_generated; k++) {
        const attn_viz_step *st = &d->steps[k];
        attn_text_printf(b, "%s{\"position\":%d,\"token\":", k ? ",\n" : "", d->n_prompt + k);
        put_text(b, st->text);
        attn_text_printf(b, ",\"id\":%d,\"p\":", (int)st->id);
        attn_vbuf_fixed(b, st->p, 6);
        attn_text_puts(b, ",\"top\":[");
        for (int t = 0; t < ATTN_VIZ_TOP; t++) {
            attn_text_puts(b, t ? ",{\"token\":" : "{\"token\":");
            put_text(b, st->top_text[t]);
            attn_text_printf(b, ",\"id\":%d,\"p\":", (int)st->top_id[t]);
            attn_vbuf_fixed(b, st->top_p[t], 6);
            attn_text_puts(b, "}");
        }
        attn_text_puts(b, "]}");
    }
    attn_text_puts(b, "],\n\"attention\":[");
    for (int l = 0; l < d->n_layers; l++) {
        attn_text_puts(b, l ? ",\n[" : "\n[");
        for (int h = 0; h < d->n_heads; h++) {
            attn_text_puts(b, h ? ",\n[" : "[");
            const float *W = d->attention + ((size_t)l * d->n_heads + h) * (size_t)T * T;
            for (int i = 0; i < T; i++) {
                attn_text_puts(b, i ? ",[" : "[");
                for (int j = 0; j <= i; j++) {
                    if (j) attn_text_putn(b, ",", 1);
                    attn_vbuf_fixed(b, W[(size_t)i * T + j], 6);
                }
                attn_text_putn(b, "]", 1);
            }
            attn_text_putn(b, "]", 1);
        }
        attn_text_putn(b, "]", 1);
    }
    attn_text_puts(b, "]}");
}

attn_status attn_viz_html(const attn_viz_data *d, char **out, size_t *len, attn_error *err) {
    *out = NULL;
    if (len) *len = 0;
    if (!d || d->T < 1 || !d->attention)
        return attn_fail(err, ATTN_ERR_INVALID_ARG, "viz: no data to draw");
    attn_text b = {0};
    attn_text_puts(&b, "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
                       "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
                       "<title>attn viz: ");
    attn_vbuf_xml(&b, d->source ? d->source : "attention");
    attn_text_puts(&b, "</title>\n<style>\n");
    put_lines(&b, page_css);
    attn_text_puts(&b, "</style>\n<script>\n");
    put_lines(&b, page_collect_js);
    attn_text_puts(&b, "</script>\n</head>\n<body>\n");
    put_lines(&b, page_body);
    attn_text_puts(&b, "<script type=\"application/json\" id=\"attn-data\">");
    put_json(&b, d);
    attn_text_puts(&b, "</script>\n<script>\n");
    put_lines(&b, page_js);
    attn_text_puts(&b, "</script>\n</body>\n</html>\n");
    if (b.oom) {
        free(b.s);
        return attn_fail(err, ATTN_ERR_NOMEM, "viz: out of memory for the page");
    }
    *out = b.s;
    if (len) *len = b.len;
    return ATTN_OK;
}

attn_status attn_viz_write_html(const attn_viz_data *d, const char *path, attn_error *err) {
    char *page = NULL;
    size_t n = 0;
    attn_status s = attn_viz_html(d, &page, &n, err);
    if (s == ATTN_OK) s = attn_file_write_atomic(path, page, n, err);
    free(page);
    return s;
}
