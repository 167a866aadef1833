/* attn/text.h — a growing text buffer: what the writers of text files
 * (viz's pages, a fine-tuning run's log.csv) build in memory before one
 * atomic write. A failed allocation sets oom and makes every later append a
 * no-op, so a writer checks once, at the end. Zero it to start; s is
 * NUL-terminated once anything was appended. */
#ifndef ATTN_TEXT_H
#define ATTN_TEXT_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct attn_text {
    char *s;
    size_t len, cap;
    int oom;
} attn_text;

/* Appends n bytes of s. */
void attn_text_putn(attn_text *b, const char *s, size_t n);
/* Appends the string s. */
void attn_text_puts(attn_text *b, const char *s);
/* Appends printf's output. */
void attn_text_printf(attn_text *b, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
/* Frees the text and zeroes b. */
void attn_text_free(attn_text *b);

#ifdef __cplusplus
}
#endif
#endif
