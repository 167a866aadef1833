/* PyTorch-exact tensor printing (see attn/print.h). Mirrors the rules of
 * torch/_tensor_str.py in 1.13: one formatter (int / fixed / sci mode and a
 * common column width) chosen from the displayed values, then nested
 * brackets with the same indents, wraps and summarisation. */
#include "attn/print.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Growable output string; on allocation failure it sets failed and stops. */
typedef struct sbuf {
    char *s;
    size_t len, cap;
    int failed;
} sbuf;

static void sb_putn(sbuf *b, const char *s, size_t n) {
    if (b->failed) return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (b->len + n + 1 > cap)
            cap *= 2;
        char *p = realloc(b->s, cap);
        if (!p) {
            b->failed = 1;
            return;
        }
        b->s = p;
        b->cap = cap;
    }
    memcpy(b->s + b->len, s, n);
    b->len += n;
    b->s[b->len] = '\0';
}

static void sb_puts(sbuf *b, const char *s) {
    sb_putn(b, s, strlen(s));
}

static void sb_spaces(sbuf *b, int n) {
    for (int i = 0; i < n; i++)
        sb_putn(b, " ", 1);
}

/* Long enough for "%.*f" of FLT_MAX (39 digits) at the largest precision. */
#define VALUE_BUF 128
#define MAX_PRECISION 40

typedef struct formatter {
    int int_mode, sci_mode, max_width, precision;
} formatter;

typedef struct walk_ctx {
    const float *data;
    int ndim;
    const int64_t *shape;
    int64_t stride[ATTN_PRINT_MAX_DIMS];
    int summarize, edgeitems;
} walk_ctx;

/* Whether dim d shows only its first and last edgeitems entries. */
static int dim_summarized(const walk_ctx *w, int d) {
    return w->summarize && w->shape[d] > 2 * (int64_t)w->edgeitems;
}

/* Python prints non-finite floats as nan / inf / -inf (never "-nan"). */
static int nonfinite_str(double v, char *out) {
    if (isnan(v)) return snprintf(out, VALUE_BUF, "nan");
    if (isinf(v)) return snprintf(out, VALUE_BUF, v < 0 ? "-inf" : "inf");
    return -1;
}

static int fmt_fixed(double v, int precision, char *out) {
    int n = nonfinite_str(v, out);
    return n >= 0 ? n : snprintf(out, VALUE_BUF, "%.*f", precision, v);
}

static int fmt_sci(double v, int precision, char *out) {
    int n = nonfinite_str(v, out);
    return n >= 0 ? n : snprintf(out, VALUE_BUF, "%.*e", precision, v);
}

/* The formatter's view of one value, unpadded (_Formatter.format without
 * the padding). */
static int fmt_value(const formatter *f, float x, char *out) {
    double v = (double)x;
    if (f->sci_mode) return fmt_sci(v, f->precision, out);
    if (f->int_mode) {
        int n = fmt_fixed(v, 0, out);
        if (isfinite(v)) {
            out[n++] = '.';
            out[n] = '\0';
        }
        return n;
    }
    return fmt_fixed(v, f->precision, out);
}

/* Visit every displayed element (all of them unless summarised). */
typedef void (*visit_fn)(float v, void *arg);

static void walk(const walk_ctx *w, int d, int64_t offset, visit_fn fn, void *arg) {
    if (d == w->ndim) {
        fn(w->data[offset], arg);
        return;
    }
    int64_t n = w->shape[d];
    int summ = dim_summarized(w, d);
    for (int64_t i = 0; i < n; i++) {
        if (summ && i == w->edgeitems) i = n - w->edgeitems;
        walk(w, d + 1, offset + i * w->stride[d], fn, arg);
    }
}

typedef struct stats {
    int any, int_mode;
    double min_abs, max_abs;
} stats;

static void visit_stats(float v, void *arg) {
    stats *s = arg;
    if (!isfinite(v) || v == 0.0f) return;
    double a = fabs((double)v);
    if (!s->any || a < s->min_abs) s->min_abs = a;
    if (!s->any || a > s->max_abs) s->max_abs = a;
    s->any = 1;
    if (v != ceilf(v)) s->int_mode = 0;
}

typedef struct width_ctx {
    formatter *f;
    int extra; /* int mode counts the "." it appends */
} width_ctx;

static void visit_width(float v, void *arg) {
    width_ctx *c = arg;
    if (!isfinite(v) || v == 0.0f) return;
    char buf[VALUE_BUF];
    int n;
    if (c->f->sci_mode)
        n = fmt_sci((double)v, c->f->precision, buf);
    else
        n = fmt_fixed((double)v, c->f->int_mode ? 0 : c->f->precision, buf);
    if (n + c->extra > c->f->max_width) c->f->max_width = n + c->extra;
}

/* _Formatter.__init__: decided from the nonzero finite displayed values. */
static void formatter_init(formatter *f, const walk_ctx *w, const attn_print_options *o) {
    f->int_mode = 1;
    f->sci_mode = 0;
    f->max_width = 1;
    f->precision = o->precision;
    stats s = {0, 1, 0.0, 0.0};
    walk(w, 0, 0, visit_stats, &s);
    if (!s.any) return; /* only zeros / non-finite: PyTorch keeps the defaults */
    f->int_mode = s.int_mode;
    if (f->int_mode)
        f->sci_mode = s.max_abs / s.min_abs > 1000.0 || s.max_abs > 1.0e8;
    else
        f->sci_mode = s.max_abs / s.min_abs > 1000.0 || s.max_abs > 1.0e8 || s.min_abs < 1.0e-4;
    width_ctx c = {f, (f->int_mode && !f->sci_mode) ? 1 : 0};
    walk(w, 0, 0, visit_width, &c);
    if (o->sci_mode >= 0) f->sci_mode = o->sci_mode;
}

/* Formatted and left-padded to the common width. */
static void put_value(sbuf *b, const formatter *f, float v) {
    char buf[VALUE_BUF];
    int n = fmt_value(f, v, buf);
    sb_spaces(b, f->max_width - n);
    sb_putn(b, buf, (size_t)n);
}

static void put_vector(sbuf *b, const walk_ctx *w, const formatter *f, const attn_print_options *o,
                       int64_t offset, int indent) {
    int d = w->ndim - 1;
    int64_t n = w->shape[d];
    int element_length = f->max_width + 2;
    long per_line = (long)floor((double)(o->linewidth - indent) / (double)element_length);
    if (per_line < 1) per_line = 1;
    int summ = dim_summarized(w, d);
    sb_puts(b, "[");
    long item = 0;
    for (int64_t i = 0; i < n; i++, item++) {
        if (item > 0) {
            if (item % per_line == 0) {
                sb_puts(b, ",\n");
                sb_spaces(b, indent + 1);
            } else {
                sb_puts(b, ", ");
            }
        }
        if (summ && i == w->edgeitems) {
            /* " ..." is one more element of the line, as in _vector_str. */
            sb_puts(b, " ...");
            i = n - w->edgeitems - 1;
            continue;
        }
        put_value(b, f, w->data[offset + i * w->stride[d]]);
    }
    sb_puts(b, "]");
}

static void put_tensor(sbuf *b, const walk_ctx *w, const formatter *f, const attn_print_options *o,
                       int d, int64_t offset, int indent) {
    if (d == w->ndim - 1) {
        put_vector(b, w, f, o, offset, indent);
        return;
    }
    int64_t n = w->shape[d];
    int summ = dim_summarized(w, d);
    int rest = w->ndim - d; /* blank lines between blocks grow with depth */
    sb_puts(b, "[");
    int first = 1;
    for (int64_t i = 0; i < n; i++) {
        if (!first) {
            sb_puts(b, ",");
            for (int k = 0; k < rest - 1; k++)
                sb_puts(b, "\n");
            sb_spaces(b, indent + 1);
        }
        first = 0;
        if (summ && i == w->edgeitems) {
            sb_puts(b, "...");
            i = n - w->edgeitems - 1;
            continue;
        }
        put_tensor(b, w, f, o, d + 1, offset + i * w->stride[d], indent + 1);
    }
    sb_puts(b, "]");
}

/* _add_suffixes: ", suffix" on the last line, or ",\n" + indent + suffix
 * once the line would pass linewidth. */
static void put_suffix(sbuf *b, const char *suffix, int indent, int linewidth, long *last_len) {
    long n = (long)strlen(suffix);
    if (*last_len + n + 2 > linewidth) {
        sb_puts(b, ",\n");
        sb_spaces(b, indent);
        sb_puts(b, suffix);
        *last_len = indent + n;
    } else {
        sb_puts(b, ", ");
        sb_puts(b, suffix);
        *last_len += n + 2;
    }
}

void attn_print_options_default(attn_print_options *opts) {
    memset(opts, 0, sizeof *opts);
    opts->precision = 4;
    opts->threshold = 1000;
    opts->edgeitems = 3;
    opts->linewidth = 80;
    opts->sci_mode = -1;
}

/* The arguments attn_tensor_repr checks, and the element count. */
static attn_status check_args(const float *data, int ndim, const int64_t *shape,
                              const attn_print_options *opts, int64_t *numel, attn_error *err) {
    if (ndim < 0 || ndim > ATTN_PRINT_MAX_DIMS)
        return attn_fail(err, ATTN_ERR_INVALID_ARG, "print: ndim %d outside [0, %d]", ndim,
                         ATTN_PRINT_MAX_DIMS);
    if (ndim > 0 && !shape) return attn_fail(err, ATTN_ERR_INVALID_ARG, "print: shape is NULL");
    if (opts->precision < 0 || opts->precision > MAX_PRECISION || opts->edgeitems < 0 ||
        opts->threshold < 0 || opts->linewidth < 1 || opts->sci_mode < -1 || opts->sci_mode > 1)
        return attn_fail(err, ATTN_ERR_INVALID_ARG, "print: bad print options");
    *numel = 1;
    for (int d = 0; d < ndim; d++) {
        if (shape[d] < 0)
            return attn_fail(err, ATTN_ERR_INVALID_ARG, "print: dim %d is negative (%lld)", d,
                             (long long)shape[d]);
        *numel *= shape[d];
    }
    if (*numel > 0 && !data) return attn_fail(err, ATTN_ERR_INVALID_ARG, "print: data is NULL");
    return ATTN_OK;
}

/* The size suffix of an empty tensor, as str(tuple(shape)): "size=(0, 3)". */
static void size_text(int ndim, const int64_t *shape, char *out, size_t cap) {
    size_t k = (size_t)snprintf(out, cap, "size=(");
    for (int d = 0; d < ndim; d++)
        k += (size_t)snprintf(out + k, cap - k, "%s%lld", d ? ", " : "", (long long)shape[d]);
    snprintf(out + k, cap - k, ")");
}

/* The numel > 0 values, nested as PyTorch nests them. */
static void put_data(sbuf *b, const float *data, int ndim, const int64_t *shape, int64_t numel,
                     const attn_print_options *opts, int indent) {
    walk_ctx w;
    w.data = data;
    w.ndim = ndim;
    w.shape = shape;
    w.summarize = numel > (int64_t)opts->threshold;
    w.edgeitems = opts->edgeitems;
    int64_t stride = 1;
    for (int d = ndim - 1; d >= 0; d--) {
        w.stride[d] = stride;
        stride *= shape[d];
    }
    formatter f;
    formatter_init(&f, &w, opts);
    if (ndim == 0)
        put_value(b, &f, data[0]);
    else
        put_tensor(b, &w, &f, opts, 0, 0, indent);
}

/* The size suffix (when not "") and the options' suffixes, placed by the
 * length of the text's last line. */
static void put_suffixes(sbuf *b, const char *size_suffix, const attn_print_options *opts,
                         int indent) {
    const char *last_nl = strrchr(b->s, '\n');
    long pos = last_nl ? (long)(last_nl - b->s) : -1;
    long last_len = (long)b->len - pos + 1; /* PyTorch's count, off by one included */
    if (size_suffix[0]) put_suffix(b, size_suffix, indent, opts->linewidth, &last_len);
    for (int i = 0; i < ATTN_PRINT_MAX_SUFFIXES && opts->suffixes[i]; i++)
        put_suffix(b, opts->suffixes[i], indent, opts->linewidth, &last_len);
}

attn_status attn_tensor_repr(const float *data, int ndim, const int64_t *shape,
                             const attn_print_options *opts, char **out, attn_error *err) {
    attn_print_options defaults;
    if (!opts) {
        attn_print_options_default(&defaults);
        opts = &defaults;
    }
    if (!out) return attn_fail(err, ATTN_ERR_INVALID_ARG, "print: out is NULL");
    *out = NULL;
    int64_t numel = 0;
    attn_status s = check_args(data, ndim, shape, opts, &numel, err);
    if (s != ATTN_OK) return s;
    const char *prefix = "tensor(";
    const int indent = (int)strlen(prefix);
    sbuf b = {NULL, 0, 0, 0};
    sb_puts(&b, prefix);
    char size_suffix[32 + ATTN_PRINT_MAX_DIMS * 24] = "";
    if (numel == 0) {
        sb_puts(&b, "[]");
        if (ndim != 1) size_text(ndim, shape, size_suffix, sizeof size_suffix);
    } else {
        put_data(&b, data, ndim, shape, numel, opts, indent);
    }
    if (!b.failed) put_suffixes(&b, size_suffix, opts, indent);
    sb_puts(&b, ")");
    if (b.failed) {
        free(b.s);
        return attn_fail(err, ATTN_ERR_NOMEM, "print: out of memory");
    }
    *out = b.s;
    return ATTN_OK;
}

attn_status attn_tensor_format(const float *data, int ndim, const int64_t *shape,
                               const attn_print_options *opts, char *buf, size_t cap,
                               size_t *needed, attn_error *err) {
    char *s = NULL;
    attn_status st = attn_tensor_repr(data, ndim, shape, opts, &s, err);
    if (st != ATTN_OK) return st;
    size_t n = strlen(s);
    if (needed) *needed = n;
    if (cap > 0) {
        size_t k = n < cap - 1 ? n : cap - 1;
        memcpy(buf, s, k);
        buf[k] = '\0';
    }
    free(s);
    if (n + 1 > cap)
        return attn_fail(err, ATTN_ERR_INVALID_ARG, "print: %zu bytes needed, buffer holds %zu",
                         n + 1, cap);
    return ATTN_OK;
}
