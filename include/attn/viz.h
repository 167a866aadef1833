/* attn/viz.h — pictures of attention: a self-contained HTML page of a GPT's
 * weights on a prompt, and heatmaps as standalone SVG.
 *
 * Shapes: a prompt of n_prompt characters plus n_generated sampled ones is a
 * sequence of T = n_prompt + n_generated <= context_length tokens (a longer
 * prompt keeps its last context_length - n_generated characters, as
 * attn_generator keeps the last context_length);
 * attention is (n_layers, n_heads, T, T), attention[l][h][i][j] the causal
 * softmax weight query i puts on key j (before dropout, eval mode; 0 for
 * j > i), read with attn_gpt_attention_weights from attn_gpt_forward — the
 * training forward itself (attn/attention_weights.h).
 *
 * The page embeds its data as JSON in
 *   <script type="application/json" id="attn-data">
 * (schema in docs/viz.md, "The page's data"): format "attn-viz", version 1, tokens
 * (one string per character), token_ids, n_prompt, prompt_dropped, n_layers,
 * n_heads, attention[layer][head][query] = the query's row up to and including the
 * diagonal (query + 1 numbers, 6 decimals; the rest is exactly 0), and
 * generated[k] = {position, token, id, p, top: 5 x {token, id, p}}. The page
 * needs no network: script, style and fonts are inline or the browser's own.
 *
 * Every writer goes through attn/fileio.h: a failure leaves no file. */
#ifndef ATTN_VIZ_H
#define ATTN_VIZ_H

#include <stddef.h>
#include <stdint.h>

#include "attn/gpt.h"
#include "attn/status.h"
#include "attn/tokenizer.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------ heatmap SVG */

/* One matrix as a grid of coloured cells (rows top to bottom = queries,
 * columns left to right = keys). Cells that are -inf (masked scores) are
 * drawn grey with "-inf"; NaN is drawn as an empty white cell. Colour:
 * white -> dark blue over [lo, hi] of the finite values (lo = min(0, min)). */
typedef struct attn_viz_heatmap {
    int rows, cols;
    const float *values;           /* rows * cols, row-major */
    const char *const *row_labels; /* rows UTF-8 strings, or NULL: 1..rows */
    const char *const *col_labels; /* cols UTF-8 strings, or NULL: 1..cols */
    const char *title;             /* drawn above; may be NULL */
    const char *subtitle;          /* second line (e.g. the code); may be NULL */
    int show_values;               /* write each value in its cell */
    int decimals;                  /* digits after the point in the cells (4: PyTorch's) */
    int cell;                      /* cell size in px; <= 0: from the size */
    int causal;                    /* 1: cells above the diagonal are not drawn (masked) */
} attn_viz_heatmap;

/* The SVG document (UTF-8, NUL-terminated, malloc'd into *out; caller
 * frees). Every cell drawn is a <rect> with data-row, data-col and
 * data-value (the float with 9 significant digits, or "-inf") and a <title>
 * tooltip. */
attn_status attn_viz_heatmap_svg(const attn_viz_heatmap *h, char **out, attn_error *err);
attn_status attn_viz_write_heatmap_svg(const attn_viz_heatmap *h, const char *path,
                                       attn_error *err);

/* ------------------------------------------------------- a model's weights */

typedef struct attn_viz_options {
    int generate;       /* characters to sample after the prompt (default 0) */
    double temperature; /* default 0.8; 0 = greedy */
    int top_k;          /* default 200 (0: off) */
    uint64_t seed;      /* default 1337 */
} attn_viz_options;

/* The defaults of `attn generate`, so the same seed samples the same text. */
void attn_viz_options_default(attn_viz_options *o);

#define ATTN_VIZ_TOP 5

/* One sampled character: its probability and the five most likely ones,
 * from softmax(logits / temperature) (temperature 0: 1) at that step. */
typedef struct attn_viz_step {
    int32_t id;
    uint32_t ch; /* its code point (char tokenizer; 0 for gpt2) */
    float p;
    int32_t top_id[ATTN_VIZ_TOP];
    uint32_t top_ch[ATTN_VIZ_TOP];
    float top_p[ATTN_VIZ_TOP];
    char *text;                   /* the token as shown (attn_viz_data.texts) */
    char *top_text[ATTN_VIZ_TOP]; /* likewise */
} attn_viz_step;

typedef struct attn_viz_data {
    int n_layers, n_heads, T, n_prompt, n_generated;
    int prompt_dropped; /* characters left out at the prompt's start (the model
                           reads at most context_length); n_prompt is what stays */
    attn_gpt_config cfg;
    int32_t *ids;         /* (T) */
    uint32_t *chars;      /* (T) the code point of each token (char tokenizer; 0 for gpt2) */
    char **texts;         /* (T) each token's text as shown: its bytes as valid UTF-8
                             (attn_utf8_display; a gpt2 token holding part of a
                             character shows U+FFFD) */
    float *attention;     /* (n_layers, n_heads, T, T) */
    attn_viz_step *steps; /* (n_generated) */
    attn_viz_options opt;
    char *source;     /* what the page names as the model (e.g. the checkpoint path) */
    const char *unit; /* what a token is called: "characters" (char) or "tokens" (gpt2) */
} attn_viz_data;

/* Encode prompt (n bytes of UTF-8; gpt2: any bytes, <|endoftext|> as plain
 * text) with tok, sample opt->generate more tokens with the KV cache exactly as `attn generate`
 * (same seed, same text), then run the model's forward on the whole sequence and read every layer's
 * weights. A prompt longer than context_length - generate keeps its last characters
 * (d->prompt_dropped says how many went); sampling then starts from those. Errors (nothing
 * allocated on failure): empty prompt, a character outside the vocabulary (named, with its
 * position), generate >= context_length, bad options. source may be NULL. */
attn_status attn_viz_compute(attn_gpt *m, const attn_tokenizer *tok, const char *prompt, size_t n,
                             const attn_viz_options *opt, const char *source, attn_viz_data *d,
                             attn_error *err);
void attn_viz_data_free(attn_viz_data *d);

/* Heatmap of one layer/head (labels = the characters); layer/head outside
 * the model -> ATTN_ERR_INVALID_ARG naming the valid range. */
attn_status attn_viz_head_svg(const attn_viz_data *d, int layer, int head, char **out,
                              attn_error *err);
attn_status attn_viz_write_head_svg(const attn_viz_data *d, int layer, int head, const char *path,
                                    attn_error *err);

/* The page (head view, model view, generated characters), NUL-terminated,
 * malloc'd into *out with its length in *len (may be NULL). */
attn_status attn_viz_html(const attn_viz_data *d, char **out, size_t *len, attn_error *err);
attn_status attn_viz_write_html(const attn_viz_data *d, const char *path, attn_error *err);

/* How a character is shown in labels: space as U+2423 (open box), newline
 * as U+21B5, tab as U+21E5, other controls as U+FFFD; otherwise itself.
 * out has room for 5 bytes; returns the length written (NUL-terminated). */
int attn_viz_char_label(uint32_t c, char *out);

#ifdef __cplusplus
}
#endif
#endif
