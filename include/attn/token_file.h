/* attn/token_file.h — a corpus tokenized once into a cached uint16 token
 * file.
 *
 * For a vocabulary of at most 65536 tokens (GPT-2's is 50257) the ids of a
 * text are written once, as uint16, into a file in a cache folder and read
 * from then on window by window (pread, attn_token_file_dataset): a 1 GB
 * text trains without its bytes or its ids in RAM (the page cache alone
 * holds them). The file is reused only while the text's bytes and the
 * encoder are unchanged; anything else (another tokenizer, a changed text,
 * a truncated or corrupt file) is rebuilt, never trusted.
 *
 * Nothing here memory-maps a file (nor anywhere in attn: weights and
 * checkpoints are read into memory): a mapped file that another process
 * truncates kills the reader with SIGBUS, and a cache file or a corpus can
 * change under a run (a user's `truncate`, another tool rewriting it). So
 * the text is read in slices and the ids with pread; a file that changes
 * under a reader is an error naming it (attn/dataset.h), never a crash.
 *
 * The cache file is "<cache_dir>/tok-<E>-<T>.u16": E is XXH3-64 of the
 * encoder's identity bytes, T is XXH3-128 of the text's bytes (of the range
 * for attn_token_file_open_range). It holds a 72-byte little-endian header
 *   magic "ATTNTOK\0", u32 format version (1), u32 vocab_size,
 *   u64 XXH3-64(identity), u64 text bytes, u64[2] XXH3-128(text),
 *   u64 n_tokens, u64 XXH3-64(tokens)
 * and then n_tokens uint16 ids; the file's size must be 72 + 2 * n_tokens.
 * On open every field and the tokens' hash are checked and every id must be
 * below vocab_size; any mismatch rebuilds the file (atomically: temp file in
 * cache_dir, fsync, rename). Only that name is ever replaced: a symbolic
 * link, a folder or another kind of file there is an error, as is a cache
 * path that is the text itself or lies in a run folder (the trainer's).
 *
 * Building: the text is read (never modified) and encoded in
 * chunks of about chunk_bytes, each cut only at a SAFE boundary p:
 * text[p-1] == '\n', the character before that '\n' is not white space, and
 * either the character at p is not white space, or it is one white-space
 * character followed by one that is not ("a\n\nB" is cut between its two
 * newlines, "a\n  B" nowhere near them). White space is Unicode White_Space
 * (GPT-2's \s); every character looked at must be valid UTF-8. GPT-2's
 * pattern always ends a piece "\n" at such a p, in the whole text and at the
 * end of a chunk alike (a white-space run before a non-space is cut before
 * its last character; a run at the end of a text is one piece), and nothing
 * in the pattern looks back, so encoding chunk by chunk gives the ids of
 * encoding the whole text in one call, for GPT-2's BPE (attn/bpe.h; its
 * <|endoftext|> holds no '\n') and for the char tokenizer
 * (attn/tokenizer.h). A window with no safe boundary grows until it holds
 * one (at worst: the whole text in one call). */
#ifndef ATTN_TOKEN_FILE_H
#define ATTN_TOKEN_FILE_H

#include <stddef.h>
#include <stdint.h>

#include "attn/dataset.h"
#include "attn/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Default chunk size for building (4 MiB of text per encode call). */
#define ATTN_TOKEN_CHUNK_DEFAULT ((size_t)4 << 20)

/* Encode n bytes of text into ids (room for cap ids: the module gives
 * cap = n + 1, so an encoder may give at most one id per byte, plus one),
 * *n_ids the count. Each call must encode its text on its own (no state
 * kept between calls). */
typedef attn_status (*attn_token_encode_fn)(void *ctx, const char *text, size_t n, int32_t *ids,
                                            size_t cap, size_t *n_ids, attn_error *err);

typedef struct attn_token_encoder {
    const void *identity; /* bytes that change whenever the tokenizer does */
    size_t identity_len;  /* (e.g. a hash of its vocabulary files) */
    int vocab_size;       /* 1 .. 65536; every id must be below it */
    attn_token_encode_fn encode;
    void *ctx;          /* passed to encode */
    size_t chunk_bytes; /* text per encode call when building; 0: ATTN_TOKEN_CHUNK_DEFAULT */
} attn_token_encoder;

/* Bytes before the ids in a token file (its header). */
#define ATTN_TOKEN_FILE_HEADER 72

typedef struct attn_token_file {
    size_t n_tokens;
    int rebuilt;         /* 1 when this open encoded the text (no valid cache file) */
    size_t encode_calls; /* calls to encode made by this open (0 when reused) */
    char path[4096];     /* the cache file */
    int fd;              /* the cache file, open for reading (checked whole at open) */
    int is_open;         /* 1 while fd is this handle's */
    int vocab_size;      /* the encoder's: every id is below it */
} attn_token_file;

/* Tokens of the whole text at text_path, from the cache in cache_dir (made
 * if missing, refused inside a run folder) or built there. *tf is zeroed on
 * failure; close it with attn_token_file_close either way. */
attn_status attn_token_file_open(const char *text_path, const attn_token_encoder *enc,
                                 const char *cache_dir, attn_token_file *tf, attn_error *err);

/* The same for the bytes text[text_begin : text_end] alone, tokenized as a
 * text of its own (its cache is keyed by those bytes only). Both ends must
 * lie within the file; text_end == SIZE_MAX means its end. */
attn_status attn_token_file_open_range(const char *text_path, size_t text_begin, size_t text_end,
                                       const attn_token_encoder *enc, const char *cache_dir,
                                       attn_token_file *tf, attn_error *err);

/* Close the file; safe on a zeroed or closed handle. */
void attn_token_file_close(attn_token_file *tf);

size_t attn_token_file_len(const attn_token_file *tf);

/* A dataset view of the open file's ids (attn_dataset_init_file: read
 * window by window, every read checked), borrowing tf: close tf after the
 * last read. */
attn_status attn_token_file_dataset(const attn_token_file *tf, int block_size,
                                    attn_token_dataset *ds, attn_error *err);

/* The book's split of the TEXT (chapter 2/5: split_idx = int(0.9 *
 * len(text)) characters): the byte offset where character
 * floor(0.9 * characters) starts, counting UTF-8 code points as Python's
 * str does (an invalid byte counts as one character). */
size_t attn_text_split_offset(const char *text, size_t n);

/* train = tokens of the text's first 90% of characters, val = the rest,
 * each its own token file (attn_text_split_offset, then
 * attn_token_file_open_range twice). Both are zeroed on failure. */
attn_status attn_token_file_open_split(const char *text_path, const attn_token_encoder *enc,
                                       const char *cache_dir, attn_token_file *train,
                                       attn_token_file *val, attn_error *err);

/* The token counts of attn_token_file_open_range / _open_split without a
 * cache: the text is encoded chunk by chunk as a build would, and nothing
 * is read from or written to any cache (attn train --dry-run). */
attn_status attn_token_count_range(const char *text_path, size_t text_begin, size_t text_end,
                                   const attn_token_encoder *enc, size_t *n_tokens,
                                   attn_error *err);
attn_status attn_token_count_split(const char *text_path, const attn_token_encoder *enc,
                                   size_t *n_train, size_t *n_val, attn_error *err);

/* The default cache folder, made if missing (mkdir -p): $ATTN_CACHE_DIR,
 * else $XDG_CACHE_HOME/attn/tokens, else $HOME/.cache/attn/tokens (empty
 * variables count as unset). Fails when none is set, the path does not
 * fit in cap bytes, or it lies in a run folder (nothing is made then). */
attn_status attn_token_cache_dir(char *buf, size_t cap, attn_error *err);

#ifdef __cplusplus
}
#endif
#endif
