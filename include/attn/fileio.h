/* attn/fileio.h — whole-file reads and atomic writes.
 *
 * Every file attn writes goes through here so that a failure (bad path, full
 * disk, crash, caller abort) never leaves a partial file behind: data goes to
 * a temp file in the target's directory (mkstemp), is fsync'ed, renamed over
 * the target, and the directory is fsync'ed. Error messages name the path and
 * give strerror(errno). */
#ifndef ATTN_FILEIO_H
#define ATTN_FILEIO_H

#include <stddef.h>

#include "attn/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Default size cap for attn_file_read_all when max_bytes == 0 (16 GiB). */
#define ATTN_FILE_READ_DEFAULT_MAX ((size_t)1 << 34)

/* Read the whole file at path into a new malloc'd buffer (*out_data, free()
 * it) of *out_size bytes; one extra '\0' byte follows the data so text can be
 * used as a C string. Fails (ATTN_ERR_IO) if the file cannot be opened/read,
 * is a directory, or is larger than max_bytes (0 = ATTN_FILE_READ_DEFAULT_MAX).
 * On failure *out_data = NULL, *out_size = 0. */
attn_status attn_file_read_all(const char *path, size_t max_bytes, void **out_data,
                               size_t *out_size, attn_error *err);

/* Streaming atomic write:
 *
 *     attn_atomic_file f;
 *     if ((s = attn_atomic_open(&f, path, err))) return s;
 *     if ((s = attn_atomic_write(&f, hdr, n, err))) return s;   // f already aborted
 *     if ((s = attn_atomic_write(&f, data, m, err))) return s;
 *     return attn_atomic_commit(&f, err);                       // aborts on failure
 *
 * A failed write or commit aborts by itself (temp file removed); a caller that
 * gives up for its own reasons calls attn_atomic_abort. abort is idempotent and
 * safe on a committed/aborted/zeroed handle. Until commit returns ATTN_OK the
 * target is untouched. The new file gets the target's old permission bits if it
 * existed, else 0666 & ~umask. */
typedef struct attn_atomic_file {
    int fd;         /* temp file descriptor, -1 when closed */
    char *path;     /* target path (owned copy) */
    char *tmp_path; /* temp path in the same directory (owned), NULL when gone */
} attn_atomic_file;

attn_status attn_atomic_open(attn_atomic_file *f, const char *path, attn_error *err);
attn_status attn_atomic_write(attn_atomic_file *f, const void *data, size_t n, attn_error *err);
attn_status attn_atomic_commit(attn_atomic_file *f, attn_error *err);
void attn_atomic_abort(attn_atomic_file *f);

/* One-shot form: atomically replace path with the n bytes at data. */
attn_status attn_file_write_atomic(const char *path, const void *data, size_t n, attn_error *err);

#ifdef __cplusplus
}
#endif
#endif
