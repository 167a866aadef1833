/* Reading PyTorch state_dict files (see attn/pth.h): the zip through libzip,
 * the pickle through the restricted unpickler (pth_pickle.c), each storage
 * copied once into one buffer the attn_safetensors struct owns. */
#define _POSIX_C_SOURCE 200809L /* dup */
#include "attn/pth.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zip.h>

#include "attn/fileio.h"
#include "pth_pickle.h"

#define PTH_ALIGN 64
#define PTH_MAX_PREFIX 255

typedef struct rd {
    zip_t *za;
    const char *path;
    attn_error *err;
    uint64_t fsize;
    char prefix[PTH_MAX_PREFIX + 1]; /* "<archive>" */
} rd;

static attn_status zip_status(rd *r, zip_error_t *ze, const char *what) {
    int code = zip_error_code_zip(ze);
    attn_status s = code == ZIP_ER_MEMORY ? ATTN_ERR_NOMEM
                    : code == ZIP_ER_READ || code == ZIP_ER_SEEK || code == ZIP_ER_OPEN
                        ? ATTN_ERR_IO
                        : ATTN_ERR_FORMAT;
    return attn_fail(r->err, s, "%s: %s: %s", r->path, what, zip_error_strerror(ze));
}

static attn_status open_zip(rd *r) {
    attn_file_in in;
    attn_status s = attn_file_in_open(&in, r->path, r->err);
    if (s) return s;
    /* libzip closes the fd it is given: its own copy, ours closed as usual. */
    int fd = in.regular ? dup(in.fd) : -1;
    int regular = in.regular;
    r->fsize = in.size;
    attn_file_in_close(&in);
    if (!regular)
        return attn_fail(r->err, ATTN_ERR_IO, "%s: not a regular file (a .pth is a zip archive)",
                         r->path);
    if (fd < 0) return attn_fail(r->err, ATTN_ERR_IO, "%s: %s", r->path, strerror(errno));
    int code = 0;
    r->za = zip_fdopen(fd, ZIP_CHECKCONS, &code);
    if (r->za) return ATTN_OK;
    close(fd);
    zip_error_t ze;
    zip_error_init_with_code(&ze, code);
    s = zip_status(r, &ze, "not a PyTorch >= 1.6 file (a zip archive)");
    zip_error_fini(&ze);
    return s;
}

/* The one "<archive>/data.pkl" entry gives the archive's folder name. */
static attn_status find_prefix(rd *r) {
    zip_int64_t n = zip_get_num_entries(r->za, 0);
    int found = 0;
    for (zip_int64_t i = 0; i < n; i++) {
        const char *nm = zip_get_name(r->za, (zip_uint64_t)i, ZIP_FL_ENC_RAW);
        size_t len = nm ? strlen(nm) : 0;
        const char *slash = nm ? strchr(nm, '/') : NULL;
        if (!slash || strcmp(slash, "/data.pkl") != 0) continue;
        if (found++)
            return attn_fail(r->err, ATTN_ERR_FORMAT, "%s: more than one data.pkl", r->path);
        if (len - 9 == 0 || len - 9 > PTH_MAX_PREFIX)
            return attn_fail(r->err, ATTN_ERR_FORMAT, "%s: bad archive name in '%s'", r->path, nm);
        memcpy(r->prefix, nm, len - 9);
        r->prefix[len - 9] = '\0';
    }
    if (!found)
        return attn_fail(r->err, ATTN_ERR_FORMAT,
                         "%s: no <archive>/data.pkl (not a torch.save file)", r->path);
    return ATTN_OK;
}

/* Entry "<archive>/<rest>": its index and size, stored uncompressed and
 * unencrypted, no bigger than the file. When absent: ATTN_ERR_NOT_FOUND,
 * without a message, if optional, else ATTN_ERR_FORMAT. */
static attn_status locate(rd *r, const char *rest, int optional, zip_uint64_t *idx,
                          uint64_t *size) {
    char name[PTH_MAX_PREFIX + 128];
    snprintf(name, sizeof name, "%s/%s", r->prefix, rest);
    zip_int64_t i = zip_name_locate(r->za, name, ZIP_FL_ENC_RAW);
    if (i < 0 && optional) return ATTN_ERR_NOT_FOUND;
    if (i < 0) return attn_fail(r->err, ATTN_ERR_FORMAT, "%s: no entry '%s'", r->path, name);
    zip_stat_t st;
    zip_stat_init(&st);
    if (zip_stat_index(r->za, (zip_uint64_t)i, 0, &st) != 0)
        return zip_status(r, zip_get_error(r->za), name);
    zip_uint64_t need = ZIP_STAT_SIZE | ZIP_STAT_COMP_METHOD | ZIP_STAT_ENCRYPTION_METHOD;
    if ((st.valid & need) != need || st.encryption_method != ZIP_EM_NONE)
        return attn_fail(r->err, ATTN_ERR_FORMAT, "%s: entry '%s' is encrypted", r->path, name);
    if (st.comp_method != ZIP_CM_STORE)
        return attn_fail(r->err, ATTN_ERR_FORMAT,
                         "%s: entry '%s' is compressed (method %d); torch.save stores entries "
                         "uncompressed",
                         r->path, name, (int)st.comp_method);
    if (st.size > r->fsize)
        return attn_fail(r->err, ATTN_ERR_FORMAT, "%s: entry '%s' is larger than the file", r->path,
                         name);
    *idx = (zip_uint64_t)i;
    *size = st.size;
    return ATTN_OK;
}

/* Exactly size bytes of entry idx into dst; reading on to the end has
 * libzip check the CRC. */
static attn_status read_entry(rd *r, zip_uint64_t idx, void *dst, uint64_t size) {
    const char *nm = zip_get_name(r->za, idx, ZIP_FL_ENC_RAW);
    zip_file_t *f = zip_fopen_index(r->za, idx, 0);
    if (!f) return zip_status(r, zip_get_error(r->za), nm ? nm : "entry");
    uint64_t got = 0;
    zip_int64_t k = 1;
    char extra;
    while (got < size && k > 0) {
        k = zip_fread(f, (char *)dst + got, size - got);
        if (k > 0) got += (uint64_t)k;
    }
    if (k >= 0 && got == size) k = zip_fread(f, &extra, 1);
    attn_status s = ATTN_OK;
    if (k < 0)
        s = zip_status(r, zip_file_get_error(f), nm ? nm : "entry");
    else if (got != size || k != 0)
        s = attn_fail(r->err, ATTN_ERR_FORMAT, "%s: entry '%s' is not %llu bytes", r->path, nm,
                      (unsigned long long)size);
    zip_fclose(f);
    return s;
}

/* data.pkl into a new buffer; a "byteorder" entry, when there, must say little. */
static attn_status read_pkl(rd *r, unsigned char **pkl, size_t *n) {
    zip_uint64_t idx;
    uint64_t size;
    char order[16] = {0};
    attn_status s = locate(r, "byteorder", 1, &idx, &size);
    if (!s && (size >= sizeof order || (s = read_entry(r, idx, order, size)) ||
               strcmp(order, "little") != 0))
        return s ? s
                 : attn_fail(r->err, ATTN_ERR_FORMAT,
                             "%s: byteorder is not 'little' (big-endian files are not read)",
                             r->path);
    if (s != ATTN_ERR_NOT_FOUND && s) return s;
    if ((s = locate(r, "data.pkl", 0, &idx, &size))) return s;
    if (!(*pkl = malloc(size ? (size_t)size : 1)))
        return attn_fail(r->err, ATTN_ERR_NOMEM, "%s: out of memory", r->path);
    *n = (size_t)size;
    if ((s = read_entry(r, idx, *pkl, size))) {
        free(*pkl);
        *pkl = NULL;
    }
    return s;
}

/* Where each storage goes in the one buffer (64-byte aligned), after
 * checking its entry holds exactly numel elements. */
static attn_status plan_storages(rd *r, const pth_pickle *pp, zip_uint64_t *idx, size_t *pos,
                                 size_t *total) {
    uint64_t sum = 0, at = 0;
    for (int i = 0; i < pp->nstorages; i++) {
        const pth_storage *st = &pp->storages[i];
        char rest[96];
        uint64_t size;
        snprintf(rest, sizeof rest, "data/%s", st->key);
        attn_status s = locate(r, rest, 0, &idx[i], &size);
        if (s) return s;
        size_t es = PTH_DTYPES[st->dtype].elem_size;
        if (st->numel > size / es || st->numel * es != size)
            return attn_fail(r->err, ATTN_ERR_FORMAT,
                             "%s: storage '%s' holds %llu bytes, not %llu elements of %zu bytes",
                             r->path, st->key, (unsigned long long)size,
                             (unsigned long long)st->numel, es);
        sum += size; /* each <= the file, so no overflow before the check */
        if (sum > r->fsize)
            return attn_fail(r->err, ATTN_ERR_FORMAT, "%s: storages larger than the file", r->path);
        pos[i] = (size_t)at;
        at = (at + size + PTH_ALIGN - 1) / PTH_ALIGN * PTH_ALIGN;
    }
    *total = (size_t)at;
    return ATTN_OK;
}

static attn_status overrun(rd *r, const pth_tensor *t, const pth_storage *st) {
    return attn_fail(r->err, ATTN_ERR_FORMAT,
                     "%s: tensor '%s' (offset %lld) overruns its storage '%s' of %llu elements",
                     r->path, t->name, (long long)t->offset, st->key,
                     (unsigned long long)st->numel);
}

/* The tensor's elements lie in its storage, in row-major order (strides of
 * size-1 dimensions, and of empty tensors, do not matter: PyTorch's
 * is_contiguous). */
static attn_status check_tensor(rd *r, const pth_tensor *t, const pth_storage *st,
                                uint64_t *numel) {
    int empty = 0;
    for (int d = 0; d < t->ndim; d++) {
        if (t->shape[d] < 0)
            return attn_fail(r->err, ATTN_ERR_FORMAT, "%s: tensor '%s' has a negative size",
                             r->path, t->name);
        empty |= t->shape[d] == 0;
    }
    uint64_t n = empty ? 0 : 1;
    for (int d = t->ndim - 1; d >= 0 && !empty; d--) {
        uint64_t size = (uint64_t)t->shape[d];
        if (n > st->numel / size) return overrun(r, t, st);
        if (size != 1 && t->stride[d] != (int64_t)n)
            return attn_fail(r->err, ATTN_ERR_FORMAT,
                             "%s: tensor '%s' is not contiguous (dim %d has stride %lld, not %llu)",
                             r->path, t->name, d, (long long)t->stride[d], (unsigned long long)n);
        n *= size;
    }
    if (t->offset < 0 || (uint64_t)t->offset > st->numel || n > st->numel - (uint64_t)t->offset)
        return overrun(r, t, st);
    *numel = n;
    return ATTN_OK;
}

/* One attn_st_tensor per dict entry, pointing into buf. */
static attn_status fill(rd *r, const pth_pickle *pp, const size_t *pos, unsigned char *buf,
                        attn_safetensors *out) {
    if (pp->count && !(out->tensors = calloc((size_t)pp->count, sizeof *out->tensors)))
        return attn_fail(r->err, ATTN_ERR_NOMEM, "%s: out of memory", r->path);
    for (int i = 0; i < pp->count; i++) {
        const pth_tensor *t = &pp->tensors[i];
        const pth_storage *st = &pp->storages[t->storage];
        uint64_t numel = 0;
        attn_status s = check_tensor(r, t, st, &numel);
        if (s) return s;
        attn_st_tensor *o = &out->tensors[i];
        size_t es = PTH_DTYPES[st->dtype].elem_size;
        if (!(o->name = malloc(strlen(t->name) + 1)))
            return attn_fail(r->err, ATTN_ERR_NOMEM, "%s: out of memory", r->path);
        strcpy(o->name, t->name);
        out->count++;
        snprintf(o->dtype, sizeof o->dtype, "%s", PTH_DTYPES[st->dtype].dtype);
        o->elem_size = es;
        o->ndim = t->ndim;
        memcpy(o->shape, t->shape, sizeof o->shape);
        o->numel = (size_t)numel;
        o->begin = pos[t->storage] + (size_t)t->offset * es;
        o->end = o->begin + (size_t)numel * es;
        o->data = buf + o->begin;
    }
    return ATTN_OK;
}

/* Every storage into one buffer, then the tensors over it. */
static attn_status load(rd *r, const pth_pickle *pp, attn_safetensors *out) {
    size_t ns = (size_t)pp->nstorages, total = 0;
    zip_uint64_t *idx = calloc(ns ? ns : 1, sizeof *idx);
    size_t *pos = calloc(ns ? ns : 1, sizeof *pos);
    attn_status s =
        idx && pos ? ATTN_OK : attn_fail(r->err, ATTN_ERR_NOMEM, "%s: out of memory", r->path);
    if (!s) s = plan_storages(r, pp, idx, pos, &total);
    /* aligned_alloc's memory goes back with free (attn_safetensors_free);
     * total is a multiple of PTH_ALIGN. */
    if (!s && !(out->buf_ = aligned_alloc(PTH_ALIGN, total ? total : PTH_ALIGN)))
        s = attn_fail(r->err, ATTN_ERR_NOMEM, "%s: out of memory for %zu bytes", r->path, total);
    out->size_ = s ? 0 : total;
    for (size_t i = 0; !s && i < ns; i++) {
        uint64_t size = pp->storages[i].numel * PTH_DTYPES[pp->storages[i].dtype].elem_size;
        s = read_entry(r, idx[i], (unsigned char *)out->buf_ + pos[i], size);
    }
    if (!s) s = fill(r, pp, pos, out->buf_, out);
    free(idx);
    free(pos);
    return s;
}

attn_status attn_pth_read(const char *path, attn_safetensors *out, attn_error *err) {
    if (!out || !path)
        return attn_fail(err, ATTN_ERR_INVALID_ARG, "attn_pth_read: NULL %s", out ? "path" : "out");
    memset(out, 0, sizeof *out);
    rd r = {.path = path, .err = err};
    unsigned char *pkl = NULL;
    size_t npkl = 0;
    pth_pickle pp = {0};
    attn_status s = open_zip(&r);
    if (!s) s = find_prefix(&r);
    if (!s) s = read_pkl(&r, &pkl, &npkl);
    if (!s) s = pth_unpickle(pkl, npkl, path, &pp, err);
    free(pkl);
    if (!s) s = load(&r, &pp, out);
    pth_pickle_free(&pp);
    if (r.za) zip_discard(r.za);
    if (s) attn_safetensors_free(out);
    return s;
}
