/* Internal: what the viz writers (src/viz*.c) append to their text
 * (attn/text.h: a failed allocation sets oom, every later append a no-op). */
#ifndef ATTN_VIZ_BUF_H
#define ATTN_VIZ_BUF_H

#include <stddef.h>
#include <stdint.h>

#include "attn/text.h"

/* s escaped for XML/HTML text and attribute values (& < > " '). */
void attn_vbuf_xml(attn_text *b, const char *s);
/* s as a JSON string literal, quotes included; '<' is written \u003c so the
 * text can sit inside a <script> element. */
void attn_vbuf_json_str(attn_text *b, const char *s);
/* v with at most `decimals` digits after the point, trailing zeros dropped
 * ("0.25", "1", "0"); JSON-safe (non-finite as null). */
void attn_vbuf_fixed(attn_text *b, double v, int decimals);
/* One code point as UTF-8. */
void attn_vbuf_char(attn_text *b, uint32_t c);

#endif
