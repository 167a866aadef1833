/* safetensors reader and writer (see attn/safetensors.h). */
#include "attn/safetensors.h"

#include <cjson/cJSON.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "attn/fileio.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "attn's safetensors I/O assumes a little-endian host"
#endif

/* JSON numbers are doubles: integers above 2^53 cannot be trusted. */
#define MAX_JSON_INT ((double)(1ULL << 53))

static const struct {
    const char *name;
    size_t size;
} DTYPES[] = {{"F64", 8},     {"I64", 8},     {"U64", 8},  {"F32", 4}, {"I32", 4},
              {"U32", 4},     {"F16", 2},     {"BF16", 2}, {"I16", 2}, {"U16", 2},
              {"F8_E5M2", 1}, {"F8_E4M3", 1}, {"I8", 1},   {"U8", 1},  {"BOOL", 1}};

size_t attn_st_dtype_size(const char *dtype) {
    if (!dtype) return 0;
    for (size_t i = 0; i < sizeof DTYPES / sizeof DTYPES[0]; i++)
        if (strcmp(dtype, DTYPES[i].name) == 0) return DTYPES[i].size;
    return 0;
}

/* Bounded string builder for messages that list names; marks truncation. */
typedef struct {
    char buf[ATTN_ERROR_MSG_MAX];
    size_t used;
    int full;
} sbuf;

#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
static void
sb_add(sbuf *b, const char *fmt, ...) {
    if (b->full) return;
    va_list ap;
    va_start(ap, fmt);
    int w = vsnprintf(b->buf + b->used, sizeof b->buf - b->used, fmt, ap);
    va_end(ap);
    if (w < 0 || (size_t)w >= sizeof b->buf - b->used - 4) {
        b->full = 1;
        b->used = sizeof b->buf - 4 < b->used ? b->used : sizeof b->buf - 4;
        memcpy(b->buf + b->used, "...", 4);
        return;
    }
    b->used += (size_t)w;
}

static void shape_str(sbuf *b, int ndim, const int64_t *shape) {
    sb_add(b, "[");
    for (int i = 0; i < ndim; i++)
        sb_add(b, "%s%lld", i ? ", " : "", (long long)shape[i]);
    sb_add(b, "]");
}

/* ---- reading ----------------------------------------------------------- */

void attn_safetensors_free(attn_safetensors *st) {
    if (!st) return;
    for (int i = 0; i < st->count; i++)
        free(st->tensors[i].name);
    free(st->tensors);
    for (int i = 0; i < st->meta_count; i++) {
        free(st->meta_keys[i]);
        free(st->meta_values[i]);
    }
    free(st->meta_keys);
    free(st->meta_values);
    free(st->buf_);
    memset(st, 0, sizeof *st);
}

static char *dupstr(const char *s) {
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

/* Integer-valued JSON number in [0, 2^53]. */
static int json_size(const cJSON *v, uint64_t *out) {
    if (!cJSON_IsNumber(v)) return 0;
    double d = v->valuedouble;
    if (!(d >= 0) || d > MAX_JSON_INT || d != (double)(uint64_t)d) return 0;
    *out = (uint64_t)d;
    return 1;
}

static int cmp_begin(const void *a, const void *b) {
    const attn_st_tensor *x = *(const attn_st_tensor *const *)a;
    const attn_st_tensor *y = *(const attn_st_tensor *const *)b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    return x->end < y->end ? -1 : x->end > y->end;
}

static int cmp_name(const void *a, const void *b) {
    return strcmp((*(const attn_st_tensor *const *)a)->name,
                  (*(const attn_st_tensor *const *)b)->name);
}

/* A tensor's entry is an object of exactly dtype, shape and data_offsets
 * (f[0..2]). */
static attn_status entry_fields(const cJSON *item, const cJSON **f, const char *name,
                                attn_error *err) {
    const char *tn = item->string;
    if (!cJSON_IsObject(item))
        return attn_fail(err, ATTN_ERR_FORMAT, "%s: tensor '%s' is not a JSON object", name, tn);
    static const char *const keys[3] = {"dtype", "shape", "data_offsets"};
    const cJSON *x;
    f[0] = f[1] = f[2] = NULL;
    cJSON_ArrayForEach(x, item) {
        int k = 0;
        while (k < 3 && strcmp(x->string, keys[k]) != 0)
            k++;
        if (k == 3)
            return attn_fail(err, ATTN_ERR_FORMAT, "%s: tensor '%s' has unknown field '%s'", name,
                             tn, x->string);
        if (f[k])
            return attn_fail(err, ATTN_ERR_FORMAT, "%s: tensor '%s' repeats field '%s'", name, tn,
                             x->string);
        f[k] = x;
    }
    for (int k = 0; k < 3; k++)
        if (!f[k])
            return attn_fail(err, ATTN_ERR_FORMAT, "%s: tensor '%s' lacks field '%s'", name, tn,
                             keys[k]);
    return ATTN_OK;
}

/* The shape: at most ATTN_ST_MAX_DIMS sizes whose product (*numel) a JSON
 * number holds. */
static attn_status entry_shape(const cJSON *shape, attn_st_tensor *t, const char *tn,
                               uint64_t *numel, const char *name, attn_error *err) {
    if (!cJSON_IsArray(shape))
        return attn_fail(err, ATTN_ERR_FORMAT, "%s: tensor '%s': shape is not an array", name, tn);
    int nd = cJSON_GetArraySize(shape);
    if (nd > ATTN_ST_MAX_DIMS)
        return attn_fail(err, ATTN_ERR_FORMAT, "%s: tensor '%s' has %d dims (at most %d)", name, tn,
                         nd, ATTN_ST_MAX_DIMS);
    t->ndim = 0;
    *numel = 1;
    const cJSON *d;
    cJSON_ArrayForEach(d, shape) {
        uint64_t v;
        if (!json_size(d, &v))
            return attn_fail(err, ATTN_ERR_FORMAT,
                             "%s: tensor '%s': shape holds something other than sizes", name, tn);
        if (v && *numel > (uint64_t)(MAX_JSON_INT / (double)v))
            return attn_fail(err, ATTN_ERR_FORMAT, "%s: tensor '%s': shape is too large", name, tn);
        *numel *= v;
        t->shape[t->ndim++] = (int64_t)v;
    }
    return ATTN_OK;
}

static attn_status parse_entry(const cJSON *item, attn_st_tensor *t, const char *name,
                               attn_error *err) {
    const char *tn = item->string;
    const cJSON *f[3];
    attn_status s = entry_fields(item, f, name, err);
    if (s) return s;
    const cJSON *dtype = f[0], *offs = f[2];
    if (!cJSON_IsString(dtype) || !(t->elem_size = attn_st_dtype_size(dtype->valuestring)))
        return attn_fail(err, ATTN_ERR_FORMAT, "%s: tensor '%s' has unknown dtype %s%s%s", name, tn,
                         cJSON_IsString(dtype) ? "'" : "(not a string)",
                         cJSON_IsString(dtype) ? dtype->valuestring : "",
                         cJSON_IsString(dtype) ? "'" : "");
    snprintf(t->dtype, sizeof t->dtype, "%s", dtype->valuestring);
    uint64_t numel = 0;
    if ((s = entry_shape(f[1], t, tn, &numel, name, err))) return s;
    uint64_t b, e;
    if (!cJSON_IsArray(offs) || cJSON_GetArraySize(offs) != 2 ||
        !json_size(cJSON_GetArrayItem(offs, 0), &b) || !json_size(cJSON_GetArrayItem(offs, 1), &e))
        return attn_fail(err, ATTN_ERR_FORMAT,
                         "%s: tensor '%s': data_offsets is not [begin, end] byte offsets", name,
                         tn);
    if (e < b)
        return attn_fail(err, ATTN_ERR_FORMAT,
                         "%s: tensor '%s': data_offsets [%llu, %llu] end before they begin", name,
                         tn, (unsigned long long)b, (unsigned long long)e);
    if (numel > UINT64_MAX / t->elem_size || e - b != numel * t->elem_size)
        return attn_fail(err, ATTN_ERR_FORMAT,
                         "%s: tensor '%s': data_offsets [%llu, %llu] span %llu bytes but %s "
                         "shape needs %llu",
                         name, tn, (unsigned long long)b, (unsigned long long)e,
                         (unsigned long long)(e - b), t->dtype,
                         (unsigned long long)(numel * t->elem_size));
    t->numel = (size_t)numel;
    t->begin = (size_t)b;
    t->end = (size_t)e;
    return ATTN_OK;
}

static attn_status parse_meta(const cJSON *m, attn_safetensors *st, const char *name,
                              attn_error *err) {
    if (!cJSON_IsObject(m))
        return attn_fail(err, ATTN_ERR_FORMAT, "%s: __metadata__ is not a JSON object", name);
    int n = cJSON_GetArraySize(m);
    st->meta_keys = calloc((size_t)n + 1, sizeof *st->meta_keys);
    st->meta_values = calloc((size_t)n + 1, sizeof *st->meta_values);
    if (!st->meta_keys || !st->meta_values)
        return attn_fail(err, ATTN_ERR_NOMEM, "%s: out of memory", name);
    const cJSON *kv;
    cJSON_ArrayForEach(kv, m) {
        if (!cJSON_IsString(kv))
            return attn_fail(err, ATTN_ERR_FORMAT, "%s: metadata value of '%s' is not a string",
                             name, kv->string);
        for (int i = 0; i < st->meta_count; i++)
            if (strcmp(st->meta_keys[i], kv->string) == 0)
                return attn_fail(err, ATTN_ERR_FORMAT, "%s: metadata key '%s' appears twice", name,
                                 kv->string);
        char *k = dupstr(kv->string), *v = dupstr(kv->valuestring);
        if (!k || !v) {
            free(k);
            free(v);
            return attn_fail(err, ATTN_ERR_NOMEM, "%s: out of memory", name);
        }
        st->meta_keys[st->meta_count] = k;
        st->meta_values[st->meta_count] = v;
        st->meta_count++;
    }
    return ATTN_OK;
}

/* The header of the image b (len bytes) as JSON: *n its length. */
static attn_status parse_header(const unsigned char *b, size_t len, const char *name, uint64_t *n,
                                cJSON **root, attn_error *err) {
    /* A safetensors file starts with a u64 header length and '{'. */
    *n = 0;
    for (int i = 7; len >= 8 && i >= 0; i--)
        *n = *n << 8 | b[i];
    if (len < 9 || *n < 2 || *n > ATTN_ST_MAX_HEADER || b[8] != '{')
        return attn_fail(err, ATTN_ERR_FORMAT,
                         "%s: not a safetensors file (it does not start with a header length "
                         "and '{')",
                         name);
    if (*n > len - 8)
        return attn_fail(err, ATTN_ERR_FORMAT,
                         "%s: truncated safetensors file (header needs %llu bytes, file has %zu "
                         "after the length)",
                         name, (unsigned long long)*n, len - 8);
    char *text = malloc((size_t)*n + 1);
    if (!text) return attn_fail(err, ATTN_ERR_NOMEM, "%s: out of memory", name);
    memcpy(text, b + 8, (size_t)*n);
    text[*n] = '\0';
    if (strlen(text) != (size_t)*n) {
        free(text);
        return attn_fail(err, ATTN_ERR_FORMAT, "%s: safetensors header contains a NUL byte", name);
    }
    const char *end = NULL;
    *root = cJSON_ParseWithOpts(text, &end, 1);
    const size_t at = end ? (size_t)(end - text) : 0;
    free(text);
    if (!*root)
        return attn_fail(err, ATTN_ERR_FORMAT,
                         "%s: invalid JSON in safetensors header (at byte %zu)", name, at);
    if (!cJSON_IsObject(*root))
        return attn_fail(err, ATTN_ERR_FORMAT, "%s: safetensors header is not a JSON object", name);
    return ATTN_OK;
}

/* The header's entries: the metadata and the tensors (their offsets). */
static attn_status parse_items(const cJSON *root, attn_safetensors *st, const char *name,
                               attn_error *err) {
    st->tensors = calloc((size_t)cJSON_GetArraySize(root) + 1, sizeof *st->tensors);
    if (!st->tensors) return attn_fail(err, ATTN_ERR_NOMEM, "%s: out of memory", name);
    int have_meta = 0;
    const cJSON *item;
    cJSON_ArrayForEach(item, root) {
        attn_status s;
        if (strcmp(item->string, "__metadata__") == 0) {
            if (have_meta++)
                return attn_fail(err, ATTN_ERR_FORMAT, "%s: __metadata__ appears twice", name);
            if ((s = parse_meta(item, st, name, err))) return s;
            continue;
        }
        attn_st_tensor *t = &st->tensors[st->count];
        if (!(t->name = dupstr(item->string)))
            return attn_fail(err, ATTN_ERR_NOMEM, "%s: out of memory", name);
        st->count++;
        if (!*t->name)
            return attn_fail(err, ATTN_ERR_FORMAT, "%s: a tensor has an empty name", name);
        if ((s = parse_entry(item, t, name, err))) return s;
    }
    return ATTN_OK;
}

/* The tensors (order: st->count pointers) have distinct names and cover the
 * bufsize data bytes exactly: no holes, no overlaps, nothing past the end,
 * nothing after the last tensor. Sorts order. */
static attn_status check_layout(const attn_st_tensor **order, int count, size_t bufsize,
                                const char *name, attn_error *err) {
    qsort(order, (size_t)count, sizeof *order, cmp_name);
    for (int i = 1; i < count; i++)
        if (strcmp(order[i - 1]->name, order[i]->name) == 0)
            return attn_fail(err, ATTN_ERR_FORMAT, "%s: tensor '%s' appears twice", name,
                             order[i]->name);
    qsort(order, (size_t)count, sizeof *order, cmp_begin);
    size_t need = 0;
    const attn_st_tensor *last = NULL;
    for (int i = 0; i < count; i++)
        if (order[i]->end > need) {
            need = order[i]->end;
            last = order[i];
        }
    if (need > bufsize)
        return attn_fail(err, ATTN_ERR_FORMAT,
                         "%s: truncated safetensors file: tensor '%s' ends at data byte %zu but "
                         "the file holds %zu data bytes",
                         name, last->name, need, bufsize);
    size_t pos = 0;
    for (int i = 0; i < count; i++) {
        const attn_st_tensor *t = order[i], *prev = i ? order[i - 1] : NULL;
        if (t->begin < pos)
            return attn_fail(
                err, ATTN_ERR_FORMAT,
                "%s: tensor '%s' (bytes %zu..%zu) overlaps tensor '%s' (bytes %zu..%zu)", name,
                t->name, t->begin, t->end, prev->name, prev->begin, prev->end);
        if (t->begin > pos)
            return attn_fail(err, ATTN_ERR_FORMAT,
                             "%s: unused gap in the data buffer before tensor '%s' (bytes "
                             "%zu..%zu)",
                             name, t->name, pos, t->begin);
        pos = t->end;
    }
    if (pos != bufsize)
        return attn_fail(err, ATTN_ERR_FORMAT,
                         "%s: %zu unexpected bytes after the last tensor (data is %zu bytes)", name,
                         bufsize - pos, pos);
    return ATTN_OK;
}

/* Point the tensors at their data, which starts at byte base of st->buf_,
 * first moved to 8-byte alignment if the writer did not align it. */
static attn_status place_data(attn_safetensors *st, size_t base, const char *name,
                              attn_error *err) {
    size_t pad = (8 - base % 8) % 8;
    if (pad) {
        unsigned char *nb = realloc(st->buf_, st->size_ + pad);
        if (!nb) return attn_fail(err, ATTN_ERR_NOMEM, "%s: out of memory", name);
        memmove(nb + pad, nb, st->size_);
        st->buf_ = nb;
    }
    unsigned char *data = (unsigned char *)st->buf_ + pad + base;
    for (int i = 0; i < st->count; i++)
        st->tensors[i].data = data + st->tensors[i].begin;
    return ATTN_OK;
}

/* Parse the header in st->buf_ (st->size_ bytes, owned by st) and check
 * the tensors against a data buffer of data_bytes; *n gets the header's length. */
static attn_status parse_layout(attn_safetensors *st, const char *name, uint64_t *n,
                                uint64_t data_bytes, int header_only, attn_error *err) {
    cJSON *root = NULL;
    attn_status s = parse_header(st->buf_, st->size_, name, n, &root, err);
    if (!s) s = parse_items(root, st, name, err);
    cJSON_Delete(root);
    if (s) return s;
    if (!header_only) data_bytes = st->size_ - 8 - (size_t)*n;
    const attn_st_tensor **order = malloc(((size_t)st->count + 1) * sizeof *order);
    if (!order) return attn_fail(err, ATTN_ERR_NOMEM, "%s: out of memory", name);
    for (int i = 0; i < st->count; i++)
        order[i] = &st->tensors[i];
    s = check_layout(order, st->count, (size_t)data_bytes, name, err);
    free(order);
    return s;
}

/* Parse the image in st->buf_ (st->size_ bytes, owned by st). */
static attn_status parse_owned(attn_safetensors *st, const char *name, attn_error *err) {
    uint64_t n;
    attn_status s = parse_layout(st, name, &n, 0, 0, err);
    return s ? s : place_data(st, 8 + (size_t)n, name, err);
}

attn_status attn_safetensors_parse(const void *buf, size_t len, const char *name,
                                   attn_safetensors *st, attn_error *err) {
    memset(st, 0, sizeof *st);
    st->buf_ = malloc(len ? len : 1);
    if (!st->buf_) return attn_fail(err, ATTN_ERR_NOMEM, "%s: out of memory", name);
    memcpy(st->buf_, buf, len);
    st->size_ = len;
    attn_status s = parse_owned(st, name, err);
    if (s) attn_safetensors_free(st);
    return s;
}

/* Bytes of tensor data a header promises: the largest data_offsets end
 * (parse_owned checks the rest once the data is there). */
static attn_status data_size(const unsigned char *hdr, size_t n, const char *name, uint64_t *out,
                             attn_error *err) {
    cJSON *root = cJSON_ParseWithLength((const char *)hdr, n);
    if (!root || !cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return attn_fail(err, ATTN_ERR_FORMAT, "%s: invalid JSON in safetensors header", name);
    }
    uint64_t end = 0;
    const cJSON *item;
    cJSON_ArrayForEach(item, root) {
        const cJSON *off = cJSON_GetObjectItemCaseSensitive(item, "data_offsets");
        uint64_t e;
        if (cJSON_GetArraySize(off) == 2 && json_size(cJSON_GetArrayItem(off, 1), &e) && e > end)
            end = e;
    }
    cJSON_Delete(root);
    *out = end;
    return ATTN_OK;
}

/* Header first: a file that is not safetensors (or a stream of zeros) is
 * refused after its first bytes, not after reading it all. */
attn_status attn_safetensors_read(const char *path, attn_safetensors *st, attn_error *err) {
    memset(st, 0, sizeof *st);
    attn_file_in in;
    attn_status s = attn_file_in_open(&in, path, err);
    if (s) return s;
    unsigned char *buf = malloc(8);
    size_t len = 0, got = 0;
    if (!buf) {
        s = attn_fail(err, ATTN_ERR_NOMEM, "%s: out of memory", path);
        goto out;
    }
    if ((s = attn_file_in_read(&in, path, buf, 8, &len, err))) goto out;
    if (len == 8) {
        uint64_t n = 0, body = 0;
        for (int i = 7; i >= 0; i--)
            n = n << 8 | buf[i];
        size_t want = 8;
        if (n <= ATTN_ST_MAX_HEADER && (!in.regular || n <= in.size - 8)) {
            unsigned char *nb = realloc(buf, 8 + (size_t)n);
            if (!nb) {
                s = attn_fail(err, ATTN_ERR_NOMEM, "%s: out of memory", path);
                goto out;
            }
            buf = nb;
            if ((s = attn_file_in_read(&in, path, buf + 8, (size_t)n, &got, err))) goto out;
            len += got;
            /* A bad header: parse_owned names the fault without the body. */
            int header_ok = got == n && n >= 2 && buf[8] == '{' &&
                            data_size(buf + 8, (size_t)n, path, &body, NULL) == ATTN_OK;
            /* A regular file's rest (size known); a stream's promised bytes
             * plus one to notice trailing data. */
            uint64_t w = in.regular ? in.size : 8 + n + body + 1;
            if (w > ATTN_FILE_READ_DEFAULT_MAX) w = ATTN_FILE_READ_DEFAULT_MAX;
            want = header_ok ? (size_t)w : len;
        }
        if (want > len) {
            unsigned char *nb = realloc(buf, want);
            if (!nb) {
                s = attn_fail(err, ATTN_ERR_NOMEM, "%s: out of memory (%zu bytes)", path, want);
                goto out;
            }
            buf = nb;
            if ((s = attn_file_in_read(&in, path, buf + len, want - len, &got, err))) goto out;
            len += got;
        }
    }
    st->buf_ = buf;
    st->size_ = len;
    buf = NULL;
    s = parse_owned(st, path, err);
    if (s) attn_safetensors_free(st);
out:
    free(buf);
    attn_file_in_close(&in);
    return s;
}

attn_status attn_safetensors_read_header(const char *path, attn_safetensors *st, attn_error *err) {
    memset(st, 0, sizeof *st);
    attn_file_in in;
    attn_status s = attn_file_in_open(&in, path, err);
    if (s) return s;
    unsigned char len8[8];
    size_t got = 0;
    uint64_t n = 0;
    if (!in.regular)
        s = attn_fail(err, ATTN_ERR_IO, "%s: not a regular file", path);
    else if (!(s = attn_file_in_read(&in, path, len8, 8, &got, err)))
        for (int i = 7; i >= 0 && got == 8; i--)
            n = n << 8 | len8[i];
    /* The length is checked against the file before the header is read. */
    if (!s && (got < 8 || n < 2 || n > ATTN_ST_MAX_HEADER || n > in.size - 8))
        s = attn_fail(err, ATTN_ERR_FORMAT,
                      "%s: not a safetensors file (a header length of %llu bytes in a file of "
                      "%llu)",
                      path, (unsigned long long)n, (unsigned long long)in.size);
    if (!s && !(st->buf_ = malloc(8 + (size_t)n)))
        s = attn_fail(err, ATTN_ERR_NOMEM, "%s: out of memory", path);
    if (!s) {
        memcpy(st->buf_, len8, 8);
        st->size_ = 8;
        s = attn_file_in_read(&in, path, (unsigned char *)st->buf_ + 8, (size_t)n, &got, err);
        st->size_ += got;
    }
    if (!s) s = parse_layout(st, path, &n, in.size - 8 - n, 1, err);
    attn_file_in_close(&in);
    if (s) attn_safetensors_free(st);
    return s;
}

const attn_st_tensor *attn_safetensors_find(const attn_safetensors *st, const char *name) {
    for (int i = 0; i < st->count; i++)
        if (strcmp(st->tensors[i].name, name) == 0) return &st->tensors[i];
    return NULL;
}

const char *attn_safetensors_meta(const attn_safetensors *st, const char *key) {
    for (int i = 0; i < st->meta_count; i++)
        if (strcmp(st->meta_keys[i], key) == 0) return st->meta_values[i];
    return NULL;
}

attn_status attn_safetensors_meta_u64(const attn_safetensors *st, const char *name, const char *key,
                                      uint64_t max, uint64_t *out, attn_error *err) {
    if (!name) name = "safetensors";
    const char *v = attn_safetensors_meta(st, key);
    if (!v) return attn_fail(err, ATTN_ERR_NOT_FOUND, "%s: metadata '%s' is missing", name, key);
    /* Digits only: strtoull would take a sign ("-5" wraps), spaces and "0x". */
    uint64_t x = 0;
    const char *p = v;
    for (; *p >= '0' && *p <= '9'; p++) {
        const uint64_t d = (uint64_t)(*p - '0');
        if (x > (max - d) / 10) break; /* x * 10 + d > max */
        x = x * 10 + d;
    }
    if (p == v || *p)
        return attn_fail(err, ATTN_ERR_FORMAT,
                         "%s: metadata '%s' is '%.40s', not an integer in [0, %llu]", name, key, v,
                         (unsigned long long)max);
    *out = x;
    return ATTN_OK;
}

/* attn_safetensors_to_params's checks: names, dtypes and shapes. */
static attn_status check_params(const attn_safetensors *st, const char *name,
                                const attn_param_list *list, attn_error *err) {
    int nmissing = 0, nextra = 0;
    for (int i = 0; i < list->count; i++)
        nmissing += !attn_safetensors_find(st, list->items[i].name);
    for (int i = 0; i < st->count; i++)
        nextra += !attn_param_list_find(list, st->tensors[i].name);
    if (nmissing || nextra) {
        sbuf m = {.used = 0};
        sb_add(&m, "%s: ", name);
        if (nmissing) {
            sb_add(&m, "missing tensor%s ", nmissing > 1 ? "s" : "");
            for (int i = 0, k = 0; i < list->count; i++)
                if (!attn_safetensors_find(st, list->items[i].name))
                    sb_add(&m, "%s'%s'", k++ ? ", " : "", list->items[i].name);
        }
        if (nextra) {
            sb_add(&m, "%sunexpected tensor%s ", nmissing ? "; " : "", nextra > 1 ? "s" : "");
            for (int i = 0, k = 0; i < st->count; i++)
                if (!attn_param_list_find(list, st->tensors[i].name))
                    sb_add(&m, "%s'%s'", k++ ? ", " : "", st->tensors[i].name);
        }
        sb_add(&m, " (file has %d tensors, expected %d)", st->count, list->count);
        return attn_fail(err, nmissing ? ATTN_ERR_NOT_FOUND : ATTN_ERR_FORMAT, "%s", m.buf);
    }
    for (int i = 0; i < list->count; i++) {
        const attn_param *p = &list->items[i];
        const attn_st_tensor *t = attn_safetensors_find(st, p->name);
        if (strcmp(t->dtype, "F32") != 0)
            return attn_fail(err, ATTN_ERR_FORMAT, "%s: tensor '%s' has dtype %s, expected F32",
                             name, p->name, t->dtype);
        int same = t->ndim == p->ndim;
        for (int d = 0; same && d < p->ndim; d++)
            same = t->shape[d] == p->shape[d];
        if (!same) {
            sbuf m = {.used = 0};
            sb_add(&m, "%s: tensor '%s' has shape ", name, p->name);
            shape_str(&m, t->ndim, t->shape);
            sb_add(&m, ", expected ");
            shape_str(&m, p->ndim, p->shape);
            return attn_fail(err, ATTN_ERR_SHAPE, "%s", m.buf);
        }
        if (t->numel != p->numel)
            return attn_fail(err, ATTN_ERR_SHAPE, "%s: tensor '%s' has %zu elements, expected %zu",
                             name, p->name, t->numel, p->numel);
    }
    return ATTN_OK;
}

attn_status attn_safetensors_to_params(const attn_safetensors *st, const char *name,
                                       const attn_param_list *list, attn_error *err) {
    if (!name) name = "safetensors";
    attn_status s = check_params(st, name, list, err);
    if (s) return s;
    for (int i = 0; i < list->count; i++) {
        const attn_param *p = &list->items[i];
        const attn_st_tensor *t = attn_safetensors_find(st, p->name);
        if (p->numel) memcpy(p->data, t->data, p->numel * sizeof(float));
    }
    return ATTN_OK;
}

/* Each tensor read from the file straight into its parameter (pread: the
 * header's offsets), no image of the file in between. */
attn_status attn_safetensors_read_params(const char *path, const attn_safetensors *hdr,
                                         const attn_param_list *list, attn_error *err) {
    attn_status s = check_params(hdr, path, list, err);
    attn_file_in in;
    if (s || (s = attn_file_in_open(&in, path, err))) return s;
    for (int i = 0; !s && i < list->count; i++) {
        const attn_param *p = &list->items[i];
        const attn_st_tensor *t = attn_safetensors_find(hdr, p->name);
        const size_t n = p->numel * sizeof(float);
        size_t got = 0;
        if (n) s = attn_file_pread(in.fd, path, p->data, n, hdr->size_ + t->begin, &got, err);
        if (!s && got != n) /* the file shrank since its header was read */
            s = attn_fail(err, ATTN_ERR_FORMAT, "%s: truncated safetensors file (tensor '%s')",
                          path, p->name);
    }
    attn_file_in_close(&in);
    return s;
}

attn_status attn_safetensors_load_params(const char *path, const attn_param_list *list,
                                         attn_error *err) {
    attn_safetensors st;
    struct stat sb; /* a regular file: its tensors read in place; a stream: whole */
    const int regular = stat(path, &sb) == 0 && S_ISREG(sb.st_mode);
    attn_status s = regular ? attn_safetensors_read_header(path, &st, err)
                            : attn_safetensors_read(path, &st, err);
    if (s) return s;
    s = regular ? attn_safetensors_read_params(path, &st, list, err)
                : attn_safetensors_to_params(&st, path, list, err);
    attn_safetensors_free(&st);
    return s;
}

/* ---- writing ----------------------------------------------------------- */

typedef struct {
    const attn_st_entry *e;
    size_t esz;
} wentry;

/* Largest elements first keeps every tensor aligned; then by name. */
static int cmp_write(const void *a, const void *b) {
    const wentry *x = a, *y = b;
    if (x->esz != y->esz) return x->esz > y->esz ? -1 : 1;
    return strcmp(x->e->name, y->e->name);
}

static int cmp_wname(const void *a, const void *b) {
    return strcmp(((const wentry *)a)->e->name, ((const wentry *)b)->e->name);
}

static cJSON *raw_u64(uint64_t v) {
    char num[32];
    snprintf(num, sizeof num, "%llu", (unsigned long long)v);
    return cJSON_CreateRaw(num);
}

/* entries[i] has a name, a known dtype (w->esz its size) and nbytes for
 * its shape. */
static attn_status check_entry(const char *path, const attn_st_entry *e, int i, wentry *w,
                               attn_error *err) {
    w->e = e;
    if (!e->name || !*e->name || strcmp(e->name, "__metadata__") == 0)
        return attn_fail(err, ATTN_ERR_INVALID_ARG, "%s: tensor %d has an invalid name '%s'", path,
                         i, e->name ? e->name : "(null)");
    if (!(w->esz = attn_st_dtype_size(e->dtype)))
        return attn_fail(err, ATTN_ERR_INVALID_ARG, "%s: tensor '%s' has unknown dtype '%s'", path,
                         e->name, e->dtype ? e->dtype : "(null)");
    if (e->ndim < 0 || e->ndim > ATTN_ST_MAX_DIMS)
        return attn_fail(err, ATTN_ERR_INVALID_ARG, "%s: tensor '%s' has %d dims (0..%d allowed)",
                         path, e->name, e->ndim, ATTN_ST_MAX_DIMS);
    uint64_t numel = 1;
    for (int d = 0; d < e->ndim; d++) {
        if (e->shape[d] < 0 || (double)e->shape[d] > MAX_JSON_INT ||
            (e->shape[d] && numel > (uint64_t)(MAX_JSON_INT / (double)e->shape[d])))
            return attn_fail(err, ATTN_ERR_INVALID_ARG, "%s: tensor '%s' has a bad shape", path,
                             e->name);
        numel *= (uint64_t)e->shape[d];
    }
    if (numel * w->esz != e->nbytes || (e->nbytes && !e->data))
        return attn_fail(err, ATTN_ERR_INVALID_ARG,
                         "%s: tensor '%s' has %zu bytes, its %s shape needs %llu", path, e->name,
                         e->nbytes, e->dtype, (unsigned long long)(numel * w->esz));
    return ATTN_OK;
}

/* Every entry valid, no name twice, no metadata key NULL or twice; w (one
 * per entry) sorted in the order written. */
static attn_status check_write(const char *path, const attn_st_entry *entries, int count,
                               const attn_st_kv *meta, int meta_count, wentry *w, attn_error *err) {
    for (int i = 0; i < count; i++) {
        attn_status s = check_entry(path, &entries[i], i, &w[i], err);
        if (s) return s;
    }
    qsort(w, (size_t)count, sizeof *w, cmp_wname);
    for (int i = 1; i < count; i++)
        if (strcmp(w[i - 1].e->name, w[i].e->name) == 0)
            return attn_fail(err, ATTN_ERR_INVALID_ARG, "%s: tensor '%s' given twice", path,
                             w[i].e->name);
    for (int i = 0; i < meta_count; i++) {
        if (!meta[i].key || !meta[i].value)
            return attn_fail(err, ATTN_ERR_INVALID_ARG, "%s: metadata entry %d is NULL", path, i);
        for (int j = 0; j < i; j++)
            if (strcmp(meta[i].key, meta[j].key) == 0)
                return attn_fail(err, ATTN_ERR_INVALID_ARG, "%s: metadata key '%s' given twice",
                                 path, meta[i].key);
    }
    qsort(w, (size_t)count, sizeof *w, cmp_write);
    return ATTN_OK;
}

/* One tensor's header entry: dtype, shape and data_offsets [off, off + nbytes]. */
static int add_tensor(cJSON *root, const attn_st_entry *e, uint64_t off) {
    cJSON *t = cJSON_AddObjectToObject(root, e->name);
    if (!t || !cJSON_AddStringToObject(t, "dtype", e->dtype)) return 0;
    cJSON *shape = cJSON_AddArrayToObject(t, "shape");
    if (!shape) return 0;
    for (int d = 0; d < e->ndim; d++) {
        cJSON *v = raw_u64((uint64_t)e->shape[d]);
        if (!v) return 0;
        cJSON_AddItemToArray(shape, v);
    }
    cJSON *offs = cJSON_AddArrayToObject(t, "data_offsets");
    cJSON *b = raw_u64(off), *en = raw_u64(off + e->nbytes);
    if (!offs || !b || !en) {
        cJSON_Delete(b);
        cJSON_Delete(en);
        return 0;
    }
    cJSON_AddItemToArray(offs, b);
    cJSON_AddItemToArray(offs, en);
    return 1;
}

/* The header's JSON text (cJSON_free it): the metadata in its order, then
 * the tensors in w's; NULL when out of memory. */
static char *header_json(const wentry *w, int count, const attn_st_kv *meta, int meta_count) {
    cJSON *root = cJSON_CreateObject();
    int ok = root != NULL;
    if (ok && meta_count) {
        cJSON *m = cJSON_AddObjectToObject(root, "__metadata__");
        ok = m != NULL;
        for (int i = 0; ok && i < meta_count; i++)
            ok = cJSON_AddStringToObject(m, meta[i].key, meta[i].value) != NULL;
    }
    uint64_t off = 0;
    for (int i = 0; ok && i < count; i++) {
        ok = add_tensor(root, w[i].e, off);
        off += w[i].e->nbytes;
    }
    char *json = ok ? cJSON_PrintUnformatted(root) : NULL;
    cJSON_Delete(root);
    return json;
}

/* The file: the header's length, the header padded with spaces so the data
 * starts 8-byte aligned, the data in w's order. */
static attn_status write_file(const char *path, const char *json, const wentry *w, int count,
                              attn_error *err) {
    size_t jl = strlen(json);
    size_t hl = (jl + 7) / 8 * 8;
    unsigned char lenbuf[8];
    for (int i = 0; i < 8; i++)
        lenbuf[i] = (unsigned char)((uint64_t)hl >> (8 * i) & 0xff);
    static const char spaces[8] = "        ";
    attn_atomic_file f;
    attn_status s = attn_atomic_open(&f, path, err);
    if (!s) s = attn_atomic_write(&f, lenbuf, 8, err);
    if (!s) s = attn_atomic_write(&f, json, jl, err);
    if (!s) s = attn_atomic_write(&f, spaces, hl - jl, err);
    for (int i = 0; i < count && !s; i++)
        if (w[i].e->nbytes) s = attn_atomic_write_sparse(&f, w[i].e->data, w[i].e->nbytes, err);
    return s ? s : attn_atomic_commit(&f, err);
}

attn_status attn_safetensors_write(const char *path, const attn_st_entry *entries, int count,
                                   const attn_st_kv *meta, int meta_count, attn_error *err) {
    if (count < 0 || meta_count < 0 || (count && !entries) || (meta_count && !meta))
        return attn_fail(err, ATTN_ERR_INVALID_ARG, "%s: bad tensor or metadata count", path);
    wentry *w = malloc(((size_t)count + 1) * sizeof *w);
    if (!w) return attn_fail(err, ATTN_ERR_NOMEM, "%s: out of memory", path);
    char *json = NULL;
    attn_status s = check_write(path, entries, count, meta, meta_count, w, err);
    if (!s && !(json = header_json(w, count, meta, meta_count)))
        s = attn_fail(err, ATTN_ERR_NOMEM, "%s: out of memory building the header", path);
    if (!s) s = write_file(path, json, w, count, err);
    cJSON_free(json);
    free(w);
    return s;
}

attn_status attn_safetensors_write_params(const char *path, const attn_param_list *list,
                                          const attn_st_kv *meta, int meta_count, attn_error *err) {
    attn_st_entry *e = malloc(((size_t)list->count + 1) * sizeof *e);
    if (!e) return attn_fail(err, ATTN_ERR_NOMEM, "%s: out of memory", path);
    for (int i = 0; i < list->count; i++) {
        const attn_param *p = &list->items[i];
        e[i] = (attn_st_entry){.name = p->name,
                               .dtype = "F32",
                               .ndim = p->ndim,
                               .shape = p->shape,
                               .data = p->data,
                               .nbytes = p->numel * sizeof(float)};
    }
    attn_status s = attn_safetensors_write(path, e, list->count, meta, meta_count, err);
    free(e);
    return s;
}
