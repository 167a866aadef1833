/* A weights format as a layout: the tensors a file of it holds for a config
 * (names, shapes, in the file's order) and, per model parameter, where its
 * values lie in one of them. Reading binds the layout to a file's tensors
 * (every name, shape and dtype checked, nothing extra) and gathers; writing
 * scatters the parameters into fresh buffers of the layout's tensors. One
 * description per format serves both ways (weights_gpt2.c, weights_llmc.c). */
#ifndef ATTN_SRC_WEIGHTS_PLAN_H
#define ATTN_SRC_WEIGHTS_PLAN_H

#include <stddef.h>
#include <stdint.h>

#include "attn/gpt.h"
#include "attn/param.h"
#include "attn/safetensors.h"
#include "attn/status.h"
#include "attn/weights_format.h"

typedef enum wf_dtype { WF_F32, WF_F16, WF_BF16 } wf_dtype;

typedef struct wf_tensor {
    char name[ATTN_PARAM_NAME_MAX];
    int ndim;
    int64_t shape[3];
    size_t numel;
    const void *src; /* reading: the file's bytes (any alignment) */
    wf_dtype dtype;
    float *buf; /* writing: the values, owned (wf_layout_free) */
} wf_tensor;

/* Parameter `param` is (rows, cols) of tensor `tensor`: element (r, c) is
 * the tensor's element off + r * cols + c, or with stride > 0 (a weight
 * stored [in, out]) off + c * stride + r. */
typedef struct wf_copy {
    char param[ATTN_PARAM_NAME_MAX];
    int tensor;
    size_t off, stride;
    int64_t rows, cols;
} wf_copy;

typedef struct wf_layout {
    wf_tensor *t;
    int nt, cap_t;
    wf_copy *c;
    int nc, cap_c;
} wf_layout;

void wf_layout_init(wf_layout *l);
void wf_layout_free(wf_layout *l);

/* Append a tensor (shape of ndim <= 3); its index, or -1 out of memory. */
int wf_add_tensor(wf_layout *l, const char *name, int ndim, int64_t d0, int64_t d1, int64_t d2);
/* Append a copy; 0, or -1 out of memory. */
int wf_add_copy(wf_layout *l, int tensor, const char *param, size_t off, size_t stride,
                int64_t rows, int64_t cols);

/* The layouts of a model: hf and book walk its table with their name
 * rule. hf: prefix "transformer." or "" (lm_head.weight, outside it, for
 * an untied model); a tensor HF's GPT-2 has no name for is INVALID_ARG.
 * book: the table 1:1, and with out_head a tied model's head too (for the
 * book's code). llmc: of a (validated) config, llm.c's fixed sequence of
 * per-layer stacked tensors (its header's order, not a walk of the table),
 * padded vocabulary Vp. NOMEM on failure. */
attn_status wf_layout_hf(wf_layout *l, const attn_gpt *m, const char *prefix, attn_error *err);
attn_status wf_layout_book(wf_layout *l, const attn_gpt *m, int out_head, attn_error *err);
attn_status wf_layout_llmc(wf_layout *l, const attn_gpt_config *cfg, int64_t Vp, attn_error *err);

/* Names a reader skips (buffers, a tied head already checked). */
typedef int (*wf_ignore_fn)(const char *name, const void *ctx);

/* Bind l's tensors to st's: each present (NOT_FOUND), its shape (SHAPE,
 * showing both) and a dtype F32/F16/BF16 (FORMAT); every tensor of st is
 * l's or ignored (FORMAT naming it). file names the file in messages. */
attn_status wf_bind(wf_layout *l, const attn_safetensors *st, wf_ignore_fn ignore, const void *ctx,
                    const char *file, attn_error *err);

/* Copy every bound tensor's values into m's parameters (all of them,
 * exactly once), then check they are finite. */
attn_status wf_gather(const wf_layout *l, attn_gpt *m, const char *file, attn_error *err);

/* Allocate l's tensors' buffers (zeroed) and fill them from m. */
attn_status wf_scatter(wf_layout *l, const attn_gpt *m, attn_error *err);

/* Element i of a tensor's bytes as float. */
float wf_load(const void *src, wf_dtype dtype, size_t i);

/* --------------------------------------------------- reading a config */

/* 2-D tensor name's shape into rows, cols; NOT_FOUND / SHAPE otherwise. */
attn_status wf_dims2(const attn_safetensors *st, const char *name, const char *file, int64_t *rows,
                     int64_t *cols, attn_error *err);

/* Blocks named prefix "<i>." + ...: *n = highest i + 1 (0 when none). A
 * block index over 4096 is FORMAT. */
attn_status wf_count_blocks(const attn_safetensors *st, const char *prefix, const char *file,
                            int *n, attn_error *err);

/* 1 when two tensors have the same shape, dtype and bytes. */
int wf_same_tensor(const attn_st_tensor *a, const attn_st_tensor *b);

/* cfg->n_heads: from_file (> 0: the file says, `source` names where), else
 * hint, else GPT-2's by emb_dim; a hint that disagrees with the file, or
 * nothing known, is INVALID_ARG. */
attn_status wf_set_heads(attn_gpt_config *cfg, int from_file, const char *source,
                         const attn_gpt_config *hint, const char *file, attn_error *err);

/* Validate cfg (messages name the file) and check the model plus `held`
 * bytes (the file image) against budget, before allocating. */
attn_status wf_check_config(const attn_gpt_config *cfg, double held, double budget,
                            const char *file, attn_error *err);

/* Build m from cfg and l (bound): init, gather; m freed on failure. */
attn_status wf_build(attn_gpt *m, const attn_gpt_config *cfg, const wf_layout *l, const char *file,
                     attn_error *err);

/* --------------------------------------------------- the formats */

/* hf or book from a set of named tensors (a safetensors file, later a .pth):
 * infer the config, bind, build m. dir_config: the HF config.json beside
 * the file ("" or NULL: none). */
attn_status wf_import_hf(const attn_safetensors *st, const char *file, const char *config_json,
                         const attn_gpt_config *hint, double budget, attn_gpt *m, attn_error *err);
attn_status wf_import_book(const attn_safetensors *st, const char *file,
                           const attn_gpt_config *hint, double budget, attn_gpt *m,
                           attn_error *err);

/* The tensors of m in format fmt (hf or book) as safetensors entries, with
 * buffers owned by l: *entries (malloc'd) of *count. */
attn_status wf_entries(const attn_gpt *m, attn_weights_format fmt, wf_layout *l,
                       attn_st_entry **entries, int *count, attn_error *err);

attn_status wf_import_llmc(const char *path, const attn_gpt_config *hint, double budget,
                           attn_gpt *m, attn_error *err);
attn_status wf_export_llmc(const attn_gpt *m, const char *path, attn_error *err);

#endif
