/* .npy reader/writer (attn/npy.h).
 *
 * Fixtures in tests/fixtures/io/ (.npy files) were written by numpy 1.24 with
 * scripts/gen_io_fixtures.py (committed output); their values are restated
 * here. Bad inputs are built inside each test in a temp dir. The live_numpy
 * tests run /usr/bin/python3 + numpy when present (skipped otherwise). */
#include "io_util.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "attn/npy.h"

static const char *dir;

static void setup(void) {
    dir = tio_mkdtemp();
}
static void teardown(void) {
    tio_rmtree(dir);
}

TestSuite(npy, .init = setup, .fini = teardown);

/* Load a fixture that must parse. */
static attn_npy load_ok(const char *fixture, unsigned accept) {
    attn_npy a;
    attn_error err;
    attn_status s = attn_npy_load(fixture, accept, &a, &err);
    cr_assert_eq(s, ATTN_OK, "%s: %s", fixture, err.msg);
    return a;
}

/* Parse in-memory bytes that must fail; returns the message. */
static const char *parse_fail(const void *buf, size_t len, unsigned accept, attn_status want) {
    static attn_error err;
    attn_npy a;
    attn_status s = attn_npy_parse(buf, len, "bad.npy", accept, &a, &err);
    cr_assert_eq(s, want, "got status %d (%s)", s, err.msg);
    cr_assert_null(a.data);
    cr_assert(strncmp(err.msg, "bad.npy: ", 9) == 0, "%s", err.msg);
    return err.msg;
}

/* A v1.0 image with the given header text (padded like numpy) + n data bytes. */
static size_t make_npy(unsigned char *out, const char *dict, size_t ndata) {
    size_t dl = strlen(dict);
    size_t hlen = dl + 1;
    size_t pad = (64 - (10 + hlen) % 64) % 64;
    memcpy(out, "\x93NUMPY\x01\x00", 8);
    out[8] = (unsigned char)((hlen + pad) & 0xff);
    out[9] = (unsigned char)((hlen + pad) >> 8);
    memcpy(out + 10, dict, dl);
    memset(out + 10 + dl, ' ', pad);
    out[10 + dl + pad] = '\n';
    memset(out + 10 + hlen + pad, 0, ndata);
    return 10 + hlen + pad + ndata;
}

Test(npy, reads_float32_2x3) {
    attn_npy a = load_ok(IO_FIXTURES "f32_2x3.npy", ATTN_NPY_ACCEPT_F32);
    cr_assert_eq(a.dtype, ATTN_NPY_F32);
    cr_assert_eq(a.ndim, 2);
    cr_assert(a.shape[0] == 2 && a.shape[1] == 3);
    cr_assert_eq(a.numel, 6);
    const float *d = a.data; /* (arange(6) - 2.5).reshape(2, 3) */
    for (int i = 0; i < 6; i++)
        cr_assert_eq(d[i], (float)i - 2.5f);
    attn_npy_free(&a);
    cr_assert_null(a.data);
}

Test(npy, reads_versions_2_and_3) {
    const char *files[] = {IO_FIXTURES "f32_2x3_v2.npy", IO_FIXTURES "f32_2x3_v3.npy"};
    for (int f = 0; f < 2; f++) {
        attn_npy a = load_ok(files[f], ATTN_NPY_ACCEPT_F32);
        cr_assert(a.ndim == 2 && a.shape[0] == 2 && a.shape[1] == 3);
        for (int i = 0; i < 6; i++)
            cr_assert_eq(((float *)a.data)[i], (float)i - 2.5f);
        attn_npy_free(&a);
    }
}

Test(npy, reads_3d_1d_scalar_empty_and_8d) {
    attn_npy a = load_ok(IO_FIXTURES "f32_2x3x4.npy", ATTN_NPY_ACCEPT_F32);
    cr_assert(a.ndim == 3 && a.shape[0] == 2 && a.shape[1] == 3 && a.shape[2] == 4);
    cr_assert_eq(((float *)a.data)[23], 23 * 0.25f);
    attn_npy_free(&a);

    a = load_ok(IO_FIXTURES "f32_vec5.npy", ATTN_NPY_ACCEPT_F32);
    cr_assert(a.ndim == 1 && a.shape[0] == 5);
    cr_assert_eq(((float *)a.data)[3], 3.25f);
    cr_assert_eq(((float *)a.data)[4], 1e-3f);
    attn_npy_free(&a);

    a = load_ok(IO_FIXTURES "f32_scalar.npy", ATTN_NPY_ACCEPT_F32);
    cr_assert(a.ndim == 0 && a.numel == 1);
    cr_assert_eq(((float *)a.data)[0], 7.5f);
    attn_npy_free(&a);

    a = load_ok(IO_FIXTURES "f32_empty_0x3.npy", ATTN_NPY_ACCEPT_F32);
    cr_assert(a.ndim == 2 && a.shape[0] == 0 && a.shape[1] == 3 && a.numel == 0);
    attn_npy_free(&a);

    a = load_ok(IO_FIXTURES "f32_8d.npy", ATTN_NPY_ACCEPT_F32);
    cr_assert(a.ndim == 8 && a.numel == 256);
    cr_assert_eq(((float *)a.data)[255], 255.0f);
    attn_npy_free(&a);
}

static const int64_t IDS[10] = {0, 1, 2, 63, 64, 5, 4, 3, 2, 1};

Test(npy, reads_int32_and_int64_ids_and_converts) {
    attn_error err;
    attn_npy a;
    cr_assert_eq(attn_npy_load_ids(IO_FIXTURES "i32_ids_2x5.npy", &a, &err), ATTN_OK, "%s",
                 err.msg);
    cr_assert_eq(a.dtype, ATTN_NPY_I32);
    cr_assert(a.ndim == 2 && a.shape[0] == 2 && a.shape[1] == 5);
    for (int i = 0; i < 10; i++)
        cr_assert_eq(((int32_t *)a.data)[i], IDS[i]);
    cr_assert_eq(attn_npy_convert_ids(&a, ATTN_NPY_I64, "i32", &err), ATTN_OK, "%s", err.msg);
    cr_assert_eq(a.dtype, ATTN_NPY_I64);
    for (int i = 0; i < 10; i++)
        cr_assert_eq(((int64_t *)a.data)[i], IDS[i]);
    attn_npy_free(&a);

    cr_assert_eq(attn_npy_load_ids(IO_FIXTURES "i64_ids_2x5.npy", &a, &err), ATTN_OK, "%s",
                 err.msg);
    cr_assert_eq(a.dtype, ATTN_NPY_I64);
    for (int i = 0; i < 10; i++)
        cr_assert_eq(((int64_t *)a.data)[i], IDS[i]);
    cr_assert_eq(attn_npy_convert_ids(&a, ATTN_NPY_I64, "i64", &err), ATTN_OK); /* no-op */
    cr_assert_eq(attn_npy_convert_ids(&a, ATTN_NPY_I32, "i64", &err), ATTN_OK, "%s", err.msg);
    cr_assert_eq(a.dtype, ATTN_NPY_I32);
    for (int i = 0; i < 10; i++)
        cr_assert_eq(((int32_t *)a.data)[i], IDS[i]);
    attn_npy_free(&a);
}

Test(npy, int64_to_int32_out_of_range_is_an_error) {
    attn_npy a = load_ok(IO_FIXTURES "i64_big.npy", ATTN_NPY_ACCEPT_IDS); /* [1, 2**40] */
    attn_error err;
    cr_assert_eq(attn_npy_convert_ids(&a, ATTN_NPY_I32, "big.npy", &err), ATTN_ERR_INVALID_ARG);
    cr_assert_str_eq(err.msg, "big.npy: value 1099511627776 at flat index 1 does not fit in int32");
    cr_assert_eq(a.dtype, ATTN_NPY_I64); /* unchanged */
    cr_assert_eq(((int64_t *)a.data)[1], (int64_t)1 << 40);
    attn_npy_free(&a);
}

Test(npy, float_array_is_not_token_ids) {
    attn_error err;
    attn_npy a;
    cr_assert_eq(attn_npy_load_ids(IO_FIXTURES "f32_2x3.npy", &a, &err), ATTN_ERR_FORMAT);
    cr_assert(strstr(err.msg, "unsupported dtype '<f4' (float32); expected '<i4' (int32) or "
                              "'<i8' (int64)"),
              "%s", err.msg);
    a = load_ok(IO_FIXTURES "f32_2x3.npy", ATTN_NPY_ACCEPT_ANY);
    cr_assert_eq(attn_npy_convert_ids(&a, ATTN_NPY_I64, "x.npy", &err), ATTN_ERR_FORMAT);
    attn_npy_free(&a);
}

Test(npy, unsupported_dtypes_name_what_was_found) {
    struct {
        const char *file, *found;
    } cases[] = {
        {IO_FIXTURES "f64_2x3.npy", "'<f8' (float64)"},
        {IO_FIXTURES "f32_bigendian_2x3.npy", "'>f4' (big-endian float32)"},
        {IO_FIXTURES "u8_4.npy", "'|u1' (uint8)"},
        {IO_FIXTURES "i64_ids_2x5.npy", "'<i8' (int64)"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        attn_npy a;
        attn_error err;
        cr_assert_eq(attn_npy_load_f32(cases[i].file, &a, &err), ATTN_ERR_FORMAT);
        char want[200];
        snprintf(want, sizeof want, "%s: unsupported dtype %s; expected '<f4' (float32)",
                 cases[i].file, cases[i].found);
        cr_assert_str_eq(err.msg, want);
    }
}

Test(npy, fortran_order_rejected) {
    attn_npy a;
    attn_error err;
    cr_assert_eq(attn_npy_load_f32(IO_FIXTURES "f32_fortran_2x3.npy", &a, &err), ATTN_ERR_FORMAT);
    cr_assert(strstr(err.msg, "Fortran-order"), "%s", err.msg);
    unsigned char buf[256];
    size_t n = make_npy(buf, "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }", 24);
    cr_assert(strstr(parse_fail(buf, n, ATTN_NPY_ACCEPT_F32, ATTN_ERR_FORMAT), "Fortran-order"));
}

Test(npy, bad_magic) {
    const char *txt = "this is a text file, not numpy\n";
    cr_assert_str_eq(parse_fail(txt, strlen(txt), ATTN_NPY_ACCEPT_ANY, ATTN_ERR_FORMAT),
                     "bad.npy: not a .npy file (bad magic)");
    cr_assert_str_eq(parse_fail("", 0, ATTN_NPY_ACCEPT_ANY, ATTN_ERR_FORMAT),
                     "bad.npy: not a .npy file (bad magic)");
    /* And through the file API, with the path in the message. */
    const char *p = tio_path(dir, "text.npy");
    tio_write(p, txt, strlen(txt));
    attn_npy a;
    attn_error err;
    cr_assert_eq(attn_npy_load_f32(p, &a, &err), ATTN_ERR_FORMAT);
    cr_assert(strstr(err.msg, p) && strstr(err.msg, "not a .npy file"), "%s", err.msg);
}

Test(npy, unsupported_version) {
    unsigned char buf[256];
    size_t n = make_npy(buf, "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", 8);
    buf[6] = 4;
    cr_assert(strstr(parse_fail(buf, n, ATTN_NPY_ACCEPT_F32, ATTN_ERR_FORMAT),
                     "unsupported .npy version 4.0"));
    /* Issue 17: from a file, the version is checked before the header
     * length is read (9.0 used to be "header length ... is implausible"). */
    buf[6] = 9;
    const char *p = tio_path(dir, "v9.npy");
    tio_write(p, buf, n);
    attn_npy a;
    attn_error err;
    cr_assert_eq(attn_npy_load_f32(p, &a, &err), ATTN_ERR_FORMAT);
    cr_assert(strstr(err.msg, p) && strstr(err.msg, "unsupported .npy version 9.0"), "%s", err.msg);
}

Test(npy, truncated_header_and_data) {
    size_t len;
    unsigned char *img = tio_slurp(IO_FIXTURES "f32_2x3.npy", &len);
    cr_assert_eq(len, 128 + 24);
    /* Cut inside the magic/length, inside the header dict, inside the data. */
    cr_assert(
        strstr(parse_fail(img, 9, ATTN_NPY_ACCEPT_F32, ATTN_ERR_FORMAT), "truncated .npy header"));
    cr_assert(strstr(parse_fail(img, 60, ATTN_NPY_ACCEPT_F32, ATTN_ERR_FORMAT),
                     "truncated .npy header (header says 118 bytes, file has 50)"));
    cr_assert_str_eq(parse_fail(img, len - 1, ATTN_NPY_ACCEPT_F32, ATTN_ERR_FORMAT),
                     "bad.npy: truncated .npy data (expected 24 bytes for the shape, found 23)");
    cr_assert(
        strstr(parse_fail(img, 128, ATTN_NPY_ACCEPT_F32, ATTN_ERR_FORMAT), "truncated .npy data"));
    /* Same through a file on disk. */
    const char *p = tio_path(dir, "cut.npy");
    tio_write(p, img, len - 5);
    attn_npy a;
    attn_error err;
    cr_assert_eq(attn_npy_load_f32(p, &a, &err), ATTN_ERR_FORMAT);
    cr_assert(strstr(err.msg, "truncated"), "%s", err.msg);
    free(img);
}

Test(npy, trailing_bytes_rejected) {
    size_t len;
    unsigned char *img = tio_slurp(IO_FIXTURES "f32_2x3.npy", &len);
    img = realloc(img, len + 4);
    memset(img + len, 0, 4);
    cr_assert(strstr(parse_fail(img, len + 4, ATTN_NPY_ACCEPT_F32, ATTN_ERR_FORMAT),
                     "4 unexpected bytes after the .npy data"));
    free(img);
}

Test(npy, malformed_header_dicts) {
    const char *bad[] = {
        "'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", /* no { */
        "{'descr': '<f4', 'fortran_order': False, }",                 /* no shape */
        "{'fortran_order': False, 'shape': (2, 3), }",                /* no descr */
        "{'descr': '<f4', 'shape': (2, 3), }",                        /* no fortran_order */
        "{'descr': '<f4', 'fortran_order': False, 'shape': [2, 3], }",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (2, -3), }",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (2 3), }",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (6), }", /* not a tuple */
        "{'descr': '<f4', 'fortran_order': Maybe, 'shape': (2, 3), }",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), 'extra': 1, }",
        "{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }",
        "{'descr': <f4, 'fortran_order': False, 'shape': (2, 3), }",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), } junk",
        "{'descr': '<f4' 'fortran_order': False, 'shape': (2, 3), }",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999, 3), }",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), ",
    };
    unsigned char buf[512];
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        size_t n = make_npy(buf, bad[i], 24);
        const char *msg = parse_fail(buf, n, ATTN_NPY_ACCEPT_F32, ATTN_ERR_FORMAT);
        cr_assert(strstr(msg, "malformed .npy header"), "case %zu: %s", i, msg);
    }
    /* A structured dtype is a dtype problem, not a syntax one. */
    size_t n = make_npy(
        buf, "{'descr': [('a', '<f4'), ('b', '<i4')], 'fortran_order': False, 'shape': (3,), }",
        24);
    cr_assert(strstr(parse_fail(buf, n, ATTN_NPY_ACCEPT_F32, ATTN_ERR_FORMAT),
                     "unsupported dtype (structured"));
}

Test(npy, accepts_header_variants_numpy_reads) {
    /* Double quotes, no trailing comma, Python 2 long suffix, no padding. */
    const char *ok[] = {
        "{\"descr\": \"<f4\", \"fortran_order\": False, \"shape\": (2, 3)}",
        "{'shape': (2L, 3L), 'fortran_order': False, 'descr': '<f4'}",
        "{'descr':'<f4','fortran_order':False,'shape':(2,3,),}",
    };
    unsigned char buf[512];
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        size_t n = make_npy(buf, ok[i], 24);
        attn_npy a;
        attn_error err;
        cr_assert_eq(attn_npy_parse(buf, n, "ok.npy", ATTN_NPY_ACCEPT_F32, &a, &err), ATTN_OK,
                     "case %zu: %s", i, err.msg);
        cr_assert(a.ndim == 2 && a.shape[0] == 2 && a.shape[1] == 3);
        attn_npy_free(&a);
    }
}

Test(npy, more_than_8_dims_rejected) {
    unsigned char buf[512];
    size_t n = make_npy(
        buf, "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 1, 1, 1, 1, 1, 1, 1, 2), }", 8);
    cr_assert(
        strstr(parse_fail(buf, n, ATTN_NPY_ACCEPT_F32, ATTN_ERR_FORMAT), "more than 8 dimensions"));
}

Test(npy, expect_shape_messages) {
    attn_npy a = load_ok(IO_FIXTURES "f32_2x3.npy", ATTN_NPY_ACCEPT_F32);
    attn_error err;
    int64_t any3[3] = {-1, -1, 4};
    cr_assert_eq(attn_npy_expect_shape(&a, "input.npy", 3, any3, "(B, T, d_in)", &err),
                 ATTN_ERR_SHAPE);
    cr_assert_str_eq(err.msg, "input.npy: expected rank 3 (B, T, d_in), got rank 2");
    int64_t want[2] = {-1, 4};
    cr_assert_eq(attn_npy_expect_shape(&a, "input.npy", 2, want, "(T, d_in)", &err),
                 ATTN_ERR_SHAPE);
    cr_assert_str_eq(err.msg, "input.npy: expected shape (T, d_in) = (*, 4), got (2, 3)");
    cr_assert_eq(attn_npy_expect_shape(&a, "x.npy", 1, NULL, NULL, &err), ATTN_ERR_SHAPE);
    cr_assert_str_eq(err.msg, "x.npy: expected rank 1, got rank 2");
    int64_t fit[2] = {2, 3};
    cr_assert_eq(attn_npy_expect_shape(&a, "input.npy", 2, fit, "(T, d_in)", &err), ATTN_OK);
    cr_assert_eq(attn_npy_expect_shape(&a, "input.npy", 2, NULL, "(T, d_in)", &err), ATTN_OK);
    attn_npy_free(&a);
}

Test(npy, writer_matches_numpy_save_byte_for_byte) {
    /* Same arrays as the fixtures; numpy.save output is the reference. */
    float a23[6], a234[24], v5[5] = {1.5f, -2.0f, 0.0f, 3.25f, 1e-3f}, s = 7.5f;
    for (int i = 0; i < 6; i++)
        a23[i] = (float)i - 2.5f;
    for (int i = 0; i < 24; i++)
        a234[i] = (float)i * 0.25f;
    int64_t sh23[2] = {2, 3}, sh234[3] = {2, 3, 4}, sh5[1] = {5}, sh03[2] = {0, 3},
            sh25[2] = {2, 5};
    attn_error err;
    struct {
        const char *name;
        attn_npy_dtype t;
        const void *data;
        int ndim;
        const int64_t *shape;
    } cases[] = {
        {"f32_2x3.npy", ATTN_NPY_F32, a23, 2, sh23},
        {"f32_2x3x4.npy", ATTN_NPY_F32, a234, 3, sh234},
        {"f32_vec5.npy", ATTN_NPY_F32, v5, 1, sh5},
        {"f32_scalar.npy", ATTN_NPY_F32, &s, 0, NULL},
        {"f32_empty_0x3.npy", ATTN_NPY_F32, NULL, 2, sh03},
        {"i64_ids_2x5.npy", ATTN_NPY_I64, IDS, 2, sh25},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *p = tio_path(dir, cases[i].name);
        cr_assert_eq(
            attn_npy_save(p, cases[i].t, cases[i].data, cases[i].ndim, cases[i].shape, &err),
            ATTN_OK, "%s", err.msg);
        char ref[4096];
        snprintf(ref, sizeof ref, IO_FIXTURES "%s", cases[i].name);
        size_t n1, n2;
        unsigned char *b1 = tio_slurp(p, &n1), *b2 = tio_slurp(ref, &n2);
        cr_assert(b1 && b2);
        cr_assert_eq(n1, n2, "%s: %zu vs %zu bytes", cases[i].name, n1, n2);
        cr_assert(memcmp(b1, b2, n1) == 0, "%s differs from numpy.save", cases[i].name);
        free(b1);
        free(b2);
    }
    cr_assert_eq(tio_count_entries(dir), 6);
}

Test(npy, round_trip_8d_and_wrappers) {
    float d[256];
    for (int i = 0; i < 256; i++)
        d[i] = (float)i * -0.5f;
    int64_t sh[8] = {2, 2, 2, 2, 2, 2, 2, 2};
    attn_error err;
    const char *p = tio_path(dir, "r.npy");
    cr_assert_eq(attn_npy_save_f32(p, d, 8, sh, &err), ATTN_OK, "%s", err.msg);
    attn_npy a;
    cr_assert_eq(attn_npy_load_f32(p, &a, &err), ATTN_OK, "%s", err.msg);
    cr_assert(a.ndim == 8 && a.numel == 256);
    cr_assert(memcmp(a.data, d, sizeof d) == 0);
    attn_npy_free(&a);
    int64_t ids[3] = {-1, 0, INT64_MAX};
    int64_t sh3[1] = {3};
    cr_assert_eq(attn_npy_save_i64(p, ids, 1, sh3, &err), ATTN_OK, "%s", err.msg);
    cr_assert_eq(attn_npy_load_ids(p, &a, &err), ATTN_OK, "%s", err.msg);
    cr_assert(a.dtype == ATTN_NPY_I64 && memcmp(a.data, ids, sizeof ids) == 0);
    attn_npy_free(&a);
    int32_t i32[2] = {-7, 7};
    int64_t sh2[1] = {2};
    cr_assert_eq(attn_npy_save(p, ATTN_NPY_I32, i32, 1, sh2, &err), ATTN_OK, "%s", err.msg);
    cr_assert_eq(attn_npy_load_ids(p, &a, &err), ATTN_OK, "%s", err.msg);
    cr_assert(a.dtype == ATTN_NPY_I32 && memcmp(a.data, i32, sizeof i32) == 0);
    attn_npy_free(&a);
    cr_assert_eq(tio_count_entries(dir), 1);
}

Test(npy, save_rejects_bad_arguments_and_paths) {
    float d[2] = {0};
    int64_t neg[1] = {-2};
    attn_error err;
    const char *p = tio_path(dir, "x.npy");
    cr_assert_eq(attn_npy_save_f32(p, d, 1, neg, &err), ATTN_ERR_INVALID_ARG);
    int64_t sh[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
    cr_assert_eq(attn_npy_save_f32(p, d, 9, sh, &err), ATTN_ERR_INVALID_ARG);
    cr_assert_eq(tio_count_entries(dir), 0);
    const char *q = tio_path(dir, "missing/dir/y.npy");
    int64_t two[1] = {2};
    cr_assert_eq(attn_npy_save_f32(q, d, 1, two, &err), ATTN_ERR_IO);
    cr_assert(strstr(err.msg, q), "%s", err.msg);
    cr_assert_eq(tio_count_entries(dir), 0);
}

Test(npy, missing_file_is_io_error) {
    attn_npy a;
    attn_error err;
    const char *p = tio_path(dir, "absent.npy");
    cr_assert_eq(attn_npy_load_f32(p, &a, &err), ATTN_ERR_IO);
    cr_assert(strstr(err.msg, p) && strstr(err.msg, "No such file"), "%s", err.msg);
}

/* Files written here load in numpy with the same dtype, shape and values,
 * and files numpy writes now load here. */
Test(npy, live_numpy_round_trip) {
    if (!tio_have_numpy()) cr_skip_test("/usr/bin/python3 with numpy not available");
    float f[24];
    for (int i = 0; i < 24; i++)
        f[i] = (float)i / 3.0f - 4.0f;
    int64_t sh[3] = {2, 3, 4}, sh2[2] = {2, 5};
    attn_error err;
    cr_assert_eq(attn_npy_save_f32(tio_path(dir, "c_f32.npy"), f, 3, sh, &err), ATTN_OK);
    cr_assert_eq(attn_npy_save_i64(tio_path(dir, "c_i64.npy"), IDS, 2, sh2, &err), ATTN_OK);
    char cmd[8192];
    snprintf(cmd, sizeof cmd,
             "cd '%s' && /usr/bin/python3 -c \""
             "import numpy as np\n"
             "a = np.load('c_f32.npy')\n"
             "assert a.dtype == np.float32 and a.shape == (2, 3, 4), (a.dtype, a.shape)\n"
             "ref = (np.arange(24, dtype=np.float32) / np.float32(3) - np.float32(4))\n"
             "assert (a.ravel() == ref).all(), (a, ref)\n"
             "b = np.load('c_i64.npy')\n"
             "assert b.dtype == np.int64 and b.shape == (2, 5)\n"
             "assert b.tolist() == [[0, 1, 2, 63, 64], [5, 4, 3, 2, 1]]\n"
             "np.save('py.npy', (np.arange(12, dtype=np.float32) * 1.5).reshape(3, 4))\n"
             "\"",
             dir);
    cr_assert_eq(system(cmd), 0, "numpy rejected attn's files");
    attn_npy a;
    cr_assert_eq(attn_npy_load_f32(tio_path(dir, "py.npy"), &a, &err), ATTN_OK, "%s", err.msg);
    cr_assert(a.ndim == 2 && a.shape[0] == 3 && a.shape[1] == 4);
    for (int i = 0; i < 12; i++)
        cr_assert_eq(((float *)a.data)[i], (float)i * 1.5f);
    attn_npy_free(&a);
}

/* Every truncation and many single-byte corruptions of a valid file either
 * parse or fail with a message; none may crash (checked under ASan too). */
Test(npy, corrupted_files_never_crash) {
    size_t n;
    unsigned char *img = tio_slurp(IO_FIXTURES "f32_2x3x4.npy", &n);
    unsigned char *buf = malloc(n);
    const unsigned char vals[] = {0, 0xff, '\'', ')', '(', '9', ',', ' ', 0x80};
    for (size_t len = 0; len <= n; len++) {
        attn_npy a;
        attn_error err;
        attn_status s = attn_npy_parse(img, len, "t", ATTN_NPY_ACCEPT_ANY, &a, &err);
        cr_assert(len == n ? s == ATTN_OK : s == ATTN_ERR_FORMAT, "len %zu: %s", len, err.msg);
        attn_npy_free(&a);
    }
    for (size_t i = 0; i < n; i++)
        for (size_t v = 0; v < sizeof vals; v++) {
            memcpy(buf, img, n);
            buf[i] = vals[v];
            attn_npy a;
            attn_error err;
            attn_status s = attn_npy_parse(buf, n, "t", ATTN_NPY_ACCEPT_ANY, &a, &err);
            cr_assert(s == ATTN_OK || s == ATTN_ERR_FORMAT, "byte %zu: status %d", i, s);
            if (s != ATTN_OK) cr_assert(strncmp(err.msg, "t: ", 3) == 0, "%s", err.msg);
            attn_npy_free(&a);
        }
    free(buf);
    free(img);
}

/* Float inputs in other dtypes (issue 9): the fixtures are numpy's
 * astype(np.float64 / np.int32 / np.int64) of known values
 * (scripts/gen_io_fixtures.py), so the float32 result is exact. */
Test(npy, float64_and_integers_convert_to_float32) {
    attn_npy a;
    attn_error err;
    attn_npy_dtype from = 0;
    cr_assert_eq(attn_npy_load_as_f32(IO_FIXTURES "f64_2x3.npy", &a, &from, &err), ATTN_OK, "%s",
                 err.msg);
    cr_assert_eq(from, ATTN_NPY_F64);
    cr_assert_eq(a.dtype, ATTN_NPY_F32);
    cr_assert_eq(a.ndim, 2);
    cr_assert_eq(a.shape[0], 2);
    cr_assert_eq(a.shape[1], 3);
    for (int i = 0; i < 6; i++) /* np.arange(6) - 2.5 */
        cr_assert_eq(((float *)a.data)[i], (float)i - 2.5f);
    attn_npy_free(&a);

    const int64_t ids[10] = {0, 1, 2, 63, 64, 5, 4, 3, 2, 1};
    const char *files[2] = {IO_FIXTURES "i32_ids_2x5.npy", IO_FIXTURES "i64_ids_2x5.npy"};
    for (int f = 0; f < 2; f++) {
        cr_assert_eq(attn_npy_load_as_f32(files[f], &a, &from, &err), ATTN_OK, "%s", err.msg);
        cr_assert_eq(from, f ? ATTN_NPY_I64 : ATTN_NPY_I32);
        cr_assert_eq(a.dtype, ATTN_NPY_F32);
        cr_assert_eq(a.numel, 10);
        for (int i = 0; i < 10; i++)
            cr_assert_eq(((float *)a.data)[i], (float)ids[i]);
        attn_npy_free(&a);
    }
    cr_assert_eq(attn_npy_load_as_f32(IO_FIXTURES "i64_big.npy", &a, NULL, &err), ATTN_OK);
    cr_assert_eq(((float *)a.data)[1], 1099511627776.0f); /* 2^40: exact in float32 */
    attn_npy_free(&a);
    /* float32 stays as stored; the strict loader still refuses float64. */
    cr_assert_eq(attn_npy_load_as_f32(IO_FIXTURES "f32_2x3.npy", &a, &from, &err), ATTN_OK);
    cr_assert_eq(from, ATTN_NPY_F32);
    attn_npy_free(&a);
    cr_assert_eq(attn_npy_load_f32(IO_FIXTURES "f64_2x3.npy", &a, &err), ATTN_ERR_FORMAT);
}

Test(npy, float64_out_of_float32_range_is_refused) {
    const double v[4] = {1.0, -2.5, 1e300, NAN};
    attn_npy a = {.dtype = ATTN_NPY_F64, .ndim = 1, .shape = {4}, .numel = 4};
    a.data = malloc(sizeof v);
    memcpy(a.data, v, sizeof v);
    attn_error err;
    cr_assert_eq(attn_npy_to_f32(&a, "big.npy", &err), ATTN_ERR_INVALID_ARG);
    cr_assert_str_eq(err.msg, "big.npy: value 1e+300 at flat index 2 is outside float32's range");
    cr_assert_eq(a.dtype, ATTN_NPY_F64, "a failed conversion leaves the array as it was");
    ((double *)a.data)[2] = 3.0;
    cr_assert_eq(attn_npy_to_f32(&a, "ok.npy", &err), ATTN_OK);
    const float *f = a.data;
    cr_assert(f[0] == 1.0f && f[1] == -2.5f && f[2] == 3.0f && isnan(f[3]));
    attn_npy_free(&a);
    /* Refused dtypes name what is accepted. */
    cr_assert_eq(attn_npy_load_as_f32(IO_FIXTURES "u8_4.npy", &a, NULL, &err), ATTN_ERR_FORMAT);
    cr_assert(strstr(err.msg, "'<f8' (float64)") != NULL, "%s", err.msg);
}
