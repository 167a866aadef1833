/* The gpt2 kind's decoding (tokenizer_gpt2.c), which tokenizer.c's
 * attn_tokenizer_decoded_len and attn_tokenizer_decode dispatch to. */
#ifndef ATTN_SRC_TOKENIZER_GPT2_H
#define ATTN_SRC_TOKENIZER_GPT2_H

#include "attn/tokenizer.h"

/* *len = the bytes of ids; out (room for *len + 1, may be NULL: only the
 * length) gets them, NUL-terminated. */
attn_status attn_tokenizer_gpt2_decode(const attn_tokenizer *tok, const int32_t *ids, size_t n,
                                       char *out, size_t *len, attn_error *err);

#endif
