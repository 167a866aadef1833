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
#include <stdint.h>

#include "attn/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Default size cap for attn_file_read_all when max_bytes == 0 (16 GiB). */
#define ATTN_FILE_READ_DEFAULT_MAX ((size_t)1 << 34)

/* Read the whole file at path into a new malloc'd buffer (*out_data, free()
 * it) of *out_size bytes; one extra '\0' byte follows the data so text can be
 * used as a C string. Fails (ATTN_ERR_IO) if the file cannot be opened/read,
 * is a directory or a device (see attn_file_in_open; "-" is stdin), or is
 * larger than max_bytes (0 = ATTN_FILE_READ_DEFAULT_MAX).
 * On failure *out_data = NULL, *out_size = 0. */
attn_status attn_file_read_all(const char *path, size_t max_bytes, void **out_data,
                               size_t *out_size, attn_error *err);

/* Input that is checked as it is read (loaders read a header, check it, then
 * the body). Opens path ("-" = stdin); refuses a directory and any
 * non-regular file that is not a pipe/FIFO or stdin (a device such as
 * /dev/zero would stream forever). regular/size describe a regular file. */
typedef struct attn_file_in {
    int fd;
    int regular;
    uint64_t size;
} attn_file_in;

attn_status attn_file_in_open(attn_file_in *in, const char *path, attn_error *err);
/* Read n bytes into buf, fewer only at end of input; *got = how many. */
attn_status attn_file_in_read(attn_file_in *in, const char *path, void *buf, size_t n, size_t *got,
                              attn_error *err);
void attn_file_in_close(attn_file_in *in);

/* Read n bytes at byte off of the open file fd into buf (pread: no file
 * position, any thread), fewer only where the file ends: *got = how many.
 * A read error is ATTN_ERR_IO naming path; a short count is the caller's
 * to judge (a file that shrank under a reader, attn/dataset.h). */
attn_status attn_file_pread(int fd, const char *path, void *buf, size_t n, uint64_t off,
                            size_t *got, attn_error *err);

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
 * existed, else 0666 & ~umask.
 *
 * What is never replaced: a symlink is followed (its final target is replaced
 * atomically, the link stays); an existing device, FIFO or socket, a link
 * through /proc (/dev/stdout, /proc/self/fd/N) and the path "-" (stdout) are
 * written directly, in place ("direct": no temp file, no rename). */
typedef struct attn_atomic_file {
    int fd;         /* temp file descriptor, -1 when closed */
    char *path;     /* target path (owned copy) */
    char *tmp_path; /* temp path in the same directory (owned), NULL when gone */
    int direct;     /* writing in place into a non-regular target */
} attn_atomic_file;

attn_status attn_atomic_open(attn_atomic_file *f, const char *path, attn_error *err);
attn_status attn_atomic_write(attn_atomic_file *f, const void *data, size_t n, attn_error *err);
/* attn_atomic_write, but each run of whole 64 KiB blocks of zeros in data is
 * skipped in a temp file, left as a hole that reads back as zeros (the same
 * bytes, none of them written: a step-0 checkpoint's AdamW moments cost no
 * I/O); a direct target gets every byte written. */
attn_status attn_atomic_write_sparse(attn_atomic_file *f, const void *data, size_t n,
                                     attn_error *err);
attn_status attn_atomic_commit(attn_atomic_file *f, attn_error *err);
void attn_atomic_abort(attn_atomic_file *f);

/* Would attn_atomic_open(path) succeed? Checked without touching the target
 * (a temp file is made and removed beside a regular target; a device or FIFO
 * is only checked for write permission, never opened). */
attn_status attn_file_check_writable(const char *path, attn_error *err);

/* Refuse an output that is also an input: path, once every symbolic link is
 * followed, is the same file (device and inode) as one of the n inputs
 * (NULL entries are skipped), be it through a link, a hard link or another
 * name. An output that does not exist yet, or that is not a regular file
 * (written in place), is no input. ATTN_ERR_INVALID_ARG naming both. The
 * commands use attn_output_check (attn/checkpoint.h), which checks this and
 * more (run folders, two outputs on one file). */
attn_status attn_file_check_not_input(const char *path, const char *const *inputs, int n,
                                      attn_error *err);

/* 1 if name is a temp name that attn's writers give `base` in its folder:
 * ".<base>.tmp-" then letters or digits (attn_atomic_open's, or a pid). */
int attn_file_is_temp_name(const char *name, const char *base);

/* out = "dir/name": 0, or -1 when that needs more than cap bytes. */
int attn_path_join(char *out, size_t cap, const char *dir, const char *name);

/* One-shot form: atomically replace path with the n bytes at data. */
attn_status attn_file_write_atomic(const char *path, const void *data, size_t n, attn_error *err);

#ifdef __cplusplus
}
#endif
#endif
