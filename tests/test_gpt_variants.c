/* The GPT's variant keys (issue 20: norm, act, tie_weights, pos_emb none,
 * and the attention keys refused until the attention core is built):
 *
 * - PyTorch parity per variant: tests/fixtures/gpt_variants/<case>.safetensors,
 *   written by `/usr/bin/python3 scripts/gpt_parity.py gen-variants DIR`
 *   (torch 1.13.1, python/attn/variants.py): init after torch.manual_seed,
 *   eval and training-mode logits (<= 1e-5), loss and gradients (<= 1e-4).
 *   With ATTN_GPT_VARIANT_DUMP=FILE and ATTN_GPT_VARIANT_CONFIG=JSON the
 *   `dump` test writes attn's own model for `gpt_parity.py check`
 *   (tests/gpt_variants_live.sh).
 * - the KV-cached step equals the full forward (fp32; bf16 weights within
 *   bf16's error), 1 and 2 threads give the same bits, a tiny model of each
 *   variant trains (the loss falls) and resumes bit for bit.
 * - the key table, JSON and the refusals; and the book's model unchanged:
 *   tests/fixtures/book_run/ is a run made by `attn train` before the keys
 *   existed (main at bde0e88: the to-be corpus below, context_length 8,
 *   emb_dim 16, n_heads 2, n_layers 1, drop_rate 0.1, qkv_bias, batch 3,
 *   6 steps), with that build's `attn forward gpt` logits of ids.npy: it
 *   loads, gives those logits, and re-saves byte for byte. */
#define _POSIX_C_SOURCE 200809L
#include <cjson/cJSON.h>
#include <criterion/criterion.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "attn/attention_weights.h"
#include "attn/checkpoint.h"
#include "attn/cuda.h"
#include "attn/fileio.h"
#include "attn/gpt.h"
#include "attn/npy.h"
#include "attn/safetensors.h"
#include "attn/train.h"
#include "support/gpt_ref.h"
#include "support/trainer_check.h"
#include "train/trainer.h"

#define FIXTURES ATTN_SOURCE_DIR "/tests/fixtures/gpt_variants/"
#define BOOK_RUN ATTN_SOURCE_DIR "/tests/fixtures/book_run"

/* scripts/gpt_parity.py's VARIANTS, one fixture each. */
static const char *const CASES[] = {
    "rmsnorm",     "relu2",     "swiglu", "tie_weights", "pos_none", "combo",   "gqa",
    "mqa",         "rope",      "alibi",  "window",      "qk_norm",  "softcap", "attention_combo",
    "alibi_combo", "gpt2_init", NULL};

/* The same variants as config keys, for attn's own models. */
static const char *const VARIANTS[] = {
    "{\"norm\": \"rmsnorm\"}", "{\"act\": \"relu2\"}", "{\"act\": \"swiglu\"}",
    "{\"tie_weights\": true}", "{\"pos_emb\": \"none\"}",
    "{\"norm\": \"rmsnorm\", \"act\": \"swiglu\", \"tie_weights\": true, \"pos_emb\": \"none\"}",
    "{\"norm\": \"rmsnorm\", \"act\": \"relu2\", \"tie_weights\": true}",
    /* the attention keys (SMALL has 3 heads, the others 2 or 4) */
    "{\"n_kv_heads\": 1}", "{\"pos_emb\": \"rope\"}", "{\"pos_emb\": \"alibi\"}", "{\"window\": 3}",
    "{\"qk_norm\": true}", "{\"softcap\": 0.5}",
    "{\"pos_emb\": \"rope\", \"window\": 4, \"qk_norm\": true, \"softcap\": 1.5, "
    "\"n_kv_heads\": 1, \"norm\": \"rmsnorm\", \"act\": \"swiglu\"}",
    NULL};

static attn_gpt_config variant_cfg(attn_gpt_config base, const char *json) {
    attn_error err;
    cr_assert_eq(attn_gpt_config_set_json(&base, json, &err), ATTN_OK, "%s: %s", json, err.msg);
    return base;
}

/* max |got - want| / max(max |want|, floor). */
static double max_rel_floor(const float *got, const float *want, size_t n, double floor) {
    double md = 0, mr = 0;
    for (size_t i = 0; i < n; i++) {
        md = fmax(md, fabs((double)got[i] - (double)want[i]));
        mr = fmax(mr, fabs((double)want[i]));
    }
    return md / fmax(mr, floor);
}

static const attn_st_tensor *need(const attn_safetensors *st, const char *name, const char *file) {
    const attn_st_tensor *t = attn_safetensors_find(st, name);
    cr_assert_not_null(t, "%s lacks '%s'", file, name);
    return t;
}

/* ------------------------------------------------- PyTorch parity */

/* A fixture's model: attn's init from its seed must be PyTorch's, tensor
 * for tensor (no more, no fewer). */
static void fixture_model(const char *name, attn_safetensors *st, attn_gpt *m, char *file,
                          size_t cap) {
    attn_error err;
    snprintf(file, cap, FIXTURES "%s.safetensors", name);
    cr_assert_eq(attn_safetensors_read(file, st, &err), ATTN_OK, "%s", err.msg);
    attn_gpt_config cfg;
    attn_gpt_config_preset("tiny", &cfg, NULL);
    cr_assert_eq(attn_gpt_config_set_json(&cfg, attn_safetensors_meta(st, "config"), &err), ATTN_OK,
                 "%s: %s", file, err.msg);
    attn_rng rng;
    attn_rng_seed(&rng, (uint64_t)atoi(attn_safetensors_meta(st, "seed")));
    cr_assert_eq(attn_gpt_init(m, &cfg, &rng, &err), ATTN_OK, "%s: %s", file, err.msg);
    const attn_param_list *L = attn_gpt_params(m);
    int weights = 0;
    for (int i = 0; i < st->count; i++)
        weights += strchr(st->tensors[i].name, '.') && strncmp(st->tensors[i].name, "eval.", 5) &&
                   strncmp(st->tensors[i].name, "train.", 6);
    cr_assert_eq(weights, L->count, "%s: PyTorch has %d parameters, attn %d", name, weights,
                 L->count);
    for (int i = 0; i < L->count; i++) {
        const attn_st_tensor *t = need(st, L->items[i].name, file);
        cr_assert_eq(t->numel, L->items[i].numel, "%s: %s", name, L->items[i].name);
        /* normal_ (embeddings) may differ by an ulp: PyTorch's SIMD log/sin. */
        const double e = max_rel_floor(L->items[i].data, t->data, t->numel, 1e-12);
        cr_assert(e <= 1e-6, "%s: init of %s: max rel err %g", name, L->items[i].name, e);
        memcpy(L->items[i].data, t->data, t->numel * sizeof(float)); /* exactly PyTorch's */
    }
}

static void parity_case(const char *name, int training) {
    attn_safetensors st;
    attn_gpt m;
    attn_error err;
    char file[512], key[ATTN_PARAM_NAME_MAX + 32];
    fixture_model(name, &st, &m, file, sizeof file);
    const attn_st_tensor *ids_t = need(&st, "ids", file);
    const int B = (int)ids_t->shape[0], T = (int)ids_t->shape[1];
    attn_gpt_acts acts;
    cr_assert_eq(attn_gpt_acts_init(&acts, &m, B, T, &err), ATTN_OK, "%s", err.msg);
    attn_rng rng;
    attn_rng_seed(&rng, (uint64_t)atoi(attn_safetensors_meta(&st, "drop_seed")));
    attn_forward_mode mode = {training, &rng, ATTN_STREAM_TORCH_CPU};
    float loss;
    cr_assert_eq(attn_gpt_forward_i64(&m, ids_t->data, need(&st, "targets", file)->data, B, T,
                                      &mode, &acts, &loss, &err),
                 ATTN_OK, "%s", err.msg);
    const char *tag = training ? "train" : "eval";
    snprintf(key, sizeof key, "%s.logits", tag);
    const attn_st_tensor *lt = need(&st, key, file);
    const double el = max_rel_floor(acts.logits, lt->data, lt->numel, 1e-12);
    cr_assert(el <= 1e-5, "%s %s logits: max rel err %g", name, tag, el);
    snprintf(key, sizeof key, "%s.loss", tag);
    const float want = *(const float *)need(&st, key, file)->data;
    cr_assert(fabsf(loss - want) <= 1e-5f * fabsf(want), "%s %s loss %.9g, PyTorch %.9g", name, tag,
              loss, want);
    attn_gpt_zero_grad(&m);
    cr_assert_eq(attn_gpt_backward(&m, &acts, 1.0f, &err), ATTN_OK, "%s", err.msg);
    const attn_param_list *L = attn_gpt_params(&m);
    for (int i = 0; i < L->count; i++) {
        snprintf(key, sizeof key, "%s.grad.%s", tag, L->items[i].name);
        const attn_st_tensor *g = need(&st, key, file);
        const double e = max_rel_floor(L->items[i].grad, g->data, g->numel, 1e-3);
        cr_assert(e <= 1e-4, "%s %s grad of %s: max rel err %g", name, tag, L->items[i].name, e);
    }
    attn_gpt_acts_free(&acts);
    attn_gpt_free(&m);
    attn_safetensors_free(&st);
}

Test(gpt_variants, eval_logits_loss_grads_match_torch) {
    for (int c = 0; CASES[c]; c++)
        parity_case(CASES[c], 0);
}

Test(gpt_variants, training_dropout_logits_loss_grads_match_torch) {
    for (int c = 0; CASES[c]; c++)
        parity_case(CASES[c], 1);
}

/* The tied model lists the shared matrix once, as tok_emb.weight; no
 * pos_emb table without learned positions; RMSNorm has no shift; SwiGLU's
 * layers.0 is (2H, C) with H = 8 ceil(C / 3). */
Test(gpt_variants, parameters_as_pytorch_names_them) {
    const attn_gpt_config base = {.vocab_size = 11,
                                  .context_length = 8,
                                  .emb_dim = 16,
                                  .n_heads = 2,
                                  .n_layers = 1,
                                  .qkv_bias = 0};
    attn_gpt m;
    attn_error err;
    attn_gpt_config c = variant_cfg(base, VARIANTS[5]);
    cr_assert_eq(attn_gpt_init(&m, &c, NULL, &err), ATTN_OK, "%s", err.msg);
    const attn_param_list *L = attn_gpt_params(&m);
    cr_expect_null(attn_param_list_find(L, "out_head.weight"));
    cr_expect_null(attn_param_list_find(L, "pos_emb.weight"));
    cr_expect_null(attn_param_list_find(L, "final_norm.shift"));
    cr_expect_null(attn_param_list_find(L, "trf_blocks.0.norm1.shift"));
    const attn_param *w0 = attn_param_list_find(L, "trf_blocks.0.ff.layers.0.weight");
    const attn_param *w2 = attn_param_list_find(L, "trf_blocks.0.ff.layers.2.weight");
    cr_assert(w0 && w2);
    cr_expect(w0->shape[0] == 2 * 48 && w0->shape[1] == 16, "layers.0 (%lld, %lld)",
              (long long)w0->shape[0], (long long)w0->shape[1]);
    cr_expect(w2->shape[0] == 16 && w2->shape[1] == 48);
    cr_expect(m.out_head.weight == m.tok_emb.weight &&
              m.out_head.grad_weight == m.tok_emb.grad_weight);
    /* The plan's count (attn train --dry-run) is the model's. */
    for (int v = 0; VARIANTS[v]; v++) {
        attn_gpt g;
        attn_gpt_config vc = variant_cfg(base, VARIANTS[v]);
        cr_assert_eq(attn_gpt_init(&g, &vc, NULL, &err), ATTN_OK, "%s", err.msg);
        attn_train_config t;
        attn_train_preset("tiny", &(attn_gpt_config){0}, &t, NULL);
        attn_train_plan p;
        attn_train_plan_of(&vc, &t, &p);
        cr_expect_eq(p.n_params, attn_gpt_num_params(&g), "%s: plan %zu, model %zu", VARIANTS[v],
                     p.n_params, attn_gpt_num_params(&g));
        attn_gpt_free(&g);
    }
    attn_gpt_free(&m);
}

/* attn's own model of ATTN_GPT_VARIANT_CONFIG, written for
 * scripts/gpt_parity.py check (tests/gpt_variants_live.sh). */
Test(gpt_variants, dump) {
    const char *path = getenv("ATTN_GPT_VARIANT_DUMP");
    const char *json = getenv("ATTN_GPT_VARIANT_CONFIG");
    if (!path || !*path || !json) return;
    const char *tr = getenv("ATTN_GPT_VARIANT_TRAINING");
    const int training = tr && strcmp(tr, "1") == 0;
    const attn_gpt_config base = {.vocab_size = 65,
                                  .context_length = 32,
                                  .emb_dim = 48,
                                  .n_heads = 4,
                                  .n_layers = 3,
                                  .drop_rate = 0.1,
                                  .qkv_bias = 1};
    attn_gpt_config cfg = variant_cfg(base, json);
    const int B = 3, T = 32;
    attn_rng rng;
    attn_rng_seed(&rng, 4321);
    attn_gpt m;
    attn_error err;
    cr_assert_eq(attn_gpt_init(&m, &cfg, &rng, &err), ATTN_OK, "%s", err.msg);
    int64_t ids[3 * 32], tg[3 * 32];
    for (int i = 0; i < B * T; i++) {
        ids[i] = attn_rng_u32(&rng) % 65;
        tg[i] = attn_rng_u32(&rng) % 65;
    }
    attn_gpt_acts acts;
    cr_assert_eq(attn_gpt_acts_init(&acts, &m, B, T, &err), ATTN_OK);
    attn_rng drop;
    attn_rng_seed(&drop, 99);
    attn_forward_mode mode = {training, &drop, ATTN_STREAM_TORCH_CPU};
    float loss;
    cr_assert_eq(attn_gpt_forward_i64(&m, ids, tg, B, T, &mode, &acts, &loss, &err), ATTN_OK);
    attn_gpt_zero_grad(&m);
    cr_assert_eq(attn_gpt_backward(&m, &acts, 1.0f, &err), ATTN_OK);
    const attn_param_list *L = attn_gpt_params(&m);
    attn_st_entry *e = calloc((size_t)(2 * L->count + 4), sizeof *e);
    char(*names)[ATTN_PARAM_NAME_MAX + 8] = calloc((size_t)L->count, sizeof *names);
    int k = 0;
    for (int i = 0; i < L->count; i++) {
        const attn_param *p = &L->items[i];
        snprintf(names[i], sizeof names[i], "grad.%s", p->name);
        e[k++] =
            (attn_st_entry){p->name, "F32", p->ndim, p->shape, p->data, p->numel * sizeof(float)};
        e[k++] =
            (attn_st_entry){names[i], "F32", p->ndim, p->shape, p->grad, p->numel * sizeof(float)};
    }
    const int64_t bt[2] = {B, T}, btv[3] = {B, T, cfg.vocab_size}, one[1] = {1};
    e[k++] = (attn_st_entry){"ids", "I64", 2, bt, ids, sizeof ids};
    e[k++] = (attn_st_entry){"targets", "I64", 2, bt, tg, sizeof tg};
    e[k++] = (attn_st_entry){"logits",    "F32",
                             3,           btv,
                             acts.logits, (size_t)B * T * (size_t)cfg.vocab_size * sizeof(float)};
    e[k++] = (attn_st_entry){"loss", "F32", 1, one, &loss, sizeof loss};
    char *js = NULL;
    cr_assert_eq(attn_gpt_config_to_json(&cfg, &js, &err), ATTN_OK);
    const attn_st_kv meta[3] = {
        {"config", js}, {"training", training ? "1" : "0"}, {"drop_seed", "99"}};
    cr_assert_eq(attn_safetensors_write(path, e, k, meta, 3, &err), ATTN_OK, "%s", err.msg);
    free(js);
    free(names);
    free(e);
    attn_gpt_acts_free(&acts);
    attn_gpt_free(&m);
}

/* ------------------------------------------------- attn's own models */

/* A model with non-trivial norm parameters (their gradients matter too). */
static void make_model(attn_gpt *m, const attn_gpt_config *cfg, uint64_t seed) {
    attn_rng rng;
    attn_rng_seed(&rng, seed);
    attn_error err;
    cr_assert_eq(attn_gpt_init(m, cfg, &rng, &err), ATTN_OK, "%s", err.msg);
    const attn_param_list *L = attn_gpt_params(m);
    for (int i = 0; i < L->count; i++)
        if (strstr(L->items[i].name, "norm")) {
            gref_fill(L->items[i].data, L->items[i].numel, (uint32_t)i, 0.3f);
            if (strstr(L->items[i].name, "scale"))
                for (size_t j = 0; j < L->items[i].numel; j++)
                    L->items[i].data[j] += 1.0f;
        }
}

static const attn_gpt_config SMALL = {.vocab_size = 11,
                                      .context_length = 8,
                                      .emb_dim = 12,
                                      .n_heads = 3,
                                      .n_layers = 2,
                                      .drop_rate = 0.2,
                                      .qkv_bias = 1};

/* Token by token through the KV cache == the rows of one full forward; bf16
 * weight copies stay within bf16's error of them. */
Test(gpt_variants, kv_cache_matches_full_forward) {
    const int T = 8, V = SMALL.vocab_size;
    const int32_t ids[8] = {3, 1, 4, 1, 5, 9, 2, 6};
    for (int v = 0; VARIANTS[v]; v++) {
        const attn_gpt_config cfg = variant_cfg(SMALL, VARIANTS[v]);
        attn_gpt m;
        make_model(&m, &cfg, 11);
        attn_gpt_acts acts;
        attn_error err;
        cr_assert_eq(attn_gpt_acts_init(&acts, &m, 1, T, &err), ATTN_OK);
        cr_assert_eq(attn_gpt_forward(&m, ids, NULL, 1, T, NULL, &acts, NULL, &err), ATTN_OK);
        attn_gpt_kv_cache kv, kb;
        cr_assert_eq(attn_gpt_kv_init(&kv, &m, &err), ATTN_OK, "%s", err.msg);
        cr_assert_eq(attn_gpt_kv_init(&kb, &m, &err), ATTN_OK, "%s", err.msg);
        cr_assert_eq(attn_gpt_kv_set_precision(&kb, &m, ATTN_PRECISION_BF16, &err), ATTN_OK);
        float logits[11], lb[11];
        for (int t = 0; t < T; t++) {
            cr_assert_eq(attn_gpt_kv_step(&m, &kv, ids[t], logits, &err), ATTN_OK, "%s", err.msg);
            cr_assert_eq(attn_gpt_kv_step(&m, &kb, ids[t], lb, &err), ATTN_OK, "%s", err.msg);
            const float *want = acts.logits + t * V;
            for (int j = 0; j < V; j++)
                cr_assert(fabsf(logits[j] - want[j]) <= 1e-5f + 1e-5f * fabsf(want[j]),
                          "%s t %d v %d: kv %.9g full %.9g", VARIANTS[v], t, j, logits[j], want[j]);
            const double e = max_rel_floor(lb, want, (size_t)V, 1e-3);
            cr_assert(e <= 3e-2, "%s t %d: bf16 kv max rel err %g", VARIANTS[v], t, e);
        }
        attn_gpt_kv_free(&kv);
        attn_gpt_kv_free(&kb);
        attn_gpt_acts_free(&acts);
        attn_gpt_free(&m);
    }
}

/* A window and no learned table: the KV cache is a ring of window rows and
 * generation runs past context_length; each token's logits equal the full
 * forward's last row on the context_length tokens ending at it (the window
 * reaches back n_layers (W - 1) < context_length tokens, so the crop loses
 * nothing; RoPE sees shifted absolute positions, so float rounding of its
 * angles only). */
Test(gpt_variants, windowed_kv_cache_runs_past_the_context) {
    const char *keys[] = {"{\"pos_emb\": \"rope\", \"window\": 3}",
                          "{\"pos_emb\": \"alibi\", \"window\": 3, \"n_kv_heads\": 1}",
                          "{\"pos_emb\": \"none\", \"window\": 3, \"qk_norm\": true}"};
    const double tol[] = {1e-4, 1e-5, 1e-5};
    const int T = SMALL.context_length, V = SMALL.vocab_size, steps = 30;
    int32_t ids[30];
    for (int i = 0; i < steps; i++)
        ids[i] = (i * 7 + 2) % V;
    for (int v = 0; v < 3; v++) {
        const attn_gpt_config cfg = variant_cfg(SMALL, keys[v]);
        attn_gpt m;
        make_model(&m, &cfg, 13);
        attn_gpt_kv_cache kv;
        attn_gpt_acts acts;
        attn_error err;
        cr_assert_eq(attn_gpt_kv_init(&kv, &m, &err), ATTN_OK, "%s", err.msg);
        cr_expect_eq(kv.rows, 3, "%s: the cache keeps the window's rows", keys[v]);
        cr_expect_eq(kv.kv_dim, cfg.n_kv_heads ? cfg.n_kv_heads * 4 : 12);
        cr_assert_eq(attn_gpt_acts_init(&acts, &m, 1, T, &err), ATTN_OK);
        float logits[11];
        for (int t = 0; t < steps; t++) {
            cr_assert_eq(attn_gpt_kv_step(&m, &kv, ids[t], logits, &err), ATTN_OK, "%s t %d: %s",
                         keys[v], t, err.msg);
            if (t + 1 < T) continue; /* the prefix: kv_cache_matches_full_forward's */
            const int n = T;
            cr_assert_eq(attn_gpt_forward(&m, ids + t + 1 - n, NULL, 1, n, NULL, &acts, NULL, &err),
                         ATTN_OK);
            const double e =
                max_rel_floor(logits, acts.logits + (size_t)(n - 1) * V, (size_t)V, 1e-3);
            cr_expect(e <= tol[v], "%s t %d: kv vs full forward max rel err %g", keys[v], t, e);
        }
        attn_gpt_kv_free(&kv);
        attn_gpt_acts_free(&acts);
        attn_gpt_free(&m);
    }
}

/* What attn viz draws for a variant: each head's weights (recomputed by the
 * fused kernel from its LSE, with RoPE and with ALiBi) are a distribution
 * over the keys the query sees and exactly 0 elsewhere: a window draws a
 * band. */
Test(gpt_variants, attention_weights_of_a_window_are_a_band) {
    const char *keys[] = {"{\"window\": 3, \"n_kv_heads\": 1, \"pos_emb\": \"rope\"}",
                          "{\"window\": 3, \"pos_emb\": \"alibi\"}"};
    const int T = SMALL.context_length, H = SMALL.n_heads;
    const int32_t ids[8] = {3, 1, 4, 1, 5, 9, 2, 6};
    for (int v = 0; v < 2; v++) {
        const attn_gpt_config cfg = variant_cfg(SMALL, keys[v]);
        attn_gpt m;
        make_model(&m, &cfg, 17);
        cr_expect_eq(m.blocks[0].att.path, ATTN_MHA_FUSED);
        attn_gpt_acts acts;
        attn_error err;
        cr_assert_eq(attn_gpt_acts_init(&acts, &m, 1, T, &err), ATTN_OK);
        cr_assert_eq(attn_gpt_forward(&m, ids, NULL, 1, T, NULL, &acts, NULL, &err), ATTN_OK);
        float w[3 * 8 * 8];
        for (int l = 0; l < cfg.n_layers; l++) {
            cr_assert_eq(attn_gpt_attention_weights(&m, &acts, l, 0, w, &err), ATTN_OK, "%s",
                         err.msg);
            for (int h = 0; h < H; h++)
                for (int i = 0; i < T; i++) {
                    double sum = 0;
                    for (int j = 0; j < T; j++) {
                        const float x = w[(h * T + i) * T + j];
                        const int seen = j <= i && i - j < 3;
                        cr_expect(seen ? x > 0.0f : x == 0.0f, "%s l %d h %d (%d, %d): %g", keys[v],
                                  l, h, i, j, x);
                        sum += x;
                    }
                    cr_expect(fabs(sum - 1.0) < 1e-5, "%s row %d sums to %g", keys[v], i, sum);
                }
        }
        attn_gpt_acts_free(&acts);
        attn_gpt_free(&m);
    }
}

/* The feed-forward's one-token step for each activation: a team of 2 gives
 * the serial bits, both equal the batched forward, and the bf16 copy is
 * layers.0 ((2H, C) for swiglu) then layers.2. */
Test(gpt_variants, feedforward_step_for_each_activation) {
    enum { C = 12, ROWS = 5 };
    for (int act = ATTN_ACT_RELU2; act <= ATTN_ACT_SWIGLU; act++) {
        attn_rng rng;
        attn_rng_seed(&rng, 9);
        attn_feedforward ff;
        cr_assert_eq(attn_feedforward_init_act(&ff, C, (attn_act)act, &rng, NULL), ATTN_OK);
        const int width = ff.fc1.out_features, H = ff.hidden;
        cr_assert_eq(H, act == ATTN_ACT_SWIGLU ? 32 : 48);
        cr_assert_eq(width, act == ATTN_ACT_SWIGLU ? 64 : 48);
        attn_feedforward_cache cache;
        cr_assert_eq(attn_feedforward_cache_init(&cache, &ff, ROWS, NULL), ATTN_OK);
        float x[ROWS * C], want[ROWS * C], got[ROWS * C], team[ROWS * C], got_b[ROWS * C];
        float hidden[64], hidden2[64];
        attn_rng_uniform(&rng, x, ROWS * C, -3.0f, 3.0f);
        attn_feedforward_forward(&ff, x, want, ROWS, &cache);
        const size_t n = attn_feedforward_bf16_numel(&ff);
        cr_assert_eq(n, (size_t)width * C + (size_t)C * H);
        uint16_t *w = malloc(n * sizeof *w);
        attn_feedforward_bf16_copy(&ff, w);
        for (int r = 0; r < ROWS; r++) {
            attn_feedforward_step(&ff, NULL, x + r * C, hidden, got + r * C);
#pragma omp parallel num_threads(2)
            attn_feedforward_step(&ff, NULL, x + r * C, hidden2, team + r * C);
            attn_feedforward_step(&ff, w, x + r * C, hidden, got_b + r * C);
        }
        cr_expect(memcmp(team, got, sizeof got) == 0, "act %d: a team of 2 gives the serial bits",
                  act);
        const double e = max_rel_floor(got, want, ROWS * C, 1e-12);
        cr_expect(e <= 1e-5, "act %d: step vs batched max rel err %g", act, e);
        const double eb = max_rel_floor(got_b, want, ROWS * C, 1e-12);
        cr_expect(eb > 0 && eb <= 2e-2, "act %d: bf16 step max rel err %g", act, eb);
        free(w);
        attn_feedforward_cache_free(&cache);
        attn_feedforward_free(&ff);
    }
}

/* Forward + backward of one variant at a size where every element-wise
 * layer splits over threads; logits, loss and gradients into out. */
static void run_threads(const attn_gpt_config *cfg, int threads, float *logits, float *grads) {
    omp_set_num_threads(threads);
    attn_gpt m;
    make_model(&m, cfg, 5);
    const int B = 8, T = 64, N = B * T;
    int32_t *ids = malloc((size_t)N * sizeof *ids), *tg = malloc((size_t)N * sizeof *tg);
    for (int i = 0; i < N; i++) {
        ids[i] = (i * 7 + 3) % cfg->vocab_size;
        tg[i] = (i * 5 + 1) % cfg->vocab_size;
    }
    attn_gpt_acts acts;
    attn_error err;
    cr_assert_eq(attn_gpt_acts_init(&acts, &m, B, T, &err), ATTN_OK);
    attn_rng rng;
    attn_rng_seed(&rng, 3);
    attn_forward_mode mode = {1, &rng, ATTN_STREAM_TORCH_CPU};
    float loss;
    cr_assert_eq(attn_gpt_forward(&m, ids, tg, B, T, &mode, &acts, &loss, &err), ATTN_OK);
    attn_gpt_zero_grad(&m);
    cr_assert_eq(attn_gpt_backward(&m, &acts, 1.0f, &err), ATTN_OK);
    memcpy(logits, acts.logits, (size_t)N * (size_t)cfg->vocab_size * sizeof(float));
    const attn_param_list *L = attn_gpt_params(&m);
    for (int i = 0; i < L->count; i++) {
        memcpy(grads, L->items[i].grad, L->items[i].numel * sizeof(float));
        grads += L->items[i].numel;
    }
    attn_gpt_acts_free(&acts);
    attn_gpt_free(&m);
    free(ids);
    free(tg);
}

Test(gpt_variants, one_and_two_threads_give_the_same_bits) {
    const attn_gpt_config big = {.vocab_size = 29,
                                 .context_length = 64,
                                 .emb_dim = 64,
                                 .n_heads = 4,
                                 .n_layers = 2,
                                 .drop_rate = 0.1,
                                 .qkv_bias = 1};
    const int max_threads = omp_get_max_threads();
    for (int v = 0; VARIANTS[v]; v++) {
        const attn_gpt_config cfg = variant_cfg(big, VARIANTS[v]);
        attn_gpt m;
        attn_error err;
        cr_assert_eq(attn_gpt_init(&m, &cfg, NULL, &err), ATTN_OK);
        const size_t np = attn_gpt_num_params(&m), nl = (size_t)8 * 64 * 29;
        attn_gpt_free(&m);
        float *l1 = malloc(nl * sizeof(float)), *l2 = malloc(nl * sizeof(float));
        float *g1 = malloc(np * sizeof(float)), *g2 = malloc(np * sizeof(float));
        run_threads(&cfg, 1, l1, g1);
        run_threads(&cfg, 2, l2, g2);
        cr_expect(memcmp(l1, l2, nl * sizeof(float)) == 0, "%s: logits differ", VARIANTS[v]);
        cr_expect(memcmp(g1, g2, np * sizeof(float)) == 0, "%s: gradients differ", VARIANTS[v]);
        free(l1), free(l2), free(g1), free(g2);
    }
    omp_set_num_threads(max_threads);
}

static double rel_l2(const float *a, const float *b, size_t n) {
    double d = 0, s = 0;
    for (size_t i = 0; i < n; i++) {
        d += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
        s += (double)b[i] * b[i];
    }
    return s > 0 ? sqrt(d / s) : sqrt(d);
}

/* --precision bf16 on the CPU: each variant's logits and gradients within
 * bf16's error of fp32 (its activations and norms stay fp32). */
Test(gpt_variants, bf16_products_within_bf16_tolerance) {
    if (attn_precision_check(ATTN_PRECISION_BF16, NULL) != ATTN_OK)
        cr_skip_test("no AVX512-BF16 on this CPU");
    const attn_gpt_config base = {.vocab_size = 29,
                                  .context_length = 16,
                                  .emb_dim = 64,
                                  .n_heads = 4,
                                  .n_layers = 2,
                                  .qkv_bias = 1};
    const int B = 3, T = 16, N = B * T;
    int32_t ids[48], tg[48];
    for (int i = 0; i < N; i++)
        ids[i] = (i * 7 + 3) % base.vocab_size, tg[i] = (i * 5 + 1) % base.vocab_size;
    for (int v = 0; VARIANTS[v]; v++) {
        const attn_gpt_config cfg = variant_cfg(base, VARIANTS[v]);
        attn_gpt m32, m16;
        make_model(&m32, &cfg, 5);
        make_model(&m16, &cfg, 5);
        attn_error err;
        cr_assert_eq(attn_gpt_set_precision(&m16, ATTN_PRECISION_BF16, &err), ATTN_OK, "%s",
                     err.msg);
        attn_gpt_acts a32, a16;
        cr_assert_eq(attn_gpt_acts_init(&a32, &m32, B, T, &err), ATTN_OK);
        cr_assert_eq(attn_gpt_acts_init(&a16, &m16, B, T, &err), ATTN_OK);
        float l32, l16;
        cr_assert_eq(attn_gpt_forward(&m32, ids, tg, B, T, NULL, &a32, &l32, &err), ATTN_OK);
        cr_assert_eq(attn_gpt_forward(&m16, ids, tg, B, T, NULL, &a16, &l16, &err), ATTN_OK);
        const double e = rel_l2(a16.logits, a32.logits, (size_t)N * (size_t)cfg.vocab_size);
        cr_expect(e > 0 && e < 2e-2, "%s: logits relative error %g", VARIANTS[v], e);
        cr_assert_eq(attn_gpt_backward(&m32, &a32, 1.0f, &err), ATTN_OK);
        cr_assert_eq(attn_gpt_backward(&m16, &a16, 1.0f, &err), ATTN_OK);
        const attn_param_list *p32 = attn_gpt_params(&m32), *p16 = attn_gpt_params(&m16);
        for (int i = 0; i < p32->count; i++) {
            const attn_param *q = &p32->items[i];
            const double g = rel_l2(p16->items[i].grad, q->grad, q->numel);
            /* W_key.bias: 0 in exact arithmetic, rounding noise either way. */
            if (!strstr(q->name, "W_key.bias"))
                cr_expect(g < 5e-2, "%s: %s grad relative error %g", VARIANTS[v], q->name, g);
        }
        attn_gpt_acts_free(&a32);
        attn_gpt_acts_free(&a16);
        attn_gpt_free(&m32);
        attn_gpt_free(&m16);
    }
}

/* ------------------------------------------------- training */

static char *corpus(size_t *n) {
    const char *line = "To be, or not to be: that is the question.\n";
    const size_t L = strlen(line), reps = 40;
    char *s = malloc(L * reps + 1);
    for (size_t i = 0; i < reps; i++)
        memcpy(s + i * L, line, L);
    s[L * reps] = '\0';
    *n = L * reps;
    return s;
}

/* Each variant learns the corpus (the evaluated loss falls), and a trainer
 * resumed from a save takes the very steps the first one takes. */
Test(gpt_variants, tiny_models_train_and_resume_bit_for_bit) {
    size_t n;
    char *text = corpus(&n);
    for (int v = 0; VARIANTS[v]; v++) {
        attn_gpt_config m;
        attn_train_config t;
        attn_train_preset("tiny", &m, &t, NULL);
        m.context_length = 8;
        m.emb_dim = 16;
        m.n_heads = 2;
        m.n_layers = 1;
        m.drop_rate = 0.1;
        m = variant_cfg(m, VARIANTS[v]);
        t.batch_size = 4;
        t.max_steps = 60;
        t.warmup_steps = 5;
        t.eval_iters = 4;
        char dir[] = "/tmp/attn-test-variants-XXXXXX";
        cr_assert(mkdtemp(dir) != NULL);
        attn_error err;
        attn_trainer a, b;
        cr_assert_eq(attn_trainer_init(&a, &m, &t, 0, text, n, &err), ATTN_OK, "%s", err.msg);
        attn_eval_record first, last;
        cr_assert_eq(attn_trainer_evaluate(&a, &first, &err), ATTN_OK, "%s", err.msg);
        for (int i = 0; i < 50; i++)
            cr_assert_eq(attn_trainer_step(&a, NULL, &err), ATTN_OK, "%s", err.msg);
        cr_assert_eq(attn_trainer_evaluate(&a, &last, &err), ATTN_OK);
        cr_expect(last.val_loss < 0.9f * first.val_loss, "%s: val loss %.4f -> %.4f", VARIANTS[v],
                  (double)first.val_loss, (double)last.val_loss);
        cr_assert_eq(attn_trainer_save(&a, dir, &err), ATTN_OK, "%s", err.msg);
        cr_assert_eq(attn_trainer_init(&b, &m, &t, 0, text, n, &err), ATTN_OK);
        cr_assert_eq(attn_trainer_resume(&b, dir, &err), ATTN_OK, "%s: %s", VARIANTS[v], err.msg);
        expect_same_steps(&a, &b, 5);
        expect_same_params(&a.model, &b.model, VARIANTS[v]);
        /* The config it saved is the variant's. */
        attn_gpt g;
        attn_tokenizer tok;
        cr_assert_eq(attn_gpt_load_checkpoint(dir, &g, &tok, NULL, &err), ATTN_OK, "%s", err.msg);
        cr_expect(g.cfg.norm == m.norm && g.cfg.act == m.act && g.cfg.pos_emb == m.pos_emb &&
                      g.cfg.tie_weights == m.tie_weights,
                  "%s: loaded another variant", VARIANTS[v]);
        attn_gpt_free(&g);
        attn_tokenizer_free(&tok);
        /* A resume with another variant is refused, naming its key. */
        attn_trainer c;
        attn_gpt_config other = m;
        other.norm = m.norm == ATTN_NORM_RMSNORM ? ATTN_NORM_LAYERNORM : ATTN_NORM_RMSNORM;
        cr_assert_eq(attn_trainer_init(&c, &other, &t, 0, text, n, &err), ATTN_OK);
        cr_expect_neq(attn_trainer_resume(&c, dir, &err), ATTN_OK);
        cr_expect(strstr(err.msg, "norm"), "%s", err.msg);
        attn_trainer_release(&c);
        attn_trainer_release(&a);
        attn_trainer_release(&b);
        remove_tree(dir);
    }
    free(text);
}

/* ------------------------------------------------- the book's model */

static void *read_file(const char *path, size_t *n) {
    void *buf = NULL;
    attn_error err;
    cr_assert_eq(attn_file_read_all(path, 0, &buf, n, &err), ATTN_OK, "%s", err.msg);
    return buf;
}

static void expect_same_file(const char *a, const char *b) {
    size_t na, nb;
    void *pa = read_file(a, &na), *pb = read_file(b, &nb);
    cr_expect(na == nb && memcmp(pa, pb, na) == 0, "%s (%zu bytes) differs from %s (%zu bytes)", a,
              na, b, nb);
    free(pa);
    free(pb);
}

/* A checkpoint from before the keys: the book's model, its logits, and the
 * same bytes when saved again. */
Test(gpt_variants, a_checkpoint_from_before_the_keys_is_the_books_model) {
    attn_error err;
    attn_gpt g;
    attn_tokenizer tok;
    cr_assert_eq(attn_gpt_load_checkpoint(BOOK_RUN, &g, &tok, NULL, &err), ATTN_OK, "%s", err.msg);
    char what[64];
    cr_expect_eq(attn_gpt_config_first_variant(&g.cfg, what, sizeof what), -1, "%s", what);
    attn_npy ids, want;
    cr_assert_eq(attn_npy_load(BOOK_RUN "/ids.npy", 1u << ATTN_NPY_I64, &ids, &err), ATTN_OK, "%s",
                 err.msg);
    cr_assert_eq(attn_npy_load_f32(BOOK_RUN "/logits.npy", &want, &err), ATTN_OK, "%s", err.msg);
    const int B = (int)ids.shape[0], T = (int)ids.shape[1];
    attn_gpt_acts acts;
    cr_assert_eq(attn_gpt_acts_init(&acts, &g, B, T, &err), ATTN_OK);
    cr_assert_eq(attn_gpt_forward_i64(&g, ids.data, NULL, B, T, NULL, &acts, NULL, &err), ATTN_OK);
    /* The old build's own numbers (bit for bit on the machine that made
     * them; other CPUs may pick other BLAS kernels). */
    const double e = max_rel_floor(acts.logits, want.data, want.numel, 1e-12);
    cr_expect(e <= 1e-6, "logits: max rel err %g from the old build's", e);
    attn_gpt_acts_free(&acts);
    attn_npy_free(&ids);
    attn_npy_free(&want);
    attn_gpt_free(&g);
    attn_tokenizer_free(&tok);

    /* Resumed and saved again: both files byte for byte. */
    attn_gpt_config m;
    attn_train_config t;
    char *recorded = NULL;
    cr_assert_eq(attn_trainer_read_config(BOOK_RUN, &m, &t, &recorded, &err), ATTN_OK, "%s",
                 err.msg);
    size_t n;
    char *text = corpus(&n);
    attn_trainer tr;
    cr_assert_eq(attn_trainer_init(&tr, &m, &t, 0, text, n, &err), ATTN_OK, "%s", err.msg);
    cr_assert_eq(attn_trainer_resume(&tr, BOOK_RUN, &err), ATTN_OK, "%s", err.msg);
    tr.corpus_path = recorded; /* where the old run read it */
    char dir[] = "/tmp/attn-test-bookrun-XXXXXX", a[600], b[600];
    cr_assert(mkdtemp(dir) != NULL);
    cr_assert_eq(attn_trainer_save(&tr, dir, &err), ATTN_OK, "%s", err.msg);
    const char *files[] = {ATTN_CKPT_MODEL, ATTN_CKPT_STATE};
    for (int i = 0; i < 2; i++) {
        snprintf(a, sizeof a, "%s/%s", BOOK_RUN, files[i]);
        snprintf(b, sizeof b, "%s/%s", dir, files[i]);
        expect_same_file(a, b);
    }
    attn_trainer_release(&tr);
    free(recorded);
    free(text);
    remove_tree(dir);
}

/* ------------------------------------------------- keys */

Test(gpt_variants, key_table_json_and_text) {
    /* The book's model writes exactly the JSON it wrote before the keys. */
    attn_gpt_config c;
    attn_gpt_config_preset("tiny", &c, NULL);
    char *js = NULL;
    attn_error err;
    cr_assert_eq(attn_gpt_config_to_json(&c, &js, &err), ATTN_OK);
    cr_expect_str_eq(js, "{\"vocab_size\":65,\"context_length\":64,\"emb_dim\":128,\"n_heads\":4,"
                         "\"n_layers\":3,\"drop_rate\":0,\"qkv_bias\":false}");
    free(js);
    /* A variant writes its keys, and reads back the same. */
    attn_gpt_config v = variant_cfg(c, VARIANTS[5]);
    cr_assert_eq(attn_gpt_config_to_json(&v, &js, &err), ATTN_OK);
    cr_expect(strstr(js, "\"qkv_bias\":false,\"pos_emb\":\"none\",\"norm\":\"rmsnorm\","
                         "\"act\":\"swiglu\",\"tie_weights\":true}"),
              "%s", js);
    attn_gpt_config back;
    memset(&back, 0, sizeof back);
    cr_assert_eq(attn_gpt_config_set_json(&back, js, &err), ATTN_OK, "%s", err.msg);
    cr_expect(memcmp(&back, &v, sizeof v) == 0);
    free(js);
    char text[512];
    attn_gpt_config_describe_variants(&c, 0, text, sizeof text);
    cr_expect_str_eq(text, "pos_emb learned, n_kv_heads 4, window 0, norm layernorm, act gelu, "
                           "qk_norm false, softcap 0, tie_weights false");
    attn_gpt_config_describe_variants(&c, 1, text, sizeof text);
    cr_expect_str_eq(text, "");
    attn_gpt_config_describe_variants(&v, 1, text, sizeof text);
    cr_expect_str_eq(text, "pos_emb none, norm rmsnorm, act swiglu, tie_weights true");
    cr_expect_eq(attn_gpt_config_first_variant(&v, text, sizeof text),
                 attn_gpt_key_find("pos_emb"));
    cr_expect_str_eq(text, "pos_emb none");
    /* The rows: names, types, ranges and choices. */
    const attn_gpt_key *k = attn_gpt_key_at(attn_gpt_key_find("act"));
    cr_assert(k && k->type == ATTN_GPT_KEY_CHOICE);
    attn_gpt_key_describe(k, text, sizeof text);
    cr_expect_str_eq(text, "one of gelu, relu2, swiglu");
    const char *names[] = {"pos_emb", "n_kv_heads", "window",  "norm",
                           "act",     "qk_norm",    "softcap", "tie_weights"};
    for (int i = 0; i < ATTN_GPT_KEY_VARIANTS; i++)
        cr_expect_str_eq(attn_gpt_key_at(ATTN_GPT_KEY_VARIANT0 + i)->name, names[i]);
    cr_expect_str_eq(attn_gpt_key_at(ATTN_GPT_KEY_INIT)->name, "init");
    cr_expect_str_eq(attn_gpt_key_at(ATTN_GPT_KEY_COUNT - 1)->name, "head_size");
    /* Bad values name the key and its choices or range. */
    const struct {
        const char *json, *needle;
    } bad[] = {
        {"{\"norm\": \"batchnorm\"}",
         "'norm' must be one of layernorm, rmsnorm (got \"batchnorm\")"},
        {"{\"act\": 3}", "'act' must be one of gelu, relu2, swiglu"},
        {"{\"tie_weights\": \"yes\"}", "'tie_weights' must be true or false"},
        {"{\"softcap\": -1}", "'softcap' must be a number in [0, 1000000]"},
        {"{\"n_kv_heads\": 0}", "'n_kv_heads' must be an integer in [1, 65536]"},
        {"{\"n_kv_heads\": 3}", "n_kv_heads 3 must divide n_heads 4"},
        {"{\"window\": -1}", "'window' must be an integer in [0, 1048576]"},
        {"{\"pos_emb\": \"rope\", \"emb_dim\": 4}", "pos_emb 'rope' needs head_dim >= 2"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        attn_gpt_config x = c;
        cr_expect_neq(attn_gpt_config_set_json(&x, bad[i].json, &err), ATTN_OK, "%s", bad[i].json);
        cr_expect(strstr(err.msg, bad[i].needle), "%s: %s", bad[i].json, err.msg);
    }
    /* The book's values given explicitly are the book's model. */
    attn_gpt_config x = c;
    cr_assert_eq(attn_gpt_config_set_json(&x,
                                          "{\"pos_emb\": \"learned\", \"n_kv_heads\": 4, "
                                          "\"window\": 0, \"norm\": \"layernorm\", \"act\": "
                                          "\"gelu\", \"qk_norm\": false, \"softcap\": 0, "
                                          "\"tie_weights\": false}",
                                          &err),
                 ATTN_OK, "%s", err.msg);
    cr_expect_eq(attn_gpt_config_first_variant(&x, text, sizeof text), -1, "%s", text);
}

/* The CUDA engine computes the book's model only: any variant is refused
 * by name, before any GPU is looked for. */
Test(gpt_variants, cuda_engine_refuses_variants_by_name) {
    attn_gpt_config c;
    attn_gpt_config_preset("tiny", &c, NULL);
    attn_error err;
    cr_expect_eq(attn_cuda_gpt_supports(&c, &err), ATTN_OK);
    const char *want[] = {"norm rmsnorm", "act relu2",     "act swiglu",   "tie_weights true",
                          "pos_emb none", "pos_emb none",  "norm rmsnorm", "n_kv_heads 1",
                          "pos_emb rope", "pos_emb alibi", "window 3",     "qk_norm true",
                          "softcap 0.5",  "pos_emb rope"};
    for (int v = 0; VARIANTS[v]; v++) {
        attn_gpt_config x = variant_cfg(c, VARIANTS[v]);
        cr_expect_eq(attn_cuda_gpt_supports(&x, &err), ATTN_ERR_INVALID_ARG);
        char msg[128];
        snprintf(msg, sizeof msg, "%s is not on the cuda engine yet", want[v]);
        cr_expect_str_eq(err.msg, msg);
        attn_gpt m;
        attn_cuda_gpt *g = NULL;
        cr_assert_eq(attn_gpt_init(&m, &x, NULL, &err), ATTN_OK);
        cr_expect_eq(attn_cuda_gpt_create(&g, &m, 1, 8, ATTN_PRECISION_FP32, &err),
                     ATTN_ERR_INVALID_ARG);
        cr_expect_str_eq(err.msg, msg);
        cr_expect_null(g);
        attn_gpt_free(&m);
    }
}
