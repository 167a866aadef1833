/* GPT-2's BPE tokenizer (attn/bpe.h) against npm tiktoken 1.0.22's "gpt2"
 * (tests/fixtures/gpt2_tokenizer/, scripts/gen_gpt2_tokenizer_fixtures.mjs):
 * Tiny Shakespeare, The Verdict, a stress text of every Unicode category,
 * 571 short cases, runs of one character up to 10,000,000, decodes of split
 * characters; then invalid and random bytes (round trip, no crash) and
 * vocabulary files that are truncated, mismatched or repeat a merge, or are
 * not strictly what they should be (text after encoder.json's object, NUL,
 * BOM, no "#version" line). */
#define _DEFAULT_SOURCE /* mkstemp */
#include <cjson/cJSON.h>
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "attn/bpe.h"
#include "attn/fileio.h"
#include "attn/rng.h"

#define FIX ATTN_SOURCE_DIR "/tests/fixtures/gpt2_tokenizer/"

static char *slurp(const char *path, size_t *n) {
    void *data = NULL;
    attn_error err;
    if (attn_file_read_all(path, (size_t)1 << 30, &data, n, &err) != ATTN_OK) return NULL;
    return data;
}

/* The vocabulary files: data/gpt2 (scripts/get-data.sh gpt2, which make test
 * runs) or the shared copy beside the checkout. */
static const char *data_path(const char *name, char *buf, size_t cap) {
    snprintf(buf, cap, "%s/data/%s", ATTN_SOURCE_DIR, name);
    FILE *f = fopen(buf, "rb");
    if (!f) {
        snprintf(buf, cap, "%s/../shared/data/%s", ATTN_SOURCE_DIR, name);
        f = fopen(buf, "rb");
    }
    if (!f) return NULL;
    fclose(f);
    return buf;
}

static attn_bpe *gpt2(void) {
    char e[4096], v[4096];
    if (!data_path("gpt2/encoder.json", e, sizeof e) || !data_path("gpt2/vocab.bpe", v, sizeof v))
        cr_skip_test("no GPT-2 vocabulary in data/gpt2 (scripts/get-data.sh gpt2)");
    attn_bpe *t = NULL;
    attn_error err;
    cr_assert_eq(attn_bpe_load(&t, e, v, &err), ATTN_OK, "%s", err.msg);
    return t;
}

static int32_t *encode(const attn_bpe *t, const char *s, size_t n, int special, size_t *k) {
    int32_t *ids = malloc((n + 1) * sizeof *ids);
    attn_error err;
    cr_assert_eq(attn_bpe_encode(t, s, n, special, ids, n + 1, k, &err), ATTN_OK, "%s", err.msg);
    return ids;
}

/* decode(ids) == the n bytes at s. */
static void assert_round_trip(const attn_bpe *t, const int32_t *ids, size_t k, const char *s,
                              size_t n) {
    char *out = malloc(n + 1);
    size_t len = 0;
    attn_error err;
    cr_assert_eq(attn_bpe_decode(t, ids, k, out, n + 1, &len, &err), ATTN_OK, "%s", err.msg);
    cr_assert(len == n && memcmp(out, s, n) == 0, "decode(encode(x)) != x (%zu bytes)", n);
    free(out);
}

static void assert_ids(const int32_t *got, size_t k, const cJSON *want, const char *what) {
    cr_assert_eq(k, (size_t)cJSON_GetArraySize(want), "%s: %zu ids, tiktoken %d", what, k,
                 cJSON_GetArraySize(want));
    size_t i = 0;
    for (const cJSON *w = want->child; w; w = w->next, i++)
        cr_assert_eq(got[i], w->valueint, "%s: id %zu is %d, tiktoken %d", what, i, got[i],
                     w->valueint);
}

static cJSON *json(const char *name) {
    size_t n;
    char *s = slurp(name, &n);
    cr_assert(s, "cannot read %s", name);
    cJSON *j = cJSON_ParseWithLength(s, n);
    free(s);
    cr_assert(j, "%s is not JSON", name);
    return j;
}

Test(bpe, corpora_equal_tiktoken) {
    attn_bpe *t = gpt2();
    cr_assert_eq(attn_bpe_n_vocab(t), 50257);
    cr_assert_eq(attn_bpe_eot(t), 50256);
    const char *names[2][2] = {{"tinyshakespeare.txt", "tinyshakespeare.u16.bin"},
                               {"the-verdict.txt", "the_verdict.u16.bin"}};
    for (int c = 0; c < 2; c++) {
        char p[4096];
        if (!data_path(names[c][0], p, sizeof p))
            cr_skip_test("no data/%s (scripts/get-data.sh)", names[c][0]);
        size_t n, nb;
        char *text = slurp(p, &n);
        char fp[4096];
        snprintf(fp, sizeof fp, FIX "%s", names[c][1]);
        unsigned char *want = (unsigned char *)slurp(fp, &nb);
        cr_assert(text && want);
        size_t k;
        int32_t *ids = encode(t, text, n, 1, &k);
        cr_assert_eq(k, nb / 2, "%s: %zu tokens, tiktoken %zu", names[c][0], k, nb / 2);
        for (size_t i = 0; i < k; i++)
            cr_assert_eq(ids[i], want[2 * i] | want[2 * i + 1] << 8, "%s: token %zu", names[c][0],
                         i);
        assert_round_trip(t, ids, k, text, n);
        free(ids);
        free(text);
        free(want);
    }
    attn_bpe_free(t);
}

Test(bpe, stress_text_equals_tiktoken_with_and_without_special) {
    attn_bpe *t = gpt2();
    size_t n;
    char *text = slurp(FIX "stress.txt", &n);
    cJSON *want = json(FIX "stress_expected.json");
    for (int special = 0; special < 2; special++) {
        size_t k;
        int32_t *ids = encode(t, text, n, special, &k);
        assert_ids(ids, k,
                   cJSON_GetObjectItem(want, special ? "ids_allowed_special" : "ids_ordinary"),
                   special ? "stress, <|endoftext|> allowed" : "stress, ordinary");
        assert_round_trip(t, ids, k, text, n);
        free(ids);
    }
    cJSON_Delete(want);
    free(text);
    attn_bpe_free(t);
}

static char *unhex(const char *h, size_t *n) {
    *n = strlen(h) / 2;
    char *s = malloc(*n + 1);
    for (size_t i = 0; i < *n; i++) {
        unsigned v;
        sscanf(h + 2 * i, "%2x", &v);
        s[i] = (char)v;
    }
    return s;
}

Test(bpe, short_cases_equal_tiktoken) {
    attn_bpe *t = gpt2();
    cJSON *cases = json(FIX "short_cases.json");
    int count = 0;
    for (const cJSON *c = cases->child; c; c = c->next, count++) {
        size_t n;
        char *s = unhex(cJSON_GetObjectItem(c, "utf8_hex")->valuestring, &n);
        for (int special = 0; special < 2; special++) {
            size_t k;
            int32_t *ids = encode(t, s, n, special, &k);
            char what[64];
            snprintf(what, sizeof what, "case %d (%s)", count, special ? "allowed" : "ordinary");
            assert_ids(ids, k, cJSON_GetObjectItem(c, special ? "ids_allowed_special" : "ids"),
                       what);
            assert_round_trip(t, ids, k, s, n);
            free(ids);
        }
        free(s);
    }
    cr_assert_geq(count, 500);
    cJSON_Delete(cases);
    attn_bpe_free(t);
}

/* Up to 10,000,000 characters in one regex piece (tiktoken aborts past about
 * 1,000,000; the 10 M rows are derived from the merge list). */
Test(bpe, long_runs_of_one_character, .timeout = 600) {
    attn_bpe *t = gpt2();
    cJSON *runs = json(FIX "long_runs.json");
    for (const cJSON *r = runs->child; r; r = r->next) {
        const char *ch = cJSON_GetObjectItem(r, "char")->valuestring;
        const size_t count = (size_t)cJSON_GetObjectItem(r, "count")->valuedouble;
        const size_t w = strlen(ch);
        char *s = malloc(count * w + 1);
        for (size_t i = 0; i < count; i++)
            memcpy(s + i * w, ch, w);
        size_t k;
        int32_t *ids = encode(t, s, count * w, 0, &k);
        size_t at = 0;
        for (const cJSON *run = cJSON_GetObjectItem(r, "rle")->child; run; run = run->next) {
            const int id = run->child->valueint;
            const size_t rep = (size_t)run->child->next->valuedouble;
            for (size_t i = 0; i < rep; i++, at++)
                cr_assert(at < k && ids[at] == id, "'%s' x %zu: token %zu is %d, want %d", ch,
                          count, at, at < k ? ids[at] : -1, id);
        }
        cr_assert_eq(at, k, "'%s' x %zu: %zu tokens, want %zu", ch, count, k, at);
        free(ids);
        free(s);
    }
    cJSON_Delete(runs);
    attn_bpe_free(t);
}

Test(bpe, decode_gives_bytes_and_split_characters_join) {
    attn_bpe *t = gpt2();
    cJSON *d = json(FIX "decode_cases.json");
    int b = 0;
    for (const cJSON *id = cJSON_GetObjectItem(d, "byte_token_ids")->child; id;
         id = id->next, b++) {
        size_t len;
        const char *bytes = attn_bpe_token(t, id->valueint, &len);
        cr_assert(bytes && len == 1 && (unsigned char)bytes[0] == b, "byte %d's token", b);
    }
    const char *groups[] = {"split_characters", "raw_sequences"};
    int decodes = 0;
    for (int g = 0; g < 2; g++)
        for (const cJSON *c = cJSON_GetObjectItem(d, groups[g])->child; c; c = c->next) {
            /* Every object in the case with "ids" and "bytes_hex" is one decode. */
            const cJSON *stack[8] = {c};
            int sp = 1;
            while (sp) {
                const cJSON *o = stack[--sp];
                const cJSON *ids = cJSON_GetObjectItem(o, "ids"), *hex = NULL;
                hex = cJSON_GetObjectItem(o, "bytes_hex");
                if (cJSON_IsArray(ids) && cJSON_IsString(hex)) {
                    const int k = cJSON_GetArraySize(ids);
                    int32_t *v = malloc(((size_t)k + 1) * sizeof *v);
                    int i = 0;
                    for (const cJSON *x = ids->child; x; x = x->next)
                        v[i++] = x->valueint;
                    size_t n, len;
                    char *want = unhex(hex->valuestring, &n);
                    char *out = malloc(n + 1);
                    attn_error err;
                    cr_assert_eq(attn_bpe_decode(t, v, (size_t)k, out, n + 1, &len, &err), ATTN_OK,
                                 "%s", err.msg);
                    cr_assert(len == n && memcmp(out, want, n) == 0, "%s: decode differs",
                              groups[g]);
                    decodes++;
                    free(v);
                    free(want);
                    free(out);
                }
                for (const cJSON *x = o->child; x && sp < 8; x = x->next)
                    if (cJSON_IsObject(x) || cJSON_IsArray(x)) stack[sp++] = x;
            }
        }
    cr_assert_geq(decodes, 50, "only %d decodes found in decode_cases.json", decodes);
    /* Out of range and too small a buffer fail, and say how much is needed. */
    int32_t bad = 50257, two[2] = {64, 64};
    char out[4];
    size_t len;
    attn_error err;
    cr_assert_eq(attn_bpe_decode(t, &bad, 1, out, 4, &len, &err), ATTN_ERR_INVALID_ARG);
    cr_assert_eq(attn_bpe_decode(t, two, 2, out, 1, &len, &err), ATTN_ERR_INVALID_ARG);
    cr_assert_eq(len, 2);
    cJSON_Delete(d);
    attn_bpe_free(t);
}

/* Bytes, not characters: invalid UTF-8 and random bytes never fail, every
 * id is in range, and decode gives the bytes back. */
Test(bpe, invalid_and_random_bytes_round_trip) {
    attn_bpe *t = gpt2();
    size_t n, k;
    char *s = slurp(FIX "stress_invalid.bin", &n);
    cr_assert(s);
    for (int special = 0; special < 2; special++) {
        int32_t *ids = encode(t, s, n, special, &k);
        for (size_t i = 0; i < k; i++)
            cr_assert(ids[i] >= 0 && ids[i] < 50257);
        assert_round_trip(t, ids, k, s, n);
        free(ids);
    }
    free(s);
    attn_rng rng;
    attn_rng_seed(&rng, 42);
    char buf[300];
    for (int it = 0; it < 3000; it++) {
        const size_t m = attn_rng_u32(&rng) % 300;
        /* Bytes from a small alphabet of risky ones half the time. */
        static const unsigned char risky[] = {' ',  '\n', 'a',  '\'', 's',  0xC3, 0xA9, 0xE2,
                                              0x80, 0x99, 0xF0, 0x9F, 0xFF, '<',  '|',  '1'};
        const int from_risky = it % 2;
        for (size_t i = 0; i < m; i++) {
            const unsigned r = attn_rng_u32(&rng) & 255;
            buf[i] = (char)(from_risky ? risky[r % sizeof risky] : r);
        }
        int32_t *ids = encode(t, buf, m, it % 3 == 0, &k);
        cr_assert_leq(k, m);
        assert_round_trip(t, ids, k, buf, m);
        free(ids);
    }
    attn_bpe_free(t);
}

/* A vocabulary made from GPT-2's by edit(), loaded from memory: refused with
 * a message containing want. */
static void refuse(const char *what, const char *enc, size_t ne, const char *voc, size_t nv,
                   const char *want) {
    attn_bpe *t = NULL;
    attn_error err;
    cr_assert_neq(attn_bpe_from_memory(&t, enc, ne, voc, nv, &err), ATTN_OK, "%s was accepted",
                  what);
    cr_assert_null(t);
    cr_assert(strstr(err.msg, want), "%s: message '%s' lacks '%s'", what, err.msg, want);
}

Test(bpe, bad_vocabulary_files_are_refused) {
    char e[4096], v[4096];
    if (!data_path("gpt2/encoder.json", e, sizeof e) || !data_path("gpt2/vocab.bpe", v, sizeof v))
        cr_skip_test("no GPT-2 vocabulary in data/gpt2 (scripts/get-data.sh gpt2)");
    size_t ne, nv;
    char *enc = slurp(e, &ne), *voc = slurp(v, &nv);
    /* Truncated vocab.bpe: the last 1000 merges gone. */
    size_t cut = nv;
    for (int lines = 0; lines < 1001 && cut > 0;)
        if (voc[--cut] == '\n') lines++;
    refuse("a truncated vocab.bpe", enc, ne, voc, cut + 1, "truncated or mismatched");
    /* A merge given twice: line 3 again after line 3. */
    char *p = voc;
    for (int l = 0; l < 3; l++)
        p = strchr(p, '\n') + 1;
    const char *q = strchr(p, '\n') + 1;
    size_t nd = nv + (size_t)(q - p);
    char *dup = malloc(nd);
    memcpy(dup, voc, (size_t)(q - voc));
    memcpy(dup + (q - voc), p, (size_t)(q - p));
    memcpy(dup + (q - voc) + (q - p), q, nv - (size_t)(q - voc));
    refuse("a merge given twice", enc, ne, dup, nd, "given twice");
    /* Another vocabulary's merge: a line naming no token. */
    char *odd = malloc(nv + 32);
    memcpy(odd, voc, (size_t)(p - voc));
    const char junk[] = "qzxq vvkk\n";
    memcpy(odd + (p - voc), junk, sizeof junk - 1);
    memcpy(odd + (p - voc) + sizeof junk - 1, p, nv - (size_t)(p - voc));
    refuse("a mismatched vocab.bpe", enc, ne, odd, nv + sizeof junk - 1, "mismatched");
    /* Not JSON; and an encoder with a token missing. */
    refuse("a cut encoder.json", enc, ne / 2, voc, nv, "encoder.json: not valid JSON at line 1");
    refuse("an encoder.json that is an array", "[1]", 3, voc, nv, "not a JSON object");
    cJSON *j = cJSON_ParseWithLength(enc, ne);
    cJSON_DeleteItemFromObject(j, "\xc4\xa0the"); /* " the" */
    char *less = cJSON_PrintUnformatted(j);
    refuse("an encoder.json with a token missing", less, strlen(less), voc, nv, "encoder.json");
    free(less);
    cJSON_Delete(j);
    free(odd);
    free(dup);
    free(enc);
    free(voc);
}

/* enc with extra bytes put at byte at (a copy, malloc'd; *n its size). */
static char *spliced(const char *enc, size_t ne, size_t at, const char *extra, size_t k,
                     size_t *n) {
    char *b = malloc(ne + k);
    memcpy(b, enc, at);
    memcpy(b + at, extra, k);
    memcpy(b + at + k, enc + at, ne - at);
    *n = ne + k;
    return b;
}

/* The two files are read strictly: encoder.json is one JSON object and
 * nothing else (no text or second object after it, no NUL byte, no byte
 * order mark), vocab.bpe starts with its "#version" line; each refusal
 * names the file and where. CRLF line ends are read as LF (tiktoken and
 * Hugging Face split on white space): the same tokenizer. */
Test(bpe, vocabulary_files_are_read_strictly) {
    char e[4096], v[4096];
    if (!data_path("gpt2/encoder.json", e, sizeof e) || !data_path("gpt2/vocab.bpe", v, sizeof v))
        cr_skip_test("no GPT-2 vocabulary in data/gpt2 (scripts/get-data.sh gpt2)");
    size_t ne, nv, n;
    char *enc = slurp(e, &ne), *voc = slurp(v, &nv), *b;
    while (ne && (enc[ne - 1] == '\n' || enc[ne - 1] == ' ')) /* the object's end at ne */
        ne--;
    b = spliced(enc, ne, ne, "\nx", 2, &n);
    refuse("encoder.json with text after it", b, n, voc, nv,
           "encoder.json: text after the JSON at line 2, column 1");
    free(b);
    char *twice = malloc(2 * ne);
    memcpy(twice, enc, ne);
    memcpy(twice + ne, enc, ne);
    refuse("encoder.json given twice", twice, 2 * ne, voc, nv, "encoder.json: text after the JSON");
    free(twice);
    const size_t comma = (size_t)(strchr(enc, ',') - enc) + 1;
    b = spliced(enc, ne, comma, "\0", 1, &n);
    refuse("encoder.json with a NUL between tokens", b, n, voc, nv,
           "encoder.json: a NUL byte at byte");
    free(b);
    b = spliced(enc, ne, 0, "\xEF\xBB\xBF", 3, &n);
    refuse("encoder.json with a BOM", b, n, voc, nv, "encoder.json: a byte order mark");
    free(b);
    const char *line2 = strchr(voc, '\n') + 1;
    refuse("vocab.bpe without its #version line", enc, ne, line2, nv - (size_t)(line2 - voc),
           "vocab.bpe line 1 is not its \"#version\" line");
    b = spliced(voc, nv, 0, "\xEF\xBB\xBF", 3, &n);
    refuse("vocab.bpe with a BOM", enc, ne, b, n, "vocab.bpe line 1: a byte order mark");
    free(b);
    /* CRLF: the same merges, the same ids. */
    char *crlf = malloc(2 * nv);
    size_t nc = 0;
    for (size_t i = 0; i < nv; i++) {
        if (voc[i] == '\n') crlf[nc++] = '\r';
        crlf[nc++] = voc[i];
    }
    attn_bpe *t = NULL, *ref = gpt2();
    attn_error err;
    cr_assert_eq(attn_bpe_from_memory(&t, enc, ne, crlf, nc, &err), ATTN_OK, "%s", err.msg);
    const char text[] = "Hello, do you like tea? In the sunlit terraces of the palace.";
    size_t k1, k2;
    int32_t *a = encode(t, text, sizeof text - 1, 0, &k1);
    int32_t *c = encode(ref, text, sizeof text - 1, 0, &k2);
    cr_expect(k1 == k2 && !memcmp(a, c, k1 * sizeof *a), "CRLF vocab.bpe encodes differently");
    free(a);
    free(c);
    attn_bpe_free(t);
    attn_bpe_free(ref);
    free(crlf);
    free(enc);
    free(voc);
}

/* Loaded from files, a refusal names the file by its path. */
Test(bpe, refusals_name_the_file_by_its_path) {
    char e[4096], v[4096];
    if (!data_path("gpt2/encoder.json", e, sizeof e) || !data_path("gpt2/vocab.bpe", v, sizeof v))
        cr_skip_test("no GPT-2 vocabulary in data/gpt2 (scripts/get-data.sh gpt2)");
    size_t nv;
    char *voc = slurp(v, &nv);
    char path[] = "/tmp/attn-vocab-XXXXXX";
    const int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    const char *line2 = strchr(voc, '\n') + 1;
    const size_t k = nv - (size_t)(line2 - voc);
    cr_assert_eq(write(fd, line2, k), (ssize_t)k);
    close(fd);
    attn_bpe *t = NULL;
    attn_error err;
    cr_expect_eq(attn_bpe_load(&t, e, path, &err), ATTN_ERR_FORMAT);
    cr_expect(strstr(err.msg, path) && strstr(err.msg, "line 1 is not its \"#version\" line"), "%s",
              err.msg);
    unlink(path);
    free(voc);
}
