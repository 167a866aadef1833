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

static void label_or_index(attn_vbuf *b, const char *const *labels, int i) {
    if (labels && labels[i])
        attn_vbuf_xml(b, labels[i]);
    else
        attn_vbuf_printf(b, "%d", i + 1);
}

attn_status attn_viz_heatmap_svg(const attn_viz_heatmap *h, char **out, attn_error *err) {
    *out = NULL;
    if (!h || !h->values || h->rows < 1 || h->cols < 1)
        return attn_fail(err, ATTN_ERR_INVALID_ARG, "heatmap: needs values and rows, cols >= 1");
    const int R = h->rows, C = h->cols;
    const size_t n = (size_t)R * (size_t)C;
    double lo = 0, hi = -INFINITY;
    for (size_t i = 0; i < n; i++)
        if (isfinite(h->values[i])) {
            if (h->values[i] < lo) lo = h->values[i];
            if (h->values[i] > hi) hi = h->values[i];
        }
    if (!(hi > lo)) hi = lo + 1;
    const int decimals = h->decimals > 0 ? h->decimals : 4;
    int cell = h->cell;
    if (cell <= 0) cell = h->show_values ? 12 + 8 * (decimals + 2) : (R <= 32 && C <= 32 ? 24 : 12);
    /* Label sizes from the longest label: rotated column labels when long. */
    int row_w = 1, col_w = 1;
    for (int i = 0; i < R; i++)
        if (h->row_labels && h->row_labels[i] && label_len(h->row_labels[i]) > row_w)
            row_w = label_len(h->row_labels[i]);
    for (int j = 0; j < C; j++)
        if (h->col_labels && h->col_labels[j] && label_len(h->col_labels[j]) > col_w)
            col_w = label_len(h->col_labels[j]);
    if (!h->row_labels) row_w = R >= 100 ? 3 : R >= 10 ? 2 : 1;
    if (!h->col_labels) col_w = C >= 100 ? 3 : C >= 10 ? 2 : 1;
    const int font = cell >= 24 ? 13 : cell >= 12 ? 10 : 8;
    const int rotate = col_w * font * 0.62 > cell;
    const int title_h = (h->title ? 24 : 0) + (h->subtitle ? 18 : 0) + 10;
    const int left = 30 + (int)(row_w * font * 0.62) + 8;
    const int top = title_h + 22 + (rotate ? (int)(col_w * font * 0.62 * 0.75) + 8 : font + 8);
    const int gw = C * cell, gh = R * cell;
    const int bar_x = left + gw + 24, width = bar_x + 80;
    const int sub_w = h->subtitle ? (int)(label_len(h->subtitle) * 7.3) : 0;
    const int title_w = h->title ? (int)(label_len(h->title) * 9.8) : 0;
    const int min_w = 30 + (sub_w > title_w ? sub_w : title_w);
    const int W = width > min_w ? width : min_w, H = top + gh + 40;

    attn_vbuf b = {0};
    attn_vbuf_printf(&b,
                     "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
                     "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
                     "viewBox=\"0 0 %d %d\" font-family=\"sans-serif\">\n"
                     "<rect width=\"100%%\" height=\"100%%\" fill=\"#ffffff\"/>\n",
                     W, H, W, H);
    int y = 8;
    if (h->title) {
        y += 18;
        attn_vbuf_printf(&b, "<text x=\"10\" y=\"%d\" font-size=\"16\" font-weight=\"bold\">", y);
        attn_vbuf_xml(&b, h->title);
        attn_vbuf_puts(&b, "</text>\n");
        y += 6;
    }
    if (h->subtitle) {
        y += 14;
        attn_vbuf_printf(&b,
                         "<text x=\"10\" y=\"%d\" font-size=\"12\" font-family=\"monospace\" "
                         "fill=\"#444444\">",
                         y);
        attn_vbuf_xml(&b, h->subtitle);
        attn_vbuf_puts(&b, "</text>\n");
    }
    /* Axis captions. */
    attn_vbuf_printf(&b,
                     "<text x=\"%d\" y=\"%d\" font-size=\"11\" fill=\"#666666\">keys (attended to) "
                     "&#8594;</text>\n",
                     left, title_h + 12);
    attn_vbuf_printf(&b,
                     "<text x=\"12\" y=\"%d\" font-size=\"11\" fill=\"#666666\" "
                     "transform=\"rotate(90 12 %d)\">queries (attending) &#8594;</text>\n",
                     top, top);
    /* Column labels. */
    attn_vbuf_printf(&b, "<g font-size=\"%d\">\n", font);
    for (int j = 0; j < C; j++) {
        const double cx = left + j * cell + cell / 2.0;
        if (rotate)
            attn_vbuf_printf(&b, "<text x=\"%.1f\" y=\"%d\" transform=\"rotate(-45 %.1f %d)\">", cx,
                             top - 6, cx, top - 6);
        else
            attn_vbuf_printf(&b, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">", cx, top - 6);
        label_or_index(&b, h->col_labels, j);
        attn_vbuf_puts(&b, "</text>\n");
    }
    for (int i = 0; i < R; i++) {
        attn_vbuf_printf(&b,
                         "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\" "
                         "dominant-baseline=\"central\">",
                         left - 6, top + i * cell + cell / 2.0);
        label_or_index(&b, h->row_labels, i);
        attn_vbuf_puts(&b, "</text>\n");
    }
    /* Cells (white lines between them come from the group's stroke). */
    attn_vbuf_printf(&b,
                     "</g>\n<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"none\" "
                     "stroke=\"#cccccc\"/>\n<g stroke=\"#ffffff\" stroke-width=\"%s\">\n",
                     left, top, gw, gh, cell >= 12 ? "1" : "0.25");
    for (int i = 0; i < R; i++)
        for (int j = 0; j < (h->causal && i + 1 < C ? i + 1 : C); j++) {
            const float v = h->values[(size_t)i * C + j];
            int rgb[3] = {255, 255, 255};
            const char *fill = NULL;
            if (isinf(v) && v < 0)
                fill = "#bdbdbd";
            else if (isfinite(v))
                colour_of((v - lo) / (hi - lo), rgb);
            const int x = left + j * cell, yy = top + i * cell;
            attn_vbuf_printf(&b, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" ", x, yy, cell,
                             cell);
            if (fill)
                attn_vbuf_printf(&b, "fill=\"%s\" ", fill);
            else
                attn_vbuf_printf(&b, "fill=\"#%02x%02x%02x\" ", rgb[0], rgb[1], rgb[2]);
            attn_vbuf_printf(&b, "data-row=\"%d\" data-col=\"%d\" data-value=\"", i, j);
            if (isinf(v))
                attn_vbuf_puts(&b, v < 0 ? "-inf" : "inf");
            else if (isnan(v))
                attn_vbuf_puts(&b, "nan");
            else
                attn_vbuf_printf(&b, "%.9g", (double)v);
            attn_vbuf_puts(&b, "\"><title>");
            label_or_index(&b, h->row_labels, i);
            attn_vbuf_puts(&b, " &#8594; ");
            label_or_index(&b, h->col_labels, j);
            if (isinf(v))
                attn_vbuf_puts(&b, v < 0 ? ": -inf (masked)" : ": inf");
            else
                attn_vbuf_printf(&b, ": %.4f", (double)v);
            attn_vbuf_puts(&b, "</title></rect>\n");
            if (h->show_values && !isnan(v)) {
                double t = isfinite(v) ? (v - lo) / (hi - lo) : 0;
                attn_vbuf_printf(&b,
                                 "<text x=\"%.1f\" y=\"%.1f\" font-size=\"12\" "
                                 "text-anchor=\"middle\" dominant-baseline=\"central\" "
                                 "font-family=\"monospace\" stroke=\"none\" fill=\"%s\">",
                                 x + cell / 2.0, yy + cell / 2.0, t > 0.55 ? "#ffffff" : "#000000");
                if (isinf(v))
                    attn_vbuf_puts(&b, v < 0 ? "-inf" : "inf");
                else
                    attn_vbuf_printf(&b, "%.*f", decimals, (double)v);
                attn_vbuf_puts(&b, "</text>\n");
            }
        }
    attn_vbuf_puts(&b, "</g>\n");
    /* Colour bar: lo at the bottom, hi at the top. */
    const int bar_h = gh < 200 ? gh : 200, steps = 20;
    for (int s = 0; s < steps; s++) {
        int rgb[3];
        colour_of(1.0 - (s + 0.5) / steps, rgb);
        attn_vbuf_printf(&b,
                         "<rect x=\"%d\" y=\"%.2f\" width=\"14\" height=\"%.2f\" "
                         "fill=\"#%02x%02x%02x\"/>\n",
                         bar_x, top + s * bar_h / (double)steps, bar_h / (double)steps + 0.3,
                         rgb[0], rgb[1], rgb[2]);
    }
    attn_vbuf_printf(&b,
                     "<rect x=\"%d\" y=\"%d\" width=\"14\" height=\"%d\" fill=\"none\" "
                     "stroke=\"#888888\"/>\n",
                     bar_x, top, bar_h);
    attn_vbuf_printf(&b,
                     "<text x=\"%d\" y=\"%d\" font-size=\"11\" dominant-baseline=\"central\">"
                     "%.4g</text>\n",
                     bar_x + 18, top + 4, hi);
    attn_vbuf_printf(&b,
                     "<text x=\"%d\" y=\"%d\" font-size=\"11\" dominant-baseline=\"central\">"
                     "%.4g</text>\n",
                     bar_x + 18, top + bar_h - 4, lo);
    attn_vbuf_puts(&b, "</svg>\n");
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
