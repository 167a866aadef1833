/* The gpt2 kind of attn_tokenizer (attn/tokenizer.h): GPT-2's BPE
 * (attn/bpe.h) plus the two files' bytes, which a checkpoint carries.
 * tokenizer.c dispatches here; nothing here calls back into it. */
#define _POSIX_C_SOURCE 200809L /* stat */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "attn/bpe.h"
#include "attn/fileio.h"
#include "attn/tokenizer.h"
#include "tokenizer_gpt2.h"

#define GPT2_FILE_MAX ((size_t)64 << 20) /* the files are 1 MB and 0.5 MB */

/* 1 when dir holds both vocabulary files. */
static int has_vocab(const char *dir) {
    char p[4096];
    struct stat sb;
    for (int i = 0; i < 2; i++) {
        const char *name = i ? "vocab.bpe" : "encoder.json";
        if (snprintf(p, sizeof p, "%s/%s", dir, name) >= (int)sizeof p) return 0;
        if (stat(p, &sb) != 0 || !S_ISREG(sb.st_mode)) return 0;
    }
    return 1;
}

/* The folder of the file this code was loaded from (libattn.so, or the
 * program linked with libattn.a): where an install put the files too.
 * /proc/self/maps names it by its absolute path (dladdr gives the main
 * program as argv[0] spelled it, and a library as it was opened). */
static int own_dir(char *out, size_t cap) {
    static const char anchor = 0; /* an address inside this file's object */
    const uintptr_t at = (uintptr_t)&anchor;
    FILE *f = fopen("/proc/self/maps", "re");
    if (!f) return 0;
    char line[4096 + 128];
    int ok = 0;
    while (!ok && fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        int path_at = 0;
        if (sscanf(line, "%lx-%lx %*s %*s %*s %*s %n", &lo, &hi, &path_at) < 2 || !path_at)
            continue;
        if (at < lo || at >= hi || line[path_at] != '/') continue;
        line[strcspn(line, "\n")] = '\0';
        char *slash = strrchr(line + path_at, '/');
        const size_t n = (size_t)(slash - (line + path_at));
        if (n < cap) {
            memcpy(out, line + path_at, n);
            out[n] = '\0';
            ok = 1;
        }
    }
    fclose(f);
    return ok;
}

/* Put dir into out (cap bytes) when it holds the files: 1, else append it
 * to the list of places looked at. */
static int try_dir(const char *dir, char *out, size_t cap, char *looked, size_t looked_cap) {
    if (has_vocab(dir) && strlen(dir) < cap) {
        snprintf(out, cap, "%s", dir);
        return 1;
    }
    const size_t n = strlen(looked);
    if (n + 4 < looked_cap) snprintf(looked + n, looked_cap - n, "%s%s", n ? ", " : "", dir);
    return 0;
}

attn_status attn_tokenizer_gpt2_find(const char *dir, char *out, size_t cap, attn_error *err) {
    char looked[1024] = "", lib[4096], cand[4096 + 32];
    const char *env = getenv(ATTN_GPT2_DIR_ENV);
    const char *why = "looked in";
    if (dir || (env && *env)) { /* the user's choice, and only it */
        const char *d = dir ? dir : env;
        if (try_dir(d, out, cap, looked, sizeof looked)) return ATTN_OK;
        why = dir ? "given" : "$" ATTN_GPT2_DIR_ENV;
    } else {
        if (own_dir(lib, sizeof lib)) {
            static const char *const rel[] = {"../share/attn/gpt2", "gpt2", "../data/gpt2"};
            for (size_t i = 0; i < sizeof rel / sizeof rel[0]; i++) {
                snprintf(cand, sizeof cand, "%s/%s", lib, rel[i]);
                if (try_dir(cand, out, cap, looked, sizeof looked)) return ATTN_OK;
            }
        }
        if (try_dir("data/gpt2", out, cap, looked, sizeof looked)) return ATTN_OK;
    }
    return attn_fail(err, ATTN_ERR_NOT_FOUND,
                     "GPT-2's vocabulary (encoder.json and vocab.bpe) not found (%s: %s); "
                     "`make install` and `pip install .` install it, scripts/get-data.sh gpt2 "
                     "fetches it into data/gpt2, $" ATTN_GPT2_DIR_ENV " names a folder",
                     why, looked);
}

const char *attn_tokenizer_kind_name(attn_tokenizer_kind kind) {
    return kind == ATTN_TOKENIZER_GPT2 ? "gpt2" : "char";
}

int attn_tokenizer_kind_parse(const char *name) {
    if (name && strcmp(name, "char") == 0) return ATTN_TOKENIZER_CHAR;
    if (name && strcmp(name, "gpt2") == 0) return ATTN_TOKENIZER_GPT2;
    return -1;
}

static char *dup_bytes(const char *s, size_t n) {
    char *d = malloc(n + 1);
    if (d) {
        memcpy(d, s, n);
        d[n] = '\0';
    }
    return d;
}

attn_status attn_tokenizer_gpt2_from_memory(attn_tokenizer *tok, const char *encoder_json,
                                            size_t encoder_len, const char *vocab_bpe,
                                            size_t vocab_bpe_len, attn_error *err) {
    memset(tok, 0, sizeof *tok);
    tok->kind = ATTN_TOKENIZER_GPT2;
    attn_status s =
        attn_bpe_from_memory(&tok->bpe, encoder_json, encoder_len, vocab_bpe, vocab_bpe_len, err);
    if (s) {
        memset(tok, 0, sizeof *tok);
        return s;
    }
    tok->encoder_json = dup_bytes(encoder_json, encoder_len);
    tok->vocab_bpe = dup_bytes(vocab_bpe, vocab_bpe_len);
    tok->encoder_len = encoder_len;
    tok->vocab_bpe_len = vocab_bpe_len;
    tok->vocab_size = attn_bpe_n_vocab(tok->bpe);
    if (!tok->encoder_json || !tok->vocab_bpe) {
        attn_bpe_free(tok->bpe);
        free(tok->encoder_json);
        free(tok->vocab_bpe);
        memset(tok, 0, sizeof *tok);
        return attn_fail(err, ATTN_ERR_NOMEM, "out of memory for the GPT-2 vocabulary");
    }
    return ATTN_OK;
}

/* Read dir/name. */
static attn_status read_vocab_file(const char *dir, const char *name, void **data, size_t *n,
                                   attn_error *err) {
    char path[4096];
    if (snprintf(path, sizeof path, "%s/%s", dir, name) >= (int)sizeof path)
        return attn_fail(err, ATTN_ERR_INVALID_ARG, "the GPT-2 vocabulary path is too long");
    return attn_file_read_all(path, GPT2_FILE_MAX, data, n, err);
}

attn_status attn_tokenizer_gpt2(attn_tokenizer *tok, const char *dir, attn_error *err) {
    memset(tok, 0, sizeof *tok);
    char found[4096];
    attn_status s = attn_tokenizer_gpt2_find(dir, found, sizeof found, err);
    if (s) return s;
    dir = found;
    void *enc = NULL, *voc = NULL;
    size_t ne = 0, nv = 0;
    s = read_vocab_file(dir, "encoder.json", &enc, &ne, err);
    if (!s) s = read_vocab_file(dir, "vocab.bpe", &voc, &nv, err);
    if (!s) s = attn_tokenizer_gpt2_from_memory(tok, enc, ne, voc, nv, err);
    if (s && s != ATTN_ERR_NOT_FOUND && s != ATTN_ERR_NOMEM) {
        char msg[ATTN_ERROR_MSG_MAX];
        snprintf(msg, sizeof msg, "%s", err ? err->msg : "");
        s = attn_fail(err, s, "the GPT-2 vocabulary in %s: %s", dir, msg);
    }
    free(enc);
    free(voc);
    return s;
}

/* The gpt2 side of attn_tokenizer_decoded_len / _decode (tokenizer.c). */
attn_status attn_tokenizer_gpt2_decode(const attn_tokenizer *tok, const int32_t *ids, size_t n,
                                       char *out, size_t *len, attn_error *err) {
    size_t need = 0;
    for (size_t i = 0; i < n; i++) {
        size_t k;
        if (!attn_bpe_token(tok->bpe, ids[i], &k))
            return attn_fail(err, ATTN_ERR_INVALID_ARG,
                             "token id %d at position %zu is outside the vocabulary (size %d)",
                             (int)ids[i], i, tok->vocab_size);
        need += k;
    }
    *len = need;
    if (!out) return ATTN_OK;
    attn_status s = attn_bpe_decode(tok->bpe, ids, n, out, need, len, err);
    if (!s) out[need] = '\0';
    return s;
}
