/* Crash-safe checkpoint folders (see attn/checkpoint.h). */
#define _POSIX_C_SOURCE 200809L
#include "attn/checkpoint.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int join(char *out, const char *dir, const char *name) {
    int k = snprintf(out, ATTN_CKPT_PATH_MAX, "%s/%s", dir, name);
    return k < 0 || k >= ATTN_CKPT_PATH_MAX ? -1 : 0;
}

/* fsync a folder so renames inside it are durable; filesystems that cannot
 * sync a folder lose nothing by it. */
static int sync_dir(const char *dir) {
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return errno;
    int rc = 0;
    if (fsync(fd) != 0 && errno != EINVAL && errno != ENOTSUP) rc = errno;
    close(fd);
    return rc;
}

/* Remove a folder that holds only files (ours never hold more). One that
 * holds a folder is not ours: it is left untouched (ENOTEMPTY). Returns 0 or
 * an errno. */
static int remove_tree(const char *path) {
    DIR *d = opendir(path);
    if (!d) return errno == ENOENT ? 0 : errno;
    int rc = 0, dfd = dirfd(d);
    struct dirent *e;
    for (int pass = 0; pass < 2 && !rc; pass++) { /* look, then delete */
        rewinddir(d);
        while ((e = readdir(d))) {
            if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
            struct stat sb;
            if (fstatat(dfd, e->d_name, &sb, AT_SYMLINK_NOFOLLOW) != 0) continue;
            if (S_ISDIR(sb.st_mode)) {
                rc = ENOTEMPTY;
                break;
            }
            if (pass == 1 && unlinkat(dfd, e->d_name, 0) != 0 && errno != ENOENT) rc = errno;
        }
    }
    closedir(d);
    if (!rc && rmdir(path) != 0 && errno != ENOENT) rc = errno;
    return rc;
}

/* "ckpt-<step>" or "ckpt-<step>.<k>": only such folders are ours to remove. */
static int is_ckpt_name(const char *nm) {
    if (strncmp(nm, "ckpt-", 5) != 0) return 0;
    const char *p = nm + 5;
    int digits = 0, dot = 0;
    for (; *p; p++) {
        if (*p >= '0' && *p <= '9') {
            digits++;
        } else if (*p == '.' && digits && !dot) {
            dot = 1;
            digits = 0;
        } else {
            return 0;
        }
    }
    return digits > 0;
}

/* Name DIR/latest points at (a plain name in DIR), or "" if none. */
static void latest_target(const char *dir, char *out, size_t n) {
    char link[ATTN_CKPT_PATH_MAX];
    out[0] = '\0';
    if (join(link, dir, ATTN_CKPT_LATEST)) return;
    ssize_t k = readlink(link, out, n - 1);
    if (k <= 0) {
        out[0] = '\0';
        return;
    }
    out[k] = '\0';
    if (strchr(out, '/') || !strcmp(out, ".") || !strcmp(out, "..")) out[0] = '\0';
}

attn_status attn_ckpt_begin(attn_ckpt_txn *t, const char *dir, int64_t step, attn_error *err) {
    memset(t, 0, sizeof *t);
    t->step = step;
    int k1 = snprintf(t->dir, sizeof t->dir, "%s", dir);
    int k2 =
        snprintf(t->tmp, sizeof t->tmp, "%s/.ckpt-%" PRId64 ".tmp-%ld", dir, step, (long)getpid());
    if (k1 < 0 || k2 < 0 || (size_t)k2 + 64 >= sizeof t->tmp) {
        t->tmp[0] = '\0';
        return attn_fail(err, ATTN_ERR_IO, "checkpoint folder path is too long");
    }
    /* One writer per folder (the run lock): the pid makes the name unique;
     * mkdir, not mkdtemp, so the folder gets the usual umask'ed mode. */
    remove_tree(t->tmp);
    if (mkdir(t->tmp, 0777) != 0) {
        int e = errno;
        t->tmp[0] = '\0';
        return attn_fail(err, ATTN_ERR_IO, "cannot create a checkpoint folder in '%s': %s", dir,
                         strerror(e));
    }
    return ATTN_OK;
}

attn_status attn_ckpt_file(const attn_ckpt_txn *t, const char *name, char *out, attn_error *err) {
    if (!t->tmp[0])
        return attn_fail(err, ATTN_ERR_STATE, "checkpoint already committed or aborted");
    if (join(out, t->tmp, name)) return attn_fail(err, ATTN_ERR_IO, "checkpoint path is too long");
    return ATTN_OK;
}

void attn_ckpt_abort(attn_ckpt_txn *t) {
    if (!t || !t->tmp[0]) return;
    remove_tree(t->tmp);
    t->tmp[0] = '\0';
}

/* Make DIR/<name> a symlink to latest/<name> unless it already is one. */
static int top_link(const char *dir, const char *name, int *changed) {
    char path[ATTN_CKPT_PATH_MAX], want[ATTN_CKPT_PATH_MAX], have[ATTN_CKPT_PATH_MAX],
        tmp[ATTN_CKPT_PATH_MAX];
    if (join(path, dir, name) || join(want, ATTN_CKPT_LATEST, name)) return ENAMETOOLONG;
    ssize_t k = readlink(path, have, sizeof have - 1);
    if (k > 0) {
        have[k] = '\0';
        if (!strcmp(have, want)) return 0;
    }
    int n = snprintf(tmp, sizeof tmp, "%s/.%s.tmp-%ld", dir, name, (long)getpid());
    if (n < 0 || n >= (int)sizeof tmp) return ENAMETOOLONG;
    *changed = 1;
    unlink(tmp);
    if (symlink(want, tmp) != 0) return errno;
    if (rename(tmp, path) != 0) {
        int e = errno;
        unlink(tmp);
        return e;
    }
    return 0;
}

attn_status attn_ckpt_commit(attn_ckpt_txn *t, attn_error *err) {
    if (!t->tmp[0])
        return attn_fail(err, ATTN_ERR_STATE, "checkpoint already committed or aborted");
    const char *dir = t->dir;
    char cur[256], name[256], final_path[ATTN_CKPT_PATH_MAX], link_tmp[ATTN_CKPT_PATH_MAX],
        link_path[ATTN_CKPT_PATH_MAX];
    int e;
    if ((e = sync_dir(t->tmp))) goto fail_tmp;
    /* Same step saved twice (e.g. stopped again right after a resume): the
     * live folder keeps its name, the new one gets a suffix. */
    latest_target(dir, cur, sizeof cur);
    snprintf(name, sizeof name, "ckpt-%" PRId64, t->step);
    for (int i = 1; !strcmp(name, cur); i++)
        snprintf(name, sizeof name, "ckpt-%" PRId64 ".%d", t->step, i);
    if (join(final_path, dir, name) || join(link_path, dir, ATTN_CKPT_LATEST)) {
        e = ENAMETOOLONG;
        goto fail_tmp;
    }
    remove_tree(final_path); /* debris of a killed save of this step */
    if (rename(t->tmp, final_path) != 0) {
        e = errno;
        goto fail_tmp;
    }
    t->tmp[0] = '\0';
    if ((e = sync_dir(dir))) goto fail_final;
    int n = snprintf(link_tmp, sizeof link_tmp, "%s/.%s.tmp-%ld", dir, ATTN_CKPT_LATEST,
                     (long)getpid());
    if (n < 0 || n >= (int)sizeof link_tmp) {
        e = ENAMETOOLONG;
        goto fail_final;
    }
    unlink(link_tmp);
    if (symlink(name, link_tmp) != 0) {
        e = errno;
        goto fail_final;
    }
    if (rename(link_tmp, link_path) != 0) { /* the commit point */
        e = errno;
        unlink(link_tmp);
        goto fail_final;
    }
    if ((e = sync_dir(dir)))
        return attn_fail(err, ATTN_ERR_IO, "saved checkpoint %s but cannot sync '%s': %s", name,
                         dir, strerror(e));
    /* Stable top-level names, then the older checkpoints go. */
    DIR *d = opendir(final_path);
    if (!d) {
        e = errno;
        return attn_fail(err, ATTN_ERR_IO, "saved checkpoint %s but cannot list it: %s", name,
                         strerror(e));
    }
    struct dirent *de;
    int links_changed = 0;
    e = 0;
    while ((de = readdir(d)) && !e) {
        if (de->d_name[0] == '.') continue;
        e = top_link(dir, de->d_name, &links_changed);
    }
    closedir(d);
    if (!e && links_changed) e = sync_dir(dir);
    if (e)
        return attn_fail(err, ATTN_ERR_IO,
                         "saved checkpoint %s but cannot link its files in '%s': %s", name, dir,
                         strerror(e));
    d = opendir(dir);
    if (d) {
        while ((de = readdir(d))) {
            if (!is_ckpt_name(de->d_name) || !strcmp(de->d_name, name)) continue;
            char p[ATTN_CKPT_PATH_MAX];
            if (!join(p, dir, de->d_name)) remove_tree(p); /* left: cleaned next time */
        }
        closedir(d);
    }
    return ATTN_OK;
fail_tmp:
    attn_ckpt_abort(t);
    return attn_fail(err, ATTN_ERR_IO, "cannot save the checkpoint in '%s': %s", dir, strerror(e));
fail_final:
    remove_tree(final_path);
    return attn_fail(err, ATTN_ERR_IO, "cannot save the checkpoint in '%s': %s", dir, strerror(e));
}

attn_status attn_ckpt_resolve(const char *dir, char *out, attn_error *err) {
    char name[256], p[ATTN_CKPT_PATH_MAX];
    struct stat sb;
    latest_target(dir, name, sizeof name);
    if (name[0]) {
        if (join(out, dir, name)) return attn_fail(err, ATTN_ERR_IO, "checkpoint path is too long");
        if (stat(out, &sb) != 0 || !S_ISDIR(sb.st_mode))
            return attn_fail(err, ATTN_ERR_FORMAT, "%s/%s names %s, which is missing", dir,
                             ATTN_CKPT_LATEST, name);
        return ATTN_OK;
    }
    if (join(p, dir, ATTN_CKPT_LATEST))
        return attn_fail(err, ATTN_ERR_IO, "checkpoint path is too long");
    if (lstat(p, &sb) == 0)
        return attn_fail(err, ATTN_ERR_FORMAT, "%s is not a checkpoint pointer", p);
    /* The older layout: the files at the top. */
    if (join(p, dir, "train_state.safetensors") || snprintf(out, ATTN_CKPT_PATH_MAX, "%s", dir) < 0)
        return attn_fail(err, ATTN_ERR_IO, "checkpoint path is too long");
    if (lstat(p, &sb) == 0 && S_ISREG(sb.st_mode)) return ATTN_OK;
    return attn_fail(err, ATTN_ERR_NOT_FOUND, "%s holds no checkpoint", dir);
}

int attn_ckpt_exists(const char *dir, int64_t *step) {
    char name[256], p[ATTN_CKPT_PATH_MAX];
    struct stat sb;
    if (step) *step = -1;
    latest_target(dir, name, sizeof name);
    if (name[0]) {
        long long s;
        char tail;
        if (step && sscanf(name, "ckpt-%lld%c", &s, &tail) >= 1) *step = s;
        return 1;
    }
    static const char *const files[2] = {"train_state.safetensors", "model.safetensors"};
    for (int i = 0; i < 2; i++)
        if (!join(p, dir, files[i]) && lstat(p, &sb) == 0) return 1;
    return 0;
}

attn_status attn_ckpt_clean_stale(const char *dir, int *removed, attn_error *err) {
    char live[256];
    int count = 0, first_err = 0;
    if (removed) *removed = 0;
    latest_target(dir, live, sizeof live);
    DIR *d = opendir(dir);
    if (!d) {
        int e = errno;
        return attn_fail(err, ATTN_ERR_IO, "cannot list '%s': %s", dir, strerror(e));
    }
    struct dirent *de;
    while ((de = readdir(d))) {
        const char *nm = de->d_name;
        int temp = nm[0] == '.' && strstr(nm, ".tmp-") != NULL;
        int orphan = is_ckpt_name(nm) && strcmp(nm, live) != 0;
        if (!temp && !orphan) continue;
        char p[ATTN_CKPT_PATH_MAX];
        struct stat sb;
        if (join(p, dir, nm) || lstat(p, &sb) != 0) continue;
        int e = S_ISDIR(sb.st_mode) ? remove_tree(p) : (unlink(p) != 0 ? errno : 0);
        if (e && !first_err) first_err = e;
        if (!e) count++;
    }
    closedir(d);
    if (removed) *removed = count;
    if (first_err)
        return attn_fail(err, ATTN_ERR_IO, "cannot remove stale files in '%s': %s", dir,
                         strerror(first_err));
    return ATTN_OK;
}
