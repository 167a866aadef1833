/* One handle over every chapter-3 module (see attn/module.h). */
#include "attn/module.h"

#include <stdlib.h>
#include <string.h>

#include "attention_core.h"
#include "attn/causal_attention.h"
#include "attn/multi_head_attention.h"
#include "attn/seed004_attention.h"
#include "attn/self_attention.h"
#include "mha_fused.h"

struct attn_module {
    attn_module_config cfg;
    union {
        attn_sa_v1 v1;
        attn_sa_v2 v2;
        attn_causal_attention ca;
        attn_mha_wrapper wrap;
        attn_mha mha;
        attn_seed004_head head;
        attn_seed004_mha s4;
    } u;
    attn_param_list params;
    /* Caches for the shape of the last forward; reallocated when it changes. */
    int B, T;
    int have_cache, have_forward;
    attn_sa_cache sa;
    attn_attention_cache ac;
    attn_mha_wrapper_cache wc;
    attn_seed004_head_cache hc;
    attn_seed004_mha_cache s4c;
};

static const char *const kind_names[] = {[ATTN_MODULE_SELF_ATTENTION_V1] = "self-attention-v1",
                                         [ATTN_MODULE_SELF_ATTENTION_V2] = "self-attention-v2",
                                         [ATTN_MODULE_CAUSAL_ATTENTION] = "causal-attention",
                                         [ATTN_MODULE_MHA_WRAPPER] = "mha-wrapper",
                                         [ATTN_MODULE_MHA] = "mha",
                                         [ATTN_MODULE_ATTENTION_HEAD] = "attention-head",
                                         [ATTN_MODULE_SEED004_MHA] = "seed004-mha"};
#define N_KINDS ((int)(sizeof kind_names / sizeof kind_names[0]))
/* A new kind needs its name here (and a case in each switch: -Wswitch). */
_Static_assert(N_KINDS == ATTN_MODULE_KIND_COUNT, "kind_names has a name for every module kind");

int attn_module_kind_parse(const char *name, attn_module_kind *out) {
    if (!name) return -1;
    for (int i = 0; i < N_KINDS; i++)
        if (strcmp(name, kind_names[i]) == 0) {
            *out = (attn_module_kind)i;
            return 0;
        }
    return -1;
}

const char *attn_module_kind_name(attn_module_kind kind) {
    return (int)kind >= 0 && (int)kind < N_KINDS ? kind_names[kind] : "unknown";
}

attn_status attn_module_config_validate(const attn_module_config *cfg, attn_error *err) {
    if ((int)cfg->kind < 0 || (int)cfg->kind >= N_KINDS)
        return attn_fail(err, ATTN_ERR_INVALID_ARG, "unknown module kind %d", (int)cfg->kind);
    const char *k = kind_names[cfg->kind];
    if (cfg->d_in <= 0)
        return attn_fail(err, ATTN_ERR_INVALID_ARG, "%s: d_in must be > 0, got %d", k, cfg->d_in);
    if (cfg->d_out <= 0)
        return attn_fail(err, ATTN_ERR_INVALID_ARG, "%s: d_out must be > 0, got %d", k, cfg->d_out);
    const int causal = cfg->kind == ATTN_MODULE_CAUSAL_ATTENTION ||
                       cfg->kind == ATTN_MODULE_MHA_WRAPPER || cfg->kind == ATTN_MODULE_MHA ||
                       cfg->kind == ATTN_MODULE_ATTENTION_HEAD ||
                       cfg->kind == ATTN_MODULE_SEED004_MHA;
    const int multi = cfg->kind == ATTN_MODULE_MHA_WRAPPER || cfg->kind == ATTN_MODULE_MHA ||
                      cfg->kind == ATTN_MODULE_SEED004_MHA;
    if (multi && cfg->num_heads <= 0)
        return attn_fail(err, ATTN_ERR_INVALID_ARG, "%s: num_heads must be > 0, got %d", k,
                         cfg->num_heads);
    if (cfg->kind == ATTN_MODULE_MHA && cfg->d_out % cfg->num_heads != 0)
        return attn_fail(err, ATTN_ERR_INVALID_ARG,
                         "%s: d_out (%d) must be divisible by num_heads (%d)", k, cfg->d_out,
                         cfg->num_heads);
    if (cfg->kind == ATTN_MODULE_SEED004_MHA && cfg->d_out != cfg->d_in)
        return attn_fail(err, ATTN_ERR_INVALID_ARG,
                         "%s: d_out (%d) must equal d_in = embedding_dim (%d)", k, cfg->d_out,
                         cfg->d_in);
    if (cfg->kind == ATTN_MODULE_SEED004_MHA && cfg->d_in % cfg->num_heads != 0)
        return attn_fail(err, ATTN_ERR_INVALID_ARG,
                         "%s: embedding_dim (%d) must be divisible by heads_num (%d)", k, cfg->d_in,
                         cfg->num_heads);
    if (causal && cfg->context_length <= 0)
        return attn_fail(err, ATTN_ERR_INVALID_ARG, "%s: context_length must be > 0, got %d", k,
                         cfg->context_length);
    if (causal) return attn_check_dropout(cfg->dropout, k, err);
    if (cfg->dropout != 0.0)
        return attn_fail(err, ATTN_ERR_INVALID_ARG, "%s has no dropout (got dropout %g)", k,
                         cfg->dropout);
    if (cfg->kind == ATTN_MODULE_SELF_ATTENTION_V1 && cfg->qkv_bias)
        return attn_fail(err, ATTN_ERR_INVALID_ARG,
                         "%s has raw weight matrices and no bias (qkv_bias must be off)", k);
    return ATTN_OK;
}

attn_status attn_module_create(const attn_module_config *cfg, attn_rng *rng, attn_module **out,
                               attn_error *err) {
    *out = NULL;
    attn_status st = attn_module_config_validate(cfg, err);
    if (st != ATTN_OK) return st;
    attn_module *m = calloc(1, sizeof *m);
    if (!m) return attn_fail(err, ATTN_ERR_NOMEM, "out of memory creating a module");
    m->cfg = *cfg;
    attn_param_list_init(&m->params);
    switch (cfg->kind) {
    case ATTN_MODULE_SELF_ATTENTION_V1:
        st = attn_sa_v1_init(&m->u.v1, cfg->d_in, cfg->d_out, rng, err);
        if (st == ATTN_OK) st = attn_sa_v1_params(&m->u.v1, "", &m->params, err);
        break;
    case ATTN_MODULE_SELF_ATTENTION_V2:
        st = attn_sa_v2_init(&m->u.v2, cfg->d_in, cfg->d_out, cfg->qkv_bias, rng, err);
        if (st == ATTN_OK) st = attn_sa_v2_params(&m->u.v2, "", &m->params, err);
        break;
    case ATTN_MODULE_CAUSAL_ATTENTION:
        st = attn_causal_attention_init(&m->u.ca, cfg->d_in, cfg->d_out, cfg->context_length,
                                        cfg->dropout, cfg->qkv_bias, rng, err);
        if (st == ATTN_OK) st = attn_causal_attention_params(&m->u.ca, "", &m->params, err);
        break;
    case ATTN_MODULE_MHA_WRAPPER:
        st = attn_mha_wrapper_init(&m->u.wrap, cfg->d_in, cfg->d_out, cfg->context_length,
                                   cfg->dropout, cfg->num_heads, cfg->qkv_bias, rng, err);
        if (st == ATTN_OK) st = attn_mha_wrapper_params(&m->u.wrap, "", &m->params, err);
        break;
    case ATTN_MODULE_MHA:
        st = attn_mha_init(&m->u.mha, cfg->d_in, cfg->d_out, cfg->context_length, cfg->dropout,
                           cfg->num_heads, cfg->qkv_bias, rng, err);
        if (st == ATTN_OK) st = attn_mha_params(&m->u.mha, "", &m->params, err);
        break;
    case ATTN_MODULE_ATTENTION_HEAD:
        st = attn_seed004_head_init(&m->u.head, cfg->d_in, cfg->d_out, cfg->context_length,
                                    cfg->dropout, cfg->qkv_bias, rng, err);
        if (st == ATTN_OK) st = attn_seed004_head_params(&m->u.head, "", &m->params, err);
        break;
    case ATTN_MODULE_SEED004_MHA:
        st = attn_seed004_mha_init(&m->u.s4, cfg->d_in, cfg->num_heads, cfg->context_length,
                                   cfg->dropout, cfg->qkv_bias, rng, err);
        if (st == ATTN_OK) st = attn_seed004_mha_params(&m->u.s4, "", &m->params, err);
        break;
    }
    if (st != ATTN_OK) {
        attn_module_destroy(m);
        return st;
    }
    *out = m;
    return ATTN_OK;
}

static void free_caches(attn_module *m) {
    if (!m->have_cache) return;
    switch (m->cfg.kind) {
    case ATTN_MODULE_SELF_ATTENTION_V1:
    case ATTN_MODULE_SELF_ATTENTION_V2: attn_sa_cache_free(&m->sa); break;
    case ATTN_MODULE_CAUSAL_ATTENTION:
    case ATTN_MODULE_MHA: attn_attention_cache_free(&m->ac); break;
    case ATTN_MODULE_MHA_WRAPPER: attn_mha_wrapper_cache_free(&m->wc); break;
    case ATTN_MODULE_ATTENTION_HEAD: attn_seed004_head_cache_free(&m->hc); break;
    case ATTN_MODULE_SEED004_MHA: attn_seed004_mha_cache_free(&m->s4c); break;
    }
    m->have_cache = 0;
    m->have_forward = 0;
}

void attn_module_destroy(attn_module *m) {
    if (!m) return;
    free_caches(m);
    switch (m->cfg.kind) {
    case ATTN_MODULE_SELF_ATTENTION_V1: attn_sa_v1_free(&m->u.v1); break;
    case ATTN_MODULE_SELF_ATTENTION_V2: attn_sa_v2_free(&m->u.v2); break;
    case ATTN_MODULE_CAUSAL_ATTENTION: attn_causal_attention_free(&m->u.ca); break;
    case ATTN_MODULE_MHA_WRAPPER: attn_mha_wrapper_free(&m->u.wrap); break;
    case ATTN_MODULE_MHA: attn_mha_free(&m->u.mha); break;
    case ATTN_MODULE_ATTENTION_HEAD: attn_seed004_head_free(&m->u.head); break;
    case ATTN_MODULE_SEED004_MHA: attn_seed004_mha_free(&m->u.s4); break;
    }
    attn_param_list_free(&m->params);
    free(m);
}

const attn_module_config *attn_module_get_config(const attn_module *m) {
    return &m->cfg;
}

int attn_module_out_dim(const attn_module *m) {
    return m->cfg.kind == ATTN_MODULE_MHA_WRAPPER ? m->cfg.num_heads * m->cfg.d_out : m->cfg.d_out;
}

const attn_param_list *attn_module_params(const attn_module *m) {
    return &m->params;
}

static attn_status ensure_cache(attn_module *m, int B, int T, attn_error *err) {
    if (m->have_cache && m->B == B && m->T == T) return ATTN_OK;
    free_caches(m);
    attn_status st = ATTN_OK;
    switch (m->cfg.kind) {
    case ATTN_MODULE_SELF_ATTENTION_V1:
    case ATTN_MODULE_SELF_ATTENTION_V2:
        st = attn_sa_cache_init(&m->sa, T, m->cfg.d_out, err);
        break;
    case ATTN_MODULE_CAUSAL_ATTENTION:
        st = attn_attention_cache_init(&m->ac, B, T, 1, m->cfg.d_out, err);
        break;
    case ATTN_MODULE_MHA:
        st = attn_attention_cache_init(&m->ac, B, T, m->cfg.num_heads, m->cfg.d_out, err);
        break;
    case ATTN_MODULE_MHA_WRAPPER:
        st = attn_mha_wrapper_cache_init(&m->wc, &m->u.wrap, B, T, err);
        break;
    case ATTN_MODULE_ATTENTION_HEAD:
        st = attn_seed004_head_cache_init(&m->hc, &m->u.head, B, T, err);
        break;
    case ATTN_MODULE_SEED004_MHA:
        st = attn_seed004_mha_cache_init(&m->s4c, &m->u.s4, B, T, err);
        break;
    }
    if (st != ATTN_OK) return st;
    m->have_cache = 1;
    m->B = B;
    m->T = T;
    return ATTN_OK;
}

attn_status attn_module_forward(attn_module *m, const float *x, int B, int T, float *y,
                                const attn_forward_mode *mode, attn_error *err) {
    const char *k = kind_names[m->cfg.kind];
    if (B <= 0 || T <= 0)
        return attn_fail(err, ATTN_ERR_SHAPE, "%s: B and T must be > 0 (got B = %d, T = %d)", k, B,
                         T);
    const int sa = m->cfg.kind == ATTN_MODULE_SELF_ATTENTION_V1 ||
                   m->cfg.kind == ATTN_MODULE_SELF_ATTENTION_V2;
    if (sa && B != 1)
        return attn_fail(err, ATTN_ERR_SHAPE,
                         "%s takes a single (T, d_in) sequence (B = 1), got B = %d", k, B);
    if (!sa && T > m->cfg.context_length)
        return attn_fail(err, ATTN_ERR_SHAPE,
                         "%s: sequence length T = %d exceeds "
                         "context_length = %d",
                         k, T, m->cfg.context_length);
    attn_status st = ensure_cache(m, B, T, err);
    if (st != ATTN_OK) return st;
    m->have_forward = 0;
    switch (m->cfg.kind) {
    case ATTN_MODULE_SELF_ATTENTION_V1:
        st = attn_sa_v1_forward(&m->u.v1, x, T, y, &m->sa, err);
        break;
    case ATTN_MODULE_SELF_ATTENTION_V2:
        st = attn_sa_v2_forward(&m->u.v2, x, T, y, &m->sa, err);
        break;
    case ATTN_MODULE_CAUSAL_ATTENTION:
        st = attn_causal_attention_forward(&m->u.ca, x, B, T, y, mode, &m->ac, err);
        break;
    case ATTN_MODULE_MHA_WRAPPER:
        st = attn_mha_wrapper_forward(&m->u.wrap, x, B, T, y, mode, &m->wc, err);
        break;
    case ATTN_MODULE_MHA: st = attn_mha_forward(&m->u.mha, x, B, T, y, mode, &m->ac, err); break;
    case ATTN_MODULE_ATTENTION_HEAD:
        st = attn_seed004_head_forward(&m->u.head, x, B, T, y, mode, &m->hc, err);
        break;
    case ATTN_MODULE_SEED004_MHA:
        st = attn_seed004_mha_forward(&m->u.s4, x, B, T, y, mode, &m->s4c, err);
        break;
    }
    if (st == ATTN_OK) m->have_forward = 1;
    return st;
}

attn_status attn_module_backward(attn_module *m, const float *x, const float *dy, float *dx,
                                 attn_error *err) {
    if (!m->have_forward)
        return attn_fail(err, ATTN_ERR_STATE, "%s: backward called before a successful forward",
                         kind_names[m->cfg.kind]);
    const int B = m->B, T = m->T;
    if (dx) memset(dx, 0, (size_t)B * (size_t)T * (size_t)m->cfg.d_in * sizeof(float));
    switch (m->cfg.kind) {
    case ATTN_MODULE_SELF_ATTENTION_V1:
        return attn_sa_v1_backward(&m->u.v1, x, T, dy, dx, &m->sa, err);
    case ATTN_MODULE_SELF_ATTENTION_V2:
        return attn_sa_v2_backward(&m->u.v2, x, T, dy, dx, &m->sa, err);
    case ATTN_MODULE_CAUSAL_ATTENTION:
        return attn_causal_attention_backward(&m->u.ca, x, B, T, dy, dx, &m->ac, err);
    case ATTN_MODULE_MHA_WRAPPER:
        return attn_mha_wrapper_backward(&m->u.wrap, x, B, T, dy, dx, &m->wc, err);
    case ATTN_MODULE_MHA: return attn_mha_backward(&m->u.mha, x, B, T, dy, dx, &m->ac, err);
    case ATTN_MODULE_ATTENTION_HEAD:
        return attn_seed004_head_backward(&m->u.head, x, B, T, dy, dx, &m->hc, err);
    case ATTN_MODULE_SEED004_MHA:
        return attn_seed004_mha_backward(&m->u.s4, x, B, T, dy, dx, &m->s4c, err);
    }
    return attn_fail(err, ATTN_ERR_INVALID_ARG, "unknown module kind");
}

const struct attn_attention_cache *attn_module_attention_cache(const attn_module *m, int index) {
    if (!m->have_forward || index < 0) return NULL;
    switch (m->cfg.kind) {
    case ATTN_MODULE_CAUSAL_ATTENTION:
    case ATTN_MODULE_MHA:
        /* The fused path keeps its mask compact; spell it out for inspection. */
        if (index == 0 && m->u.mha.path == ATTN_MHA_FUSED && m->ac.fused && m->ac.dropout_applied &&
            m->ac.keep)
            attn_flash_dropout_expand(&m->ac.fused->drop, m->ac.keep);
        return index == 0 ? &m->ac : NULL;
    case ATTN_MODULE_MHA_WRAPPER: return index < m->cfg.num_heads ? &m->wc.heads[index] : NULL;
    default: return NULL;
    }
}
