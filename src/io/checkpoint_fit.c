/* A checkpoint's tensors against its config, before allocating (see
 * checkpoint_fit.h). */
#include "checkpoint_fit.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* Where a dimension comes from: the config key it is read against. */
typedef enum dim { D_EMB, D_HIDDEN, D_FC1, D_VOCAB, D_CTX, D_KV, D_HEAD } dim;

static const char *const DIM_KEY[] = {"emb_dim",        "emb_dim",    "emb_dim",  "vocab_size",
                                      "context_length", "n_kv_heads", "head_size"};

static int64_t kv_heads(const attn_gpt_config *c) {
    return c->n_kv_heads > 0 ? c->n_kv_heads : c->n_heads;
}

static int64_t dim_value(const attn_gpt_config *c, dim d) {
    const int64_t hidden = attn_feedforward_hidden(c->emb_dim, c->act); /* 4C (swiglu: H) */
    switch (d) {
    case D_EMB: return c->emb_dim;
    case D_HIDDEN: return hidden;
    case D_FC1: return c->act == ATTN_ACT_SWIGLU ? 2 * hidden : hidden; /* [gate | value] */
    case D_VOCAB: return c->vocab_size;
    case D_CTX: return c->context_length;
    case D_KV: return kv_heads(c) * (c->emb_dim / c->n_heads); /* grouped-query K, V */
    case D_HEAD: return c->emb_dim / c->n_heads;
    }
    return -1;
}

/* Tensors only some variants have. */
typedef enum when { ALWAYS, IF_POS_LEARNED, IF_UNTIED, IF_LAYERNORM, IF_QK_NORM } when;

static int present_in(const attn_gpt_config *c, when w) {
    switch (w) {
    case ALWAYS: return 1;
    case IF_POS_LEARNED: return c->pos_emb == ATTN_POS_LEARNED;
    case IF_UNTIED: return !c->tie_weights;
    case IF_LAYERNORM: return c->norm == ATTN_NORM_LAYERNORM;
    case IF_QK_NORM: return c->qk_norm != 0;
    }
    return 1;
}

typedef struct expect {
    const char *name;
    int ndim;
    dim dims[2];
    when when;
} expect;

/* The book's GPTModel (attn_gpt_init builds these, attn/gpt.h), less what a
 * variant drops. */
static const expect TOP[] = {
    {"tok_emb.weight", 2, {D_VOCAB, D_EMB}, ALWAYS},
    {"pos_emb.weight", 2, {D_CTX, D_EMB}, IF_POS_LEARNED},
    {"final_norm.scale", 1, {D_EMB}, ALWAYS},
    {"final_norm.shift", 1, {D_EMB}, IF_LAYERNORM},
    {"out_head.weight", 2, {D_VOCAB, D_EMB}, IF_UNTIED},
};
static const expect BLOCK[] = {
    {"att.W_query.weight", 2, {D_EMB, D_EMB}, ALWAYS},
    {"att.W_key.weight", 2, {D_KV, D_EMB}, ALWAYS},
    {"att.W_value.weight", 2, {D_KV, D_EMB}, ALWAYS},
    {"att.out_proj.weight", 2, {D_EMB, D_EMB}, ALWAYS},
    {"att.out_proj.bias", 1, {D_EMB}, ALWAYS},
    {"att.q_norm.scale", 1, {D_HEAD}, IF_QK_NORM},
    {"att.k_norm.scale", 1, {D_HEAD}, IF_QK_NORM},
    {"ff.layers.0.weight", 2, {D_FC1, D_EMB}, ALWAYS},
    {"ff.layers.0.bias", 1, {D_FC1}, ALWAYS},
    {"ff.layers.2.weight", 2, {D_EMB, D_HIDDEN}, ALWAYS},
    {"ff.layers.2.bias", 1, {D_EMB}, ALWAYS},
    {"norm1.scale", 1, {D_EMB}, ALWAYS},
    {"norm1.shift", 1, {D_EMB}, IF_LAYERNORM},
    {"norm2.scale", 1, {D_EMB}, ALWAYS},
    {"norm2.shift", 1, {D_EMB}, IF_LAYERNORM},
};
static const char *const QKV_BIAS[] = {"att.W_query.bias", "att.W_key.bias", "att.W_value.bias"};

#define NAME_MAX_ ATTN_PARAM_NAME_MAX + 32

static void shape_text(char *buf, size_t cap, int ndim, const int64_t *shape) {
    size_t used = (size_t)snprintf(buf, cap, "(");
    for (int i = 0; i < ndim && used < cap; i++)
        used +=
            (size_t)snprintf(buf + used, cap - used, "%s%lld", i ? ", " : "", (long long)shape[i]);
    if (used < cap) snprintf(buf + used, cap - used, "%s)", ndim == 1 ? "," : "");
}

/* Tensor `name` is there, F32, shaped as e says for cfg. A missing one in a
 * block after the first contradicts n_layers (beyond_first). */
static attn_status check_one(const attn_gpt_config *cfg, const attn_safetensors *st,
                             const char *name, const expect *e, int beyond_first, const char *file,
                             attn_error *err) {
    const attn_st_tensor *t = attn_safetensors_find(st, name);
    if (!t) {
        if (beyond_first)
            return attn_fail(err, ATTN_ERR_NOT_FOUND,
                             "%s: the config says n_layers %d, but tensor '%s' is missing", file,
                             cfg->n_layers, name);
        return attn_fail(err, ATTN_ERR_NOT_FOUND, "%s: tensor '%s' is missing", file, name);
    }
    if (strcmp(t->dtype, "F32") != 0)
        return attn_fail(err, ATTN_ERR_FORMAT, "%s: tensor '%s' is %s, not F32", file, name,
                         t->dtype);
    int64_t want[2];
    for (int i = 0; i < e->ndim; i++)
        want[i] = dim_value(cfg, e->dims[i]);
    for (int i = 0; i < e->ndim || i < t->ndim; i++) {
        if (i < e->ndim && i < t->ndim && t->shape[i] == want[i]) continue;
        char got[96], wanted[96];
        shape_text(got, sizeof got, t->ndim, t->shape);
        shape_text(wanted, sizeof wanted, e->ndim, want);
        /* A tensor with more dimensions than expected: name the first. */
        const int j = i < e->ndim ? i : 0;
        const dim d = e->dims[j];
        return attn_fail(err, ATTN_ERR_SHAPE,
                         "%s: the config says %s %d, but tensor '%s' has shape %s, not %s", file,
                         DIM_KEY[d],
                         (int)(d == D_HIDDEN || d == D_FC1 ? cfg->emb_dim
                               : d == D_KV                 ? kv_heads(cfg)
                                                           : want[j]),
                         name, got, wanted);
    }
    return ATTN_OK;
}

/* check_one for a tensor of the config's variant; one its variant does not
 * have must be absent ("the config says tie_weights true, but tensor
 * 'out_head.weight' is present"). */
static attn_status check_entry(const attn_gpt_config *cfg, const attn_safetensors *st,
                               const char *name, const expect *e, int beyond_first,
                               const char *file, attn_error *err) {
    if (present_in(cfg, e->when)) return check_one(cfg, st, name, e, beyond_first, file, err);
    if (!attn_safetensors_find(st, name)) return ATTN_OK;
    const char *key = e->when == IF_POS_LEARNED ? "pos_emb"
                      : e->when == IF_UNTIED    ? "tie_weights"
                      : e->when == IF_QK_NORM   ? "qk_norm"
                                                : "norm";
    char v[64];
    attn_gpt_key_value(cfg, attn_gpt_key_find(key), v, sizeof v);
    return attn_fail(err, ATTN_ERR_SHAPE, "%s: the config says %s %s, but tensor '%s' is present",
                     file, key, v, name);
}

static int full_name(char *out, size_t cap, const char *prefix, const char *block,
                     const char *name) {
    const int n = snprintf(out, cap, "%s%s%s", prefix, block, name);
    return n < 0 || (size_t)n >= cap;
}

attn_status attn_ckpt_fit_config(const attn_gpt_config *cfg, const attn_safetensors *st,
                                 const char *prefix, const char *file, attn_error *err) {
    char name[NAME_MAX_], block[48];
    attn_status s = ATTN_OK;
    for (size_t i = 0; i < sizeof TOP / sizeof TOP[0] && !s; i++) {
        if (full_name(name, sizeof name, prefix, "", TOP[i].name))
            return attn_fail(err, ATTN_ERR_INVALID_ARG, "tensor prefix '%s' is too long", prefix);
        s = check_entry(cfg, st, name, &TOP[i], 0, file, err);
    }
    /* Block by block, so a config claiming more layers than the file holds
     * stops at the first one that is not there. */
    for (int l = 0; l < cfg->n_layers && !s; l++) {
        snprintf(block, sizeof block, "trf_blocks.%d.", l);
        for (size_t i = 0; i < sizeof BLOCK / sizeof BLOCK[0] && !s; i++) {
            if (full_name(name, sizeof name, prefix, block, BLOCK[i].name))
                return attn_fail(err, ATTN_ERR_INVALID_ARG, "tensor prefix '%s' is too long",
                                 prefix);
            s = check_entry(cfg, st, name, &BLOCK[i], l > 0, file, err);
        }
        for (size_t i = 0; i < sizeof QKV_BIAS / sizeof QKV_BIAS[0] && !s; i++) {
            static const expect bias_q = {NULL, 1, {D_EMB}, ALWAYS};
            static const expect bias_kv = {NULL, 1, {D_KV}, ALWAYS};
            full_name(name, sizeof name, prefix, block, QKV_BIAS[i]);
            const int present = attn_safetensors_find(st, name) != NULL;
            if (present != (cfg->qkv_bias != 0))
                return attn_fail(
                    err, ATTN_ERR_SHAPE, "%s: the config says qkv_bias %s, but tensor '%s' is %s",
                    file, cfg->qkv_bias ? "true" : "false", name, present ? "present" : "missing");
            if (present) s = check_one(cfg, st, name, i ? &bias_kv : &bias_q, 0, file, err);
        }
    }
    return s;
}

attn_status attn_ckpt_check_finite(const attn_safetensors *st, const char *prefix, const char *file,
                                   attn_error *err) {
    const size_t np = strlen(prefix);
    for (int i = 0; i < st->count; i++) {
        const attn_st_tensor *t = &st->tensors[i];
        if (strcmp(t->dtype, "F32") != 0 || strncmp(t->name, prefix, np) != 0) continue;
        const unsigned char *p = t->data;
        for (size_t k = 0; k < t->numel; k++) {
            float x;
            memcpy(&x, p + k * sizeof x, sizeof x); /* files from elsewhere may be unaligned */
            if (!isfinite(x))
                return attn_fail(err, ATTN_ERR_FORMAT,
                                 "checkpoint %s holds non-finite values (tensor %s)", file,
                                 t->name);
        }
    }
    return ATTN_OK;
}

attn_status attn_ckpt_check_finite_params(const attn_param_list *list, const char *file,
                                          attn_error *err) {
    for (int i = 0; i < list->count; i++) {
        const attn_param *p = &list->items[i];
        for (size_t k = 0; k < p->numel; k++)
            if (!isfinite(p->data[k]))
                return attn_fail(err, ATTN_ERR_FORMAT,
                                 "checkpoint %s holds non-finite values (tensor %s)", file,
                                 p->name);
    }
    return ATTN_OK;
}
