/* A growing text buffer for the viz writers (see viz_buf.h). */
#include "viz_buf.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn/tokenizer.h"

static int reserve(attn_vbuf *b, size_t extra) {
    if (b->oom) return 0;
    if (b->len + extra + 1 <= b->cap) return 1;
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->len + extra + 1)
        cap *= 2;
    char *s = realloc(b->s, cap);
    if (!s) {
        b->oom = 1;
        return 0;
    }
    b->s = s;
    b->cap = cap;
    return 1;
}

void attn_vbuf_putn(attn_vbuf *b, const char *s, size_t n) {
    if (!reserve(b, n)) return;
    memcpy(b->s + b->len, s, n);
    b->len += n;
    b->s[b->len] = '\0';
}

void attn_vbuf_puts(attn_vbuf *b, const char *s) {
    attn_vbuf_putn(b, s, strlen(s));
}

void attn_vbuf_printf(attn_vbuf *b, const char *fmt, ...) {
    char small[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (n < 0) {
        b->oom = 1;
        return;
    }
    if ((size_t)n < sizeof small) {
        attn_vbuf_putn(b, small, (size_t)n);
        return;
    }
    if (!reserve(b, (size_t)n)) return;
    va_start(ap, fmt);
    vsnprintf(b->s + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

void attn_vbuf_xml(attn_vbuf *b, const char *s) {
    for (; *s; s++) {
        switch (*s) {
        case '&': attn_vbuf_puts(b, "&amp;"); break;
        case '<': attn_vbuf_puts(b, "&lt;"); break;
        case '>': attn_vbuf_puts(b, "&gt;"); break;
        case '"': attn_vbuf_puts(b, "&quot;"); break;
        case '\'': attn_vbuf_puts(b, "&#39;"); break;
        default: attn_vbuf_putn(b, s, 1);
        }
    }
}

void attn_vbuf_json_str(attn_vbuf *b, const char *s) {
    attn_vbuf_putn(b, "\"", 1);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\') {
            char e[2] = {'\\', (char)*p};
            attn_vbuf_putn(b, e, 2);
        } else if (*p == '\n') {
            attn_vbuf_puts(b, "\\n");
        } else if (*p < 0x20 || *p == '<' || *p == '>' || *p == '&') {
            attn_vbuf_printf(b, "\\u%04x", *p);
        } else {
            attn_vbuf_putn(b, (const char *)p, 1);
        }
    }
    attn_vbuf_putn(b, "\"", 1);
}

void attn_vbuf_fixed(attn_vbuf *b, double v, int decimals) {
    if (!isfinite(v)) {
        attn_vbuf_puts(b, "null");
        return;
    }
    char t[64];
    int n = snprintf(t, sizeof t, "%.*f", decimals, v);
    if (n <= 0 || (size_t)n >= sizeof t) {
        snprintf(t, sizeof t, "%.9g", v);
        attn_vbuf_puts(b, t);
        return;
    }
    if (memchr(t, '.', (size_t)n)) {
        while (n > 0 && t[n - 1] == '0')
            n--;
        if (n > 0 && t[n - 1] == '.') n--;
    }
    t[n] = '\0';
    if (strcmp(t, "-0") == 0) strcpy(t, "0");
    attn_vbuf_putn(b, t, strlen(t));
}

void attn_vbuf_char(attn_vbuf *b, uint32_t c) {
    char u8[8];
    int k = attn_utf8_put(c, u8);
    attn_vbuf_putn(b, u8, (size_t)k);
}
