/* attn_tensor_repr against PyTorch 1.13.1's own print/repr.
 * References: tests/fixtures/print_cases.json, written by
 * scripts/gen_print_fixtures.py with Debian's PyTorch (repr of each tensor with
 * the default print options, plus the exact float32 bits it printed). Every
 * case must match character for character. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "attn/print.h"

static char *read_text(const char *path) {
    FILE *f = fopen(path, "rb");
    cr_assert(f, "cannot open %s", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    cr_assert(s);
    cr_assert(fread(s, 1, (size_t)n, f) == (size_t)n);
    s[n] = '\0';
    fclose(f);
    return s;
}

static float bits_to_float(const char *hex8) {
    char tmp[9];
    memcpy(tmp, hex8, 8);
    tmp[8] = '\0';
    uint32_t u = (uint32_t)strtoul(tmp, NULL, 16);
    float v;
    memcpy(&v, &u, sizeof v);
    return v;
}

Test(print, matches_pytorch_fixtures) {
    char *text = read_text(ATTN_SOURCE_DIR "/tests/fixtures/print_cases.json");
    cJSON *root = cJSON_Parse(text);
    cr_assert(root, "fixture JSON does not parse");
    cJSON *cases = cJSON_GetObjectItemCaseSensitive(root, "cases");
    cr_assert(cJSON_IsArray(cases));
    int checked = 0;
    cJSON *c;
    cJSON_ArrayForEach(c, cases) {
        const char *name = cJSON_GetObjectItemCaseSensitive(c, "name")->valuestring;
        const char *want = cJSON_GetObjectItemCaseSensitive(c, "repr")->valuestring;
        const char *bits = cJSON_GetObjectItemCaseSensitive(c, "bits")->valuestring;
        cJSON *shape_j = cJSON_GetObjectItemCaseSensitive(c, "shape");
        int64_t shape[ATTN_PRINT_MAX_DIMS];
        int ndim = cJSON_GetArraySize(shape_j);
        size_t numel = 1;
        for (int d = 0; d < ndim; d++) {
            shape[d] = (int64_t)cJSON_GetArrayItem(shape_j, d)->valuedouble;
            numel *= (size_t)shape[d];
        }
        cr_assert(strlen(bits) == 8 * numel, "%s: %zu hex digits for %zu values", name,
                  strlen(bits), numel);
        float *data = malloc((numel ? numel : 1) * sizeof *data);
        for (size_t i = 0; i < numel; i++)
            data[i] = bits_to_float(bits + 8 * i);
        attn_print_options opts;
        attn_print_options_default(&opts);
        cJSON *suffixes = cJSON_GetObjectItemCaseSensitive(c, "suffixes");
        for (int i = 0; i < cJSON_GetArraySize(suffixes) && i < ATTN_PRINT_MAX_SUFFIXES; i++)
            opts.suffixes[i] = cJSON_GetArrayItem(suffixes, i)->valuestring;
        char *got = NULL;
        attn_error err;
        cr_assert(attn_tensor_repr(data, ndim, shape, &opts, &got, &err) == ATTN_OK, "%s: %s", name,
                  err.msg);
        cr_expect(strcmp(got, want) == 0, "case %s differs:\n--- attn\n%s\n--- PyTorch\n%s", name,
                  got, want);
        free(got);
        free(data);
        checked++;
    }
    cr_assert(checked >= 100, "only %d fixture cases", checked);
    cJSON_Delete(root);
    free(text);
}

/* The book's own tables, seed 000 In [6] and In [31]. */
Test(print, book_vector_and_int_mode) {
    const float z2[3] = {0.4419f, 0.6515f, 0.5683f};
    int64_t n3 = 3;
    char *s = NULL;
    cr_assert(attn_tensor_repr(z2, 1, &n3, NULL, &s, NULL) == ATTN_OK);
    cr_expect_str_eq(s, "tensor([0.4419, 0.6515, 0.5683])");
    free(s);
    const float drop[4] = {2, 0, 0, 2};
    int64_t sh[2] = {2, 2};
    cr_assert(attn_tensor_repr(drop, 2, sh, NULL, &s, NULL) == ATTN_OK);
    cr_expect_str_eq(s, "tensor([[2., 0.],\n        [0., 2.]])");
    free(s);
}

Test(print, buffer_form_reports_needed_size) {
    const float v = 1.8524f;
    char buf[64];
    size_t needed = 0;
    cr_assert(attn_tensor_format(&v, 0, NULL, NULL, buf, sizeof buf, &needed, NULL) == ATTN_OK);
    cr_expect_str_eq(buf, "tensor(1.8524)");
    cr_expect_eq(needed, strlen("tensor(1.8524)"));
    char small[8];
    attn_error err;
    cr_expect(attn_tensor_format(&v, 0, NULL, NULL, small, sizeof small, &needed, &err) ==
              ATTN_ERR_INVALID_ARG);
    cr_expect_str_eq(small, "tensor(");
    cr_expect_eq(needed, 14);
    cr_expect(strstr(err.msg, "needed") != NULL);
}

Test(print, forced_sci_mode_and_precision) {
    const float v[2] = {0.5f, 0.25f};
    int64_t n = 2;
    attn_print_options o;
    attn_print_options_default(&o);
    o.sci_mode = 1;
    char *s = NULL;
    cr_assert(attn_tensor_repr(v, 1, &n, &o, &s, NULL) == ATTN_OK);
    cr_expect_str_eq(s, "tensor([5.0000e-01, 2.5000e-01])");
    free(s);
    o.sci_mode = -1;
    o.precision = 2;
    cr_assert(attn_tensor_repr(v, 1, &n, &o, &s, NULL) == ATTN_OK);
    cr_expect_str_eq(s, "tensor([0.50, 0.25])");
    free(s);
}

Test(print, rejects_bad_arguments) {
    const float v[1] = {1.0f};
    int64_t neg = -1, shape9[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
    char *s = (char *)1;
    attn_error err;
    cr_expect(attn_tensor_repr(v, 1, &neg, NULL, &s, &err) == ATTN_ERR_INVALID_ARG);
    cr_expect(s == NULL);
    cr_expect(strstr(err.msg, "negative") != NULL);
    cr_expect(attn_tensor_repr(v, 9, shape9, NULL, &s, &err) == ATTN_ERR_INVALID_ARG);
    int64_t one = 1;
    cr_expect(attn_tensor_repr(NULL, 1, &one, NULL, &s, &err) == ATTN_ERR_INVALID_ARG);
    attn_print_options o;
    attn_print_options_default(&o);
    o.precision = -2;
    cr_expect(attn_tensor_repr(v, 1, &one, &o, &s, &err) == ATTN_ERR_INVALID_ARG);
}
