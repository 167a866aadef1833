/* A JSON value as an error message quotes it (the config readers:
 * gpt_config.c, train_config.c). */
#ifndef ATTN_SRC_JSON_VALUE_H
#define ATTN_SRC_JSON_VALUE_H

#include <stddef.h>

struct cJSON;

/* 1e+300, -inf, "4", true, null, an array, an object. */
void attn_json_value_text(const struct cJSON *v, char *buf, size_t cap);

#endif
