/* attn/status.h — status codes and error messages.
 *
 * Every fallible library call returns an attn_status and, when given a
 * non-NULL attn_error*, writes a one-line human-readable message into it.
 * The library never prints and never exits; the caller decides. */
#ifndef ATTN_STATUS_H
#define ATTN_STATUS_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum attn_status {
    ATTN_OK = 0,
    ATTN_ERR_INVALID_ARG, /* a dimension, rate or option is out of range */
    ATTN_ERR_SHAPE,       /* tensor shapes do not fit together          */
    ATTN_ERR_NOMEM,       /* an allocation failed                       */
    ATTN_ERR_IO,          /* open/read/write/rename failed              */
    ATTN_ERR_FORMAT,      /* a file is not what it claims to be         */
    ATTN_ERR_NOT_FOUND,   /* a named tensor/key/entry is missing        */
    ATTN_ERR_STATE        /* call order violated (e.g. backward first)  */
} attn_status;

#define ATTN_ERROR_MSG_MAX 512

typedef struct attn_error {
    attn_status code;
    char msg[ATTN_ERROR_MSG_MAX];
} attn_error;

/* Short stable name of a status ("ok", "invalid argument", ...). */
const char *attn_status_str(attn_status s);

/* Record (code, printf-style message) in err if err != NULL; returns code so
 * callers can write `return attn_fail(err, ATTN_ERR_SHAPE, "...", ...);`. */
attn_status attn_fail(attn_error *err, attn_status code, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* Clear an error record (code = ATTN_OK, empty message). */
void attn_error_clear(attn_error *err);

#ifdef __cplusplus
}
#endif
#endif
