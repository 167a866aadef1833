/* attn/parse.h — the one number parser of the CLI options and the config
 * keys, and the UTF-8 check of text options.
 *
 * Integers are exact: decimal digits with an optional '-', nothing else (no
 * spaces, no '+', no hex, no octal); a value outside [lo, hi] is refused,
 * never rounded. Floats are decimal only: [-]digits[.digits][e[+-]digits]
 * (".5" and "5." too); no hex, no spaces, no inf or nan, and a value beyond
 * double's range (or below its normal range) is refused. Each returns
 * ATTN_OK or ATTN_ERR_INVALID_ARG and leaves *out alone on failure; the
 * caller words the message (it knows the option or key). */
#ifndef ATTN_PARSE_H
#define ATTN_PARSE_H

#include <stddef.h>

#include "attn/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* s as an integer in [lo, hi]. */
attn_status attn_parse_int(const char *s, long long lo, long long hi, long long *out);

/* s as an unsigned integer in [0, hi] (no sign at all: "-1" does not wrap). */
attn_status attn_parse_uint(const char *s, unsigned long long hi, unsigned long long *out);

/* s as a finite decimal number. */
attn_status attn_parse_float(const char *s, double *out);

/* 1 when the n bytes at s are valid UTF-8 (no overlong forms, no surrogates,
 * nothing past U+10FFFF), else 0. */
int attn_utf8_valid(const char *s, size_t n);
/* The length of the longest valid UTF-8 prefix of the n bytes at s. */
size_t attn_utf8_prefix(const char *s, size_t n);

#ifdef __cplusplus
}
#endif

#endif
