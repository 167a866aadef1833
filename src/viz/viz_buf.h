/* Internal: a growing text buffer for the viz writers (src/viz*.c). A failed
 * allocation sets oom and turns every later append into a no-op, so writers
 * check once at the end. */
#ifndef ATTN_VIZ_BUF_H
#define ATTN_VIZ_BUF_H

#include <stddef.h>
#include <stdint.h>

typedef struct attn_vbuf {
    char *s;
    size_t len, cap;
    int oom;
} attn_vbuf;

void attn_vbuf_putn(attn_vbuf *b, const char *s, size_t n);
void attn_vbuf_puts(attn_vbuf *b, const char *s);
void attn_vbuf_printf(attn_vbuf *b, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
/* s escaped for XML/HTML text and attribute values (& < > " '). */
void attn_vbuf_xml(attn_vbuf *b, const char *s);
/* s as a JSON string literal, quotes included; '<' is written \u003c so the
 * text can sit inside a <script> element. */
void attn_vbuf_json_str(attn_vbuf *b, const char *s);
/* v with at most `decimals` digits after the point, trailing zeros dropped
 * ("0.25", "1", "0"); JSON-safe (non-finite as null). */
void attn_vbuf_fixed(attn_vbuf *b, double v, int decimals);
/* One code point as UTF-8. */
void attn_vbuf_char(attn_vbuf *b, uint32_t c);

#endif
