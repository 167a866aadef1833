/* PyTorch state_dict files (attn/pth.h).
 *
 * tests/fixtures/pth/ was written by scripts/gen_pth_fixtures.py with torch
 * 1.13: each good .pth has a .expected.safetensors beside it holding the same
 * tensors' bytes as torch had them, so every value is checked bit for bit.
 * The bad files are torch.save output made wrong one way each; truncations,
 * byte flips and hand-made pickles are built here. tests/pth_torch_live.sh
 * has torch.load read what attn_pth_write writes. */
#define _GNU_SOURCE /* memfd_create */
#include "io_util.h"

#include <criterion/criterion.h>
#include <stdint.h>
#include <sys/mman.h>
#include <zip.h>

#include "attn/pth.h"
#include "io/pth_pickle.h"
#include "io/pth_write.h"

#define PTH_FIXTURES ATTN_SOURCE_DIR "/tests/fixtures/pth/"

static const char *dir;

static void setup(void) {
    dir = tio_mkdtemp();
}
static void teardown(void) {
    tio_rmtree(dir);
}

TestSuite(pth, .init = setup, .fini = teardown);

static void read_ok(const char *path, attn_safetensors *st) {
    attn_error err = {0};
    attn_status s = attn_pth_read(path, st, &err);
    cr_assert_eq(s, ATTN_OK, "%s: %s", path, err.msg);
}

/* Same names in the same order, dtypes, shapes and bytes. */
static void expect_same(const attn_safetensors *a, const attn_safetensors *b) {
    cr_assert_eq(a->count, b->count);
    for (int i = 0; i < a->count; i++) {
        const attn_st_tensor *x = &a->tensors[i], *y = &b->tensors[i];
        cr_assert_str_eq(x->name, y->name);
        cr_assert_str_eq(x->dtype, y->dtype, "%s", x->name);
        cr_assert_eq(x->ndim, y->ndim, "%s", x->name);
        for (int d = 0; d < x->ndim; d++)
            cr_assert_eq(x->shape[d], y->shape[d], "%s dim %d", x->name, d);
        cr_assert_eq(x->numel, y->numel, "%s", x->name);
        cr_assert_eq(x->end - x->begin, x->numel * x->elem_size, "%s", x->name);
        cr_assert_eq(memcmp(x->data, y->data, x->numel * x->elem_size), 0, "%s values", x->name);
    }
}

static void expect_fixture(const char *name) {
    char pth[4096], st[4096];
    snprintf(pth, sizeof pth, PTH_FIXTURES "%s.pth", name);
    snprintf(st, sizeof st, PTH_FIXTURES "%s.expected.safetensors", name);
    attn_safetensors a, b;
    attn_error err;
    read_ok(pth, &a);
    cr_assert_eq(attn_safetensors_read(st, &b, &err), ATTN_OK, "%s", err.msg);
    expect_same(&a, &b);
    attn_safetensors_free(&a);
    attn_safetensors_free(&b);
}

Test(pth, every_storage_type_reads_as_torch_saved_it) {
    expect_fixture("basic");
}

Test(pth, the_books_gpt_state_dict_with_its_mask_buffers) {
    expect_fixture("gpt");
    attn_safetensors st;
    read_ok(PTH_FIXTURES "gpt.pth", &st);
    const attn_st_tensor *m = attn_safetensors_find(&st, "trf_blocks.0.att.mask");
    cr_assert(m);
    cr_assert_str_eq(m->dtype, "F32");
    const float *f = m->data;
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++)
            cr_assert_eq(f[i * 4 + j], j > i ? 1.0f : 0.0f); /* triu(ones, diagonal=1) */
    attn_safetensors_free(&st);
}

Test(pth, tied_tensors_and_views_point_into_one_storage) {
    attn_safetensors st;
    read_ok(PTH_FIXTURES "basic.pth", &st);
    const attn_st_tensor *tok = attn_safetensors_find(&st, "tok_emb.weight");
    const attn_st_tensor *out = attn_safetensors_find(&st, "out_head.weight");
    const attn_st_tensor *base = attn_safetensors_find(&st, "base");
    const attn_st_tensor *tail = attn_safetensors_find(&st, "tail");
    cr_assert(tok && out && base && tail);
    cr_assert_eq(tok->data, out->data);
    cr_assert_eq((const float *)tail->data, (const float *)base->data + 4);
    cr_assert_eq(((const float *)tail->data)[0], 1.0f); /* arange(10) / 4, from 4 on */
    cr_assert_eq((uintptr_t)base->data % 64, 0);
    attn_safetensors_free(&st);
}

/* The tensors of st as entries for attn_pth_write. */
static attn_st_entry *entries_of(const attn_safetensors *st) {
    attn_st_entry *e = calloc((size_t)st->count + 1, sizeof *e);
    cr_assert(e);
    for (int i = 0; i < st->count; i++) {
        const attn_st_tensor *t = &st->tensors[i];
        e[i] = (attn_st_entry){t->name, t->dtype, t->ndim, t->shape, t->data, t->end - t->begin};
    }
    return e;
}

Test(pth, write_then_read_is_bit_exact_and_deterministic) {
    attn_safetensors a, b;
    attn_error err;
    read_ok(PTH_FIXTURES "basic.pth", &a);
    attn_st_entry *e = entries_of(&a);
    const char *p1 = tio_path(dir, "one.pth"), *p2 = tio_path(dir, "two.pth");
    cr_assert_eq(attn_pth_write(p1, e, a.count, &err), ATTN_OK, "%s", err.msg);
    cr_assert_eq(attn_pth_write(p2, e, a.count, &err), ATTN_OK, "%s", err.msg);
    read_ok(p1, &b);
    expect_same(&a, &b);
    /* Each tensor its own storage now: the tied pair no longer shares. */
    cr_assert_neq(b.tensors[0].data, b.tensors[1].data);
    size_t n1, n2;
    unsigned char *f1 = tio_slurp(p1, &n1), *f2 = tio_slurp(p2, &n2);
    cr_assert(n1 == n2 && memcmp(f1, f2, n1) == 0);
    free(f1);
    free(f2);
    free(e);
    attn_safetensors_free(&a);
    attn_safetensors_free(&b);
}

/* zip64 fields from 0 bytes (every entry and the end records) and from 200
 * (the later entries): libzip reads both back to the same tensors. */
Test(pth, zip64_files_read_back) {
    attn_safetensors a, b;
    attn_error err;
    read_ok(PTH_FIXTURES "basic.pth", &a);
    attn_st_entry *e = entries_of(&a);
    const uint64_t at[2] = {0, 200};
    for (int k = 0; k < 2; k++) {
        const char *p = tio_path(dir, "z64.pth");
        cr_assert_eq(pth_write_zip64_at(p, e, a.count, at[k], &err), ATTN_OK, "%s", err.msg);
        read_ok(p, &b);
        expect_same(&a, &b);
        for (int i = 0; i < b.count; i++)
            cr_assert_eq((uintptr_t)b.tensors[i].data % 64, 0);
        attn_safetensors_free(&b);
    }
    free(e);
    attn_safetensors_free(&a);
}

Test(pth, an_empty_state_dict_round_trips) {
    attn_safetensors st;
    attn_error err;
    const char *p = tio_path(dir, "empty.pth");
    cr_assert_eq(attn_pth_write(p, NULL, 0, &err), ATTN_OK, "%s", err.msg);
    read_ok(p, &st);
    cr_assert_eq(st.count, 0);
    attn_safetensors_free(&st);
}

Test(pth, the_writer_refuses_bad_entries_and_writes_nothing) {
    float x[6] = {0};
    int64_t s23[2] = {2, 3};
    attn_st_entry ok = {"w", "F32", 2, s23, x, sizeof x};
    attn_st_entry bad[4][2] = {{ok, ok},                                /* repeated */
                               {ok, {"v", "U16", 2, s23, x, 12}},       /* no storage */
                               {ok, {"v", "F32", 2, s23, x, 20}},       /* nbytes */
                               {ok, {"", "F32", 2, s23, x, sizeof x}}}; /* empty name */
    const char *p = tio_path(dir, "bad.pth");
    for (int i = 0; i < 4; i++) {
        attn_error err = {0};
        cr_assert_eq(attn_pth_write(p, bad[i], 2, &err), ATTN_ERR_INVALID_ARG, "case %d", i);
        cr_assert_eq(access(p, F_OK), -1, "case %d left a file", i);
    }
}

static void expect_format(const char *path, const char *words) {
    attn_safetensors st;
    attn_error err = {0};
    cr_assert_eq(attn_pth_read(path, &st, &err), ATTN_ERR_FORMAT, "%s: %s", path, err.msg);
    cr_assert(strstr(err.msg, words), "%s: '%s' lacks '%s'", path, err.msg, words);
    cr_assert_eq(st.count, 0);
    cr_assert_null(st.buf_);
}

Test(pth, bad_files_are_format_errors_that_say_why) {
    expect_format(PTH_FIXTURES "bad_global.pth", "global 'posix system'");
    expect_format(PTH_FIXTURES "bad_compressed.pth", "compressed");
    expect_format(PTH_FIXTURES "bad_byteorder.pth", "byteorder is not 'little'");
    expect_format(PTH_FIXTURES "bad_storage_size.pth", "storage '0' holds 44 bytes");
    expect_format(PTH_FIXTURES "bad_noncontig.pth", "not contiguous");
    expect_format(PTH_FIXTURES "bad_overrun.pth", "overruns its storage");
    expect_format(PTH_FIXTURES "basic.expected.safetensors", "zip");
    attn_safetensors st;
    attn_error err;
    cr_assert_eq(attn_pth_read(tio_path(dir, "missing.pth"), &st, &err), ATTN_ERR_IO);
    cr_assert_eq(attn_pth_read(dir, &st, &err), ATTN_ERR_IO); /* a directory */
    cr_assert_eq(attn_pth_read(PTH_FIXTURES "bad_global.pth", &st, NULL), ATTN_ERR_FORMAT);
    float x = 1;
    attn_st_entry e = {"x", "F32", 0, NULL, &x, sizeof x};
    cr_assert_eq(attn_pth_write(tio_path(dir, "no/such/dir.pth"), &e, 1, &err), ATTN_ERR_IO);
}

/* Many variants of a file, each read through a path: an in-memory file
 * (/proc/self/fd/N of a memfd) keeps thousands of rewrites off the disk. */
typedef struct {
    int fd;
    char path[64];
} memfile;

static void memfile_open(memfile *m) {
    m->fd = memfd_create("attn-pth", 0);
    cr_assert_geq(m->fd, 0);
    snprintf(m->path, sizeof m->path, "/proc/self/fd/%d", m->fd);
}

static void memfile_set(memfile *m, const void *data, size_t n) {
    cr_assert_eq(ftruncate(m->fd, 0), 0);
    cr_assert_eq(pwrite(m->fd, data, n, 0), (ssize_t)n);
}

Test(pth, every_truncation_is_a_format_error) {
    size_t n;
    unsigned char *f = tio_slurp(PTH_FIXTURES "basic.pth", &n);
    memfile m;
    memfile_open(&m);
    for (size_t k = 0; k < n; k++) {
        memfile_set(&m, f, k);
        attn_safetensors st;
        attn_error err = {0};
        cr_assert_eq(attn_pth_read(m.path, &st, &err), ATTN_ERR_FORMAT, "%zu bytes: %s", k,
                     err.msg);
    }
    close(m.fd);
    free(f);
}

/* Any byte of the file flipped: read or refused, never a crash or a leak. */
Test(pth, flipped_bytes_never_crash) {
    size_t n;
    unsigned char *f = tio_slurp(PTH_FIXTURES "basic.pth", &n);
    memfile m;
    memfile_open(&m);
    int refused = 0;
    for (size_t k = 0; k < n; k++) {
        f[k] ^= 0x5a;
        memfile_set(&m, f, n);
        f[k] ^= 0x5a;
        attn_safetensors st;
        attn_error err = {0};
        attn_status s = attn_pth_read(m.path, &st, &err);
        cr_assert(s == ATTN_OK || s == ATTN_ERR_FORMAT, "byte %zu: %d %s", k, s, err.msg);
        refused += s != ATTN_OK;
        attn_safetensors_free(&st);
    }
    cr_assert_gt(refused, (int)(n / 2)); /* headers, names and CRCs catch most */
    close(m.fd);
    free(f);
}

/* Hand-made pickles straight into the unpickler. */
typedef struct {
    const char *pkl;
    size_t n;
    const char *words;
} pkl_case;
#define PKL(lit, words)                                                                            \
    { lit, sizeof lit - 1, words }

Test(pth, the_unpickler_refuses_what_torch_save_never_writes) {
    char deep[80] = "\x80\x02";
    memset(deep + 2, '(', 65);
    const pkl_case cases[] = {
        {deep, 67, "marks nest deeper than 64"},
        PKL("\x80\x02Nr\x05\x00\x00\x00.", "memo index 5 out of order"),
        PKL("\x80\x02h\x00.", "no memo 0"),
        PKL("\x80\x02X\xff\xff\xff\x7f", "truncated"),
        PKL("\x80\x02(ios\nsystem\n.", "opcode 0x69"),
        PKL("\x80\x02"
            "cbuiltins\neval\n.",
            "global 'builtins eval'"),
        PKL("\x80\x02N)R.", "not callable"),
        PKL("\x80\x02NN.", "STOP with 2 values"),
        PKL("\x80\x02\x8a\x09"
            "123456789.",
            "LONG1 of 9 bytes"),
        PKL("\x80\x02}X\x01\x00\x00\x00"
            "aNs.",
            "entry 'a' is not a tensor"),
        PKL("\x80\x02s.", "stack underflow"),
        PKL("\x80\x02N.", "holds no dict"),
        PKL("\x80\x02"
            "ctorch",
            "GLOBAL without end of line"),
        PKL("", "no STOP"),
        PKL("\x80\x01}.", "PROTO 1"),
        PKL("\x80\x02}.N", "1 bytes after STOP"),
        PKL("\x80\x02(X\x07\x00\x00\x00storagectorch\nFloatStorage\nX\x04\x00\x00\x00../x"
            "X\x03\x00\x00\x00"
            "cpuK\x01tQ.",
            "storage key '../x'"),
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        pth_pickle pp;
        attn_error err = {0};
        attn_status s =
            pth_unpickle((const unsigned char *)cases[i].pkl, cases[i].n, "t.pkl", &pp, &err);
        cr_assert_eq(s, ATTN_ERR_FORMAT, "case %zu: %s", i, err.msg);
        cr_assert(strstr(err.msg, cases[i].words), "case %zu: '%s' lacks '%s'", i, err.msg,
                  cases[i].words);
        cr_assert_null(pp.tensors);
    }
    pth_pickle pp;
    attn_error err;
    cr_assert_eq(pth_unpickle((const unsigned char *)"\x80\x02}.", 4, "t.pkl", &pp, &err), ATTN_OK);
    cr_assert_eq(pp.count, 0);
    pth_pickle_free(&pp);
}

/* basic.pth's data.pkl, read with libzip (the file's CRCs would refuse a
 * changed pickle before the unpickler saw it). */
static unsigned char *basic_pickle(size_t *n) {
    int code;
    zip_t *za = zip_open(PTH_FIXTURES "basic.pth", ZIP_RDONLY, &code);
    cr_assert(za);
    zip_stat_t st;
    cr_assert_eq(zip_stat(za, "basic/data.pkl", 0, &st), 0);
    unsigned char *p = malloc(st.size);
    zip_file_t *f = zip_fopen(za, "basic/data.pkl", 0);
    cr_assert(p && f);
    cr_assert_eq(zip_fread(f, p, st.size), (zip_int64_t)st.size);
    zip_fclose(f);
    zip_discard(za);
    *n = st.size;
    return p;
}

/* Every prefix of a real pickle, and every byte changed a few ways: refused
 * (or, rarely, still a state_dict), never a crash, a leak or a bad index. */
Test(pth, the_unpickler_survives_mangled_pickles) {
    size_t n;
    unsigned char *pkl = basic_pickle(&n);
    static const unsigned char xors[] = {0x01, 0x10, 0x80, 0xff};
    for (size_t k = 0; k < n; k++) {
        pth_pickle pp;
        attn_error err;
        cr_assert_eq(pth_unpickle(pkl, k, "t.pkl", &pp, &err), ATTN_ERR_FORMAT, "%zu bytes", k);
        for (size_t x = 0; x < sizeof xors; x++) {
            pkl[k] ^= xors[x];
            attn_status s = pth_unpickle(pkl, n, "t.pkl", &pp, &err);
            pkl[k] ^= xors[x];
            cr_assert(s == ATTN_OK || s == ATTN_ERR_FORMAT, "byte %zu: %d", k, s);
            for (int i = 0; !s && i < pp.count; i++)
                cr_assert(pp.tensors[i].storage >= 0 && pp.tensors[i].storage < pp.nstorages);
            pth_pickle_free(&pp);
        }
    }
    free(pkl);
}
