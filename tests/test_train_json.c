/* The JSON config reader of attn train (issue 17 item 11): the whole text
 * must be one object (nothing after it, no NUL byte, no \u0000 in a
 * string), every key known (a typo gets the closest key), given once, of its
 * type and in its range, checked before any conversion (1e300, -inf, NaN);
 * errors name the file, the key and the valid range in one wording. */
#define _POSIX_C_SOURCE 200809L /* mkstemp */

#include <cjson/cJSON.h>
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "attn/train.h"
#include "attn/train_setup.h"

typedef struct bad_case {
    const char *json;
    attn_status code;
    const char *msg; /* the whole message after "c.json: " starts with this */
} bad_case;

static const bad_case BAD[] = {
    {"{\"n_layers\": 3} xyz", ATTN_ERR_FORMAT, "text after the JSON at line 1, column 17 ('xyz')"},
    {"{\"n_layers\": 3}\n}", ATTN_ERR_FORMAT, "text after the JSON at line 2, column 1"},
    {"{\"n_layers\": 3, \"n_layers\": 4}", ATTN_ERR_INVALID_ARG,
     "config key 'n_layers' is given twice"},
    {"{\"batch_size\": 3, \"batch_size\": 3}", ATTN_ERR_INVALID_ARG,
     "config key 'batch_size' is given twice"},
    {"{\"emb_dim\": 64, \"embedding_dim\": 32}", ATTN_ERR_INVALID_ARG,
     "config keys 'emb_dim' and 'embedding_dim' give different values"},
    {"{\"max_steps\": 5, \"max_iters\": 6}", ATTN_ERR_INVALID_ARG,
     "config keys 'max_steps' and 'max_iters' give different values"},
    {"{\"head_size\": -5}", ATTN_ERR_INVALID_ARG,
     "config key 'head_size' must be an integer in [1, 65536] (got -5)"},
    {"{\"head_size\": 31}", ATTN_ERR_INVALID_ARG,
     "head_size 31 does not equal emb_dim 128 / n_heads 4"},
    {"{\"n_layers\\u0000junk\": 2}", ATTN_ERR_FORMAT,
     "a NUL character (\\u0000) in a string at line 1, column 11"},
    {"{\"dropout_stream\": \"torch-cpu\\u0000junk\"}", ATTN_ERR_FORMAT,
     "a NUL character (\\u0000) in a string"},
    {"{\"batch_size\": -1}", ATTN_ERR_INVALID_ARG,
     "config key 'batch_size' must be an integer in [1, 2147483647] (got -1)"},
    {"{\"warmup_steps\": -3}", ATTN_ERR_INVALID_ARG,
     "config key 'warmup_steps' must be an integer >= 0 (got -3)"},
    {"{\"n_layers\": -2}", ATTN_ERR_INVALID_ARG,
     "config key 'n_layers' must be an integer in [1, 4096] (got -2)"},
    {"{\"layers_num\": 0}", ATTN_ERR_INVALID_ARG,
     "config key 'layers_num' must be an integer in [1, 4096] (got 0)"},
    {"{\"vocab_size\": 0.5}", ATTN_ERR_INVALID_ARG,
     "config key 'vocab_size' must be an integer in [1, 16777216] (got 0.5)"},
    {"{\"max_steps\": 1e300}", ATTN_ERR_INVALID_ARG,
     "config key 'max_steps' must be an integer >= 1 (got 1e+300)"},
    {"{\"eval_iters\": -1e999}", ATTN_ERR_INVALID_ARG,
     "config key 'eval_iters' must be an integer in [1, 2147483647] (got -inf)"},
    {"{\"beta1\": 1e300}", ATTN_ERR_INVALID_ARG,
     "config key 'beta1' must be a number in [0, 1) (got 1e+300)"},
    {"{\"weight_decay\": -1e999}", ATTN_ERR_INVALID_ARG,
     "config key 'weight_decay' must be a number >= 0 (got -inf)"},
    {"{\"emb_dim\": 1e300}", ATTN_ERR_INVALID_ARG,
     "config key 'emb_dim' must be an integer in [1, 65536] (got 1e+300)"},
    {"{\"drop_rate\": -1e999}", ATTN_ERR_INVALID_ARG,
     "config key 'drop_rate' must be a number in [0, 1) (got -inf)"},
    {"{\"qkv_bias\": \"yes\"}", ATTN_ERR_INVALID_ARG,
     "config key 'qkv_bias' must be true or false (got \"yes\")"},
    {"{\"seed\": \"5\"}", ATTN_ERR_INVALID_ARG,
     "config key 'seed' must be an integer in [0, 9007199254740992] (got \"5\")"},
    {"{\"n_layer\": 2}", ATTN_ERR_NOT_FOUND,
     "unknown config key 'n_layer' (did you mean 'n_layers'?)"},
    {"{\"batchsize\": 2}", ATTN_ERR_NOT_FOUND,
     "unknown config key 'batchsize' (did you mean 'batch_size'?)"},
    {"{\"colour\": 2}", ATTN_ERR_NOT_FOUND, "unknown config key 'colour'"},
    {"{\"model\": {\"n_layers\": 2}}", ATTN_ERR_NOT_FOUND, "unknown config key 'model'"},
    {"{\"n_layers\": 2,}", ATTN_ERR_FORMAT, "not valid JSON at line 1"},
    {"[1]", ATTN_ERR_FORMAT, "not a JSON object"},
    {" \n", ATTN_ERR_FORMAT, "empty (no JSON)"},
};

Test(train_json, bad_configs_are_refused_naming_file_key_and_range) {
    for (size_t i = 0; i < sizeof BAD / sizeof BAD[0]; i++) {
        attn_gpt_config m;
        attn_train_config t;
        attn_error err;
        cr_assert_eq(attn_train_preset("tiny", &m, &t, NULL), ATTN_OK);
        attn_error_clear(&err);
        const attn_status st =
            attn_train_config_apply_json(&m, &t, BAD[i].json, "c.json", NULL, &err);
        cr_expect_eq(st, BAD[i].code, "%s: status %d (%s)", BAD[i].json, (int)st, err.msg);
        char want[ATTN_ERROR_MSG_MAX];
        snprintf(want, sizeof want, "c.json: %s", BAD[i].msg);
        cr_expect(strncmp(err.msg, want, strlen(want)) == 0, "%s:\n  got  '%s'\n  want '%s'",
                  BAD[i].json, err.msg, want);
    }
}

/* What stays accepted: a key and its alias with equal values, whitespace
 * after the object, every model and training key at once. */
Test(train_json, good_configs_still_apply) {
    attn_gpt_config m;
    attn_train_config t;
    attn_error err;
    cr_assert_eq(attn_train_preset("tiny", &m, &t, NULL), ATTN_OK);
    const char *js = "{\"emb_dim\": 64, \"embedding_dim\": 64, \"n_heads\": 4, \"head_size\": 16,\n"
                     " \"max_iters\": 9, \"learning_rate\": 1e300, \"qkv_bias\": true,\n"
                     " \"dropout_stream\": \"torch-mkl\"}\n\t \r\n";
    cr_assert_eq(attn_train_config_apply_json(&m, &t, js, "c.json", NULL, &err), ATTN_OK, "%s",
                 err.msg);
    cr_expect(m.emb_dim == 64 && m.qkv_bias == 1 && t.max_steps == 9 && t.learning_rate == 1e300 &&
              t.dropout_stream == ATTN_STREAM_TORCH_MKL);
    /* Booleans are true/false (issue 31 item 12): 1 is refused. */
    cr_expect_neq(attn_train_config_apply_json(&m, &t, "{\"qkv_bias\": 1}", "c.json", NULL, &err),
                  ATTN_OK);
}

/* Every key, straight through the key readers, with values outside any
 * integer's range: refused with the key's range (or, for a number key whose
 * range holds it, taken as is) and never converted first (UBSan's
 * float-cast-overflow would stop the test). */
Test(train_json, huge_infinite_and_nan_values_never_reach_a_cast) {
    const double values[] = {1e300, -1e300, INFINITY, -INFINITY, NAN, 9.3e18, -9.3e18};
    for (size_t v = 0; v < sizeof values / sizeof values[0]; v++) {
        cJSON *num = cJSON_CreateNumber(values[v]);
        for (int i = 0; i < ATTN_TRAIN_KEY_COUNT; i++) {
            const attn_train_key *k = attn_train_key_at(i);
            attn_gpt_config m;
            attn_train_config t;
            attn_train_preset("tiny", &m, &t, NULL);
            attn_error err;
            attn_error_clear(&err);
            const attn_status st = attn_train_config_set_key(&t, k->name, num, &err);
            const int fits = k->type == ATTN_TKEY_NUMBER && isfinite(values[v]) &&
                             values[v] > k->lo && values[v] <= k->hi;
            if (fits) {
                cr_expect_eq(st, ATTN_OK, "%s = %g: %s", k->name, values[v], err.msg);
                cr_expect(attn_train_config_get(&t, i).d == values[v], "%s", k->name);
                continue;
            }
            char what[160];
            attn_train_key_describe(k, what, sizeof what);
            cr_expect_eq(st, ATTN_ERR_INVALID_ARG, "%s = %g accepted", k->name, values[v]);
            cr_expect(strstr(err.msg, k->name) && strstr(err.msg, what) && strstr(err.msg, "(got "),
                      "%s = %g: '%s' lacks the range '%s'", k->name, values[v], err.msg, what);
        }
        static const char *const model_keys[][2] = {{"vocab_size", "an integer in [1, 16777216]"},
                                                    {"context_size", "an integer in [1, 1048576]"},
                                                    {"emb_dim", "an integer in [1, 65536]"},
                                                    {"heads_num", "an integer in [1, 65536]"},
                                                    {"n_layers", "an integer in [1, 4096]"},
                                                    {"dropout_rate", "a number in [0, 1)"},
                                                    {"qkv_bias", "true or false"},
                                                    {"head_size", "an integer in [1, 65536]"}};
        for (size_t i = 0; i < sizeof model_keys / sizeof model_keys[0]; i++) {
            attn_gpt_config m;
            attn_train_config t;
            attn_train_preset("tiny", &m, &t, NULL);
            const attn_gpt_config before = m;
            attn_error err;
            attn_error_clear(&err);
            cr_expect_eq(attn_gpt_config_set_key(&m, model_keys[i][0], num, &err),
                         ATTN_ERR_INVALID_ARG, "%s = %g accepted", model_keys[i][0], values[v]);
            cr_expect(strstr(err.msg, model_keys[i][1]) != NULL, "%s: '%s' lacks '%s'",
                      model_keys[i][0], err.msg, model_keys[i][1]);
            cr_expect(memcmp(&m, &before, sizeof m) == 0, "%s: config changed", model_keys[i][0]);
        }
        cJSON_Delete(num);
    }
}

/* A config file (attn_train_resolve reads it whole): a NUL byte is refused
 * (cJSON would stop there and accept the object before it), naming the
 * byte; the refusal is the request's (exit 2). */
Test(train_json, a_nul_byte_in_the_file_is_refused) {
    char path[] = "/tmp/attn-test-json-XXXXXX";
    const int fd = mkstemp(path);
    cr_assert(fd >= 0);
    static const char text[] = "{\"n_layers\": 2}\0{\"n_layers\": 9}";
    cr_assert_eq(write(fd, text, sizeof text - 1), (ssize_t)(sizeof text - 1));
    close(fd);
    attn_train_request rq;
    attn_train_setup su;
    attn_error err;
    attn_train_request_init(&rq);
    rq.config = path;
    cr_expect_eq(attn_train_resolve(&rq, &su, &err), ATTN_ERR_FORMAT, "%s", err.msg);
    cr_expect(su.request_error);
    cr_expect(strstr(err.msg, path) && strstr(err.msg, "a NUL byte at byte 15"), "%s", err.msg);
    unlink(path);
}

/* The model-config reader (attn_gpt_config_set_json / _load_json) is as
 * strict about the text: nothing after the object, no \u0000, no NUL byte
 * in the file; a failure leaves the config as it was. */
Test(train_json, the_model_config_reader_is_strict_too) {
    attn_gpt_config m, before;
    attn_train_config t;
    attn_train_preset("tiny", &m, &t, NULL);
    before = m;
    attn_error err;
    cr_expect_eq(attn_gpt_config_set_json(&m, "{\"n_layers\": 2} xyz", &err), ATTN_ERR_FORMAT);
    cr_expect(strstr(err.msg, "text after the JSON at line 1, column 17") != NULL, "%s", err.msg);
    cr_expect_eq(attn_gpt_config_set_json(&m, "{\"n_layers\\u0000x\": 2}", &err), ATTN_ERR_FORMAT);
    cr_expect(strstr(err.msg, "NUL character") != NULL, "%s", err.msg);
    cr_expect_eq(attn_gpt_config_set_json(&m, "{\"n_layers\": 1e300}", &err), ATTN_ERR_INVALID_ARG);
    cr_expect(strstr(err.msg, "must be an integer in [1, 4096] (got 1e+300)") != NULL, "%s",
              err.msg);
    char path[] = "/tmp/attn-test-json-XXXXXX";
    const int fd = mkstemp(path);
    cr_assert(fd >= 0);
    static const char text[] = "{\"n_layers\": 2}\0junk";
    cr_assert_eq(write(fd, text, sizeof text - 1), (ssize_t)(sizeof text - 1));
    close(fd);
    cr_expect_eq(attn_gpt_config_load_json(&m, path, &err), ATTN_ERR_FORMAT);
    cr_expect(strstr(err.msg, path) && strstr(err.msg, "a NUL byte at byte 15"), "%s", err.msg);
    cr_expect(memcmp(&m, &before, sizeof m) == 0, "a refused text changed the config");
    unlink(path);
}
