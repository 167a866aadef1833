/* Writing PyTorch state_dict files (see attn/pth.h): the pickle torch.save
 * writes for an OrderedDict of tensors (without memo entries, which are
 * optional), and a zip of stored entries whose data start on 64-byte
 * boundaries (padding in an extra field, as torch.save pads), zip64 where a
 * size or offset needs it. Written by hand rather than through libzip so
 * the layout and bytes are fixed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn/fileio.h"
#include "attn/parse.h"
#include "attn/pth.h"
#include "pth_pickle.h"
#include "pth_write.h"

#define PTH_ALIGN 64
#define ARCHIVE "archive"

/* A growing byte buffer; oom sticks. */
typedef struct bytes {
    unsigned char *p;
    size_t n, cap;
    int oom;
} bytes;

static void put(bytes *b, const void *x, size_t k) {
    if (b->oom) return;
    if (b->n + k > b->cap) {
        size_t c = b->cap ? b->cap : 256;
        while (c < b->n + k)
            c *= 2;
        unsigned char *q = realloc(b->p, c);
        if (!q) {
            b->oom = 1;
            return;
        }
        b->p = q;
        b->cap = c;
    }
    memcpy(b->p + b->n, x, k);
    b->n += k;
}

static void put_le(bytes *b, uint64_t x, int k) {
    unsigned char t[8];
    for (int i = 0; i < k; i++)
        t[i] = (unsigned char)(x >> (8 * i));
    put(b, t, (size_t)k);
}

static void op(bytes *b, int code) {
    put_le(b, (uint64_t)code, 1);
}

/* ---- the pickle -------------------------------------------------------- */

static void p_str(bytes *b, const char *s) {
    op(b, 'X'); /* BINUNICODE */
    put_le(b, strlen(s), 4);
    put(b, s, strlen(s));
}

static void p_int(bytes *b, int64_t x) {
    if (x >= 0 && x < 256) {
        op(b, 'K'); /* BININT1 */
        put_le(b, (uint64_t)x, 1);
    } else if (x >= INT32_MIN && x <= INT32_MAX) {
        op(b, 'J'); /* BININT */
        put_le(b, (uint64_t)x, 4);
    } else {
        op(b, 0x8a); /* LONG1, 8 bytes two's complement */
        put_le(b, 8, 1);
        put_le(b, (uint64_t)x, 8);
    }
}

static void p_global(bytes *b, const char *module, const char *name) {
    op(b, 'c');
    put(b, module, strlen(module));
    put(b, "\n", 1);
    put(b, name, strlen(name));
    put(b, "\n", 1);
}

static void p_ints(bytes *b, const int64_t *x, int n) {
    if (n == 0) op(b, ')'); /* EMPTY_TUPLE */
    if (n > 3) op(b, '(');  /* MARK */
    for (int i = 0; i < n; i++)
        p_int(b, x[i]);
    if (n > 0) op(b, n > 3 ? 't' : 0x84 + n); /* TUPLE, TUPLE1..3 */
}

static int dtype_index(const char *dtype) {
    for (int d = 0; dtype && d < PTH_NDTYPES; d++)
        if (strcmp(dtype, PTH_DTYPES[d].dtype) == 0) return d;
    return -1;
}

/* name: _rebuild_tensor_v2(('storage', torch.<T>Storage, "<i>", 'cpu', numel),
 * 0, shape, stride, False, OrderedDict()). */
static void p_tensor(bytes *b, const attn_st_entry *e, int i) {
    const pth_dtype *d = &PTH_DTYPES[dtype_index(e->dtype)];
    int64_t stride[ATTN_ST_MAX_DIMS], n = 1;
    for (int k = e->ndim - 1; k >= 0; k--) {
        stride[k] = n;
        n *= e->shape[k] > 1 ? e->shape[k] : 1;
    }
    char key[24];
    snprintf(key, sizeof key, "%d", i);
    p_str(b, e->name);
    p_global(b, "torch._utils", "_rebuild_tensor_v2");
    op(b, '(');
    op(b, '(');
    p_str(b, "storage");
    p_global(b, "torch", d->storage);
    p_str(b, key);
    p_str(b, "cpu");
    p_int(b, (int64_t)(e->nbytes / d->elem_size));
    op(b, 't');
    op(b, 'Q'); /* BINPERSID */
    p_int(b, 0);
    p_ints(b, e->shape, e->ndim);
    p_ints(b, stride, e->ndim);
    op(b, 0x89); /* NEWFALSE: requires_grad */
    p_global(b, "collections", "OrderedDict");
    op(b, ')');
    op(b, 'R');
    op(b, 't');
    op(b, 'R');
}

static void p_state_dict(bytes *b, const attn_st_entry *entries, int count) {
    op(b, 0x80); /* PROTO 2 */
    op(b, 2);
    p_global(b, "collections", "OrderedDict");
    op(b, ')');
    op(b, 'R');
    if (count) op(b, '(');
    for (int i = 0; i < count; i++)
        p_tensor(b, &entries[i], i);
    if (count) op(b, 'u'); /* SETITEMS */
    op(b, '.');
}

/* ---- checks ------------------------------------------------------------ */

static attn_status check_entry(const attn_st_entry *e, const char *path, attn_error *err) {
    if (!e->name || !e->name[0] || !attn_utf8_valid(e->name, strlen(e->name)))
        return attn_fail(err, ATTN_ERR_INVALID_ARG, "%s: a tensor name is empty or not UTF-8",
                         path);
    int d = dtype_index(e->dtype);
    if (d < 0)
        return attn_fail(err, ATTN_ERR_INVALID_ARG,
                         "%s: tensor '%s': dtype %s has no torch storage", path, e->name,
                         e->dtype ? e->dtype : "NULL");
    if (e->ndim < 0 || e->ndim > ATTN_ST_MAX_DIMS || (e->ndim && !e->shape))
        return attn_fail(err, ATTN_ERR_INVALID_ARG, "%s: tensor '%s' has %d dims", path, e->name,
                         e->ndim);
    uint64_t n = 1;
    for (int k = 0; k < e->ndim; k++) {
        if (e->shape[k] < 0 || (e->shape[k] && n > (uint64_t)INT64_MAX / 8 / (uint64_t)e->shape[k]))
            return attn_fail(err, ATTN_ERR_INVALID_ARG, "%s: tensor '%s' has a bad shape", path,
                             e->name);
        n *= (uint64_t)e->shape[k];
    }
    if (n * PTH_DTYPES[d].elem_size != e->nbytes || (e->nbytes && !e->data))
        return attn_fail(err, ATTN_ERR_INVALID_ARG,
                         "%s: tensor '%s': %zu bytes of data for %llu elements of %s", path,
                         e->name, e->nbytes, (unsigned long long)n, e->dtype);
    return ATTN_OK;
}

static attn_status check_entries(const attn_st_entry *entries, int count, const char *path,
                                 attn_error *err) {
    if (count < 0 || (count && !entries) || count > 60000)
        return attn_fail(err, ATTN_ERR_INVALID_ARG, "%s: %d tensors", path, count);
    for (int i = 0; i < count; i++) {
        attn_status s = check_entry(&entries[i], path, err);
        if (s) return s;
        for (int j = 0; j < i; j++)
            if (strcmp(entries[i].name, entries[j].name) == 0)
                return attn_fail(err, ATTN_ERR_INVALID_ARG, "%s: tensor '%s' named twice", path,
                                 entries[i].name);
    }
    return ATTN_OK;
}

/* ---- the zip ----------------------------------------------------------- */

typedef struct zentry {
    char name[48]; /* "archive/data/<i>" */
    const void *data;
    uint64_t size, offset;
    uint32_t crc;
    size_t pad;
    int zip64; /* sizes and offset in a zip64 extra field */
} zentry;

#define U32_FULL 0xFFFFFFFFull /* "see the zip64 field" */

static void crc_table(uint32_t t[256]) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        t[i] = c;
    }
}

static uint32_t crc32_of(const uint32_t t[256], const unsigned char *p, uint64_t n) {
    uint32_t c = 0xFFFFFFFFu;
    for (uint64_t i = 0; i < n; i++)
        c = t[(c ^ p[i]) & 0xFF] ^ (c >> 8);
    return c ^ 0xFFFFFFFFu;
}

/* Offsets, padding (data on PTH_ALIGN boundaries), zip64 for entries whose
 * size or offset reaches zip64_at, CRCs; *end = the central directory's
 * offset. */
static void plan_zip(zentry *z, int n, uint64_t zip64_at, uint64_t *end) {
    uint32_t t[256];
    crc_table(t);
    uint64_t off = 0;
    for (int i = 0; i < n; i++) {
        z[i].zip64 = z[i].size >= zip64_at || off >= zip64_at;
        /* header, name, zip64 field (4 + 2 sizes), "FB" padding field's header */
        size_t head = 30 + strlen(z[i].name) + (z[i].zip64 ? 20 : 0) + 4;
        z[i].offset = off;
        z[i].pad = (size_t)((PTH_ALIGN - (off + head) % PTH_ALIGN) % PTH_ALIGN);
        off += head + z[i].pad + z[i].size;
        z[i].crc = crc32_of(t, z[i].data, z[i].size);
    }
    *end = off;
}

static void dos_entry_fields(bytes *b, const zentry *z) {
    put_le(b, z->zip64 ? 45 : 20, 2); /* version needed: 4.5 for zip64, else 2.0 */
    put_le(b, 0, 2);                  /* flags */
    put_le(b, 0, 2);                  /* stored */
    put_le(b, 0, 2);                  /* time 00:00 */
    put_le(b, 0x21, 2);               /* date 1980-01-01: fixed, so the bytes are too */
    put_le(b, z->crc, 4);
    put_le(b, z->zip64 ? U32_FULL : z->size, 4);
    put_le(b, z->zip64 ? U32_FULL : z->size, 4);
    put_le(b, strlen(z->name), 2);
}

static void local_header(bytes *b, const zentry *z) {
    static const char pad[PTH_ALIGN] = {0};
    put_le(b, 0x04034b50, 4);
    dos_entry_fields(b, z);
    put_le(b, (z->zip64 ? 20 : 0) + 4 + z->pad, 2);
    put(b, z->name, strlen(z->name));
    if (z->zip64) {
        put_le(b, 0x0001, 2); /* zip64: size, compressed size */
        put_le(b, 16, 2);
        put_le(b, z->size, 8);
        put_le(b, z->size, 8);
    }
    put_le(b, 0x4246, 2); /* "FB": torch.save's padding field */
    put_le(b, z->pad, 2);
    put(b, pad, z->pad);
}

static void central_entry(bytes *b, const zentry *z) {
    put_le(b, 0x02014b50, 4);
    put_le(b, z->zip64 ? 45 : 20, 2); /* made by: MS-DOS attributes */
    dos_entry_fields(b, z);
    put_le(b, z->zip64 ? 28 : 0, 2); /* extra */
    put_le(b, 0, 2);                 /* comment */
    put_le(b, 0, 2);                 /* disk */
    put_le(b, 0, 2);                 /* internal attributes */
    put_le(b, 0, 4);                 /* external attributes */
    put_le(b, z->zip64 ? U32_FULL : z->offset, 4);
    put(b, z->name, strlen(z->name));
    if (z->zip64) {
        put_le(b, 0x0001, 2); /* zip64: size, compressed size, offset */
        put_le(b, 24, 2);
        put_le(b, z->size, 8);
        put_le(b, z->size, 8);
        put_le(b, z->offset, 8);
    }
}

/* The central directory at offset start, then its end records (zip64 ones
 * when start or its size reaches zip64_at). */
static void central_dir(bytes *b, const zentry *z, int n, uint64_t start, uint64_t zip64_at) {
    for (int i = 0; i < n; i++)
        central_entry(b, &z[i]);
    uint64_t size = b->n;
    int zip64 = start >= zip64_at || size >= zip64_at;
    if (zip64) {
        put_le(b, 0x06064b50, 4); /* zip64 end of central directory */
        put_le(b, 44, 8);         /* its size after this field */
        put_le(b, 45, 2);
        put_le(b, 45, 2);
        put_le(b, 0, 4);
        put_le(b, 0, 4);
        put_le(b, (uint64_t)n, 8);
        put_le(b, (uint64_t)n, 8);
        put_le(b, size, 8);
        put_le(b, start, 8);
        put_le(b, 0x07064b50, 4); /* its locator */
        put_le(b, 0, 4);
        put_le(b, start + size, 8);
        put_le(b, 1, 4);
    }
    put_le(b, 0x06054b50, 4);
    put_le(b, 0, 2);
    put_le(b, 0, 2);
    put_le(b, (uint64_t)n, 2);
    put_le(b, (uint64_t)n, 2);
    put_le(b, zip64 ? U32_FULL : size, 4);
    put_le(b, zip64 ? U32_FULL : start, 4);
    put_le(b, 0, 2);
}

static attn_status write_zip(const char *path, const zentry *z, int n, uint64_t end,
                             uint64_t zip64_at, attn_error *err) {
    bytes cd = {0};
    central_dir(&cd, z, n, end, zip64_at);
    if (cd.oom) return attn_fail(err, ATTN_ERR_NOMEM, "%s: out of memory", path);
    attn_atomic_file f;
    attn_status s = attn_atomic_open(&f, path, err);
    for (int i = 0; !s && i < n; i++) {
        bytes h = {0};
        local_header(&h, &z[i]);
        s = h.oom ? attn_fail(err, ATTN_ERR_NOMEM, "%s: out of memory", path)
                  : attn_atomic_write(&f, h.p, h.n, err);
        if (!s && z[i].size) s = attn_atomic_write(&f, z[i].data, (size_t)z[i].size, err);
        free(h.p);
        if (s && h.oom) attn_atomic_abort(&f);
    }
    if (!s) s = attn_atomic_write(&f, cd.p, cd.n, err);
    if (!s) s = attn_atomic_commit(&f, err);
    free(cd.p);
    return s;
}

attn_status pth_write_zip64_at(const char *path, const attn_st_entry *entries, int count,
                               uint64_t zip64_at, attn_error *err) {
    if (!path) return attn_fail(err, ATTN_ERR_INVALID_ARG, "attn_pth_write: NULL path");
    attn_status s = check_entries(entries, count, path, err);
    if (s) return s;
    bytes pkl = {0};
    p_state_dict(&pkl, entries, count);
    zentry *z = calloc((size_t)count + 3, sizeof *z);
    if (pkl.oom || !z) {
        free(pkl.p);
        free(z);
        return attn_fail(err, ATTN_ERR_NOMEM, "%s: out of memory", path);
    }
    z[0] = (zentry){.name = ARCHIVE "/data.pkl", .data = pkl.p, .size = pkl.n};
    z[1] = (zentry){.name = ARCHIVE "/byteorder", .data = "little", .size = 6};
    for (int i = 0; i < count; i++) {
        snprintf(z[2 + i].name, sizeof z[2 + i].name, ARCHIVE "/data/%d", i);
        z[2 + i].data = entries[i].data;
        z[2 + i].size = entries[i].nbytes;
    }
    z[count + 2] = (zentry){.name = ARCHIVE "/version", .data = "3\n", .size = 2};
    uint64_t end = 0;
    plan_zip(z, count + 3, zip64_at, &end);
    s = write_zip(path, z, count + 3, end, zip64_at, err);
    free(pkl.p);
    free(z);
    return s;
}

attn_status attn_pth_write(const char *path, const attn_st_entry *entries, int count,
                           attn_error *err) {
    /* Below 0xFFFFFFFF every size and offset fits the classic fields. */
    return pth_write_zip64_at(path, entries, count, U32_FULL, err);
}
