/* safetensors reader/writer (attn/safetensors.h).
 *
 * tests/fixtures/io/params*.safetensors were written by
 * scripts/gen_io_fixtures.py (json + struct + numpy, following the format's
 * spec; the safetensors package is not needed) with PyTorch state_dict names;
 * their values are restated here. Bad files are built inside each test. The
 * live_python test has /usr/bin/python3 check a file attn wrote (skipped
 * without numpy). */
#include "io_util.h"

#include <criterion/criterion.h>
#include <stdint.h>

#include "attn/safetensors.h"

static const char *dir;

static void setup(void) {
    dir = tio_mkdtemp();
}
static void teardown(void) {
    tio_rmtree(dir);
}

TestSuite(safetensors, .init = setup, .fini = teardown);

/* The fixture's parameters: W_query.weight (2, 3), W_query.bias (2,),
 * out_proj.weight (2, 2). */
typedef struct {
    float wq[6], bq[2], wo[4];
    attn_param_list list;
} params3;

static void params3_init(params3 *p, float fill) {
    for (int i = 0; i < 6; i++)
        p->wq[i] = fill;
    for (int i = 0; i < 2; i++)
        p->bq[i] = fill;
    for (int i = 0; i < 4; i++)
        p->wo[i] = fill;
    attn_param_list_init(&p->list);
    int64_t s23[2] = {2, 3}, s2[1] = {2}, s22[2] = {2, 2};
    attn_error err;
    cr_assert_eq(attn_param_list_add(&p->list, "W_query.", "weight", p->wq, NULL, 2, s23, &err),
                 ATTN_OK);
    cr_assert_eq(attn_param_list_add(&p->list, "W_query.", "bias", p->bq, NULL, 1, s2, &err),
                 ATTN_OK);
    cr_assert_eq(attn_param_list_add(&p->list, "", "out_proj.weight", p->wo, NULL, 2, s22, &err),
                 ATTN_OK);
}

static void params3_expect_fixture_values(const params3 *p) {
    for (int i = 0; i < 6; i++)
        cr_assert_eq(p->wq[i], (float)i / 8); /* arange(6) / 8 */
    cr_assert_eq(p->bq[0], 0.5f);
    cr_assert_eq(p->bq[1], -0.5f);
    for (int i = 0; i < 4; i++)
        cr_assert_eq(p->wo[i], (float)i - 1.75f); /* arange(4) - 1.75 */
}

static void params3_expect_all(const params3 *p, float v) {
    for (int i = 0; i < 6; i++)
        cr_assert_eq(p->wq[i], v);
    for (int i = 0; i < 2; i++)
        cr_assert_eq(p->bq[i], v);
    for (int i = 0; i < 4; i++)
        cr_assert_eq(p->wo[i], v);
}

/* u64 length + header text + ndata bytes (value = index), malloc'd. */
static unsigned char *make_st(const char *json, size_t ndata, size_t *len) {
    size_t n = strlen(json);
    unsigned char *b = malloc(8 + n + ndata + 1);
    for (int i = 0; i < 8; i++)
        b[i] = (unsigned char)((uint64_t)n >> (8 * i));
    memcpy(b + 8, json, n);
    for (size_t i = 0; i < ndata; i++)
        b[8 + n + i] = (unsigned char)i;
    *len = 8 + n + ndata;
    return b;
}

static const char *parse_fail(const unsigned char *img, size_t len, attn_status want) {
    static attn_error err;
    attn_safetensors st;
    attn_status s = attn_safetensors_parse(img, len, "bad.safetensors", &st, &err);
    cr_assert_eq(s, want, "status %d: %s", s, err.msg);
    cr_assert(st.count == 0 && st.tensors == NULL);
    cr_assert(strncmp(err.msg, "bad.safetensors: ", 17) == 0, "%s", err.msg);
    return err.msg;
}

static const char *json_fail(const char *json, size_t ndata) {
    size_t len;
    unsigned char *img = make_st(json, ndata, &len);
    const char *msg = parse_fail(img, len, ATTN_ERR_FORMAT);
    free(img);
    return msg;
}

Test(safetensors, write_params_then_load_round_trip) {
    params3 a;
    params3_init(&a, 0);
    for (int i = 0; i < 6; i++)
        a.wq[i] = (float)i * 0.1f - 0.2f;
    a.bq[0] = 3.0f;
    a.bq[1] = -3.0f;
    for (int i = 0; i < 4; i++)
        a.wo[i] = 1.0f / (float)(i + 1);
    attn_st_kv meta[] = {{"format", "pt"}, {"config", "{\"d_in\": 3, \"name\": \"a\\\\b\"}"}};
    const char *p = tio_path(dir, "w.safetensors");
    attn_error err;
    cr_assert_eq(attn_safetensors_write_params(p, &a.list, meta, 2, &err), ATTN_OK, "%s", err.msg);
    cr_assert_eq(tio_count_entries(dir), 1);

    params3 b;
    params3_init(&b, 42);
    cr_assert_eq(attn_safetensors_load_params(p, &b.list, &err), ATTN_OK, "%s", err.msg);
    cr_assert(memcmp(a.wq, b.wq, sizeof a.wq) == 0);
    cr_assert(memcmp(a.bq, b.bq, sizeof a.bq) == 0);
    cr_assert(memcmp(a.wo, b.wo, sizeof a.wo) == 0);

    attn_safetensors st;
    cr_assert_eq(attn_safetensors_read(p, &st, &err), ATTN_OK, "%s", err.msg);
    cr_assert_eq(st.count, 3);
    cr_assert_eq(st.meta_count, 2);
    cr_assert_str_eq(attn_safetensors_meta(&st, "format"), "pt");
    cr_assert_str_eq(attn_safetensors_meta(&st, "config"), "{\"d_in\": 3, \"name\": \"a\\\\b\"}");
    cr_assert_null(attn_safetensors_meta(&st, "absent"));
    const attn_st_tensor *t = attn_safetensors_find(&st, "W_query.weight");
    cr_assert_not_null(t);
    cr_assert_str_eq(t->dtype, "F32");
    cr_assert(t->ndim == 2 && t->shape[0] == 2 && t->shape[1] == 3 && t->numel == 6);
    cr_assert_eq(t->end - t->begin, 24);
    cr_assert(memcmp(t->data, a.wq, 24) == 0);
    cr_assert_null(attn_safetensors_find(&st, "W_key.weight"));
    attn_safetensors_free(&st);
    attn_safetensors_free(&st); /* safe twice */

    /* Header: 8-byte aligned, starts with '{', padded with spaces. */
    size_t n;
    unsigned char *img = tio_slurp(p, &n);
    uint64_t hl = 0;
    for (int i = 7; i >= 0; i--)
        hl = hl << 8 | img[i];
    cr_assert_eq(hl % 8, 0);
    cr_assert_eq(img[8], '{');
    cr_assert_eq(n, 8 + hl + 48);
    size_t k = 8 + hl - 1;
    while (img[k] == ' ')
        k--;
    cr_assert_eq(img[k], '}');
    free(img);
    attn_param_list_free(&a.list);
    attn_param_list_free(&b.list);
}

Test(safetensors, loads_python_written_fixtures) {
    const char *files[] = {IO_FIXTURES "params.safetensors",
                           IO_FIXTURES "params_unpadded.safetensors"};
    for (int f = 0; f < 2; f++) {
        params3 p;
        params3_init(&p, 42);
        attn_error err;
        cr_assert_eq(attn_safetensors_load_params(files[f], &p.list, &err), ATTN_OK, "%s", err.msg);
        params3_expect_fixture_values(&p);
        attn_param_list_free(&p.list);
    }
    attn_safetensors st;
    attn_error err;
    cr_assert_eq(attn_safetensors_read(IO_FIXTURES "params.safetensors", &st, &err), ATTN_OK);
    cr_assert_str_eq(attn_safetensors_meta(&st, "format"), "pt");
    cr_assert_str_eq(attn_safetensors_meta(&st, "note"), "gen_io_fixtures");
    /* Header order is kept. */
    cr_assert_str_eq(st.tensors[0].name, "W_query.weight");
    cr_assert_str_eq(st.tensors[2].name, "out_proj.weight");
    attn_safetensors_free(&st);
    /* The unpadded file's data starts at an odd offset; the index realigns it. */
    cr_assert_eq(attn_safetensors_read(IO_FIXTURES "params_unpadded.safetensors", &st, &err),
                 ATTN_OK);
    for (int i = 0; i < st.count; i++)
        cr_assert_eq((uintptr_t)st.tensors[i].data % 4, 0);
    attn_safetensors_free(&st);
}

Test(safetensors, generic_write_mixed_dtypes_aligned) {
    float f[3] = {1, 2, 3};
    int64_t i64[2] = {-5, INT64_MAX};
    unsigned char u8[5] = {1, 2, 3, 4, 255};
    double f64 = 0.125;
    int32_t i32 = -9;
    int64_t s3[1] = {3}, s2[1] = {2}, s5[1] = {5}, s11[2] = {1, 1}, s04[2] = {0, 4};
    attn_st_entry e[] = {
        {"u8", "U8", 1, s5, u8, 5},          {"f32", "F32", 1, s3, f, 12},
        {"i64", "I64", 1, s2, i64, 16},      {"f64", "F64", 2, s11, &f64, 8},
        {"scalar", "I32", 0, NULL, &i32, 4}, {"empty", "F32", 2, s04, NULL, 0},
    };
    const char *p = tio_path(dir, "mixed.safetensors");
    attn_error err;
    cr_assert_eq(attn_safetensors_write(p, e, 6, NULL, 0, &err), ATTN_OK, "%s", err.msg);
    attn_safetensors st;
    cr_assert_eq(attn_safetensors_read(p, &st, &err), ATTN_OK, "%s", err.msg);
    cr_assert_eq(st.count, 6);
    cr_assert_eq(st.meta_count, 0);
    /* Largest element size first, then by name: f64, i64, empty, f32, scalar, u8. */
    const char *order[] = {"f64", "i64", "empty", "f32", "scalar", "u8"};
    for (int i = 0; i < 6; i++) {
        cr_assert_str_eq(st.tensors[i].name, order[i]);
        cr_assert_eq((uintptr_t)st.tensors[i].data % st.tensors[i].elem_size, 0);
    }
    const attn_st_tensor *t = attn_safetensors_find(&st, "i64");
    cr_assert(memcmp(t->data, i64, 16) == 0 && t->elem_size == 8);
    t = attn_safetensors_find(&st, "u8");
    cr_assert(memcmp(t->data, u8, 5) == 0 && t->numel == 5);
    t = attn_safetensors_find(&st, "scalar");
    cr_assert(t->ndim == 0 && t->numel == 1 && *(const int32_t *)t->data == -9);
    t = attn_safetensors_find(&st, "empty");
    cr_assert(t->numel == 0 && t->begin == t->end && t->shape[0] == 0 && t->shape[1] == 4);
    t = attn_safetensors_find(&st, "f64");
    cr_assert_eq(*(const double *)t->data, 0.125);
    attn_safetensors_free(&st);
}

Test(safetensors, empty_file_with_only_metadata) {
    attn_st_kv meta[] = {{"step", "0"}};
    const char *p = tio_path(dir, "meta.safetensors");
    attn_error err;
    cr_assert_eq(attn_safetensors_write(p, NULL, 0, meta, 1, &err), ATTN_OK, "%s", err.msg);
    attn_safetensors st;
    cr_assert_eq(attn_safetensors_read(p, &st, &err), ATTN_OK, "%s", err.msg);
    cr_assert_eq(st.count, 0);
    cr_assert_str_eq(attn_safetensors_meta(&st, "step"), "0");
    attn_safetensors_free(&st);
}

/* Write a file with the given (name, shape) F32 tensors, zero data. */
static const char *write_file(const char *name, int n, const char *const *names, const int *ndims,
                              int64_t (*shapes)[4]) {
    static float zeros[64];
    attn_st_entry e[8];
    for (int i = 0; i < n; i++) {
        size_t numel = 1;
        for (int d = 0; d < ndims[i]; d++)
            numel *= (size_t)shapes[i][d];
        e[i] = (attn_st_entry){names[i], "F32", ndims[i], shapes[i], zeros, numel * 4};
    }
    const char *p = tio_path(dir, name);
    attn_error err;
    cr_assert_eq(attn_safetensors_write(p, e, n, NULL, 0, &err), ATTN_OK, "%s", err.msg);
    return p;
}

Test(safetensors, load_params_missing_tensor_named) {
    const char *names[] = {"W_query.weight", "W_query.bias"};
    int nd[] = {2, 1};
    int64_t sh[][4] = {{2, 3}, {2}};
    const char *p = write_file("m.safetensors", 2, names, nd, sh);
    params3 x;
    params3_init(&x, 42);
    attn_error err;
    cr_assert_eq(attn_safetensors_load_params(p, &x.list, &err), ATTN_ERR_NOT_FOUND);
    char want[4200];
    snprintf(want, sizeof want,
             "%s: missing tensor 'out_proj.weight' (file has 2 tensors, expected 3)", p);
    cr_assert_str_eq(err.msg, want);
    params3_expect_all(&x, 42);
    attn_param_list_free(&x.list);
}

Test(safetensors, load_params_extra_tensors_named) {
    const char *names[] = {"W_query.weight", "W_query.bias", "out_proj.weight", "W_key.weight",
                           "out_proj.bias"};
    int nd[] = {2, 1, 2, 2, 1};
    int64_t sh[][4] = {{2, 3}, {2}, {2, 2}, {2, 3}, {2}};
    const char *p = write_file("x.safetensors", 5, names, nd, sh);
    params3 x;
    params3_init(&x, 42);
    attn_error err;
    cr_assert_eq(attn_safetensors_load_params(p, &x.list, &err), ATTN_ERR_FORMAT);
    /* Header order is the writer's (size, then name): W_key before out_proj.bias. */
    char want[4200];
    snprintf(want, sizeof want,
             "%s: unexpected tensors 'W_key.weight', 'out_proj.bias' (file has 5 tensors, "
             "expected 3)",
             p);
    cr_assert_str_eq(err.msg, want);
    params3_expect_all(&x, 42);
    attn_param_list_free(&x.list);
}

Test(safetensors, load_params_missing_and_extra_together) {
    const char *names[] = {"W_query.weight", "W_query.bias", "out_proj.wieght"};
    int nd[] = {2, 1, 2};
    int64_t sh[][4] = {{2, 3}, {2}, {2, 2}};
    const char *p = write_file("mx.safetensors", 3, names, nd, sh);
    params3 x;
    params3_init(&x, 42);
    attn_error err;
    cr_assert_eq(attn_safetensors_load_params(p, &x.list, &err), ATTN_ERR_NOT_FOUND);
    cr_assert(strstr(err.msg, "missing tensor 'out_proj.weight'; unexpected tensor "
                              "'out_proj.wieght'"),
              "%s", err.msg);
    params3_expect_all(&x, 42);
    attn_param_list_free(&x.list);
}

Test(safetensors, load_params_wrong_shape_shows_both) {
    const char *names[] = {"W_query.weight", "W_query.bias", "out_proj.weight"};
    int nd[] = {2, 1, 2};
    int64_t sh[][4] = {{3, 2}, {2}, {2, 2}}; /* transposed weight */
    const char *p = write_file("s.safetensors", 3, names, nd, sh);
    params3 x;
    params3_init(&x, 42);
    attn_error err;
    cr_assert_eq(attn_safetensors_load_params(p, &x.list, &err), ATTN_ERR_SHAPE);
    char want[4200];
    snprintf(want, sizeof want, "%s: tensor 'W_query.weight' has shape [3, 2], expected [2, 3]", p);
    cr_assert_str_eq(err.msg, want);
    params3_expect_all(&x, 42);

    int nd2[] = {2, 2, 2};
    int64_t sh2[][4] = {{2, 3}, {1, 2}, {2, 2}}; /* rank differs */
    p = write_file("s2.safetensors", 3, names, nd2, sh2);
    cr_assert_eq(attn_safetensors_load_params(p, &x.list, &err), ATTN_ERR_SHAPE);
    cr_assert(strstr(err.msg, "tensor 'W_query.bias' has shape [1, 2], expected [2]"), "%s",
              err.msg);
    params3_expect_all(&x, 42);
    attn_param_list_free(&x.list);
}

Test(safetensors, load_params_wrong_dtype) {
    params3 x;
    params3_init(&x, 42);
    attn_error err;
    cr_assert_eq(attn_safetensors_load_params(IO_FIXTURES "params_f64.safetensors", &x.list, &err),
                 ATTN_ERR_FORMAT);
    cr_assert(strstr(err.msg, "tensor 'W_query.weight' has dtype F64, expected F32"), "%s",
              err.msg);
    params3_expect_all(&x, 42);
    attn_param_list_free(&x.list);
}

Test(safetensors, truncated_file) {
    size_t n;
    unsigned char *img = tio_slurp(IO_FIXTURES "params.safetensors", &n);
    /* Cut the data, the header, the length prefix. */
    cr_assert(strstr(parse_fail(img, n - 4, ATTN_ERR_FORMAT),
                     "truncated safetensors file: tensor 'out_proj.weight' ends at data byte 48 "
                     "but the file holds 44 data bytes"));
    cr_assert(
        strstr(parse_fail(img, 100, ATTN_ERR_FORMAT), "truncated safetensors file (header needs"));
    cr_assert(strstr(parse_fail(img, 5, ATTN_ERR_FORMAT),
                     "not a safetensors file (it does not start with"));
    cr_assert(strstr(parse_fail(img, 0, ATTN_ERR_FORMAT),
                     "not a safetensors file (it does not start with"));
    /* And on disk, through load_params. */
    const char *p = tio_path(dir, "cut.safetensors");
    tio_write(p, img, n - 1);
    params3 x;
    params3_init(&x, 42);
    attn_error err;
    cr_assert_eq(attn_safetensors_load_params(p, &x.list, &err), ATTN_ERR_FORMAT);
    cr_assert(strstr(err.msg, p) && strstr(err.msg, "truncated"), "%s", err.msg);
    params3_expect_all(&x, 42);
    attn_param_list_free(&x.list);
    free(img);
}

Test(safetensors, not_safetensors_at_all) {
    /* Issue 17: "not a safetensors file", not a header length that is
     * "implausible" (a loss.csv given as a checkpoint). */
    const char *txt = "step,loss,lr,grad_norm,train_loss,val_loss\n1,4.1,0.001,1.2,,\n";
    const char *msg = parse_fail((const unsigned char *)txt, strlen(txt), ATTN_ERR_FORMAT);
    cr_assert(strstr(msg, "not a safetensors file") && !strstr(msg, "implausible"), "%s", msg);
    unsigned char npy[17] = "\x93NUMPY\x01\x00v\x00{'descr";
    cr_assert(strstr(parse_fail(npy, 16, ATTN_ERR_FORMAT),
                     "not a safetensors file (it does not start with"));
    cr_assert(strstr(json_fail("[1, 2]", 0), "not a safetensors file (it does not start with"));
}

Test(safetensors, invalid_json_header) {
    cr_assert(strstr(json_fail("{\"a\": {", 0), "invalid JSON in safetensors header"));
    cr_assert(strstr(json_fail("{\"a\": 1,}", 0), "invalid JSON"));
    cr_assert(strstr(json_fail("{} trailing", 0), "invalid JSON"));
    size_t len;
    unsigned char *img = make_st("{\"a\" x }", 0, &len);
    img[8 + 5] = '\0';
    cr_assert(strstr(parse_fail(img, len, ATTN_ERR_FORMAT), "NUL byte"));
    free(img);
}

Test(safetensors, bad_entries) {
    struct {
        const char *json, *msg;
        size_t ndata;
    } cases[] = {
        {"{\"a\": 5}", "tensor 'a' is not a JSON object", 0},
        {"{\"a\": {\"dtype\":\"F33\",\"shape\":[1],\"data_offsets\":[0,4]}}", "unknown dtype 'F33'",
         4},
        {"{\"a\": {\"dtype\":4,\"shape\":[1],\"data_offsets\":[0,4]}}", "unknown dtype (not a", 4},
        {"{\"a\": {\"dtype\":\"F32\",\"shape\":[1]}}", "lacks field 'data_offsets'", 4},
        {"{\"a\": {\"shape\":[1],\"data_offsets\":[0,4]}}", "lacks field 'dtype'", 4},
        {"{\"a\": {\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4],\"x\":1}}",
         "unknown field 'x'", 4},
        {"{\"a\": {\"dtype\":\"F32\",\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}",
         "repeats field 'dtype'", 4},
        {"{\"a\": {\"dtype\":\"F32\",\"shape\":1,\"data_offsets\":[0,4]}}", "shape is not an array",
         4},
        {"{\"a\": {\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}}",
         "shape holds something other than sizes", 4},
        {"{\"a\": {\"dtype\":\"F32\",\"shape\":[1.5],\"data_offsets\":[0,4]}}",
         "shape holds something other than sizes", 4},
        {"{\"a\": {\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,4]}}",
         "has 9 dims", 4},
        {"{\"a\": {\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0]}}",
         "data_offsets is not [begin, end]", 4},
        {"{\"a\": {\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,0]}}", "end before", 4},
        {"{\"a\": {\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,4]}}",
         "data_offsets [0, 4] span 4 bytes but F32 shape needs 8", 8},
        {"{\"\": {\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", "empty name", 4},
        {"{\"a\": {\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
         "\"a\": {\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
         "tensor 'a' appears twice", 8},
        {"{\"__metadata__\": {\"k\": 1}}", "metadata value of 'k' is not a string", 0},
        {"{\"__metadata__\": [1]}", "__metadata__ is not a JSON object", 0},
        {"{\"__metadata__\": {\"k\": \"v\", \"k\": \"w\"}}", "metadata key 'k' appears twice", 0},
        {"{\"__metadata__\": {}, \"__metadata__\": {}}", "__metadata__ appears twice", 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *msg = json_fail(cases[i].json, cases[i].ndata);
        cr_assert(strstr(msg, cases[i].msg), "case %zu: '%s' lacks '%s'", i, msg, cases[i].msg);
    }
}

Test(safetensors, offsets_overlap_gap_trailing_out_of_range) {
    cr_assert(strstr(json_fail("{\"a\": {\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                               "\"b\": {\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}",
                               12),
                     "tensor 'b' (bytes 4..12) overlaps tensor 'a' (bytes 0..8)"));
    cr_assert(strstr(json_fail("{\"a\": {\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                               "\"b\": {\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}",
                               8),
                     "overlaps"));
    cr_assert(strstr(json_fail("{\"a\": {\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                               "\"b\": {\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[12,20]}}",
                               20),
                     "unused gap in the data buffer before tensor 'b' (bytes 8..12)"));
    cr_assert(
        strstr(json_fail("{\"a\": {\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}", 12),
               "unused gap"));
    cr_assert(
        strstr(json_fail("{\"a\": {\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 12),
               "4 unexpected bytes after the last tensor"));
    cr_assert(strstr(json_fail("{\"a\": {\"dtype\":\"F32\",\"shape\":[2],"
                               "\"data_offsets\":[1000000,1000008]}}",
                               8),
                     "ends at data byte 1000008 but the file holds 8 data bytes"));
    cr_assert(strstr(json_fail("{\"a\": {\"dtype\":\"F32\",\"shape\":[2],"
                               "\"data_offsets\":[18446744073709551608,18446744073709551616]}}",
                               8),
                     "data_offsets is not [begin, end]"));
}

Test(safetensors, writer_rejects_bad_entries_and_leaves_no_file) {
    float f[2] = {0};
    int64_t s2[1] = {2}, s3[1] = {3};
    const char *p = tio_path(dir, "bad.safetensors");
    attn_error err;
    attn_st_entry dup[] = {{"a", "F32", 1, s2, f, 8}, {"a", "F32", 1, s2, f, 8}};
    cr_assert_eq(attn_safetensors_write(p, dup, 2, NULL, 0, &err), ATTN_ERR_INVALID_ARG);
    cr_assert(strstr(err.msg, "tensor 'a' given twice"), "%s", err.msg);
    attn_st_entry size[] = {{"a", "F32", 1, s3, f, 8}};
    cr_assert_eq(attn_safetensors_write(p, size, 1, NULL, 0, &err), ATTN_ERR_INVALID_ARG);
    cr_assert(strstr(err.msg, "has 8 bytes, its F32 shape needs 12"), "%s", err.msg);
    attn_st_entry dt[] = {{"a", "F31", 1, s2, f, 8}};
    cr_assert_eq(attn_safetensors_write(p, dt, 1, NULL, 0, &err), ATTN_ERR_INVALID_ARG);
    attn_st_entry reserved[] = {{"__metadata__", "F32", 1, s2, f, 8}};
    cr_assert_eq(attn_safetensors_write(p, reserved, 1, NULL, 0, &err), ATTN_ERR_INVALID_ARG);
    attn_st_kv meta[] = {{"k", "1"}, {"k", "2"}};
    cr_assert_eq(attn_safetensors_write(p, NULL, 0, meta, 2, &err), ATTN_ERR_INVALID_ARG);
    cr_assert(strstr(err.msg, "metadata key 'k' given twice"), "%s", err.msg);
    cr_assert_eq(tio_count_entries(dir), 0);

    /* Unwritable destination: error names it, nothing created. */
    const char *q = tio_path(dir, "no/such/w.safetensors");
    attn_st_entry ok[] = {{"a", "F32", 1, s2, f, 8}};
    cr_assert_eq(attn_safetensors_write(q, ok, 1, NULL, 0, &err), ATTN_ERR_IO);
    cr_assert(strstr(err.msg, q), "%s", err.msg);
    cr_assert_eq(tio_count_entries(dir), 0);
}

Test(safetensors, missing_file_is_io_error) {
    params3 x;
    params3_init(&x, 42);
    attn_error err;
    const char *p = tio_path(dir, "absent.safetensors");
    cr_assert_eq(attn_safetensors_load_params(p, &x.list, &err), ATTN_ERR_IO);
    cr_assert(strstr(err.msg, p) && strstr(err.msg, "No such file"), "%s", err.msg);
    attn_param_list_free(&x.list);
}

/* A file attn wrote, checked by an independent json + struct + numpy reader
 * in /usr/bin/python3 (names, dtypes, shapes, contiguous offsets, values,
 * metadata, header alignment). */
Test(safetensors, live_python_reads_attn_file) {
    if (!tio_have_numpy()) cr_skip_test("/usr/bin/python3 with numpy not available");
    params3 a;
    params3_init(&a, 0);
    for (int i = 0; i < 6; i++)
        a.wq[i] = (float)i / 8;
    a.bq[0] = 0.5f;
    a.bq[1] = -0.5f;
    for (int i = 0; i < 4; i++)
        a.wo[i] = (float)i - 1.75f;
    attn_st_kv meta[] = {{"format", "pt"}};
    attn_error err;
    cr_assert_eq(
        attn_safetensors_write_params(tio_path(dir, "c.safetensors"), &a.list, meta, 1, &err),
        ATTN_OK, "%s", err.msg);
    char cmd[8192];
    snprintf(cmd, sizeof cmd,
             "cd '%s' && /usr/bin/python3 -c \""
             "import json, struct, numpy as np\n"
             "b = open('c.safetensors', 'rb').read()\n"
             "n, = struct.unpack('<Q', b[:8])\n"
             "assert (8 + n) %% 8 == 0\n"
             "h = json.loads(b[8:8 + n])\n"
             "assert h.pop('__metadata__') == {'format': 'pt'}\n"
             "data = b[8 + n:]\n"
             "spans = sorted(v['data_offsets'] for v in h.values())\n"
             "assert spans[0][0] == 0 and spans[-1][1] == len(data)\n"
             "assert all(x[1] == y[0] for x, y in zip(spans, spans[1:]))\n"
             "def t(k):\n"
             "    v = h[k]; s, e = v['data_offsets']; assert v['dtype'] == 'F32'\n"
             "    return np.frombuffer(data[s:e], dtype='<f4').reshape(v['shape'])\n"
             "assert sorted(h) == ['W_query.bias', 'W_query.weight', 'out_proj.weight']\n"
             "assert (t('W_query.weight') == np.arange(6, dtype=np.float32).reshape(2, 3) / "
             "8).all()\n"
             "assert t('W_query.bias').tolist() == [0.5, -0.5]\n"
             "assert (t('out_proj.weight') == (np.arange(4, dtype=np.float32) - "
             "1.75).reshape(2, 2)).all()\n"
             "\"",
             dir);
    cr_assert_eq(system(cmd), 0, "python reader rejected attn's safetensors file");
    attn_param_list_free(&a.list);
}

/* Every truncation and many single-byte corruptions of a valid file either
 * parse or fail with a message; none may crash (checked under ASan too). */
Test(safetensors, corrupted_files_never_crash) {
    size_t n;
    unsigned char *img = tio_slurp(IO_FIXTURES "params.safetensors", &n);
    unsigned char *buf = malloc(n);
    const unsigned char vals[] = {0, 0xff, '"', '}', '[', '9', ' ', 0x80};
    for (size_t len = 0; len <= n; len++) {
        attn_safetensors st;
        attn_error err;
        attn_status s = attn_safetensors_parse(img, len, "t", &st, &err);
        cr_assert(len == n ? s == ATTN_OK : s == ATTN_ERR_FORMAT, "len %zu: %s", len, err.msg);
        attn_safetensors_free(&st);
    }
    for (size_t i = 0; i < n; i++)
        for (size_t v = 0; v < sizeof vals; v++) {
            memcpy(buf, img, n);
            buf[i] = vals[v];
            attn_safetensors st;
            attn_error err;
            attn_status s = attn_safetensors_parse(buf, n, "t", &st, &err);
            cr_assert(s == ATTN_OK || s == ATTN_ERR_FORMAT, "byte %zu: status %d", i, s);
            if (s == ATTN_OK) {
                for (int k = 0; k < st.count; k++)
                    cr_assert_leq(st.tensors[k].end, n);
            } else {
                cr_assert(strncmp(err.msg, "t: ", 3) == 0, "%s", err.msg);
            }
            attn_safetensors_free(&st);
        }
    free(buf);
    free(img);
}

/* Issue 17: metadata integers are digits only ("-5" was a step strtoull took). */
Test(safetensors, meta_u64_is_strict) {
    const char *json = "{\"__metadata__\": {\"ok\": \"42\", \"zero\": \"0\", \"neg\": \"-5\", "
                       "\"plus\": \"+5\", \"space\": \" 5\", \"trail\": \"5 \", \"hex\": \"0x10\", "
                       "\"empty\": \"\", \"big\": \"18446744073709551616\", "
                       "\"max\": \"18446744073709551615\", \"i64\": \"9223372036854775808\"}}";
    size_t len;
    unsigned char *img = make_st(json, 0, &len);
    attn_safetensors st;
    attn_error err;
    cr_assert_eq(attn_safetensors_parse(img, len, "m.safetensors", &st, &err), ATTN_OK, "%s",
                 err.msg);
    uint64_t v = 7;
    cr_assert_eq(attn_safetensors_meta_u64(&st, "m", "ok", UINT64_MAX, &v, &err), ATTN_OK);
    cr_assert_eq(v, 42);
    cr_assert_eq(attn_safetensors_meta_u64(&st, "m", "zero", 10, &v, &err), ATTN_OK);
    cr_assert_eq(v, 0);
    cr_assert_eq(attn_safetensors_meta_u64(&st, "m", "max", UINT64_MAX, &v, &err), ATTN_OK);
    cr_assert_eq(v, UINT64_MAX);
    const char *bad[] = {"neg", "plus", "space", "trail", "hex", "empty", "big"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        v = 7;
        cr_assert_eq(attn_safetensors_meta_u64(&st, "m", bad[i], UINT64_MAX, &v, &err),
                     ATTN_ERR_FORMAT, "%s", bad[i]);
        cr_assert_eq(v, 7, "%s left the output alone", bad[i]);
        cr_assert(strstr(err.msg, "m: metadata '") && strstr(err.msg, bad[i]) &&
                      strstr(err.msg, "not an integer in [0, 18446744073709551615]"),
                  "%s", err.msg);
    }
    cr_assert_eq(attn_safetensors_meta_u64(&st, "m", "i64", INT64_MAX, &v, &err), ATTN_ERR_FORMAT);
    cr_assert(strstr(err.msg, "[0, 9223372036854775807]"), "%s", err.msg);
    cr_assert_eq(attn_safetensors_meta_u64(&st, "m", "ok", 41, &v, &err), ATTN_ERR_FORMAT);
    cr_assert_eq(attn_safetensors_meta_u64(&st, "m", "absent", 41, &v, &err), ATTN_ERR_NOT_FOUND);
    cr_assert(strstr(err.msg, "'absent' is missing"), "%s", err.msg);
    attn_safetensors_free(&st);
    free(img);
}

/* The header alone: names, shapes and metadata with no data read, checked
 * against the file's size as a whole read checks them. */
Test(safetensors, read_header_only) {
    const char *json = "{\"__metadata__\":{\"k\":\"v\"},"
                       "\"a\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]},"
                       "\"b\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[24,28]}}";
    size_t len;
    unsigned char *img = make_st(json, 28, &len);
    char path[512], cut[512];
    snprintf(path, sizeof path, "%s/h.safetensors", dir);
    snprintf(cut, sizeof cut, "%s/cut.safetensors", dir);
    FILE *f = fopen(path, "wb");
    fwrite(img, 1, len, f);
    fclose(f);
    f = fopen(cut, "wb"); /* one data byte short */
    fwrite(img, 1, len - 1, f);
    fclose(f);
    free(img);
    attn_safetensors st;
    attn_error err;
    cr_assert_eq(attn_safetensors_read_header(path, &st, &err), ATTN_OK, "%s", err.msg);
    cr_assert_eq(st.count, 2);
    const attn_st_tensor *a = attn_safetensors_find(&st, "a");
    cr_assert(a && a->ndim == 2 && a->shape[0] == 2 && a->shape[1] == 3 && a->numel == 6);
    cr_assert_null(a->data);
    cr_assert_str_eq(attn_safetensors_meta(&st, "k"), "v");
    attn_safetensors_free(&st);
    cr_assert_eq(attn_safetensors_read_header(cut, &st, &err), ATTN_ERR_FORMAT);
    cr_assert(strstr(err.msg, "truncated"), "%s", err.msg);
    cr_assert(st.count == 0 && st.tensors == NULL);
    /* A header length past the file's end is refused before it is read. */
    f = fopen(cut, "wb");
    const unsigned char huge[9] = {0xff, 0xff, 0xff, 0x00, 0, 0, 0, 0, '{'};
    fwrite(huge, 1, sizeof huge, f);
    fclose(f);
    cr_assert_eq(attn_safetensors_read_header(cut, &st, &err), ATTN_ERR_FORMAT);
    cr_assert(strstr(err.msg, "not a safetensors file"), "%s", err.msg);
}
