/* GPT config: presets, validation, JSON (see attn/gpt.h). */
#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn/gpt.h"
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

typedef struct key_entry {
    const char *book, *seed;
    enum field field;
} key_entry;

static const key_entry KEYS[] = {
    {"vocab_size", "vocabulary_size", F_VOCAB}, {"context_length", "context_size", F_CTX},
    {"emb_dim", "embedding_dim", F_EMB},        {"n_heads", "heads_num", F_HEADS},
    {"n_layers", "layers_num", F_LAYERS},       {"drop_rate", "dropout_rate", F_DROP},
    {"qkv_bias", "use_bias", F_BIAS},           {"head_size", "head_size", F_HEAD_SIZE},
};
#define N_KEYS (sizeof KEYS / sizeof KEYS[0])

static const key_entry *find_key(const char *key) {
    for (size_t i = 0; i < N_KEYS; i++)
        if (strcmp(key, KEYS[i].book) == 0 || strcmp(key, KEYS[i].seed) == 0) return &KEYS[i];
    return NULL;
}

#define KNOWN_KEYS                                                                                 \
    "vocab_size, context_length, emb_dim, n_heads, n_layers, drop_rate, qkv_bias, or seed 004's "  \
    "vocabulary_size, context_size, embedding_dim, heads_num, layers_num, dropout_rate, "          \
    "use_bias, head_size"

static attn_status get_int(const char *key, const cJSON *v, int *out, attn_error *err) {
    if (!cJSON_IsNumber(v))
        return attn_fail(err, ATTN_ERR_INVALID_ARG, "config key '%s' must be an integer", key);
    const double d = v->valuedouble;
    if (!(d == floor(d)) || d < -2147483648.0 || d > 2147483647.0)
        return attn_fail(err, ATTN_ERR_INVALID_ARG, "config key '%s' must be an integer (got %g)",
                         key, d);
    *out = (int)d;
    return ATTN_OK;
}

/* head_size is not part of attn_gpt_config; set_json checks it. */
static attn_status set_field(attn_gpt_config *cfg, const char *key, const cJSON *v, int *head_size,
                             attn_error *err) {
    const key_entry *k = find_key(key);
    if (!k)
        return attn_fail(err, ATTN_ERR_NOT_FOUND, "unknown config key '%s' (known: %s)", key,
                         KNOWN_KEYS);
    switch (k->field) {
    case F_VOCAB: return get_int(key, v, &cfg->vocab_size, err);
    case F_CTX: return get_int(key, v, &cfg->context_length, err);
    case F_EMB: return get_int(key, v, &cfg->emb_dim, err);
    case F_HEADS: return get_int(key, v, &cfg->n_heads, err);
    case F_LAYERS: return get_int(key, v, &cfg->n_layers, err);
    case F_HEAD_SIZE: {
        int hs = 0;
        attn_status s = get_int(key, v, &hs, err);
        if (s == ATTN_OK && head_size) *head_size = hs;
        return s;
    }
    case F_DROP:
        if (!cJSON_IsNumber(v))
            return attn_fail(err, ATTN_ERR_INVALID_ARG, "config key '%s' must be a number", key);
        cfg->drop_rate = v->valuedouble;
        return ATTN_OK;
    case F_BIAS:
        if (cJSON_IsBool(v)) {
            cfg->qkv_bias = cJSON_IsTrue(v) ? 1 : 0;
            return ATTN_OK;
        }
        if (cJSON_IsNumber(v) && (v->valuedouble == 0.0 || v->valuedouble == 1.0)) {
            cfg->qkv_bias = (int)v->valuedouble;
            return ATTN_OK;
        }
        return attn_fail(err, ATTN_ERR_INVALID_ARG, "config key '%s' must be true or false", key);
    }
    return attn_fail(err, ATTN_ERR_NOT_FOUND, "unknown config key '%s'", key);
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

attn_status attn_gpt_config_set_json(attn_gpt_config *cfg, const char *json_text, attn_error *err) {
    cJSON *root = cJSON_Parse(json_text);
    if (!root) {
        const char *at = cJSON_GetErrorPtr();
        return attn_fail(err, ATTN_ERR_FORMAT, "config is not valid JSON (near '%.20s')",
                         at ? at : "");
    }
    if (!cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return attn_fail(err, ATTN_ERR_FORMAT, "config must be a JSON object");
    }
    attn_gpt_config out = *cfg;
    int head_size = -1;
    const char *seen[F_HEAD_SIZE + 1] = {0}; /* key that set each field */
    attn_status s = ATTN_OK;
    for (const cJSON *it = root->child; it && s == ATTN_OK; it = it->next) {
        const key_entry *k = find_key(it->string);
        if (!k) {
            s = attn_fail(err, ATTN_ERR_NOT_FOUND, "unknown config key '%s' (known: %s)",
                          it->string, KNOWN_KEYS);
            break;
        }
        const double before = field_value(&out, k->field, head_size);
        s = set_field(&out, it->string, it, &head_size, err);
        if (s != ATTN_OK) break;
        if (seen[k->field]) {
            /* Same field under both names (or twice): only fine when equal. */
            if (field_value(&out, k->field, head_size) != before)
                s = attn_fail(err, ATTN_ERR_INVALID_ARG,
                              "config keys '%s' and '%s' give different values", seen[k->field],
                              it->string);
        }
        seen[k->field] = it->string;
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
    attn_status s = attn_gpt_config_set_json(cfg, buf, err);
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
