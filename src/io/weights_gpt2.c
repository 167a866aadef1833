/* The layouts of GPT-2's weight files (HF GPT2LMHeadModel, llm.c, the book's
 * state_dict) and reading hf and book from a set of named tensors
 * (weights_plan.h). */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn/fileio.h"
#include "base/json_strict.h"
#include "weights_plan.h"

/* Parameter name of block b (b < 0: name as is). */
static const char *pname(char *buf, size_t cap, int b, const char *name) {
    if (b < 0)
        snprintf(buf, cap, "%s", name);
    else
        snprintf(buf, cap, "trf_blocks.%d.%s", b, name);
    return buf;
}

/* A copy into parameter (b, name). */
static int cp(wf_layout *l, int t, int b, const char *name, size_t off, size_t stride, int64_t rows,
              int64_t cols) {
    char p[ATTN_PARAM_NAME_MAX];
    return wf_add_copy(l, t, pname(p, sizeof p, b, name), off, stride, rows, cols);
}

/* HF GPT2LMHeadModel's tensor for each of the book's (a block's after
 * "trf_blocks.<b>.", then "h.<b>." in HF's): W_query, W_key and W_value
 * are the parts of c_attn along its output; a Conv1D weight is stored
 * [in, out] (read transposed). lm_head lies outside "transformer.". */
typedef struct hf_rule {
    const char *book, *hf;
    int part, parts, conv1d, bare;
} hf_rule;

static const hf_rule HF_TOP[] = {
    {"tok_emb.weight", "wte.weight", 0, 1, 0, 0},
    {"pos_emb.weight", "wpe.weight", 0, 1, 0, 0},
    {"final_norm.scale", "ln_f.weight", 0, 1, 0, 0},
    {"final_norm.shift", "ln_f.bias", 0, 1, 0, 0},
    {"out_head.weight", "lm_head.weight", 0, 1, 0, 1},
};

static const hf_rule HF_BLOCK[] = {
    {"norm1.scale", "ln_1.weight", 0, 1, 0, 0},
    {"norm1.shift", "ln_1.bias", 0, 1, 0, 0},
    {"att.W_query.weight", "attn.c_attn.weight", 0, 3, 1, 0},
    {"att.W_key.weight", "attn.c_attn.weight", 1, 3, 1, 0},
    {"att.W_value.weight", "attn.c_attn.weight", 2, 3, 1, 0},
    {"att.W_query.bias", "attn.c_attn.bias", 0, 3, 0, 0},
    {"att.W_key.bias", "attn.c_attn.bias", 1, 3, 0, 0},
    {"att.W_value.bias", "attn.c_attn.bias", 2, 3, 0, 0},
    {"att.out_proj.weight", "attn.c_proj.weight", 0, 1, 1, 0},
    {"att.out_proj.bias", "attn.c_proj.bias", 0, 1, 0, 0},
    {"norm2.scale", "ln_2.weight", 0, 1, 0, 0},
    {"norm2.shift", "ln_2.bias", 0, 1, 0, 0},
    {"ff.layers.0.weight", "mlp.c_fc.weight", 0, 1, 1, 0},
    {"ff.layers.0.bias", "mlp.c_fc.bias", 0, 1, 0, 0},
    {"ff.layers.2.weight", "mlp.c_proj.weight", 0, 1, 1, 0},
    {"ff.layers.2.bias", "mlp.c_proj.bias", 0, 1, 0, 0},
};

static const hf_rule *hf_find(const hf_rule *r, size_t n, const char *name) {
    for (size_t i = 0; i < n; i++)
        if (strcmp(r[i].book, name) == 0) return &r[i];
    return NULL;
}

/* Parameter name's rule and block (-1: none) into *b; NULL when HF has none. */
static const hf_rule *hf_rule_of(const char *name, int *b) {
    int used = 0;
    *b = -1;
    if (sscanf(name, "trf_blocks.%d.%n", b, &used) == 1 && used > 0)
        return hf_find(HF_BLOCK, sizeof HF_BLOCK / sizeof *HF_BLOCK, name + used);
    *b = -1;
    return hf_find(HF_TOP, sizeof HF_TOP / sizeof *HF_TOP, name);
}

/* The layout's tensor named n, added with shape (d0[, d1]) at its first use. */
static int tensor_named(wf_layout *l, const char *n, int ndim, int64_t d0, int64_t d1) {
    for (int i = 0; i < l->nt; i++)
        if (strcmp(l->t[i].name, n) == 0) return i;
    return wf_add_tensor(l, n, ndim, d0, d1, 0);
}

/* Parameter p as part of its HF tensor. */
static int hf_param(wf_layout *l, const attn_param *p, const hf_rule *r, int b,
                    const char *prefix) {
    char n[ATTN_PARAM_NAME_MAX];
    const char *pre = r->bare ? "" : prefix;
    if (b < 0)
        snprintf(n, sizeof n, "%s%s", pre, r->hf);
    else
        snprintf(n, sizeof n, "%sh.%d.%s", pre, b, r->hf);
    const int64_t rows = p->shape[0], cols = p->ndim == 2 ? p->shape[1] : 1;
    const size_t part = (size_t)r->part * (size_t)rows, width = (size_t)(r->parts * rows);
    if (r->conv1d) /* [in, parts * out]: element (r, c) at c * width + part + r */
        return wf_add_copy(l, tensor_named(l, n, 2, cols, (int64_t)width), p->name, part, width,
                           rows, cols);
    const int t =
        p->ndim == 2 ? tensor_named(l, n, 2, rows, cols) : tensor_named(l, n, 1, (int64_t)width, 0);
    return wf_add_copy(l, t, p->name, part, 0, rows, cols);
}

attn_status wf_layout_hf(wf_layout *l, const attn_gpt *m, const char *prefix, attn_error *err) {
    const attn_param_list *L = attn_gpt_params(m);
    for (int i = 0; i < L->count; i++) {
        int b;
        const hf_rule *r = hf_rule_of(L->items[i].name, &b);
        if (!r)
            return attn_fail(err, ATTN_ERR_INVALID_ARG, "GPT-2's HF layout has no tensor for '%s'",
                             L->items[i].name);
        if (hf_param(l, &L->items[i], r, b, prefix))
            return attn_fail(err, ATTN_ERR_NOMEM, "out of memory for the HF layout");
    }
    return ATTN_OK;
}

/* The book's state_dict is the table itself, each tensor 1:1; a tied
 * model written for the book's code carries its head, tok_emb's matrix, as
 * out_head.weight too. */
attn_status wf_layout_book(wf_layout *l, const attn_gpt *m, int out_head, attn_error *err) {
    const attn_param_list *L = attn_gpt_params(m);
    int bad = 0;
    for (int i = 0; i < L->count; i++) {
        const attn_param *p = &L->items[i];
        const int64_t cols = p->ndim == 2 ? p->shape[1] : 1;
        bad |= wf_add_copy(l, wf_add_tensor(l, p->name, p->ndim, p->shape[0], cols, 0), p->name, 0,
                           0, p->shape[0], cols);
    }
    const attn_gpt_config *c = &m->cfg;
    if (out_head && c->tie_weights)
        bad |= wf_add_copy(l, wf_add_tensor(l, "out_head.weight", 2, c->vocab_size, c->emb_dim, 0),
                           "tok_emb.weight", 0, 0, c->vocab_size, c->emb_dim);
    return bad ? attn_fail(err, ATTN_ERR_NOMEM, "out of memory for the book's layout") : ATTN_OK;
}

/* llm.c's per-layer tensor (L, rows[, cols]) read into each block's (b, name). */
static int llmc_stack(wf_layout *l, const char *tensor, const char *name, int L, int64_t rows,
                      int64_t cols) {
    const int t = wf_add_tensor(l, tensor, cols ? 3 : 2, L, rows, cols);
    const size_t n = (size_t)rows * (size_t)(cols ? cols : 1);
    int bad = 0;
    for (int b = 0; b < L; b++)
        bad |= cp(l, t, b, name, (size_t)b * n, 0, rows, cols ? cols : 1);
    return bad;
}

/* qkvw (L, 3C, C) and qkvb (L, 3C): query, key, value rows per layer. */
static int llmc_qkv(wf_layout *l, int L, int64_t C) {
    static const char *const qkv[3] = {"att.W_query", "att.W_key", "att.W_value"};
    const int w = wf_add_tensor(l, "qkvw", 3, L, 3 * C, C);
    const int bias = wf_add_tensor(l, "qkvb", 2, L, 3 * C, 0);
    char p[64];
    int bad = 0;
    for (int b = 0; b < L; b++)
        for (int i = 0; i < 3; i++) {
            snprintf(p, sizeof p, "%s.weight", qkv[i]);
            bad |= cp(l, w, b, p, (size_t)((3 * b + i) * C * C), 0, C, C);
            snprintf(p, sizeof p, "%s.bias", qkv[i]);
            bad |= cp(l, bias, b, p, (size_t)((3 * b + i) * C), 0, C, 1);
        }
    return bad;
}

attn_status wf_layout_llmc(wf_layout *l, const attn_gpt_config *cfg, int64_t Vp, attn_error *err) {
    const int64_t V = cfg->vocab_size, C = cfg->emb_dim, T = cfg->context_length, F = 4 * C;
    const int L = cfg->n_layers;
    int bad = cp(l, wf_add_tensor(l, "wte", 2, Vp, C, 0), -1, "tok_emb.weight", 0, 0, V, C);
    bad |= cp(l, wf_add_tensor(l, "wpe", 2, T, C, 0), -1, "pos_emb.weight", 0, 0, T, C);
    bad |= llmc_stack(l, "ln1w", "norm1.scale", L, C, 0);
    bad |= llmc_stack(l, "ln1b", "norm1.shift", L, C, 0);
    bad |= llmc_qkv(l, L, C);
    bad |= llmc_stack(l, "attprojw", "att.out_proj.weight", L, C, C);
    bad |= llmc_stack(l, "attprojb", "att.out_proj.bias", L, C, 0);
    bad |= llmc_stack(l, "ln2w", "norm2.scale", L, C, 0);
    bad |= llmc_stack(l, "ln2b", "norm2.shift", L, C, 0);
    bad |= llmc_stack(l, "fcw", "ff.layers.0.weight", L, F, C);
    bad |= llmc_stack(l, "fcb", "ff.layers.0.bias", L, F, 0);
    bad |= llmc_stack(l, "fcprojw", "ff.layers.2.weight", L, C, F);
    bad |= llmc_stack(l, "fcprojb", "ff.layers.2.bias", L, C, 0);
    bad |= cp(l, wf_add_tensor(l, "lnfw", 1, C, 0, 0), -1, "final_norm.scale", 0, 0, C, 1);
    bad |= cp(l, wf_add_tensor(l, "lnfb", 1, C, 0, 0), -1, "final_norm.shift", 0, 0, C, 1);
    return bad ? attn_fail(err, ATTN_ERR_NOMEM, "out of memory for llm.c's layout") : ATTN_OK;
}
