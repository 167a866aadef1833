/* Reading hf and book weights from a set of named tensors: the config from
 * the shapes, then the layout bound and gathered (weights_plan.h). */
#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "attn/fileio.h"
#include "base/json_strict.h"
#include "weights_plan.h"

/* What a reader skips: HF's attention buffers, the book's masks, a tied
 * head already found equal to the embedding. */
typedef struct skip_ctx {
    const char *blocks;         /* "transformer.h." / "h." / "trf_blocks." */
    const char *const *buffers; /* suffixes after "<i>.", NULL-terminated */
    const char *head;           /* a tied head's name, or NULL */
} skip_ctx;

static int skip_name(const char *name, const void *ctx) {
    const skip_ctx *k = ctx;
    if (k->head && strcmp(name, k->head) == 0) return 1;
    const size_t len = strlen(k->blocks);
    if (strncmp(name, k->blocks, len) != 0) return 0;
    const char *p = name + len;
    while (*p >= '0' && *p <= '9')
        p++;
    if (p == name + len || *p++ != '.') return 0;
    for (int i = 0; k->buffers[i]; i++)
        if (strcmp(p, k->buffers[i]) == 0) return 1;
    return 0;
}

/* vocab_size, emb_dim and context_length from the embeddings, n_layers by
 * counting blocks. */
static attn_status read_dims(const attn_safetensors *st, const char *wte, const char *wpe,
                             const char *blocks, const char *file, attn_gpt_config *cfg,
                             attn_error *err) {
    int64_t V, C, T, C2;
    attn_status s = wf_dims2(st, wte, file, &V, &C, err);
    if (!s) s = wf_dims2(st, wpe, file, &T, &C2, err);
    if (s) return s;
    if (C2 != C)
        return attn_fail(err, ATTN_ERR_SHAPE, "%s: '%s' is %lld wide but '%s' is %lld", file, wpe,
                         (long long)C2, wte, (long long)C);
    if (V < 1 || C < 1 || T < 1 || V > (1 << 30) || C > (1 << 20) || T > (1 << 24))
        return attn_fail(err, ATTN_ERR_SHAPE, "%s: embeddings (%lld, %lld), (%lld, %lld)", file,
                         (long long)V, (long long)C, (long long)T, (long long)C2);
    int L;
    if ((s = wf_count_blocks(st, blocks, file, &L, err))) return s;
    if (L < 1) return attn_fail(err, ATTN_ERR_NOT_FOUND, "%s: no block '%s0.'", file, blocks);
    cfg->vocab_size = (int)V;
    cfg->emb_dim = (int)C;
    cfg->context_length = (int)T;
    cfg->n_layers = L;
    return ATTN_OK;
}

/* One size key of HF's config.json against what the tensors say (want;
 * null_ok: null means "the default", n_inner's). Absent: nothing to check. */
static attn_status hf_config_size(const cJSON *root, const char *key, long long want, int null_ok,
                                  const char *path, const char *file, attn_error *err) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, key);
    if (!v || (null_ok && cJSON_IsNull(v))) return ATTN_OK;
    char got[80];
    attn_json_value_text(v, got, sizeof got);
    if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble))
        return attn_fail(err, ATTN_ERR_FORMAT, "%s: %s is %s, not an integer", path, key, got);
    if (v->valuedouble != (double)want)
        return attn_fail(err, ATTN_ERR_FORMAT,
                         "%s: %s says %s, but the tensors of %s say %lld (a config.json of "
                         "another model?)",
                         path, key, got, file, want);
    return ATTN_OK;
}

/* GPT-2's computation: the GELU, epsilon and attention scaling it names. */
static attn_status hf_config_compute(const cJSON *root, const char *path, attn_error *err) {
    const cJSON *act = cJSON_GetObjectItemCaseSensitive(root, "activation_function");
    const cJSON *eps = cJSON_GetObjectItemCaseSensitive(root, "layer_norm_epsilon");
    const cJSON *inv = cJSON_GetObjectItemCaseSensitive(root, "scale_attn_by_inverse_layer_idx");
    if (cJSON_IsString(act) && strcmp(act->valuestring, "gelu_new") &&
        strcmp(act->valuestring, "gelu_pytorch_tanh") && strcmp(act->valuestring, "gelu_fast"))
        return attn_fail(err, ATTN_ERR_FORMAT,
                         "%s: activation_function '%.40s' is not GPT-2's tanh GELU (gelu_new)",
                         path, act->valuestring);
    if (cJSON_IsNumber(eps) && fabs(eps->valuedouble - 1e-5) > 1e-12)
        return attn_fail(err, ATTN_ERR_FORMAT, "%s: layer_norm_epsilon %g is not 1e-05", path,
                         eps->valuedouble);
    if (cJSON_IsTrue(inv))
        return attn_fail(err, ATTN_ERR_FORMAT,
                         "%s: scale_attn_by_inverse_layer_idx is not GPT-2's attention", path);
    return ATTN_OK;
}

/* HF config.json's n_head (0: no file). The file, when there is one, must
 * be one JSON object that describes these tensors (cfg: their sizes) and
 * GPT-2's computation: one that disagrees is refused, naming the key and
 * both values (a config.json left beside other weights must not pass for
 * theirs, and attn would not run what it says). */
static attn_status hf_config_heads(const char *path, const attn_gpt_config *cfg, const char *file,
                                   int *heads, attn_error *err) {
    *heads = 0;
    struct stat sb;
    if (!path || !*path || (stat(path, &sb) != 0 && errno == ENOENT)) return ATTN_OK;
    void *text = NULL;
    size_t n = 0;
    attn_status s = attn_file_read_all(path, 1 << 20, &text, &n, err);
    cJSON *root = NULL;
    if (!s) s = attn_json_parse_strict(text, n, path, &root, err);
    free(text);
    if (s) return s;
    if (!cJSON_IsObject(root))
        s = attn_fail(err, ATTN_ERR_FORMAT, "%s: not a JSON object (Hugging Face's config is one)",
                      path);
    const cJSON *h = cJSON_GetObjectItemCaseSensitive(root, "n_head");
    if (!s && cJSON_IsNumber(h) && h->valuedouble >= 1 && h->valuedouble <= 4096 &&
        h->valuedouble == floor(h->valuedouble))
        *heads = h->valueint;
    else if (!s && h)
        s = attn_fail(err, ATTN_ERR_FORMAT, "%s: n_head is not a positive integer", path);
    const struct {
        const char *key;
        long long want;
    } sizes[] = {{"n_layer", cfg->n_layers},      {"n_embd", cfg->emb_dim},
                 {"vocab_size", cfg->vocab_size}, {"n_positions", cfg->context_length},
                 {"n_ctx", cfg->context_length},  {"n_inner", 4LL * cfg->emb_dim}};
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes && !s; i++)
        s = hf_config_size(root, sizes[i].key, sizes[i].want, i == 5, path, file, err);
    /* HF ties a head to wte whatever the file holds: attn would use it. */
    const cJSON *tie = cJSON_GetObjectItemCaseSensitive(root, "tie_word_embeddings");
    if (!s && cJSON_IsTrue(tie) && !cfg->tie_weights)
        s = attn_fail(err, ATTN_ERR_FORMAT,
                      "%s: tie_word_embeddings says true, but the tensors of %s hold an "
                      "lm_head.weight unlike wte (Hugging Face would drop it for wte)",
                      path, file);
    if (!s) s = hf_config_compute(root, path, err);
    cJSON_Delete(root);
    return s;
}

/* n_heads from a metadata entry "n_heads" (attn's exports), 0 when none. */
static attn_status meta_heads(const attn_safetensors *st, const char *file, int *heads,
                              attn_error *err) {
    uint64_t v = 0;
    *heads = 0;
    if (!attn_safetensors_meta(st, "n_heads")) return ATTN_OK;
    attn_status s = attn_safetensors_meta_u64(st, file, "n_heads", 4096, &v, err);
    *heads = (int)v;
    return s;
}

/* The last steps both formats share: config checked, the model made (its
 * table gives the layout: hf's with prefix, else the book's), the layout
 * bound and gathered; m freed on failure. */
static attn_status finish(const attn_safetensors *st, attn_gpt_config *cfg, const char *prefix,
                          const skip_ctx *skip, double budget, const char *file, attn_gpt *m,
                          attn_error *err) {
    double held = 0; /* the file's image, in memory while the model is built */
    for (int i = 0; i < st->count; i++)
        held += (double)(st->tensors[i].end - st->tensors[i].begin);
    attn_status s = wf_check_config(cfg, held, budget, file, err);
    if (!s) s = attn_gpt_init(m, cfg, NULL, err);
    if (s) return s;
    wf_layout l;
    wf_layout_init(&l);
    s = prefix ? wf_layout_hf(&l, m, prefix, err) : wf_layout_book(&l, m, !cfg->tie_weights, err);
    if (!s) s = wf_bind(&l, st, skip_name, skip, file, err);
    if (!s) s = wf_gather(&l, m, file, err);
    wf_layout_free(&l);
    if (s) attn_gpt_free(m);
    return s;
}

attn_status wf_import_hf(const attn_safetensors *st, const char *file, const char *config_json,
                         const attn_gpt_config *hint, double budget, attn_gpt *m, attn_error *err) {
    static const char *const buffers[] = {"attn.bias", "attn.masked_bias", NULL};
    const char *prefix = attn_safetensors_find(st, "transformer.wte.weight") ? "transformer." : "";
    char wte[64], wpe[64], blocks[64], h0[80];
    snprintf(wte, sizeof wte, "%swte.weight", prefix);
    snprintf(wpe, sizeof wpe, "%swpe.weight", prefix);
    snprintf(blocks, sizeof blocks, "%sh.", prefix);
    snprintf(h0, sizeof h0, "%sh.0.attn.c_attn.bias", prefix);
    attn_gpt_config cfg;
    memset(&cfg, 0, sizeof cfg);
    attn_status s = read_dims(st, wte, wpe, blocks, file, &cfg, err);
    if (s) return s;
    cfg.qkv_bias = attn_safetensors_find(st, h0) != NULL;
    const attn_st_tensor *head = attn_safetensors_find(st, "lm_head.weight");
    cfg.tie_weights = !head || wf_same_tensor(head, attn_safetensors_find(st, wte));
    cfg.drop_rate = hint ? hint->drop_rate : 0;
    int heads = 0;
    const char *source = "its config.json";
    s = hf_config_heads(config_json, &cfg, file, &heads, err);
    if (!s && !heads) {
        source = "its metadata";
        s = meta_heads(st, file, &heads, err);
    }
    if (!s) s = wf_set_heads(&cfg, heads, source, hint, file, err);
    const skip_ctx skip = {blocks, buffers, cfg.tie_weights && head ? "lm_head.weight" : NULL};
    return s ? s : finish(st, &cfg, prefix, &skip, budget, file, m, err);
}

attn_status wf_import_book(const attn_safetensors *st, const char *file,
                           const attn_gpt_config *hint, double budget, attn_gpt *m,
                           attn_error *err) {
    static const char *const buffers[] = {"att.mask", NULL};
    attn_gpt_config cfg;
    memset(&cfg, 0, sizeof cfg);
    attn_status s =
        read_dims(st, "tok_emb.weight", "pos_emb.weight", "trf_blocks.", file, &cfg, err);
    if (s) return s;
    cfg.qkv_bias = attn_safetensors_find(st, "trf_blocks.0.att.W_query.bias") != NULL;
    const attn_st_tensor *head = attn_safetensors_find(st, "out_head.weight");
    cfg.tie_weights = !head || wf_same_tensor(head, attn_safetensors_find(st, "tok_emb.weight"));
    cfg.drop_rate = hint ? hint->drop_rate : 0;
    int heads = 0;
    s = meta_heads(st, file, &heads, err);
    if (!s) s = wf_set_heads(&cfg, heads, "its metadata", hint, file, err);
    const skip_ctx skip = {"trf_blocks.", buffers,
                           cfg.tie_weights && head ? "out_head.weight" : NULL};
    return s ? s : finish(st, &cfg, NULL, &skip, budget, file, m, err);
}
