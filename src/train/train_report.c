/* The loss report of a run: DIR/loss.csv and DIR/loss.svg (see attn/train.h). */
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn/fileio.h"
#include "attn/train.h"
#include "trainer.h"

#define PATH_BUF 4096

/* ------------------------------------------------------ loss.csv / svg */

/* A growing text. */
typedef struct text {
    char *buf;
    size_t len, cap;
} text;

static attn_status buf_printf(text *t, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

static attn_status buf_printf(text *t, const char *fmt, ...) {
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int k = vsnprintf(t->buf ? t->buf + t->len : NULL, t->buf ? t->cap - t->len : 0, fmt, ap);
        va_end(ap);
        if (k < 0) return ATTN_ERR_IO;
        if (t->buf && t->len + (size_t)k < t->cap) {
            t->len += (size_t)k;
            return ATTN_OK;
        }
        size_t ncap = (t->cap ? t->cap * 2 : 4096) + (size_t)k;
        char *nb = realloc(t->buf, ncap);
        if (!nb) return ATTN_ERR_NOMEM;
        t->buf = nb;
        t->cap = ncap;
    }
}

static attn_status write_csv(const attn_trainer *tr, const char *path, attn_error *err) {
    text o = {0};
    attn_status s = buf_printf(&o, "step,loss,lr,grad_norm,train_loss,val_loss,val_loss_exact\n");
    size_t e = 0;
    for (size_t i = 0; !s && (i < tr->n_hist || e < tr->n_evals);) {
        int64_t hstep = i < tr->n_hist ? tr->hist[i].step : INT64_MAX;
        int64_t estep = e < tr->n_evals ? tr->evals[e].step : INT64_MAX;
        int64_t step = hstep < estep ? hstep : estep;
        s = buf_printf(&o, "%" PRId64 ",", step);
        if (!s && hstep == step) {
            const attn_train_record *r = &tr->hist[i++];
            s = buf_printf(&o, "%.9g,%.9g,%.9g,", (double)r->loss, (double)r->lr,
                           (double)r->grad_norm);
        } else if (!s) {
            s = buf_printf(&o, ",,,");
        }
        if (!s && estep == step) {
            const attn_eval_record *r = &tr->evals[e++];
            /* An estimate not taken is an empty cell. */
            s = buf_printf(&o, "%.9g,", (double)r->train_loss);
            if (!s && !isnan(r->val_loss)) s = buf_printf(&o, "%.9g", (double)r->val_loss);
            if (!s) s = buf_printf(&o, ",");
            if (!s && !isnan(r->val_exact)) s = buf_printf(&o, "%.9g", (double)r->val_exact);
            if (!s) s = buf_printf(&o, "\n");
        } else if (!s) {
            s = buf_printf(&o, ",,\n");
        }
    }
    if (s)
        s = attn_fail(err, s, "out of memory formatting %s", path);
    else
        s = attn_file_write_atomic(path, o.buf, o.len, err);
    free(o.buf);
    return s;
}

/* The chart's size and margins. */
static const double W = 800, H = 450, L = 70, R = 70, TOP = 40, BOT = 50;

/* Its axes' ranges: steps (x), loss (left), learning rate (right). */
typedef struct chart {
    double x_max, y_min, y_max, lr_max;
} chart;

static double sx(const chart *c, double x) {
    return L + (W - L - R) * x / c->x_max;
}

static double sy(const chart *c, double y) {
    return TOP + (H - TOP - BOT) * (1.0 - (y - c->y_min) / (c->y_max - c->y_min));
}

static double slr(const chart *c, double v) {
    return TOP + (H - TOP - BOT) * (1.0 - v / c->lr_max);
}

static void widen(chart *c, double v) {
    if (isfinite(v)) c->y_min = fmin(c->y_min, v), c->y_max = fmax(c->y_max, v);
}

static chart chart_ranges(const attn_trainer *tr) {
    chart c = {(double)tr->tcfg.max_steps, INFINITY, -INFINITY, 0};
    for (size_t i = 0; i < tr->n_hist; i++)
        if (isfinite(tr->hist[i].lr)) c.lr_max = fmax(c.lr_max, tr->hist[i].lr);
    if (!(c.lr_max > 0)) c.lr_max = tr->tcfg.learning_rate > 0 ? tr->tcfg.learning_rate : 1;
    /* A time-budgeted run's steps are what fit: its x axis ends at the last. */
    if (tr->tcfg.time_budget > 0)
        c.x_max = tr->n_hist    ? (double)tr->hist[tr->n_hist - 1].step
                  : tr->n_evals ? (double)tr->evals[tr->n_evals - 1].step
                                : 1;
    for (size_t i = 0; i < tr->n_hist; i++)
        widen(&c, tr->hist[i].loss);
    for (size_t i = 0; i < tr->n_evals; i++) {
        widen(&c, tr->evals[i].train_loss);
        widen(&c, tr->evals[i].val_loss);
        widen(&c, tr->evals[i].val_exact);
    }
    if (!isfinite(c.y_min)) c.y_min = 0, c.y_max = 1;
    c.y_min = floor(c.y_min * 2) / 2;
    c.y_max = ceil(c.y_max * 2) / 2;
    if (c.y_max <= c.y_min) c.y_max = c.y_min + 0.5;
    if (c.x_max < 1) c.x_max = 1;
    return c;
}

/* The title, the grid with 5 ticks on each axis, the frame and the axes'
 * names. */
static attn_status svg_axes(text *o, const chart *c) {
    attn_status s =
        buf_printf(o,
                   "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%g\" height=\"%g\" "
                   "viewBox=\"0 0 %g %g\" font-family=\"sans-serif\" font-size=\"12\">\n"
                   "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n"
                   "<text x=\"%g\" y=\"24\" text-anchor=\"middle\" font-size=\"15\">attn train: "
                   "cross-entropy loss</text>\n",
                   W, H, W, H, W / 2);
    for (int i = 0; i <= 5 && !s; i++) {
        double yv = c->y_min + (c->y_max - c->y_min) * i / 5, xv = c->x_max * i / 5;
        s = buf_printf(o,
                       "<line x1=\"%g\" y1=\"%.1f\" x2=\"%g\" y2=\"%.1f\" stroke=\"#ddd\"/>\n"
                       "<text x=\"%g\" y=\"%.1f\" text-anchor=\"end\">%.2f</text>\n"
                       "<line x1=\"%.1f\" y1=\"%g\" x2=\"%.1f\" y2=\"%g\" stroke=\"#ddd\"/>\n"
                       "<text x=\"%.1f\" y=\"%g\" text-anchor=\"middle\">%.0f</text>\n",
                       L, sy(c, yv), W - R, sy(c, yv), L - 6, sy(c, yv) + 4, yv, sx(c, xv), TOP,
                       sx(c, xv), H - BOT, sx(c, xv), H - BOT + 18, xv);
        if (!s)
            s = buf_printf(o, "<text x=\"%g\" y=\"%.1f\" fill=\"#31a354\">%.2g</text>\n", W - R + 6,
                           slr(c, c->lr_max * i / 5) + 4, c->lr_max * i / 5);
    }
    if (!s)
        s = buf_printf(o,
                       "<rect x=\"%g\" y=\"%g\" width=\"%g\" height=\"%g\" fill=\"none\" "
                       "stroke=\"#333\"/>\n"
                       "<text x=\"%g\" y=\"%g\" text-anchor=\"middle\">step</text>\n"
                       "<text x=\"16\" y=\"%g\" text-anchor=\"middle\" "
                       "transform=\"rotate(-90 16 %g)\">loss</text>\n"
                       "<text x=\"%g\" y=\"%g\" text-anchor=\"middle\" fill=\"#31a354\" "
                       "transform=\"rotate(90 %g %g)\">learning rate</text>\n",
                       L, TOP, W - L - R, H - TOP - BOT, (L + W - R) / 2, H - 10,
                       (TOP + H - BOT) / 2, (TOP + H - BOT) / 2, W - 12, (TOP + H - BOT) / 2,
                       W - 12, (TOP + H - BOT) / 2);
    return s;
}

/* Batch loss (thin line) and the learning rate (dashed, right axis) by step. */
static attn_status svg_lines(text *o, const attn_trainer *tr, const chart *c) {
    if (!tr->n_hist) return ATTN_OK;
    attn_status s =
        buf_printf(o, "<polyline fill=\"none\" stroke=\"#9ecae1\" stroke-width=\"1\" points=\"");
    for (size_t i = 0; i < tr->n_hist && !s; i++)
        if (isfinite(tr->hist[i].loss))
            s = buf_printf(o, "%.1f,%.1f ", sx(c, (double)tr->hist[i].step),
                           sy(c, tr->hist[i].loss));
    if (!s) s = buf_printf(o, "\"/>\n");
    if (!s)
        s = buf_printf(o, "<polyline class=\"lr\" fill=\"none\" stroke=\"#31a354\" "
                          "stroke-width=\"1.5\" stroke-dasharray=\"5,3\" points=\"");
    for (size_t i = 0; i < tr->n_hist && !s; i++)
        if (isfinite(tr->hist[i].lr))
            s = buf_printf(o, "%.1f,%.1f ", sx(c, (double)tr->hist[i].step),
                           slr(c, tr->hist[i].lr));
    return s ? s : buf_printf(o, "\"/>\n");
}

/* The evaluations as points (sparse: no lines between them), then the
 * legend. */
static attn_status svg_points(text *o, const attn_trainer *tr, const chart *c) {
    const char *colors[3] = {"#08519c", "#e6550d", "#7f0000"};
    attn_status s = ATTN_OK;
    for (int which = 0; which < 3 && !s && tr->n_evals; which++)
        for (size_t i = 0; i < tr->n_evals && !s; i++) {
            float v = which == 2 ? tr->evals[i].val_exact
                      : which    ? tr->evals[i].val_loss
                                 : tr->evals[i].train_loss;
            if (isfinite(v))
                s = buf_printf(o,
                               "<circle class=\"eval\" cx=\"%.1f\" cy=\"%.1f\" r=\"3.5\" "
                               "fill=\"%s\"/>\n",
                               sx(c, (double)tr->evals[i].step), sy(c, v), colors[which]);
        }
    const char *labels[5] = {"batch loss", "train loss (eval)", "val loss (eval)",
                             "val loss (exact)", "learning rate"};
    const char *lc[5] = {"#9ecae1", "#08519c", "#e6550d", "#7f0000", "#31a354"};
    for (int i = 0; i < 5 && !s; i++)
        s = buf_printf(o,
                       "<line x1=\"%g\" y1=\"%g\" x2=\"%g\" y2=\"%g\" stroke=\"%s\" "
                       "stroke-width=\"3\"/><text x=\"%g\" y=\"%g\">%s</text>\n",
                       W - R - 170, TOP + 16 + 18.0 * i, W - R - 145, TOP + 16 + 18.0 * i, lc[i],
                       W - R - 138, TOP + 20 + 18.0 * i, labels[i]);
    return s;
}

/* A self-contained SVG chart: batch loss (thin line), evaluations of the
 * train and val loss as points, and the learning rate (dashed) against a
 * right-hand axis. */
static attn_status write_svg(const attn_trainer *tr, const char *path, attn_error *err) {
    const chart c = chart_ranges(tr);
    text o = {0};
    attn_status s = svg_axes(&o, &c);
    if (!s) s = svg_lines(&o, tr, &c);
    if (!s) s = svg_points(&o, tr, &c);
    if (!s) s = buf_printf(&o, "</svg>\n");
    if (s)
        s = attn_fail(err, s, "out of memory formatting %s", path);
    else
        s = attn_file_write_atomic(path, o.buf, o.len, err);
    free(o.buf);
    return s;
}

attn_status attn_trainer_write_loss_files(const attn_trainer *tr, const char *dir,
                                          attn_error *err) {
    char path[PATH_BUF];
    if (attn_path_join(path, PATH_BUF, dir, "loss.csv"))
        return attn_fail(err, ATTN_ERR_IO, "output directory path is too long");
    attn_status s = write_csv(tr, path, err);
    if (s) return s;
    attn_path_join(path, PATH_BUF, dir, "loss.svg");
    return write_svg(tr, path, err);
}
