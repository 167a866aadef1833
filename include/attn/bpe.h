/* attn/bpe.h — GPT-2's byte-level BPE tokenizer (tiktoken's "gpt2").
 *
 * The vocabulary is OpenAI's two files: encoder.json (token string -> id,
 * the strings spelled through GPT-2's byte <-> printable-character map) and
 * vocab.bpe (the merges in rank order). Encoding is tiktoken's:
 *   1. text is cut into pieces by GPT-2's pattern (contractions 's 't 're 've
 *      'm 'll 'd, ` ?\p{L}+`, ` ?\p{N}+`, ` ?[^\s\p{L}\p{N}]+`, `\s+(?!\S)`,
 *      `\s+`; \s is Unicode White_Space), matched with PCRE2;
 *   2. each piece starts as its bytes and the lowest-ranked adjacent pair is
 *      merged until no pair has a rank (the leftmost first on a tie).
 * `<|endoftext|>` (50256) is one token only where the caller allows special
 * tokens (tiktoken's allowed_special); otherwise it is plain text
 * (disallowed_special=()).
 *
 * Bytes, not characters: invalid UTF-8 never fails. Each maximal run of
 * valid UTF-8 is cut by the pattern; an invalid byte is a piece of its own
 * (its single-byte token). decode(encode(x)) == x for any bytes, and
 * decoding gives bytes: a character split over tokens comes out whole once
 * its tokens are joined. Token ids are int32. */
#ifndef ATTN_BPE_H
#define ATTN_BPE_H

#include <stddef.h>
#include <stdint.h>

#include "attn/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct attn_bpe attn_bpe;

/* Load encoder.json and vocab.bpe. The files are checked whole before use:
 * encoder.json is one JSON object and nothing else (no text or second
 * object after it, no NUL byte, no byte order mark: refused naming line
 * and column), vocab.bpe starts with its "#version" line (tiktoken and
 * Hugging Face skip line 1 unread), every id 0..n-1 once, all 256 single
 * bytes present, every merge "a b" naming two tokens whose join is a
 * token, no merge twice, and one merge for every token that is neither a
 * byte nor special (so a truncated or mismatched pair of files is refused,
 * naming the line). CRLF line ends in vocab.bpe are read as LF (as
 * tiktoken and Hugging Face read them). Messages name the files by their
 * paths (attn_bpe_from_memory: "encoder.json", "vocab.bpe"). */
attn_status attn_bpe_load(attn_bpe **out, const char *encoder_json_path, const char *vocab_bpe_path,
                          attn_error *err);
/* The same from the files' bytes in memory. */
attn_status attn_bpe_from_memory(attn_bpe **out, const char *encoder_json, size_t encoder_len,
                                 const char *vocab_bpe, size_t vocab_len, attn_error *err);
void attn_bpe_free(attn_bpe *t);

/* Number of tokens (50257 for GPT-2). */
int attn_bpe_n_vocab(const attn_bpe *t);
/* The id of <|endoftext|>, or -1 when the vocabulary has none. */
int32_t attn_bpe_eot(const attn_bpe *t);

/* Encode n bytes of text into ids, which has room for cap ids (n + 1 is
 * always enough: a token covers at least one byte); *n_ids gets the count.
 * allow_special: <|endoftext|> in the text is the one token eot. */
attn_status attn_bpe_encode(const attn_bpe *t, const char *text, size_t n, int allow_special,
                            int32_t *ids, size_t cap, size_t *n_ids, attn_error *err);

/* The bytes of token id (not NUL-terminated), *len set; NULL when id is out
 * of range. */
const char *attn_bpe_token(const attn_bpe *t, int32_t id, size_t *len);

/* Decode n ids into out (room for cap bytes); *len gets the byte count.
 * Fails on an id out of range, or when out is too small (then *len says how
 * many bytes are needed). */
attn_status attn_bpe_decode(const attn_bpe *t, const int32_t *ids, size_t n, char *out, size_t cap,
                            size_t *len, attn_error *err);

#ifdef __cplusplus
}
#endif
#endif
