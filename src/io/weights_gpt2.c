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

/* A tensor named prefix + "h.<b>." + name (b < 0: prefix + name). */
static int hf_tensor(wf_layout *l, const char *prefix, int b, const char *name, int ndim,
                     int64_t d0, int64_t d1) {
    char n[ATTN_PARAM_NAME_MAX];
    if (b < 0)
        snprintf(n, sizeof n, "%s%s", prefix, name);
    else
        snprintf(n, sizeof n, "%sh.%d.%s", prefix, b, name);
    return wf_add_tensor(l, n, ndim, d0, d1, 0);
}

/* A LayerNorm's weight and bias as (C) tensors. */
static int hf_norm(wf_layout *l, const char *prefix, int b, const char *hf, const char *book,
                   int64_t C) {
    char n[64], p[64];
    snprintf(n, sizeof n, "%s.weight", hf);
    snprintf(p, sizeof p, "%s.scale", book);
    int bad = cp(l, hf_tensor(l, prefix, b, n, 1, C, 0), b, p, 0, 0, C, 1);
    snprintf(n, sizeof n, "%s.bias", hf);
    snprintf(p, sizeof p, "%s.shift", book);
    return bad | cp(l, hf_tensor(l, prefix, b, n, 1, C, 0), b, p, 0, 0, C, 1);
}

/* One HF block: Conv1D weights [in, out], read transposed. */
static int hf_block(wf_layout *l, const attn_gpt_config *cfg, const char *prefix, int b) {
    const int64_t C = cfg->emb_dim, C3 = 3 * C, F = 4 * C;
    static const char *const qkv[3] = {"att.W_query", "att.W_key", "att.W_value"};
    char p[64];
    int bad = hf_norm(l, prefix, b, "ln_1", "norm1", C);
    int t = hf_tensor(l, prefix, b, "attn.c_attn.weight", 2, C, C3);
    for (int i = 0; i < 3; i++) {
        snprintf(p, sizeof p, "%s.weight", qkv[i]);
        bad |= cp(l, t, b, p, (size_t)(i * C), (size_t)C3, C, C);
    }
    if (cfg->qkv_bias) {
        t = hf_tensor(l, prefix, b, "attn.c_attn.bias", 1, C3, 0);
        for (int i = 0; i < 3; i++) {
            snprintf(p, sizeof p, "%s.bias", qkv[i]);
            bad |= cp(l, t, b, p, (size_t)(i * C), 0, C, 1);
        }
    }
    bad |= cp(l, hf_tensor(l, prefix, b, "attn.c_proj.weight", 2, C, C), b, "att.out_proj.weight",
              0, (size_t)C, C, C);
    bad |= cp(l, hf_tensor(l, prefix, b, "attn.c_proj.bias", 1, C, 0), b, "att.out_proj.bias", 0, 0,
              C, 1);
    bad |= hf_norm(l, prefix, b, "ln_2", "norm2", C);
    bad |= cp(l, hf_tensor(l, prefix, b, "mlp.c_fc.weight", 2, C, F), b, "ff.layers.0.weight", 0,
              (size_t)F, F, C);
    bad |=
        cp(l, hf_tensor(l, prefix, b, "mlp.c_fc.bias", 1, F, 0), b, "ff.layers.0.bias", 0, 0, F, 1);
    bad |= cp(l, hf_tensor(l, prefix, b, "mlp.c_proj.weight", 2, F, C), b, "ff.layers.2.weight", 0,
              (size_t)C, C, F);
    bad |= cp(l, hf_tensor(l, prefix, b, "mlp.c_proj.bias", 1, C, 0), b, "ff.layers.2.bias", 0, 0,
              C, 1);
    return bad;
}

attn_status wf_layout_hf(wf_layout *l, const attn_gpt_config *cfg, const char *prefix, int lm_head,
                         attn_error *err) {
    const int64_t V = cfg->vocab_size, C = cfg->emb_dim, T = cfg->context_length;
    int bad =
        cp(l, hf_tensor(l, prefix, -1, "wte.weight", 2, V, C), -1, "tok_emb.weight", 0, 0, V, C);
    bad |= cp(l, hf_tensor(l, prefix, -1, "wpe.weight", 2, T, C), -1, "pos_emb.weight", 0, 0, T, C);
    for (int b = 0; b < cfg->n_layers; b++)
        bad |= hf_block(l, cfg, prefix, b);
    bad |= hf_norm(l, prefix, -1, "ln_f", "final_norm", C);
    if (lm_head) /* GPT2LMHeadModel's head is outside "transformer." */
        bad |= cp(l, hf_tensor(l, "", -1, "lm_head.weight", 2, V, C), -1, "out_head.weight", 0, 0,
                  V, C);
    return bad ? attn_fail(err, ATTN_ERR_NOMEM, "out of memory for the HF layout") : ATTN_OK;
}

/* The book's tensor (b, name) of shape (rows[, cols]), read 1:1. */
static int book_one(wf_layout *l, int b, const char *name, int64_t rows, int64_t cols) {
    char p[ATTN_PARAM_NAME_MAX];
    pname(p, sizeof p, b, name);
    return cp(l, wf_add_tensor(l, p, cols ? 2 : 1, rows, cols, 0), b, name, 0, 0, rows,
              cols ? cols : 1);
}

static int book_block(wf_layout *l, const attn_gpt_config *cfg, int b) {
    const int64_t C = cfg->emb_dim, F = 4 * C;
    static const char *const qkv[3] = {"att.W_query", "att.W_key", "att.W_value"};
    char p[64];
    int bad = 0;
    for (int i = 0; i < 3; i++) {
        snprintf(p, sizeof p, "%s.weight", qkv[i]);
        bad |= book_one(l, b, p, C, C);
        snprintf(p, sizeof p, "%s.bias", qkv[i]);
        if (cfg->qkv_bias) bad |= book_one(l, b, p, C, 0);
    }
    bad |= book_one(l, b, "att.out_proj.weight", C, C) | book_one(l, b, "att.out_proj.bias", C, 0);
    bad |= book_one(l, b, "ff.layers.0.weight", F, C) | book_one(l, b, "ff.layers.0.bias", F, 0);
    bad |= book_one(l, b, "ff.layers.2.weight", C, F) | book_one(l, b, "ff.layers.2.bias", C, 0);
    bad |= book_one(l, b, "norm1.scale", C, 0) | book_one(l, b, "norm1.shift", C, 0);
    bad |= book_one(l, b, "norm2.scale", C, 0) | book_one(l, b, "norm2.shift", C, 0);
    return bad;
}

attn_status wf_layout_book(wf_layout *l, const attn_gpt_config *cfg, int out_head,
                           attn_error *err) {
    const int64_t V = cfg->vocab_size, C = cfg->emb_dim, T = cfg->context_length;
    int bad = book_one(l, -1, "tok_emb.weight", V, C) | book_one(l, -1, "pos_emb.weight", T, C);
    for (int b = 0; b < cfg->n_layers; b++)
        bad |= book_block(l, cfg, b);
    bad |= book_one(l, -1, "final_norm.scale", C, 0) | book_one(l, -1, "final_norm.shift", C, 0);
    if (out_head) /* a tied model's head is tok_emb's matrix */
        bad |= cp(l, wf_add_tensor(l, "out_head.weight", 2, V, C, 0), -1,
                  cfg->tie_weights ? "tok_emb.weight" : "out_head.weight", 0, 0, V, C);
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
