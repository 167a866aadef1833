/* One writer per run folder (see attn/runlock.h). */
#define _DEFAULT_SOURCE /* flock */
#include "attn/runlock.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

/* A regular file, empty (a holder that has not written yet) or "pid N: ...":
 * a file of the user's named .lock is neither overwritten nor removed. */
static int lock_file_ours(int fd) {
    struct stat sb;
    char text[16];
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) return 0;
    ssize_t n = pread(fd, text, sizeof text - 1, 0);
    if (n <= 0) return n == 0;
    text[n] = '\0';
    const char *p = text;
    if (strncmp(p, "pid ", 4) != 0) return 0;
    for (p += 4; *p >= '0' && *p <= '9'; p++) {}
    return p > text + 4 && (*p == ':' || *p == '\0');
}

attn_status attn_run_lock_acquire(attn_run_lock *l, const char *dir, const char *who,
                                  attn_error *err) {
    char path[4096];
    l->fd = -1;
    int k = snprintf(path, sizeof path, "%s/%s", dir, ATTN_RUN_LOCK_FILE);
    if (k < 0 || k >= (int)sizeof path)
        return attn_fail(err, ATTN_ERR_IO, "run folder path is too long");
    int fd;
retry:
    fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0666);
    if (fd >= 0 && !lock_file_ours(fd)) {
        close(fd);
        return attn_fail(err, ATTN_ERR_INVALID_ARG,
                         "%s is not attn's lock file, and attn would overwrite it: move it away "
                         "or choose another folder",
                         path);
    }
    if (fd < 0) {
        int e = errno;
        return attn_fail(err, ATTN_ERR_IO, "cannot open the lock file '%s': %s", path, strerror(e));
    }
    for (;;) {
        if (flock(fd, LOCK_EX | LOCK_NB) == 0) {
            /* The holder removes the file as it lets go: a lock on a file no
             * longer at `path` protects nothing, so try again. */
            struct stat a, b;
            if (fstat(fd, &a) == 0 && stat(path, &b) == 0 && a.st_dev == b.st_dev &&
                a.st_ino == b.st_ino)
                break;
            close(fd);
            goto retry;
        }
        if (errno == EINTR) continue;
        int e = errno;
        if (e != EWOULDBLOCK) {
            close(fd);
            return attn_fail(err, ATTN_ERR_IO, "cannot lock '%s': %s", path, strerror(e));
        }
        /* Busy: say who holds it (the holder may not have written it yet). */
        char text[256];
        ssize_t n = pread(fd, text, sizeof text - 1, 0);
        close(fd);
        text[n > 0 ? n : 0] = '\0';
        char *nl = strchr(text, '\n');
        if (nl) *nl = '\0';
        return attn_fail(err, ATTN_ERR_STATE, "%s is in use by another run (%s)", dir,
                         text[0] ? text : "process unknown");
    }
    char text[256];
    int n = snprintf(text, sizeof text, "pid %ld: %s\n", (long)getpid(), who ? who : "attn");
    if (n >= (int)sizeof text) n = (int)sizeof text - 1;
    /* Best effort: the lock itself is what protects the folder. */
    if (ftruncate(fd, 0) == 0 && pwrite(fd, text, (size_t)n, 0) < 0) {}
    l->fd = fd;
    snprintf(l->path, sizeof l->path, "%s", path);
    return ATTN_OK;
}

void attn_run_lock_release(attn_run_lock *l) {
    if (!l || l->fd < 0) return;
    unlink(l->path); /* before closing: nobody can lock it in between */
    close(l->fd);    /* closing the only descriptor drops the flock */
    l->fd = -1;
}
