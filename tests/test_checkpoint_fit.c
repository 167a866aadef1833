/* Issue 17: attn_gpt_load_checkpoint checks a file's config against its
 * tensors before it allocates the model (a config may claim any size), and
 * refuses non-finite weights and a step that is not plain digits.
 *
 * Files are written here with attn_safetensors_write_params from real
 * models (with and without qkv_bias, so the expected names are the ones
 * attn_gpt_init makes), then with metadata that lies. */
#include "io_util.h"

#include <criterion/criterion.h>
#include <math.h>

#include "attn/gpt.h"
#include "attn/safetensors.h"
#include "attn/train.h"

static const char *dir;

static void setup(void) {
    dir = tio_mkdtemp();
}
static void teardown(void) {
    tio_rmtree(dir);
}

TestSuite(checkpoint_fit, .init = setup, .fini = teardown);

static const char VOCAB[] = "abcde"; /* vocab_size 5 */

static attn_gpt_config small(int qkv_bias) {
    attn_gpt_config c = {.vocab_size = 5,
                         .context_length = 8,
                         .emb_dim = 8,
                         .n_heads = 2,
                         .n_layers = 2,
                         .drop_rate = 0.0,
                         .qkv_bias = qkv_bias};
    return c;
}

/* A model of `real`, saved with `said` as its config metadata; fill(model)
 * may change weights first. */
static const char *save(const char *name, const attn_gpt_config *real, const char *said,
                        const char *step, void (*fill)(attn_gpt *)) {
    attn_gpt m;
    attn_rng rng;
    attn_error err;
    attn_rng_seed(&rng, 1);
    cr_assert_eq(attn_gpt_init(&m, real, &rng, &err), ATTN_OK, "%s", err.msg);
    if (fill) fill(&m);
    char *cfg = NULL;
    if (!said) {
        cr_assert_eq(attn_gpt_config_to_json(real, &cfg, &err), ATTN_OK);
        said = cfg;
    }
    attn_st_kv meta[] = {
        {"format", "attn-gpt"}, {"config", said}, {"vocabulary", VOCAB}, {"step", step}};
    const char *p = tio_path(dir, name);
    cr_assert_eq(attn_safetensors_write_params(p, attn_gpt_params(&m), meta, 4, &err), ATTN_OK,
                 "%s", err.msg);
    free(cfg);
    attn_gpt_free(&m);
    return p;
}

static const char *load_fail(const char *path, attn_status want) {
    static attn_error err;
    attn_gpt m;
    attn_tokenizer tok;
    attn_status s = attn_gpt_load_checkpoint(path, &m, &tok, NULL, &err);
    cr_assert_eq(s, want, "status %d: %s", s, err.msg);
    cr_assert(strstr(err.msg, path), "the message names the file: %s", err.msg);
    return err.msg;
}

Test(checkpoint_fit, honest_files_load_with_and_without_qkv_bias) {
    for (int bias = 0; bias < 2; bias++) {
        const attn_gpt_config c = small(bias);
        const char *p = save("ok.safetensors", &c, NULL, "12", NULL);
        attn_gpt m;
        attn_tokenizer tok;
        attn_error err;
        int64_t step = -7;
        cr_assert_eq(attn_gpt_load_checkpoint(p, &m, &tok, &step, &err), ATTN_OK, "bias %d: %s",
                     bias, err.msg);
        cr_assert_eq(step, 12);
        cr_assert_eq(m.cfg.qkv_bias, bias);
        attn_gpt_free(&m);
        attn_tokenizer_free(&tok);
    }
}

Test(checkpoint_fit, a_lying_config_names_its_key_before_allocating) {
    const attn_gpt_config c = small(0);
    /* (tests/cli_inputs.sh has the 65536-wide one, under a memory limit) */
    const char *p = save("wide.safetensors", &c,
                         "{\"vocab_size\":5,\"context_length\":8,\"emb_dim\":64,\"n_heads\":2,"
                         "\"n_layers\":2,\"drop_rate\":0,\"qkv_bias\":false}",
                         "1", NULL);
    cr_assert(strstr(load_fail(p, ATTN_ERR_SHAPE),
                     "the config says emb_dim 64, but tensor 'tok_emb.weight' has shape (5, 8), "
                     "not (5, 64)"));
    p = save("ctx.safetensors", &c,
             "{\"vocab_size\":5,\"context_length\":1048576,\"emb_dim\":8,\"n_heads\":2,"
             "\"n_layers\":2,\"drop_rate\":0,\"qkv_bias\":false}",
             "1", NULL);
    cr_assert(strstr(load_fail(p, ATTN_ERR_SHAPE),
                     "the config says context_length 1048576, but tensor 'pos_emb.weight'"));
    p = save("layers.safetensors", &c,
             "{\"vocab_size\":5,\"context_length\":8,\"emb_dim\":8,\"n_heads\":2,"
             "\"n_layers\":4096,\"drop_rate\":0,\"qkv_bias\":false}",
             "1", NULL);
    cr_assert(strstr(load_fail(p, ATTN_ERR_NOT_FOUND),
                     "the config says n_layers 4096, but tensor 'trf_blocks.2.att.W_query.weight' "
                     "is missing"));
    p = save("bias.safetensors", &c,
             "{\"vocab_size\":5,\"context_length\":8,\"emb_dim\":8,\"n_heads\":2,"
             "\"n_layers\":2,\"drop_rate\":0,\"qkv_bias\":true}",
             "1", NULL);
    cr_assert(strstr(load_fail(p, ATTN_ERR_SHAPE),
                     "the config says qkv_bias true, but tensor 'trf_blocks.0.att.W_query.bias' is "
                     "missing"));
}

/* issue 31 item 7: a tensor with more dimensions than its entry (a 3-d
 * tok_emb.weight) is refused naming its shape; it read past the expected
 * shape (UBSan), and the message said "vocab_size 741881128". */
Test(checkpoint_fit, a_tensor_of_higher_rank_is_refused_by_its_shape) {
    const attn_gpt_config c = small(0);
    attn_gpt m;
    attn_rng rng;
    attn_error err;
    attn_rng_seed(&rng, 1);
    cr_assert_eq(attn_gpt_init(&m, &c, &rng, &err), ATTN_OK, "%s", err.msg);
    const attn_param_list *ps = attn_gpt_params(&m);
    attn_st_entry *e = calloc((size_t)ps->count, sizeof *e);
    const int64_t three[3] = {5, 8, 1};
    for (int i = 0; i < ps->count; i++) {
        const attn_param *p = &ps->items[i];
        const int tok = strcmp(p->name, "tok_emb.weight") == 0;
        e[i] = (attn_st_entry){p->name,           "F32",
                               tok ? 3 : p->ndim, tok ? three : p->shape,
                               p->data,           p->numel * sizeof(float)};
    }
    char *cfg = NULL;
    cr_assert_eq(attn_gpt_config_to_json(&c, &cfg, &err), ATTN_OK);
    attn_st_kv meta[] = {{"format", "attn-gpt"}, {"config", cfg}, {"vocabulary", VOCAB}};
    const char *path = tio_path(dir, "rank3.safetensors");
    cr_assert_eq(attn_safetensors_write(path, e, ps->count, meta, 3, &err), ATTN_OK, "%s", err.msg);
    const char *msg = load_fail(path, ATTN_ERR_SHAPE);
    cr_assert(strstr(msg, "the config says vocab_size 5, but tensor 'tok_emb.weight' has shape "
                          "(5, 8, 1), not (5, 8)"),
              "%s", msg);
    free(cfg);
    free(e);
    attn_gpt_free(&m);
}

/* Grouped-query K/V and QK-norm's scales against the config's n_kv_heads
 * and qk_norm (src/io/checkpoint_fit.c): an honest file loads; a config that
 * says otherwise names its key. */
Test(checkpoint_fit, attention_keys_are_checked_against_the_tensors) {
    attn_gpt_config c = small(1);
    c.n_kv_heads = 1;
    c.qk_norm = 1;
    const char *p = save("gqa.safetensors", &c, NULL, "3", NULL);
    attn_gpt m;
    attn_tokenizer tok;
    attn_error err;
    cr_assert_eq(attn_gpt_load_checkpoint(p, &m, &tok, NULL, &err), ATTN_OK, "%s", err.msg);
    cr_expect(m.cfg.n_kv_heads == 1 && m.cfg.qk_norm == 1);
    cr_expect_eq(m.blocks[0].att.W_key.out_features, 4);
    attn_gpt_free(&m);
    attn_tokenizer_free(&tok);
    p = save("mha.safetensors", &c,
             "{\"vocab_size\":5,\"context_length\":8,\"emb_dim\":8,\"n_heads\":2,"
             "\"n_layers\":2,\"drop_rate\":0,\"qkv_bias\":true,\"qk_norm\":true}",
             "1", NULL);
    const char *msg = load_fail(p, ATTN_ERR_SHAPE);
    cr_assert(strstr(msg, "the config says n_kv_heads 2, but tensor "
                          "'trf_blocks.0.att.W_key.weight' has shape (4, 8), not (8, 8)"),
              "%s", msg);
    p = save("noqk.safetensors", &c,
             "{\"vocab_size\":5,\"context_length\":8,\"emb_dim\":8,\"n_heads\":2,"
             "\"n_layers\":2,\"drop_rate\":0,\"qkv_bias\":true,\"n_kv_heads\":1}",
             "1", NULL);
    msg = load_fail(p, ATTN_ERR_SHAPE);
    cr_assert(strstr(msg, "the config says qk_norm false, but tensor "
                          "'trf_blocks.0.att.q_norm.scale' is present"),
              "%s", msg);
}

static void poison(attn_gpt *m) {
    const attn_param *p = attn_param_list_find(&m->params, "trf_blocks.1.norm2.shift");
    cr_assert(p);
    p->data[3] = INFINITY;
}

Test(checkpoint_fit, non_finite_weights_are_refused) {
    const attn_gpt_config c = small(1);
    const char *p = save("inf.safetensors", &c, NULL, "3", poison);
    const char *msg = load_fail(p, ATTN_ERR_FORMAT);
    cr_assert(strstr(msg, "holds non-finite values (tensor trf_blocks.1.norm2.shift)"), "%s", msg);
}

Test(checkpoint_fit, the_step_is_plain_digits) {
    const attn_gpt_config c = small(0);
    const char *bad[] = {"-5", "+5", " 5", "5 ", "0x5", "", "99999999999999999999"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const char *p = save("step.safetensors", &c, NULL, bad[i], NULL);
        const char *msg = load_fail(p, ATTN_ERR_FORMAT);
        cr_assert(strstr(msg, "metadata 'step' is '") && strstr(msg, "not an integer in [0, "),
                  "'%s': %s", bad[i], msg);
    }
}
