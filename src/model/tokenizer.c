/* Character tokenizer over UTF-8 code points (see attn/tokenizer.h). */
#include "attn/tokenizer.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn/bpe.h"
#include "tokenizer_gpt2.h"

/* Decode one code point at s[*i] (strict UTF-8: no overlongs, surrogates,
 * values above U+10FFFF, or NUL); advances *i. Returns 0 or -1. */
static int utf8_next(const unsigned char *s, size_t n, size_t *i, uint32_t *out) {
    size_t p = *i;
    unsigned c = s[p];
    uint32_t cp;
    int len;
    if (c == 0) return -1;
    if (c < 0x80) {
        *out = c;
        *i = p + 1;
        return 0;
    }
    if (c >= 0xC2 && c <= 0xDF) {
        len = 2;
        cp = c & 0x1F;
    } else if (c >= 0xE0 && c <= 0xEF) {
        len = 3;
        cp = c & 0x0F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        len = 4;
        cp = c & 0x07;
    } else {
        return -1;
    }
    if (p + (size_t)len > n) return -1;
    for (int k = 1; k < len; k++) {
        unsigned b = s[p + (size_t)k];
        if ((b & 0xC0) != 0x80) return -1;
        cp = (cp << 6) | (b & 0x3F);
    }
    if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10FFFF)) ||
        (cp >= 0xD800 && cp <= 0xDFFF))
        return -1;
    *out = cp;
    *i = p + (size_t)len;
    return 0;
}

int attn_utf8_put(uint32_t c, char *out) {
    unsigned char *o = (unsigned char *)out;
    if (c < 0x80) {
        o[0] = (unsigned char)c;
        return 1;
    }
    if (c < 0x800) {
        o[0] = (unsigned char)(0xC0 | (c >> 6));
        o[1] = (unsigned char)(0x80 | (c & 0x3F));
        return 2;
    }
    if (c < 0x10000) {
        o[0] = (unsigned char)(0xE0 | (c >> 12));
        o[1] = (unsigned char)(0x80 | ((c >> 6) & 0x3F));
        o[2] = (unsigned char)(0x80 | (c & 0x3F));
        return 3;
    }
    o[0] = (unsigned char)(0xF0 | (c >> 18));
    o[1] = (unsigned char)(0x80 | ((c >> 12) & 0x3F));
    o[2] = (unsigned char)(0x80 | ((c >> 6) & 0x3F));
    o[3] = (unsigned char)(0x80 | (c & 0x3F));
    return 4;
}

attn_status attn_utf8_count(const char *text, size_t n, size_t *count, attn_error *err) {
    const unsigned char *s = (const unsigned char *)text;
    size_t i = 0, k = 0;
    uint32_t c;
    while (i < n) {
        if (utf8_next(s, n, &i, &c) != 0)
            return attn_fail(err, ATTN_ERR_FORMAT,
                             "text is not valid UTF-8 (or holds a NUL byte) at byte %zu", i);
        k++;
    }
    *count = k;
    return ATTN_OK;
}

static int cmp_u32(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

static void build_ascii(attn_tokenizer *tok) {
    for (int i = 0; i < 128; i++)
        tok->ascii_id[i] = -1;
    for (int i = 0; i < tok->vocab_size; i++)
        if (tok->chars[i] < 128) tok->ascii_id[tok->chars[i]] = i;
}

attn_status attn_tokenizer_train(attn_tokenizer *tok, const char *text, size_t n, attn_error *err) {
    memset(tok, 0, sizeof *tok);
    if (n == 0)
        return attn_fail(err, ATTN_ERR_INVALID_ARG, "cannot build a vocabulary from empty text");
    const unsigned char *s = (const unsigned char *)text;
    /* ASCII via a presence table; other characters collected then deduped. */
    int seen[128] = {0};
    size_t cap = 0, m = 0, i = 0;
    uint32_t *other = NULL;
    while (i < n) {
        uint32_t c;
        size_t at = i;
        if (utf8_next(s, n, &i, &c) != 0) {
            free(other);
            return attn_fail(err, ATTN_ERR_FORMAT,
                             "text is not valid UTF-8 (or holds a NUL byte) at byte %zu", at);
        }
        if (c < 128) {
            seen[c] = 1;
            continue;
        }
        if (m == cap) {
            cap = cap ? cap * 2 : 64;
            uint32_t *t = realloc(other, cap * sizeof *t);
            if (!t) {
                free(other);
                return attn_fail(err, ATTN_ERR_NOMEM, "out of memory building the vocabulary");
            }
            other = t;
        }
        other[m++] = c;
    }
    if (m) qsort(other, m, sizeof *other, cmp_u32);
    size_t uniq = 0;
    for (size_t k = 0; k < m; k++)
        if (k == 0 || other[k] != other[k - 1]) other[uniq++] = other[k];
    int nascii = 0;
    for (int c = 0; c < 128; c++)
        nascii += seen[c];
    tok->vocab_size = nascii + (int)uniq;
    tok->chars = malloc((size_t)tok->vocab_size * sizeof *tok->chars);
    if (!tok->chars) {
        free(other);
        tok->vocab_size = 0;
        return attn_fail(err, ATTN_ERR_NOMEM, "out of memory building the vocabulary");
    }
    int v = 0;
    for (uint32_t c = 0; c < 128; c++)
        if (seen[c]) tok->chars[v++] = c;
    for (size_t k = 0; k < uniq; k++)
        tok->chars[v++] = other[k];
    free(other);
    build_ascii(tok);
    return ATTN_OK;
}

attn_status attn_tokenizer_from_vocab(attn_tokenizer *tok, const char *vocab, size_t n,
                                      attn_error *err) {
    memset(tok, 0, sizeof *tok);
    size_t count;
    attn_status st = attn_utf8_count(vocab, n, &count, err);
    if (st) return st;
    if (count == 0) return attn_fail(err, ATTN_ERR_INVALID_ARG, "empty vocabulary");
    tok->chars = malloc(count * sizeof *tok->chars);
    if (!tok->chars) return attn_fail(err, ATTN_ERR_NOMEM, "out of memory for the vocabulary");
    size_t i = 0, k = 0;
    while (i < n)
        utf8_next((const unsigned char *)vocab, n, &i, &tok->chars[k++]);
    tok->vocab_size = (int)count;
    /* Ids are looked up by binary search, so the order must be sorted. */
    for (size_t j = 1; j < count; j++)
        if (tok->chars[j] <= tok->chars[j - 1]) {
            attn_tokenizer_free(tok);
            return attn_fail(err, ATTN_ERR_FORMAT,
                             "vocabulary characters must be distinct and sorted by code point "
                             "(character %zu breaks the order)",
                             j);
        }
    build_ascii(tok);
    return ATTN_OK;
}

void attn_tokenizer_free(attn_tokenizer *tok) {
    free(tok->chars);
    attn_bpe_free(tok->bpe);
    free(tok->encoder_json);
    free(tok->vocab_bpe);
    memset(tok, 0, sizeof *tok);
}

char *attn_tokenizer_vocab_string(const attn_tokenizer *tok) {
    if (tok->kind != ATTN_TOKENIZER_CHAR) return NULL;
    char *s = malloc((size_t)tok->vocab_size * 4 + 1);
    if (!s) return NULL;
    size_t o = 0;
    for (int i = 0; i < tok->vocab_size; i++)
        o += (size_t)attn_utf8_put(tok->chars[i], s + o);
    s[o] = '\0';
    return s;
}

int32_t attn_tokenizer_id(const attn_tokenizer *tok, uint32_t c) {
    if (tok->kind != ATTN_TOKENIZER_CHAR) return -1;
    if (c < 128) return tok->ascii_id[c];
    int lo = 0, hi = tok->vocab_size - 1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2;
        if (tok->chars[mid] == c) return mid;
        if (tok->chars[mid] < c)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return -1;
}

/* Printable form of a character for error messages. */
static void describe_char(uint32_t c, char *buf, size_t size) {
    if (c == '\n')
        snprintf(buf, size, "'\\n'");
    else if (c == '\t')
        snprintf(buf, size, "'\\t'");
    else if (c < 0x20 || c == 0x7F)
        snprintf(buf, size, "U+%04X", (unsigned)c);
    else {
        char u[5];
        int k = attn_utf8_put(c, u);
        u[k] = '\0';
        snprintf(buf, size, "'%s' (U+%04X)", u, (unsigned)c);
    }
}

attn_status attn_tokenizer_encode(const attn_tokenizer *tok, const char *text, size_t n,
                                  int32_t *ids, size_t *n_ids, attn_error *err) {
    if (tok->kind == ATTN_TOKENIZER_GPT2) /* the caller sized ids by attn_tokenizer_max_ids */
        return attn_bpe_encode(tok->bpe, text, n, 0, ids, n + 1, n_ids, err);
    const unsigned char *s = (const unsigned char *)text;
    size_t i = 0, k = 0, line = 1, col = 1;
    while (i < n) {
        uint32_t c;
        size_t at = i;
        if (utf8_next(s, n, &i, &c) != 0)
            return attn_fail(err, ATTN_ERR_FORMAT,
                             "text is not valid UTF-8 (or holds a NUL byte) at byte %zu", at);
        int32_t id = attn_tokenizer_id(tok, c);
        if (id < 0) {
            char d[32];
            describe_char(c, d, sizeof d);
            return attn_fail(err, ATTN_ERR_INVALID_ARG,
                             "character %s at position %zu (line %zu, column %zu, byte %zu) is "
                             "not in the vocabulary",
                             d, k, line, col, at);
        }
        ids[k++] = id;
        col = c == '\n' ? 1 : col + 1;
        line += c == '\n';
    }
    *n_ids = k;
    return ATTN_OK;
}

attn_status attn_tokenizer_decoded_len(const attn_tokenizer *tok, const int32_t *ids, size_t n,
                                       size_t *len, attn_error *err) {
    if (tok->kind == ATTN_TOKENIZER_GPT2)
        return attn_tokenizer_gpt2_decode(tok, ids, n, NULL, len, err);
    size_t total = 0;
    char tmp[4];
    for (size_t i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= tok->vocab_size)
            return attn_fail(err, ATTN_ERR_INVALID_ARG,
                             "token id %d at position %zu is outside the vocabulary (size %d)",
                             (int)ids[i], i, tok->vocab_size);
        total += (size_t)attn_utf8_put(tok->chars[ids[i]], tmp);
    }
    *len = total;
    return ATTN_OK;
}

attn_status attn_tokenizer_decode(const attn_tokenizer *tok, const int32_t *ids, size_t n,
                                  char *out, attn_error *err) {
    if (tok->kind == ATTN_TOKENIZER_GPT2) {
        size_t len;
        return attn_tokenizer_gpt2_decode(tok, ids, n, out, &len, err);
    }
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= tok->vocab_size)
            return attn_fail(err, ATTN_ERR_INVALID_ARG,
                             "token id %d at position %zu is outside the vocabulary (size %d)",
                             (int)ids[i], i, tok->vocab_size);
        o += (size_t)attn_utf8_put(tok->chars[ids[i]], out + o);
    }
    out[o] = '\0';
    return ATTN_OK;
}

/* ---- either kind ------------------------------------------------------ */

attn_status attn_tokenizer_copy(attn_tokenizer *dst, const attn_tokenizer *src, attn_error *err) {
    if (src->kind == ATTN_TOKENIZER_GPT2)
        return attn_tokenizer_gpt2_from_memory(dst, src->encoder_json, src->encoder_len,
                                               src->vocab_bpe, src->vocab_bpe_len, err);
    memset(dst, 0, sizeof *dst);
    if (src->vocab_size <= 0) return ATTN_OK;
    *dst = *src;
    dst->chars = malloc((size_t)src->vocab_size * sizeof *dst->chars);
    if (!dst->chars) {
        memset(dst, 0, sizeof *dst);
        return attn_fail(err, ATTN_ERR_NOMEM, "out of memory for the vocabulary");
    }
    memcpy(dst->chars, src->chars, (size_t)src->vocab_size * sizeof *dst->chars);
    return ATTN_OK;
}

int attn_tokenizer_same(const attn_tokenizer *a, const attn_tokenizer *b) {
    if (a->kind != b->kind || a->vocab_size != b->vocab_size) return 0;
    if (a->kind == ATTN_TOKENIZER_CHAR)
        return a->vocab_size == 0 ||
               memcmp(a->chars, b->chars, (size_t)a->vocab_size * sizeof *a->chars) == 0;
    return a->encoder_len == b->encoder_len && a->vocab_bpe_len == b->vocab_bpe_len &&
           memcmp(a->encoder_json, b->encoder_json, a->encoder_len) == 0 &&
           memcmp(a->vocab_bpe, b->vocab_bpe, a->vocab_bpe_len) == 0;
}

attn_status attn_tokenizer_max_ids(const attn_tokenizer *tok, const char *text, size_t n,
                                   size_t *cap, attn_error *err) {
    if (tok->kind == ATTN_TOKENIZER_CHAR) return attn_utf8_count(text, n, cap, err);
    if (n >= SIZE_MAX / sizeof(int32_t) - 1)
        return attn_fail(err, ATTN_ERR_INVALID_ARG, "the text is too long to tokenize");
    *cap = n + 1;
    return ATTN_OK;
}

attn_status attn_tokenizer_encode_ex(const attn_tokenizer *tok, const char *text, size_t n,
                                     int allow_special, int32_t *ids, size_t cap, size_t *n_ids,
                                     attn_error *err) {
    if (tok->kind == ATTN_TOKENIZER_GPT2)
        return attn_bpe_encode(tok->bpe, text, n, allow_special, ids, cap, n_ids, err);
    size_t need = 0;
    attn_status s = attn_utf8_count(text, n, &need, err);
    if (s) return s;
    if (need > cap)
        return attn_fail(err, ATTN_ERR_INVALID_ARG, "encoding needs %zu ids, the buffer has %zu",
                         need, cap);
    return attn_tokenizer_encode(tok, text, n, ids, n_ids, err);
}

const char *attn_tokenizer_token(const attn_tokenizer *tok, int32_t id, char tmp[4], size_t *len) {
    if (id < 0 || id >= tok->vocab_size) return NULL;
    if (tok->kind == ATTN_TOKENIZER_GPT2) return attn_bpe_token(tok->bpe, id, len);
    *len = (size_t)attn_utf8_put(tok->chars[id], tmp);
    return tmp;
}
