/* Decoded bytes made safe to show (attn_utf8_display, attn/tokenizer.h).
 * An ill-formed sequence becomes one U+FFFD per maximal subpart, as
 * Python's bytes.decode(errors="replace") does, so C and Python show the
 * same text. */
#include <string.h>

#include "attn/tokenizer.h"

/* The bytes of the stream: the held ones, then the new ones. */
typedef struct stream {
    const unsigned char *held, *in;
    size_t n_held, n;
} stream;

static unsigned at(const stream *s, size_t k) {
    return k < s->n_held ? s->held[k] : s->in[k - s->n_held];
}

/* The length a lead byte announces (0: not a lead) and the range its
 * second byte must lie in (Unicode's table of well-formed sequences). */
static int lead_len(unsigned c, unsigned *lo, unsigned *hi) {
    *lo = 0x80, *hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) return 2;
    if (c >= 0xE0 && c <= 0xEF) {
        if (c == 0xE0) *lo = 0xA0;
        if (c == 0xED) *hi = 0x9F; /* no surrogates */
        return 3;
    }
    if (c >= 0xF0 && c <= 0xF4) {
        if (c == 0xF0) *lo = 0x90;
        if (c == 0xF4) *hi = 0x8F; /* nothing past U+10FFFF */
        return 4;
    }
    return 0;
}

/* How many bytes from k are a well-formed prefix of one character (1 for
 * an ASCII byte other than NUL); *whole when the character is complete. */
static size_t well_formed(const stream *s, size_t k, size_t total, int *whole) {
    const unsigned c = at(s, k);
    unsigned lo, hi;
    *whole = 0;
    if (c > 0 && c < 0x80) {
        *whole = 1;
        return 1;
    }
    const int len = lead_len(c, &lo, &hi);
    if (!len) return 0;
    size_t m = 1;
    for (; m < (size_t)len && k + m < total; m++) {
        const unsigned b = at(s, k + m);
        if (b < (m == 1 ? lo : 0x80) || b > (m == 1 ? hi : 0xBF)) return m;
    }
    *whole = m == (size_t)len;
    return m;
}

static size_t put_fffd(char *out) {
    memcpy(out, "\xEF\xBF\xBD", 3);
    return 3;
}

size_t attn_utf8_display_put(attn_utf8_display *d, const char *in, size_t n, char *out) {
    const stream s = {d->held, (const unsigned char *)in, (size_t)d->n_held, n};
    const size_t total = s.n_held + n;
    size_t k = 0, o = 0;
    unsigned char keep[4];
    int n_keep = 0;
    while (k < total) {
        int whole;
        const size_t m = well_formed(&s, k, total, &whole);
        if (whole) {
            for (size_t j = 0; j < m; j++)
                out[o++] = (char)at(&s, k + j);
        } else if (m > 0 && k + m == total) { /* cut short: wait for the rest */
            for (size_t j = 0; j < m; j++)
                keep[n_keep++] = (unsigned char)at(&s, k + j);
        } else {
            o += put_fffd(out + o);
        }
        k += m ? m : 1;
    }
    memcpy(d->held, keep, (size_t)n_keep);
    d->n_held = n_keep;
    out[o] = '\0';
    return o;
}

size_t attn_utf8_display_end(attn_utf8_display *d, char *out) {
    size_t o = d->n_held ? put_fffd(out) : 0; /* one incomplete character */
    d->n_held = 0;
    out[o] = '\0';
    return o;
}
