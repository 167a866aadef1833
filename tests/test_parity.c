/* PyTorch parity of every chapter-3 module, forward and backward.
 *
 * References: tests/fixtures/parity/<case>/, written by
 * scripts/gen_parity_fixtures.py with Debian's PyTorch 1.13.1 (non-MKL, so
 * dropout masks are the torch-cpu stream): the book's classes built after
 * torch.manual_seed(seed), run on x, backpropagated from dy. Here each case is
 * rebuilt with attn_module_create + attn_rng_seed(seed) (weights are never
 * read from the fixture), so the weights, the dropout masks drawn after them,
 * the outputs and all gradients must agree:
 *
 *   outputs:   |c - r| <= 1e-5 * max(1, |r|)        per element;
 *   gradients: max|C - R| <= 1e-4 * max(max|R|, 1e-2 * S)
 *              per gradient tensor (dX and each parameter): the tensor's
 *              relative error in the max norm, where S is the largest |R|
 *              over all of the case's gradients, so that a gradient that is
 *              zero in exact arithmetic (W_key.bias always is: softmax ignores
 *              a per-row constant) is judged against 1% of the case's scale
 *              instead of its own float32 rounding noise.
 *
 * A dropout mask that differs in a single element moves outputs by far more
 * than these bounds, so matching outputs in training cases means identical
 * masks. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "attn/fileio.h"
#include "attn/module.h"
#include "attn/npy.h"

#define FIXTURES ATTN_SOURCE_DIR "/tests/fixtures/parity"

static const char *json_str(const cJSON *o, const char *k) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    cr_assert(cJSON_IsString(v), "config.json: missing string '%s'", k);
    return v->valuestring;
}
static double json_num(const cJSON *o, const char *k) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    cr_assert(cJSON_IsNumber(v), "config.json: missing number '%s'", k);
    return v->valuedouble;
}
static int json_bool(const cJSON *o, const char *k) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    cr_assert(cJSON_IsBool(v), "config.json: missing bool '%s'", k);
    return cJSON_IsTrue(v);
}

static void load(const char *dir, const char *file, attn_npy *a) {
    char path[2048];
    attn_error err;
    cr_assert((size_t)snprintf(path, sizeof path, "%s/%s", dir, file) < sizeof path);
    attn_status s = attn_npy_load_f32(path, a, &err);
    cr_assert(s == ATTN_OK, "%s", err.msg);
}

/* Outputs: the largest per-element error in units of the bound (<= 1 passes). */
static void check_output(const char *cs, const float *c, const attn_npy *ref) {
    const float *r = ref->data;
    double worst = 0;
    size_t at = 0;
    for (size_t i = 0; i < ref->numel; i++) {
        double q = fabs((double)c[i] - (double)r[i]) / (1e-5 * fmax(1.0, fabs(r[i])));
        if (!(q <= worst)) {
            worst = isnan(q) ? INFINITY : q;
            at = i;
        }
    }
    cr_expect(worst <= 1.0, "%s: y[%zu] = %.9g, PyTorch %.9g (%.3g x the bound 1e-5*max(1,|ref|))",
              cs, at, c[at], r[at], worst);
}

static double max_abs(const float *a, size_t n) {
    double m = 0;
    for (size_t i = 0; i < n; i++)
        m = fmax(m, fabs(a[i]));
    return m;
}

/* Gradients: max|C - R| <= 1e-4 * max(max|R|, 1e-2 * scale). */
static void check_grad(const char *cs, const char *what, const float *c, const attn_npy *ref,
                       double scale) {
    const float *r = ref->data;
    double d = 0;
    size_t at = 0;
    for (size_t i = 0; i < ref->numel; i++) {
        double di = fabs((double)c[i] - (double)r[i]);
        if (!(di <= d)) {
            d = isnan(di) ? INFINITY : di;
            at = i;
        }
    }
    double denom = fmax(max_abs(r, ref->numel), 1e-2 * scale);
    cr_expect(d <= 1e-4 * denom,
              "%s: grad %s: max |attn - PyTorch| = %.3g at [%zu] (%.9g vs %.9g), bound "
              "1e-4 * %.3g",
              cs, what, d, at, c[at], r[at], denom);
}

/* Run one fixture directory; returns 1 if its module is `module`. */
static int run_case(const char *dir, const char *cs, const char *module) {
    char path[2048];
    cr_assert((size_t)snprintf(path, sizeof path, "%s/config.json", dir) < sizeof path);
    void *text = NULL;
    size_t len = 0;
    attn_error err;
    cr_assert(attn_file_read_all(path, 0, &text, &len, &err) == ATTN_OK, "%s", err.msg);
    cJSON *cfgj = cJSON_Parse(text);
    free(text);
    cr_assert(cfgj, "%s: invalid JSON", path);
    if (strcmp(json_str(cfgj, "module"), module) != 0) {
        cJSON_Delete(cfgj);
        return 0;
    }

    attn_module_config cfg = {0};
    cr_assert(attn_module_kind_parse(module, &cfg.kind) == 0, "%s: unknown module", cs);
    cfg.d_in = (int)json_num(cfgj, "d_in");
    cfg.d_out = (int)json_num(cfgj, "d_out");
    cfg.num_heads = (int)json_num(cfgj, "num_heads");
    cfg.context_length = (int)json_num(cfgj, "context_length");
    cfg.dropout = json_num(cfgj, "dropout");
    cfg.qkv_bias = json_bool(cfgj, "qkv_bias");
    int B = (int)json_num(cfgj, "B"), T = (int)json_num(cfgj, "T");
    attn_forward_mode mode = {json_bool(cfgj, "train"), NULL, ATTN_STREAM_TORCH_CPU};
    cr_assert(attn_dropout_stream_parse(json_str(cfgj, "rng"), &mode.stream) == 0);

    attn_rng rng;
    attn_rng_seed(&rng, (uint64_t)json_num(cfgj, "seed"));
    mode.rng = &rng;
    attn_module *m = NULL;
    cr_assert(attn_module_create(&cfg, &rng, &m, &err) == ATTN_OK, "%s: %s", cs, err.msg);

    /* Same parameters, same state_dict names, same order. */
    const attn_param_list *params = attn_module_params(m);
    const cJSON *names = cJSON_GetObjectItemCaseSensitive(cfgj, "params");
    cr_assert(cJSON_IsArray(names));
    cr_assert_eq(params->count, cJSON_GetArraySize(names), "%s: %d parameters, PyTorch has %d", cs,
                 params->count, cJSON_GetArraySize(names));
    for (int i = 0; i < params->count; i++)
        cr_assert_str_eq(params->items[i].name, cJSON_GetArrayItem(names, i)->valuestring,
                         "%s: parameter %d", cs, i);

    attn_npy x = {0}, dy = {0}, y_ref = {0}, dx_ref = {0};
    load(dir, "x.npy", &x);
    load(dir, "dy.npy", &dy);
    load(dir, "y.npy", &y_ref);
    load(dir, "grads/input.npy", &dx_ref);
    cr_assert_eq(x.numel, (size_t)B * T * cfg.d_in, "%s: x.npy size", cs);
    cr_assert_eq(y_ref.numel, (size_t)B * T * attn_module_out_dim(m), "%s: y.npy size", cs);
    cr_assert_eq(dy.numel, y_ref.numel);

    float *y = malloc(y_ref.numel * sizeof *y);
    float *dx = calloc(x.numel, sizeof *dx);
    cr_assert(y && dx);
    cr_assert(attn_module_forward(m, x.data, B, T, y, &mode, &err) == ATTN_OK, "%s: %s", cs,
              err.msg);
    check_output(cs, y, &y_ref);

    attn_param_list_zero_grad(params);
    cr_assert(attn_module_backward(m, x.data, dy.data, dx, &err) == ATTN_OK, "%s: %s", cs, err.msg);
    /* All reference gradients first: their common scale S. */
    attn_npy *g = calloc((size_t)params->count, sizeof *g);
    cr_assert(g);
    double scale = max_abs(dx_ref.data, dx_ref.numel);
    for (int i = 0; i < params->count; i++) {
        const attn_param *p = &params->items[i];
        char file[ATTN_PARAM_NAME_MAX + 16];
        snprintf(file, sizeof file, "grads/%s.npy", p->name);
        load(dir, file, &g[i]);
        cr_assert_eq(g[i].numel, p->numel, "%s: %s has %zu elements, PyTorch %zu", cs, p->name,
                     p->numel, g[i].numel);
        scale = fmax(scale, max_abs(g[i].data, g[i].numel));
    }
    check_grad(cs, "input", dx, &dx_ref, scale);
    for (int i = 0; i < params->count; i++) {
        check_grad(cs, params->items[i].name, params->items[i].grad, &g[i], scale);
        attn_npy_free(&g[i]);
    }
    free(g);

    free(y);
    free(dx);
    attn_npy_free(&x);
    attn_npy_free(&dy);
    attn_npy_free(&y_ref);
    attn_npy_free(&dx_ref);
    attn_module_free(m);
    cJSON_Delete(cfgj);
    return 1;
}

/* Every fixture case of one module; at least `min_cases` must exist. */
static void run_module(const char *module, int min_cases) {
    DIR *d = opendir(FIXTURES);
    cr_assert(d, "cannot open %s", FIXTURES);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.') continue;
        char dir[1536];
        cr_assert((size_t)snprintf(dir, sizeof dir, "%s/%s", FIXTURES, e->d_name) < sizeof dir);
        n += run_case(dir, e->d_name, module);
    }
    closedir(d);
    cr_assert(n >= min_cases, "%s: only %d fixture cases found in %s", module, n, FIXTURES);
}

Test(parity, self_attention_v1) {
    run_module("self-attention-v1", 3);
}
Test(parity, self_attention_v2) {
    run_module("self-attention-v2", 3);
}
Test(parity, causal_attention) {
    run_module("causal-attention", 6);
}
Test(parity, mha_wrapper) {
    run_module("mha-wrapper", 4);
}
Test(parity, mha) {
    run_module("mha", 7);
}
Test(parity, seed004_attention_head) {
    run_module("attention-head", 3);
}
Test(parity, seed004_mha) {
    run_module("seed004-mha", 3);
}
