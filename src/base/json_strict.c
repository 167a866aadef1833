/* Strict JSON for the config readers (see json_strict.h). */
#include "json_strict.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <string.h>

/* 1-based line and column (in bytes) of offset off in text. */
static void line_col(const char *text, size_t off, size_t *line, size_t *col) {
    *line = 1;
    *col = 1;
    for (size_t i = 0; i < off; i++) {
        if (text[i] == '\n') {
            ++*line;
            *col = 1;
        } else {
            ++*col;
        }
    }
}

/* Offset of the first \u0000 escape inside a string of (valid) JSON text,
 * or n. */
static size_t find_nul_escape(const char *t, size_t n) {
    int in_string = 0;
    for (size_t i = 0; i < n; i++) {
        if (!in_string) {
            in_string = t[i] == '"';
        } else if (t[i] == '"') {
            in_string = 0;
        } else if (t[i] == '\\' && i + 1 < n) {
            if (t[i + 1] == 'u' && i + 5 < n && strncmp(t + i + 2, "0000", 4) == 0) return i;
            i++; /* the escaped character */
        }
    }
    return n;
}

static int is_digit(char c) {
    return c >= '0' && c <= '9';
}

/* 1 when the n bytes at t are one RFC 8259 number: -?(0|[1-9][0-9]*)
 * (.[0-9]+)?([eE][+-]?[0-9]+)?, and an integer among them (no fraction,
 * no exponent) is at most 2^53 in size, which a double holds exactly. */
static int rfc_number(const char *t, size_t n) {
    size_t i = t[0] == '-';
    const size_t int_at = i;
    if (i >= n || !is_digit(t[i])) return 0;
    if (t[i] == '0' && i + 1 < n && is_digit(t[i + 1])) return 0; /* 016 */
    while (i < n && is_digit(t[i]))
        i++;
    const size_t int_digits = i - int_at;
    const int integer = i == n;
    if (i < n && t[i] == '.') {
        const size_t at = ++i;
        while (i < n && is_digit(t[i]))
            i++;
        if (i == at) return 0; /* 1. */
    }
    if (i < n && (t[i] == 'e' || t[i] == 'E')) {
        i++;
        if (i < n && (t[i] == '+' || t[i] == '-')) i++;
        const size_t at = i;
        while (i < n && is_digit(t[i]))
            i++;
        if (i == at) return 0;
    }
    if (i != n) return 0;
    if (integer && int_digits >= 16) { /* 2^53 = 9007199254740992 has 16 digits */
        if (int_digits > 16) return 0;
        if (strncmp(t + int_at, "9007199254740992", 16) > 0) return 0;
    }
    return 1;
}

/* Offset of the first number outside strings that is not RFC 8259's (or not
 * exact), or n. cJSON reads 016, 1. and 1.e5, and rounds big integers. */
static size_t find_bad_number(const char *t, size_t n) {
    int in_string = 0;
    for (size_t i = 0; i < n; i++) {
        if (in_string) {
            if (t[i] == '"')
                in_string = 0;
            else if (t[i] == '\\')
                i++;
        } else if (t[i] == '"') {
            in_string = 1;
        } else if (t[i] == '-' || is_digit(t[i])) {
            size_t e = i;
            while (e < n && (is_digit(t[e]) || strchr("+-.eE", t[e])))
                e++;
            if (!rfc_number(t + i, e - i)) return i;
            i = e - 1;
        }
    }
    return n;
}

attn_status attn_json_parse_strict(const char *text, size_t n, const char *name, cJSON **root,
                                   attn_error *err) {
    size_t line, col;
    *root = NULL;
    const char *nul = memchr(text, '\0', n);
    if (nul) {
        line_col(text, (size_t)(nul - text), &line, &col);
        return attn_fail(err, ATTN_ERR_FORMAT, "%s: a NUL byte at byte %zu (line %zu, column %zu)",
                         name, (size_t)(nul - text), line, col);
    }
    /* cJSON skips a UTF-8 byte order mark; RFC 8259 has none (8.1). */
    if (n >= 3 && memcmp(text, "\xEF\xBB\xBF", 3) == 0)
        return attn_fail(err, ATTN_ERR_FORMAT,
                         "%s: a byte order mark (EF BB BF) at line 1, column 1: JSON text has "
                         "none (save it as UTF-8 without BOM)",
                         name);
    if (text[strspn(text, " \t\r\n")] == '\0')
        return attn_fail(err, ATTN_ERR_FORMAT, "%s: empty (no JSON)", name);
    const char *end = NULL;
    cJSON *r = cJSON_ParseWithLengthOpts(text, n, &end, 0);
    if (!r) {
        const size_t at = end && end >= text && end <= text + n ? (size_t)(end - text) : 0;
        line_col(text, at, &line, &col);
        return attn_fail(err, ATTN_ERR_FORMAT,
                         "%s: not valid JSON at line %zu, column %zu (near '%.20s')", name, line,
                         col, text + at);
    }
    size_t rest = (size_t)(end - text);
    while (rest < n && strchr(" \t\r\n", text[rest]))
        rest++;
    const size_t nul_at = find_nul_escape(text, n);
    if (rest < n || nul_at < n) {
        line_col(text, rest < n ? rest : nul_at, &line, &col);
        cJSON_Delete(r);
        if (rest < n)
            return attn_fail(err, ATTN_ERR_FORMAT,
                             "%s: text after the JSON at line %zu, column %zu ('%.20s')", name,
                             line, col, text + rest);
        return attn_fail(err, ATTN_ERR_FORMAT,
                         "%s: a NUL character (\\u0000) in a string at line %zu, column %zu", name,
                         line, col);
    }
    const size_t bad = find_bad_number(text, n);
    if (bad < n) {
        size_t len = 0;
        while (bad + len < n && (is_digit(text[bad + len]) || strchr("+-.eE", text[bad + len])))
            len++;
        line_col(text, bad, &line, &col);
        cJSON_Delete(r);
        return attn_fail(err, ATTN_ERR_FORMAT,
                         "%s: the number '%.*s' at line %zu, column %zu is not exact JSON (no "
                         "leading zeros, digits on both sides of '.', an integer at most 2^53)",
                         name, (int)(len > 40 ? 40 : len), text + bad, line, col);
    }
    *root = r;
    return ATTN_OK;
}

void attn_json_value_text(const cJSON *v, char *buf, size_t cap) {
    if (cJSON_IsNumber(v))
        snprintf(buf, cap, "%.15g", v->valuedouble);
    else if (cJSON_IsString(v))
        snprintf(buf, cap, "\"%.60s\"", v->valuestring);
    else if (cJSON_IsBool(v))
        snprintf(buf, cap, "%s", cJSON_IsTrue(v) ? "true" : "false");
    else
        snprintf(buf, cap, "%s",
                 cJSON_IsNull(v)    ? "null"
                 : cJSON_IsArray(v) ? "an array"
                                    : "an object");
}
