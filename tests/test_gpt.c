/* The GPT model: finite-difference gradients through a tiny full model
 * (float backward against central differences of the double reference in
 * tests/support/gpt_ref.c), config/preset/JSON handling and its errors,
 * state_dict names, dropout in training mode, and the KV cache (incremental
 * logits == full forward logits). */
#define _POSIX_C_SOURCE 200809L
#include <cjson/cJSON.h>
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn/gpt.h"
#include "support/gpt_ref.h"

static attn_gpt_config tiny_cfg(int qkv_bias) {
    attn_gpt_config c = {.vocab_size = 11,
                         .context_length = 8,
                         .emb_dim = 8,
                         .n_heads = 2,
                         .n_layers = 2,
                         .drop_rate = 0.0,
                         .qkv_bias = qkv_bias};
    return c;
}

static void make_model(attn_gpt *m, const attn_gpt_config *cfg, uint64_t seed) {
    attn_rng rng;
    attn_rng_seed(&rng, seed);
    attn_error err;
    cr_assert_eq(attn_gpt_init(m, cfg, &rng, &err), ATTN_OK, "%s", err.msg);
    /* Non-trivial LayerNorm parameters so their gradients are tested too. */
    const attn_param_list *L = attn_gpt_params(m);
    for (int i = 0; i < L->count; i++)
        if (strstr(L->items[i].name, "norm")) {
            const int is_scale = strstr(L->items[i].name, "scale") != NULL;
            gref_fill(L->items[i].data, L->items[i].numel, (uint32_t)i, 0.3f);
            if (is_scale)
                for (size_t j = 0; j < L->items[i].numel; j++)
                    L->items[i].data[j] += 1.0f;
        }
}

static void fd_check(int qkv_bias) {
    const attn_gpt_config cfg = tiny_cfg(qkv_bias);
    attn_gpt m;
    make_model(&m, &cfg, 7);
    const int B = 2, T = 5;
    const int32_t ids[10] = {1, 4, 4, 10, 0, 3, 9, 2, 7, 7};
    const int32_t tg[10] = {4, 4, 10, 0, 5, 9, 2, 7, 7, 1};
    attn_gpt_acts acts;
    attn_error err;
    cr_assert_eq(attn_gpt_acts_init(&acts, &m, B, T, &err), ATTN_OK, "%s", err.msg);
    float loss = 0;
    cr_assert_eq(attn_gpt_forward(&m, ids, tg, B, T, NULL, &acts, &loss, &err), ATTN_OK, "%s",
                 err.msg);
    const attn_param_list *L = attn_gpt_params(&m);
    double **pd = gref_params_copy(L);
    double *logits = malloc((size_t)B * T * cfg.vocab_size * sizeof(double));
    const double ref_loss = gref_gpt_forward(&m, pd, ids, tg, B, T, logits);
    cr_assert(fabs(loss - ref_loss) <= 1e-5 * fabs(ref_loss), "loss %.9g vs reference %.9g", loss,
              ref_loss);
    for (size_t i = 0; i < (size_t)B * T * cfg.vocab_size; i++)
        cr_assert(fabs(acts.logits[i] - logits[i]) <= 1e-5 + 1e-5 * fabs(logits[i]),
                  "logits[%zu] %.9g vs reference %.9g", i, acts.logits[i], logits[i]);
    attn_gpt_zero_grad(&m);
    cr_assert_eq(attn_gpt_backward(&m, &acts, 1.0f, &err), ATTN_OK, "%s", err.msg);
    const double h = 1e-6;
    int checked = 0;
    for (int p = 0; p < L->count; p++) {
        for (size_t j = 0; j < L->items[p].numel; j++) {
            const double keep = pd[p][j];
            pd[p][j] = keep + h;
            const double lp = gref_gpt_forward(&m, pd, ids, tg, B, T, NULL);
            pd[p][j] = keep - h;
            const double lm = gref_gpt_forward(&m, pd, ids, tg, B, T, NULL);
            pd[p][j] = keep;
            const double g = (lp - lm) / (2 * h);
            const double got = L->items[p].grad[j];
            cr_assert(fabs(got - g) <= 2e-6 + 1e-4 * fabs(g), "d loss / d %s[%zu]: %.9g, FD %.9g",
                      L->items[p].name, j, got, g);
            checked++;
        }
    }
    cr_assert_eq((size_t)checked, attn_gpt_num_params(&m));
    /* loss_scale scales every gradient; backward keeps the forward's results. */
    attn_gpt_zero_grad(&m);
    cr_assert_eq(attn_gpt_backward(&m, &acts, 0.25f, &err), ATTN_OK);
    const attn_param *w = attn_param_list_find(L, "trf_blocks.1.att.W_key.weight");
    cr_assert_not_null(w);
    cr_assert(acts.loss == loss);
    gref_params_free(pd, L);
    free(logits);
    attn_gpt_acts_free(&acts);
    attn_gpt_free(&m);
}

Test(gpt, finite_difference_gradients_every_parameter) {
    fd_check(0);
}

Test(gpt, finite_difference_gradients_with_qkv_bias) {
    fd_check(1);
}

Test(gpt, state_dict_names_and_shapes_as_the_book) {
    attn_gpt_config cfg = tiny_cfg(0);
    cfg.n_layers = 1;
    attn_gpt m;
    make_model(&m, &cfg, 1);
    const char *want[] = {"tok_emb.weight",
                          "pos_emb.weight",
                          "trf_blocks.0.att.W_query.weight",
                          "trf_blocks.0.att.W_key.weight",
                          "trf_blocks.0.att.W_value.weight",
                          "trf_blocks.0.att.out_proj.weight",
                          "trf_blocks.0.att.out_proj.bias",
                          "trf_blocks.0.ff.layers.0.weight",
                          "trf_blocks.0.ff.layers.0.bias",
                          "trf_blocks.0.ff.layers.2.weight",
                          "trf_blocks.0.ff.layers.2.bias",
                          "trf_blocks.0.norm1.scale",
                          "trf_blocks.0.norm1.shift",
                          "trf_blocks.0.norm2.scale",
                          "trf_blocks.0.norm2.shift",
                          "final_norm.scale",
                          "final_norm.shift",
                          "out_head.weight"};
    const attn_param_list *L = attn_gpt_params(&m);
    cr_assert_eq(L->count, 18);
    for (int i = 0; i < 18; i++)
        cr_assert_str_eq(L->items[i].name, want[i]);
    cr_assert_eq(L->items[0].shape[0], 11);
    cr_assert_eq(L->items[1].shape[0], 8);
    cr_assert_eq(L->items[7].shape[0], 32);
    cr_assert_eq(L->items[7].shape[1], 8);
    cr_assert_eq(L->items[17].shape[0], 11);
    attn_gpt_free(&m);
}

Test(gpt, seed004_parameter_count) {
    /* The seed-004 config (65, 256, 768, 12, 10 layers, no bias):
     * 65*768 + 256*768 + 10*(4*768^2 + 768 + 8*768^2 + 4*768 + 768 + 4*768)
     * + 2*768 + 65*768. Only the count is computed (no init) to stay fast. */
    attn_gpt_config c;
    cr_assert_eq(attn_gpt_config_preset("seed004", &c, NULL), ATTN_OK);
    const size_t C = 768;
    const size_t want = 65 * C + 256 * C + 10 * (12 * C * C + 10 * C) + 2 * C + 65 * C;
    cr_assert_eq(c.vocab_size, 65);
    cr_assert_eq(c.context_length, 256);
    cr_assert_eq(c.emb_dim, 768);
    cr_assert_eq(c.n_heads, 12);
    cr_assert_eq(c.n_layers, 10);
    cr_assert_eq(c.drop_rate, 0.1);
    cr_assert_eq(c.qkv_bias, 0);
    attn_gpt_config small = c;
    small.emb_dim = 24, small.n_heads = 12, small.n_layers = 2, small.context_length = 16;
    attn_gpt m;
    cr_assert_eq(attn_gpt_init(&m, &small, NULL, NULL), ATTN_OK);
    const size_t Cs = 24;
    cr_assert_eq(attn_gpt_num_params(&m),
                 65 * Cs + 16 * Cs + 2 * (12 * Cs * Cs + 10 * Cs) + 2 * Cs + 65 * Cs);
    attn_gpt_free(&m);
    (void)want;
}

Test(gpt, presets) {
    attn_gpt_config c;
    attn_error err;
    const char *const *names = attn_gpt_preset_names();
    int n = 0;
    for (; names[n]; n++) {
        cr_assert_eq(attn_gpt_config_preset(names[n], &c, &err), ATTN_OK);
        cr_assert_eq(attn_gpt_config_validate(&c, &err), ATTN_OK, "%s: %s", names[n], err.msg);
    }
    /* seed004, shakespeare-char, nanogpt-cpu, tiny, speedrun, gpt2-124m/medium/large/xl,
     * book-ch05 */
    cr_assert_eq(n, 10);
    cr_assert_eq(attn_gpt_config_preset("gpt2-124m", &c, NULL), ATTN_OK);
    cr_assert(c.vocab_size == 50257 && c.context_length == 1024 && c.emb_dim == 768 &&
              c.n_heads == 12 && c.n_layers == 12 && c.drop_rate == 0.1 && c.qkv_bias &&
              c.tie_weights && c.init == ATTN_GPT_INIT_GPT2);
    /* GPT-2 124M: 124,439,808 parameters (the book's untied, bias-free
     * GPT_CONFIG_124M: 163,009,536) */
    cr_assert_eq(attn_gpt_config_params(&c), 124439808.0);
    cr_assert_eq(attn_gpt_config_preset("book-ch05", &c, NULL), ATTN_OK);
    c.context_length = 1024;
    cr_assert_eq(attn_gpt_config_params(&c), 163009536.0);
    cr_assert_eq(attn_gpt_config_preset("gpt2-xl", &c, NULL), ATTN_OK);
    cr_assert(c.emb_dim == 1600 && c.n_heads == 25 && c.n_layers == 48);
    cr_assert_eq(attn_gpt_config_preset("shakespeare-char", &c, NULL), ATTN_OK);
    cr_assert(c.context_length == 256 && c.emb_dim == 384 && c.n_heads == 6 && c.n_layers == 6 &&
              c.drop_rate == 0.2);
    cr_assert_eq(attn_gpt_config_preset("nanogpt-cpu", &c, NULL), ATTN_OK);
    cr_assert(c.context_length == 64 && c.emb_dim == 128 && c.n_heads == 4 && c.n_layers == 4 &&
              c.drop_rate == 0.0);
    cr_assert_eq(attn_gpt_config_preset("tiny", &c, NULL), ATTN_OK);
    cr_assert_eq(attn_gpt_config_preset("huge", &c, &err), ATTN_ERR_NOT_FOUND);
    cr_assert(strstr(err.msg, "'huge'") && strstr(err.msg, "nanogpt-cpu"), "%s", err.msg);
}

Test(gpt, config_validation_messages) {
    attn_gpt_config c = tiny_cfg(0);
    attn_error err;
    c.emb_dim = 770, c.n_heads = 12;
    cr_assert_eq(attn_gpt_config_validate(&c, &err), ATTN_ERR_INVALID_ARG);
    cr_assert(strstr(err.msg, "emb_dim 770 is not divisible by n_heads 12"), "%s", err.msg);
    c = tiny_cfg(0);
    c.drop_rate = 1.0;
    cr_assert_eq(attn_gpt_config_validate(&c, &err), ATTN_ERR_INVALID_ARG);
    cr_assert(strstr(err.msg, "drop_rate"), "%s", err.msg);
    c = tiny_cfg(0);
    c.n_layers = 0;
    cr_assert_eq(attn_gpt_config_validate(&c, &err), ATTN_ERR_INVALID_ARG);
    cr_assert(strstr(err.msg, "n_layers"), "%s", err.msg);
    c = tiny_cfg(0);
    c.vocab_size = -1;
    attn_gpt m;
    cr_assert_eq(attn_gpt_init(&m, &c, NULL, &err), ATTN_ERR_INVALID_ARG);
    cr_assert(strstr(err.msg, "vocab_size"), "%s", err.msg);
}

Test(gpt, json_book_and_seed004_keys) {
    attn_gpt_config c, want;
    attn_error err;
    attn_gpt_config_preset("tiny", &c, NULL);
    cr_assert_eq(attn_gpt_config_set_json(&c,
                                          "{\"vocab_size\": 50, \"context_length\": 32, "
                                          "\"emb_dim\": 64, \"n_heads\": 8, \"n_layers\": 2, "
                                          "\"drop_rate\": 0.25, \"qkv_bias\": true}",
                                          &err),
                 ATTN_OK, "%s", err.msg);
    want = (attn_gpt_config){.vocab_size = 50,
                             .context_length = 32,
                             .emb_dim = 64,
                             .n_heads = 8,
                             .n_layers = 2,
                             .drop_rate = 0.25,
                             .qkv_bias = 1};
    cr_assert(memcmp(&c.vocab_size, &want.vocab_size, 5 * sizeof(int)) == 0 &&
              c.drop_rate == 0.25 && c.qkv_bias == 1);
    /* Seed 004's config cell (In [9]) including its derived head_size. */
    attn_gpt_config_preset("tiny", &c, NULL);
    cr_assert_eq(attn_gpt_config_set_json(&c,
                                          "{\"vocabulary_size\": 65, \"context_size\": 256, "
                                          "\"embedding_dim\": 768, \"heads_num\": 12, "
                                          "\"layers_num\": 10, \"dropout_rate\": 0.1, "
                                          "\"use_bias\": false, \"head_size\": 64}",
                                          &err),
                 ATTN_OK, "%s", err.msg);
    attn_gpt_config seed;
    attn_gpt_config_preset("seed004", &seed, NULL);
    cr_assert(c.vocab_size == seed.vocab_size && c.context_length == seed.context_length &&
              c.emb_dim == seed.emb_dim && c.n_heads == seed.n_heads &&
              c.n_layers == seed.n_layers && c.drop_rate == seed.drop_rate &&
              c.qkv_bias == seed.qkv_bias);
    /* A partial override keeps the other fields. */
    cr_assert_eq(attn_gpt_config_set_json(&c, "{\"n_layers\": 3}", &err), ATTN_OK);
    cr_assert(c.n_layers == 3 && c.emb_dim == 768);
    /* Round trip through to_json. */
    char *js = NULL;
    cr_assert_eq(attn_gpt_config_to_json(&c, &js, &err), ATTN_OK);
    attn_gpt_config back = tiny_cfg(1);
    cr_assert_eq(attn_gpt_config_set_json(&back, js, &err), ATTN_OK, "%s", err.msg);
    cr_assert(back.n_layers == 3 && back.emb_dim == 768 && back.qkv_bias == 0 &&
              back.drop_rate == 0.1);
    cr_assert(strstr(js, "\"vocab_size\":65"), "%s", js);
    free(js);
}

static void expect_json_error(const char *json, attn_status code, const char *needle) {
    attn_gpt_config c = tiny_cfg(0), before = c;
    attn_error err;
    cr_assert_eq(attn_gpt_config_set_json(&c, json, &err), code, "%s -> %s", json, err.msg);
    cr_assert(strstr(err.msg, needle), "%s: message '%s' lacks '%s'", json, err.msg, needle);
    cr_assert(memcmp(&c, &before, sizeof c) == 0, "a failed parse leaves the config unchanged");
}

Test(gpt, json_errors_name_the_problem) {
    expect_json_error("{\"emb_dim\": 64, \"n_head\": 4}", ATTN_ERR_NOT_FOUND,
                      "unknown config key 'n_head'");
    expect_json_error("{\"emb_dim\": 770, \"n_heads\": 12}", ATTN_ERR_INVALID_ARG,
                      "not divisible by n_heads");
    expect_json_error("{\"emb_dim\": 64.5}", ATTN_ERR_INVALID_ARG, "'emb_dim' must be an integer");
    expect_json_error("{\"n_layers\": \"4\"}", ATTN_ERR_INVALID_ARG, "'n_layers'");
    expect_json_error("{\"qkv_bias\": 2}", ATTN_ERR_INVALID_ARG, "'qkv_bias'");
    expect_json_error("{\"emb_dim\": 64, \"embedding_dim\": 32}", ATTN_ERR_INVALID_ARG,
                      "'emb_dim' and 'embedding_dim'");
    expect_json_error("{\"emb_dim\": 64, \"n_heads\": 4, \"head_size\": 8}", ATTN_ERR_INVALID_ARG,
                      "head_size 8");
    expect_json_error("[1, 2]", ATTN_ERR_FORMAT, "JSON object");
    expect_json_error("{\"emb_dim\": ", ATTN_ERR_FORMAT, "not valid JSON");
    /* Equal values under both names are fine. */
    attn_gpt_config c = tiny_cfg(0);
    cr_assert_eq(attn_gpt_config_set_json(&c, "{\"emb_dim\": 16, \"embedding_dim\": 16}", NULL),
                 ATTN_OK);
    /* set_key: unknown -> NOT_FOUND so a caller can try its own keys. */
    cJSON *v = cJSON_CreateNumber(0.001);
    attn_error err;
    cr_assert_eq(attn_gpt_config_set_key(&c, "learning_rate", v, &err), ATTN_ERR_NOT_FOUND);
    cr_assert_eq(attn_gpt_config_set_key(&c, "dropout_rate", v, &err), ATTN_OK);
    cr_assert(c.drop_rate == 0.001);
    cJSON_Delete(v);
}

Test(gpt, json_file_errors_name_the_path) {
    attn_gpt_config c = tiny_cfg(0);
    attn_error err;
    cr_assert_eq(attn_gpt_config_load_json(&c, "/nonexistent/cfg.json", &err), ATTN_ERR_IO);
    cr_assert(strstr(err.msg, "/nonexistent/cfg.json"), "%s", err.msg);
    char path[] = "/tmp/attn_gpt_cfg_XXXXXX";
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    FILE *f = fdopen(fd, "w");
    fputs("{\"layers_num\": 5, \"bogus\": 1}", f);
    fclose(f);
    cr_assert_eq(attn_gpt_config_load_json(&c, path, &err), ATTN_ERR_NOT_FOUND);
    cr_assert(strstr(err.msg, path) && strstr(err.msg, "'bogus'"), "%s", err.msg);
    f = fopen(path, "w");
    fputs("{\"layers_num\": 5}", f);
    fclose(f);
    cr_assert_eq(attn_gpt_config_load_json(&c, path, &err), ATTN_OK);
    cr_assert_eq(c.n_layers, 5);
    remove(path);
}

Test(gpt, bad_inputs_and_call_order) {
    attn_gpt_config cfg = tiny_cfg(0);
    attn_gpt m;
    make_model(&m, &cfg, 3);
    attn_gpt_acts acts;
    attn_error err;
    cr_assert_eq(attn_gpt_acts_init(&acts, &m, 1, 9, &err), ATTN_ERR_SHAPE, "T > context_length");
    cr_assert(strstr(err.msg, "context_length 8"), "%s", err.msg);
    cr_assert_eq(attn_gpt_acts_init(&acts, &m, 1, 4, &err), ATTN_OK);
    const int32_t ids[4] = {1, 2, 11, 3};
    cr_assert_eq(attn_gpt_forward(&m, ids, NULL, 1, 4, NULL, &acts, NULL, &err),
                 ATTN_ERR_INVALID_ARG);
    cr_assert(strstr(err.msg, "token id 11 at (batch 0, position 2)"), "%s", err.msg);
    const int64_t ids64[4] = {1, 2, -1, 3};
    cr_assert_eq(attn_gpt_forward_i64(&m, ids64, NULL, 1, 4, NULL, &acts, NULL, &err),
                 ATTN_ERR_INVALID_ARG);
    cr_assert(strstr(err.msg, "-1"), "%s", err.msg);
    const int32_t ok[4] = {1, 2, 3, 4};
    cr_assert_eq(attn_gpt_forward(&m, ok, NULL, 2, 4, NULL, &acts, NULL, &err), ATTN_ERR_SHAPE);
    cr_assert_eq(attn_gpt_forward(&m, ok, NULL, 1, 4, NULL, &acts, NULL, &err), ATTN_OK);
    cr_assert(isnan(acts.loss));
    cr_assert_eq(attn_gpt_backward(&m, &acts, 1.0f, &err), ATTN_ERR_STATE);
    cr_assert(strstr(err.msg, "targets"), "%s", err.msg);
    /* int64 and int32 paths agree. */
    const int64_t ok64[4] = {1, 2, 3, 4};
    float *l32 = malloc(4 * 11 * sizeof(float));
    memcpy(l32, acts.logits, 4 * 11 * sizeof(float));
    float loss = 0;
    cr_assert_eq(attn_gpt_forward_i64(&m, ok64, ok64, 1, 4, NULL, &acts, &loss, &err), ATTN_OK);
    cr_assert(memcmp(l32, acts.logits, 4 * 11 * sizeof(float)) == 0);
    cr_assert(loss > 0);
    free(l32);
    attn_gpt_acts_free(&acts);
    attn_gpt_free(&m);
}

Test(gpt, training_mode_dropout) {
    attn_gpt_config cfg = tiny_cfg(0);
    cfg.drop_rate = 0.3;
    attn_gpt m;
    make_model(&m, &cfg, 5);
    attn_gpt_acts acts;
    cr_assert_eq(attn_gpt_acts_init(&acts, &m, 2, 6, NULL), ATTN_OK);
    int32_t ids[12], tg[12];
    for (int i = 0; i < 12; i++)
        ids[i] = (i * 7) % 11, tg[i] = (i * 5 + 1) % 11;
    float eval_loss, l1, l2, l3;
    cr_assert_eq(attn_gpt_forward(&m, ids, tg, 2, 6, NULL, &acts, &eval_loss, NULL), ATTN_OK);
    attn_rng rng, snap;
    attn_rng_seed(&rng, 99);
    snap = rng;
    attn_forward_mode train = {1, &rng, ATTN_STREAM_TORCH_CPU};
    cr_assert_eq(attn_gpt_forward(&m, ids, tg, 2, 6, &train, &acts, &l1, NULL), ATTN_OK);
    cr_assert(l1 != eval_loss, "dropout changes the loss");
    cr_assert(memcmp(&rng, &snap, sizeof rng) != 0, "dropout consumed the generator");
    cr_assert_eq(attn_gpt_forward(&m, ids, tg, 2, 6, &train, &acts, &l2, NULL), ATTN_OK);
    cr_assert(l1 != l2, "fresh masks each call");
    rng = snap;
    cr_assert_eq(attn_gpt_forward(&m, ids, tg, 2, 6, &train, &acts, &l3, NULL), ATTN_OK);
    cr_assert(l1 == l3, "same generator state, same masks");
    /* Draw count: drop_emb (B*T*C) + per layer: weights (B*H*T*T) + 2 * (B*T*C),
     * two 32-bit draws per element on the torch-cpu stream. */
    attn_rng count = snap;
    const size_t n = 2 * 6 * 8 + 2 * (2 * 2 * 6 * 6 + 2 * 2 * 6 * 8);
    for (size_t i = 0; i < n; i++)
        attn_rng_u64(&count);
    cr_assert(memcmp(&count, &rng, sizeof rng) == 0, "PyTorch's mask order and sizes");
    cr_assert_eq(attn_gpt_backward(&m, &acts, 1.0f, NULL), ATTN_OK);
    attn_gpt_acts_free(&acts);
    attn_gpt_free(&m);
}

Test(gpt, kv_cache_matches_full_forward) {
    attn_gpt_config cfg = tiny_cfg(1);
    cfg.drop_rate = 0.2; /* eval: no effect */
    attn_gpt m;
    make_model(&m, &cfg, 11);
    const int T = 8, V = cfg.vocab_size;
    const int32_t ids[8] = {3, 1, 4, 1, 5, 9, 2, 6};
    attn_gpt_acts acts;
    attn_error err;
    cr_assert_eq(attn_gpt_acts_init(&acts, &m, 1, T, &err), ATTN_OK);
    cr_assert_eq(attn_gpt_forward(&m, ids, NULL, 1, T, NULL, &acts, NULL, &err), ATTN_OK);
    attn_gpt_kv_cache kv;
    cr_assert_eq(attn_gpt_kv_init(&kv, &m, &err), ATTN_OK);
    float logits[11];
    for (int t = 0; t < T; t++) {
        cr_assert_eq(attn_gpt_kv_step(&m, &kv, ids[t], logits, &err), ATTN_OK, "%s", err.msg);
        for (int v = 0; v < V; v++) {
            const float want = acts.logits[t * V + v];
            cr_assert(fabsf(logits[v] - want) <= 1e-5f + 1e-5f * fabsf(want),
                      "t %d v %d: kv %.9g full %.9g", t, v, logits[v], want);
        }
    }
    cr_assert_eq(kv.len, T);
    cr_assert_eq(attn_gpt_kv_step(&m, &kv, 0, logits, &err), ATTN_ERR_STATE, "cache full");
    cr_assert(strstr(err.msg, "full"), "%s", err.msg);
    /* Slide: re-prime with the last 4 tokens == a full forward on them. */
    cr_assert_eq(attn_gpt_kv_prefill(&m, &kv, ids + 4, 4, logits, &err), ATTN_OK);
    attn_gpt_acts a4;
    cr_assert_eq(attn_gpt_acts_init(&a4, &m, 1, 4, &err), ATTN_OK);
    cr_assert_eq(attn_gpt_forward(&m, ids + 4, NULL, 1, 4, NULL, &a4, NULL, &err), ATTN_OK);
    for (int v = 0; v < V; v++)
        cr_assert(fabsf(logits[v] - a4.logits[3 * V + v]) <= 1e-5f + 1e-5f * fabsf(logits[v]));
    cr_assert_eq(kv.len, 4);
    cr_assert_eq(attn_gpt_kv_step(&m, &kv, 12, logits, &err), ATTN_ERR_INVALID_ARG);
    cr_assert_eq(attn_gpt_kv_prefill(&m, &kv, ids, 9, logits, &err), ATTN_ERR_SHAPE);
    attn_gpt_acts_free(&a4);
    attn_gpt_kv_free(&kv);
    attn_gpt_acts_free(&acts);
    attn_gpt_free(&m);
}

/* ------------------------------------------------- GPT-2's init */

/* Mean and standard deviation of n floats (double sums). */
static void moments(const float *x, size_t n, double *mean, double *sd) {
    double s = 0, ss = 0;
    for (size_t i = 0; i < n; i++)
        s += x[i];
    *mean = s / (double)n;
    for (size_t i = 0; i < n; i++)
        ss += ((double)x[i] - *mean) * ((double)x[i] - *mean);
    *sd = sqrt(ss / (double)n);
}

/* Every tensor of a model drawn with init gpt2 has GPT-2's statistics: each
 * matrix N(0, 0.02) but the residual projections (att.out_proj,
 * ff.layers.2) N(0, 0.02 / sqrt(2 n_layers)); biases and shifts 0, scales
 * 1 (llm.c's gpt2_build_from_random, nanoGPT's and HF's _init_weights). */
static void expect_gpt2_stats(const attn_gpt *m) {
    const double resid = 0.02 / sqrt(2.0 * m->cfg.n_layers);
    const attn_param_list *L = attn_gpt_params(m);
    for (int i = 0; i < L->count; i++) {
        const attn_param *p = &L->items[i];
        const char *n = p->name;
        if (p->ndim == 1) {
            const float want = strstr(n, ".scale") ? 1.0f : 0.0f;
            for (size_t j = 0; j < p->numel; j++)
                cr_assert_eq(p->data[j], want, "%s[%zu] = %g", n, j, (double)p->data[j]);
            continue;
        }
        const int r = strstr(n, "att.out_proj.weight") || strstr(n, "ff.layers.2.weight");
        const double want = r ? resid : 0.02;
        double mean, sd;
        moments(p->data, p->numel, &mean, &sd);
        /* n >= 4096 draws: sd within 5% (> 4 standard errors), mean within 5 of them */
        cr_expect(fabs(sd / want - 1) < 0.05, "%s: sd %g, GPT-2's %g", n, sd, want);
        cr_expect(fabs(mean) < 5 * want / sqrt((double)p->numel), "%s: mean %g", n, mean);
    }
}

static attn_gpt_config gpt2_small(void) {
    attn_gpt_config c = {.vocab_size = 1000,
                         .context_length = 64,
                         .emb_dim = 64,
                         .n_heads = 4,
                         .n_layers = 6,
                         .drop_rate = 0.1,
                         .qkv_bias = 1,
                         .tie_weights = 1,
                         .init = ATTN_GPT_INIT_GPT2};
    return c;
}

/* The mean cross-entropy of random tokens under m. */
static float random_tokens_loss(attn_gpt *m) {
    enum { B = 4, T = 64 };
    int32_t ids[B * T], tg[B * T];
    attn_rng r;
    attn_rng_seed(&r, 5);
    for (int i = 0; i < B * T; i++) {
        ids[i] = (int32_t)(attn_rng_u32(&r) % (uint32_t)m->cfg.vocab_size);
        tg[i] = (int32_t)(attn_rng_u32(&r) % (uint32_t)m->cfg.vocab_size);
    }
    attn_gpt_acts a;
    attn_error err;
    float loss = NAN;
    cr_assert_eq(attn_gpt_acts_init(&a, m, B, T, &err), ATTN_OK, "%s", err.msg);
    cr_assert_eq(attn_gpt_forward(m, ids, tg, B, T, NULL, &a, &loss, &err), ATTN_OK, "%s", err.msg);
    attn_gpt_acts_free(&a);
    return loss;
}

Test(gpt, gpt2_init_has_gpt2s_statistics_and_starts_at_ln_vocab) {
    attn_gpt_config c = gpt2_small();
    attn_gpt m;
    attn_rng rng;
    attn_error err;
    attn_rng_seed(&rng, 42);
    cr_assert_eq(attn_gpt_init(&m, &c, &rng, &err), ATTN_OK, "%s", err.msg);
    cr_assert(m.out_head.weight == m.tok_emb.weight, "the head is tok_emb's matrix");
    cr_assert_null(attn_param_list_find(attn_gpt_params(&m), "out_head.weight"));
    expect_gpt2_stats(&m);
    const float loss = random_tokens_loss(&m);
    cr_expect(fabs(loss - log(1000.0)) < 0.05, "initial loss %g, ln 1000 = %g", loss, log(1000.0));
    attn_gpt_free(&m);
    /* Untied: the head is its own N(0, 0.02) matrix. */
    c.tie_weights = 0;
    attn_rng_seed(&rng, 42);
    cr_assert_eq(attn_gpt_init(&m, &c, &rng, &err), ATTN_OK, "%s", err.msg);
    cr_assert_not_null(attn_param_list_find(attn_gpt_params(&m), "out_head.weight"));
    expect_gpt2_stats(&m);
    attn_gpt_free(&m);
}

/* A tied model is drawn with GPT-2's init whatever init says: the book's
 * N(0, 1) embedding as the head would start far above ln(vocab). The
 * config reads init gpt2; its JSON gives the struct back. */
Test(gpt, a_tied_model_is_drawn_gpt2) {
    attn_gpt_config g = gpt2_small(), b = gpt2_small();
    b.init = ATTN_GPT_INIT_BOOK;
    cr_expect_eq(attn_gpt_config_init_kind(&b), ATTN_GPT_INIT_GPT2);
    char v[16];
    attn_gpt_key_value(&b, ATTN_GPT_KEY_INIT, v, sizeof v);
    cr_expect_str_eq(v, "gpt2");
    attn_gpt mg, mb;
    attn_rng r1, r2;
    attn_error err;
    attn_rng_seed(&r1, 9);
    attn_rng_seed(&r2, 9);
    cr_assert_eq(attn_gpt_init(&mg, &g, &r1, &err), ATTN_OK, "%s", err.msg);
    cr_assert_eq(attn_gpt_init(&mb, &b, &r2, &err), ATTN_OK, "%s", err.msg);
    const attn_param_list *L = attn_gpt_params(&mg), *K = attn_gpt_params(&mb);
    cr_assert_eq(L->count, K->count);
    for (int i = 0; i < L->count; i++)
        cr_assert(memcmp(L->items[i].data, K->items[i].data, L->items[i].numel * sizeof(float)) ==
                      0,
                  "%s", L->items[i].name);
    attn_gpt_free(&mg);
    attn_gpt_free(&mb);
    /* Untied with the book's init: the book's draws, not GPT-2's. */
    b.tie_weights = 0;
    attn_gpt_key_value(&b, ATTN_GPT_KEY_INIT, v, sizeof v);
    cr_expect_str_eq(v, "book");
    attn_rng_seed(&r1, 9);
    cr_assert_eq(attn_gpt_init(&mb, &b, &r1, &err), ATTN_OK, "%s", err.msg);
    double mean, sd;
    moments(mb.tok_emb.weight, (size_t)b.vocab_size * (size_t)b.emb_dim, &mean, &sd);
    cr_expect(fabs(sd - 1) < 0.05, "book's tok_emb N(0, 1): sd %g", sd);
    attn_gpt_free(&mb);
    /* JSON: "init" is written as set, and read back. */
    char *js = NULL;
    cr_assert_eq(attn_gpt_config_to_json(&g, &js, &err), ATTN_OK);
    cr_expect(strstr(js, "\"tie_weights\":true,\"init\":\"gpt2\"}"), "%s", js);
    attn_gpt_config back = {0};
    cr_assert_eq(attn_gpt_config_set_json(&back, js, &err), ATTN_OK, "%s", err.msg);
    cr_expect(memcmp(&back, &g, sizeof g) == 0);
    free(js);
    back = b;
    cr_expect_neq(attn_gpt_config_set_json(&back, "{\"init\": \"gpt3\"}", &err), ATTN_OK);
    cr_expect(strstr(err.msg, "'init' must be one of book, gpt2"), "%s", err.msg);
}
