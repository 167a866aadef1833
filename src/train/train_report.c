/* The loss report of a run: DIR/loss.csv and DIR/loss.svg (see attn/train.h). */
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn/fileio.h"
#include "attn/train.h"

#define PATH_BUF 4096


/* ------------------------------------------------------ loss.csv / svg */

static attn_status buf_printf(char **buf, size_t *len, size_t *cap, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;

static attn_status buf_printf(char **buf, size_t *len, size_t *cap, const char *fmt, ...) {
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int k = vsnprintf(*buf ? *buf + *len : NULL, *buf ? *cap - *len : 0, fmt, ap);
        va_end(ap);
        if (k < 0) return ATTN_ERR_IO;
        if (*buf && *len + (size_t)k < *cap) {
            *len += (size_t)k;
            return ATTN_OK;
        }
        size_t ncap = (*cap ? *cap * 2 : 4096) + (size_t)k;
        char *nb = realloc(*buf, ncap);
        if (!nb) return ATTN_ERR_NOMEM;
        *buf = nb;
        *cap = ncap;
    }
}

static attn_status write_csv(const attn_trainer *tr, const char *path, attn_error *err) {
    char *buf = NULL;
    size_t len = 0, cap = 0;
    attn_status s =
        buf_printf(&buf, &len, &cap, "step,loss,lr,grad_norm,train_loss,val_loss,val_loss_exact\n");
    size_t e = 0;
    for (size_t i = 0; !s && (i < tr->n_hist || e < tr->n_evals);) {
        int64_t hstep = i < tr->n_hist ? tr->hist[i].step : INT64_MAX;
        int64_t estep = e < tr->n_evals ? tr->evals[e].step : INT64_MAX;
        int64_t step = hstep < estep ? hstep : estep;
        s = buf_printf(&buf, &len, &cap, "%" PRId64 ",", step);
        if (!s && hstep == step) {
            const attn_train_record *r = &tr->hist[i++];
            s = buf_printf(&buf, &len, &cap, "%.9g,%.9g,%.9g,", (double)r->loss, (double)r->lr,
                           (double)r->grad_norm);
        } else if (!s) {
            s = buf_printf(&buf, &len, &cap, ",,,");
        }
        if (!s && estep == step) {
            const attn_eval_record *r = &tr->evals[e++];
            /* An estimate not taken is an empty cell. */
            s = buf_printf(&buf, &len, &cap, "%.9g,", (double)r->train_loss);
            if (!s && !isnan(r->val_loss))
                s = buf_printf(&buf, &len, &cap, "%.9g", (double)r->val_loss);
            if (!s) s = buf_printf(&buf, &len, &cap, ",");
            if (!s && !isnan(r->val_exact))
                s = buf_printf(&buf, &len, &cap, "%.9g", (double)r->val_exact);
            if (!s) s = buf_printf(&buf, &len, &cap, "\n");
        } else if (!s) {
            s = buf_printf(&buf, &len, &cap, ",,\n");
        }
    }
    if (s)
        s = attn_fail(err, s, "out of memory formatting %s", path);
    else
        s = attn_file_write_atomic(path, buf, len, err);
    free(buf);
    return s;
}

/* A self-contained SVG chart: batch loss (thin line), evaluations of the
 * train and val loss as points (they are sparse: no lines between them),
 * and the learning rate (dashed) against a right-hand axis. */
static attn_status write_svg(const attn_trainer *tr, const char *path, attn_error *err) {
    const double W = 800, H = 450, L = 70, R = 70, TOP = 40, BOT = 50;
    double lr_max = 0;
    for (size_t i = 0; i < tr->n_hist; i++)
        if (isfinite(tr->hist[i].lr)) lr_max = fmax(lr_max, tr->hist[i].lr);
    if (!(lr_max > 0)) lr_max = tr->tcfg.learning_rate > 0 ? tr->tcfg.learning_rate : 1;
    /* A time-budgeted run's steps are what fit: its x axis ends at the last. */
    double x_max = (double)tr->tcfg.max_steps, y_min = INFINITY, y_max = -INFINITY;
    if (tr->tcfg.time_budget > 0)
        x_max = tr->n_hist    ? (double)tr->hist[tr->n_hist - 1].step
                : tr->n_evals ? (double)tr->evals[tr->n_evals - 1].step
                              : 1;
    for (size_t i = 0; i < tr->n_hist; i++) {
        double v = tr->hist[i].loss;
        if (isfinite(v)) y_min = fmin(y_min, v), y_max = fmax(y_max, v);
    }
    for (size_t i = 0; i < tr->n_evals; i++) {
        double a = tr->evals[i].train_loss, b = tr->evals[i].val_loss, x = tr->evals[i].val_exact;
        if (isfinite(a)) y_min = fmin(y_min, a), y_max = fmax(y_max, a);
        if (isfinite(b)) y_min = fmin(y_min, b), y_max = fmax(y_max, b);
        if (isfinite(x)) y_min = fmin(y_min, x), y_max = fmax(y_max, x);
    }
    if (!isfinite(y_min)) y_min = 0, y_max = 1;
    y_min = floor(y_min * 2) / 2;
    y_max = ceil(y_max * 2) / 2;
    if (y_max <= y_min) y_max = y_min + 0.5;
    if (x_max < 1) x_max = 1;
#define SX(x) (L + (W - L - R) * (double)(x) / x_max)
#define SY(y) (TOP + (H - TOP - BOT) * (1.0 - ((double)(y)-y_min) / (y_max - y_min)))
#define SLR(v) (TOP + (H - TOP - BOT) * (1.0 - (double)(v) / lr_max))
    char *buf = NULL;
    size_t len = 0, cap = 0;
    attn_status s =
        buf_printf(&buf, &len, &cap,
                   "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%g\" height=\"%g\" "
                   "viewBox=\"0 0 %g %g\" font-family=\"sans-serif\" font-size=\"12\">\n"
                   "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n"
                   "<text x=\"%g\" y=\"24\" text-anchor=\"middle\" font-size=\"15\">attn train: "
                   "cross-entropy loss</text>\n",
                   W, H, W, H, W / 2);
    /* Grid and ticks: 5 on each axis. */
    for (int i = 0; i <= 5 && !s; i++) {
        double yv = y_min + (y_max - y_min) * i / 5, xv = x_max * i / 5;
        s = buf_printf(&buf, &len, &cap,
                       "<line x1=\"%g\" y1=\"%.1f\" x2=\"%g\" y2=\"%.1f\" stroke=\"#ddd\"/>\n"
                       "<text x=\"%g\" y=\"%.1f\" text-anchor=\"end\">%.2f</text>\n"
                       "<line x1=\"%.1f\" y1=\"%g\" x2=\"%.1f\" y2=\"%g\" stroke=\"#ddd\"/>\n"
                       "<text x=\"%.1f\" y=\"%g\" text-anchor=\"middle\">%.0f</text>\n",
                       L, SY(yv), W - R, SY(yv), L - 6, SY(yv) + 4, yv, SX(xv), TOP, SX(xv),
                       H - BOT, SX(xv), H - BOT + 18, xv);
        if (!s)
            s = buf_printf(&buf, &len, &cap,
                           "<text x=\"%g\" y=\"%.1f\" fill=\"#31a354\">%.2g</text>\n", W - R + 6,
                           SLR(lr_max * i / 5) + 4, lr_max * i / 5);
    }
    if (!s)
        s = buf_printf(&buf, &len, &cap,
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
    if (!s && tr->n_hist) {
        s = buf_printf(&buf, &len, &cap,
                       "<polyline fill=\"none\" stroke=\"#9ecae1\" stroke-width=\"1\" points=\"");
        for (size_t i = 0; i < tr->n_hist && !s; i++)
            if (isfinite(tr->hist[i].loss))
                s = buf_printf(&buf, &len, &cap, "%.1f,%.1f ", SX(tr->hist[i].step),
                               SY(tr->hist[i].loss));
        if (!s) s = buf_printf(&buf, &len, &cap, "\"/>\n");
    }
    if (!s && tr->n_hist) {
        s = buf_printf(&buf, &len, &cap,
                       "<polyline class=\"lr\" fill=\"none\" stroke=\"#31a354\" "
                       "stroke-width=\"1.5\" stroke-dasharray=\"5,3\" points=\"");
        for (size_t i = 0; i < tr->n_hist && !s; i++)
            if (isfinite(tr->hist[i].lr))
                s = buf_printf(&buf, &len, &cap, "%.1f,%.1f ", SX(tr->hist[i].step),
                               SLR(tr->hist[i].lr));
        if (!s) s = buf_printf(&buf, &len, &cap, "\"/>\n");
    }
    const char *colors[3] = {"#08519c", "#e6550d", "#7f0000"};
    for (int which = 0; which < 3 && !s && tr->n_evals; which++)
        for (size_t i = 0; i < tr->n_evals && !s; i++) {
            float v = which == 2 ? tr->evals[i].val_exact
                      : which    ? tr->evals[i].val_loss
                                 : tr->evals[i].train_loss;
            if (isfinite(v))
                s = buf_printf(&buf, &len, &cap,
                               "<circle class=\"eval\" cx=\"%.1f\" cy=\"%.1f\" r=\"3.5\" "
                               "fill=\"%s\"/>\n",
                               SX(tr->evals[i].step), SY(v), colors[which]);
        }
    /* Legend. */
    const char *labels[5] = {"batch loss", "train loss (eval)", "val loss (eval)",
                             "val loss (exact)", "learning rate"};
    const char *lc[5] = {"#9ecae1", "#08519c", "#e6550d", "#7f0000", "#31a354"};
    for (int i = 0; i < 5 && !s; i++)
        s = buf_printf(&buf, &len, &cap,
                       "<line x1=\"%g\" y1=\"%g\" x2=\"%g\" y2=\"%g\" stroke=\"%s\" "
                       "stroke-width=\"3\"/><text x=\"%g\" y=\"%g\">%s</text>\n",
                       W - R - 170, TOP + 16 + 18.0 * i, W - R - 145, TOP + 16 + 18.0 * i, lc[i],
                       W - R - 138, TOP + 20 + 18.0 * i, labels[i]);
    if (!s) s = buf_printf(&buf, &len, &cap, "</svg>\n");
#undef SX
#undef SY
#undef SLR
    if (s)
        s = attn_fail(err, s, "out of memory formatting %s", path);
    else
        s = attn_file_write_atomic(path, buf, len, err);
    free(buf);
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
