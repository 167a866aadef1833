/* The number parser and UTF-8 check (see attn/parse.h). */
#include "attn/parse.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>

static int is_digit(char c) {
    return c >= '0' && c <= '9';
}

/* The digits of s as a magnitude, exactly; -1 when s is not all digits or
 * the value passes limit. */
static int magnitude(const char *s, unsigned long long limit, unsigned long long *out) {
    unsigned long long v = 0;
    if (!is_digit(s[0])) return -1;
    for (; *s; s++) {
        if (!is_digit(*s)) return -1;
        const unsigned d = (unsigned)(*s - '0');
        if (v > (limit - d) / 10) return -1; /* v * 10 + d > limit */
        v = v * 10 + d;
    }
    *out = v;
    return 0;
}

attn_status attn_parse_int(const char *s, long long lo, long long hi, long long *out) {
    if (!s || lo > hi) return ATTN_ERR_INVALID_ARG;
    const int neg = s[0] == '-';
    /* -(LLONG_MIN) as unsigned is LLONG_MAX + 1. */
    const unsigned long long limit = neg ? (unsigned long long)LLONG_MAX + 1 : LLONG_MAX;
    unsigned long long m;
    if (magnitude(s + neg, limit, &m)) return ATTN_ERR_INVALID_ARG;
    const long long v = neg ? (m == limit ? LLONG_MIN : -(long long)m) : (long long)m;
    if (v < lo || v > hi) return ATTN_ERR_INVALID_ARG;
    *out = v;
    return ATTN_OK;
}

attn_status attn_parse_uint(const char *s, unsigned long long hi, unsigned long long *out) {
    unsigned long long m;
    if (!s || magnitude(s, hi, &m)) return ATTN_ERR_INVALID_ARG;
    *out = m;
    return ATTN_OK;
}

/* Count the digits at *p and step over them. */
static size_t digits(const char **p) {
    size_t n = 0;
    while (is_digit(**p)) {
        ++*p;
        n++;
    }
    return n;
}

attn_status attn_parse_float(const char *s, double *out) {
    if (!s) return ATTN_ERR_INVALID_ARG;
    const char *p = s + (s[0] == '-');
    size_t n = digits(&p);
    if (*p == '.') {
        p++;
        n += digits(&p);
    }
    if (n == 0) return ATTN_ERR_INVALID_ARG;
    if (*p == 'e' || *p == 'E') {
        p++;
        if (*p == '+' || *p == '-') p++;
        if (digits(&p) == 0) return ATTN_ERR_INVALID_ARG;
    }
    if (*p) return ATTN_ERR_INVALID_ARG;
    /* The text is plain decimal now, which strtod reads exactly as typed. */
    char *end = NULL;
    errno = 0;
    const double x = strtod(s, &end);
    if (errno || end != p || !isfinite(x)) return ATTN_ERR_INVALID_ARG;
    *out = x;
    return ATTN_OK;
}

size_t attn_utf8_prefix(const char *s, size_t n) {
    const unsigned char *u = (const unsigned char *)s;
    for (size_t i = 0; i < n;) {
        const unsigned c = u[i];
        size_t len;
        unsigned cp, min;
        if (c < 0x80) {
            i++;
            continue;
        } else if ((c & 0xE0) == 0xC0) {
            len = 2, cp = c & 0x1F, min = 0x80;
        } else if ((c & 0xF0) == 0xE0) {
            len = 3, cp = c & 0x0F, min = 0x800;
        } else if ((c & 0xF8) == 0xF0) {
            len = 4, cp = c & 0x07, min = 0x10000;
        } else {
            return i;
        }
        if (n - i < len) return i;
        for (size_t k = 1; k < len; k++) {
            if ((u[i + k] & 0xC0) != 0x80) return i;
            cp = cp << 6 | (u[i + k] & 0x3F);
        }
        if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return i;
        i += len;
    }
    return n;
}

int attn_utf8_valid(const char *s, size_t n) {
    return attn_utf8_prefix(s, n) == n;
}
