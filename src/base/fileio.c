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

static const char *kind_name(mode_t m) {
    return S_ISCHR(m)    ? "a character device"
           : S_ISBLK(m)  ? "a block device"
           : S_ISSOCK(m) ? "a socket"
           : S_ISDIR(m)  ? "a directory"
                         : "not a regular file";
}

attn_status attn_file_in_open(attn_file_in *in, const char *path, attn_error *err) {
    in->fd = -1;
    in->regular = 0;
    in->size = 0;
    const int is_dash = strcmp(path, "-") == 0;
    int fd = is_dash ? dup(STDIN_FILENO) : open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return attn_fail(err, ATTN_ERR_IO, "cannot open '%s': %s", path, strerror(errno));
    struct stat st, st0;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return attn_fail(err, ATTN_ERR_IO, "cannot stat '%s': %s", path, strerror(e));
    }
    if (S_ISDIR(st.st_mode)) {
        close(fd);
        return attn_fail(err, ATTN_ERR_IO, "cannot read '%s': %s", path, strerror(EISDIR));
    }
    /* Regular files, pipes and stdin are inputs; a device (/dev/zero,
     * /dev/urandom) would stream forever. */
    const int is_stdin = is_dash || (fstat(STDIN_FILENO, &st0) == 0 && st0.st_dev == st.st_dev &&
                                     st0.st_ino == st.st_ino);
    if (!S_ISREG(st.st_mode) && !S_ISFIFO(st.st_mode) && !is_stdin) {
        close(fd);
        return attn_fail(err, ATTN_ERR_IO,
                         "cannot read '%s': it is %s, not a regular file, a pipe or stdin", path,
                         kind_name(st.st_mode));
    }
    in->fd = fd;
    in->regular = S_ISREG(st.st_mode);
    in->size = in->regular ? (uint64_t)st.st_size : 0;
    return ATTN_OK;
}

/* n bytes into buf from fd: read() on from where it stands (off < 0), or
 * pread() at off; *got short only at the end of the file. */
static attn_status read_loop(int fd, const char *path, void *buf, size_t n, int64_t off,
                             size_t *got, attn_error *err) {
    size_t k = 0;
    while (k < n) {
        const size_t ask = n - k > ((size_t)1 << 30) ? (size_t)1 << 30 : n - k;
        const ssize_t r = off < 0 ? read(fd, (char *)buf + k, ask)
                                  : pread(fd, (char *)buf + k, ask, (off_t)(off + (int64_t)k));
        if (r == 0) break;
        if (r < 0) {
            if (errno == EINTR) continue;
            int e = errno;
            *got = k;
            return attn_fail(err, ATTN_ERR_IO, "cannot read '%s': %s", path, strerror(e));
        }
        k += (size_t)r;
    }
    *got = k;
    return ATTN_OK;
}

attn_status attn_file_in_read(attn_file_in *in, const char *path, void *buf, size_t n, size_t *got,
                              attn_error *err) {
    return read_loop(in->fd, path, buf, n, -1, got, err);
}

attn_status attn_file_pread(int fd, const char *path, void *buf, size_t n, uint64_t off,
                            size_t *got, attn_error *err) {
    if (off > (uint64_t)INT64_MAX)
        return attn_fail(err, ATTN_ERR_IO, "cannot read '%s': offset", path);
    return read_loop(fd, path, buf, n, (int64_t)off, got, err);
}

void attn_file_in_close(attn_file_in *in) {
    if (in && in->fd >= 0) close(in->fd);
    if (in) in->fd = -1;
}

/* read_to_end's failures besides an errno. */
enum { READ_TOO_BIG = -1, READ_NOMEM = -2 };

/* Reads fd to its end into *buf (malloc'd, capacity cap + 1), growing it
 * up to max_bytes: *n bytes. 0, an errno of read, READ_TOO_BIG or
 * READ_NOMEM; *buf is the buffer to free either way. */
static int read_to_end(int fd, size_t max_bytes, size_t cap, char **buf, size_t *n) {
    *n = 0;
    for (;;) {
        if (*n == cap) {
            /* Full: read one more byte to tell EOF from "keep growing". */
            char probe;
            ssize_t r = read(fd, &probe, 1);
            if (r == 0) return 0;
            if (r < 0) {
                if (errno == EINTR) continue;
                return errno;
            }
            if (*n + 1 > max_bytes) return READ_TOO_BIG;
            size_t ncap = cap < 32768 ? 65536 : cap * 2;
            if (ncap > max_bytes) ncap = max_bytes;
            char *nb = realloc(*buf, ncap + 1);
            if (!nb) return READ_NOMEM;
            *buf = nb;
            cap = ncap;
            (*buf)[(*n)++] = probe;
            continue;
        }
        ssize_t r = read(fd, *buf + *n, cap - *n);
        if (r == 0) return 0;
        if (r < 0) {
            if (errno == EINTR) continue;
            return errno;
        }
        *n += (size_t)r;
    }
}

attn_status attn_file_read_all(const char *path, size_t max_bytes, void **out_data,
                               size_t *out_size, attn_error *err) {
    *out_data = NULL;
    *out_size = 0;
    if (max_bytes == 0) max_bytes = ATTN_FILE_READ_DEFAULT_MAX;
    attn_file_in in;
    attn_status os = attn_file_in_open(&in, path, err);
    if (os) return os;
    /* Regular files: size known up front; pipes etc.: grow as we go. */
    if (in.regular && in.size > (uint64_t)max_bytes) {
        attn_file_in_close(&in);
        return attn_fail(err, ATTN_ERR_IO, "'%s' is %lld bytes, more than the limit of %zu bytes",
                         path, (long long)in.size, max_bytes);
    }
    size_t cap = in.regular ? (size_t)in.size : 65536, n = 0;
    if (cap > max_bytes) cap = max_bytes;
    char *buf = malloc(cap + 1);
    const int rc = buf ? read_to_end(in.fd, max_bytes, cap, &buf, &n) : READ_NOMEM;
    attn_file_in_close(&in);
    if (rc) free(buf);
    if (rc == READ_NOMEM) return attn_fail(err, ATTN_ERR_NOMEM, "out of memory reading '%s'", path);
    if (rc == READ_TOO_BIG)
        return attn_fail(err, ATTN_ERR_IO, "'%s' is more than the limit of %zu bytes", path,
                         max_bytes);
    if (rc) return attn_fail(err, ATTN_ERR_IO, "cannot read '%s': %s", path, strerror(rc));
    buf[n] = '\0';
    *out_data = buf;
    *out_size = n;
    return ATTN_OK;
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

/* Follow the symlinks at the end of path (up to 40). *out: the final path
 * (malloc'd). *magic: a link in /proc was met (e.g. /dev/stdout ->
 * /proc/self/fd/1): its target is not a path to rename onto. Returns 0 or an
 * errno. */
static int resolve_links(const char *path, char **out, int *magic) {
    *magic = 0;
    char *cur = strdup(path);
    if (!cur) return ENOMEM;
    for (int hops = 0; hops < 40; hops++) {
        struct stat sb;
        if (lstat(cur, &sb) != 0 || !S_ISLNK(sb.st_mode)) {
            *out = cur;
            return 0;
        }
        if (strncmp(cur, "/proc/", 6) == 0) {
            *magic = 1;
            *out = cur;
            return 0;
        }
        char target[4096];
        ssize_t k = readlink(cur, target, sizeof target - 1);
        if (k < 0) {
            int e = errno;
            free(cur);
            return e;
        }
        target[k] = '\0';
        const char *slash = strrchr(cur, '/');
        size_t dl = target[0] == '/' || !slash ? 0 : (size_t)(slash - cur) + 1;
        char *next = malloc(dl + (size_t)k + 1);
        if (!next) {
            free(cur);
            return ENOMEM;
        }
        memcpy(next, cur, dl);
        memcpy(next + dl, target, (size_t)k + 1);
        free(cur);
        cur = next;
    }
    free(cur);
    return ELOOP;
}

static void free_names(attn_atomic_file *f) {
    free(f->path);
    free(f->tmp_path);
    f->path = NULL;
    f->tmp_path = NULL;
}

/* Write straight into an existing non-regular file (device, FIFO, stdout):
 * replacing it by a regular file would destroy it. */
static attn_status open_direct(attn_atomic_file *f, const char *shown, int fd, attn_error *err) {
    f->direct = 1;
    f->fd = fd;
    f->path = strdup(shown);
    f->tmp_path = strdup(shown); /* marks the handle live */
    if (!f->path || !f->tmp_path) {
        close(fd);
        f->fd = -1;
        free_names(f);
        return attn_fail(err, ATTN_ERR_NOMEM, "out of memory opening '%s'", shown);
    }
    return ATTN_OK;
}

/* An existing target that is not a regular file, or one reached through
 * /proc, is written in place (resolved: the path its links lead to). */
static attn_status open_in_place(attn_atomic_file *f, const char *path_in, const char *resolved,
                                 const struct stat *target, attn_error *err) {
    if (S_ISDIR(target->st_mode))
        return attn_fail(err, ATTN_ERR_IO, "cannot write '%s': %s", path_in, strerror(EISDIR));
    int fd =
        open(resolved, O_WRONLY | O_NOCTTY | O_CLOEXEC | (S_ISREG(target->st_mode) ? O_TRUNC : 0));
    if (fd < 0)
        return attn_fail(err, ATTN_ERR_IO, "cannot write '%s': %s", path_in, strerror(errno));
    return open_direct(f, path_in, fd, err);
}

/* The temp file beside path, "<dir>/.<base>.tmp-XXXXXX" (on the target's
 * filesystem), with the target's mode, or the umask's for a new file. */
static attn_status open_temp(attn_atomic_file *f, const char *path_in, const char *path,
                             attn_error *err) {
    const size_t len = strlen(path);
    const char *slash = strrchr(path, '/');
    size_t dirlen = slash ? (size_t)(slash - path) + 1 : 0;
    const char *base = path + dirlen;
    f->path = malloc(len + 1);
    f->tmp_path = malloc(len + 16);
    if (!f->path || !f->tmp_path) {
        free_names(f);
        return attn_fail(err, ATTN_ERR_NOMEM, "out of memory opening '%s'", path_in);
    }
    memcpy(f->path, path, len + 1);
    memcpy(f->tmp_path, path, dirlen);
    sprintf(f->tmp_path + dirlen, ".%s.tmp-XXXXXX", base);
    int fd = mkstemp(f->tmp_path);
    if (fd < 0) {
        int e = errno;
        free_names(f);
        return attn_fail(err, ATTN_ERR_IO, "cannot create a file next to '%s': %s", path_in,
                         strerror(e));
    }
    struct stat st;
    mode_t mode = stat(path, &st) == 0 ? (st.st_mode & 07777) : (0666 & ~current_umask());
    if (fchmod(fd, mode) != 0) { /* not fatal: the file is still correct */
    }
    f->fd = fd;
    return ATTN_OK;
}

attn_status attn_atomic_open(attn_atomic_file *f, const char *path_in, attn_error *err) {
    f->fd = -1;
    f->path = NULL;
    f->tmp_path = NULL;
    f->direct = 0;
    if (!path_in || !*path_in) return attn_fail(err, ATTN_ERR_INVALID_ARG, "empty output path");
    if (strcmp(path_in, "-") == 0) {
        int fd = dup(STDOUT_FILENO);
        if (fd < 0)
            return attn_fail(err, ATTN_ERR_IO, "cannot write to stdout: %s", strerror(errno));
        return open_direct(f, "stdout", fd, err);
    }
    if (path_in[strlen(path_in) - 1] == '/')
        return attn_fail(err, ATTN_ERR_IO, "cannot write '%s': %s", path_in, strerror(EISDIR));
    /* A symlink stays: its target is what gets replaced. */
    char *resolved = NULL;
    int magic = 0, re = resolve_links(path_in, &resolved, &magic);
    if (re) return attn_fail(err, ATTN_ERR_IO, "cannot write '%s': %s", path_in, strerror(re));
    struct stat target;
    attn_status s;
    if (stat(resolved, &target) == 0 && (magic || !S_ISREG(target.st_mode)))
        s = open_in_place(f, path_in, resolved, &target, err);
    else
        s = open_temp(f, path_in, resolved, err);
    free(resolved);
    return s;
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
    if (!f->direct) unlink(f->tmp_path);
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

/* attn_atomic_write_sparse's unit: a run of whole blocks of zeros is left
 * as a hole. */
#define SPARSE_BLOCK ((size_t)1 << 16)

static int zero_block(const unsigned char *p, size_t n) {
    return n == SPARSE_BLOCK && p[0] == 0 && memcmp(p, p + 1, n - 1) == 0;
}

attn_status attn_atomic_write_sparse(attn_atomic_file *f, const void *data, size_t n,
                                     attn_error *err) {
    if (f->direct || f->fd < 0 || !f->tmp_path) return attn_atomic_write(f, data, n, err);
    const unsigned char *p = data;
    int hole = 0; /* the last bytes were skipped: the size is set at the end */
    while (n > 0) {
        size_t len = 0;
        const int zero = zero_block(p, n < SPARSE_BLOCK ? n : SPARSE_BLOCK);
        while (len < n) {
            const size_t b = n - len < SPARSE_BLOCK ? n - len : SPARSE_BLOCK;
            if (zero_block(p + len, b) != zero) break;
            len += b;
        }
        attn_status s = ATTN_OK;
        if (!zero)
            s = attn_atomic_write(f, p, len, err);
        else if (lseek(f->fd, (off_t)len, SEEK_CUR) < 0)
            s = fail_abort(f, err, "write", errno);
        if (s) return s;
        hole = zero;
        p += len;
        n -= len;
    }
    const off_t end = hole ? lseek(f->fd, 0, SEEK_CUR) : 0;
    if (hole && (end < 0 || ftruncate(f->fd, end) != 0)) return fail_abort(f, err, "write", errno);
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
    if (f->direct) {
        /* Pipes and most devices cannot sync (EINVAL): nothing to wait for. */
        int e =
            fsync(f->fd) != 0 && errno != EINVAL && errno != ENOTSUP && errno != EROFS ? errno : 0;
        int fd = f->fd;
        f->fd = -1;
        if (!e && close(fd) != 0)
            e = errno;
        else if (e)
            close(fd);
        attn_status s =
            e ? attn_fail(err, ATTN_ERR_IO, "cannot write '%s': %s", f->path, strerror(e))
              : ATTN_OK;
        free_names(f);
        return s;
    }
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

attn_status attn_file_check_not_input(const char *path, const char *const *inputs, int n,
                                      attn_error *err) {
    struct stat out, in;
    if (!path || strcmp(path, "-") == 0 || stat(path, &out) != 0 || !S_ISREG(out.st_mode))
        return ATTN_OK;
    for (int i = 0; i < n; i++) {
        if (!inputs[i] || strcmp(inputs[i], "-") == 0 || stat(inputs[i], &in) != 0) continue;
        if (in.st_dev == out.st_dev && in.st_ino == out.st_ino)
            return attn_fail(err, ATTN_ERR_INVALID_ARG,
                             "cannot write '%s': it is the input '%s'%s, which writing would "
                             "destroy; choose another output path",
                             path, inputs[i], strcmp(path, inputs[i]) ? " under another name" : "");
    }
    return ATTN_OK;
}

int attn_file_is_temp_name(const char *name, const char *base) {
    const size_t n = strlen(base);
    if (name[0] != '.' || strncmp(name + 1, base, n) != 0) return 0;
    const char *p = name + 1 + n;
    if (strncmp(p, ".tmp-", 5) != 0 || !p[5]) return 0;
    for (p += 5; *p; p++)
        if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z')))
            return 0;
    return 1;
}

attn_status attn_file_write_atomic(const char *path, const void *data, size_t n, attn_error *err) {
    attn_atomic_file f;
    attn_status s = attn_atomic_open(&f, path, err);
    if (s) return s;
    if ((s = attn_atomic_write(&f, data, n, err))) return s;
    return attn_atomic_commit(&f, err);
}

attn_status attn_file_check_writable(const char *path, attn_error *err) {
    if (!path || !*path) return attn_fail(err, ATTN_ERR_INVALID_ARG, "empty output path");
    if (strcmp(path, "-") == 0) return ATTN_OK;
    char *resolved = NULL;
    int magic = 0, re = resolve_links(path, &resolved, &magic);
    if (re) return attn_fail(err, ATTN_ERR_IO, "cannot write '%s': %s", path, strerror(re));
    struct stat st;
    if (stat(resolved, &st) == 0 && (magic || !S_ISREG(st.st_mode))) {
        /* Written in place later: opening a FIFO now would signal its reader. */
        int e = S_ISDIR(st.st_mode) ? EISDIR : access(resolved, W_OK) != 0 ? errno : 0;
        free(resolved);
        return e ? attn_fail(err, ATTN_ERR_IO, "cannot write '%s': %s", path, strerror(e))
                 : ATTN_OK;
    }
    free(resolved);
    attn_atomic_file f;
    attn_status s = attn_atomic_open(&f, path, err);
    if (s == ATTN_OK) attn_atomic_abort(&f);
    return s;
}

int attn_path_join(char *out, size_t cap, const char *dir, const char *name) {
    const int k = snprintf(out, cap, "%s/%s", dir, name);
    return k < 0 || (size_t)k >= cap ? -1 : 0;
}
