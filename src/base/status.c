/* Status codes and error-message recording (see attn/status.h). */
#include "attn/status.h"

#include <stdarg.h>
#include <stdio.h>

const char *attn_status_str(attn_status s) {
    switch (s) {
    case ATTN_OK: return "ok";
    case ATTN_ERR_INVALID_ARG: return "invalid argument";
    case ATTN_ERR_SHAPE: return "shape mismatch";
    case ATTN_ERR_NOMEM: return "out of memory";
    case ATTN_ERR_IO: return "I/O error";
    case ATTN_ERR_FORMAT: return "bad file format";
    case ATTN_ERR_NOT_FOUND: return "not found";
    case ATTN_ERR_STATE: return "invalid state";
    }
    return "unknown status";
}

attn_status attn_fail(attn_error *err, attn_status code, const char *fmt, ...) {
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
        err->code = code;
    }
    return code;
}

void attn_error_clear(attn_error *err) {
    if (err) {
        err->code = ATTN_OK;
        err->msg[0] = '\0';
    }
}
