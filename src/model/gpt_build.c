/* A GPT as a description (see attn/gpt_family.h): the layers a family's
 * build lists, the book's family, the adapters attached by name, and the
 * fresh weights' draw over the table. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpt_block.h"
#include "gpt_build.h"

/* Linears a list can hold: six a block (W_query, W_key, W_value,
 * out_proj, ff's two), and the head. */
#define LINEARS_PER_BLOCK 6

/* The layer just listed: the table's entries from param0 on are its. */
static attn_status add_layer(attn_gpt *m, attn_gpt_layer_kind kind, int index, int param0,
                             attn_error *err) {
    if (m->n_list == m->list_cap)
        return attn_fail(err, ATTN_ERR_INVALID_ARG,
                         "a family lists at most %d layers (embedding, %d blocks, final norm, "
                         "head)",
                         m->list_cap, m->cfg.n_layers);
    m->layers[m->n_list++] = (attn_gpt_layer){kind, index, param0, m->params.count - param0};
    return ATTN_OK;
}

static int count_kind(const attn_gpt *m, attn_gpt_layer_kind kind) {
    int n = 0;
    for (int i = 0; i < m->n_list; i++)
        n += m->layers[i].kind == kind;
    return n;
}

attn_status attn_gpt_add_embedding(attn_gpt *m, attn_error *err) {
    const attn_gpt_config *cfg = &m->cfg;
    const int param0 = m->params.count;
    attn_status s = attn_embedding_init_view(&m->tok_emb, cfg->vocab_size, cfg->emb_dim, err);
    if (s == ATTN_OK) s = attn_embedding_params(&m->tok_emb, "tok_emb.", &m->params, err);
    if (s == ATTN_OK && cfg->pos_emb == ATTN_POS_LEARNED) { /* else no table */
        s = attn_embedding_init_view(&m->pos_emb, cfg->context_length, cfg->emb_dim, err);
        if (s == ATTN_OK) s = attn_embedding_params(&m->pos_emb, "pos_emb.", &m->params, err);
    }
    return s == ATTN_OK ? add_layer(m, ATTN_GPT_LAYER_EMBEDDING, 0, param0, err) : s;
}

attn_status attn_gpt_add_block(attn_gpt *m, attn_error *err) {
    const int i = count_kind(m, ATTN_GPT_LAYER_BLOCK), param0 = m->params.count;
    if (i >= m->cfg.n_layers)
        return attn_fail(err, ATTN_ERR_INVALID_ARG, "the model has n_layers %d blocks already",
                         m->cfg.n_layers);
    char p[ATTN_PARAM_NAME_MAX];
    snprintf(p, sizeof p, "trf_blocks.%d.", i);
    attn_status s = attn_block_init_view(&m->blocks[i], &m->cfg, err);
    if (s == ATTN_OK) s = attn_block_params(&m->blocks[i], p, &m->params, err);
    return s == ATTN_OK ? add_layer(m, ATTN_GPT_LAYER_BLOCK, i, param0, err) : s;
}

attn_status attn_gpt_add_final_norm(attn_gpt *m, attn_error *err) {
    const int param0 = m->params.count;
    attn_status s = attn_norm_init_view(&m->final_norm, m->cfg.emb_dim, m->cfg.norm, err);
    if (s == ATTN_OK) s = attn_layernorm_params(&m->final_norm, "final_norm.", &m->params, err);
    return s == ATTN_OK ? add_layer(m, ATTN_GPT_LAYER_NORM, 0, param0, err) : s;
}

attn_status attn_gpt_add_head(attn_gpt *m, int width, int bias, attn_error *err) {
    const int param0 = m->params.count;
    if (width < 1) return attn_fail(err, ATTN_ERR_INVALID_ARG, "the head's width %d < 1", width);
    attn_status s = attn_linear_init_view(&m->out_head, m->cfg.emb_dim, width, bias, err);
    if (s == ATTN_OK) s = attn_linear_params(&m->out_head, "out_head.", &m->params, err);
    return s == ATTN_OK ? add_layer(m, ATTN_GPT_LAYER_HEAD, 0, param0, err) : s;
}

/* Tied: the head views tok_emb.weight, one tensor (as PyTorch's
 * named_parameters() lists a shared parameter once): both backward passes
 * accumulate into its gradient, the head's first (it may write the shared
 * gradient whole; the embedding's scatter adds after it): its mark. An
 * adapter the build asks for is the head's own. */
attn_status attn_gpt_add_tied_head(attn_gpt *m, attn_error *err) {
    attn_param_list *L = &m->params;
    const int param0 = L->count;
    attn_status s = attn_linear_init_view(&m->out_head, m->cfg.emb_dim, m->cfg.vocab_size, 0, err);
    if (s == ATTN_OK)
        s = attn_param_list_alias(L, "tok_emb.weight", &m->out_head.weight,
                                  &m->out_head.grad_weight, err);
    if (s == ATTN_OK)
        attn_param_list_find(L, "tok_emb.weight")->grad_unset = &m->out_head.grad_unset;
    if (s == ATTN_OK && L->on_linear)
        s = L->on_linear(L->on_linear_user, "out_head.", &m->out_head, err);
    if (s == ATTN_OK && m->out_head.lora)
        s = attn_lora_params(m->out_head.lora, "out_head.lora.", L, err);
    return s == ATTN_OK ? add_layer(m, ATTN_GPT_LAYER_HEAD, 0, param0, err) : s;
}

attn_status attn_gpt_build_book(attn_gpt *m, const attn_gpt_build *opts, attn_error *err) {
    const int width = opts ? opts->head_width : 0;
    if (width && m->cfg.tie_weights)
        return attn_fail(err, ATTN_ERR_INVALID_ARG,
                         "a head of its own width (%d) is not tok_emb's matrix: tie_weights "
                         "false for it",
                         width);
    attn_status s = attn_gpt_add_embedding(m, err);
    for (int i = 0; s == ATTN_OK && i < m->cfg.n_layers; i++)
        s = attn_gpt_add_block(m, err);
    if (s == ATTN_OK) s = attn_gpt_add_final_norm(m, err);
    if (s != ATTN_OK) return s;
    if (m->cfg.tie_weights) return attn_gpt_add_tied_head(m, err);
    if (width) return attn_gpt_add_head(m, width, opts->head_bias, err);
    return attn_gpt_add_head(m, m->cfg.vocab_size, 0, err);
}

/* ------------------------------------------------------------ adapters */

/* The adapter the build's options put on the Linear named prefix: *rank 0
 * for none. */
static void site_of(const attn_gpt_build *o, const char *prefix, int *rank, float *alpha) {
    *rank = 0;
    if (o->n_lora_sites > 0) {
        for (int i = 0; i < o->n_lora_sites; i++)
            if (strcmp(o->lora_sites[i].linear, prefix) == 0) {
                *rank = o->lora_sites[i].rank;
                *alpha = o->lora_sites[i].alpha;
            }
        return;
    }
    const char *want = o->lora_prefix ? o->lora_prefix : "";
    if (o->lora_rank > 0 && strncmp(prefix, want, strlen(want)) == 0) {
        *rank = o->lora_rank;
        *alpha = o->lora_alpha;
    }
}

/* attn_param_list's hook while a build lists: an adapter on each Linear
 * the build's options name (site_of). */
static attn_status attach(void *user, const char *prefix, attn_linear *layer, attn_error *err) {
    attn_gpt *m = user;
    int rank;
    float alpha = 0.0f;
    site_of(m->opts, prefix, &rank, &alpha);
    if (rank <= 0 || layer->lora) return ATTN_OK;
    if (m->n_adapters == m->adapters_cap)
        return attn_fail(err, ATTN_ERR_INVALID_ARG, "more than %d Linears to adapt",
                         m->adapters_cap);
    attn_lora *l = &m->adapters[m->n_adapters];
    attn_status s =
        attn_lora_init_view(l, layer->in_features, layer->out_features, rank, alpha, err);
    if (s != ATTN_OK) return s;
    m->n_adapters++;
    layer->lora = l;
    return ATTN_OK;
}

static attn_status check_rank(int rank, float alpha, const char *where, attn_error *err) {
    if (rank < 0 || rank > ATTN_LORA_MAX_RANK)
        return attn_fail(err, ATTN_ERR_INVALID_ARG, "%slora_rank %d outside [0, %d]", where, rank,
                         ATTN_LORA_MAX_RANK);
    if (rank && !isfinite(alpha))
        return attn_fail(err, ATTN_ERR_INVALID_ARG, "%slora_alpha must be finite", where);
    return ATTN_OK;
}

static attn_status check_opts(const attn_gpt_build *o, attn_error *err) {
    if (o->head_width < 0)
        return attn_fail(err, ATTN_ERR_INVALID_ARG, "head_width %d < 0", o->head_width);
    attn_status s = check_rank(o->lora_rank, o->lora_alpha, "", err);
    if (s != ATTN_OK) return s;
    if (o->n_lora_sites < 0 || (o->n_lora_sites && (!o->lora_sites || o->lora_rank)))
        return attn_fail(err, ATTN_ERR_INVALID_ARG,
                         "lora sites: %d listed; a list of sites comes without lora_rank",
                         o->n_lora_sites);
    for (int i = 0; i < o->n_lora_sites; i++) {
        const attn_gpt_lora_site *site = &o->lora_sites[i];
        if (!site->linear || site->rank < 1)
            return attn_fail(err, ATTN_ERR_INVALID_ARG, "lora site %d: no Linear name, or rank < 1",
                             i);
        if ((s = check_rank(site->rank, site->alpha, site->linear, err)) != ATTN_OK) return s;
    }
    return ATTN_OK;
}

/* Every listed site found a Linear of its name (NOT_FOUND naming the first
 * that did not). */
static attn_status sites_found(const attn_gpt *m, const attn_gpt_build *o, attn_error *err) {
    for (int i = 0; i < o->n_lora_sites; i++) {
        const char *at = o->lora_sites[i].linear;
        const size_t n = strlen(at);
        int found = 0;
        for (int k = 0; k < m->params.count && !found; k++) {
            const attn_param *p = &m->params.items[k];
            found = p->role == ATTN_ROLE_LORA_A && strncmp(p->name, at, n) == 0 &&
                    strcmp(p->name + n, "lora.A") == 0;
        }
        if (!found)
            return attn_fail(err, ATTN_ERR_NOT_FOUND,
                             "no Linear named '%s' to adapt (lora site %d)", at, i);
    }
    return ATTN_OK;
}

/* ------------------------------------------------------------ the list */

/* embedding, n_layers blocks in order, an optional final norm, the head. */
static attn_status check_list(const attn_gpt *m, attn_error *err) {
    const attn_gpt_layer *l = m->layers;
    const int n = m->n_list, L = m->cfg.n_layers;
    const char *want =
        n < 1 || l[0].kind != ATTN_GPT_LAYER_EMBEDDING ? "the embedding first" : NULL;
    int i = 1;
    for (; !want && i <= L; i++)
        if (i >= n || l[i].kind != ATTN_GPT_LAYER_BLOCK || l[i].index != i - 1)
            want = "then the n_layers blocks in order";
    if (!want && i < n && l[i].kind == ATTN_GPT_LAYER_NORM) i++;
    if (!want && (i != n - 1 || l[i].kind != ATTN_GPT_LAYER_HEAD)) want = "the head last";
    if (want)
        return attn_fail(err, ATTN_ERR_INVALID_ARG,
                         "a family's layer list is the embedding, %d blocks, an optional final "
                         "norm and the head (%s; %d layers listed)",
                         L, want, n);
    return ATTN_OK;
}

attn_status attn_gpt_build_run(attn_gpt *m, attn_gpt_build_fn build, const attn_gpt_build *opts,
                               attn_error *err) {
    const attn_gpt_build none = {0};
    if (!opts) opts = &none;
    attn_status s = check_opts(opts, err);
    if (s != ATTN_OK) return s;
    const size_t L = (size_t)m->cfg.n_layers;
    m->list_cap = (int)L + 3;
    m->layers = calloc((size_t)m->list_cap, sizeof *m->layers);
    m->adapters_cap = opts->lora_rank || opts->n_lora_sites ? (int)(L * LINEARS_PER_BLOCK + 1) : 0;
    m->adapters = m->adapters_cap ? calloc((size_t)m->adapters_cap, sizeof *m->adapters) : NULL;
    if (!m->layers || (m->adapters_cap && !m->adapters))
        return attn_fail(err, ATTN_ERR_NOMEM, "out of memory for the model's layer list");
    m->opts = opts;
    m->params.on_linear = attach;
    m->params.on_linear_user = m;
    s = (build ? build : attn_gpt_build_book)(m, opts, err);
    m->opts = NULL;
    m->params.on_linear = NULL;
    m->params.on_linear_user = NULL;
    if (s == ATTN_OK) s = check_list(m, err);
    if (s == ATTN_OK && opts->lora_rank && !m->n_adapters)
        s = attn_fail(err, ATTN_ERR_NOT_FOUND, "no Linear's name starts with lora_prefix '%s'",
                      opts->lora_prefix ? opts->lora_prefix : "");
    return s == ATTN_OK ? sites_found(m, opts, err) : s;
}

/* ------------------------------------------------------------ the draws */

/* The book's init: each tensor drawn as its torch module draws it, in the
 * table's order, which is the constructor's (norms keep the arena's ones
 * and zeros). A tied model never draws it (attn_gpt_config_init_kind). */
static void draw_book(attn_gpt *m, attn_rng *rng) {
    for (int i = 0; i < m->params.count; i++) {
        attn_param *p = &m->params.items[i];
        if (p->role == ATTN_ROLE_MATRIX || p->role == ATTN_ROLE_BIAS)
            attn_linear_draw(rng, p->data, p->numel, p->fan_in, p->role == ATTN_ROLE_BIAS);
        else if (p->role == ATTN_ROLE_EMBEDDING)
            attn_embedding_draw(rng, p->data, p->numel);
    }
}

/* 1 when w is a projection back into the residual stream (att.out_proj,
 * ff.layers.2): GPT-2 scales their init by 1/sqrt(2 n_layers). */
static int residual_projection(const attn_gpt *m, const float *w) {
    for (int i = 0; i < m->cfg.n_layers; i++)
        if (w == m->blocks[i].att.out_proj.weight || w == m->blocks[i].ff.fc2.weight) return 1;
    return 0;
}

/* GPT-2's init: each matrix one normal_ in the table's order; vectors
 * (biases, norms) keep the arena's zeros and ones. */
static void draw_gpt2(attn_gpt *m, attn_rng *rng) {
    const float std = 0.02f, resid = (float)(0.02 / sqrt(2.0 * m->cfg.n_layers));
    for (int i = 0; i < m->params.count; i++) {
        attn_param *p = &m->params.items[i];
        if (p->role == ATTN_ROLE_MATRIX || p->role == ATTN_ROLE_EMBEDDING)
            attn_rng_normal(rng, p->data, p->numel, 0.0f,
                            residual_projection(m, p->data) ? resid : std);
    }
}

void attn_gpt_draw(attn_gpt *m, attn_rng *rng) {
    if (attn_gpt_config_init_kind(&m->cfg) == ATTN_GPT_INIT_BOOK)
        draw_book(m, rng);
    else
        draw_gpt2(m, rng);
    /* The adapters after the model, as replace_linear_with_lora after the
     * constructor; B stays zero. */
    for (int i = 0; i < m->params.count; i++) {
        attn_param *p = &m->params.items[i];
        if (p->role == ATTN_ROLE_LORA_A) attn_lora_draw(rng, p->data, p->numel, p->fan_in);
    }
}

/* ------------------------------------------------------------ queries */

const attn_gpt_layer *attn_gpt_layers(const attn_gpt *m, int *count) {
    if (count) *count = m->n_list;
    return m->layers;
}

int attn_gpt_head_width(const attn_gpt *m) {
    return m->out_head.out_features;
}

attn_status attn_gpt_check_language_model(const attn_gpt *m, const char *what, attn_error *err) {
    if (attn_gpt_head_width(m) != m->cfg.vocab_size)
        return attn_fail(err, ATTN_ERR_INVALID_ARG,
                         "%s: the model's head is %d wide, not vocab_size %d (it runs a language "
                         "model)",
                         what, attn_gpt_head_width(m), m->cfg.vocab_size);
    if (m->n_adapters)
        return attn_fail(err, ATTN_ERR_INVALID_ARG,
                         "%s: the model's Linears carry LoRA adapters, which it does not run",
                         what);
    return ATTN_OK;
}

int attn_gpt_backward_stop(const attn_gpt *m) {
    for (int i = 0; i < m->n_list; i++) {
        const attn_gpt_layer *l = &m->layers[i];
        for (int k = l->param0; k < l->param0 + l->nparams; k++)
            if (m->params.items[k].trainable) return i;
    }
    return m->n_list;
}
