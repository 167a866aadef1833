/* attn/weights_format.h: a random small GPT written as hf, llmc and book and
 * read back bit for bit (config included), detection by content, the
 * models each format refuses, and bad files (truncated llm.c, wrong magic
 * or version, missing, extra or misshapen tensors, a head whose vocabulary
 * disagrees with wte, unknown heads) refused with a status that names the
 * problem and nothing left allocated (the sanitizer build checks). The
 * numbers against PyTorch's GPT-2 are tests/python/test_weights_torch.py. */
#include "io_util.h" /* first: it sets _XOPEN_SOURCE */

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn/gpt.h"
#include "attn/rng.h"
#include "attn/safetensors.h"
#include "attn/weights_format.h"

static const char *dir;

static void setup(void) {
    dir = tio_mkdtemp();
}

static void teardown(void) {
    tio_rmtree(dir);
}

static attn_gpt_config small_config(void) {
    attn_gpt_config c;
    memset(&c, 0, sizeof c);
    c.vocab_size = 50;
    c.context_length = 16;
    c.emb_dim = 24;
    c.n_layers = 2;
    c.n_heads = 3;
    c.qkv_bias = 1;
    c.tie_weights = 1;
    return c;
}

/* Every parameter random (LayerNorms too: a swapped scale/shift shows). */
static void make_model(attn_gpt *m, const attn_gpt_config *c) {
    attn_rng rng;
    attn_error err;
    attn_rng_seed(&rng, 42);
    cr_assert_eq(attn_gpt_init(m, c, &rng, &err), ATTN_OK, "%s", err.msg);
    const attn_param_list *l = attn_gpt_params(m);
    for (int i = 0; i < l->count; i++)
        attn_rng_normal(&rng, l->items[i].data, l->items[i].numel, 0.f, 1.f);
}

static void assert_same(const attn_gpt *a, const attn_gpt *b) {
    const attn_gpt_config *x = &a->cfg, *y = &b->cfg;
    cr_assert_eq(x->vocab_size, y->vocab_size);
    cr_assert_eq(x->context_length, y->context_length);
    cr_assert_eq(x->emb_dim, y->emb_dim);
    cr_assert_eq(x->n_heads, y->n_heads);
    cr_assert_eq(x->n_layers, y->n_layers);
    cr_assert_eq(x->qkv_bias, y->qkv_bias);
    cr_assert_eq(x->tie_weights, y->tie_weights);
    const attn_param_list *la = attn_gpt_params(a), *lb = attn_gpt_params(b);
    cr_assert_eq(la->count, lb->count);
    for (int i = 0; i < la->count; i++) {
        const attn_param *p = &la->items[i], *q = attn_param_list_find(lb, p->name);
        cr_assert(q, "%s missing", p->name);
        cr_assert_eq(p->numel, q->numel);
        cr_assert(memcmp(p->data, q->data, p->numel * sizeof(float)) == 0, "%s differs", p->name);
    }
}

static void round_trip(const attn_gpt_config *c, attn_weights_format fmt, const char *name) {
    attn_gpt m, back;
    attn_error err;
    attn_weights_format got;
    make_model(&m, c);
    const char *path = tio_path(dir, name);
    cr_assert_eq(attn_gpt_export(&m, path, fmt, &err), ATTN_OK, "%s", err.msg);
    cr_assert_eq(attn_weights_detect(path, &got, &err), ATTN_OK, "%s", err.msg);
    cr_assert_eq(got, fmt);
    /* No hint: the heads come from the header / metadata; a .pth (the
     * book's state_dict) has none: the config's n_heads is the hint. */
    const attn_gpt_config hint = {.n_heads = c->n_heads};
    const int pth = strstr(name, ".pth") != NULL;
    cr_assert_eq(attn_gpt_import(path, pth ? &hint : NULL, &back, &got, &err), ATTN_OK, "%s",
                 err.msg);
    cr_assert_eq(got, fmt);
    assert_same(&m, &back);
    attn_gpt_free(&back);
    attn_gpt_free(&m);
}

TestSuite(weights_format, .init = setup, .fini = teardown);

Test(weights_format, names) {
    attn_weights_format f;
    attn_error err;
    for (int i = 0; i < 4; i++) {
        const char *n = attn_weights_format_name((attn_weights_format)i);
        cr_assert_str_eq(n, attn_weights_format_names()[i]);
        cr_assert_eq(attn_weights_format_parse(n, &f, &err), ATTN_OK);
        cr_assert_eq((int)f, i);
    }
    cr_assert_eq(attn_weights_format_parse("gguf", &f, &err), ATTN_ERR_INVALID_ARG);
    cr_assert(strstr(err.msg, "one of attn, hf, llmc, book"), "%s", err.msg);
}

Test(weights_format, round_trips) {
    attn_gpt_config c = small_config();
    round_trip(&c, ATTN_WEIGHTS_HF, "tied.hf.safetensors");
    round_trip(&c, ATTN_WEIGHTS_LLMC, "tied.bin");
    round_trip(&c, ATTN_WEIGHTS_BOOK, "tied.book.safetensors");
    c.tie_weights = 0; /* HF writes lm_head.weight, the book out_head.weight */
    round_trip(&c, ATTN_WEIGHTS_HF, "untied.hf.safetensors");
    round_trip(&c, ATTN_WEIGHTS_BOOK, "untied.book.safetensors");
    c.qkv_bias = 0; /* the book's model may go without */
    round_trip(&c, ATTN_WEIGHTS_BOOK, "nobias.book.safetensors");
    /* The book's torch.save file, masks included (torch reads it: the live
     * test in tests/python/test_weights_torch.py). */
    round_trip(&c, ATTN_WEIGHTS_BOOK, "nobias.pth");
    c.qkv_bias = 1;
    round_trip(&c, ATTN_WEIGHTS_BOOK, "untied.pth");
    c.tie_weights = 1;
    round_trip(&c, ATTN_WEIGHTS_BOOK, "tied.pth");
}

/* The layouts: HF's Conv1D [in, out] and fused c_attn, llm.c's padded wte. */
Test(weights_format, layouts) {
    attn_gpt_config c = small_config();
    attn_gpt m;
    attn_error err;
    make_model(&m, &c);
    const char *hf = tio_path(dir, "m.safetensors"), *bin = tio_path(dir, "m.bin");
    cr_assert_eq(attn_gpt_export(&m, hf, ATTN_WEIGHTS_HF, &err), ATTN_OK, "%s", err.msg);
    cr_assert_eq(attn_gpt_export(&m, bin, ATTN_WEIGHTS_LLMC, &err), ATTN_OK, "%s", err.msg);
    attn_safetensors st;
    cr_assert_eq(attn_safetensors_read(hf, &st, &err), ATTN_OK, "%s", err.msg);
    cr_assert_null(attn_safetensors_find(&st, "lm_head.weight")); /* tied */
    const attn_st_tensor *qkv = attn_safetensors_find(&st, "transformer.h.1.attn.c_attn.weight");
    cr_assert(qkv && qkv->ndim == 2 && qkv->shape[0] == 24 && qkv->shape[1] == 72);
    const float *w = qkv->data;
    const attn_param *wk =
        attn_param_list_find(attn_gpt_params(&m), "trf_blocks.1.att.W_key.weight");
    /* W_key[o][i] = c_attn[i][C + o] */
    cr_assert_eq(w[5 * 72 + 24 + 7], wk->data[7 * 24 + 5]);
    attn_safetensors_free(&st);
    size_t n;
    unsigned char *b = tio_slurp(bin, &n);
    int32_t h[8];
    memcpy(h, b, sizeof h);
    cr_assert_eq(h[0], 20240326);
    cr_assert_eq(h[1], 3);
    cr_assert_eq(h[7], 128); /* vocab 50 padded to 128 */
    const float *wte = (const float *)(b + 1024);
    for (int i = 50 * 24; i < 128 * 24; i++)
        cr_assert_eq(wte[i], 0.f);
    cr_assert_eq(n, 1024 + 4 * (128 * 24 + 16 * 24 + 2 * (12 * 24 * 24 + 13 * 24) + 2 * 24));
    free(b);
    attn_gpt_free(&m);
}

Test(weights_format, refusals) {
    attn_gpt_config c = small_config();
    attn_gpt m;
    attn_error err;
    const char *p = tio_path(dir, "out");
    c.tie_weights = 0;
    make_model(&m, &c);
    cr_assert_eq(attn_gpt_export(&m, p, ATTN_WEIGHTS_LLMC, &err), ATTN_ERR_INVALID_ARG);
    /* what the model has, and the keys that would make one the format takes */
    cr_assert(strstr(err.msg, "it has tie_weights false; a model trained with "
                              "{\"tie_weights\":true} in its --config file can be"),
              "%s", err.msg);
    cr_assert_eq(attn_gpt_export(&m, p, ATTN_WEIGHTS_ATTN, &err), ATTN_ERR_INVALID_ARG);
    attn_gpt_free(&m);
    c.tie_weights = 1;
    c.qkv_bias = 0;
    make_model(&m, &c);
    cr_assert_eq(attn_gpt_export(&m, p, ATTN_WEIGHTS_HF, &err), ATTN_ERR_INVALID_ARG);
    cr_assert(strstr(err.msg, "qkv_bias"), "%s", err.msg);
    attn_gpt_free(&m);
    c.qkv_bias = 1;
    c.norm = ATTN_NORM_RMSNORM;
    cr_assert_eq(attn_weights_can_export(&c, ATTN_WEIGHTS_BOOK, &err), ATTN_ERR_INVALID_ARG);
    cr_assert(strstr(err.msg, "it has norm rmsnorm;"), "%s", err.msg);
    cr_assert(strstr(err.msg, "{\"norm\":\"layernorm\"} in its --config"), "%s", err.msg);
    c.tie_weights = 0; /* the book's file holds out_head either way */
    cr_assert_eq(attn_weights_can_export(&c, ATTN_WEIGHTS_BOOK, &err), ATTN_ERR_INVALID_ARG);
    cr_assert(!strstr(err.msg, "tie_weights"), "%s", err.msg);
    c.tie_weights = 1;
    c.norm = ATTN_NORM_LAYERNORM;
    c.pos_emb = ATTN_POS_ROPE;
    cr_assert_eq(attn_weights_can_export(&c, ATTN_WEIGHTS_HF, &err), ATTN_ERR_INVALID_ARG);
    cr_assert(strstr(err.msg, "pos_emb rope"), "%s", err.msg);
    c.qkv_bias = 0;
    c.n_kv_heads = 1;
    cr_assert_eq(attn_weights_can_export(&c, ATTN_WEIGHTS_HF, &err), ATTN_ERR_INVALID_ARG);
    cr_assert(strstr(err.msg, "it has qkv_bias false, pos_emb rope, n_kv_heads 1;"), "%s", err.msg);
    char want[96];
    snprintf(want, sizeof want, "{\"qkv_bias\":true,\"pos_emb\":\"learned\",\"n_kv_heads\":%d}",
             c.n_heads);
    cr_assert(strstr(err.msg, want), "%s", err.msg);
    cr_assert_eq(access(p, F_OK), -1); /* nothing written */
}

Test(weights_format, detect) {
    attn_weights_format f;
    attn_error err;
    const char *attn = tio_path(dir, "model.safetensors");
    const int64_t shape[1] = {1};
    const float one = 1;
    attn_st_entry e = {"tok_emb.weight", "F32", 1, shape, &one, sizeof one};
    attn_st_kv meta = {"format", "attn-gpt"};
    cr_assert_eq(attn_safetensors_write(attn, &e, 1, &meta, 1, &err), ATTN_OK, "%s", err.msg);
    cr_assert_eq(attn_weights_detect(attn, &f, &err), ATTN_OK, "%s", err.msg);
    cr_assert_eq(f, ATTN_WEIGHTS_ATTN);
    cr_assert_eq(attn_weights_detect(dir, &f, &err), ATTN_OK, "%s", err.msg); /* the folder */
    cr_assert_eq(f, ATTN_WEIGHTS_ATTN);
    const char *gpt2model = tio_path(dir, "gpt2model.safetensors"); /* no "transformer." */
    e.name = "wte.weight";
    cr_assert_eq(attn_safetensors_write(gpt2model, &e, 1, NULL, 0, &err), ATTN_OK, "%s", err.msg);
    cr_assert_eq(attn_weights_detect(gpt2model, &f, &err), ATTN_OK, "%s", err.msg);
    cr_assert_eq(f, ATTN_WEIGHTS_HF);
    const char *pth = tio_path(dir, "model.bin"); /* a zip, whatever its name */
    tio_write(pth, "PK\3\4rest-of-a-zip", 17);
    cr_assert_eq(attn_weights_detect(pth, &f, &err), ATTN_OK, "%s", err.msg);
    cr_assert_eq(f, ATTN_WEIGHTS_BOOK);
    cr_assert_eq(attn_gpt_import(pth, NULL, &(attn_gpt){0}, NULL, &err), ATTN_ERR_FORMAT);
    cr_assert(strstr(err.msg, "model.bin"), "%s", err.msg); /* a broken zip, named */
    const char *other = tio_path(dir, "other.safetensors");
    e.name = "encoder.weight";
    cr_assert_eq(attn_safetensors_write(other, &e, 1, NULL, 0, &err), ATTN_OK, "%s", err.msg);
    cr_assert_eq(attn_weights_detect(other, &f, &err), ATTN_ERR_FORMAT);
    const char *junk = tio_path(dir, "junk.safetensors");
    tio_write(junk, "hello, world", 12);
    cr_assert_eq(attn_weights_detect(junk, &f, &err), ATTN_ERR_FORMAT);
    cr_assert(strstr(err.msg, "not a weights file"), "%s", err.msg);
    cr_assert_eq(attn_weights_detect(tio_path(dir, "absent"), &f, &err), ATTN_ERR_IO);
}

/* src's tensors to dst, less `drop`, plus `add` (may be NULL), metadata kept
 * or (keep_meta 0) none. */
static void rewrite(const char *src, const char *dst, const char *drop, const attn_st_entry *add,
                    int keep_meta) {
    attn_safetensors st;
    attn_error err;
    cr_assert_eq(attn_safetensors_read(src, &st, &err), ATTN_OK, "%s", err.msg);
    attn_st_entry *e = calloc((size_t)st.count + 1, sizeof *e);
    attn_st_kv *kv = calloc((size_t)st.meta_count + 1, sizeof *kv);
    int n = 0;
    for (int i = 0; i < st.count; i++) {
        const attn_st_tensor *t = &st.tensors[i];
        if (drop && strcmp(t->name, drop) == 0) continue;
        e[n++] = (attn_st_entry){t->name, t->dtype, t->ndim, t->shape, t->data, t->end - t->begin};
    }
    if (add) e[n++] = *add;
    for (int i = 0; i < st.meta_count; i++)
        kv[i] = (attn_st_kv){st.meta_keys[i], st.meta_values[i]};
    cr_assert_eq(attn_safetensors_write(dst, e, n, kv, keep_meta ? st.meta_count : 0, &err),
                 ATTN_OK, "%s", err.msg);
    free(e);
    free(kv);
    attn_safetensors_free(&st);
}

static void expect_import(const char *path, const attn_gpt_config *hint, attn_status want,
                          const char *says) {
    attn_gpt m;
    attn_error err;
    attn_status s = attn_gpt_import(path, hint, &m, NULL, &err);
    cr_assert_eq(s, want, "%s: %s", path, err.msg);
    if (says) cr_assert(strstr(err.msg, says), "'%s' not in: %s", says, err.msg);
    if (!s) attn_gpt_free(&m);
}

Test(weights_format, bad_safetensors) {
    attn_gpt_config c = small_config();
    attn_gpt m;
    attn_error err;
    c.tie_weights = 0;
    make_model(&m, &c);
    const char *hf = tio_path(dir, "hf.safetensors"), *bad = tio_path(dir, "bad.safetensors");
    cr_assert_eq(attn_gpt_export(&m, hf, ATTN_WEIGHTS_HF, &err), ATTN_OK, "%s", err.msg);
    rewrite(hf, bad, "transformer.h.1.mlp.c_fc.bias", NULL, 1);
    expect_import(bad, NULL, ATTN_ERR_NOT_FOUND, "'transformer.h.1.mlp.c_fc.bias'");
    static float zeros[100 * 24];
    const int64_t s1[1] = {24}, s2[2] = {51, 24}, s3[1] = {95};
    attn_st_entry extra = {"transformer.h.0.attn.c_extra", "F32", 1, s1, zeros, 24 * 4};
    rewrite(hf, bad, NULL, &extra, 1);
    expect_import(bad, NULL, ATTN_ERR_FORMAT, "'transformer.h.0.attn.c_extra'");
    attn_st_entry fc = {"transformer.h.0.mlp.c_fc.bias", "F32", 1, s3, zeros, 95 * 4};
    rewrite(hf, bad, fc.name, &fc, 1);
    expect_import(bad, NULL, ATTN_ERR_SHAPE, "[95], expected [96]");
    attn_st_entry head = {"lm_head.weight", "F32", 2, s2, zeros, 51 * 24 * 4};
    rewrite(hf, bad, head.name, &head, 1);
    expect_import(bad, NULL, ATTN_ERR_SHAPE,
                  "'lm_head.weight' has shape [51, 24], expected [50, 24]");
    attn_st_entry i32 = {"transformer.ln_f.bias", "I32", 1, s1, zeros, 24 * 4};
    rewrite(hf, bad, i32.name, &i32, 1);
    expect_import(bad, NULL, ATTN_ERR_FORMAT, "dtype I32");
    /* HF's attention buffers are skipped. */
    attn_st_entry buf = {"transformer.h.1.attn.masked_bias", "F32", 1, s1, zeros, 24 * 4};
    rewrite(hf, bad, NULL, &buf, 1);
    expect_import(bad, NULL, ATTN_OK, NULL);
    attn_gpt_free(&m);
}

/* n_heads: from the metadata, a hint, GPT-2's widths, or an error. */
Test(weights_format, heads) {
    attn_gpt_config c = small_config(), hint;
    attn_gpt m;
    attn_error err;
    make_model(&m, &c);
    const char *book = tio_path(dir, "b.safetensors"), *bare = tio_path(dir, "bare.safetensors");
    cr_assert_eq(attn_gpt_export(&m, book, ATTN_WEIGHTS_BOOK, &err), ATTN_OK, "%s", err.msg);
    rewrite(book, bare, NULL, NULL, 0);
    expect_import(bare, NULL, ATTN_ERR_INVALID_ARG, "give n_heads");
    memset(&hint, 0, sizeof hint);
    hint.n_heads = 3;
    expect_import(bare, &hint, ATTN_OK, NULL);
    hint.n_heads = 4;
    expect_import(book, &hint, ATTN_ERR_INVALID_ARG, "its metadata says 3");
    attn_gpt_free(&m);
}

/* HF's config.json beside the weights: one JSON object that describes
 * these tensors, or the import is refused naming the key and both values
 * (a config.json of another model never passes for this one's). */
Test(weights_format, hf_config_json_must_describe_the_tensors) {
    attn_gpt_config c = small_config();
    attn_gpt m;
    attn_error err;
    c.tie_weights = 0;
    make_model(&m, &c);
    const char *hf = tio_path(dir, "model.safetensors"), *cfg = tio_path(dir, "config.json");
    cr_assert_eq(attn_gpt_export(&m, hf, ATTN_WEIGHTS_HF, &err), ATTN_OK, "%s", err.msg);
    cr_assert_eq(attn_gpt_export_hf_config(&m, cfg, &err), ATTN_OK, "%s", err.msg);
    expect_import(hf, NULL, ATTN_OK, NULL); /* attn's own config.json */
    static const struct {
        const char *json, *says;
    } bad[] = {
        {"{\"n_head\": 3, \"n_layer\": 100}", "n_layer says 100, but the tensors of"},
        {"{\"n_head\": 3, \"vocab_size\": 10}", "vocab_size says 10, but the tensors of"},
        {"{\"n_head\": 3, \"n_positions\": 1073741824}", "n_positions says 1073741824, but"},
        {"{\"n_head\": 3, \"n_ctx\": 1024}", "n_ctx says 1024, but the tensors of"},
        {"{\"n_head\": 3, \"n_embd\": 768}", "n_embd says 768, but the tensors of"},
        {"{\"n_head\": 3, \"n_inner\": 100}", "n_inner says 100, but the tensors of"},
        {"{\"n_head\": 3, \"n_layer\": \"2\"}", "n_layer is \"2\", not an integer"},
        {"{\"n_head\": 3, \"n_layer\": 2.5}", "n_layer is 2.5, not an integer"},
        {"{\"n_head\": 3, \"tie_word_embeddings\": true}", "tie_word_embeddings says true"},
        {"[]", "not a JSON object"},
        {"3", "not a JSON object"},
        {"{\"n_head\": 3}{\"n_head\": 3}", "text after the JSON at line 1, column 14"},
        {"\xEF\xBB\xBF{\"n_head\": 3}", "a byte order mark"},
        {"", "empty"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        tio_write(cfg, bad[i].json, strlen(bad[i].json));
        expect_import(hf, NULL, ATTN_ERR_FORMAT, bad[i].says);
        expect_import(hf, NULL, ATTN_ERR_FORMAT, cfg); /* the message names the file */
    }
    static const char *good[] = {
        "{\"n_head\": 3, \"n_layer\": 2, \"n_embd\": 24, \"vocab_size\": 50, "
        "\"n_positions\": 16, \"n_ctx\": 16, \"n_inner\": null, \"tie_word_embeddings\": false}",
        "{\"n_head\": 3, \"n_inner\": 96}",
    };
    for (size_t i = 0; i < sizeof good / sizeof *good; i++) {
        tio_write(cfg, good[i], strlen(good[i]));
        expect_import(hf, NULL, ATTN_OK, NULL);
    }
    attn_gpt_free(&m);
}

/* A BF16 wte is widened (values that bf16 holds exactly). */
Test(weights_format, bf16) {
    attn_gpt_config c = small_config();
    attn_gpt m, back;
    attn_error err;
    make_model(&m, &c);
    float *wte = attn_param_list_find(attn_gpt_params(&m), "tok_emb.weight")->data;
    static uint16_t half[50 * 24];
    for (int i = 0; i < 50 * 24; i++) {
        uint32_t bits;
        memcpy(&bits, &wte[i], 4);
        half[i] = (uint16_t)(bits >> 16);
        bits &= 0xffff0000u;
        memcpy(&wte[i], &bits, 4);
    }
    const char *hf = tio_path(dir, "f.safetensors"), *b16 = tio_path(dir, "b16.safetensors");
    cr_assert_eq(attn_gpt_export(&m, hf, ATTN_WEIGHTS_HF, &err), ATTN_OK, "%s", err.msg);
    const int64_t s[2] = {50, 24};
    attn_st_entry e = {"transformer.wte.weight", "BF16", 2, s, half, sizeof half};
    rewrite(hf, b16, e.name, &e, 1);
    cr_assert_eq(attn_gpt_import(b16, NULL, &back, NULL, &err), ATTN_OK, "%s", err.msg);
    assert_same(&m, &back);
    attn_gpt_free(&back);
    attn_gpt_free(&m);
}

static void write_llmc_variant(const char *src, const char *dst, int cut, int word, int32_t value) {
    size_t n;
    unsigned char *b = tio_slurp(src, &n);
    if (word >= 0) memcpy(b + 4 * word, &value, 4);
    tio_write(dst, b, n - (size_t)cut);
    free(b);
}

Test(weights_format, bad_llmc) {
    attn_gpt_config c = small_config();
    attn_gpt m;
    attn_error err;
    attn_weights_format f;
    make_model(&m, &c);
    const char *bin = tio_path(dir, "m.bin"), *bad = tio_path(dir, "bad.bin");
    cr_assert_eq(attn_gpt_export(&m, bin, ATTN_WEIGHTS_LLMC, &err), ATTN_OK, "%s", err.msg);
    attn_gpt_free(&m);
    write_llmc_variant(bin, bad, 4, -1, 0);
    expect_import(bad, NULL, ATTN_ERR_FORMAT, "truncated");
    write_llmc_variant(bin, bad, 0, -1, 0);
    tio_write(tio_path(dir, "short.bin"), "\xc6\xd7\x34\x01\x03\0\0\0", 8); /* header cut */
    expect_import(tio_path(dir, "short.bin"), NULL, ATTN_ERR_FORMAT, "truncated llm.c header");
    write_llmc_variant(bin, bad, 0, 0, 20240327);
    cr_assert_eq(attn_weights_detect(bad, &f, &err), ATTN_ERR_FORMAT);
    expect_import(bad, NULL, ATTN_ERR_FORMAT, "not a weights file");
    write_llmc_variant(bin, bad, 0, 1, 5);
    expect_import(bad, NULL, ATTN_ERR_FORMAT, "version 5");
    write_llmc_variant(bin, bad, 0, 4, 3); /* a layer more than the data */
    expect_import(bad, NULL, ATTN_ERR_FORMAT, "truncated");
    write_llmc_variant(bin, bad, 0, 5, 5); /* 24 channels in 5 heads */
    expect_import(bad, NULL, ATTN_ERR_FORMAT, "n_heads");
}

/* F16 is widened exactly: normals, the largest, subnormals, signed zero. */
Test(weights_format, f16) {
    attn_gpt_config c = small_config();
    attn_gpt m, back;
    attn_error err;
    make_model(&m, &c);
    static const uint16_t bits[8] = {0x3e00, 0xb400, 0x7bff, 0x0400,
                                     0x0001, 0x03ff, 0x8000, 0x3c00};
    static const float want[8] = {1.5f,           -0.25f,         65504.f, 6.103515625e-05f,
                                  5.9604645e-08f, 6.0975552e-05f, -0.f,    1.f};
    uint16_t half[24];
    float *lnf = attn_param_list_find(attn_gpt_params(&m), "final_norm.scale")->data;
    for (int i = 0; i < 24; i++) {
        half[i] = bits[i % 8];
        lnf[i] = want[i % 8];
    }
    const char *hf = tio_path(dir, "f.safetensors"), *f16 = tio_path(dir, "f16.safetensors");
    cr_assert_eq(attn_gpt_export(&m, hf, ATTN_WEIGHTS_HF, &err), ATTN_OK, "%s", err.msg);
    const int64_t s[1] = {24};
    attn_st_entry e = {"transformer.ln_f.weight", "F16", 1, s, half, sizeof half};
    rewrite(hf, f16, e.name, &e, 1);
    cr_assert_eq(attn_gpt_import(f16, NULL, &back, NULL, &err), ATTN_OK, "%s", err.msg);
    assert_same(&m, &back); /* bit for bit: -0 stays -0 */
    attn_gpt_free(&back);
    attn_gpt_free(&m);
}
