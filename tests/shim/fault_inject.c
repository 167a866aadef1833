/* LD_PRELOAD shim for tests/train_crash.sh: fails or kills the process at
 * one chosen file-system operation inside a run folder, to prove that a
 * checkpoint is committed whole whatever instant a crash or an I/O error
 * hits. Environment:
 *   ATTN_FAULT_DIR   only operations on paths containing this string count
 *   ATTN_FAULT_LOG   append "N op path" for every counted operation
 *   ATTN_FAULT_AT    1-based number of the counted operation to hit (0: none)
 *   ATTN_FAULT_MODE  kill (SIGKILL before doing it), fail (return -1, EIO;
 *                    ENOSPC for writes) or stop (SIGSTOP before doing it: the
 *                    run is held there, so a test's kill -9 always lands
 *                    inside the run, however fast the machine is)
 * Counted: every call that changes the folder or makes data durable (open for
 * writing, mkstemp, mkdir, write, pwrite, ftruncate, fchmod, fsync, close,
 * rename, symlink, unlink, unlinkat, rmdir). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

/* Atomic: a checkpoint writes its two files from two threads, and a lost
 * increment would shift every later operation's number. */
static long counter;

static const char *marker(void) {
    const char *m = getenv("ATTN_FAULT_DIR");
    return m && *m ? m : NULL;
}

static int fd_matches(int fd, const char *m) {
    char link[64], target[4096];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t k = readlink(link, target, sizeof target - 1);
    if (k <= 0) return 0;
    target[k] = '\0';
    return strstr(target, m) != NULL;
}

/* 0: go ahead; -1: fail with errno set. Kills in kill mode. */
static int hit(const char *op, const char *path, int fd, int fail_errno) {
    const char *m = marker();
    if (!m) return 0;
    if (path ? !strstr(path, m) : !fd_matches(fd, m)) return 0;
    long n = __atomic_add_fetch(&counter, 1, __ATOMIC_SEQ_CST);
    const char *log = getenv("ATTN_FAULT_LOG");
    if (log) {
        int (*real_open)(const char *, int, ...) =
            (int (*)(const char *, int, ...))dlsym(RTLD_NEXT, "open");
        ssize_t (*real_write)(int, const void *, size_t) =
            (ssize_t(*)(int, const void *, size_t))dlsym(RTLD_NEXT, "write");
        int (*real_close)(int) = (int (*)(int))dlsym(RTLD_NEXT, "close");
        int lfd = real_open(log, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
        if (lfd >= 0) {
            char line[4200], fdpath[4096] = "(fd)", link[64];
            snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
            ssize_t t = path ? -1 : readlink(link, fdpath, sizeof fdpath - 1);
            if (t > 0) fdpath[t] = '\0'; /* an fd's file by name: the log tells files apart */
            int k = snprintf(line, sizeof line, "%ld %s %s\n", n, op, path ? path : fdpath);
            if (k > 0 && real_write(lfd, line, (size_t)k) < 0) {}
            real_close(lfd);
        }
    }
    const char *at = getenv("ATTN_FAULT_AT");
    if (!at || atol(at) != n) return 0;
    const char *mode = getenv("ATTN_FAULT_MODE");
    if (mode && !strcmp(mode, "kill")) raise(SIGKILL);
    if (mode && !strcmp(mode, "stop")) {
        raise(SIGSTOP); /* a SIGCONT goes on as if nothing happened */
        return 0;
    }
    errno = fail_errno;
    return -1;
}

#define REAL(name)                                                                                 \
    static __typeof__(&name) real_##name;                                                          \
    if (!real_##name) real_##name = (__typeof__(&name))dlsym(RTLD_NEXT, #name)

int open(const char *path, int flags, ...) {
    REAL(open);
    mode_t mode = 0;
    if (flags & O_CREAT) {
        va_list ap;
        va_start(ap, flags);
        mode = (mode_t)va_arg(ap, int);
        va_end(ap);
    }
    if ((flags & (O_WRONLY | O_RDWR | O_CREAT | O_TRUNC)) && hit("open", path, -1, EIO)) return -1;
    return real_open(path, flags, mode);
}

int mkstemp(char *tmpl) {
    REAL(mkstemp);
    if (hit("mkstemp", tmpl, -1, EIO)) return -1;
    return real_mkstemp(tmpl);
}

int mkdir(const char *path, mode_t mode) {
    REAL(mkdir);
    if (hit("mkdir", path, -1, EIO)) return -1;
    return real_mkdir(path, mode);
}

ssize_t write(int fd, const void *buf, size_t n) {
    REAL(write);
    if (fd > 2 && hit("write", NULL, fd, ENOSPC)) return -1;
    return real_write(fd, buf, n);
}

ssize_t pwrite(int fd, const void *buf, size_t n, off_t off) {
    REAL(pwrite);
    if (hit("pwrite", NULL, fd, ENOSPC)) return -1;
    return real_pwrite(fd, buf, n, off);
}

int ftruncate(int fd, off_t len) {
    REAL(ftruncate);
    if (hit("ftruncate", NULL, fd, EIO)) return -1;
    return real_ftruncate(fd, len);
}

int fchmod(int fd, mode_t mode) {
    REAL(fchmod);
    if (hit("fchmod", NULL, fd, EIO)) return -1;
    return real_fchmod(fd, mode);
}

int fsync(int fd) {
    REAL(fsync);
    if (hit("fsync", NULL, fd, EIO)) return -1;
    return real_fsync(fd);
}

int close(int fd) {
    REAL(close);
    /* A failed close still closes the descriptor (Linux). */
    if (fd > 2 && hit("close", NULL, fd, EIO)) {
        real_close(fd);
        errno = EIO;
        return -1;
    }
    return real_close(fd);
}

int rename(const char *from, const char *to) {
    REAL(rename);
    if (hit("rename", to, -1, EIO)) return -1;
    return real_rename(from, to);
}

int symlink(const char *target, const char *path) {
    REAL(symlink);
    if (hit("symlink", path, -1, EIO)) return -1;
    return real_symlink(target, path);
}

int unlink(const char *path) {
    REAL(unlink);
    if (hit("unlink", path, -1, EIO)) return -1;
    return real_unlink(path);
}

int unlinkat(int dfd, const char *path, int flags) {
    REAL(unlinkat);
    if (hit("unlinkat", NULL, dfd, EIO)) return -1;
    return real_unlinkat(dfd, path, flags);
}

int rmdir(const char *path) {
    REAL(rmdir);
    if (hit("rmdir", path, -1, EIO)) return -1;
    return real_rmdir(path);
}
