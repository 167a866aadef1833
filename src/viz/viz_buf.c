/* The viz writers' escapes and numbers on attn/text.h's buffer (see
 * viz_buf.h). */
#include "viz_buf.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn/tokenizer.h"

void attn_vbuf_xml(attn_text *b, const char *s) {
    for (; *s; s++) {
        switch (*s) {
        case '&': attn_text_puts(b, "&amp;"); break;
        case '<': attn_text_puts(b, "&lt;"); break;
        case '>': attn_text_puts(b, "&gt;"); break;
        case '"': attn_text_puts(b, "&quot;"); break;
        case '\'': attn_text_puts(b, "&#39;"); break;
        default: attn_text_putn(b, s, 1);
        }
    }
}

void attn_vbuf_json_str(attn_text *b, const char *s) {
    attn_text_putn(b, "\"", 1);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\') {
            char e[2] = {'\\', (char)*p};
            attn_text_putn(b, e, 2);
        } else if (*p == '\n') {
            attn_text_puts(b, "\\n");
        } else if (*p < 0x20 || *p == '<' || *p == '>' || *p == '&') {
            attn_text_printf(b, "\\u%04x", *p);
        } else {
            attn_text_putn(b, (const char *)p, 1);
        }
    }
    attn_text_putn(b, "\"", 1);
}

void attn_vbuf_fixed(attn_text *b, double v, int decimals) {
    if (!isfinite(v)) {
        attn_text_puts(b, "null");
        return;
    }
    char t[64];
    int n = snprintf(t, sizeof t, "%.*f", decimals, v);
    if (n <= 0 || (size_t)n >= sizeof t) {
        snprintf(t, sizeof t, "%.9g", v);
        attn_text_puts(b, t);
        return;
    }
    if (memchr(t, '.', (size_t)n)) {
        while (n > 0 && t[n - 1] == '0')
            n--;
        if (n > 0 && t[n - 1] == '.') n--;
    }
    t[n] = '\0';
    if (strcmp(t, "-0") == 0) strcpy(t, "0");
    attn_text_putn(b, t, strlen(t));
}

void attn_vbuf_char(attn_text *b, uint32_t c) {
    char u8[8];
    int k = attn_utf8_put(c, u8);
    attn_text_putn(b, u8, (size_t)k);
}
