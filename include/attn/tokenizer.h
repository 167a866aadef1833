/* attn/tokenizer.h — seed 004's CharTokenizer: one token per character.
 *
 * Text is UTF-8 and a "character" is a Unicode code point, exactly as
 * Python's str iterates, so the vocabulary is sorted(set(text)) ordered by
 * code point (65 characters for Tiny Shakespeare, which is plain ASCII) and
 * ids match seed 004's: encode("Hello world") = 20 43 50 50 53 1 61 53 56 50 42.
 * Invalid UTF-8 (or a NUL byte) in the text is an error naming its byte offset.
 *
 * Token ids are int32; id i stands for the i-th character of the sorted
 * vocabulary. The vocabulary round-trips as a UTF-8 string (its characters
 * in id order), which is how checkpoints store it. */
#ifndef ATTN_TOKENIZER_H
#define ATTN_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include "attn/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct attn_tokenizer {
    int vocab_size;
    uint32_t *chars;       /* vocab_size code points, strictly increasing */
    int32_t ascii_id[128]; /* fast path: id of an ASCII character, -1 if absent */
} attn_tokenizer;

/* CharTokenizer.train_from_text: vocabulary = sorted unique characters of
 * text (n bytes of UTF-8). Fails on empty or invalid text. */
attn_status attn_tokenizer_train(attn_tokenizer *tok, const char *text, size_t n, attn_error *err);

/* CharTokenizer(vocabulary): vocabulary is a UTF-8 string of distinct
 * characters in id order (as attn_tokenizer_vocab_string returns; duplicates
 * are an error here, unlike Python's silent dedup, since a checkpoint's
 * vocabulary must match its embedding rows). */
attn_status attn_tokenizer_from_vocab(attn_tokenizer *tok, const char *vocab, size_t n,
                                      attn_error *err);

void attn_tokenizer_free(attn_tokenizer *tok);

/* The vocabulary as a NUL-terminated UTF-8 string in id order (malloc'd;
 * caller frees). NULL when out of memory. */
char *attn_tokenizer_vocab_string(const attn_tokenizer *tok);

/* Id of code point c, or -1 when it is not in the vocabulary. */
int32_t attn_tokenizer_id(const attn_tokenizer *tok, uint32_t c);

/* Number of characters (code points) in n bytes of UTF-8 text; fails on
 * invalid UTF-8. Use it to size the ids buffer for encode. */
attn_status attn_utf8_count(const char *text, size_t n, size_t *count, attn_error *err);

/* Encode n bytes of UTF-8 into ids (room for attn_utf8_count entries);
 * *n_ids gets the count. A character outside the vocabulary fails with
 * ATTN_ERR_INVALID_ARG naming it, its 0-based character position and its
 * line, column (1-based, in characters) and byte offset. */
attn_status attn_tokenizer_encode(const attn_tokenizer *tok, const char *text, size_t n,
                                  int32_t *ids, size_t *n_ids, attn_error *err);

/* UTF-8 byte length of decoding n ids (fails on an id out of range). */
attn_status attn_tokenizer_decoded_len(const attn_tokenizer *tok, const int32_t *ids, size_t n,
                                       size_t *len, attn_error *err);

/* Decode n ids into out (room for decoded_len + 1 bytes; NUL-terminated). */
attn_status attn_tokenizer_decode(const attn_tokenizer *tok, const int32_t *ids, size_t n,
                                  char *out, attn_error *err);

/* Write one code point as UTF-8 into out (room for 4 bytes); returns bytes. */
int attn_utf8_put(uint32_t c, char *out);

#ifdef __cplusplus
}
#endif
#endif
