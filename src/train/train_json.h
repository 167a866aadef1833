/* The strict reader of a JSON config file (model and training keys), with
 * what it set, for attn_train_resolve (train_setup.c); the public
 * attn_train_config_apply_json is this on a C string. */
#ifndef ATTN_SRC_TRAIN_JSON_H
#define ATTN_SRC_TRAIN_JSON_H

#include <stddef.h>

#include "attn/gpt.h"
#include "attn/train.h"

/* The keys a config set, by the names attn writes (the book's for model
 * keys, attn_train_key_at's for training keys; static strings). */
typedef struct attn_train_json_set {
    const char *names[ATTN_GPT_KEY_COUNT + ATTN_TRAIN_KEY_COUNT];
    int count;
} attn_train_json_set;

/* Apply the JSON object in text (n bytes, text[n] == '\0') to model and
 * train. Refused, naming the file (name), the place and the key: text that
 * is not one JSON object, text after it, a NUL byte or a \u0000 escape, an
 * unknown key (with the closest known one), a key given twice (or a key and
 * its alias with different values), a value of the wrong type or outside
 * the key's range, a head_size that is not emb_dim / n_heads. set (may be
 * NULL) gets the keys set. */
attn_status attn_train_json_apply(attn_gpt_config *model, attn_train_config *train,
                                  const char *text, size_t n, const char *name,
                                  attn_train_json_set *set, attn_error *err);

/* 1 when set holds the key (by the name attn writes). */
int attn_train_json_has(const attn_train_json_set *set, const char *name);

#endif
