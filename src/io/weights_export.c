/* Writing a model as hf, llmc or book weights (attn/weights_format.h). */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn/fileio.h"
#include "attn/gpt_family.h"
#include "attn/membudget.h"
#include "attn/pth.h"
#include "attn/safetensors.h"
#include "attn/weights_format.h"
#include "weights_plan.h"

/* Key i of want into o as --config JSON (its table's type), and "key value"
 * of have's onto the has list. */
static void need_key(cJSON *o, const attn_gpt_config *have, const attn_gpt_config *want, int i,
                     char *has, size_t cap) {
    const attn_gpt_key *k = attn_gpt_key_at(i);
    char v[64];
    attn_gpt_key_value(want, i, v, sizeof v);
    if (k->type == ATTN_GPT_KEY_CHOICE)
        cJSON_AddStringToObject(o, k->name, v);
    else if (k->type == ATTN_GPT_KEY_BOOL)
        cJSON_AddBoolToObject(o, k->name, strcmp(v, "true") == 0);
    else
        cJSON_AddNumberToObject(o, k->name, strtod(v, NULL));
    const size_t used = strlen(has);
    attn_gpt_key_value(have, i, v, sizeof v);
    snprintf(has + used, cap - used, "%s%s %s", used ? ", " : "", k->name, v);
}

attn_status attn_weights_can_export(const attn_gpt_config *cfg, attn_weights_format fmt,
                                    attn_error *err) {
    const char *name = attn_weights_format_name(fmt);
    if (!name) return attn_fail(err, ATTN_ERR_INVALID_ARG, "unknown weights format %d", (int)fmt);
    if (fmt == ATTN_WEIGHTS_ATTN)
        return attn_fail(err, ATTN_ERR_INVALID_ARG,
                         "attn checkpoints carry a vocabulary and are written by attn train; "
                         "export writes hf, llmc or book");
    /* What the format holds: the book's model, with q/k/v biases in GPT-2's
     * files, tied in llm.c's (HF's and the book's: either way). */
    attn_gpt_config want = attn_gpt_config_as_book(cfg);
    want.tie_weights = fmt == ATTN_WEIGHTS_LLMC ? 1 : cfg->tie_weights;
    if (fmt != ATTN_WEIGHTS_BOOK) want.qkv_bias = 1;
    cJSON *o = cJSON_CreateObject();
    if (!o) return attn_fail(err, ATTN_ERR_NOMEM, "out of memory");
    char has[512] = "";
    for (int i = attn_gpt_key_find("qkv_bias"); i < ATTN_GPT_KEY_VARIANT0 + ATTN_GPT_KEY_VARIANTS;
         i++) {
        char a[64], b[64];
        attn_gpt_key_value(cfg, i, a, sizeof a);
        attn_gpt_key_value(&want, i, b, sizeof b);
        if (strcmp(a, b) != 0) need_key(o, cfg, &want, i, has, sizeof has);
    }
    char *json = has[0] ? cJSON_PrintUnformatted(o) : NULL;
    cJSON_Delete(o);
    if (!has[0]) return ATTN_OK;
    static const char *const what[] = {
        [ATTN_WEIGHTS_HF] = "Hugging Face's GPT-2 has q/k/v biases",
        [ATTN_WEIGHTS_LLMC] = "llm.c's GPT-2 has q/k/v biases and ties its head to wte",
        [ATTN_WEIGHTS_BOOK] = "the book's file holds the book's GPTModel"};
    attn_status s = attn_fail(err, ATTN_ERR_INVALID_ARG,
                              "cannot write this model as %s (%s): it has %s; a model trained with "
                              "%s in its --config file can be (the gpt2-* presets export to every "
                              "format)",
                              name, what[fmt], has, json ? json : "{}");
    cJSON_free(json);
    return s;
}

attn_status wf_entries(const attn_gpt *m, attn_weights_format fmt, wf_layout *l,
                       attn_st_entry **entries, int *count, attn_error *err) {
    attn_status s = fmt == ATTN_WEIGHTS_HF ? wf_layout_hf(l, m, "transformer.", err)
                                           : wf_layout_book(l, m, 1, err);
    if (!s) s = wf_scatter(l, m, err);
    if (s) return s;
    attn_st_entry *e = calloc((size_t)l->nt, sizeof *e);
    if (!e) return attn_fail(err, ATTN_ERR_NOMEM, "out of memory for %d entries", l->nt);
    for (int i = 0; i < l->nt; i++) {
        const wf_tensor *t = &l->t[i];
        e[i] = (attn_st_entry){t->name, "F32", t->ndim, t->shape, t->buf, t->numel * sizeof(float)};
    }
    *entries = e;
    *count = l->nt;
    return ATTN_OK;
}

/* The book's .pth: entries with each block's causal-mask buffer (ones above
 * the diagonal, (T, T) float, as MultiHeadAttention registers it) before the
 * block's own tensors, in state_dict()'s order, so that the book's strict
 * load_state_dict takes the file. */
static attn_status write_pth(const attn_gpt *m, const char *path, const attn_st_entry *e, int n,
                             attn_error *err) {
    const int L = m->cfg.n_layers;
    const size_t T = (size_t)m->cfg.context_length;
    float *mask = calloc(T * T, sizeof *mask);
    attn_st_entry *all = calloc((size_t)n + (size_t)L, sizeof *all);
    char(*names)[64] = calloc((size_t)L, sizeof *names);
    const int64_t shape[2] = {(int64_t)T, (int64_t)T};
    attn_status s = ATTN_OK;
    if (!mask || !all || !names) s = attn_fail(err, ATTN_ERR_NOMEM, "out of memory for the masks");
    for (size_t i = 0; !s && i < T; i++)
        for (size_t j = i + 1; j < T; j++)
            mask[i * T + j] = 1.0f;
    int k = 0, next = 0;
    for (int i = 0; !s && i < n; i++) {
        char want[48];
        snprintf(want, sizeof want, "trf_blocks.%d.att.", next);
        if (next < L && strncmp(e[i].name, want, strlen(want)) == 0) {
            snprintf(names[next], sizeof names[next], "%smask", want);
            all[k++] = (attn_st_entry){names[next++], "F32", 2, shape, mask, T * T * sizeof(float)};
        }
        all[k++] = e[i];
    }
    if (!s) s = attn_pth_write(path, all, k, err);
    free(mask), free(all), free(names);
    return s;
}

/* 1 when path's name ends in suffix. */
static int ends_with(const char *path, const char *suffix) {
    const size_t n = strlen(path), k = strlen(suffix);
    return n >= k && strcmp(path + n - k, suffix) == 0;
}

/* hf or book as safetensors, with the metadata that says its heads; book
 * as the book's torch.save file unless the name ends in .safetensors. */
static attn_status export_st(const attn_gpt *m, const char *path, attn_weights_format fmt,
                             attn_error *err) {
    wf_layout l;
    attn_st_entry *entries = NULL;
    int count = 0;
    char heads[16];
    snprintf(heads, sizeof heads, "%d", m->cfg.n_heads);
    const attn_st_kv meta[2] = {{"format", "pt"}, {"n_heads", heads}};
    wf_layout_init(&l);
    attn_status s = wf_entries(m, fmt, &l, &entries, &count, err);
    if (!s && fmt == ATTN_WEIGHTS_BOOK && !ends_with(path, ".safetensors"))
        s = write_pth(m, path, entries, count, err);
    else if (!s)
        s = attn_safetensors_write(path, entries, count, meta, 2, err);
    free(entries);
    wf_layout_free(&l);
    return s;
}

/* A classifier (chapter 6: out_head n wide, with its bias) as the book's
 * file: its table is the book's state_dict, names and order. Adapters are
 * merged first (attn_gpt_merge_lora): a table holding one is refused. */
static attn_status export_classifier(const attn_gpt *m, const char *path, attn_error *err) {
    const attn_param_list *L = attn_gpt_params(m);
    attn_st_entry *e = calloc((size_t)L->count, sizeof *e);
    if (!e) return attn_fail(err, ATTN_ERR_NOMEM, "out of memory for %d entries", L->count);
    attn_status s = ATTN_OK;
    for (int i = 0; !s && i < L->count; i++) {
        const attn_param *p = &L->items[i];
        if (strstr(p->name, ".lora."))
            s = attn_fail(err, ATTN_ERR_INVALID_ARG,
                          "export: %s is an adapter; merge the adapters first", p->name);
        e[i] =
            (attn_st_entry){p->name, "F32", p->ndim, p->shape, p->data, p->numel * sizeof(float)};
    }
    char heads[16];
    snprintf(heads, sizeof heads, "%d", m->cfg.n_heads);
    const attn_st_kv meta[2] = {{"format", "pt"}, {"n_heads", heads}};
    if (!s && !ends_with(path, ".safetensors"))
        s = write_pth(m, path, e, L->count, err);
    else if (!s)
        s = attn_safetensors_write(path, e, L->count, meta, 2, err);
    free(e);
    return s;
}

attn_status attn_gpt_export(const attn_gpt *m, const char *path, attn_weights_format fmt,
                            attn_error *err) {
    attn_status s = attn_gpt_check_fp32(m, "export", err);
    if (s) return s;
    if (fmt == ATTN_WEIGHTS_BOOK && attn_gpt_head_width(m) != m->cfg.vocab_size) {
        s = attn_weights_can_export(&m->cfg, fmt, err);
        return s ? s : export_classifier(m, path, err);
    }
    s = attn_gpt_check_language_model(m, "export", err);
    if (!s) s = attn_weights_can_export(&m->cfg, fmt, err);
    if (s) return s;
    /* The file's tensors are built whole before writing. */
    if ((s = attn_mem_check((double)attn_gpt_num_params(m) * sizeof(float), 0,
                            "the exported tensors", err)))
        return s;
    return fmt == ATTN_WEIGHTS_LLMC ? wf_export_llmc(m, path, err) : export_st(m, path, fmt, err);
}

attn_status attn_gpt_export_hf_config(const attn_gpt *m, const char *path, attn_error *err) {
    attn_status s0 = attn_gpt_check_language_model(m, "export", err);
    if (s0) return s0;
    const attn_gpt_config *c = &m->cfg;
    cJSON *o = cJSON_CreateObject();
    cJSON *arch = cJSON_AddArrayToObject(o, "architectures");
    cJSON_AddItemToArray(arch, cJSON_CreateString("GPT2LMHeadModel"));
    cJSON_AddStringToObject(o, "model_type", "gpt2");
    cJSON_AddNumberToObject(o, "vocab_size", c->vocab_size);
    cJSON_AddNumberToObject(o, "n_positions", c->context_length);
    cJSON_AddNumberToObject(o, "n_ctx", c->context_length);
    cJSON_AddNumberToObject(o, "n_embd", c->emb_dim);
    cJSON_AddNumberToObject(o, "n_layer", c->n_layers);
    cJSON_AddNumberToObject(o, "n_head", c->n_heads);
    cJSON_AddStringToObject(o, "activation_function", "gelu_new");
    cJSON_AddNumberToObject(o, "layer_norm_epsilon", 1e-5);
    cJSON_AddNumberToObject(o, "resid_pdrop", c->drop_rate);
    cJSON_AddNumberToObject(o, "embd_pdrop", c->drop_rate);
    cJSON_AddNumberToObject(o, "attn_pdrop", c->drop_rate);
    cJSON_AddBoolToObject(o, "tie_word_embeddings", c->tie_weights != 0);
    char *text = o ? cJSON_Print(o) : NULL; /* NULL: out of memory */
    cJSON_Delete(o);
    const size_t n = text ? strlen(text) : 0;
    char *line = text ? malloc(n + 2) : NULL;
    attn_status s;
    if (line) {
        memcpy(line, text, n);
        line[n] = '\n';
        s = attn_file_write_atomic(path, line, n + 1, err);
    } else {
        s = attn_fail(err, ATTN_ERR_NOMEM, "out of memory for %s", path);
    }
    free(line);
    cJSON_free(text);
    return s;
}
