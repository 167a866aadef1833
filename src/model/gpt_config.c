/* GPT config: presets, validation, JSON (see attn/gpt.h). */
#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn/feedforward.h"
#include "attn/gpt.h"
#include "base/json_strict.h"
#include "presets.h"

attn_status attn_gpt_config_preset(const char *name, attn_gpt_config *cfg, attn_error *err) {
    const attn_preset *p = attn_preset_find(name);
    if (!p) {
        char known[512];
        attn_preset_list(known, sizeof known);
        return attn_fail(err, ATTN_ERR_NOT_FOUND, "unknown preset '%s' (known: %s)",
                         name ? name : "(null)", known);
    }
    *cfg = p->model;
    return ATTN_OK;
}

enum field {
    F_VOCAB,
    F_CTX,
    F_EMB,
    F_HEADS,
    F_LAYERS,
    F_DROP,
    F_BIAS,
    F_POS_EMB,
    F_N_KV_HEADS,
    F_WINDOW,
    F_NORM,
    F_ACT,
    F_QK_NORM,
    F_SOFTCAP,
    F_TIE,
    F_INIT,
    F_HEAD_SIZE
};
_Static_assert(F_POS_EMB == ATTN_GPT_KEY_VARIANT0 && F_HEAD_SIZE + 1 == ATTN_GPT_KEY_COUNT &&
                   F_TIE + 1 == ATTN_GPT_KEY_VARIANT0 + ATTN_GPT_KEY_VARIANTS &&
                   F_INIT == ATTN_GPT_KEY_INIT,
               "the key rows follow attn_gpt_config's fields");

/* The choices' order is the enums' (attn_pos_emb, attn_norm_kind, attn_act). */
static const char *const POS_EMB[] = {"learned", "rope", "alibi", "none", NULL};
static const char *const NORM[] = {"layernorm", "rmsnorm", NULL};
static const char *const ACT[] = {"gelu", "relu2", "swiglu", NULL};
static const char *const INIT[] = {"book", "gpt2", NULL}; /* attn_gpt_init_kind */

/* One row per model key, in attn_gpt_config's order (ATTN_GPT_KEY_* types);
 * the limits are attn_gpt_config_validate's. */
static const attn_gpt_key KEYS[ATTN_GPT_KEY_COUNT] = {
    {"vocab_size", "vocabulary_size", ATTN_GPT_KEY_INT, 1, 1 << 24, 0, NULL,
     "tokens (the corpus's characters unless given)"},
    {"context_length", "context_size", ATTN_GPT_KEY_INT, 1, 1 << 20, 0, NULL,
     "longest sequence the model reads"},
    {"emb_dim", "embedding_dim", ATTN_GPT_KEY_INT, 1, 1 << 16, 0, NULL, "width of the model"},
    {"n_heads", "heads_num", ATTN_GPT_KEY_INT, 1, 1 << 16, 0, NULL, "attention heads"},
    {"n_layers", "layers_num", ATTN_GPT_KEY_INT, 1, 4096, 0, NULL, "transformer blocks"},
    {"drop_rate", "dropout_rate", ATTN_GPT_KEY_NUMBER, 0, 1, 1, NULL, "dropout while training"},
    {"qkv_bias", "use_bias", ATTN_GPT_KEY_BOOL, 0, 1, 0, NULL, "biases on W_query, W_key, W_value"},
    {"pos_emb", NULL, ATTN_GPT_KEY_CHOICE, 0, 3, 0, POS_EMB,
     "positions: the book's learned table, rotary, ALiBi biases, or none"},
    {"n_kv_heads", NULL, ATTN_GPT_KEY_INT, 1, 1 << 16, 0, NULL,
     "key/value heads, dividing n_heads (grouped-query; default n_heads)"},
    {"window", NULL, ATTN_GPT_KEY_INT, 0, 1 << 20, 0, NULL,
     "sliding attention window in tokens (0: the whole context)"},
    {"norm", NULL, ATTN_GPT_KEY_CHOICE, 0, 1, 0, NORM, "the book's LayerNorm or RMSNorm"},
    {"act", NULL, ATTN_GPT_KEY_CHOICE, 0, 2, 0, ACT,
     "feed-forward activation: the book's GELU, ReLU^2 or SwiGLU"},
    {"qk_norm", NULL, ATTN_GPT_KEY_BOOL, 0, 1, 0, NULL, "RMSNorm on queries and keys"},
    {"softcap", NULL, ATTN_GPT_KEY_NUMBER, 0, 1e6, 0, NULL,
     "attention scores c tanh(s / c) (0: off)"},
    {"tie_weights", NULL, ATTN_GPT_KEY_BOOL, 0, 1, 0, NULL, "out_head shares tok_emb's matrix"},
    {"init", NULL, ATTN_GPT_KEY_CHOICE, 0, 1, 0, INIT,
     "fresh weights drawn as the book's GPTModel or as GPT-2 (tied: always gpt2)"},
    {"head_size", NULL, ATTN_GPT_KEY_INT, 1, 1 << 16, 0, NULL, "emb_dim / n_heads (seed 004's)"},
};

attn_gpt_init_kind attn_gpt_config_init_kind(const attn_gpt_config *c) {
    return c->tie_weights ? ATTN_GPT_INIT_GPT2 : c->init;
}

/* n_kv_heads as the model uses it. */
static int kv_heads(const attn_gpt_config *c) {
    return c->n_kv_heads ? c->n_kv_heads : c->n_heads;
}

attn_attention_spec attn_gpt_attention_spec(const attn_gpt_config *c) {
    const int heads = c->n_heads > 0 ? c->n_heads : 1;
    attn_attention_spec s = attn_attention_book(heads, c->emb_dim / heads, c->drop_rate);
    s.kv_heads = kv_heads(c);
    s.window = c->window;
    s.positions = c->pos_emb == ATTN_POS_ROPE    ? ATTN_POSITIONS_ROPE
                  : c->pos_emb == ATTN_POS_ALIBI ? ATTN_POSITIONS_ALIBI
                                                 : ATTN_POSITIONS_NONE;
    s.qk_norm = c->qk_norm;
    s.softcap = c->softcap;
    return s;
}

static attn_status validate_variants(const attn_gpt_config *c, attn_error *err) {
    if ((unsigned)c->pos_emb > ATTN_POS_NONE)
        return attn_fail(err, ATTN_ERR_INVALID_ARG,
                         "pos_emb must be one of learned, rope, alibi, "
                         "none (got %d)",
                         (int)c->pos_emb);
    if ((unsigned)c->norm > ATTN_NORM_RMSNORM)
        return attn_fail(err, ATTN_ERR_INVALID_ARG,
                         "norm must be one of layernorm, rmsnorm (got %d)", (int)c->norm);
    if ((unsigned)c->act > ATTN_ACT_SWIGLU)
        return attn_fail(err, ATTN_ERR_INVALID_ARG,
                         "act must be one of gelu, relu2, swiglu (got %d)", (int)c->act);
    if (c->n_kv_heads < 0 || kv_heads(c) > c->n_heads || c->n_heads % kv_heads(c) != 0)
        return attn_fail(err, ATTN_ERR_INVALID_ARG,
                         "n_kv_heads %d must divide n_heads %d (each key/value head serves "
                         "n_heads / n_kv_heads query heads)",
                         c->n_kv_heads, c->n_heads);
    if (c->window < 0 || c->window > (1 << 20))
        return attn_fail(err, ATTN_ERR_INVALID_ARG, "window must be in [0, 1048576] (got %d)",
                         c->window);
    if (!(c->softcap >= 0.0 && c->softcap <= 1e6))
        return attn_fail(err, ATTN_ERR_INVALID_ARG, "softcap must be in [0, 1e6] (got %g)",
                         c->softcap);
    if ((unsigned)c->init > ATTN_GPT_INIT_GPT2)
        return attn_fail(err, ATTN_ERR_INVALID_ARG, "init must be one of book, gpt2 (got %d)",
                         (int)c->init);
    if ((c->qk_norm != 0 && c->qk_norm != 1) || (c->tie_weights != 0 && c->tie_weights != 1))
        return attn_fail(err, ATTN_ERR_INVALID_ARG,
                         "qk_norm and tie_weights must be false or true (got %d, %d)", c->qk_norm,
                         c->tie_weights);
    if (c->pos_emb == ATTN_POS_ROPE && c->emb_dim / c->n_heads < 2)
        return attn_fail(err, ATTN_ERR_INVALID_ARG,
                         "pos_emb 'rope' needs head_dim >= 2 (emb_dim %d / n_heads %d)", c->emb_dim,
                         c->n_heads);
    return ATTN_OK;
}

attn_status attn_gpt_config_validate(const attn_gpt_config *c, attn_error *err) {
    if (c->vocab_size < 1)
        return attn_fail(err, ATTN_ERR_INVALID_ARG, "vocab_size must be >= 1 (got %d)",
                         c->vocab_size);
    if (c->context_length < 1)
        return attn_fail(err, ATTN_ERR_INVALID_ARG, "context_length must be >= 1 (got %d)",
                         c->context_length);
    if (c->emb_dim < 1)
        return attn_fail(err, ATTN_ERR_INVALID_ARG, "emb_dim must be >= 1 (got %d)", c->emb_dim);
    if (c->n_heads < 1)
        return attn_fail(err, ATTN_ERR_INVALID_ARG, "n_heads must be >= 1 (got %d)", c->n_heads);
    if (c->n_layers < 1)
        return attn_fail(err, ATTN_ERR_INVALID_ARG, "n_layers must be >= 1 (got %d)", c->n_layers);
    if (c->emb_dim % c->n_heads != 0)
        return attn_fail(err, ATTN_ERR_INVALID_ARG,
                         "emb_dim %d is not divisible by n_heads %d (each head gets emb_dim / "
                         "n_heads dims)",
                         c->emb_dim, c->n_heads);
    if (!(c->drop_rate >= 0.0 && c->drop_rate < 1.0))
        return attn_fail(err, ATTN_ERR_INVALID_ARG, "drop_rate must be in [0, 1) (got %g)",
                         c->drop_rate);
    if (c->qkv_bias != 0 && c->qkv_bias != 1)
        return attn_fail(err, ATTN_ERR_INVALID_ARG, "qkv_bias must be false or true (got %d)",
                         c->qkv_bias);
    /* Keep every buffer size comfortably inside int/size_t arithmetic. */
    if (c->emb_dim > (1 << 16) || c->vocab_size > (1 << 24) || c->context_length > (1 << 20) ||
        c->n_layers > 4096)
        return attn_fail(err, ATTN_ERR_INVALID_ARG,
                         "config too large (emb_dim <= 65536, vocab_size <= 2^24, "
                         "context_length <= 2^20, n_layers <= 4096)");
    return validate_variants(c, err);
}

const attn_gpt_key *attn_gpt_key_at(int i) {
    return i >= 0 && i < ATTN_GPT_KEY_COUNT ? &KEYS[i] : NULL;
}

int attn_gpt_key_find(const char *name) {
    for (int i = 0; name && i < ATTN_GPT_KEY_COUNT; i++)
        if (strcmp(name, KEYS[i].name) == 0 || (KEYS[i].alias && strcmp(name, KEYS[i].alias) == 0))
            return i;
    return -1;
}

void attn_gpt_key_describe(const attn_gpt_key *k, char *buf, size_t cap) {
    if (k->type == ATTN_GPT_KEY_BOOL) {
        snprintf(buf, cap, "true or false");
    } else if (k->type == ATTN_GPT_KEY_CHOICE) {
        size_t used = (size_t)snprintf(buf, cap, "one of");
        for (int i = 0; k->choices[i] && used < cap; i++)
            used += (size_t)snprintf(buf + used, cap - used, "%s %s", i ? "," : "", k->choices[i]);
    } else {
        snprintf(buf, cap, "%s in [%.17g, %.17g%c",
                 k->type == ATTN_GPT_KEY_INT ? "an integer" : "a number", k->lo, k->hi,
                 k->hi_open ? ')' : ']');
    }
}

#define KNOWN_KEYS                                                                                 \
    "vocab_size, context_length, emb_dim, n_heads, n_layers, drop_rate, qkv_bias, pos_emb, "       \
    "n_kv_heads, window, norm, act, qk_norm, softcap, tie_weights, init, or seed 004's "           \
    "vocabulary_size, context_size, embedding_dim, heads_num, layers_num, dropout_rate, "          \
    "use_bias, head_size"

/* Key k's value from v, range-checked before any conversion (a double cast
 * to int out of range is undefined behaviour). */
static attn_status key_value(const attn_gpt_key *k, const char *key, const cJSON *v, double *out,
                             attn_error *err) {
    int ok;
    if (k->type == ATTN_GPT_KEY_BOOL) {
        ok = cJSON_IsBool(v); /* true or false, never 1 or 0 */
        *out = cJSON_IsTrue(v) ? 1 : 0;
    } else if (k->type == ATTN_GPT_KEY_CHOICE) {
        ok = 0;
        *out = 0;
        for (int i = 0; cJSON_IsString(v) && k->choices[i] && !ok; i++)
            if (strcmp(v->valuestring, k->choices[i]) == 0) {
                ok = 1;
                *out = i;
            }
    } else {
        const double d = cJSON_IsNumber(v) ? v->valuedouble : NAN;
        ok = isfinite(d) && d >= k->lo && (k->hi_open ? d < k->hi : d <= k->hi) &&
             (k->type != ATTN_GPT_KEY_INT || d == floor(d));
        *out = d;
    }
    if (ok) return ATTN_OK;
    char what[96], got[64];
    attn_gpt_key_describe(k, what, sizeof what);
    attn_json_value_text(v, got, sizeof got);
    return attn_fail(err, ATTN_ERR_INVALID_ARG, "config key '%s' must be %s (got %s)", key, what,
                     got);
}

/* head_size is not part of attn_gpt_config; set_json checks it. */
static attn_status set_field(attn_gpt_config *cfg, const char *key, const cJSON *v, int *head_size,
                             attn_error *err) {
    const int i = attn_gpt_key_find(key);
    if (i < 0)
        return attn_fail(err, ATTN_ERR_NOT_FOUND, "unknown config key '%s' (known: %s)", key,
                         KNOWN_KEYS);
    double d;
    attn_status s = key_value(&KEYS[i], key, v, &d, err);
    if (s) return s;
    switch ((enum field)i) {
    case F_VOCAB: cfg->vocab_size = (int)d; break;
    case F_CTX: cfg->context_length = (int)d; break;
    case F_EMB: cfg->emb_dim = (int)d; break;
    case F_HEADS: cfg->n_heads = (int)d; break;
    case F_LAYERS: cfg->n_layers = (int)d; break;
    case F_DROP: cfg->drop_rate = d; break;
    case F_BIAS: cfg->qkv_bias = (int)d; break;
    case F_POS_EMB: cfg->pos_emb = (attn_pos_emb)d; break;
    case F_N_KV_HEADS: cfg->n_kv_heads = (int)d; break;
    case F_WINDOW: cfg->window = (int)d; break;
    case F_NORM: cfg->norm = (attn_norm_kind)d; break;
    case F_ACT: cfg->act = (attn_act)d; break;
    case F_QK_NORM: cfg->qk_norm = (int)d; break;
    case F_SOFTCAP: cfg->softcap = d; break;
    case F_TIE: cfg->tie_weights = (int)d; break;
    case F_INIT: cfg->init = (attn_gpt_init_kind)d; break;
    case F_HEAD_SIZE:
        if (head_size) *head_size = (int)d;
        break;
    }
    return ATTN_OK;
}

static double field_value(const attn_gpt_config *c, enum field f, int head_size) {
    switch (f) {
    case F_VOCAB: return c->vocab_size;
    case F_CTX: return c->context_length;
    case F_EMB: return c->emb_dim;
    case F_HEADS: return c->n_heads;
    case F_LAYERS: return c->n_layers;
    case F_DROP: return c->drop_rate;
    case F_BIAS: return c->qkv_bias;
    case F_POS_EMB: return c->pos_emb;
    case F_N_KV_HEADS: return c->n_kv_heads;
    case F_WINDOW: return c->window;
    case F_NORM: return c->norm;
    case F_ACT: return c->act;
    case F_QK_NORM: return c->qk_norm;
    case F_SOFTCAP: return c->softcap;
    case F_TIE: return c->tie_weights;
    case F_INIT: return c->init;
    case F_HEAD_SIZE: return head_size;
    }
    return 0.0;
}

void attn_gpt_key_value(const attn_gpt_config *c, int i, char *buf, size_t cap) {
    if (i < 0 || i >= ATTN_GPT_KEY_COUNT) {
        snprintf(buf, cap, "?");
        return;
    }
    const attn_gpt_key *k = &KEYS[i];
    const double v = i == F_N_KV_HEADS  ? kv_heads(c)
                     : i == F_HEAD_SIZE ? (c->n_heads > 0 ? c->emb_dim / c->n_heads : 0)
                     : i == F_INIT      ? attn_gpt_config_init_kind(c)
                                        : field_value(c, (enum field)i, 0);
    int n = -1;
    for (int j = 0; k->type == ATTN_GPT_KEY_CHOICE && k->choices[j]; j++)
        if (v == j) n = j;
    if (k->type == ATTN_GPT_KEY_CHOICE)
        snprintf(buf, cap, "%s", n >= 0 ? k->choices[n] : "?");
    else if (k->type == ATTN_GPT_KEY_BOOL)
        snprintf(buf, cap, "%s", v != 0 ? "true" : "false");
    else
        snprintf(buf, cap, k->type == ATTN_GPT_KEY_INT ? "%.0f" : "%.15g", v);
}

int attn_gpt_key_is_book(const attn_gpt_config *c, int i) {
    if (i < ATTN_GPT_KEY_VARIANT0 || i >= ATTN_GPT_KEY_VARIANT0 + ATTN_GPT_KEY_VARIANTS) return 1;
    if (i == F_N_KV_HEADS) return kv_heads(c) == c->n_heads;
    return field_value(c, (enum field)i, 0) == 0.0;
}

int attn_gpt_config_first_variant(const attn_gpt_config *c, char *buf, size_t cap) {
    if (cap) buf[0] = '\0';
    for (int i = ATTN_GPT_KEY_VARIANT0; i < ATTN_GPT_KEY_VARIANT0 + ATTN_GPT_KEY_VARIANTS; i++) {
        if (attn_gpt_key_is_book(c, i)) continue;
        char v[64];
        attn_gpt_key_value(c, i, v, sizeof v);
        snprintf(buf, cap, "%s %s", KEYS[i].name, v);
        return i;
    }
    return -1;
}

attn_gpt_config attn_gpt_config_as_book(const attn_gpt_config *c) {
    _Static_assert(ATTN_GPT_KEY_VARIANTS == 8, "each variant key is reset here");
    attn_gpt_config b = *c;
    b.pos_emb = ATTN_POS_LEARNED;
    b.n_kv_heads = 0;
    b.window = 0;
    b.norm = ATTN_NORM_LAYERNORM;
    b.act = ATTN_ACT_GELU;
    b.qk_norm = 0;
    b.softcap = 0;
    b.tie_weights = 0;
    return b;
}

void attn_gpt_config_describe_variants(const attn_gpt_config *c, int changed_only, char *buf,
                                       size_t cap) {
    size_t used = 0;
    if (cap) buf[0] = '\0';
    for (int i = ATTN_GPT_KEY_VARIANT0;
         i < ATTN_GPT_KEY_VARIANT0 + ATTN_GPT_KEY_VARIANTS && used < cap; i++) {
        if (changed_only && attn_gpt_key_is_book(c, i)) continue;
        char v[64];
        attn_gpt_key_value(c, i, v, sizeof v);
        used +=
            (size_t)snprintf(buf + used, cap - used, "%s%s %s", used ? ", " : "", KEYS[i].name, v);
    }
}

attn_status attn_gpt_config_set_key(attn_gpt_config *cfg, const char *key,
                                    const struct cJSON *value, attn_error *err) {
    return set_field(cfg, key, value, NULL, err);
}

/* set_json on n bytes (a file's, which may hold a NUL). */
static attn_status set_json_n(attn_gpt_config *cfg, const char *json_text, size_t n,
                              attn_error *err) {
    cJSON *root;
    attn_status parsed = attn_json_parse_strict(json_text, n, "config", &root, err);
    if (parsed) return parsed;
    if (!cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return attn_fail(err, ATTN_ERR_FORMAT, "config must be a JSON object");
    }
    attn_gpt_config out = *cfg;
    int head_size = -1;
    const char *seen[F_HEAD_SIZE + 1] = {0}; /* key that set each field */
    attn_status s = ATTN_OK;
    for (const cJSON *it = root->child; it && s == ATTN_OK; it = it->next) {
        const int k = attn_gpt_key_find(it->string);
        if (k < 0) {
            s = attn_fail(err, ATTN_ERR_NOT_FOUND, "unknown config key '%s' (known: %s)",
                          it->string, KNOWN_KEYS);
            break;
        }
        const double before = field_value(&out, (enum field)k, head_size);
        s = set_field(&out, it->string, it, &head_size, err);
        if (s != ATTN_OK) break;
        if (seen[k]) {
            /* Same field under both names (or twice): only fine when equal. */
            if (field_value(&out, (enum field)k, head_size) != before)
                s = attn_fail(err, ATTN_ERR_INVALID_ARG,
                              "config keys '%s' and '%s' give different values", seen[k],
                              it->string);
        }
        seen[k] = it->string;
    }
    if (s == ATTN_OK) s = attn_gpt_config_validate(&out, err);
    if (s == ATTN_OK && head_size >= 0 && head_size != out.emb_dim / out.n_heads)
        s = attn_fail(err, ATTN_ERR_INVALID_ARG,
                      "head_size %d does not equal emb_dim / n_heads = %d / %d = %d", head_size,
                      out.emb_dim, out.n_heads, out.emb_dim / out.n_heads);
    cJSON_Delete(root);
    if (s == ATTN_OK) *cfg = out;
    return s;
}

attn_status attn_gpt_config_set_json(attn_gpt_config *cfg, const char *json_text, attn_error *err) {
    return set_json_n(cfg, json_text, strlen(json_text), err);
}

attn_status attn_gpt_config_load_json(attn_gpt_config *cfg, const char *path, attn_error *err) {
    FILE *f = fopen(path, "rb");
    if (!f)
        return attn_fail(err, ATTN_ERR_IO, "cannot open config '%s': %s", path, strerror(errno));
    char *buf = NULL;
    size_t len = 0, cap = 0;
    for (;;) {
        if (len + 4096 + 1 > cap) {
            cap = cap ? cap * 2 : 8192;
            char *nb = realloc(buf, cap);
            if (!nb) {
                free(buf);
                fclose(f);
                return attn_fail(err, ATTN_ERR_NOMEM, "out of memory reading '%s'", path);
            }
            buf = nb;
        }
        size_t got = fread(buf + len, 1, 4096, f);
        len += got;
        if (got < 4096) break;
    }
    const int bad = ferror(f);
    fclose(f);
    if (bad) {
        free(buf);
        return attn_fail(err, ATTN_ERR_IO, "cannot read config '%s'", path);
    }
    buf[len] = '\0';
    attn_status s = set_json_n(cfg, buf, len, err);
    free(buf);
    if (s != ATTN_OK && err) {
        char msg[ATTN_ERROR_MSG_MAX];
        snprintf(msg, sizeof msg, "%.200s: %.300s", path, err->msg);
        memcpy(err->msg, msg, sizeof msg);
    }
    return s;
}

attn_status attn_gpt_config_to_json(const attn_gpt_config *c, char **out, attn_error *err) {
    cJSON *o = cJSON_CreateObject();
    if (!o) return attn_fail(err, ATTN_ERR_NOMEM, "out of memory");
    cJSON_AddNumberToObject(o, "vocab_size", c->vocab_size);
    cJSON_AddNumberToObject(o, "context_length", c->context_length);
    cJSON_AddNumberToObject(o, "emb_dim", c->emb_dim);
    cJSON_AddNumberToObject(o, "n_heads", c->n_heads);
    cJSON_AddNumberToObject(o, "n_layers", c->n_layers);
    cJSON_AddNumberToObject(o, "drop_rate", c->drop_rate);
    cJSON_AddBoolToObject(o, "qkv_bias", c->qkv_bias ? 1 : 0);
    /* Variant keys only where they are not the book's: the book's model
     * writes the bytes it wrote before they existed. */
    for (int i = ATTN_GPT_KEY_VARIANT0; i < ATTN_GPT_KEY_VARIANT0 + ATTN_GPT_KEY_VARIANTS; i++) {
        if (attn_gpt_key_is_book(c, i)) continue;
        const attn_gpt_key *k = &KEYS[i];
        const double v = i == F_N_KV_HEADS ? kv_heads(c) : field_value(c, (enum field)i, 0);
        if (k->type == ATTN_GPT_KEY_CHOICE) {
            char text[64];
            attn_gpt_key_value(c, i, text, sizeof text);
            cJSON_AddStringToObject(o, k->name, text);
        } else if (k->type == ATTN_GPT_KEY_BOOL) {
            cJSON_AddBoolToObject(o, k->name, v != 0);
        } else {
            cJSON_AddNumberToObject(o, k->name, v);
        }
    }
    /* init as set (a tied model draws gpt2 either way): the text gives the struct back. */
    if (c->init != ATTN_GPT_INIT_BOOK) cJSON_AddStringToObject(o, KEYS[F_INIT].name, INIT[c->init]);
    *out = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    if (!*out) return attn_fail(err, ATTN_ERR_NOMEM, "out of memory");
    return ATTN_OK;
}

double attn_gpt_config_params(const attn_gpt_config *m) {
    const double V = m->vocab_size, T = m->context_length, C = m->emb_dim, H = m->n_heads,
                 L = m->n_layers;
    /* Per block W_q,k,v (+bias), out_proj + bias, two LayerNorms (RMSNorm:
     * no shift), the feed-forward with biases (4C hidden; swiglu: layers.0
     * is (2H, C)); pos_emb and out_head unless the variant drops them. */
    const double F = attn_feedforward_hidden(m->emb_dim, m->act);
    const double F1 = m->act == ATTN_ACT_SWIGLU ? 2 * F : F; /* layers.0's rows */
    const double norm = m->norm == ATTN_NORM_RMSNORM ? C : 2 * C;
    const double ff = F1 * C + F1 + F * C + C;
    /* Grouped-query: W_key, W_value are (KV, C), KV = n_kv_heads head_dim;
     * qk_norm adds two head_dim scales. */
    const double hd = H > 0 ? C / H : 0, KV = (m->n_kv_heads > 0 ? m->n_kv_heads : H) * hd;
    const double att =
        2 * C * C + 2 * KV * C + (m->qkv_bias ? C + 2 * KV : 0) + C + (m->qk_norm ? 2 * hd : 0);
    const double block = att + 2 * norm + ff;
    const double embed = V * C + (m->pos_emb == ATTN_POS_LEARNED ? T * C : 0);
    const double head = m->tie_weights ? 0 : C * V;
    return embed + L * block + norm + head;
}
