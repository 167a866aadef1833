/* attn/tokenizer.h — the tokenizer of an attn model, one type of two kinds:
 *
 *   char  seed 004's CharTokenizer: one token per character (below);
 *   gpt2  GPT-2's byte-level BPE (attn/bpe.h, tiktoken's "gpt2", 50257
 *         tokens), loaded from OpenAI's encoder.json + vocab.bpe.
 *
 * Every attn_tokenizer_* function works on both kinds, except where it says
 * char only. A zeroed attn_tokenizer is an empty char one.
 *
 * Char: text is UTF-8 and a "character" is a Unicode code point, exactly as
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

typedef enum attn_tokenizer_kind {
    ATTN_TOKENIZER_CHAR = 0, /* seed 004's CharTokenizer */
    ATTN_TOKENIZER_GPT2 = 1  /* GPT-2's BPE */
} attn_tokenizer_kind;

struct attn_bpe;

typedef struct attn_tokenizer {
    int vocab_size;
    uint32_t *chars;       /* char: vocab_size code points, strictly increasing */
    int32_t ascii_id[128]; /* char: id of an ASCII character, -1 if absent */
    attn_tokenizer_kind kind;
    struct attn_bpe *bpe; /* gpt2: the BPE */
    /* gpt2: the two files' bytes, kept so a checkpoint can carry them */
    char *encoder_json, *vocab_bpe;
    size_t encoder_len, vocab_bpe_len;
} attn_tokenizer;

/* Where a fresh gpt2 tokenizer's files (encoder.json and vocab.bpe) are,
 * the one rule the CLI, C and Python share: the first of
 *   1. dir, when given (nothing else is tried);
 *   2. $ATTN_GPT2_DIR, when set and not empty (nothing else is tried);
 *   3. the installed copy, found from where libattn (or the program linked
 *      with it) is: LIB/../share/attn/gpt2 (`make install`), LIB/gpt2 (the
 *      Python package of `pip install .`);
 *   4. the source tree's data/gpt2 beside a build folder (LIB/../data/gpt2,
 *      what scripts/get-data.sh gpt2 fills);
 *   5. data/gpt2 under the current directory;
 * that holds both files. ATTN_OK with the folder in out (cap bytes), else
 * ATTN_ERR_NOT_FOUND naming every place looked at. */
#define ATTN_GPT2_N_VOCAB 50257 /* GPT-2's token count */
#define ATTN_GPT2_DIR_ENV "ATTN_GPT2_DIR"
attn_status attn_tokenizer_gpt2_find(const char *dir, char *out, size_t cap, attn_error *err);

/* A gpt2 tokenizer from dir/encoder.json and dir/vocab.bpe (dir NULL: the
 * folder attn_tokenizer_gpt2_find finds). Missing files fail
 * (ATTN_ERR_NOT_FOUND) naming the places looked at and scripts/get-data.sh
 * gpt2; bad files as attn_bpe_load. */
attn_status attn_tokenizer_gpt2(attn_tokenizer *tok, const char *dir, attn_error *err);

/* The same from the two files' bytes (a checkpoint's copy). */
attn_status attn_tokenizer_gpt2_from_memory(attn_tokenizer *tok, const char *encoder_json,
                                            size_t encoder_len, const char *vocab_bpe,
                                            size_t vocab_bpe_len, attn_error *err);

/* dst = a copy of src (its own memory). */
attn_status attn_tokenizer_copy(attn_tokenizer *dst, const attn_tokenizer *src, attn_error *err);

/* "char" or "gpt2". */
const char *attn_tokenizer_kind_name(attn_tokenizer_kind kind);
/* The kind named name; -1 when none is. */
int attn_tokenizer_kind_parse(const char *name);

/* 1 when a and b give every text the same ids (same kind and vocabulary). */
int attn_tokenizer_same(const attn_tokenizer *a, const attn_tokenizer *b);

/* *cap = ids enough to encode the n bytes of text: its characters for char
 * (fails on invalid UTF-8), n + 1 for gpt2 (a token covers >= 1 byte). */
attn_status attn_tokenizer_max_ids(const attn_tokenizer *tok, const char *text, size_t n,
                                   size_t *cap, attn_error *err);

/* attn_tokenizer_encode with room for cap ids; allow_special (gpt2 only):
 * <|endoftext|> in the text is the one token 50256, as the book's
 * GPTDatasetV1 encodes (allowed_special={"<|endoftext|>"}); otherwise, and
 * always in attn_tokenizer_encode, it is plain text. */
attn_status attn_tokenizer_encode_ex(const attn_tokenizer *tok, const char *text, size_t n,
                                     int allow_special, int32_t *ids, size_t cap, size_t *n_ids,
                                     attn_error *err);

/* The bytes of token id (*len of them, not NUL-terminated): char writes its
 * character into tmp (4 bytes) and returns tmp; gpt2 returns its own copy,
 * which may be part of a character or invalid UTF-8 on its own. NULL when
 * id is out of range. */
const char *attn_tokenizer_token(const attn_tokenizer *tok, int32_t id, char tmp[4], size_t *len);

/* Char: CharTokenizer.train_from_text: vocabulary = sorted unique characters of
 * text (n bytes of UTF-8). Fails on empty or invalid text. */
attn_status attn_tokenizer_train(attn_tokenizer *tok, const char *text, size_t n, attn_error *err);

/* Char: CharTokenizer(vocabulary): vocabulary is a UTF-8 string of distinct
 * characters in id order (as attn_tokenizer_vocab_string returns; duplicates
 * are an error here, unlike Python's silent dedup, since a checkpoint's
 * vocabulary must match its embedding rows). */
attn_status attn_tokenizer_from_vocab(attn_tokenizer *tok, const char *vocab, size_t n,
                                      attn_error *err);

void attn_tokenizer_free(attn_tokenizer *tok);

/* Char only: the vocabulary as a NUL-terminated UTF-8 string in id order
 * (malloc'd; caller frees). NULL when out of memory or for gpt2. */
char *attn_tokenizer_vocab_string(const attn_tokenizer *tok);

/* Char only: id of code point c, or -1 when it is not in the vocabulary
 * (always -1 for gpt2). */
int32_t attn_tokenizer_id(const attn_tokenizer *tok, uint32_t c);

/* Number of characters (code points) in n bytes of UTF-8 text; fails on
 * invalid UTF-8. Use it to size the ids buffer for encode. */
attn_status attn_utf8_count(const char *text, size_t n, size_t *count, attn_error *err);

/* Encode n bytes of text into ids (room for attn_tokenizer_max_ids
 * entries); *n_ids gets the count. gpt2: any bytes, <|endoftext|> as plain
 * text. Char: UTF-8; a character outside the vocabulary fails with
 * ATTN_ERR_INVALID_ARG naming it, its 0-based character position and its
 * line, column (1-based, in characters) and byte offset. */
attn_status attn_tokenizer_encode(const attn_tokenizer *tok, const char *text, size_t n,
                                  int32_t *ids, size_t *n_ids, attn_error *err);

/* Byte length of decoding n ids (fails on an id out of range). */
attn_status attn_tokenizer_decoded_len(const attn_tokenizer *tok, const int32_t *ids, size_t n,
                                       size_t *len, attn_error *err);

/* Decode n ids into out (room for decoded_len + 1 bytes; NUL-terminated).
 * gpt2 gives bytes: they may hold a NUL or be invalid UTF-8 (a character
 * cut between tokens); show them through attn_utf8_display. */
attn_status attn_tokenizer_decode(const attn_tokenizer *tok, const int32_t *ids, size_t n,
                                  char *out, attn_error *err);

/* Write one code point as UTF-8 into out (room for 4 bytes); returns bytes. */
int attn_utf8_put(uint32_t c, char *out);

/* Showing decoded bytes on a terminal, streamed: bytes go in as tokens
 * come; what comes out is valid UTF-8 without NUL. A sequence still
 * incomplete at the end of the input is held back until later bytes
 * complete it; an invalid byte (or NUL) comes out as U+FFFD. */
typedef struct attn_utf8_display {
    unsigned char held[4];
    int n_held;
} attn_utf8_display;

/* Room out needs for attn_utf8_display_put of n bytes (and for _end). */
#define ATTN_UTF8_DISPLAY_CAP(n) (3 * (size_t)(n) + 16)

/* Append n bytes; out gets the text ready to show (NUL-terminated); returns
 * its byte count. A zeroed attn_utf8_display starts a stream. */
size_t attn_utf8_display_put(attn_utf8_display *d, const char *in, size_t n, char *out);

/* End of the stream: held bytes come out as U+FFFD each. */
size_t attn_utf8_display_end(attn_utf8_display *d, char *out);

#ifdef __cplusplus
}
#endif
#endif
