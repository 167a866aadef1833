/* GPT parity with PyTorch's book GPTModel.
 * Reference: tests/fixtures/gpt_parity.safetensors, written by
 * `/usr/bin/python3 scripts/gpt_parity.py gen` (torch 1.13.1): the weights of
 * torch.manual_seed(123) + GPTModel(cfg), ids/targets, and PyTorch's logits,
 * loss and parameter gradients in eval mode and in training mode (dropout
 * 0.25, torch.manual_seed(7) before the forward, non-MKL torch = torch-cpu
 * stream).
 *
 * With ATTN_GPT_PARITY_DUMP=FILE set, the `dump` test writes attn's own
 * init + forward/backward results there for `gpt_parity.py check FILE`
 * (tests/gpt_parity_live.sh); without it, that test does nothing. */
#define _POSIX_C_SOURCE 200809L
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn/gpt.h"
#include "attn/safetensors.h"

#define FIXTURE ATTN_SOURCE_DIR "/tests/fixtures/gpt_parity.safetensors"

/* max |got - want| / max(max |want|, floor). The floor matters for
 * gradients that are zero in exact arithmetic (W_key.bias: a key bias shifts
 * a whole score row, which softmax ignores) and so are float noise. */
static double max_rel_floor(const float *got, const float *want, size_t n, double floor) {
    double md = 0, mr = 0;
    for (size_t i = 0; i < n; i++) {
        md = fmax(md, fabs((double)got[i] - (double)want[i]));
        mr = fmax(mr, fabs((double)want[i]));
    }
    return md / fmax(mr, floor);
}

static double max_rel(const float *got, const float *want, size_t n) {
    return max_rel_floor(got, want, n, 1e-12);
}

static const attn_st_tensor *need(const attn_safetensors *st, const char *name) {
    const attn_st_tensor *t = attn_safetensors_find(st, name);
    cr_assert_not_null(t, "fixture lacks '%s'", name);
    return t;
}

static void load_fixture(attn_safetensors *st, attn_gpt *m, int *B, int *T) {
    attn_error err;
    cr_assert_eq(attn_safetensors_read(FIXTURE, st, &err), ATTN_OK, "%s", err.msg);
    attn_gpt_config cfg;
    attn_gpt_config_preset("tiny", &cfg, NULL);
    const char *js = attn_safetensors_meta(st, "config");
    cr_assert_not_null(js);
    cr_assert_eq(attn_gpt_config_set_json(&cfg, js, &err), ATTN_OK, "%s", err.msg);
    attn_rng rng;
    attn_rng_seed(&rng, (uint64_t)atoi(attn_safetensors_meta(st, "seed")));
    cr_assert_eq(attn_gpt_init(m, &cfg, &rng, &err), ATTN_OK, "%s", err.msg);
    const attn_st_tensor *ids = need(st, "ids");
    *B = (int)ids->shape[0];
    *T = (int)ids->shape[1];
}

Test(gpt_parity, init_matches_torch_manual_seed_and_constructor) {
    attn_safetensors st;
    attn_gpt m;
    int B, T;
    load_fixture(&st, &m, &B, &T);
    const attn_param_list *L = attn_gpt_params(&m);
    for (int i = 0; i < L->count; i++) {
        const attn_st_tensor *t = need(&st, L->items[i].name);
        cr_assert_eq(t->numel, L->items[i].numel, "%s", L->items[i].name);
        float *want = malloc(t->numel * sizeof(float));
        memcpy(want, t->data, t->numel * sizeof(float));
        /* normal_ (embeddings) may differ by an ulp: PyTorch's SIMD log/sin. */
        const double e = max_rel(L->items[i].data, want, t->numel);
        cr_assert(e <= 1e-6, "init of %s: max rel err %g", L->items[i].name, e);
        free(want);
    }
    attn_gpt_free(&m);
    attn_safetensors_free(&st);
}

static void parity_case(int training) {
    attn_safetensors st;
    attn_gpt m;
    attn_error err;
    int B, T;
    load_fixture(&st, &m, &B, &T);
    const attn_param_list *L = attn_gpt_params(&m);
    for (int i = 0; i < L->count; i++) /* exactly PyTorch's weights */
        memcpy(L->items[i].data, need(&st, L->items[i].name)->data,
               L->items[i].numel * sizeof(float));
    const int64_t *ids = need(&st, "ids")->data, *tg = need(&st, "targets")->data;
    attn_gpt_acts acts;
    cr_assert_eq(attn_gpt_acts_init(&acts, &m, B, T, &err), ATTN_OK, "%s", err.msg);
    attn_rng rng;
    attn_rng_seed(&rng, (uint64_t)atoi(attn_safetensors_meta(&st, "drop_seed")));
    attn_forward_mode mode = {training, &rng, ATTN_STREAM_TORCH_CPU};
    float loss;
    cr_assert_eq(attn_gpt_forward_i64(&m, ids, tg, B, T, &mode, &acts, &loss, &err), ATTN_OK, "%s",
                 err.msg);
    const char *tag = training ? "train" : "eval";
    char name[ATTN_PARAM_NAME_MAX + 16];
    snprintf(name, sizeof name, "%s.logits", tag);
    const attn_st_tensor *lt = need(&st, name);
    const double el = max_rel(acts.logits, lt->data, lt->numel);
    cr_assert(el <= 1e-5, "%s logits: max rel err %g", tag, el);
    snprintf(name, sizeof name, "%s.loss", tag);
    const float want_loss = *(const float *)need(&st, name)->data;
    cr_assert(fabsf(loss - want_loss) <= 1e-5f * fabsf(want_loss), "%s loss %.9g, PyTorch %.9g",
              tag, loss, want_loss);
    attn_gpt_zero_grad(&m);
    cr_assert_eq(attn_gpt_backward(&m, &acts, 1.0f, &err), ATTN_OK, "%s", err.msg);
    for (int i = 0; i < L->count; i++) {
        snprintf(name, sizeof name, "%s.grad.%s", tag, L->items[i].name);
        const attn_st_tensor *g = need(&st, name);
        const double e = max_rel_floor(L->items[i].grad, g->data, g->numel, 1e-3);
        cr_assert(e <= 1e-4, "%s grad of %s: max rel err %g", tag, L->items[i].name, e);
    }
    attn_gpt_acts_free(&acts);
    attn_gpt_free(&m);
    attn_safetensors_free(&st);
}

Test(gpt_parity, eval_logits_loss_grads_match_torch) {
    parity_case(0);
}

Test(gpt_parity, training_dropout_logits_loss_grads_match_torch) {
    parity_case(1);
}

/* attn's own model, written for scripts/gpt_parity.py check. */
Test(gpt_parity, dump) {
    const char *path = getenv("ATTN_GPT_PARITY_DUMP");
    if (!path || !*path) return;
    const char *tr = getenv("ATTN_GPT_PARITY_TRAINING");
    const int training = tr && strcmp(tr, "1") == 0;
    attn_gpt_config cfg = {.vocab_size = 65,
                           .context_length = 32,
                           .emb_dim = 48,
                           .n_heads = 4,
                           .n_layers = 3,
                           .drop_rate = 0.1,
                           .qkv_bias = 0};
    const int B = 3, T = 32;
    const uint64_t seed = 1234, drop_seed = 99;
    attn_rng rng;
    attn_rng_seed(&rng, seed);
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
    attn_rng_seed(&drop, drop_seed);
    attn_forward_mode mode = {training, &drop, ATTN_STREAM_TORCH_CPU};
    float loss;
    cr_assert_eq(attn_gpt_forward_i64(&m, ids, tg, B, T, &mode, &acts, &loss, &err), ATTN_OK);
    attn_gpt_zero_grad(&m);
    cr_assert_eq(attn_gpt_backward(&m, &acts, 1.0f, &err), ATTN_OK);
    const attn_param_list *L = attn_gpt_params(&m);
    const int n = 2 * L->count + 4;
    attn_st_entry *e = calloc((size_t)n, sizeof *e);
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
    const int64_t bt[2] = {B, T}, blv[3] = {B, T, cfg.vocab_size}, one[1] = {1};
    e[k++] = (attn_st_entry){"ids", "I64", 2, bt, ids, sizeof ids};
    e[k++] = (attn_st_entry){"targets", "I64", 2, bt, tg, sizeof tg};
    e[k++] = (attn_st_entry){"logits", "F32",       3,
                             blv,      acts.logits, (size_t)B * T * cfg.vocab_size * sizeof(float)};
    e[k++] = (attn_st_entry){"loss", "F32", 1, one, &loss, sizeof loss};
    char *js = NULL;
    cr_assert_eq(attn_gpt_config_to_json(&cfg, &js, &err), ATTN_OK);
    char ds[32];
    snprintf(ds, sizeof ds, "%llu", (unsigned long long)drop_seed);
    const attn_st_kv meta[3] = {
        {"config", js}, {"training", training ? "1" : "0"}, {"drop_seed", ds}};
    cr_assert_eq(attn_safetensors_write(path, e, k, meta, 3, &err), ATTN_OK, "%s", err.msg);
    free(js);
    free(names);
    free(e);
    attn_gpt_acts_free(&acts);
    attn_gpt_free(&m);
}
