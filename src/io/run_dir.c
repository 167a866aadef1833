/* A training run's folder: whose it is and what attn may delete in it (see
 * run_dir.h). */
#define _POSIX_C_SOURCE 200809L
#include "run_dir.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "attn/checkpoint.h"
#include "attn/fileio.h"
#include "attn/runlock.h"

#define MARKER_TEXT                                                                                \
    "attn run folder\n"                                                                            \
    "attn train made or claimed this folder; it deletes only the files it wrote here.\n"

/* The run-level files and what proves each attn's: the first bytes (the
 * header of loss.csv, the marker's first line) or, for loss.svg, the title
 * attn draws near the top. */
static const struct {
    const char *name, *sign;
    int at_start;
} run_files[3] = {{"loss.csv", "step,loss,lr,grad_norm,train_loss,val_loss", 1},
                  {"loss.svg", "attn train: cross-entropy loss</text>", 0},
                  {RUN_DIR_MARKER, "attn run folder\n", 1}};

static int run_file_index(const char *nm) {
    for (int i = 0; i < 3; i++)
        if (!strcmp(nm, run_files[i].name)) return i;
    return -1;
}

static int run_temp_index(const char *nm) {
    for (int i = 0; i < 3; i++)
        if (attn_file_is_temp_name(nm, run_files[i].name)) return i;
    return -1;
}

/* dir/nm is run file i as attn writes it. */
static int run_file_ours(const char *path, int i) {
    char buf[1024];
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return 0;
    struct stat sb;
    ssize_t n = fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode) ? read(fd, buf, sizeof buf - 1) : -1;
    close(fd);
    if (n <= 0) return 0;
    buf[n] = '\0';
    const char *sign = run_files[i].sign;
    return run_files[i].at_start ? strncmp(buf, sign, strlen(sign)) == 0
                                 : strstr(buf, sign) != NULL;
}

static int is_regular(const char *path) {
    struct stat sb;
    return lstat(path, &sb) == 0 && S_ISREG(sb.st_mode);
}

/* DIR/best as a folder (not a link), its path in out. */
static int best_folder(const char *dir, char *out, size_t cap) {
    struct stat sb;
    return !attn_path_join(out, cap, dir, ATTN_CKPT_BEST) && lstat(out, &sb) == 0 &&
           S_ISDIR(sb.st_mode);
}

attn_status run_dir_inspect(const char *dir, run_dir_info *info, attn_error *err) {
    memset(info, 0, sizeof *info);
    info->step = -1;
    DIR *d = opendir(dir);
    if (!d) {
        int e = errno;
        if (e == ENOENT) return ATTN_OK;
        return attn_fail(err, ATTN_ERR_IO, "cannot list '%s': %s", dir, strerror(e));
    }
    char p[ATTN_CKPT_PATH_MAX], best[ATTN_CKPT_PATH_MAX], name[256];
    struct dirent *e;
    while ((e = readdir(d))) {
        const char *nm = e->d_name;
        if (!strcmp(nm, ".") || !strcmp(nm, "..") || !strcmp(nm, ATTN_RUN_LOCK_FILE)) continue;
        if (attn_path_join(p, sizeof p, dir, nm)) {
            info->user_entries++;
            continue;
        }
        int i = run_file_index(nm);
        if (i >= 0) {
            if (run_file_ours(p, i))
                info->marked |= !strcmp(nm, RUN_DIR_MARKER);
            else if (!info->foreign[0])
                snprintf(info->foreign, sizeof info->foreign, "%s", nm);
        } else if (run_temp_index(nm) >= 0) {
            if (!is_regular(p)) info->user_entries++;
        } else if (!strcmp(nm, ATTN_CKPT_BEST)) {
            if (!best_folder(dir, best, sizeof best)) {
                if (!info->foreign[0]) snprintf(info->foreign, sizeof info->foreign, "%s", nm);
                continue;
            }
            DIR *b = opendir(best);
            struct dirent *be;
            while (b && (be = readdir(b)))
                if (strcmp(be->d_name, ".") && strcmp(be->d_name, "..") &&
                    !attn_ckpt_is_ours(best, be->d_name))
                    info->user_entries++;
            if (b) closedir(b);
            if (!info->foreign[0] && attn_ckpt_find_foreign(best, name, sizeof name))
                snprintf(info->foreign, sizeof info->foreign, "%s/%s", ATTN_CKPT_BEST, name);
        } else if (!attn_ckpt_is_ours(dir, nm)) {
            info->user_entries++;
        }
    }
    closedir(d);
    if (!info->foreign[0] && attn_ckpt_find_foreign(dir, name, sizeof name))
        snprintf(info->foreign, sizeof info->foreign, "%s", name);
    int64_t s = -1;
    info->has_checkpoint = attn_ckpt_exists(dir, &info->step);
    if (best_folder(dir, best, sizeof best) && attn_ckpt_exists(best, &s)) {
        if (!info->has_checkpoint) info->step = s;
        info->has_checkpoint = 1;
    }
    return ATTN_OK;
}

attn_status run_dir_mark(const char *dir, attn_error *err) {
    char p[ATTN_CKPT_PATH_MAX];
    if (attn_path_join(p, sizeof p, dir, RUN_DIR_MARKER))
        return attn_fail(err, ATTN_ERR_IO, "run folder path is too long");
    return attn_file_write_atomic(p, MARKER_TEXT, sizeof MARKER_TEXT - 1, err);
}

int run_dir_only_marker(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return 0;
    struct dirent *e;
    int only = 1;
    while (only && (e = readdir(d)))
        only = !strcmp(e->d_name, ".") || !strcmp(e->d_name, "..") ||
               !strcmp(e->d_name, RUN_DIR_MARKER);
    closedir(d);
    return only;
}

/* The run files' temp files; with loss files set, also attn's loss files. */
static int remove_run_files(const char *dir, int loss_files, int *first_err) {
    DIR *d = opendir(dir);
    if (!d) return 0;
    int count = 0;
    struct dirent *e;
    char p[ATTN_CKPT_PATH_MAX];
    while ((e = readdir(d))) {
        const char *nm = e->d_name;
        const int i = run_file_index(nm);
        int go = run_temp_index(nm) >= 0;
        if (attn_path_join(p, sizeof p, dir, nm)) continue;
        if (go)
            go = is_regular(p);
        else if (loss_files && i >= 0 && strcmp(nm, RUN_DIR_MARKER) != 0)
            go = run_file_ours(p, i);
        if (!go) continue;
        if (unlink(p) == 0)
            count++;
        else if (errno != ENOENT && !*first_err)
            *first_err = errno;
    }
    closedir(d);
    return count;
}

attn_status run_dir_clear(const char *dir, int *removed, attn_error *err) {
    char best[ATTN_CKPT_PATH_MAX];
    int n = 0, total = 0, first_err = 0;
    *removed = 0;
    attn_status s = attn_ckpt_remove_all(dir, &n, err);
    total += n;
    if (!s && best_folder(dir, best, sizeof best)) {
        s = attn_ckpt_remove_all(best, &n, err);
        total += n;
        if (!s && rmdir(best) == 0) total++; /* a user's file in it keeps it */
    }
    total += remove_run_files(dir, 1, &first_err);
    *removed = total;
    if (s) return s;
    if (first_err)
        return attn_fail(err, ATTN_ERR_IO, "cannot remove the old run's files in '%s': %s", dir,
                         strerror(first_err));
    return ATTN_OK;
}

attn_status run_dir_clean(const char *dir, int *removed, attn_error *err) {
    char best[ATTN_CKPT_PATH_MAX];
    int n = 0, first_err = 0;
    attn_status s = attn_ckpt_clean_stale(dir, &n, err);
    *removed = n;
    if (best_folder(dir, best, sizeof best)) {
        attn_error e2;
        attn_status s2 = attn_ckpt_clean_stale(best, &n, &e2);
        *removed += n;
        if (s2 && !s) s = attn_fail(err, s2, "%s", e2.msg);
    }
    *removed += remove_run_files(dir, 0, &first_err);
    if (!s && first_err)
        s = attn_fail(err, ATTN_ERR_IO, "cannot remove stale files in '%s': %s", dir,
                      strerror(first_err));
    return s;
}

attn_status run_dir_repair(const char *dir, char *what, size_t cap, attn_error *err) {
    char best[ATTN_CKPT_PATH_MAX], more[ATTN_ERROR_MSG_MAX];
    attn_status s = attn_ckpt_repair(dir, what, cap, err);
    if (s || !best_folder(dir, best, sizeof best)) return s;
    if ((s = attn_ckpt_repair(best, more, sizeof more, err))) return s;
    if (more[0] && !what[0])
        snprintf(what, cap, "%s", more);
    else if (more[0])
        snprintf(what + strlen(what), cap - strlen(what), "; %s", more);
    return ATTN_OK;
}
