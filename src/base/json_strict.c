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
