/* attn/module.h — one handle for every chapter-3 attention module.
 *
 * For tools and tests that treat modules alike (attn forward, gradient
 * checks, PyTorch parity): create by kind and config, run forward/backward on
 * (B, T, d_in) input, list parameters with their state_dict names. The typed
 * APIs (self_attention.h, causal_attention.h, multi_head_attention.h) stay the
 * primary interface; this one only dispatches to them. */
#ifndef ATTN_MODULE_H
#define ATTN_MODULE_H

#include "attn/attention.h"
#include "attn/dropout.h"
#include "attn/param.h"
#include "attn/rng.h"
#include "attn/status.h"
#include "attn/version.h" /* ATTN_DEPRECATED */

#ifdef __cplusplus
extern "C" {
#endif

typedef enum attn_module_kind {
    ATTN_MODULE_SELF_ATTENTION_V1,
    ATTN_MODULE_SELF_ATTENTION_V2,
    ATTN_MODULE_CAUSAL_ATTENTION,
    ATTN_MODULE_MHA_WRAPPER,
    ATTN_MODULE_MHA,
    /* Seed 004's own modules (attn/seed004_attention.h): */
    ATTN_MODULE_ATTENTION_HEAD, /* AttentionHead: d_in = embedding_dim, d_out = head_size */
    ATTN_MODULE_SEED004_MHA     /* MultiHeadAttention: d_in = d_out = embedding_dim,
                                   num_heads = heads_num, qkv_bias = use_bias */
} attn_module_kind;
/* The number of kinds (the last one + 1): the library's kind table (one row
 * per kind, src/attention/module.c) is checked against it at compile time. */
#define ATTN_MODULE_KIND_COUNT ((int)ATTN_MODULE_SEED004_MHA + 1)

/* What a kind reads from attn_module_config beyond d_in and d_out. */
enum {
    ATTN_MODULE_USES_HEADS = 1u << 0,    /* num_heads */
    ATTN_MODULE_USES_CONTEXT = 1u << 1,  /* context_length (the causal mask size) */
    ATTN_MODULE_USES_DROPOUT = 1u << 2,  /* dropout on the attention weights */
    ATTN_MODULE_USES_QKV_BIAS = 1u << 3, /* qkv_bias */
    ATTN_MODULE_USES_VARIANTS = 1u << 4, /* variants: the attention core's (mha) */
};

/* One kind as tools list and check it (attn forward's modules and flags). */
typedef struct attn_module_kind_info {
    attn_module_kind kind;
    const char *name;    /* "mha": what attn_module_kind_parse takes */
    const char *summary; /* "MultiHeadAttention (weight splits + out_proj)" */
    int input_rank;      /* 2: x is one (T, d_in) sequence (B = 1); 3: (B, T, d_in) */
    unsigned uses;       /* ATTN_MODULE_USES_* */
    int out_per_head;    /* the output's last dim is num_heads * d_out (the wrapper) */
} attn_module_kind_info;

/* The row of kind; NULL for a value outside the enum. */
const attn_module_kind_info *attn_module_kind_get(attn_module_kind kind);

typedef struct attn_module_config {
    attn_module_kind kind;
    int d_in, d_out;
    int num_heads;      /* wrapper and MHA */
    int context_length; /* causal, wrapper, MHA */
    double dropout;     /* causal, wrapper, MHA */
    int qkv_bias;       /* all but v1 */
} attn_module_config;

typedef struct attn_module attn_module;

/* "self-attention-v1", "self-attention-v2", "causal-attention",
 * "mha-wrapper", "mha", "attention-head", "seed004-mha". Returns 0 on
 * success, -1 for an unknown name. */
int attn_module_kind_parse(const char *name, attn_module_kind *out);
const char *attn_module_kind_name(attn_module_kind kind);

/* Checks a config without creating anything: every dim > 0 (context_length
 * and num_heads where the kind uses them), d_out % num_heads == 0 for MHA,
 * dropout in [0, 1) for the kinds with dropout; v1/v2 have no dropout, so
 * dropout != 0 is rejected for them, and v1 has no bias, so qkv_bias is
 * rejected for it. Fields a kind does not use (num_heads, context_length for
 * v1/v2/causal as applicable) are ignored. The message names the field. */
attn_status attn_module_config_validate(const attn_module_config *cfg, attn_error *err);

/* Bytes a module of cfg needs, from the config alone (nothing allocated):
 * its fp32 weights and their gradients, the causal masks, and for a batch
 * of B sequences of T tokens (0, 0: none) the forward's and backward's
 * buffers (q, k, v, the attention weights, the output). An estimate to
 * compare with a budget (attn/membudget.h) before attn_module_create. */
double attn_module_memory(const attn_module_config *cfg, int B, int T);

/* Validates the config (clear message on bad dims/rates) and creates the
 * module; rng != NULL draws the weights as torch.manual_seed + the book's
 * constructor would. */
attn_status attn_module_create(const attn_module_config *cfg, attn_rng *rng, attn_module **out,
                               attn_error *err);
/* The same with the attention variants of *variants (attn/attention.h:
 * kv_heads, window, positions, rope_theta, rope_fraction, qk_norm,
 * softcap; heads, head_dim, causal and dropout come from cfg). Only mha
 * (ATTN_MODULE_USES_VARIANTS) takes any; NULL or zeros: the book's. */
attn_status attn_module_create_variant(const attn_module_config *cfg,
                                       const attn_attention_spec *variants, attn_rng *rng,
                                       attn_module **out, attn_error *err);
/* attn_module_config_validate, then the variants: a kind without
 * ATTN_MODULE_USES_VARIANTS refuses any; mha checks them
 * (attn_attention_check: "n_kv_heads 3 must divide n_heads 4"). */
attn_status attn_module_variant_validate(const attn_module_config *cfg,
                                         const attn_attention_spec *variants, attn_error *err);
/* Frees m and everything it owns; NULL is a no-op. */
void attn_module_free(attn_module *m);
/* deprecated: use attn_module_free; removed after 0.2 */
ATTN_DEPRECATED("use attn_module_free")
static inline void attn_module_destroy(attn_module *m) {
    attn_module_free(m);
}

const attn_module_config *attn_module_get_config(const attn_module *m);
/* Output last-dim size (d_out, or num_heads * d_out for the wrapper). */
int attn_module_out_dim(const attn_module *m);
/* The parameters, named as in PyTorch's state_dict, in registration order. */
const attn_param_list *attn_module_params(const attn_module *m);

/* Point the module's n parameters (attn_module_params' order) at the
 * caller's arrays: data[i] (its values) and grad[i] (where backward adds its
 * gradient), each of the table's shape; NULL data or grad: the module's own
 * again. No copy: attn.torch's modules run on the torch tensors' storage.
 * The arrays must stay valid while a forward or backward runs on them, and a
 * backward must see the arrays its forward saw; attn_module_free restores
 * the module's own first. ATTN_ERR_SHAPE when n is not the table's count. */
attn_status attn_module_bind(attn_module *m, float *const *data, float *const *grad, int n,
                             attn_error *err);

/* x (B, T, d_in) -> y (B, T, out_dim). v1/v2 take B = 1 (a single (T, d_in)
 * sequence, as the book's classes do; B != 1 fails with ATTN_ERR_SHAPE).
 * T > context_length fails for the causal kinds. Saves what backward needs
 * inside the module (caches are reallocated only when B or T change). mode
 * NULL = eval (no dropout). */
attn_status attn_module_forward(attn_module *m, const float *x, int B, int T, float *y,
                                const attn_forward_mode *mode, attn_error *err);
/* The backward rule (every attn backward; docs/library.md#conventions):
 * it adds (+=) into dx and into the parameter gradients, never overwrites;
 * the caller zeroes them first. */

/* After forward on the same x: accumulates (+=) the parameter grads and, when
 * dx != NULL, dx (B, T, d_in), as every backward does (docs/library.md);
 * zero them first (attn_param_list_zero_grad) for this call's alone. */
attn_status attn_module_backward(attn_module *m, const float *x, const float *dy, float *dx,
                                 attn_error *err);

/* What the last forward saved, for printing and tests: causal-attention and
 * mha have one cache (index 0), mha-wrapper one per head (index = head);
 * NULL for v1/v2, before the first forward, or for an index out of range.
 * keep/dropout_applied there give the dropout mask that forward used. */
const struct attn_attention_cache *attn_module_attention_cache(const attn_module *m, int index);

#ifdef __cplusplus
}
#endif
#endif
