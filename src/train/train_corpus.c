/* The trainer's corpus: its token splits, from text in memory (the char
 * runs, tests, small corpora) or from the corpus file through cached token
 * files read window by window (GPT-2 runs: attn/token_file.h), and the
 * size and hash a resume checks it by. */
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "attn/fileio.h"
#include "attn/train.h"
#include "trainer.h"

/* The corpus's identity in the training state ("corpus_fnv1a"). */
static uint64_t fnv1a(uint64_t h, const char *s, size_t n) {
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)s[i];
        h *= 0x100000001b3ull;
    }
    return h;
}
#define FNV1A_BASIS 0xcbf29ce484222325ull

/* The character count of text, for the gpt2 split. */
static attn_status split_text(const char *text, size_t n, size_t *at, attn_error *err) {
    size_t chars = 0;
    attn_status st = attn_utf8_count(text, n, &chars, err);
    if (st) return st;
    const size_t keep = attn_split_point(chars); /* Python's int(0.9 * len(text)) */
    const unsigned char *s = (const unsigned char *)text;
    size_t b = 0;
    for (size_t c = 0; c < keep; c++) /* past one character (the text is valid) */
        b += s[b] < 0x80 ? 1 : s[b] < 0xE0 ? 2 : s[b] < 0xF0 ? 3 : 4;
    *at = b;
    return ATTN_OK;
}

attn_status attn_train_tokenize(const attn_tokenizer *tok, const char *text, size_t n,
                                int32_t **ids, size_t *n_ids, size_t *split, attn_error *err) {
    *ids = NULL;
    size_t cap = 0, at = n, a = 0, b = 0;
    attn_status st = attn_tokenizer_max_ids(tok, text, n, &cap, err);
    if (!st && tok->kind == ATTN_TOKENIZER_GPT2) {
        st = split_text(text, n, &at, err);
        cap = n + 2; /* each part n_part + 1 */
    }
    if (st) return st;
    if (!(*ids = malloc(cap * sizeof **ids)))
        return attn_fail(err, ATTN_ERR_NOMEM, "out of memory for %zu token ids", cap);
    const int special = tok->kind == ATTN_TOKENIZER_GPT2; /* <|endoftext|> as the book's */
    st = attn_tokenizer_encode_ex(tok, text, at, special, *ids, cap, &a, err);
    if (!st && at < n)
        st = attn_tokenizer_encode_ex(tok, text + at, n - at, special, *ids + a, cap - a, &b, err);
    if (st) {
        free(*ids);
        *ids = NULL;
        return st;
    }
    *n_ids = a + b;
    *split = tok->kind == ATTN_TOKENIZER_GPT2 ? a : attn_split_point(a);
    return ATTN_OK;
}

/* Both splits must hold a window and its target. */
static attn_status check_splits(const attn_trainer *tr, size_t n_train, size_t n_val,
                                attn_error *err) {
    const int T = tr->mcfg.context_length;
    if (n_train < (size_t)T + 1 || n_val < (size_t)T + 1)
        return attn_fail(err, ATTN_ERR_INVALID_ARG,
                         "the corpus has %zu tokens: its training split (%zu) and validation "
                         "split (%zu) must each hold at least context_length + 1 = %d",
                         n_train + n_val, n_train, n_val, T + 1);
    return ATTN_OK;
}

attn_status attn_trainer_corpus_text(attn_trainer *tr, const char *text, size_t n,
                                     attn_error *err) {
    size_t split = 0;
    attn_status st = attn_train_tokenize(&tr->tok, text, n, &tr->ids, &tr->n_ids, &split, err);
    if (st) return st;
    tr->text_bytes = n;
    tr->text_hash = fnv1a(FNV1A_BASIS, text, n);
    if ((st = check_splits(tr, split, tr->n_ids - split, err))) return st;
    const int T = tr->mcfg.context_length;
    attn_dataset_init(&tr->train, tr->ids, split, T, NULL);
    attn_dataset_init(&tr->val, tr->ids + split, tr->n_ids - split, T, NULL);
    return ATTN_OK;
}

/* Size and hash of the file, read in slices (never whole). */
static attn_status hash_file(attn_trainer *tr, const char *path, attn_error *err) {
    attn_file_in in;
    attn_status st = attn_file_in_open(&in, path, err);
    if (st) return st;
    static const size_t slice = (size_t)1 << 20;
    char *buf = malloc(slice);
    uint64_t h = FNV1A_BASIS;
    size_t total = 0, got = 0;
    if (!buf) st = attn_fail(err, ATTN_ERR_NOMEM, "out of memory reading '%s'", path);
    while (!st && !(st = attn_file_in_read(&in, path, buf, slice, &got, err)) && got > 0) {
        h = fnv1a(h, buf, got);
        total += got;
    }
    free(buf);
    attn_file_in_close(&in);
    if (st) return st;
    if (total == 0) return attn_fail(err, ATTN_ERR_INVALID_ARG, "the corpus is empty");
    tr->text_bytes = total;
    tr->text_hash = h;
    return ATTN_OK;
}

/* GPT-2's BPE as a token file's encoder: <|endoftext|> the special token,
 * as the book's GPTDatasetV1 encodes (attn_train_tokenize). */
static attn_status encode_bpe(void *ctx, const char *text, size_t n, int32_t *ids, size_t cap,
                              size_t *n_ids, attn_error *err) {
    return attn_tokenizer_encode_ex(ctx, text, n, 1, ids, cap, n_ids, err);
}

/* What changes whenever the encoding would: the mode and both files. */
typedef struct bpe_identity {
    char tag[16];
    uint64_t encoder_json, vocab_bpe;
} bpe_identity;

attn_status attn_trainer_corpus_file(attn_trainer *tr, const char *path, int plan_only,
                                     attn_error *err) {
    const attn_tokenizer *tok = &tr->tok;
    if (tok->kind != ATTN_TOKENIZER_GPT2)
        return attn_fail(err, ATTN_ERR_INVALID_ARG, "token files need the gpt2 tokenizer");
    bpe_identity id;
    memset(&id, 0, sizeof id);
    memcpy(id.tag, "gpt2 bpe eot v1", 15);
    id.encoder_json = XXH3_64bits(tok->encoder_json, strlen(tok->encoder_json));
    id.vocab_bpe = XXH3_64bits(tok->vocab_bpe, strlen(tok->vocab_bpe));
    const attn_token_encoder enc = {.identity = &id,
                                    .identity_len = sizeof id,
                                    .vocab_size = tok->vocab_size,
                                    .encode = encode_bpe,
                                    .ctx = (void *)tok};
    attn_status st = hash_file(tr, path, err);
    size_t n_train = 0, n_val = 0;
    char cache[4096];
    if (!st && plan_only) /* a dry run counts, and writes no cache */
        st = attn_token_count_split(path, &enc, &n_train, &n_val, err);
    if (!st && !plan_only) st = attn_token_cache_dir(cache, sizeof cache, err);
    if (!st && !plan_only)
        st = attn_token_file_open_split(path, &enc, cache, &tr->tok_train, &tr->tok_val, err);
    if (!st && !plan_only) {
        n_train = attn_token_file_len(&tr->tok_train);
        n_val = attn_token_file_len(&tr->tok_val);
    }
    if (!st) st = check_splits(tr, n_train, n_val, err);
    if (st) return st;
    const int T = tr->mcfg.context_length;
    if (plan_only) { /* sizes only: a planning trainer reads no token */
        tr->train = (attn_token_dataset){.n_ids = n_train, .block_size = T};
        tr->val = (attn_token_dataset){.n_ids = n_val, .block_size = T};
        return ATTN_OK;
    }
    st = attn_token_file_dataset(&tr->tok_train, T, &tr->train, err);
    return st ? st : attn_token_file_dataset(&tr->tok_val, T, &tr->val, err);
}
