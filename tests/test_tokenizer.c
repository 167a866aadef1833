/* The models' tokenizer: CharTokenizer (seed 004, cells In [4]-[7]) and the gpt2 kind. */
#define _XOPEN_SOURCE 700 /* setenv, realpath */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "attn/tokenizer.h"

static char *read_corpus(size_t *n) {
    FILE *f = fopen(ATTN_SOURCE_DIR "/../shared/data/tinyshakespeare.txt", "rb");
    if (!f) f = fopen(ATTN_SOURCE_DIR "/data/tinyshakespeare.txt", "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)len);
    *n = fread(buf, 1, (size_t)len, f);
    fclose(f);
    return buf;
}

/* Seed 004 In [6]/[7]: vocabulary 65, "Hello world" -> these ids. */
Test(tokenizer, seed004_ids_on_tiny_shakespeare) {
    size_t n = 0;
    char *text = read_corpus(&n);
    if (!text) cr_skip_test("Tiny Shakespeare not found next to the checkout");
    attn_tokenizer tok;
    cr_assert_eq(attn_tokenizer_train(&tok, text, n, NULL), ATTN_OK);
    cr_expect_eq(tok.vocab_size, 65);
    const int32_t want[11] = {20, 43, 50, 50, 53, 1, 61, 53, 56, 50, 42};
    int32_t ids[11];
    size_t k = 0;
    cr_assert_eq(attn_tokenizer_encode(&tok, "Hello world", 11, ids, &k, NULL), ATTN_OK);
    cr_assert_eq(k, 11);
    for (int i = 0; i < 11; i++)
        cr_expect_eq(ids[i], want[i], "id %d: %d vs %d", i, ids[i], want[i]);
    char out[12];
    cr_assert_eq(attn_tokenizer_decode(&tok, ids, 11, out, NULL), ATTN_OK);
    cr_expect_str_eq(out, "Hello world");
    attn_tokenizer_free(&tok);
    free(text);
}

Test(tokenizer, sorted_unique_vocabulary_and_roundtrip) {
    const char *text = "hello, world\n";
    attn_tokenizer tok;
    cr_assert_eq(attn_tokenizer_train(&tok, text, strlen(text), NULL), ATTN_OK);
    char *v = attn_tokenizer_vocab_string(&tok);
    cr_expect_str_eq(v, "\n ,dehlorw");
    attn_tokenizer t2;
    cr_assert_eq(attn_tokenizer_from_vocab(&t2, v, strlen(v), NULL), ATTN_OK);
    cr_expect_eq(t2.vocab_size, 10);
    int32_t ids[13];
    size_t k;
    cr_assert_eq(attn_tokenizer_encode(&t2, text, strlen(text), ids, &k, NULL), ATTN_OK);
    cr_expect_eq(ids[0], 5);  /* 'h' */
    cr_expect_eq(ids[12], 0); /* '\n' */
    free(v);
    attn_tokenizer_free(&tok);
    attn_tokenizer_free(&t2);
}

/* Characters are code points, as Python's str: "é" is one token, sorted
 * after ASCII (sorted(set("café, cafe")) = [' ', ',', 'a', 'c', 'e', 'f', 'é']). */
Test(tokenizer, utf8_code_points) {
    const char *text = "caf\xc3\xa9, cafe";
    attn_tokenizer tok;
    cr_assert_eq(attn_tokenizer_train(&tok, text, strlen(text), NULL), ATTN_OK);
    cr_expect_eq(tok.vocab_size, 7);
    cr_expect_eq(tok.chars[6], 0xE9u);
    int32_t ids[16];
    size_t k;
    cr_assert_eq(attn_tokenizer_encode(&tok, text, strlen(text), ids, &k, NULL), ATTN_OK);
    cr_expect_eq(k, 10);
    cr_expect_eq(ids[3], 6);
    char out[32];
    attn_tokenizer_decode(&tok, ids, k, out, NULL);
    cr_expect_str_eq(out, text);
    attn_tokenizer_free(&tok);
}

Test(tokenizer, unknown_character_names_it_and_its_position) {
    attn_tokenizer tok;
    cr_assert_eq(attn_tokenizer_train(&tok, "abc", 3, NULL), ATTN_OK);
    int32_t ids[8];
    size_t k;
    attn_error err;
    cr_expect_eq(attn_tokenizer_encode(&tok, "abcZa", 5, ids, &k, &err), ATTN_ERR_INVALID_ARG);
    cr_expect(strstr(err.msg, "'Z'") != NULL, "%s", err.msg);
    cr_expect(strstr(err.msg, "position 3") != NULL, "%s", err.msg);
    cr_expect_eq(attn_tokenizer_encode(&tok, "a\xc3\xa9", 3, ids, &k, &err), ATTN_ERR_INVALID_ARG);
    cr_expect(strstr(err.msg, "position 1") != NULL, "%s", err.msg);
    /* In a file: its line and column (characters) and byte offset too. */
    attn_tokenizer lines;
    cr_assert_eq(attn_tokenizer_train(&lines, "ab\n", 3, NULL), ATTN_OK);
    cr_expect_eq(attn_tokenizer_encode(&lines,
                                       "ab\nb\xc3\xa9"
                                       "a",
                                       7, ids, &k, &err),
                 ATTN_ERR_INVALID_ARG);
    cr_expect(strstr(err.msg, "'\xc3\xa9' (U+00E9) at position 4 (line 2, column 2, byte 4)"), "%s",
              err.msg);
    attn_tokenizer_free(&lines);
    cr_expect_eq(attn_tokenizer_encode(&tok, "a\xff", 2, ids, &k, &err), ATTN_ERR_FORMAT);
    int32_t bad = 3;
    char out[8];
    cr_expect_eq(attn_tokenizer_decode(&tok, &bad, 1, out, &err), ATTN_ERR_INVALID_ARG);
    attn_tokenizer_free(&tok);
}

Test(tokenizer, empty_or_invalid_text_is_an_error) {
    attn_tokenizer tok;
    attn_error err;
    cr_expect_eq(attn_tokenizer_train(&tok, "", 0, &err), ATTN_ERR_INVALID_ARG);
    cr_expect_eq(attn_tokenizer_train(&tok, "ab\xc0\x80", 4, &err), ATTN_ERR_FORMAT);
    cr_expect(strstr(err.msg, "byte 2") != NULL, "%s", err.msg);
    cr_expect_eq(attn_tokenizer_from_vocab(&tok, "ba", 2, &err), ATTN_ERR_FORMAT);
}

/* ---- the gpt2 kind (GPT-2's BPE; ids are tiktoken's gpt2, as test_bpe) ---- */

static int gpt2_tok(attn_tokenizer *tok) {
    attn_error err;
    if (attn_tokenizer_gpt2(tok, ATTN_SOURCE_DIR "/data/gpt2", &err) == ATTN_OK) return 1;
    return attn_tokenizer_gpt2(tok, ATTN_SOURCE_DIR "/../shared/data/gpt2", &err) == ATTN_OK;
}

Test(tokenizer, gpt2_kind_dispatches_every_call) {
    attn_tokenizer tok;
    if (!gpt2_tok(&tok))
        cr_skip_test("no GPT-2 vocabulary in data/gpt2 (scripts/get-data.sh gpt2)");
    attn_error err;
    cr_expect_eq(tok.kind, ATTN_TOKENIZER_GPT2);
    cr_expect_eq(tok.vocab_size, ATTN_GPT2_N_VOCAB);
    cr_expect_str_eq(attn_tokenizer_kind_name(tok.kind), "gpt2");
    cr_expect_eq(attn_tokenizer_kind_parse("gpt2"), ATTN_TOKENIZER_GPT2);
    cr_expect_eq(attn_tokenizer_kind_parse("char"), ATTN_TOKENIZER_CHAR);
    cr_expect_eq(attn_tokenizer_kind_parse("bpe"), -1);
    cr_expect_null(attn_tokenizer_vocab_string(&tok)); /* char only */
    cr_expect_eq(attn_tokenizer_id(&tok, 'a'), -1);
    const char *text = "Hello world<|endoftext|>\xe2\x80\x99";
    size_t n = strlen(text), cap = 0, got = 0;
    cr_assert_eq(attn_tokenizer_max_ids(&tok, text, n, &cap, &err), ATTN_OK);
    cr_expect_eq(cap, n + 1);
    int32_t ids[64];
    cr_assert_eq(attn_tokenizer_encode(&tok, text, n, ids, &got, &err), ATTN_OK, "%s", err.msg);
    const int32_t plain[] = {15496, 995, 27, 91, 437, 1659, 5239, 91, 29, 447, 247};
    cr_assert_eq(got, 11);
    cr_expect_eq(memcmp(ids, plain, sizeof plain), 0);
    cr_assert_eq(attn_tokenizer_encode_ex(&tok, text, n, 1, ids, cap, &got, &err), ATTN_OK);
    const int32_t special[] = {15496, 995, 50256, 447, 247};
    cr_assert_eq(got, 5);
    cr_expect_eq(memcmp(ids, special, sizeof special), 0);
    /* Decoding gives bytes: one token of the quote is a cut character. */
    size_t len = 0;
    char out[64];
    cr_assert_eq(attn_tokenizer_decoded_len(&tok, ids, got, &len, &err), ATTN_OK);
    cr_expect_eq(len, n);
    cr_assert_eq(attn_tokenizer_decode(&tok, ids, got, out, &err), ATTN_OK);
    cr_expect_str_eq(out, text);
    char tmp[4];
    const char *b = attn_tokenizer_token(&tok, 447, tmp, &len);
    cr_expect(b && len == 2 && memcmp(b, "\xe2\x80", 2) == 0);
    cr_expect_null(attn_tokenizer_token(&tok, 50257, tmp, &len));
    const int32_t bad = 50257;
    cr_expect_eq(attn_tokenizer_decode(&tok, &bad, 1, out, &err), ATTN_ERR_INVALID_ARG);
    /* A copy is its own and the same; a char tokenizer is not. */
    attn_tokenizer copy, chars;
    cr_assert_eq(attn_tokenizer_copy(&copy, &tok, &err), ATTN_OK);
    cr_expect(attn_tokenizer_same(&copy, &tok) && copy.bpe != tok.bpe);
    cr_assert_eq(attn_tokenizer_train(&chars, "abc", 3, NULL), ATTN_OK);
    cr_expect(!attn_tokenizer_same(&chars, &tok));
    attn_tokenizer_free(&copy);
    attn_tokenizer_free(&tok);
    cr_expect(tok.bpe == NULL && tok.encoder_json == NULL && tok.vocab_size == 0);
    attn_tokenizer_free(&chars);
}

Test(tokenizer, gpt2_missing_files_name_the_places) {
    attn_tokenizer tok;
    attn_error err;
    cr_assert_eq(attn_tokenizer_gpt2(&tok, "/nonexistent-attn-dir", &err), ATTN_ERR_NOT_FOUND);
    cr_expect(strstr(err.msg, "given: /nonexistent-attn-dir") &&
                  strstr(err.msg, "$ATTN_GPT2_DIR") && strstr(err.msg, "make install") &&
                  strstr(err.msg, "scripts/get-data.sh gpt2"),
              "%s", err.msg);
    cr_expect_eq(tok.bpe, NULL);
    setenv(ATTN_GPT2_DIR_ENV, "/some/where", 1); /* set: only it */
    char dir[4096];
    cr_expect_eq(attn_tokenizer_gpt2_find(NULL, dir, sizeof dir, &err), ATTN_ERR_NOT_FOUND);
    cr_expect(strstr(err.msg, "$ATTN_GPT2_DIR: /some/where"), "%s", err.msg);
    unsetenv(ATTN_GPT2_DIR_ENV);
}

/* The places, in order: the argument, $ATTN_GPT2_DIR, beside the library
 * (installed, or the source tree's data/gpt2 beside build/), the current
 * folder's data/gpt2. The test binary is built in the build folder, so
 * without the variable it finds the source tree's copy whatever the
 * current folder is. */
Test(tokenizer, gpt2_files_are_found_from_anywhere) {
    char dir[4096], want[4096];
    attn_error err;
    if (!realpath(ATTN_SOURCE_DIR "/data/gpt2", want))
        cr_skip_test("no GPT-2 vocabulary in data/gpt2 (scripts/get-data.sh gpt2)");
    unsetenv(ATTN_GPT2_DIR_ENV);
    cr_assert_eq(chdir("/"), 0);
    const char *rest = ATTN_BINARY + strlen(ATTN_SOURCE_DIR) + 1, *slash = strchr(rest, '/');
    if (strncmp(ATTN_BINARY, ATTN_SOURCE_DIR "/", strlen(ATTN_SOURCE_DIR) + 1) == 0 && slash &&
        !strchr(slash + 1, '/')) { /* the build folder is SRC/NAME */
        cr_assert_eq(attn_tokenizer_gpt2_find(NULL, dir, sizeof dir, &err), ATTN_OK, "%s", err.msg);
        char real[4096];
        cr_assert(realpath(dir, real));
        cr_expect_str_eq(real, want);
    }
    setenv(ATTN_GPT2_DIR_ENV, want, 1);
    cr_assert_eq(attn_tokenizer_gpt2_find(NULL, dir, sizeof dir, &err), ATTN_OK, "%s", err.msg);
    cr_expect_str_eq(dir, want);
    cr_assert_eq(attn_tokenizer_gpt2_find("/", dir, sizeof dir, &err), ATTN_ERR_NOT_FOUND);
    setenv(ATTN_GPT2_DIR_ENV, "", 1);        /* empty: as unset */
    cr_assert_eq(chdir(ATTN_SOURCE_DIR), 0); /* the current folder's data/gpt2 */
    cr_assert_eq(attn_tokenizer_gpt2_find(NULL, dir, sizeof dir, &err), ATTN_OK, "%s", err.msg);
    unsetenv(ATTN_GPT2_DIR_ENV);
}

/* The char kind through the kind-generic calls: as before. */
Test(tokenizer, char_kind_generic_calls) {
    attn_tokenizer tok, copy;
    attn_error err;
    cr_assert_eq(attn_tokenizer_train(&tok, "h\xc3\xa9llo", 6, NULL), ATTN_OK);
    cr_expect_eq(tok.kind, ATTN_TOKENIZER_CHAR);
    size_t cap = 0, got = 0, len = 0;
    cr_assert_eq(attn_tokenizer_max_ids(&tok, "h\xc3\xa9", 3, &cap, &err), ATTN_OK);
    cr_expect_eq(cap, 2);
    cr_expect_eq(attn_tokenizer_max_ids(&tok, "\xff", 1, &cap, &err), ATTN_ERR_FORMAT);
    int32_t ids[8];
    cr_expect_eq(attn_tokenizer_encode_ex(&tok, "hello", 5, 1, ids, 4, &got, &err),
                 ATTN_ERR_INVALID_ARG); /* room for 4 of 5 */
    cr_assert_eq(attn_tokenizer_encode_ex(&tok, "h\xc3\xa9", 3, 1, ids, 8, &got, &err), ATTN_OK);
    cr_expect(got == 2 && ids[0] == 0 && ids[1] == 3);
    char tmp[4];
    const char *b = attn_tokenizer_token(&tok, 3, tmp, &len);
    cr_expect(b == tmp && len == 2 && memcmp(b, "\xc3\xa9", 2) == 0);
    cr_assert_eq(attn_tokenizer_copy(&copy, &tok, &err), ATTN_OK);
    cr_expect(attn_tokenizer_same(&copy, &tok) && copy.chars != tok.chars);
    attn_tokenizer_free(&copy);
    attn_tokenizer_free(&tok);
}

/* Showing bytes: whole characters pass, a cut one waits for the rest, an
 * ill-formed sequence is one U+FFFD per maximal part (Python's replace;
 * tests/python/test_gpt2_model.py compares them on random bytes). */
Test(tokenizer, utf8_display_holds_back_and_replaces) {
    attn_utf8_display d = {{0}, 0};
    char out[64];
    cr_expect_eq(attn_utf8_display_put(&d, "a\xe2\x80", 3, out), 1);
    cr_expect_str_eq(out, "a");
    cr_expect_eq(attn_utf8_display_put(&d, "\x99z", 2, out), 4); /* the quote, whole */
    cr_expect_str_eq(out, "\xe2\x80\x99z");
    attn_utf8_display_put(&d, "\xf0\x9f", 2, out);
    cr_expect_str_eq(out, "");
    cr_expect_eq(attn_utf8_display_end(&d, out), 3); /* cut at the end: one U+FFFD */
    cr_expect_str_eq(out, "\xef\xbf\xbd");
    attn_utf8_display_put(&d,
                          "\xff"
                          "b\xe0\x80"
                          "c\xed\xa0\x80"
                          "\0",
                          9, out);
    cr_expect_str_eq(out, "\xef\xbf\xbd"
                          "b\xef\xbf\xbd\xef\xbf\xbd"
                          "c\xef\xbf\xbd\xef\xbf\xbd"
                          "\xef\xbf\xbd\xef\xbf\xbd");
    cr_expect_eq(attn_utf8_display_end(&d, out), 0);
}
