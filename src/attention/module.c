/* One handle over every chapter-3 module (see attn/module.h): one row per
 * kind in kinds[] says what the kind is and how it is created, run, cached
 * and freed; the attn_module_* functions only dispatch through it. */
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
    attn_attention_spec variants; /* mha's (attn_module_create_variant); zeros: the book's */
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
    float **own; /* each tensor's own data, then its own grad (attn_module_bind restores them) */
    /* Caches for the shape of the last forward; reallocated when it changes. */
    int B, T;
    int have_cache, have_forward;
    attn_sa_cache sa;
    attn_attention_cache ac;
    attn_mha_wrapper_cache wc;
    attn_seed004_head_cache hc;
    attn_seed004_mha_cache s4c;
};

typedef struct kind_row {
    attn_module_kind_info info;
    /* Checks of this kind's own beyond the shared ones (NULL: none). */
    attn_status (*check)(const attn_module_config *c, const char *k, attn_error *err);
    attn_status (*init)(attn_module *m, attn_rng *rng, attn_error *err); /* weights + params */
    void (*free)(attn_module *m);
    attn_status (*cache_init)(attn_module *m, int B, int T, attn_error *err);
    void (*cache_free)(attn_module *m);
    attn_status (*forward)(attn_module *m, const float *x, int B, int T, float *y,
                           const attn_forward_mode *mode, attn_error *err);
    attn_status (*backward)(attn_module *m, const float *x, int B, int T, const float *dy,
                            float *dx, attn_error *err);
    /* What forward saved (index = head or 0); NULL: the kind keeps none. */
    const attn_attention_cache *(*attention_cache)(const attn_module *m, int index);
} kind_row;

#define MODULE_FORWARD_ARGS                                                                        \
    attn_module *m, const float *x, int B, int T, float *y, const attn_forward_mode *mode,         \
        attn_error *err
#define MODULE_BACKWARD_ARGS                                                                       \
    attn_module *m, const float *x, int B, int T, const float *dy, float *dx, attn_error *err

/* --- SelfAttention_v1 / v2: one (T, d_in) sequence, no mask, no dropout --- */

static attn_status v1_init(attn_module *m, attn_rng *rng, attn_error *err) {
    attn_status s = attn_sa_v1_init(&m->u.v1, m->cfg.d_in, m->cfg.d_out, rng, err);
    return s ? s : attn_sa_v1_params(&m->u.v1, "", &m->params, err);
}
static void v1_free(attn_module *m) {
    attn_sa_v1_free(&m->u.v1);
}
static attn_status v1_forward(MODULE_FORWARD_ARGS) {
    (void)B, (void)mode;
    return attn_sa_v1_forward(&m->u.v1, x, T, y, &m->sa, err);
}
static attn_status v1_backward(MODULE_BACKWARD_ARGS) {
    (void)B;
    return attn_sa_v1_backward(&m->u.v1, x, T, dy, dx, &m->sa, err);
}
static attn_status v2_init(attn_module *m, attn_rng *rng, attn_error *err) {
    const attn_module_config *c = &m->cfg;
    attn_status s = attn_sa_v2_init(&m->u.v2, c->d_in, c->d_out, c->qkv_bias, rng, err);
    return s ? s : attn_sa_v2_params(&m->u.v2, "", &m->params, err);
}
static void v2_free(attn_module *m) {
    attn_sa_v2_free(&m->u.v2);
}
static attn_status v2_forward(MODULE_FORWARD_ARGS) {
    (void)B, (void)mode;
    return attn_sa_v2_forward(&m->u.v2, x, T, y, &m->sa, err);
}
static attn_status v2_backward(MODULE_BACKWARD_ARGS) {
    (void)B;
    return attn_sa_v2_backward(&m->u.v2, x, T, dy, dx, &m->sa, err);
}
static attn_status sa_cache_init(attn_module *m, int B, int T, attn_error *err) {
    (void)B;
    return attn_sa_cache_init(&m->sa, T, m->cfg.d_out, err);
}
static void sa_cache_free(attn_module *m) {
    attn_sa_cache_free(&m->sa);
}

/* --- CausalAttention and MultiHeadAttention: one attention cache --------- */

static attn_status causal_init(attn_module *m, attn_rng *rng, attn_error *err) {
    const attn_module_config *c = &m->cfg;
    attn_status s = attn_causal_attention_init(&m->u.ca, c->d_in, c->d_out, c->context_length,
                                               c->dropout, c->qkv_bias, rng, err);
    return s ? s : attn_causal_attention_params(&m->u.ca, "", &m->params, err);
}
static void causal_free(attn_module *m) {
    attn_causal_attention_free(&m->u.ca);
}
static attn_status causal_cache_init(attn_module *m, int B, int T, attn_error *err) {
    return attn_attention_cache_init(&m->ac, B, T, 1, m->cfg.d_out, err);
}
static attn_status causal_forward(MODULE_FORWARD_ARGS) {
    return attn_causal_attention_forward(&m->u.ca, x, B, T, y, mode, &m->ac, err);
}
static attn_status causal_backward(MODULE_BACKWARD_ARGS) {
    return attn_causal_attention_backward(&m->u.ca, x, B, T, dy, dx, &m->ac, err);
}
static const attn_attention_cache *causal_saved(const attn_module *m, int index) {
    return index == 0 ? &m->ac : NULL;
}
static void ac_cache_free(attn_module *m) {
    attn_attention_cache_free(&m->ac);
}

/* The config's attention: its variants with the module's heads and dropout. */
static attn_attention_spec mha_spec(const attn_module_config *c, const attn_attention_spec *v) {
    attn_attention_spec s = *v;
    s.heads = c->num_heads;
    s.head_dim = c->num_heads > 0 ? c->d_out / c->num_heads : 0;
    s.causal = 1;
    s.dropout = c->dropout;
    return s;
}
static attn_status mha_check(const attn_module_config *c, const char *k, attn_error *err) {
    if (c->d_out % c->num_heads != 0)
        return attn_fail(err, ATTN_ERR_INVALID_ARG,
                         "%s: d_out (%d) must be divisible by num_heads (%d)", k, c->d_out,
                         c->num_heads);
    return ATTN_OK;
}
static attn_status mha_init(attn_module *m, attn_rng *rng, attn_error *err) {
    const attn_module_config *c = &m->cfg;
    const attn_attention_spec spec = mha_spec(c, &m->variants);
    attn_status s = attn_mha_init_spec(&m->u.mha, c->d_in, c->d_out, c->context_length, &spec,
                                       c->qkv_bias, rng, err);
    return s ? s : attn_mha_params(&m->u.mha, "", &m->params, err);
}
static void mha_free(attn_module *m) {
    attn_mha_free(&m->u.mha);
}
static attn_status mha_cache_init(attn_module *m, int B, int T, attn_error *err) {
    return attn_mha_cache_init_any(&m->ac, &m->u.mha, B, T, err);
}
static attn_status mha_forward(MODULE_FORWARD_ARGS) {
    return attn_mha_forward(&m->u.mha, x, B, T, y, mode, &m->ac, err);
}
static attn_status mha_backward(MODULE_BACKWARD_ARGS) {
    return attn_mha_backward(&m->u.mha, x, B, T, dy, dx, &m->ac, err);
}
static const attn_attention_cache *mha_saved(const attn_module *m, int index) {
    if (index != 0) return NULL;
    /* The fused path keeps its mask compact; spell it out for inspection. */
    if (m->u.mha.path == ATTN_MHA_FUSED && m->ac.fused && m->ac.dropout_applied && m->ac.keep)
        attn_flash_dropout_expand(&m->ac.fused->drop, m->ac.keep);
    return &m->ac;
}

/* --- MultiHeadAttentionWrapper: one CausalAttention per head ------------ */

static attn_status wrap_init(attn_module *m, attn_rng *rng, attn_error *err) {
    const attn_module_config *c = &m->cfg;
    attn_status s = attn_mha_wrapper_init(&m->u.wrap, c->d_in, c->d_out, c->context_length,
                                          c->dropout, c->num_heads, c->qkv_bias, rng, err);
    return s ? s : attn_mha_wrapper_params(&m->u.wrap, "", &m->params, err);
}
static void wrap_free(attn_module *m) {
    attn_mha_wrapper_free(&m->u.wrap);
}
static attn_status wrap_cache_init(attn_module *m, int B, int T, attn_error *err) {
    return attn_mha_wrapper_cache_init(&m->wc, &m->u.wrap, B, T, err);
}
static void wrap_cache_free(attn_module *m) {
    attn_mha_wrapper_cache_free(&m->wc);
}
static attn_status wrap_forward(MODULE_FORWARD_ARGS) {
    return attn_mha_wrapper_forward(&m->u.wrap, x, B, T, y, mode, &m->wc, err);
}
static attn_status wrap_backward(MODULE_BACKWARD_ARGS) {
    return attn_mha_wrapper_backward(&m->u.wrap, x, B, T, dy, dx, &m->wc, err);
}
static const attn_attention_cache *wrap_saved(const attn_module *m, int index) {
    return index < m->cfg.num_heads ? &m->wc.heads[index] : NULL;
}

/* --- Seed 004's AttentionHead and MultiHeadAttention --------------------- */

static attn_status head_init(attn_module *m, attn_rng *rng, attn_error *err) {
    const attn_module_config *c = &m->cfg;
    attn_status s = attn_seed004_head_init(&m->u.head, c->d_in, c->d_out, c->context_length,
                                           c->dropout, c->qkv_bias, rng, err);
    return s ? s : attn_seed004_head_params(&m->u.head, "", &m->params, err);
}
static void head_free(attn_module *m) {
    attn_seed004_head_free(&m->u.head);
}
static attn_status head_cache_init(attn_module *m, int B, int T, attn_error *err) {
    return attn_seed004_head_cache_init(&m->hc, &m->u.head, B, T, err);
}
static void head_cache_free(attn_module *m) {
    attn_seed004_head_cache_free(&m->hc);
}
static attn_status head_forward(MODULE_FORWARD_ARGS) {
    return attn_seed004_head_forward(&m->u.head, x, B, T, y, mode, &m->hc, err);
}
static attn_status head_backward(MODULE_BACKWARD_ARGS) {
    return attn_seed004_head_backward(&m->u.head, x, B, T, dy, dx, &m->hc, err);
}

static attn_status s4_check(const attn_module_config *c, const char *k, attn_error *err) {
    if (c->d_out != c->d_in)
        return attn_fail(err, ATTN_ERR_INVALID_ARG,
                         "%s: d_out (%d) must equal d_in = embedding_dim (%d)", k, c->d_out,
                         c->d_in);
    if (c->d_in % c->num_heads != 0)
        return attn_fail(err, ATTN_ERR_INVALID_ARG,
                         "%s: embedding_dim (%d) must be divisible by heads_num (%d)", k, c->d_in,
                         c->num_heads);
    return ATTN_OK;
}
static attn_status s4_init(attn_module *m, attn_rng *rng, attn_error *err) {
    const attn_module_config *c = &m->cfg;
    attn_status s = attn_seed004_mha_init(&m->u.s4, c->d_in, c->num_heads, c->context_length,
                                          c->dropout, c->qkv_bias, rng, err);
    return s ? s : attn_seed004_mha_params(&m->u.s4, "", &m->params, err);
}
static void s4_free(attn_module *m) {
    attn_seed004_mha_free(&m->u.s4);
}
static attn_status s4_cache_init(attn_module *m, int B, int T, attn_error *err) {
    return attn_seed004_mha_cache_init(&m->s4c, &m->u.s4, B, T, err);
}
static void s4_cache_free(attn_module *m) {
    attn_seed004_mha_cache_free(&m->s4c);
}
static attn_status s4_forward(MODULE_FORWARD_ARGS) {
    return attn_seed004_mha_forward(&m->u.s4, x, B, T, y, mode, &m->s4c, err);
}
static attn_status s4_backward(MODULE_BACKWARD_ARGS) {
    return attn_seed004_mha_backward(&m->u.s4, x, B, T, dy, dx, &m->s4c, err);
}

/* --- The table ------------------------------------------------------------ */

enum {
    CAUSAL = ATTN_MODULE_USES_CONTEXT | ATTN_MODULE_USES_DROPOUT | ATTN_MODULE_USES_QKV_BIAS,
    HEADS = ATTN_MODULE_USES_HEADS,
};

/* One row per kind, at its enum value: what it is (info), then how it runs. */
#define INFO(KIND, NAME, SUMMARY, RANK, USES, PER_HEAD)                                            \
    .info = {ATTN_MODULE_##KIND, NAME, SUMMARY, RANK, USES, PER_HEAD}
static const kind_row kinds[] = {
    [ATTN_MODULE_SELF_ATTENTION_V1] = {INFO(SELF_ATTENTION_V1, "self-attention-v1",
                                            "SelfAttention_v1 (raw W_query/W_key/W_value)", 2, 0,
                                            0),
                                       .init = v1_init, .free = v1_free,
                                       .cache_init = sa_cache_init, .cache_free = sa_cache_free,
                                       .forward = v1_forward, .backward = v1_backward},
    [ATTN_MODULE_SELF_ATTENTION_V2] = {INFO(SELF_ATTENTION_V2, "self-attention-v2",
                                            "SelfAttention_v2 (nn.Linear projections)", 2,
                                            ATTN_MODULE_USES_QKV_BIAS, 0),
                                       .init = v2_init, .free = v2_free,
                                       .cache_init = sa_cache_init, .cache_free = sa_cache_free,
                                       .forward = v2_forward, .backward = v2_backward},
    [ATTN_MODULE_CAUSAL_ATTENTION] = {INFO(CAUSAL_ATTENTION, "causal-attention", "CausalAttention",
                                           3, CAUSAL, 0),
                                      .init = causal_init, .free = causal_free,
                                      .cache_init = causal_cache_init, .cache_free = ac_cache_free,
                                      .forward = causal_forward, .backward = causal_backward,
                                      .attention_cache = causal_saved},
    [ATTN_MODULE_MHA_WRAPPER] = {INFO(MHA_WRAPPER, "mha-wrapper",
                                      "MultiHeadAttentionWrapper (--heads heads of d_out)", 3,
                                      CAUSAL | HEADS, 1),
                                 .init = wrap_init, .free = wrap_free,
                                 .cache_init = wrap_cache_init, .cache_free = wrap_cache_free,
                                 .forward = wrap_forward, .backward = wrap_backward,
                                 .attention_cache = wrap_saved},
    [ATTN_MODULE_MHA] = {INFO(MHA, "mha", "MultiHeadAttention (weight splits + out_proj)", 3,
                              CAUSAL | HEADS | ATTN_MODULE_USES_VARIANTS, 0),
                         .check = mha_check, .init = mha_init, .free = mha_free,
                         .cache_init = mha_cache_init, .cache_free = ac_cache_free,
                         .forward = mha_forward, .backward = mha_backward,
                         .attention_cache = mha_saved},
    [ATTN_MODULE_ATTENTION_HEAD] = {INFO(ATTENTION_HEAD, "attention-head",
                                         "seed 004's AttentionHead (--d-out = head_size)", 3,
                                         CAUSAL, 0),
                                    .init = head_init, .free = head_free,
                                    .cache_init = head_cache_init, .cache_free = head_cache_free,
                                    .forward = head_forward, .backward = head_backward},
    [ATTN_MODULE_SEED004_MHA] = {INFO(SEED004_MHA, "seed004-mha",
                                      "seed 004's MultiHeadAttention (heads, linear; d_out = d_in)",
                                      3, CAUSAL | HEADS, 0),
                                 .check = s4_check, .init = s4_init, .free = s4_free,
                                 .cache_init = s4_cache_init, .cache_free = s4_cache_free,
                                 .forward = s4_forward, .backward = s4_backward},
};
#undef INFO
#define N_KINDS ((int)(sizeof kinds / sizeof kinds[0]))
/* A new kind adds one row here (designated by its enum value). */
_Static_assert(sizeof kinds / sizeof kinds[0] == ATTN_MODULE_KIND_COUNT,
               "kinds[] has a row for every module kind");

const attn_module_kind_info *attn_module_kind_get(attn_module_kind kind) {
    return (int)kind >= 0 && (int)kind < N_KINDS ? &kinds[kind].info : NULL;
}

int attn_module_kind_parse(const char *name, attn_module_kind *out) {
    if (!name) return -1;
    for (int i = 0; i < N_KINDS; i++)
        if (strcmp(name, kinds[i].info.name) == 0) {
            *out = (attn_module_kind)i;
            return 0;
        }
    return -1;
}

const char *attn_module_kind_name(attn_module_kind kind) {
    const attn_module_kind_info *k = attn_module_kind_get(kind);
    return k ? k->name : "unknown";
}

attn_status attn_module_config_validate(const attn_module_config *cfg, attn_error *err) {
    const attn_module_kind_info *info = attn_module_kind_get(cfg->kind);
    if (!info)
        return attn_fail(err, ATTN_ERR_INVALID_ARG, "unknown module kind %d", (int)cfg->kind);
    const char *k = info->name;
    if (cfg->d_in <= 0)
        return attn_fail(err, ATTN_ERR_INVALID_ARG, "%s: d_in must be > 0, got %d", k, cfg->d_in);
    if (cfg->d_out <= 0)
        return attn_fail(err, ATTN_ERR_INVALID_ARG, "%s: d_out must be > 0, got %d", k, cfg->d_out);
    if ((info->uses & ATTN_MODULE_USES_HEADS) && cfg->num_heads <= 0)
        return attn_fail(err, ATTN_ERR_INVALID_ARG, "%s: num_heads must be > 0, got %d", k,
                         cfg->num_heads);
    attn_status s = kinds[cfg->kind].check ? kinds[cfg->kind].check(cfg, k, err) : ATTN_OK;
    if (s) return s;
    if ((info->uses & ATTN_MODULE_USES_CONTEXT) && cfg->context_length <= 0)
        return attn_fail(err, ATTN_ERR_INVALID_ARG, "%s: context_length must be > 0, got %d", k,
                         cfg->context_length);
    if (info->uses & ATTN_MODULE_USES_DROPOUT) return attn_check_dropout(cfg->dropout, k, err);
    if (cfg->dropout != 0.0)
        return attn_fail(err, ATTN_ERR_INVALID_ARG, "%s has no dropout (got dropout %g)", k,
                         cfg->dropout);
    if (!(info->uses & ATTN_MODULE_USES_QKV_BIAS) && cfg->qkv_bias)
        return attn_fail(err, ATTN_ERR_INVALID_ARG,
                         "%s has raw weight matrices and no bias (qkv_bias must be off)", k);
    return ATTN_OK;
}

attn_status attn_module_create(const attn_module_config *cfg, attn_rng *rng, attn_module **out,
                               attn_error *err) {
    return attn_module_create_variant(cfg, NULL, rng, out, err);
}

attn_status attn_module_variant_validate(const attn_module_config *cfg,
                                         const attn_attention_spec *variants, attn_error *err) {
    attn_status st = attn_module_config_validate(cfg, err);
    if (st != ATTN_OK || !variants) return st;
    const attn_attention_spec *v = variants;
    const attn_module_kind_info *info = attn_module_kind_get(cfg->kind);
    if (!(info->uses & ATTN_MODULE_USES_VARIANTS) &&
        (v->kv_heads || v->window || v->positions || v->rope_theta != 0 || v->rope_fraction != 0 ||
         v->qk_norm || v->softcap != 0))
        return attn_fail(err, ATTN_ERR_INVALID_ARG,
                         "%s has the book's attention only (the attention variants are mha's)",
                         info->name);
    if (!(info->uses & ATTN_MODULE_USES_VARIANTS)) return ATTN_OK;
    const attn_attention_spec s = mha_spec(cfg, v);
    return attn_attention_check(&s, info->name, err);
}

/* The module's own buffers, for attn_module_bind to restore. */
static attn_status keep_own(attn_module *m, attn_error *err) {
    const int n = m->params.count;
    m->own = malloc((size_t)(2 * n + 1) * sizeof *m->own);
    if (!m->own) return attn_fail(err, ATTN_ERR_NOMEM, "out of memory creating a module");
    for (int i = 0; i < n; i++) {
        m->own[i] = m->params.items[i].data;
        m->own[n + i] = m->params.items[i].grad;
    }
    return ATTN_OK;
}

attn_status attn_module_bind(attn_module *m, float *const *data, float *const *grad, int n,
                             attn_error *err) {
    const attn_param_list *L = &m->params;
    if (n != L->count)
        return attn_fail(err, ATTN_ERR_SHAPE,
                         "%s bind: %d parameter arrays given, the module has %d",
                         kinds[m->cfg.kind].info.name, n, L->count);
    for (int i = 0; i < n; i++)
        if ((data && !data[i]) || (grad && !grad[i]))
            return attn_fail(err, ATTN_ERR_INVALID_ARG, "%s bind: no array for %s",
                             kinds[m->cfg.kind].info.name, L->items[i].name);
    attn_param_list_bind(&m->params, data ? data : m->own, grad ? grad : m->own + n);
    return ATTN_OK;
}

attn_status attn_module_create_variant(const attn_module_config *cfg,
                                       const attn_attention_spec *variants, attn_rng *rng,
                                       attn_module **out, attn_error *err) {
    *out = NULL;
    attn_status st = attn_module_variant_validate(cfg, variants, err);
    if (st != ATTN_OK) return st;
    attn_attention_spec v;
    memset(&v, 0, sizeof v);
    if (variants) v = *variants;
    attn_module *m = calloc(1, sizeof *m);
    if (!m) return attn_fail(err, ATTN_ERR_NOMEM, "out of memory creating a module");
    m->cfg = *cfg;
    m->variants = v;
    attn_param_list_init(&m->params);
    st = kinds[cfg->kind].init(m, rng, err);
    if (st == ATTN_OK) st = keep_own(m, err);
    if (st != ATTN_OK) {
        attn_module_free(m);
        return st;
    }
    *out = m;
    return ATTN_OK;
}

static void free_caches(attn_module *m) {
    if (!m->have_cache) return;
    kinds[m->cfg.kind].cache_free(m);
    m->have_cache = 0;
    m->have_forward = 0;
}

void attn_module_free(attn_module *m) {
    if (!m) return;
    if (m->own) attn_param_list_bind(&m->params, m->own, m->own + m->params.count);
    free(m->own); /* the fields hold the module's own buffers again: its free frees those */
    free_caches(m);
    kinds[m->cfg.kind].free(m);
    attn_param_list_free(&m->params);
    free(m);
}

const attn_module_config *attn_module_get_config(const attn_module *m) {
    return &m->cfg;
}

int attn_module_out_dim(const attn_module *m) {
    return kinds[m->cfg.kind].info.out_per_head ? m->cfg.num_heads * m->cfg.d_out : m->cfg.d_out;
}

const attn_param_list *attn_module_params(const attn_module *m) {
    return &m->params;
}

static attn_status ensure_cache(attn_module *m, int B, int T, attn_error *err) {
    if (m->have_cache && m->B == B && m->T == T) return ATTN_OK;
    free_caches(m);
    attn_status st = kinds[m->cfg.kind].cache_init(m, B, T, err);
    if (st != ATTN_OK) return st;
    m->have_cache = 1;
    m->B = B;
    m->T = T;
    return ATTN_OK;
}

attn_status attn_module_forward(attn_module *m, const float *x, int B, int T, float *y,
                                const attn_forward_mode *mode, attn_error *err) {
    const kind_row *row = &kinds[m->cfg.kind];
    const char *k = row->info.name;
    if (B <= 0 || T <= 0)
        return attn_fail(err, ATTN_ERR_SHAPE, "%s: B and T must be > 0 (got B = %d, T = %d)", k, B,
                         T);
    if (row->info.input_rank == 2 && B != 1)
        return attn_fail(err, ATTN_ERR_SHAPE,
                         "%s takes a single (T, d_in) sequence (B = 1), got B = %d", k, B);
    if ((row->info.uses & ATTN_MODULE_USES_CONTEXT) && T > m->cfg.context_length)
        return attn_fail(err, ATTN_ERR_SHAPE,
                         "%s: sequence length T = %d exceeds "
                         "context_length = %d",
                         k, T, m->cfg.context_length);
    attn_status st = ensure_cache(m, B, T, err);
    if (st != ATTN_OK) return st;
    m->have_forward = 0;
    st = row->forward(m, x, B, T, y, mode, err);
    if (st == ATTN_OK) m->have_forward = 1;
    return st;
}

attn_status attn_module_backward(attn_module *m, const float *x, const float *dy, float *dx,
                                 attn_error *err) {
    if (!m->have_forward)
        return attn_fail(err, ATTN_ERR_STATE, "%s: backward called before a successful forward",
                         kinds[m->cfg.kind].info.name);
    return kinds[m->cfg.kind].backward(m, x, m->B, m->T, dy, dx, err);
}

const struct attn_attention_cache *attn_module_attention_cache(const attn_module *m, int index) {
    const kind_row *row = &kinds[m->cfg.kind];
    if (!m->have_forward || index < 0 || !row->attention_cache) return NULL;
    return row->attention_cache(m, index);
}

double attn_module_memory(const attn_module_config *c, int B, int T) {
    const double din = c->d_in, dout = c->d_out;
    const double heads = c->num_heads > 0 ? c->num_heads : 1, ctx = c->context_length;
    const attn_module_kind_info *k = attn_module_kind_get(c->kind);
    const unsigned uses = k ? k->uses : 0;
    const int per_head = k && k->out_per_head; /* the wrapper: num_heads modules */
    const int out_proj = c->kind == ATTN_MODULE_MHA || c->kind == ATTN_MODULE_SEED004_MHA;
    const double copies = per_head ? heads : 1; /* weight sets and masks */
    const double width = copies * dout;         /* the output's last dim */
    const double weights = copies * 3 * (din * dout + dout) + (out_proj ? dout * dout + dout : 0);
    const double masks = (uses & ATTN_MODULE_USES_CONTEXT) ? copies * ctx * ctx : 0;
    /* Per token q, k, v, the context and the output, and per head T
     * attention weights; the backward as much again. */
    const double tokens = (double)B * T;
    const double acts = tokens * (4 * width + dout + heads * T);
    return 4 * (2 * weights + masks + 2 * acts);
}
