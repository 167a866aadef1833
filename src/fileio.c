/* Whole-file reads and atomic writes (see attn/fileio.h). */
#define _POSIX_C_SOURCE 200809L
#include "attn/fileio.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

attn_status attn_file_read_all(const char *path, size_t max_bytes, void **out_data,
                               size_t *out_size, attn_error *err) {
    *out_data = NULL;
    *out_size = 0;
    if (max_bytes == 0) max_bytes = ATTN_FILE_READ_DEFAULT_MAX;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return attn_fail(err, ATTN_ERR_IO, "cannot open '%s': %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return attn_fail(err, ATTN_ERR_IO, "cannot stat '%s': %s", path, strerror(e));
    }
    if (S_ISDIR(st.st_mode)) {
        close(fd);
        return attn_fail(err, ATTN_ERR_IO, "cannot read '%s': %s", path, strerror(EISDIR));
    }
    /* Regular files: size known up front; pipes etc.: grow as we go. */
    if (S_ISREG(st.st_mode) && (uint64_t)st.st_size > (uint64_t)max_bytes) {
        close(fd);
        return attn_fail(err, ATTN_ERR_IO, "'%s' is %lld bytes, more than the limit of %zu bytes",
                         path, (long long)st.st_size, max_bytes);
    }
    size_t cap = S_ISREG(st.st_mode) ? (size_t)st.st_size : 65536;
    if (cap > max_bytes) cap = max_bytes;
    char *buf = malloc(cap + 1);
    if (!buf) goto nomem;
    size_t n = 0;
    for (;;) {
        if (n == cap) {
            /* Full: read one more byte to tell EOF from "keep growing". */
            char probe;
            ssize_t r = read(fd, &probe, 1);
            if (r == 0) break;
            if (r < 0) {
                if (errno == EINTR) continue;
                goto ioerr;
            }
            if (n + 1 > max_bytes) {
                free(buf);
                close(fd);
                return attn_fail(err, ATTN_ERR_IO, "'%s' is more than the limit of %zu bytes", path,
                                 max_bytes);
            }
            size_t ncap = cap < 32768 ? 65536 : cap * 2;
            if (ncap > max_bytes) ncap = max_bytes;
            char *nb = realloc(buf, ncap + 1);
            if (!nb) goto nomem;
            buf = nb;
            cap = ncap;
            buf[n++] = probe;
            continue;
        }
        ssize_t r = read(fd, buf + n, cap - n);
        if (r == 0) break;
        if (r < 0) {
            if (errno == EINTR) continue;
            goto ioerr;
        }
        n += (size_t)r;
    }
    close(fd);
    buf[n] = '\0';
    *out_data = buf;
    *out_size = n;
    return ATTN_OK;
ioerr : {
    int e = errno;
    free(buf);
    close(fd);
    return attn_fail(err, ATTN_ERR_IO, "cannot read '%s': %s", path, strerror(e));
}
nomem:
    free(buf);
    close(fd);
    return attn_fail(err, ATTN_ERR_NOMEM, "out of memory reading '%s'", path);
}

/* Current umask without changing it for other threads: Linux reports it in
 * /proc/self/status; elsewhere assume the common 022. */
static mode_t current_umask(void) {
    FILE *fp = fopen("/proc/self/status", "r");
    mode_t m = 022;
    if (!fp) return m;
    char line[256];
    while (fgets(line, sizeof line, fp)) {
        unsigned v;
        if (sscanf(line, "Umask: %o", &v) == 1) {
            m = (mode_t)v;
            break;
        }
    }
    fclose(fp);
    return m;
}

static void free_names(attn_atomic_file *f) {
    free(f->path);
    free(f->tmp_path);
    f->path = NULL;
    f->tmp_path = NULL;
}

attn_status attn_atomic_open(attn_atomic_file *f, const char *path, attn_error *err) {
    f->fd = -1;
    f->path = NULL;
    f->tmp_path = NULL;
    if (!path || !*path) return attn_fail(err, ATTN_ERR_INVALID_ARG, "empty output path");
    size_t len = strlen(path);
    if (path[len - 1] == '/')
        return attn_fail(err, ATTN_ERR_IO, "cannot write '%s': %s", path, strerror(EISDIR));
    /* Temp name "<dir>/.<base>.tmp-XXXXXX" keeps it on the target's filesystem. */
    const char *slash = strrchr(path, '/');
    size_t dirlen = slash ? (size_t)(slash - path) + 1 : 0;
    const char *base = path + dirlen;
    f->path = malloc(len + 1);
    f->tmp_path = malloc(len + 16);
    if (!f->path || !f->tmp_path) {
        free_names(f);
        return attn_fail(err, ATTN_ERR_NOMEM, "out of memory opening '%s'", path);
    }
    memcpy(f->path, path, len + 1);
    memcpy(f->tmp_path, path, dirlen);
    sprintf(f->tmp_path + dirlen, ".%s.tmp-XXXXXX", base);
    int fd = mkstemp(f->tmp_path);
    if (fd < 0) {
        int e = errno;
        free_names(f);
        return attn_fail(err, ATTN_ERR_IO, "cannot create a file next to '%s': %s", path,
                         strerror(e));
    }
    struct stat st;
    mode_t mode = stat(path, &st) == 0 ? (st.st_mode & 07777) : (0666 & ~current_umask());
    if (fchmod(fd, mode) != 0) { /* not fatal: the file is still correct */
    }
    f->fd = fd;
    return ATTN_OK;
}

void attn_atomic_abort(attn_atomic_file *f) {
    /* A live handle always has tmp_path; a zeroed one (fd 0!) must not
     * close anything. */
    if (!f || !f->tmp_path) {
        if (f) f->fd = -1;
        return;
    }
    if (f->fd >= 0) close(f->fd);
    f->fd = -1;
    unlink(f->tmp_path);
    free_names(f);
}

static attn_status fail_abort(attn_atomic_file *f, attn_error *err, const char *what, int e) {
    attn_status s = attn_fail(err, ATTN_ERR_IO, "cannot %s '%s': %s", what, f->path ? f->path : "?",
                              strerror(e));
    attn_atomic_abort(f);
    return s;
}

attn_status attn_atomic_write(attn_atomic_file *f, const void *data, size_t n, attn_error *err) {
    if (f->fd < 0 || !f->tmp_path)
        return attn_fail(err, ATTN_ERR_STATE, "write to '%s' after it was committed or aborted",
                         f->path ? f->path : "?");
    const char *p = data;
    while (n > 0) {
        /* Linux writes at most ~2 GiB per call; chunk to stay portable. */
        size_t chunk = n > ((size_t)1 << 30) ? ((size_t)1 << 30) : n;
        ssize_t w = write(f->fd, p, chunk);
        if (w < 0) {
            if (errno == EINTR) continue;
            return fail_abort(f, err, "write", errno);
        }
        if (w == 0) return fail_abort(f, err, "write", EIO);
        p += w;
        n -= (size_t)w;
    }
    return ATTN_OK;
}

/* fsync the directory holding path so the rename itself is durable. */
static int fsync_parent(const char *path) {
    const char *slash = strrchr(path, '/');
    char *dir;
    if (!slash) {
        dir = malloc(2);
        if (!dir) return ENOMEM;
        strcpy(dir, ".");
    } else {
        size_t dl = slash == path ? 1 : (size_t)(slash - path);
        dir = malloc(dl + 1);
        if (!dir) return ENOMEM;
        memcpy(dir, path, dl);
        dir[dl] = '\0';
    }
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    free(dir);
    if (fd < 0) return errno;
    int rc = 0;
    /* Some filesystems cannot fsync a directory; that is not a data loss. */
    if (fsync(fd) != 0 && errno != EINVAL && errno != ENOTSUP) rc = errno;
    close(fd);
    return rc;
}

attn_status attn_atomic_commit(attn_atomic_file *f, attn_error *err) {
    if (f->fd < 0 || !f->tmp_path)
        return attn_fail(err, ATTN_ERR_STATE, "commit of '%s' after it was committed or aborted",
                         f->path ? f->path : "?");
    if (fsync(f->fd) != 0) return fail_abort(f, err, "sync", errno);
    int fd = f->fd;
    f->fd = -1;
    if (close(fd) != 0) return fail_abort(f, err, "close", errno);
    if (rename(f->tmp_path, f->path) != 0) return fail_abort(f, err, "write", errno);
    free(f->tmp_path);
    f->tmp_path = NULL; /* renamed: nothing left to remove */
    int e = fsync_parent(f->path);
    attn_status s = ATTN_OK;
    if (e)
        s = attn_fail(err, ATTN_ERR_IO, "wrote '%s' but cannot sync its directory: %s", f->path,
                      strerror(e));
    free_names(f);
    return s;
}

attn_status attn_file_write_atomic(const char *path, const void *data, size_t n, attn_error *err) {
    attn_atomic_file f;
    attn_status s = attn_atomic_open(&f, path, err);
    if (s) return s;
    if ((s = attn_atomic_write(&f, data, n, err))) return s;
    return attn_atomic_commit(&f, err);
}
