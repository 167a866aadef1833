/* A model file's tokenizer in its metadata (attn_ckpt_tokenizer_meta,
 * attn_ckpt_read_tokenizer; attn/checkpoint.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn/checkpoint.h"
#include "attn/parse.h"
#include "attn/safetensors.h"
#include "attn/tokenizer.h"

attn_status attn_ckpt_tokenizer_meta(const attn_tokenizer *tok, attn_st_kv *kv, int *n,
                                     char **owned, attn_error *err) {
    *owned = NULL;
    if (tok->kind == ATTN_TOKENIZER_CHAR) {
        if (!(*owned = attn_tokenizer_vocab_string(tok)))
            return attn_fail(err, ATTN_ERR_NOMEM, "out of memory writing a checkpoint");
        kv[0] = (attn_st_kv){ATTN_CKPT_META_VOCABULARY, *owned};
        *n = 1;
        return ATTN_OK;
    }
    /* Metadata is JSON text: the files must be UTF-8 without NUL (GPT-2's are). */
    if (!attn_utf8_valid(tok->encoder_json, tok->encoder_len) ||
        memchr(tok->encoder_json, 0, tok->encoder_len) ||
        !attn_utf8_valid(tok->vocab_bpe, tok->vocab_bpe_len) ||
        memchr(tok->vocab_bpe, 0, tok->vocab_bpe_len))
        return attn_fail(err, ATTN_ERR_INVALID_ARG,
                         "the GPT-2 vocabulary files are not UTF-8 text: a checkpoint cannot "
                         "carry them");
    kv[0] = (attn_st_kv){ATTN_CKPT_META_TOKENIZER, "gpt2"};
    kv[1] = (attn_st_kv){ATTN_CKPT_META_GPT2_ENCODER, tok->encoder_json};
    kv[2] = (attn_st_kv){ATTN_CKPT_META_GPT2_MERGES, tok->vocab_bpe};
    *n = 3;
    return ATTN_OK;
}

/* The gpt2 tokenizer of the metadata. */
static attn_status read_gpt2(const attn_safetensors *st, const char *file, attn_tokenizer *tok,
                             attn_error *err) {
    const char *enc = attn_safetensors_meta(st, ATTN_CKPT_META_GPT2_ENCODER);
    const char *bpe = attn_safetensors_meta(st, ATTN_CKPT_META_GPT2_MERGES);
    if (!enc || !bpe)
        return attn_fail(err, ATTN_ERR_FORMAT,
                         "%s: tokenizer gpt2 but no %s/%s metadata (the vocabulary files)", file,
                         ATTN_CKPT_META_GPT2_ENCODER, ATTN_CKPT_META_GPT2_MERGES);
    attn_status s = attn_tokenizer_gpt2_from_memory(tok, enc, strlen(enc), bpe, strlen(bpe), err);
    if (s) {
        char msg[ATTN_ERROR_MSG_MAX];
        snprintf(msg, sizeof msg, "%s", err ? err->msg : "");
        return attn_fail(err, ATTN_ERR_FORMAT, "%s: bad gpt2 tokenizer metadata: %s", file, msg);
    }
    return ATTN_OK;
}

attn_status attn_ckpt_read_tokenizer(const attn_safetensors *st, const char *file,
                                     attn_tokenizer *tok, attn_error *err) {
    memset(tok, 0, sizeof *tok);
    const char *kind = attn_safetensors_meta(st, ATTN_CKPT_META_TOKENIZER);
    if (kind && attn_tokenizer_kind_parse(kind) == ATTN_TOKENIZER_GPT2)
        return read_gpt2(st, file, tok, err);
    if (kind && attn_tokenizer_kind_parse(kind) != ATTN_TOKENIZER_CHAR)
        return attn_fail(err, ATTN_ERR_FORMAT,
                         "%s: unknown tokenizer '%.40s' (attn knows char, gpt2)", file, kind);
    const char *vocab = attn_safetensors_meta(st, ATTN_CKPT_META_VOCABULARY);
    if (!vocab)
        return attn_fail(err, ATTN_ERR_FORMAT,
                         "%s is not an attn GPT checkpoint (no vocabulary metadata)", file);
    attn_status s = attn_tokenizer_from_vocab(tok, vocab, strlen(vocab), err);
    if (s) {
        char msg[ATTN_ERROR_MSG_MAX];
        snprintf(msg, sizeof msg, "%s", err ? err->msg : "");
        return attn_fail(err, ATTN_ERR_FORMAT, "%s: bad vocabulary metadata: %s", file, msg);
    }
    return ATTN_OK;
}
