/* Helpers for the file-format tests: a private temp dir per test, raw file
 * writes, directory listings, and a probe for /usr/bin/python3 + numpy. */
#ifndef ATTN_TESTS_IO_UTIL_H
#define ATTN_TESTS_IO_UTIL_H

#define _XOPEN_SOURCE 700
#include <dirent.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define IO_FIXTURES ATTN_SOURCE_DIR "/tests/fixtures/io/"

/* mkdtemp under $TMPDIR (or /tmp); returns a static buffer. */
static inline const char *tio_mkdtemp(void) {
    static char dir[4096];
    const char *base = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/attn-io-XXXXXX", base && *base ? base : "/tmp");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        abort();
    }
    return dir;
}

static inline int tio_rm_cb(const char *p, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(p);
}

static inline void tio_rmtree(const char *dir) {
    nftw(dir, tio_rm_cb, 16, FTW_DEPTH | FTW_PHYS);
}

/* dir + "/" + name into a static ring of buffers (several live at once). */
static inline const char *tio_path(const char *dir, const char *name) {
    static char bufs[8][4096];
    static int next;
    char *b = bufs[next++ % 8];
    snprintf(b, 4096, "%s/%s", dir, name);
    return b;
}

static inline void tio_write(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f || (n && fwrite(data, 1, n, f) != n) || fclose(f) != 0) {
        perror(path);
        abort();
    }
}

/* Whole file into a malloc'd buffer (NULL if it cannot be read). */
static inline unsigned char *tio_slurp(const char *path, size_t *n) {
    *n = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 4096, len = 0;
    unsigned char *b = malloc(cap);
    size_t r;
    while ((r = fread(b + len, 1, cap - len, f)) > 0) {
        len += r;
        if (len == cap) b = realloc(b, cap *= 2);
    }
    fclose(f);
    *n = len;
    return b;
}

/* Number of entries in dir other than "." and "..". */
static inline int tio_count_entries(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) n++;
    closedir(d);
    return n;
}

static inline int tio_have_numpy(void) {
    return access("/usr/bin/python3", X_OK) == 0 &&
           system("/usr/bin/python3 -c 'import numpy' >/dev/null 2>&1") == 0;
}

#endif
