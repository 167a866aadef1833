/* Heatmaps as standalone SVG (see attn/viz.h): one <rect> per cell, labels
 * on both axes, a colour bar. Fonts are the viewer's own sans-serif and
 * monospace; nothing is fetched. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attn/fileio.h"
#include "attn/viz.h"
#include "viz_buf.h"

/* white -> dark blue */
static void colour_of(double t, int rgb[3]) {
    static const int lo[3] = {255, 255, 255}, mid[3] = {107, 174, 214}, hi[3] = {8, 48, 107};
    if (!(t >= 0)) t = 0;
    if (t > 1) t = 1;
    for (int k = 0; k < 3; k++)
        rgb[k] = t < 0.5 ? (int)lround(lo[k] + (mid[k] - lo[k]) * (t / 0.5))
                         : (int)lround(mid[k] + (hi[k] - mid[k]) * ((t - 0.5) / 0.5));
}

/* Code-point count of a UTF-8 label (its width in characters). */
static int label_len(const char *s) {
    int n = 0;
    for (; *s; s++)
        n += ((unsigned char)*s & 0xC0) != 0x80;
    return n;
}

static void label_or_index(attn_text *b, const char *const *labels, int i) {
    if (labels && labels[i])
        attn_vbuf_xml(b, labels[i]);
    else
        attn_text_printf(b, "%d", i + 1);
}

/* Where everything goes, and the colour scale, from the heatmap alone. */
typedef struct svg_layout {
    double lo, hi; /* the colour scale's ends: the finite values' range */
    int decimals, cell, font, rotate;
    int title_h, left, top; /* top, left: the grid's corner */
    int gw, gh, bar_x;      /* the grid's size; the colour bar's x */
    int W, H;
} svg_layout;

/* The colour scale: lo the smallest finite value (0 when none is below),
 * hi the largest (lo + 1 when that is not above lo). */
static void value_range(const attn_viz_heatmap *h, double *lo_out, double *hi_out) {
    const size_t n = (size_t)h->rows * (size_t)h->cols;
    double lo = 0, hi = -INFINITY;
    for (size_t i = 0; i < n; i++)
        if (isfinite(h->values[i])) {
            if (h->values[i] < lo) lo = h->values[i];
            if (h->values[i] > hi) hi = h->values[i];
        }
    if (!(hi > lo)) hi = lo + 1;
    *lo_out = lo;
    *hi_out = hi;
}

/* The width in characters of the longest of n labels; without labels, of
 * the largest index (1-based) drawn in their place. */
static int labels_width(const char *const *labels, int n) {
    if (!labels) return n >= 100 ? 3 : n >= 10 ? 2 : 1;
    int w = 1;
    for (int i = 0; i < n; i++)
        if (labels[i] && label_len(labels[i]) > w) w = label_len(labels[i]);
    return w;
}

static void layout_of(const attn_viz_heatmap *h, svg_layout *L) {
    const int R = h->rows, C = h->cols;
    value_range(h, &L->lo, &L->hi);
    L->decimals = h->decimals > 0 ? h->decimals : 4;
    int cell = h->cell;
    if (cell <= 0)
        cell = h->show_values ? 12 + 8 * (L->decimals + 2) : (R <= 32 && C <= 32 ? 24 : 12);
    L->cell = cell;
    /* Label sizes from the longest label: rotated column labels when long. */
    const int row_w = labels_width(h->row_labels, R), col_w = labels_width(h->col_labels, C);
    const int font = cell >= 24 ? 13 : cell >= 12 ? 10 : 8;
    L->font = font;
    L->rotate = col_w * font * 0.62 > cell;
    L->title_h = (h->title ? 24 : 0) + (h->subtitle ? 18 : 0) + 10;
    L->left = 30 + (int)(row_w * font * 0.62) + 8;
    L->top = L->title_h + 22 + (L->rotate ? (int)(col_w * font * 0.62 * 0.75) + 8 : font + 8);
    L->gw = C * cell;
    L->gh = R * cell;
    L->bar_x = L->left + L->gw + 24;
    const int width = L->bar_x + 80;
    const int sub_w = h->subtitle ? (int)(label_len(h->subtitle) * 7.3) : 0;
    const int title_w = h->title ? (int)(label_len(h->title) * 9.8) : 0;
    const int min_w = 30 + (sub_w > title_w ? sub_w : title_w);
    L->W = width > min_w ? width : min_w;
    L->H = L->top + L->gh + 40;
}

/* The document's start: the white page, the title and subtitle. */
static void put_head(attn_text *b, const attn_viz_heatmap *h, const svg_layout *L) {
    attn_text_printf(b,
                     "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
                     "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
                     "viewBox=\"0 0 %d %d\" font-family=\"sans-serif\">\n"
                     "<rect width=\"100%%\" height=\"100%%\" fill=\"#ffffff\"/>\n",
                     L->W, L->H, L->W, L->H);
    int y = 8;
    if (h->title) {
        y += 18;
        attn_text_printf(b, "<text x=\"10\" y=\"%d\" font-size=\"16\" font-weight=\"bold\">", y);
        attn_vbuf_xml(b, h->title);
        attn_text_puts(b, "</text>\n");
        y += 6;
    }
    if (h->subtitle) {
        y += 14;
        attn_text_printf(b,
                         "<text x=\"10\" y=\"%d\" font-size=\"12\" font-family=\"monospace\" "
                         "fill=\"#444444\">",
                         y);
        attn_vbuf_xml(b, h->subtitle);
        attn_text_puts(b, "</text>\n");
    }
}

/* The axis captions and every row and column label. */
static void put_axes(attn_text *b, const attn_viz_heatmap *h, const svg_layout *L) {
    const int left = L->left, top = L->top, cell = L->cell;
    attn_text_printf(b,
                     "<text x=\"%d\" y=\"%d\" font-size=\"11\" fill=\"#666666\">keys (attended to) "
                     "&#8594;</text>\n",
                     left, L->title_h + 12);
    attn_text_printf(b,
                     "<text x=\"12\" y=\"%d\" font-size=\"11\" fill=\"#666666\" "
                     "transform=\"rotate(90 12 %d)\">queries (attending) &#8594;</text>\n",
                     top, top);
    attn_text_printf(b, "<g font-size=\"%d\">\n", L->font);
    for (int j = 0; j < h->cols; j++) {
        const double cx = left + j * cell + cell / 2.0;
        if (L->rotate)
            attn_text_printf(b, "<text x=\"%.1f\" y=\"%d\" transform=\"rotate(-45 %.1f %d)\">", cx,
                             top - 6, cx, top - 6);
        else
            attn_text_printf(b, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">", cx, top - 6);
        label_or_index(b, h->col_labels, j);
        attn_text_puts(b, "</text>\n");
    }
    for (int i = 0; i < h->rows; i++) {
        attn_text_printf(b,
                         "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\" "
                         "dominant-baseline=\"central\">",
                         left - 6, top + i * cell + cell / 2.0);
        label_or_index(b, h->row_labels, i);
        attn_text_puts(b, "</text>\n");
    }
    attn_text_puts(b, "</g>\n");
}

/* One cell (i, j): its colour, its value for scripts and its tooltip, and
 * with show_values the value written in it. */
static void put_cell(attn_text *b, const attn_viz_heatmap *h, const svg_layout *L, int i, int j) {
    const float v = h->values[(size_t)i * h->cols + j];
    const double lo = L->lo, hi = L->hi;
    const int cell = L->cell;
    int rgb[3] = {255, 255, 255};
    const char *fill = NULL;
    if (isinf(v) && v < 0)
        fill = "#bdbdbd";
    else if (isfinite(v))
        colour_of((v - lo) / (hi - lo), rgb);
    const int x = L->left + j * cell, yy = L->top + i * cell;
    attn_text_printf(b, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" ", x, yy, cell, cell);
    if (fill)
        attn_text_printf(b, "fill=\"%s\" ", fill);
    else
        attn_text_printf(b, "fill=\"#%02x%02x%02x\" ", rgb[0], rgb[1], rgb[2]);
    attn_text_printf(b, "data-row=\"%d\" data-col=\"%d\" data-value=\"", i, j);
    if (isinf(v))
        attn_text_puts(b, v < 0 ? "-inf" : "inf");
    else if (isnan(v))
        attn_text_puts(b, "nan");
    else
        attn_text_printf(b, "%.9g", (double)v);
    attn_text_puts(b, "\"><title>");
    label_or_index(b, h->row_labels, i);
    attn_text_puts(b, " &#8594; ");
    label_or_index(b, h->col_labels, j);
    if (isinf(v))
        attn_text_puts(b, v < 0 ? ": -inf (masked)" : ": inf");
    else
        attn_text_printf(b, ": %.4f", (double)v);
    attn_text_puts(b, "</title></rect>\n");
    if (!h->show_values || isnan(v)) return;
    double t = isfinite(v) ? (v - lo) / (hi - lo) : 0;
    attn_text_printf(b,
                     "<text x=\"%.1f\" y=\"%.1f\" font-size=\"12\" "
                     "text-anchor=\"middle\" dominant-baseline=\"central\" "
                     "font-family=\"monospace\" stroke=\"none\" fill=\"%s\">",
                     x + cell / 2.0, yy + cell / 2.0, t > 0.55 ? "#ffffff" : "#000000");
    if (isinf(v))
        attn_text_puts(b, v < 0 ? "-inf" : "inf");
    else
        attn_text_printf(b, "%.*f", L->decimals, (double)v);
    attn_text_puts(b, "</text>\n");
}

/* The grid's frame and its cells (white lines between them come from the
 * group's stroke); causal: none above the diagonal. */
static void put_cells(attn_text *b, const attn_viz_heatmap *h, const svg_layout *L) {
    attn_text_printf(b,
                     "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"none\" "
                     "stroke=\"#cccccc\"/>\n<g stroke=\"#ffffff\" stroke-width=\"%s\">\n",
                     L->left, L->top, L->gw, L->gh, L->cell >= 12 ? "1" : "0.25");
    const int R = h->rows, C = h->cols;
    for (int i = 0; i < R; i++)
        for (int j = 0; j < (h->causal && i + 1 < C ? i + 1 : C); j++)
            put_cell(b, h, L, i, j);
    attn_text_puts(b, "</g>\n");
}

/* The colour bar: lo at the bottom, hi at the top. */
static void put_colour_bar(attn_text *b, const svg_layout *L) {
    const int bar_x = L->bar_x, top = L->top;
    const int bar_h = L->gh < 200 ? L->gh : 200, steps = 20;
    for (int s = 0; s < steps; s++) {
        int rgb[3];
        colour_of(1.0 - (s + 0.5) / steps, rgb);
        attn_text_printf(b,
                         "<rect x=\"%d\" y=\"%.2f\" width=\"14\" height=\"%.2f\" "
                         "fill=\"#%02x%02x%02x\"/>\n",
                         bar_x, top + s * bar_h / (double)steps, bar_h / (double)steps + 0.3,
                         rgb[0], rgb[1], rgb[2]);
    }
    attn_text_printf(b,
                     "<rect x=\"%d\" y=\"%d\" width=\"14\" height=\"%d\" fill=\"none\" "
                     "stroke=\"#888888\"/>\n",
                     bar_x, top, bar_h);
    attn_text_printf(b,
                     "<text x=\"%d\" y=\"%d\" font-size=\"11\" dominant-baseline=\"central\">"
                     "%.4g</text>\n",
                     bar_x + 18, top + 4, L->hi);
    attn_text_printf(b,
                     "<text x=\"%d\" y=\"%d\" font-size=\"11\" dominant-baseline=\"central\">"
                     "%.4g</text>\n",
                     bar_x + 18, top + bar_h - 4, L->lo);
}

attn_status attn_viz_heatmap_svg(const attn_viz_heatmap *h, char **out, attn_error *err) {
    *out = NULL;
    if (!h || !h->values || h->rows < 1 || h->cols < 1)
        return attn_fail(err, ATTN_ERR_INVALID_ARG, "heatmap: needs values and rows, cols >= 1");
    svg_layout L;
    layout_of(h, &L);
    attn_text b = {0};
    put_head(&b, h, &L);
    put_axes(&b, h, &L);
    put_cells(&b, h, &L);
    put_colour_bar(&b, &L);
    attn_text_puts(&b, "</svg>\n");
    if (b.oom) {
        free(b.s);
        return attn_fail(err, ATTN_ERR_NOMEM, "heatmap: out of memory for the SVG");
    }
    *out = b.s;
    return ATTN_OK;
}

attn_status attn_viz_write_heatmap_svg(const attn_viz_heatmap *h, const char *path,
                                       attn_error *err) {
    char *svg = NULL;
    attn_status s = attn_viz_heatmap_svg(h, &svg, err);
    if (s == ATTN_OK) s = attn_file_write_atomic(path, svg, strlen(svg), err);
    free(svg);
    return s;
}
