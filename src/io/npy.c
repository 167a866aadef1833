/* NumPy .npy reader and writer (see attn/npy.h).
 *
 * Format (numpy.lib.format): "\x93NUMPY", major, minor, header length (u16 LE
 * for 1.0, u32 LE for 2.0/3.0), then a Python dict literal
 * {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), } padded with
 * spaces and a '\n', then the raw C-order data. */
#include "attn/npy.h"

#include <ctype.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn/fileio.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "attn's .npy and safetensors I/O assume a little-endian host"
#endif

static const unsigned char NPY_MAGIC[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};

size_t attn_npy_dtype_size(attn_npy_dtype t) {
    switch (t) {
    case ATTN_NPY_F32: return 4;
    case ATTN_NPY_I32: return 4;
    case ATTN_NPY_I64: return 8;
    case ATTN_NPY_F64: return 8;
    }
    return 0;
}

const char *attn_npy_dtype_descr(attn_npy_dtype t) {
    switch (t) {
    case ATTN_NPY_F32: return "<f4";
    case ATTN_NPY_I32: return "<i4";
    case ATTN_NPY_I64: return "<i8";
    case ATTN_NPY_F64: return "<f8";
    }
    return "?";
}

const char *attn_npy_dtype_name(attn_npy_dtype t) {
    switch (t) {
    case ATTN_NPY_F32: return "float32";
    case ATTN_NPY_I32: return "int32";
    case ATTN_NPY_I64: return "int64";
    case ATTN_NPY_F64: return "float64";
    }
    return "?";
}

/* A readable name for common descrs we do not support, for messages. */
static const char *descr_hint(const char *d) {
    static const struct {
        const char *descr, *name;
    } known[] = {{"<f2", "float16"},
                 {"<f4", "float32"},
                 {"<f8", "float64"},
                 {">f4", "big-endian float32"},
                 {">f8", "big-endian float64"},
                 {"<i2", "int16"},
                 {"<i4", "int32"},
                 {"<i8", "int64"},
                 {">i4", "big-endian int32"},
                 {">i8", "big-endian int64"},
                 {"<u4", "uint32"},
                 {"<u8", "uint64"},
                 {"|u1", "uint8"},
                 {"|i1", "int8"},
                 {"|b1", "bool"},
                 {"<c8", "complex64"},
                 {"<c16", "complex128"},
                 {"|O", "object"},
                 {"<U1", "unicode string"},
                 {"|S1", "byte string"}};
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        if (strcmp(d, known[i].descr) == 0) return known[i].name;
    return NULL;
}

/* "'<f4' (float32)" or "'<f4' (float32) or '<i4' (int32) ..." */
static void expected_list(unsigned accept, char *out, size_t cap) {
    out[0] = '\0';
    size_t used = 0;
    int first = 1;
    for (int t = ATTN_NPY_F32; t <= ATTN_NPY_F64; t++) {
        if (!(accept & (1u << t))) continue;
        int w = snprintf(out + used, cap - used, "%s'%s' (%s)", first ? "" : " or ",
                         attn_npy_dtype_descr((attn_npy_dtype)t),
                         attn_npy_dtype_name((attn_npy_dtype)t));
        if (w < 0 || (size_t)w >= cap - used) return;
        used += (size_t)w;
        first = 0;
    }
}

/* ---- header dict parser ------------------------------------------------ */

typedef struct {
    const char *p, *end;
} cursor;

static void skip_ws(cursor *c) {
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r'))
        c->p++;
}

static int eat(cursor *c, char ch) {
    skip_ws(c);
    if (c->p < c->end && *c->p == ch) {
        c->p++;
        return 1;
    }
    return 0;
}

/* Python string literal in single or double quotes, no escapes needed for
 * the keys and descrs numpy writes; copies at most cap-1 chars. */
static int parse_str(cursor *c, char *out, size_t cap) {
    skip_ws(c);
    if (c->p >= c->end || (*c->p != '\'' && *c->p != '"')) return 0;
    char q = *c->p++;
    size_t n = 0;
    while (c->p < c->end && *c->p != q) {
        if (*c->p == '\\') return 0;
        if (n + 1 >= cap) return 0;
        out[n++] = *c->p++;
    }
    if (c->p >= c->end) return 0;
    c->p++;
    out[n] = '\0';
    return 1;
}

static int parse_word(cursor *c, const char *w) {
    skip_ws(c);
    size_t n = strlen(w);
    if ((size_t)(c->end - c->p) < n || memcmp(c->p, w, n) != 0) return 0;
    if ((size_t)(c->end - c->p) > n && (isalnum((unsigned char)c->p[n]) || c->p[n] == '_'))
        return 0;
    c->p += n;
    return 1;
}

/* Non-negative integer, optionally with Python 2's 'L' suffix. */
static int parse_dim(cursor *c, int64_t *v) {
    skip_ws(c);
    if (c->p >= c->end || !isdigit((unsigned char)*c->p)) return 0;
    int64_t x = 0;
    while (c->p < c->end && isdigit((unsigned char)*c->p)) {
        int d = *c->p - '0';
        if (x > (INT64_MAX - d) / 10) return 0;
        x = x * 10 + d;
        c->p++;
    }
    if (c->p < c->end && (*c->p == 'L' || *c->p == 'l')) c->p++;
    *v = x;
    return 1;
}

static attn_status bad_header(attn_error *err, const char *name, const char *why) {
    return attn_fail(err, ATTN_ERR_FORMAT, "%s: malformed .npy header: %s", name, why);
}

/* The fixed start of a .npy file: magic, version, header length. *pre = its
 * size (10 for version 1.0, 12 for 2.0 and 3.0); *hlen = the header length
 * when len covers it (else 0). The magic and version are checked before the
 * length is read, so another file is "not a .npy file", not a header length. */
static attn_status npy_prefix(const unsigned char *b, size_t len, const char *name, size_t *pre,
                              size_t *hlen, attn_error *err) {
    if (len < 8 || memcmp(b, NPY_MAGIC, 6) != 0)
        return attn_fail(err, ATTN_ERR_FORMAT, "%s: not a .npy file (bad magic)", name);
    const int major = b[6], minor = b[7];
    if (minor != 0 || major < 1 || major > 3)
        return attn_fail(err, ATTN_ERR_FORMAT,
                         "%s: unsupported .npy version %d.%d (1.0, 2.0 and 3.0 are supported)",
                         name, major, minor);
    *pre = major == 1 ? 10 : 12;
    *hlen = 0;
    if (len < *pre) return ATTN_OK;
    *hlen = (size_t)b[8] | (size_t)b[9] << 8;
    if (major > 1) *hlen |= (size_t)b[10] << 16 | (size_t)b[11] << 24;
    return ATTN_OK;
}

/* The header dict's fields. */
typedef struct npy_header {
    char descr[32];
    int have_descr, have_fortran, have_shape, fortran;
    int ndim;
    int64_t shape[ATTN_NPY_MAX_DIMS];
} npy_header;

/* 'shape': a tuple of sizes, "(5)" being just 5 in Python (a 1-tuple needs
 * the comma). */
static attn_status parse_shape(cursor *c, npy_header *h, const char *name, attn_error *err) {
    if (!eat(c, '(')) return bad_header(err, name, "'shape' is not a tuple");
    int commas = 0;
    for (;;) {
        if (eat(c, ')')) break;
        int64_t d;
        if (!parse_dim(c, &d))
            return bad_header(err, name, "'shape' holds something other than sizes");
        if (h->ndim == ATTN_NPY_MAX_DIMS)
            return attn_fail(err, ATTN_ERR_FORMAT, "%s: more than %d dimensions", name,
                             ATTN_NPY_MAX_DIMS);
        h->shape[h->ndim++] = d;
        if (eat(c, ',')) {
            commas++;
            continue;
        }
        if (eat(c, ')')) break;
        return bad_header(err, name, "expected ',' or ')' in 'shape'");
    }
    if (h->ndim == 1 && commas == 0) return bad_header(err, name, "'shape' is not a tuple");
    return ATTN_OK;
}

/* One key of the dict and its value. */
static attn_status parse_field(cursor *c, npy_header *h, const char *name, attn_error *err) {
    char key[32];
    if (!parse_str(c, key, sizeof key)) return bad_header(err, name, "expected a quoted key");
    if (!eat(c, ':')) return bad_header(err, name, "expected ':' after a key");
    if (strcmp(key, "descr") == 0) {
        if (h->have_descr++) return bad_header(err, name, "duplicate key 'descr'");
        skip_ws(c);
        if (c->p < c->end && *c->p == '[')
            return attn_fail(err, ATTN_ERR_FORMAT,
                             "%s: unsupported dtype (structured record array)", name);
        if (!parse_str(c, h->descr, sizeof h->descr))
            return bad_header(err, name, "'descr' is not a dtype string");
    } else if (strcmp(key, "fortran_order") == 0) {
        if (h->have_fortran++) return bad_header(err, name, "duplicate key 'fortran_order'");
        if (parse_word(c, "True"))
            h->fortran = 1;
        else if (parse_word(c, "False"))
            h->fortran = 0;
        else
            return bad_header(err, name, "'fortran_order' is not True or False");
    } else if (strcmp(key, "shape") == 0) {
        if (h->have_shape++) return bad_header(err, name, "duplicate key 'shape'");
        return parse_shape(c, h, name, err);
    } else {
        return attn_fail(err, ATTN_ERR_FORMAT, "%s: malformed .npy header: unexpected key '%s'",
                         name, key);
    }
    return ATTN_OK;
}

/* The dict {'descr': ..., 'fortran_order': ..., 'shape': ...} into h,
 * each key once. */
static attn_status parse_dict(cursor *c, npy_header *h, const char *name, attn_error *err) {
    memset(h, 0, sizeof *h);
    if (!eat(c, '{')) return bad_header(err, name, "expected '{'");
    for (;;) {
        if (eat(c, '}')) break;
        attn_status s = parse_field(c, h, name, err);
        if (s) return s;
        if (eat(c, ',')) continue;
        if (eat(c, '}')) break;
        return bad_header(err, name, "expected ',' or '}'");
    }
    skip_ws(c);
    if (c->p != c->end) return bad_header(err, name, "text after the closing '}'");
    if (!h->have_descr || !h->have_fortran || !h->have_shape)
        return bad_header(err, name,
                          !h->have_descr     ? "missing key 'descr'"
                          : !h->have_fortran ? "missing key 'fortran_order'"
                                             : "missing key 'shape'");
    return ATTN_OK;
}

/* The header's dtype, when accept has it, and C order; *numel its values. */
static attn_status check_array(const npy_header *h, unsigned accept, const char *name,
                               attn_npy_dtype *dtype, size_t *numel, attn_error *err) {
    attn_npy_dtype dt = 0;
    for (int t = ATTN_NPY_F32; t <= ATTN_NPY_F64; t++)
        if (strcmp(h->descr, attn_npy_dtype_descr((attn_npy_dtype)t)) == 0) dt = (attn_npy_dtype)t;
    if (!dt || !(accept & (1u << dt))) {
        char exp[160];
        expected_list(accept, exp, sizeof exp);
        const char *hint = descr_hint(h->descr);
        return attn_fail(err, ATTN_ERR_FORMAT, "%s: unsupported dtype '%s'%s%s%s; expected %s",
                         name, h->descr, hint ? " (" : "", hint ? hint : "", hint ? ")" : "", exp);
    }
    if (h->fortran)
        return attn_fail(err, ATTN_ERR_FORMAT,
                         "%s: Fortran-order (column-major) arrays are not supported; save a "
                         "C-order array (numpy.ascontiguousarray)",
                         name);
    const size_t esz = attn_npy_dtype_size(dt);
    *numel = 1;
    for (int i = 0; i < h->ndim; i++) {
        if (h->shape[i] != 0 && *numel > SIZE_MAX / esz / (size_t)h->shape[i])
            return attn_fail(err, ATTN_ERR_FORMAT, "%s: shape is too large", name);
        *numel *= (size_t)h->shape[i];
    }
    *dtype = dt;
    return ATTN_OK;
}

/* out gets a copy of the have data bytes at data, which must be nbytes. */
static attn_status take_data(const unsigned char *data, size_t have, size_t nbytes,
                             const char *name, attn_npy *out, attn_error *err) {
    if (have < nbytes)
        return attn_fail(err, ATTN_ERR_FORMAT,
                         "%s: truncated .npy data (expected %zu bytes for the shape, found %zu)",
                         name, nbytes, have);
    if (have > nbytes)
        return attn_fail(err, ATTN_ERR_FORMAT,
                         "%s: %zu unexpected bytes after the .npy data (expected %zu bytes)", name,
                         have - nbytes, nbytes);
    out->data = malloc(nbytes ? nbytes : 1);
    if (!out->data)
        return attn_fail(err, ATTN_ERR_NOMEM, "%s: out of memory (%zu bytes)", name, nbytes);
    memcpy(out->data, data, nbytes);
    return ATTN_OK;
}

/* need == NULL: parse the whole file image. Else buf holds at least the
 * header: check it and set *need to the file's full size. */
static attn_status parse_impl(const void *buf, size_t len, const char *name, unsigned accept,
                              attn_npy *out, size_t *need, attn_error *err) {
    memset(out, 0, sizeof *out);
    const unsigned char *b = buf;
    size_t pre, hlen, numel = 0;
    attn_status s = npy_prefix(b, len, name, &pre, &hlen, err);
    if (s) return s;
    if (len < pre) return attn_fail(err, ATTN_ERR_FORMAT, "%s: truncated .npy header", name);
    if (hlen > len - pre)
        return attn_fail(err, ATTN_ERR_FORMAT,
                         "%s: truncated .npy header (header says %zu bytes, file has %zu)", name,
                         hlen, len - pre);
    cursor c = {(const char *)b + pre, (const char *)b + pre + hlen};
    npy_header h;
    attn_npy_dtype dt = 0;
    if ((s = parse_dict(&c, &h, name, err)) ||
        (s = check_array(&h, accept, name, &dt, &numel, err)))
        return s;
    const size_t nbytes = numel * attn_npy_dtype_size(dt);
    if (need) {
        if (nbytes > SIZE_MAX - pre - hlen - 1)
            return attn_fail(err, ATTN_ERR_FORMAT, "%s: shape is too large", name);
        *need = pre + hlen + nbytes;
        return ATTN_OK;
    }
    if ((s = take_data(b + pre + hlen, len - pre - hlen, nbytes, name, out, err))) return s;
    out->dtype = dt;
    out->ndim = h.ndim;
    for (int i = 0; i < h.ndim; i++)
        out->shape[i] = h.shape[i];
    out->numel = numel;
    return ATTN_OK;
}

attn_status attn_npy_parse(const void *buf, size_t len, const char *name, unsigned accept,
                           attn_npy *out, attn_error *err) {
    return parse_impl(buf, len, name, accept, out, NULL, err);
}

/* *buf (*cap bytes) holds at least want bytes (say_size: the message
 * names them). */
static attn_status reserve(unsigned char **buf, size_t *cap, size_t want, int say_size,
                           const char *path, attn_error *err) {
    if (want <= *cap) return ATTN_OK;
    unsigned char *nb = realloc(*buf, want);
    if (!nb)
        return say_size
                   ? attn_fail(err, ATTN_ERR_NOMEM, "%s: out of memory (%zu bytes)", path, want)
                   : attn_fail(err, ATTN_ERR_NOMEM, "%s: out of memory", path);
    *buf = nb;
    *cap = want;
    return ATTN_OK;
}

/* Header first: a wrong file (or a stream of zeros) is refused after a few
 * bytes, not after reading gigabytes. */
attn_status attn_npy_load(const char *path, unsigned accept, attn_npy *out, attn_error *err) {
    memset(out, 0, sizeof *out);
    attn_file_in in;
    attn_status s = attn_file_in_open(&in, path, err);
    if (s) return s;
    size_t cap = 4096, len = 0, got = 0, need = 0;
    unsigned char *buf = malloc(cap);
    if (!buf) {
        s = attn_fail(err, ATTN_ERR_NOMEM, "%s: out of memory", path);
        goto out;
    }
    if ((s = attn_file_in_read(&in, path, buf, 12, &len, err))) goto out;
    size_t pre, hlen;
    if ((s = npy_prefix(buf, len, path, &pre, &hlen, err))) goto out;
    if (len >= pre) {
        if (hlen > ((size_t)1 << 24)) { /* numpy writes a few hundred bytes */
            s = attn_fail(err, ATTN_ERR_FORMAT, "%s: .npy header length %zu is implausible", path,
                          hlen);
            goto out;
        }
        if ((s = reserve(&buf, &cap, pre + hlen, 0, path, err))) goto out;
        if (len < pre + hlen) {
            if ((s = attn_file_in_read(&in, path, buf + len, pre + hlen - len, &got, err)))
                goto out;
            len += got;
        }
        if (len == pre + hlen && (s = parse_impl(buf, len, path, accept, out, &need, err)))
            goto out;
        /* The body: a regular file's rest (its size is known), a stream's
         * expected bytes plus one to notice trailing data. */
        size_t want = len < pre + hlen ? len
                      : in.regular     ? (in.size > need ? (size_t)in.size : need)
                                       : need + 1;
        if (want > ATTN_FILE_READ_DEFAULT_MAX) want = ATTN_FILE_READ_DEFAULT_MAX;
        if ((s = reserve(&buf, &cap, want, 1, path, err))) goto out;
        if (want > len) {
            if ((s = attn_file_in_read(&in, path, buf + len, want - len, &got, err))) goto out;
            len += got;
        }
    }
    s = attn_npy_parse(buf, len, path, accept, out, err);
out:
    free(buf);
    attn_file_in_close(&in);
    return s;
}

attn_status attn_npy_load_f32(const char *path, attn_npy *out, attn_error *err) {
    return attn_npy_load(path, ATTN_NPY_ACCEPT_F32, out, err);
}

attn_status attn_npy_load_ids(const char *path, attn_npy *out, attn_error *err) {
    return attn_npy_load(path, ATTN_NPY_ACCEPT_IDS, out, err);
}

void attn_npy_free(attn_npy *a) {
    if (!a) return;
    free(a->data);
    memset(a, 0, sizeof *a);
}

attn_status attn_npy_convert_ids(attn_npy *a, attn_npy_dtype to, const char *name,
                                 attn_error *err) {
    if (!name) name = "array";
    if (to != ATTN_NPY_I32 && to != ATTN_NPY_I64)
        return attn_fail(err, ATTN_ERR_INVALID_ARG, "%s: token ids convert to int32 or int64 only",
                         name);
    if (a->dtype != ATTN_NPY_I32 && a->dtype != ATTN_NPY_I64)
        return attn_fail(err, ATTN_ERR_FORMAT,
                         "%s: dtype %s holds no token ids; expected int32 "
                         "or int64",
                         name, attn_npy_dtype_name(a->dtype));
    if (a->dtype == to) return ATTN_OK;
    size_t n = a->numel;
    if (to == ATTN_NPY_I64) {
        int64_t *d = malloc(n ? n * sizeof *d : 1);
        if (!d) return attn_fail(err, ATTN_ERR_NOMEM, "%s: out of memory", name);
        const int32_t *s = a->data;
        for (size_t i = 0; i < n; i++)
            d[i] = s[i];
        free(a->data);
        a->data = d;
    } else {
        const int64_t *s = a->data;
        for (size_t i = 0; i < n; i++)
            if (s[i] < INT32_MIN || s[i] > INT32_MAX)
                return attn_fail(err, ATTN_ERR_INVALID_ARG,
                                 "%s: value %lld at flat index %zu does not fit in int32", name,
                                 (long long)s[i], i);
        /* Narrow in place: each write lands at or before the read position. */
        int32_t *d = a->data;
        for (size_t i = 0; i < n; i++)
            d[i] = (int32_t)s[i];
    }
    a->dtype = to;
    return ATTN_OK;
}

/* "(2, 6, 3)" */
static void fmt_shape(char *out, size_t cap, int ndim, const int64_t *shape, int wild) {
    size_t u = 0;
    u += (size_t)snprintf(out + u, cap - u, "(");
    for (int i = 0; i < ndim && u < cap; i++) {
        if (wild && shape[i] < 0)
            u += (size_t)snprintf(out + u, cap - u, "%s*", i ? ", " : "");
        else
            u += (size_t)snprintf(out + u, cap - u, "%s%lld", i ? ", " : "", (long long)shape[i]);
    }
    if (u < cap) snprintf(out + u, cap - u, ndim == 1 ? ",)" : ")");
}

attn_status attn_npy_expect_shape(const attn_npy *a, const char *name, int ndim,
                                  const int64_t *dims, const char *dim_names, attn_error *err) {
    if (!name) name = "array";
    const char *sep = dim_names ? " " : "";
    if (!dim_names) dim_names = "";
    if (a->ndim != ndim)
        return attn_fail(err, ATTN_ERR_SHAPE, "%s: expected rank %d%s%s, got rank %d", name, ndim,
                         sep, dim_names, a->ndim);
    for (int i = 0; i < ndim; i++) {
        if (dims && dims[i] >= 0 && a->shape[i] != dims[i]) {
            char want[160], got[160];
            fmt_shape(want, sizeof want, ndim, dims, 1);
            fmt_shape(got, sizeof got, a->ndim, a->shape, 0);
            return attn_fail(err, ATTN_ERR_SHAPE, "%s: expected shape %s%s%s, got %s", name,
                             dim_names, *dim_names ? " = " : "", want, got);
        }
    }
    return ATTN_OK;
}

/* ---- writer ------------------------------------------------------------ */

/* The bytes before the data (returned: how many, at most 512) as
 * numpy.save writes them. */
static size_t header_bytes(attn_npy_dtype dtype, int ndim, const int64_t *shape,
                           unsigned char *head) {
    /* Same text as numpy.save, including its spare room for the first axis
     * to grow (21 digits) and padding to a 64-byte boundary. */
    char dict[400];
    size_t u = (size_t)snprintf(dict, sizeof dict,
                                "{'descr': '%s', 'fortran_order': False, "
                                "'shape': (",
                                attn_npy_dtype_descr(dtype));
    for (int i = 0; i < ndim; i++)
        u += (size_t)snprintf(dict + u, sizeof dict - u, "%s%lld", i ? ", " : "",
                              (long long)shape[i]);
    u += (size_t)snprintf(dict + u, sizeof dict - u, "%s), }", ndim == 1 ? "," : "");
    if (ndim > 0) {
        char first[24];
        int fl = snprintf(first, sizeof first, "%lld", (long long)shape[0]);
        for (int i = fl; i < 21; i++)
            dict[u++] = ' ';
    }
    size_t hlen = u + 1; /* + '\n' */
    size_t pre = 10;
    int major = 1;
    size_t pad = (64 - (pre + hlen) % 64) % 64;
    if (hlen + pad > 65535) { /* cannot happen with 8 dims, kept for safety */
        major = 2;
        pre = 12;
        pad = (64 - (pre + hlen) % 64) % 64;
    }
    memcpy(head, NPY_MAGIC, 6);
    head[6] = (unsigned char)major;
    head[7] = 0;
    size_t total = hlen + pad;
    head[8] = (unsigned char)(total & 0xff);
    head[9] = (unsigned char)(total >> 8 & 0xff);
    if (major == 2) {
        head[10] = (unsigned char)(total >> 16 & 0xff);
        head[11] = (unsigned char)(total >> 24 & 0xff);
    }
    memcpy(head + pre, dict, u);
    memset(head + pre + u, ' ', pad);
    head[pre + u + pad] = '\n';
    return pre + total;
}

attn_status attn_npy_save(const char *path, attn_npy_dtype dtype, const void *data, int ndim,
                          const int64_t *shape, attn_error *err) {
    size_t esz = attn_npy_dtype_size(dtype);
    if (!esz) return attn_fail(err, ATTN_ERR_INVALID_ARG, "%s: unknown dtype %d", path, dtype);
    if (ndim < 0 || ndim > ATTN_NPY_MAX_DIMS)
        return attn_fail(err, ATTN_ERR_INVALID_ARG, "%s: %d dims (0..%d allowed)", path, ndim,
                         ATTN_NPY_MAX_DIMS);
    size_t numel = 1;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0)
            return attn_fail(err, ATTN_ERR_INVALID_ARG, "%s: negative size %lld in dim %d", path,
                             (long long)shape[i], i);
        if (shape[i] != 0 && numel > SIZE_MAX / esz / (size_t)shape[i])
            return attn_fail(err, ATTN_ERR_INVALID_ARG, "%s: shape is too large", path);
        numel *= (size_t)shape[i];
    }
    if (numel && !data)
        return attn_fail(err, ATTN_ERR_INVALID_ARG, "%s: no data for %zu elements", path, numel);
    unsigned char head[512];
    const size_t n = header_bytes(dtype, ndim, shape, head);
    attn_atomic_file f;
    attn_status s = attn_atomic_open(&f, path, err);
    if (s) return s;
    if ((s = attn_atomic_write(&f, head, n, err))) return s;
    if ((s = attn_atomic_write(&f, data, numel * esz, err))) return s;
    return attn_atomic_commit(&f, err);
}

attn_status attn_npy_save_f32(const char *path, const float *data, int ndim, const int64_t *shape,
                              attn_error *err) {
    return attn_npy_save(path, ATTN_NPY_F32, data, ndim, shape, err);
}

attn_status attn_npy_save_i64(const char *path, const int64_t *data, int ndim, const int64_t *shape,
                              attn_error *err) {
    return attn_npy_save(path, ATTN_NPY_I64, data, ndim, shape, err);
}

attn_status attn_npy_to_f32(attn_npy *a, const char *name, attn_error *err) {
    if (!name) name = "array";
    if (a->dtype == ATTN_NPY_F32) return ATTN_OK;
    const size_t n = a->numel;
    /* Check every value first, so a failure leaves a as it was. */
    for (size_t i = 0; i < n; i++) {
        double v;
        if (a->dtype == ATTN_NPY_F64)
            v = ((const double *)a->data)[i];
        else if (a->dtype == ATTN_NPY_I64)
            v = (double)((const int64_t *)a->data)[i];
        else
            v = (double)((const int32_t *)a->data)[i];
        if (isfinite(v) && fabs(v) > (double)FLT_MAX)
            return attn_fail(err, ATTN_ERR_INVALID_ARG,
                             "%s: value %g at flat index %zu is outside float32's range", name, v,
                             i);
    }
    float *d = malloc(n ? n * sizeof *d : 1);
    if (!d) return attn_fail(err, ATTN_ERR_NOMEM, "%s: out of memory", name);
    for (size_t i = 0; i < n; i++) {
        if (a->dtype == ATTN_NPY_F64)
            d[i] = (float)((const double *)a->data)[i];
        else if (a->dtype == ATTN_NPY_I64)
            d[i] = (float)((const int64_t *)a->data)[i];
        else
            d[i] = (float)((const int32_t *)a->data)[i];
    }
    free(a->data);
    a->data = d;
    a->dtype = ATTN_NPY_F32;
    return ATTN_OK;
}

attn_status attn_npy_load_as_f32(const char *path, attn_npy *out, attn_npy_dtype *from,
                                 attn_error *err) {
    attn_status s = attn_npy_load(path, ATTN_NPY_ACCEPT_NUMERIC, out, err);
    if (s) return s;
    if (from) *from = out->dtype;
    if ((s = attn_npy_to_f32(out, path, err))) attn_npy_free(out);
    return s;
}
