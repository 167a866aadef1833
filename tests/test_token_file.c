/* Cached uint16 token files (attn/token_file.h): build, reuse without
 * encoding, rebuild on a changed text or encoder or a corrupt cache file,
 * chunked encoding == whole encoding (byte, char and GPT-2 tokenizers), the
 * book's 90/10 character split, and the dataset view that reads the file
 * (equal to the int32 view; a file changed under it is an error). */
#define _DEFAULT_SOURCE /* mkdtemp, setenv, symlink */
#include <criterion/criterion.h>
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "attn/bpe.h"
#include "attn/dataset.h"
#include "attn/fileio.h"
#include "attn/parse.h"
#include "attn/token_file.h"
#include "attn/tokenizer.h"

/* ------------------------------------------------------------ helpers */

/* A byte tokenizer (id = byte) that counts its calls and records where
 * each chunk it was given ends. */
typedef struct byte_ctx {
    size_t calls;
    size_t cuts[4096], n_cuts, at;
} byte_ctx;

static attn_status byte_encode(void *ctx, const char *text, size_t n, int32_t *ids, size_t cap,
                               size_t *n_ids, attn_error *err) {
    byte_ctx *c = ctx;
    c->calls++;
    if (n > cap) return attn_fail(err, ATTN_ERR_INVALID_ARG, "room %zu for %zu bytes", cap, n);
    for (size_t i = 0; i < n; i++)
        ids[i] = (unsigned char)text[i];
    c->at += n;
    if (c->n_cuts < 4096) c->cuts[c->n_cuts++] = c->at;
    *n_ids = n;
    return ATTN_OK;
}

static attn_token_encoder byte_encoder(byte_ctx *c, const char *identity) {
    memset(c, 0, sizeof *c);
    return (attn_token_encoder){.identity = identity,
                                .identity_len = strlen(identity),
                                .vocab_size = 256,
                                .encode = byte_encode,
                                .ctx = c};
}

static char *temp_dir(void) {
    char tmpl[] = "/tmp/attn-tokfile-XXXXXX";
    cr_assert_not_null(mkdtemp(tmpl));
    return strdup(tmpl);
}

static void write_file(const char *path, const void *data, size_t n) {
    attn_error err;
    cr_assert_eq(attn_file_write_atomic(path, data, n, &err), ATTN_OK, "%s", err.msg);
}

static char *read_file(const char *path, size_t *n) {
    void *data = NULL;
    attn_error err;
    cr_assert_eq(attn_file_read_all(path, 0, &data, n, &err), ATTN_OK, "%s", err.msg);
    return data;
}

/* rm -r of a folder of files and folders of files. */
static void remove_tree(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    char p[4096];
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        if (unlink(p) != 0) remove_tree(p);
    }
    closedir(d);
    rmdir(dir);
}

static size_t count_entries(const char *dir) {
    DIR *d = opendir(dir);
    size_t n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)))
        n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
    if (d) closedir(d);
    return n;
}

static void open_ok(const char *text, const attn_token_encoder *enc, const char *cache,
                    attn_token_file *tf) {
    attn_error err;
    cr_assert_eq(attn_token_file_open(text, enc, cache, tf, &err), ATTN_OK, "%s", err.msg);
}

/* Every id of tf (malloc'd), read as a run reads them: through its
 * dataset view (a file of fewer than 2 ids, which holds no window: from
 * the file's bytes). */
static int32_t *file_ids(const attn_token_file *tf) {
    const size_t n = attn_token_file_len(tf);
    int32_t *ids = malloc((n + 1) * sizeof *ids);
    cr_assert_not_null(ids);
    attn_token_dataset ds;
    attn_error err;
    if (n >= 2) {
        cr_assert_eq(attn_token_file_dataset(tf, 1, &ds, &err), ATTN_OK, "%s", err.msg);
        cr_assert_eq(attn_dataset_read(&ds, 0, n, ids, &err), ATTN_OK, "%s", err.msg);
        return ids;
    }
    size_t bytes;
    unsigned char *b = (unsigned char *)read_file(tf->path, &bytes);
    cr_assert_eq(bytes, ATTN_TOKEN_FILE_HEADER + 2 * n);
    for (size_t i = 0; i < n; i++)
        ids[i] = b[ATTN_TOKEN_FILE_HEADER + 2 * i] | b[ATTN_TOKEN_FILE_HEADER + 2 * i + 1] << 8;
    free(b);
    return ids;
}

/* The token file holds exactly the bytes of s (byte encoder). */
static void assert_bytes(const attn_token_file *tf, const char *s, size_t n) {
    cr_assert_eq(attn_token_file_len(tf), n);
    int32_t *ids = file_ids(tf);
    for (size_t i = 0; i < n; i++)
        cr_assert_eq(ids[i], (unsigned char)s[i], "token %zu", i);
    free(ids);
}

/* ------------------------------------------------- build, reuse, rebuild */

static const char TEXT[] = "First Citizen:\nBefore we proceed any further, hear me speak.\n\n"
                           "All:\nSpeak, speak.\n";

Test(token_file, builds_then_reuses_without_encoding) {
    char *dir = temp_dir(), text[4200], cache[4200];
    snprintf(text, sizeof text, "%s/t.txt", dir);
    snprintf(cache, sizeof cache, "%s/cache/a/b", dir);
    write_file(text, TEXT, sizeof TEXT - 1);
    byte_ctx c;
    attn_token_encoder enc = byte_encoder(&c, "bytes-v1");
    attn_token_file tf;
    open_ok(text, &enc, cache, &tf);
    cr_expect_eq(tf.rebuilt, 1);
    cr_expect_eq(c.calls, 1);
    assert_bytes(&tf, TEXT, sizeof TEXT - 1);
    attn_token_file_close(&tf);
    open_ok(text, &enc, cache, &tf);
    cr_expect_eq(tf.rebuilt, 0);
    cr_expect_eq(c.calls, 1, "a second open encoded again");
    assert_bytes(&tf, TEXT, sizeof TEXT - 1);
    attn_token_file_close(&tf);
    attn_token_file_close(&tf); /* twice is fine */
    size_t n;
    char *back = read_file(text, &n);
    cr_expect(n == sizeof TEXT - 1 && !memcmp(back, TEXT, n), "the text was modified");
    cr_expect_eq(count_entries(cache), 1, "one cache file, no temp files left");
    free(back);
    remove_tree(dir);
    free(dir);
}

Test(token_file, changed_text_or_encoder_rebuilds) {
    char *dir = temp_dir(), text[4200];
    snprintf(text, sizeof text, "%s/t.txt", dir);
    write_file(text, TEXT, sizeof TEXT - 1);
    byte_ctx c;
    attn_token_encoder enc = byte_encoder(&c, "bytes-v1");
    attn_token_file tf;
    open_ok(text, &enc, dir, &tf);
    attn_token_file_close(&tf);
    char changed[sizeof TEXT];
    memcpy(changed, TEXT, sizeof TEXT);
    changed[20] ^= 1; /* one byte */
    write_file(text, changed, sizeof TEXT - 1);
    open_ok(text, &enc, dir, &tf);
    cr_expect_eq(tf.rebuilt, 1, "a changed text reused the old tokens");
    assert_bytes(&tf, changed, sizeof TEXT - 1);
    attn_token_file_close(&tf);
    const size_t calls = c.calls;
    attn_token_encoder other = enc;
    other.identity = "bytes-v2";
    open_ok(text, &other, dir, &tf);
    cr_expect_eq(tf.rebuilt, 1, "another encoder reused the old tokens");
    cr_expect_gt(c.calls, calls);
    attn_token_file_close(&tf);
    remove_tree(dir);
    free(dir);
}

/* Damage the cache file by one of several means; each must rebuild it. */
static void damage(const char *path, int how) {
    size_t n;
    char *b = read_file(path, &n);
    b = realloc(b, n + 2); /* room for case 6 */
    cr_assert_not_null(b);
    switch (how) {
    case 0: n -= 1; break;                 /* truncated */
    case 1: b[0] ^= 0x20; break;           /* wrong magic */
    case 2: b[48] ^= 0x01; break;          /* token count off by one */
    case 3: b[72 + 10] ^= 0x01; break;     /* a token flipped */
    case 4: b[12] ^= 0x01; break;          /* another vocabulary size */
    case 5: n = 10; break;                 /* shorter than a header */
    case 6: b[n++] = 0, b[n++] = 0; break; /* one token too many, count unchanged */
    }
    write_file(path, b, n);
    free(b);
}

Test(token_file, corrupt_cache_is_rebuilt_not_trusted) {
    char *dir = temp_dir(), text[4200];
    snprintf(text, sizeof text, "%s/t.txt", dir);
    write_file(text, TEXT, sizeof TEXT - 1);
    byte_ctx c;
    attn_token_encoder enc = byte_encoder(&c, "bytes-v1");
    attn_token_file tf;
    open_ok(text, &enc, dir, &tf);
    char path[4096];
    snprintf(path, sizeof path, "%s", tf.path);
    attn_token_file_close(&tf);
    for (int how = 0; how < 7; how++) {
        damage(path, how);
        const size_t calls = c.calls;
        c.at = 0;
        open_ok(text, &enc, dir, &tf);
        cr_expect_eq(tf.rebuilt, 1, "damage %d was trusted", how);
        cr_expect_gt(c.calls, calls);
        cr_expect_str_eq(tf.path, path, "damage %d: rebuilt under another name", how);
        assert_bytes(&tf, TEXT, sizeof TEXT - 1);
        attn_token_file_close(&tf);
    }
    remove_tree(dir);
    free(dir);
}

/* ----------------------------------------------------------- refusals */

static attn_status bad_id_encode(void *ctx, const char *text, size_t n, int32_t *ids, size_t cap,
                                 size_t *n_ids, attn_error *err) {
    (void)ctx, (void)text, (void)cap, (void)err;
    for (size_t i = 0; i < n; i++)
        ids[i] = i == n / 2 ? 300 : 1;
    *n_ids = n;
    return ATTN_OK;
}

Test(token_file, refuses_bad_ids_run_folders_links_and_big_vocabularies) {
    char *dir = temp_dir(), text[4200], run[4200], p[4300];
    snprintf(text, sizeof text, "%s/t.txt", dir);
    write_file(text, TEXT, sizeof TEXT - 1);
    byte_ctx c;
    attn_token_encoder enc = byte_encoder(&c, "bytes-v1");
    attn_token_file tf;
    attn_error err;
    /* An id outside the vocabulary: an error, and no cache file left. */
    attn_token_encoder bad = enc;
    bad.encode = bad_id_encode;
    snprintf(p, sizeof p, "%s/c1", dir);
    cr_expect_eq(attn_token_file_open(text, &bad, p, &tf, &err), ATTN_ERR_INVALID_ARG);
    cr_expect(strstr(err.msg, "id 300") != NULL, "%s", err.msg);
    cr_expect_eq(count_entries(p), 0);
    bad.vocab_size = 65537;
    cr_expect_eq(attn_token_file_open(text, &bad, p, &tf, &err), ATTN_ERR_INVALID_ARG);
    /* A cache folder inside a run folder. */
    snprintf(run, sizeof run, "%s/run", dir);
    mkdir(run, 0777);
    snprintf(p, sizeof p, "%s/.attn-run", run);
    write_file(p, "x", 1);
    snprintf(p, sizeof p, "%s/cache", run);
    cr_expect_eq(attn_token_file_open(text, &enc, p, &tf, &err), ATTN_ERR_INVALID_ARG);
    cr_expect(strstr(err.msg, "run folder") != NULL, "%s", err.msg);
    cr_expect_eq(attn_token_file_open(text, &enc, run, &tf, &err), ATTN_ERR_INVALID_ARG);
    /* The cache name taken by a link (here to the text) is never replaced. */
    snprintf(p, sizeof p, "%s/c2", dir);
    open_ok(text, &enc, p, &tf);
    char path[4096];
    snprintf(path, sizeof path, "%s", tf.path);
    attn_token_file_close(&tf);
    unlink(path);
    cr_assert_eq(symlink(text, path), 0);
    cr_expect_eq(attn_token_file_open(text, &enc, p, &tf, &err), ATTN_ERR_IO);
    cr_expect(strstr(err.msg, "not a regular file") != NULL, "%s", err.msg);
    /* ... nor a hard link to the text. */
    unlink(path);
    cr_assert_eq(link(text, path), 0);
    cr_expect_neq(attn_token_file_open(text, &enc, p, &tf, &err), ATTN_OK);
    size_t n;
    char *back = read_file(text, &n);
    cr_expect(n == sizeof TEXT - 1 && !memcmp(back, TEXT, n), "the text was modified");
    free(back);
    remove_tree(dir);
    free(dir);
}

Test(token_file, cache_dir_from_the_environment) {
    char *dir = temp_dir(), want[4200], buf[4200];
    attn_error err;
    snprintf(want, sizeof want, "%s/x/y", dir);
    setenv("ATTN_CACHE_DIR", want, 1);
    cr_assert_eq(attn_token_cache_dir(buf, sizeof buf, &err), ATTN_OK, "%s", err.msg);
    cr_expect_str_eq(buf, want);
    struct stat st;
    cr_expect(stat(want, &st) == 0 && S_ISDIR(st.st_mode));
    unsetenv("ATTN_CACHE_DIR");
    setenv("XDG_CACHE_HOME", dir, 1);
    snprintf(want, sizeof want, "%s/attn/tokens", dir);
    cr_assert_eq(attn_token_cache_dir(buf, sizeof buf, &err), ATTN_OK, "%s", err.msg);
    cr_expect_str_eq(buf, want);
    setenv("XDG_CACHE_HOME", "", 1);
    setenv("HOME", dir, 1);
    snprintf(want, sizeof want, "%s/.cache/attn/tokens", dir);
    cr_assert_eq(attn_token_cache_dir(buf, sizeof buf, &err), ATTN_OK, "%s", err.msg);
    cr_expect_str_eq(buf, want);
    cr_expect_neq(attn_token_cache_dir(buf, 8, &err), ATTN_OK);
    remove_tree(dir);
    free(dir);
}

/* ------------------------------------------------------------ chunking */

/* Lines of eight kinds in random order; with chunk_bytes 1 every chunk
 * ends at the first safe boundary after its start, and the only safe ones
 * follow "b\n" and come before "a" or one space (' ', '\t', '\n', U+3000)
 * and "a". */
static int safe_in_lines(const char *s, size_t p) {
    if (s[p - 1] != '\n' || s[p - 2] != 'b') return 0;
    if (s[p] == 'a') return 1;
    if (s[p] == ' ' || s[p] == '\t' || s[p] == '\n') return s[p + 1] == 'a';
    return !memcmp(s + p,
                   "\xe3\x80\x80"
                   "a",
                   4);
}

Test(token_file, chunks_end_only_at_safe_boundaries) {
    static const char *lines[] = {"ab\n",
                                  "ab \n",
                                  "ab\xc2\xa0\n",
                                  " ab\n",
                                  "\xe3\x80\x80"
                                  "ab\n",
                                  "\n",
                                  "ab\xe2\x80\xa8\n",
                                  "\tab\n"};
    char *dir = temp_dir(), text[4200];
    snprintf(text, sizeof text, "%s/t.txt", dir);
    char *s = calloc(64 * 1024, 1);
    size_t n = 0;
    uint32_t r = 12345;
    while (n < 60000) {
        r = r * 1103515245u + 12345u;
        const char *l = lines[(r >> 16) % 8];
        memcpy(s + n, l, strlen(l));
        n += strlen(l);
    }
    write_file(text, s, n);
    byte_ctx c;
    attn_token_encoder enc = byte_encoder(&c, "bytes-v1");
    enc.chunk_bytes = 1;
    attn_token_file tf;
    open_ok(text, &enc, dir, &tf);
    assert_bytes(&tf, s, n);
    cr_expect_gt(c.n_cuts, 500);
    for (size_t i = 0; i + 1 < c.n_cuts && i < 4095; i++) {
        const size_t p = c.cuts[i];
        cr_assert(p >= 3 && safe_in_lines(s, p), "cut %zu at byte %zu is not safe", i, p);
        /* ... and it is the first safe one after the chunk's start. */
        const size_t from = i ? c.cuts[i - 1] : 0;
        for (size_t q = from + 2; q < p; q++)
            cr_assert(!safe_in_lines(s, q), "cut %zu passed the safe boundary %zu", i, q);
    }
    attn_token_file_close(&tf);
    free(s);
    remove_tree(dir);
    free(dir);
}

/* 10 MB of one character has no safe boundary: one encode call. */
Test(token_file, no_safe_boundary_is_one_call) {
    char *dir = temp_dir(), text[4200];
    snprintf(text, sizeof text, "%s/t.txt", dir);
    const size_t n = (size_t)10 << 20;
    char *s = malloc(n);
    memset(s, 'a', n);
    write_file(text, s, n);
    byte_ctx c;
    attn_token_encoder enc = byte_encoder(&c, "bytes-v1");
    attn_token_file tf;
    open_ok(text, &enc, dir, &tf);
    cr_expect_eq(c.calls, 1);
    assert_bytes(&tf, s, n);
    attn_token_file_close(&tf);
    /* "\n\n\n" between runs: still no safe boundary. */
    for (size_t i = 1000; i < n; i += 1000)
        s[i] = s[i - 1] = s[i - 2] = '\n';
    write_file(text, s, n);
    enc = byte_encoder(&c, "bytes-v1");
    enc.chunk_bytes = 4096;
    open_ok(text, &enc, dir, &tf);
    cr_expect_eq(c.calls, 1);
    assert_bytes(&tf, s, n);
    attn_token_file_close(&tf);
    free(s);
    remove_tree(dir);
    free(dir);
}

/* The char tokenizer (attn/tokenizer.h) as an encoder. */
static attn_status char_encode(void *ctx, const char *text, size_t n, int32_t *ids, size_t cap,
                               size_t *n_ids, attn_error *err) {
    (void)cap;
    return attn_tokenizer_encode(ctx, text, n, ids, n_ids, err);
}

/* Chunked == whole for the char tokenizer on multibyte text. */
Test(token_file, char_tokenizer_chunked_equals_whole) {
    static const char *words[] = {"été", " naïve", "\n", "€", "😀", " ", "Zoë", "\n\n", "a"};
    char *dir = temp_dir(), text[4200];
    snprintf(text, sizeof text, "%s/t.txt", dir);
    char *s = malloc(200 * 1024);
    size_t n = 0;
    for (uint32_t r = 7; n < 190000;) {
        r = r * 1103515245u + 12345u;
        const char *w = words[(r >> 16) % 9];
        memcpy(s + n, w, strlen(w));
        n += strlen(w);
    }
    write_file(text, s, n);
    attn_tokenizer tok;
    attn_error err;
    cr_assert_eq(attn_tokenizer_train(&tok, s, n, &err), ATTN_OK, "%s", err.msg);
    int32_t *whole = malloc((n + 1) * sizeof *whole);
    size_t k = 0;
    cr_assert_eq(attn_tokenizer_encode(&tok, s, n, whole, &k, &err), ATTN_OK, "%s", err.msg);
    attn_token_encoder enc = {.identity = "char",
                              .identity_len = 4,
                              .vocab_size = tok.vocab_size,
                              .encode = char_encode,
                              .ctx = &tok,
                              .chunk_bytes = 100};
    attn_token_file tf;
    open_ok(text, &enc, dir, &tf);
    cr_expect_gt(tf.encode_calls, 100);
    cr_assert_eq(attn_token_file_len(&tf), k);
    int32_t *got = file_ids(&tf);
    for (size_t i = 0; i < k; i++)
        cr_assert_eq(got[i], whole[i], "id %zu", i);
    free(got);
    attn_token_file_close(&tf);
    attn_tokenizer_free(&tok);
    free(whole);
    free(s);
    remove_tree(dir);
    free(dir);
}

/* ---------------------------------------------------------- the split */

/* Python: text = "aé€😀" * 7 (28 characters, 70 bytes); int(0.9 * 28) = 25
 * characters = 6 repeats (60 bytes) and "a": byte 61. */
Test(token_file, split_is_ninety_percent_of_the_characters) {
    char s[128] = "";
    for (int i = 0; i < 7; i++)
        strcat(s, "a\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80");
    const size_t n = strlen(s);
    cr_assert_eq(n, 70);
    cr_expect_eq(attn_text_split_offset(s, n), 61);
    cr_expect_eq(attn_text_split_offset("", 0), 0);
    cr_expect_eq(attn_text_split_offset("abcdefghij", 10), 9);
    /* An invalid byte is one character: 10 characters, the 9th at byte 8. */
    cr_expect_eq(attn_text_split_offset("abcdefg\xff\xc3\xa9", 10), 8);
    char *dir = temp_dir(), text[4200];
    snprintf(text, sizeof text, "%s/t.txt", dir);
    write_file(text, s, n);
    byte_ctx c;
    attn_token_encoder enc = byte_encoder(&c, "bytes-v1");
    attn_token_file train, val;
    attn_error err;
    cr_assert_eq(attn_token_file_open_split(text, &enc, dir, &train, &val, &err), ATTN_OK, "%s",
                 err.msg);
    assert_bytes(&train, s, 61);
    assert_bytes(&val, s + 61, n - 61);
    cr_expect_str_neq(train.path, val.path);
    attn_token_file_close(&train);
    attn_token_file_close(&val);
    cr_assert_eq(attn_token_file_open_split(text, &enc, dir, &train, &val, &err), ATTN_OK, "%s",
                 err.msg);
    cr_expect(!train.rebuilt && !val.rebuilt, "the split's files were not reused");
    attn_token_file_close(&train);
    attn_token_file_close(&val);
    cr_expect_eq(attn_token_file_open_range(text, 10, 71, &enc, dir, &train, &err),
                 ATTN_ERR_INVALID_ARG);
    remove_tree(dir);
    free(dir);
}

/* ------------------------------------------------------- the u16 dataset */

/* Python's characters, the plain way (no windows): the length in bytes of
 * the character at t[i] (an invalid byte is one character of its own). */
static size_t char_at(const char *t, size_t i, size_t n) {
    const unsigned char c = (unsigned char)t[i];
    size_t len = c < 0x80                 ? 1
                 : c >= 0xC2 && c <= 0xDF ? 2
                 : c >= 0xE0 && c <= 0xEF ? 3
                 : c >= 0xF0 && c <= 0xF4 ? 4
                                          : 1;
    if (len > 1 && (i + len > n || attn_utf8_prefix(t + i, len) != len)) len = 1;
    return len;
}
static size_t ref_split(const char *t, size_t n) {
    size_t chars = 0;
    for (size_t i = 0; i < n; i += char_at(t, i, n))
        chars++;
    size_t k = chars / 10 * 9 + (chars % 10) * 9 / 10, i = 0;
    for (; i < n && k > 0; k--)
        i += char_at(t, i, n);
    return i;
}

/* The split scans in 64 MiB windows: a character or an invalid byte at a
 * window's edge counts as it would in one pass, with the split point just
 * before, at and after it. */
Test(token_file, split_across_scan_windows, .timeout = 120) {
    const size_t W = (size_t)64 << 20, N = W / 9 * 10 + 64;
    static const char *const edges[] = {"\xc3\xa9", "\xe2\x80\x94", "\xf0\x9f\x98\x80",
                                        "\xff",     "\xe2\x80",     "\xc3\xa9\xc3"};
    char *t = malloc(N);
    cr_assert_not_null(t);
    memset(t, 'a', N);
    for (size_t e = 0; e < sizeof edges / sizeof *edges; e++)
        for (size_t back = 0; back < 2; back++) { /* the edge inside it, or after it */
            const size_t el = strlen(edges[e]), at = W - 1 - back;
            memcpy(t + at, edges[e], el);
            for (int d = -2; d <= 2; d += 4) { /* 0.9 * chars on either side of it */
                const size_t n = (size_t)((double)(at + (size_t)(d + 3)) / 0.9) - 3;
                cr_expect_eq(attn_text_split_offset(t, n), ref_split(t, n),
                             "edge %zu back %zu d %d", e, back, d);
            }
            memset(t + at, 'a', el);
        }
    free(t);
}

/* The file view (uint16 ids after a header, read with pread) gives what
 * the int32 view of the same ids gives, window by window and batch by
 * batch. */
Test(token_file, file_dataset_equals_int32_dataset) {
    enum { N = 5000, T = 16, B = 8, OFF = 40 };
    int32_t *ids = malloc(N * sizeof *ids);
    unsigned char *bytes = calloc(OFF + 2 * N, 1);
    for (uint32_t i = 0, r = 99; i < N; i++) {
        r = r * 1103515245u + 12345u;
        ids[i] = (int32_t)(r >> 16); /* all of 0 .. 65535 */
        bytes[OFF + 2 * i] = (unsigned char)ids[i];
        bytes[OFF + 2 * i + 1] = (unsigned char)(ids[i] >> 8);
    }
    char *dir = temp_dir(), path[4200];
    snprintf(path, sizeof path, "%s/ids.u16", dir);
    write_file(path, bytes, OFF + 2 * N);
    const int fd = open(path, O_RDONLY);
    cr_assert_geq(fd, 0);
    attn_token_dataset a, b;
    attn_error err;
    cr_assert_eq(attn_dataset_init(&a, ids, N, T, NULL), ATTN_OK);
    cr_expect_eq(attn_dataset_init_file(&b, fd, path, OFF, T, 65536, T, NULL),
                 ATTN_ERR_INVALID_ARG);
    cr_expect_eq(attn_dataset_init_file(&b, fd, path, OFF, N, 65537, T, NULL),
                 ATTN_ERR_INVALID_ARG);
    cr_assert_eq(attn_dataset_init_file(&b, fd, path, OFF, N, 65536, T, NULL), ATTN_OK);
    cr_assert_eq(attn_dataset_len(&a), attn_dataset_len(&b));
    int32_t xa[B * T], ya[B * T], xb[B * T], yb[B * T];
    for (size_t p = 0; p < attn_dataset_len(&a); p++) {
        cr_assert_eq(attn_dataset_get(&a, p, xa, ya, &err), ATTN_OK);
        cr_assert_eq(attn_dataset_get(&b, p, xb, yb, &err), ATTN_OK, "%s", err.msg);
        cr_assert(!memcmp(xa, xb, sizeof(int32_t) * T) && !memcmp(ya, yb, sizeof(int32_t) * T),
                  "window %zu", p);
    }
    attn_rng ra, rb;
    attn_rng_seed(&ra, 123);
    attn_rng_seed(&rb, 123);
    attn_sampler sa, sb;
    cr_assert_eq(attn_sampler_init(&sa, attn_dataset_len(&a), 7, NULL), ATTN_OK);
    cr_assert_eq(attn_sampler_init(&sb, attn_dataset_len(&b), 7, NULL), ATTN_OK);
    for (int it = 0; it < 700; it++) {
        cr_assert_eq(attn_dataset_random_batch(&a, &ra, B, xa, ya, &err), ATTN_OK);
        cr_assert_eq(attn_dataset_random_batch(&b, &rb, B, xb, yb, &err), ATTN_OK, "%s", err.msg);
        cr_assert(!memcmp(xa, xb, sizeof xa) && !memcmp(ya, yb, sizeof ya), "random batch %d", it);
        cr_assert_eq(attn_sampler_next_batch(&sa, &a, B, xa, ya, &err), ATTN_OK);
        cr_assert_eq(attn_sampler_next_batch(&sb, &b, B, xb, yb, &err), ATTN_OK, "%s", err.msg);
        cr_assert(!memcmp(xa, xb, sizeof xa) && !memcmp(ya, yb, sizeof ya), "sampler batch %d", it);
    }
    attn_sampler_free(&sa);
    attn_sampler_free(&sb);
    close(fd);
    free(ids);
    free(bytes);
    remove_tree(dir);
    free(dir);
}

/* A token file changed under an open one (the run's): truncated, or
 * overwritten in place, its reads fail naming it (never a SIGBUS, never an
 * id past the vocabulary); replaced by a new file (rename), the open one
 * still reads what it opened. */
Test(token_file, a_file_changed_under_a_reader_is_an_error) {
    char *dir = temp_dir(), text[4200];
    snprintf(text, sizeof text, "%s/t.txt", dir);
    write_file(text, TEXT, sizeof TEXT - 1);
    byte_ctx c;
    attn_token_encoder enc = byte_encoder(&c, "bytes-v1");
    enc.vocab_size = 200; /* every byte of TEXT is below it; 0xFFFF is not */
    attn_token_file tf;
    open_ok(text, &enc, dir, &tf);
    attn_token_dataset ds;
    attn_error err;
    cr_assert_eq(attn_token_file_dataset(&tf, 8, &ds, &err), ATTN_OK, "%s", err.msg);
    int32_t x[8], y[8];
    const size_t last = attn_dataset_len(&ds) - 1;
    size_t n;
    char *before = read_file(tf.path, &n);
    /* replaced: the open file is still the one the run checked */
    char other[4300];
    snprintf(other, sizeof other, "%s.new", tf.path);
    write_file(other, "x", 1);
    cr_assert_eq(rename(other, tf.path), 0);
    cr_expect_eq(attn_dataset_get(&ds, last, x, y, &err), ATTN_OK, "%s", err.msg);
    cr_expect_eq(y[7], (unsigned char)TEXT[sizeof TEXT - 2]);
    attn_token_file_close(&tf);
    /* truncated in place */
    other[strlen(other) - 4] = '\0'; /* the cache file's name again */
    write_file(other, before, n);
    open_ok(text, &enc, dir, &tf);
    cr_assert_eq(attn_token_file_dataset(&tf, 8, &ds, &err), ATTN_OK, "%s", err.msg);
    cr_assert_eq(truncate(tf.path, 100), 0);
    cr_expect_eq(attn_dataset_get(&ds, 0, x, y, &err), ATTN_OK, "%s", err.msg);
    cr_expect_eq(attn_dataset_get(&ds, last, x, y, &err), ATTN_ERR_IO);
    cr_expect(strstr(err.msg, tf.path) && strstr(err.msg, "changed under the run"), "%s", err.msg);
    cr_assert_eq(truncate(tf.path, 0), 0);
    cr_expect_eq(attn_dataset_read(&ds, 0, 2, x, &err), ATTN_ERR_IO);
    cr_expect(strstr(err.msg, "ends before byte"), "%s", err.msg);
    /* overwritten in place with other bytes of the same size */
    memset(before + ATTN_TOKEN_FILE_HEADER, 0xFF, n - ATTN_TOKEN_FILE_HEADER);
    FILE *f = fopen(tf.path, "r+b");
    cr_assert(f && fwrite(before, 1, n, f) == n && fclose(f) == 0);
    cr_expect_eq(attn_dataset_get(&ds, 3, x, y, &err), ATTN_ERR_IO);
    cr_expect(strstr(err.msg, tf.path) &&
                  strstr(err.msg, "id 65535, not below the vocabulary's 200"),
              "%s", err.msg);
    attn_token_file_close(&tf);
    free(before);
    remove_tree(dir);
    free(dir);
}

/* ------------------------------------------------------ GPT-2's BPE */

static attn_status bpe_encode(void *ctx, const char *text, size_t n, int32_t *ids, size_t cap,
                              size_t *n_ids, attn_error *err) {
    return attn_bpe_encode(ctx, text, n, 0, ids, cap, n_ids, err);
}

/* data/<name>, or the shared copy beside the checkout; NULL when absent. */
static const char *data_path(const char *name, char *buf, size_t cap) {
    snprintf(buf, cap, "%s/data/%s", ATTN_SOURCE_DIR, name);
    if (access(buf, R_OK) == 0) return buf;
    snprintf(buf, cap, "%s/../shared/data/%s", ATTN_SOURCE_DIR, name);
    return access(buf, R_OK) == 0 ? buf : NULL;
}

static attn_bpe *gpt2_or_skip(void) {
    char e[4096], v[4096];
    if (!data_path("gpt2/encoder.json", e, sizeof e) || !data_path("gpt2/vocab.bpe", v, sizeof v))
        cr_skip_test("no GPT-2 vocabulary in data/gpt2 (scripts/get-data.sh gpt2)");
    attn_bpe *t = NULL;
    attn_error err;
    cr_assert_eq(attn_bpe_load(&t, e, v, &err), ATTN_OK, "%s", err.msg);
    return t;
}

/* The token file of path (chunks of chunk bytes) == one attn_bpe_encode of
 * the whole text. */
static void assert_gpt2_chunked_is_whole(attn_bpe *t, const char *path, size_t chunk,
                                         size_t min_calls) {
    char *dir = temp_dir();
    size_t n;
    char *s = read_file(path, &n);
    int32_t *whole = malloc((n + 1) * sizeof *whole);
    size_t k = 0;
    attn_error err;
    cr_assert_eq(attn_bpe_encode(t, s, n, 0, whole, n + 1, &k, &err), ATTN_OK, "%s", err.msg);
    attn_token_encoder enc = {.identity = "gpt2",
                              .identity_len = 4,
                              .vocab_size = attn_bpe_n_vocab(t),
                              .encode = bpe_encode,
                              .ctx = t,
                              .chunk_bytes = chunk};
    attn_token_file tf;
    open_ok(path, &enc, dir, &tf);
    cr_expect_geq(tf.encode_calls, min_calls, "%s: only %zu chunks", path, tf.encode_calls);
    cr_assert_eq(attn_token_file_len(&tf), k, "%s: %zu tokens chunked, %zu whole", path,
                 attn_token_file_len(&tf), k);
    int32_t *got = file_ids(&tf);
    for (size_t i = 0; i < k; i++)
        cr_assert_eq(got[i], whole[i], "%s: token %zu", path, i);
    free(got);
    attn_token_file_close(&tf);
    free(whole);
    free(s);
    remove_tree(dir);
    free(dir);
}

Test(token_file, gpt2_chunked_equals_whole_on_the_corpora, .timeout = 120) {
    attn_bpe *t = gpt2_or_skip();
    char p[4096];
    if (!data_path("tinyshakespeare.txt", p, sizeof p) ||
        !data_path("the-verdict.txt", p, sizeof p))
        cr_skip_test("no data/tinyshakespeare.txt or data/the-verdict.txt (scripts/get-data.sh)");
    assert_gpt2_chunked_is_whole(t, data_path("tinyshakespeare.txt", p, sizeof p), 512, 1000);
    assert_gpt2_chunked_is_whole(t, data_path("the-verdict.txt", p, sizeof p), 16, 30);
    attn_bpe_free(t);
}

/* Random text from pieces that stress GPT-2's pattern at line ends
 * (spaces, Unicode spaces, NEL, contractions, digits, invalid bytes), cut
 * at every safe boundary (chunk_bytes 1). */
Test(token_file, gpt2_chunked_equals_whole_on_whitespace_stress, .timeout = 120) {
    static const char *pieces[] = {"a",
                                   "b",
                                   "\n",
                                   "\n",
                                   " ",
                                   "  ",
                                   "\t",
                                   "\r",
                                   "'s",
                                   "'ll",
                                   "1",
                                   "23",
                                   "!",
                                   "?!",
                                   "\xc2\xa0",
                                   "\xe3\x80\x80",
                                   "é",
                                   "\xc2\x85",
                                   "\xe2\x80\xa8",
                                   "\xff",
                                   "\xe2\x82",
                                   "\xe1\xa0\x8e",
                                   "<|endoftext|>",
                                   "\n "};
    attn_bpe *t = gpt2_or_skip();
    char *dir = temp_dir(), text[4200];
    snprintf(text, sizeof text, "%s/t.txt", dir);
    char *s = malloc(40 * 1024);
    size_t n = 0;
    for (uint32_t r = 2024; n < 40000;) {
        r = r * 1103515245u + 12345u;
        const char *w = pieces[(r >> 16) % (sizeof pieces / sizeof *pieces)];
        memcpy(s + n, w, strlen(w));
        n += strlen(w);
    }
    write_file(text, s, n);
    free(s);
    assert_gpt2_chunked_is_whole(t, text, 1, 100);
    attn_bpe_free(t);
    remove_tree(dir);
    free(dir);
}

Test(token_file, empty_text_has_no_tokens) {
    char *dir = temp_dir(), text[4200];
    snprintf(text, sizeof text, "%s/t.txt", dir);
    write_file(text, "", 0);
    byte_ctx c;
    attn_token_encoder enc = byte_encoder(&c, "bytes-v1");
    attn_token_file tf;
    open_ok(text, &enc, dir, &tf);
    cr_expect(tf.rebuilt && c.calls == 0 && attn_token_file_len(&tf) == 0);
    attn_token_file_close(&tf);
    open_ok(text, &enc, dir, &tf);
    cr_expect(!tf.rebuilt && attn_token_file_len(&tf) == 0);
    attn_token_file_close(&tf);
    remove_tree(dir);
    free(dir);
}
