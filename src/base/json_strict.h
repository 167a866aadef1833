/* Strict JSON for the config readers (gpt_config.c, train_config.c, HF's
 * config.json) and GPT-2's encoder.json (bpe.c): one value, the whole
 * text, no NUL; and a value as a message quotes it. */
#ifndef ATTN_SRC_JSON_STRICT_H
#define ATTN_SRC_JSON_STRICT_H

#include <stddef.h>

#include "attn/status.h"

struct cJSON;

/* Parse text (n bytes, text[n] == '\0') as exactly one JSON value into
 * *root (cJSON_Delete it). ATTN_ERR_FORMAT, the message starting with
 * "name: " and naming line and column, for: an empty text, a NUL byte, a
 * byte order mark, text that is not JSON, text after the value (a second
 * value included), a \u0000 escape in a string
 * (cJSON would cut the string there: "n_layers\u0000x" would read as
 * n_layers). */
attn_status attn_json_parse_strict(const char *text, size_t n, const char *name,
                                   struct cJSON **root, attn_error *err);

/* 1e+300, -inf, "4", true, null, an array, an object. */
void attn_json_value_text(const struct cJSON *v, char *buf, size_t cap);

#endif
