/* A classification set from the book's CSV or a TSV, encoded and padded
 * (attn_class_data_read, attn/finetune.h). */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "attn/fileio.h"
#include "attn/finetune.h"

/* One record's two fields, pointing into the file's copy (unquoted in
 * place); line: where the record starts. */
typedef struct record {
    char *label, *text;
    size_t text_len;
    size_t line;
} record;

typedef struct reader {
    char *p, *end;
    size_t line;
    int tsv;
    const char *path;
} reader;

/* The next field: quoted (CSV: "" is a quote, newlines kept) or up to the
 * separator or the line's end. *last: it ended the record. */
static char *next_field(reader *r, size_t *len, int *last) {
    const char sep = r->tsv ? '\t' : ',';
    char *start = r->p, *w = r->p;
    if (!r->tsv && r->p < r->end && *r->p == '"') {
        r->p++;
        while (r->p < r->end) {
            if (*r->p == '"' && r->p + 1 < r->end && r->p[1] == '"') {
                *w++ = '"';
                r->p += 2;
            } else if (*r->p == '"') {
                r->p++;
                break;
            } else {
                if (*r->p == '\n') r->line++;
                *w++ = *r->p++;
            }
        }
    }
    while (r->p < r->end && *r->p != sep && *r->p != '\n')
        *w++ = *r->p++;
    *len = (size_t)(w - start);
    if (*len && start[*len - 1] == '\r' && (r->p >= r->end || *r->p == '\n')) (*len)--;
    *last = r->p >= r->end || *r->p == '\n';
    if (r->p < r->end) {
        if (*r->p == '\n') r->line++;
        r->p++;
    }
    start[*len] = '\0'; /* over the separator, a quote or the newline: all read */
    return start;
}

/* The next record of two fields (more are an error); 0 at the end. */
static attn_status next_record(reader *r, record *rec, int *got, attn_error *err) {
    *got = 0;
    while (r->p < r->end && (*r->p == '\n' || (*r->p == '\r' && r->p + 1 < r->end &&
                                               r->p[1] == '\n'))) { /* blank lines */
        r->p += *r->p == '\r' ? 2 : 1;
        r->line++;
    }
    if (r->p >= r->end) return ATTN_OK;
    rec->line = r->line;
    size_t n;
    int last;
    rec->label = next_field(r, &n, &last);
    if (last)
        return attn_fail(err, ATTN_ERR_FORMAT, "%s:%zu: no text (a row is label%stext)", r->path,
                         rec->line, r->tsv ? "<TAB>" : ",");
    rec->text = next_field(r, &rec->text_len, &last);
    if (!last)
        return attn_fail(err, ATTN_ERR_FORMAT, "%s:%zu: more than two fields (label%stext)",
                         r->path, rec->line, r->tsv ? "<TAB>" : ",");
    *got = 1;
    return ATTN_OK;
}

static attn_status parse_label(const reader *r, const record *rec, int32_t *out, attn_error *err) {
    const char *s = rec->label;
    while (*s == ' ')
        s++;
    if (!*s) return attn_fail(err, ATTN_ERR_FORMAT, "%s:%zu: missing label", r->path, rec->line);
    char *end;
    errno = 0;
    const long v = strtol(s, &end, 10);
    while (*end == ' ')
        end++;
    if (*end || errno || v < 0 || v > 1000000 || (*s < '0' || *s > '9'))
        return attn_fail(err, ATTN_ERR_FORMAT,
                         "%s:%zu: the label '%.40s' is not an integer in [0, 1000000]", r->path,
                         rec->line, rec->label);
    *out = (int32_t)v;
    return ATTN_OK;
}

/* TSV: the name says so, or the first line has a TAB before any comma. */
static int is_tsv(const char *path, const char *text, size_t n) {
    const size_t pl = strlen(path);
    if (pl >= 4 && strcasecmp(path + pl - 4, ".tsv") == 0) return 1;
    for (size_t i = 0; i < n && text[i] != '\n'; i++) {
        if (text[i] == ',') return 0;
        if (text[i] == '\t') return 1;
    }
    return 0;
}

/* The CSV's header: Label,Text (the book's; any case). */
static attn_status check_header(reader *r, attn_error *err) {
    record h;
    int got;
    attn_status s = next_record(r, &h, &got, err);
    if (s) return s;
    if (!got || strcasecmp(h.label, "Label") != 0 || strcasecmp(h.text, "Text") != 0)
        return attn_fail(err, ATTN_ERR_FORMAT,
                         "%s:1: the header must be Label,Text (the book's CSV), not '%.40s,%.40s'",
                         r->path, got ? h.label : "", got ? h.text : "");
    return ATTN_OK;
}

/* Every row encoded: ids[i] (malloc'd) of lens[i] tokens. */
typedef struct encoded {
    int32_t **ids;
    size_t *lens;
    int32_t *labels;
    size_t n, cap;
} encoded;

static void encoded_free(encoded *e) {
    for (size_t i = 0; i < e->n; i++)
        free(e->ids[i]);
    free(e->ids);
    free(e->lens);
    free(e->labels);
}

static attn_status encode_row(const reader *r, const record *rec, const attn_tokenizer *tok,
                              encoded *e, attn_error *err) {
    int32_t label = 0;
    attn_status s = parse_label(r, rec, &label, err);
    if (s) return s;
    if (rec->text_len == 0)
        return attn_fail(err, ATTN_ERR_FORMAT, "%s:%zu: empty text", r->path, rec->line);
    if (e->n == e->cap) {
        const size_t cap = e->cap ? 2 * e->cap : 256;
        int32_t **ids = realloc(e->ids, cap * sizeof *ids);
        if (ids) e->ids = ids;
        size_t *lens = realloc(e->lens, cap * sizeof *lens);
        if (lens) e->lens = lens;
        int32_t *labels = realloc(e->labels, cap * sizeof *labels);
        if (labels) e->labels = labels;
        if (!ids || !lens || !labels)
            return attn_fail(err, ATTN_ERR_NOMEM, "out of memory for %s", r->path);
        e->cap = cap;
    }
    size_t cap, n;
    if ((s = attn_tokenizer_max_ids(tok, rec->text, rec->text_len, &cap, err))) return s;
    int32_t *ids = malloc(cap * sizeof *ids);
    if (!ids) return attn_fail(err, ATTN_ERR_NOMEM, "out of memory for %s", r->path);
    if ((s = attn_tokenizer_encode(tok, rec->text, rec->text_len, ids, &n, err))) {
        free(ids);
        return s;
    }
    e->ids[e->n] = ids;
    e->lens[e->n] = n;
    e->labels[e->n] = label;
    e->n++;
    return ATTN_OK;
}

static attn_status read_rows(const char *path, char *text, size_t size, const attn_tokenizer *tok,
                             encoded *e, attn_error *err) {
    reader r = {text, text + size, 1, is_tsv(path, text, size), path};
    attn_status s = r.tsv ? ATTN_OK : check_header(&r, err);
    for (int got = 1; !s && got;) {
        record rec;
        s = next_record(&r, &rec, &got, err);
        if (!s && got) s = encode_row(&r, &rec, tok, e, err);
    }
    if (!s && e->n == 0) s = attn_fail(err, ATTN_ERR_FORMAT, "%s holds no rows", path);
    return s;
}

/* The padded table of e at max_len (0: the longest, at most context). */
static attn_status pad_rows(const encoded *e, int max_len, int context, attn_class_data *d,
                            attn_error *err) {
    size_t longest = 0;
    for (size_t i = 0; i < e->n; i++)
        longest = e->lens[i] > longest ? e->lens[i] : longest;
    const size_t L = max_len > 0                 ? (size_t)max_len
                     : longest < (size_t)context ? longest
                                                 : (size_t)context;
    d->ids = malloc(e->n * L * sizeof *d->ids);
    d->labels = malloc(e->n * sizeof *d->labels);
    if (!d->ids || !d->labels) return attn_fail(err, ATTN_ERR_NOMEM, "out of memory for the rows");
    d->n = e->n;
    d->max_len = (int)L;
    d->longest = longest;
    for (size_t i = 0; i < e->n; i++) {
        const size_t k = e->lens[i] < L ? e->lens[i] : L;
        d->truncated += e->lens[i] > L;
        memcpy(d->ids + i * L, e->ids[i], k * sizeof(int32_t));
        for (size_t t = k; t < L; t++)
            d->ids[i * L + t] = ATTN_PAD_ID;
        d->labels[i] = e->labels[i];
        d->max_label = e->labels[i] > d->max_label ? e->labels[i] : d->max_label;
    }
    return ATTN_OK;
}

attn_status attn_class_data_read(const char *path, const attn_tokenizer *tok, int max_len,
                                 int context, attn_class_data *d, attn_error *err) {
    memset(d, 0, sizeof *d);
    if (!tok || tok->kind != ATTN_TOKENIZER_GPT2 || tok->vocab_size <= ATTN_PAD_ID)
        return attn_fail(err, ATTN_ERR_INVALID_ARG,
                         "a classifier pads with <|endoftext|> (%d): it needs GPT-2's tokenizer",
                         ATTN_PAD_ID);
    if (context < 1 || max_len < 0 || max_len > context)
        return attn_fail(err, ATTN_ERR_INVALID_ARG, "max_len %d outside [0, context %d]", max_len,
                         context);
    void *buf;
    size_t size;
    attn_status s = attn_file_read_all(path, 0, &buf, &size, err);
    if (s) return s;
    encoded e = {0};
    s = read_rows(path, buf, size, tok, &e, err);
    if (!s) s = pad_rows(&e, max_len, context, d, err);
    encoded_free(&e);
    free(buf);
    if (s) attn_class_data_free(d);
    return s;
}

void attn_class_data_free(attn_class_data *d) {
    free(d->ids);
    free(d->labels);
    memset(d, 0, sizeof *d);
}
