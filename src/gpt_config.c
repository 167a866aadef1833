/* GPT config: presets, validation, JSON (see attn/gpt.h). */
#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn/gpt.h"
#include "json_strict.h"
#include "presets.h"

attn_status attn_gpt_config_preset(const char *name, attn_gpt_config *cfg, attn_error *err) {
    const attn_preset *p = attn_preset_find(name);
    if (!p) {
        char known[256];
        attn_preset_list(known, sizeof known);
        return attn_fail(err, ATTN_ERR_NOT_FOUND, "unknown preset '%s' (known: %s)",
                         name ? name : "(null)", known);
    }
    *cfg = p->model;
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
    return ATTN_OK;
}

enum field { F_VOCAB, F_CTX, F_EMB, F_HEADS, F_LAYERS, F_DROP, F_BIAS, F_HEAD_SIZE };

/* One row per model key, in attn_gpt_config's order (ATTN_GPT_KEY_* types);
 * the limits are attn_gpt_config_validate's. */
static const attn_gpt_key KEYS[ATTN_GPT_KEY_COUNT] = {
    {"vocab_size", "vocabulary_size", ATTN_GPT_KEY_INT, 1, 1 << 24, 0},
    {"context_length", "context_size", ATTN_GPT_KEY_INT, 1, 1 << 20, 0},
    {"emb_dim", "embedding_dim", ATTN_GPT_KEY_INT, 1, 1 << 16, 0},
    {"n_heads", "heads_num", ATTN_GPT_KEY_INT, 1, 1 << 16, 0},
    {"n_layers", "layers_num", ATTN_GPT_KEY_INT, 1, 4096, 0},
    {"drop_rate", "dropout_rate", ATTN_GPT_KEY_NUMBER, 0, 1, 1},
    {"qkv_bias", "use_bias", ATTN_GPT_KEY_BOOL, 0, 1, 0},
    {"head_size", NULL, ATTN_GPT_KEY_INT, 1, 1 << 16, 0},
};

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
    if (k->type == ATTN_GPT_KEY_BOOL)
        snprintf(buf, cap, "true or false");
    else
        snprintf(buf, cap, "%s in [%.17g, %.17g%c",
                 k->type == ATTN_GPT_KEY_INT ? "an integer" : "a number", k->lo, k->hi,
                 k->hi_open ? ')' : ']');
}

#define KNOWN_KEYS                                                                                 \
    "vocab_size, context_length, emb_dim, n_heads, n_layers, drop_rate, qkv_bias, or seed 004's "  \
    "vocabulary_size, context_size, embedding_dim, heads_num, layers_num, dropout_rate, "          \
    "use_bias, head_size"

/* Key k's value from v, range-checked before any conversion (a double cast
 * to int out of range is undefined behaviour). */
static attn_status key_value(const attn_gpt_key *k, const char *key, const cJSON *v, double *out,
                             attn_error *err) {
    int ok;
    if (k->type == ATTN_GPT_KEY_BOOL) {
        ok = cJSON_IsBool(v) || (cJSON_IsNumber(v) && (v->valuedouble == 0 || v->valuedouble == 1));
        *out = cJSON_IsBool(v) ? (cJSON_IsTrue(v) ? 1 : 0) : ok ? v->valuedouble : 0;
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
    case F_HEAD_SIZE: return head_size;
    }
    return 0.0;
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
    *out = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    if (!*out) return attn_fail(err, ATTN_ERR_NOMEM, "out of memory");
    return ATTN_OK;
}
