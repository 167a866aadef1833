/* CharTokenizer (seed 004, cells In [4]-[7]). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
    cr_expect_eq(attn_tokenizer_encode(&lines, "ab\nb\xc3\xa9" "a", 7, ids, &k, &err),
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
