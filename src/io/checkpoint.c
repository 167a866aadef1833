/* Crash-safe checkpoint folders (see attn/checkpoint.h). */
#define _POSIX_C_SOURCE 200809L
#include "attn/checkpoint.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "attn/fileio.h"

/* The files of a checkpoint and the metadata format that proves each attn's. */
static const struct {
    const char *name, *format;
} ckpt_files[2] = {{ATTN_CKPT_MODEL, "attn-gpt"}, {ATTN_CKPT_STATE, "attn-train-state"}};

/* Largest safetensors header read to recognise a file (attn's are far smaller). */
#define HEADER_MAX ((uint64_t)16 << 20)

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

/* Remove a folder that holds only files (callers have checked they are
 * attn's). One that holds a folder is left untouched (ENOTEMPTY). Returns 0
 * or an errno. */
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

/* ------------------------------------------------------ what is attn's */

/* "ckpt-<step>" or "ckpt-<step>.<k>" (*k = 0 without a suffix). */
static int parse_ckpt_name(const char *nm, int64_t *step, int64_t *k) {
    if (strncmp(nm, "ckpt-", 5) != 0) return 0;
    int64_t v[2] = {0, 0};
    int part = 0, digits = 0;
    for (const char *p = nm + 5; *p; p++) {
        if (*p >= '0' && *p <= '9' && digits < 18) {
            v[part] = v[part] * 10 + (*p - '0');
            digits++;
        } else if (*p == '.' && digits && part == 0) {
            part = 1;
            digits = 0;
        } else {
            return 0;
        }
    }
    if (!digits) return 0;
    if (step) *step = v[0];
    if (k) *k = v[1];
    return 1;
}

/* a before b in save order (step, then suffix). */
static int ckpt_older(const char *a, const char *b) {
    int64_t sa, ka, sb, kb;
    if (!parse_ckpt_name(a, &sa, &ka) || !parse_ckpt_name(b, &sb, &kb)) return 0;
    return sa < sb || (sa == sb && ka < kb);
}

/* ".ckpt-<step>.tmp-<pid>": a save's folder. */
static int is_temp_folder_name(const char *nm) {
    if (strncmp(nm, ".ckpt-", 6) != 0) return 0;
    const char *dot = strstr(nm + 6, ".tmp-");
    if (!dot || dot == nm + 6) return 0;
    for (const char *p = nm + 6; p < dot; p++)
        if (*p < '0' || *p > '9') return 0;
    char base[64];
    if ((size_t)(dot - nm) > sizeof base) return 0;
    memcpy(base, nm + 1, (size_t)(dot - nm - 1));
    base[dot - nm - 1] = '\0';
    return attn_file_is_temp_name(nm, base);
}

static int ckpt_file_index(const char *nm) {
    for (int i = 0; i < 2; i++)
        if (!strcmp(nm, ckpt_files[i].name)) return i;
    return -1;
}

static int is_temp_of_ckpt_file(const char *nm) {
    for (int i = 0; i < 2; i++)
        if (attn_file_is_temp_name(nm, ckpt_files[i].name)) return 1;
    return 0;
}

static ssize_t read_full(int fd, void *buf, size_t n) {
    size_t k = 0;
    while (k < n) {
        ssize_t r = read(fd, (char *)buf + k, n - k);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        k += (size_t)r;
    }
    return (ssize_t)k;
}

enum { NOT_ATTN = 0, ATTN_PART = 1, ATTN_WHOLE = 2 };

/* A regular file at path whose safetensors header carries metadata
 * format == `format`: ATTN_WHOLE when its size is exactly what the header
 * describes, ATTN_PART when shorter or longer (a cut copy), else NOT_ATTN.
 * *step (may be NULL): the "step" metadata, -1 without. Reads the header only. */
static int file_state(const char *path, const char *format, int64_t *step) {
    if (step) *step = -1;
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return NOT_ATTN;
    int res = NOT_ATTN;
    char *hdr = NULL;
    cJSON *root = NULL;
    struct stat sb;
    unsigned char len8[8];
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode) || read_full(fd, len8, 8) != 8) goto out;
    uint64_t n = 0;
    for (int i = 0; i < 8; i++)
        n |= (uint64_t)len8[i] << (8 * i);
    if (n < 2 || n > HEADER_MAX || n > (uint64_t)sb.st_size - 8) goto out;
    if (!(hdr = malloc((size_t)n)) || read_full(fd, hdr, (size_t)n) != (ssize_t)n) goto out;
    root = cJSON_ParseWithLength(hdr, (size_t)n);
    const cJSON *meta = cJSON_GetObjectItemCaseSensitive(root, "__metadata__");
    const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(meta, "format");
    if (!cJSON_IsString(fmt) || strcmp(fmt->valuestring, format) != 0) goto out;
    res = ATTN_PART;
    const cJSON *st = cJSON_GetObjectItemCaseSensitive(meta, "step");
    if (step && cJSON_IsString(st)) {
        char *end;
        long long v = strtoll(st->valuestring, &end, 10);
        if (*st->valuestring && !*end && v >= 0) *step = v;
    }
    double end = 0;
    for (const cJSON *t = root->child; t; t = t->next) {
        const cJSON *offs = cJSON_GetObjectItemCaseSensitive(t, "data_offsets");
        const cJSON *e = cJSON_GetArrayItem(offs, 1);
        if (cJSON_IsNumber(e) && e->valuedouble > end) end = e->valuedouble;
    }
    if ((double)(sb.st_size - 8) - (double)n == end) res = ATTN_WHOLE;
out:
    cJSON_Delete(root);
    free(hdr);
    close(fd);
    return res;
}

/* What a folder of checkpoint files holds (ckpt-*, a save's temp folder, a
 * copy of latest). */
typedef struct folder_info {
    int files;    /* attn files in it */
    int complete; /* both, whole */
    int bare;     /* the model whole and nothing else: complete in a folder of models
                     alone (best/), a cut copy beside training states (is_whole) */
    int64_t step; /* the training state's step (else the model's), -1 unknown */
} folder_info;

/* 1 if every entry of the folder at path is a checkpoint file holding attn's
 * metadata or a temp file of one; *fi describes it. 0 otherwise. */
static int folder_state(const char *path, folder_info *fi) {
    memset(fi, 0, sizeof *fi);
    fi->step = -1;
    DIR *d = opendir(path);
    if (!d) return 0;
    int ours = 1, whole[2] = {0, 0}, temps = 0;
    struct dirent *e;
    char p[ATTN_CKPT_PATH_MAX];
    while (ours && (e = readdir(d))) {
        const char *nm = e->d_name;
        if (!strcmp(nm, ".") || !strcmp(nm, "..")) continue;
        struct stat sb;
        if (attn_path_join(p, ATTN_CKPT_PATH_MAX, path, nm) || lstat(p, &sb) != 0 ||
            !S_ISREG(sb.st_mode)) {
            ours = 0;
            break;
        }
        int i = ckpt_file_index(nm);
        if (i < 0) {
            ours = is_temp_of_ckpt_file(nm);
            temps++;
            continue;
        }
        int64_t s;
        int state = file_state(p, ckpt_files[i].format, &s);
        if (state == NOT_ATTN) {
            ours = 0;
            break;
        }
        fi->files++;
        if (state == ATTN_WHOLE) whole[i] = 1;
        if (s >= 0 && (fi->step < 0 || i == 1)) fi->step = s;
    }
    closedir(d);
    fi->complete = whole[0] && whole[1];
    fi->bare = whole[0] && fi->files == 1 && !temps;
    return ours;
}

enum entry_kind { E_ABSENT, E_OTHER, E_FOREIGN, E_TEMP, E_POINTER, E_TOP, E_FOLDER };

typedef struct entry_info {
    enum entry_kind kind;
    int is_dir;
    char target[64]; /* latest as a symlink or a file: the name it holds */
    folder_info fi;  /* folders */
} entry_info;

/* Which of attn's entries dir/nm is (see attn/checkpoint.h). */
static enum entry_kind classify(const char *dir, const char *nm, entry_info *ei) {
    char p[ATTN_CKPT_PATH_MAX];
    struct stat sb;
    memset(ei, 0, sizeof *ei);
    ei->fi.step = -1;
    if (attn_path_join(p, ATTN_CKPT_PATH_MAX, dir, nm)) return ei->kind = E_OTHER;
    if (lstat(p, &sb) != 0) return ei->kind = errno == ENOENT ? E_ABSENT : E_OTHER;
    ei->is_dir = S_ISDIR(sb.st_mode);
    const int fi_index = ckpt_file_index(nm);
    if (!strcmp(nm, ATTN_CKPT_LATEST)) {
        if (S_ISLNK(sb.st_mode) || S_ISREG(sb.st_mode)) { /* the pointer, or a copy's text of it */
            ssize_t k = -1;
            if (S_ISLNK(sb.st_mode)) {
                k = readlink(p, ei->target, sizeof ei->target - 1);
            } else if (sb.st_size < (off_t)sizeof ei->target) {
                int fd = open(p, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
                if (fd >= 0) {
                    k = read_full(fd, ei->target, sizeof ei->target - 1);
                    close(fd);
                }
                if (k > 0 && ei->target[k - 1] == '\n') k--;
            }
            ei->target[k > 0 ? k : 0] = '\0';
            return ei->kind =
                       k > 0 && parse_ckpt_name(ei->target, NULL, NULL) ? E_POINTER : E_FOREIGN;
        }
        return ei->kind = ei->is_dir && folder_state(p, &ei->fi) ? E_POINTER : E_FOREIGN;
    }
    if (fi_index >= 0) {
        if (S_ISLNK(sb.st_mode)) {
            char want[ATTN_CKPT_PATH_MAX], have[ATTN_CKPT_PATH_MAX];
            ssize_t k = readlink(p, have, sizeof have - 1);
            have[k > 0 ? k : 0] = '\0';
            return ei->kind = !attn_path_join(want, ATTN_CKPT_PATH_MAX, ATTN_CKPT_LATEST, nm) &&
                                      !strcmp(have, want)
                                  ? E_TOP
                                  : E_FOREIGN;
        }
        int state = file_state(p, ckpt_files[fi_index].format, &ei->fi.step);
        if (state != NOT_ATTN) ei->fi.files = 1;
        return ei->kind = state != NOT_ATTN ? E_TOP : E_FOREIGN;
    }
    if (parse_ckpt_name(nm, NULL, NULL))
        return ei->kind = ei->is_dir && folder_state(p, &ei->fi) ? E_FOLDER : E_FOREIGN;
    if (is_temp_folder_name(nm))
        return ei->kind = ei->is_dir && folder_state(p, &ei->fi) ? E_TEMP : E_FOREIGN;
    if (is_temp_of_ckpt_file(nm) || attn_file_is_temp_name(nm, ATTN_CKPT_LATEST))
        return ei->kind = S_ISREG(sb.st_mode) || S_ISLNK(sb.st_mode) ? E_TEMP : E_FOREIGN;
    return ei->kind = E_OTHER;
}

/* Whether dir holds a training state of attn's anywhere (a ckpt-* folder,
 * latest, the top level): then its checkpoints are whole with both files;
 * else (best/) with the model alone. */
static int holds_states(const char *dir) {
    char p[ATTN_CKPT_PATH_MAX];
    entry_info ei;
    if (classify(dir, ATTN_CKPT_STATE, &ei) == E_TOP) return 1;
    DIR *d = opendir(dir);
    if (!d) return 0;
    int found = 0;
    struct dirent *e;
    while (!found && (e = readdir(d))) {
        const enum entry_kind k = classify(dir, e->d_name, &ei);
        found = (k == E_FOLDER || (k == E_POINTER && ei.is_dir)) &&
                !attn_path_join(p, ATTN_CKPT_PATH_MAX, dir, e->d_name) &&
                !attn_path_join(p, ATTN_CKPT_PATH_MAX, p, ATTN_CKPT_STATE) && access(p, F_OK) == 0;
    }
    closedir(d);
    return found;
}

/* A folder of checkpoint files is a whole checkpoint of dir (states:
 * holds_states(dir)). */
static int is_whole(const folder_info *fi, int states) {
    return fi->complete || (fi->bare && !states);
}

int attn_ckpt_is_ours(const char *dir, const char *name) {
    entry_info ei;
    enum entry_kind k = classify(dir, name, &ei);
    return k == E_TEMP || k == E_POINTER || k == E_TOP || k == E_FOLDER;
}

int attn_ckpt_find_foreign(const char *dir, char *name, size_t cap) {
    static const char *const names[3] = {ATTN_CKPT_LATEST, ATTN_CKPT_MODEL, ATTN_CKPT_STATE};
    for (int i = 0; i < 3; i++) {
        entry_info ei;
        if (classify(dir, names[i], &ei) == E_FOREIGN) {
            snprintf(name, cap, "%s", names[i]);
            return 1;
        }
    }
    return 0;
}

/* Name DIR/latest points at (a plain name in DIR), or "" if none. */
static void latest_target(const char *dir, char *out, size_t n) {
    char link[ATTN_CKPT_PATH_MAX];
    out[0] = '\0';
    if (attn_path_join(link, ATTN_CKPT_PATH_MAX, dir, ATTN_CKPT_LATEST)) return;
    ssize_t k = readlink(link, out, n - 1);
    if (k <= 0) {
        out[0] = '\0';
        return;
    }
    out[k] = '\0';
    if (strchr(out, '/') || !strcmp(out, ".") || !strcmp(out, "..")) out[0] = '\0';
}

/* The folder DIR/latest names, when it is one: its name in out, 1. */
static int live_folder(const char *dir, char *out, size_t n) {
    char p[ATTN_CKPT_PATH_MAX];
    struct stat sb;
    latest_target(dir, out, n);
    if (out[0] && !attn_path_join(p, ATTN_CKPT_PATH_MAX, dir, out) && stat(p, &sb) == 0 &&
        S_ISDIR(sb.st_mode))
        return 1;
    out[0] = '\0';
    return 0;
}

/* The newest ckpt-* folder of attn's in dir: complete ones when whole is set,
 * else any holding an attn file. Its name in out (256 bytes), *fi; 0 if none. */
static int newest_folder(const char *dir, int whole, char *out, folder_info *fo) {
    DIR *d = opendir(dir);
    out[0] = '\0';
    if (!d) return 0;
    const int states = whole && holds_states(dir);
    struct dirent *e;
    while ((e = readdir(d))) {
        const char *nm = e->d_name;
        if (!parse_ckpt_name(nm, NULL, NULL) || strlen(nm) >= 256) continue;
        if (out[0] && !ckpt_older(out, nm)) continue;
        entry_info ei;
        if (classify(dir, nm, &ei) != E_FOLDER ||
            !(whole ? is_whole(&ei.fi, states) : ei.fi.files > 0))
            continue;
        snprintf(out, 256, "%s", nm);
        if (fo) *fo = ei.fi;
    }
    closedir(d);
    return out[0] != '\0';
}

/* ------------------------------------------------------------- saving */

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
     * mkdir, not mkdtemp, so the folder gets the usual umask'ed mode. A
     * killed save's folder of the same name goes if it is attn's. */
    folder_info fi;
    if (folder_state(t->tmp, &fi)) remove_tree(t->tmp);
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
    if (attn_path_join(out, ATTN_CKPT_PATH_MAX, t->tmp, name))
        return attn_fail(err, ATTN_ERR_IO, "checkpoint path is too long");
    return ATTN_OK;
}

attn_status attn_ckpt_link(const attn_ckpt_txn *t, const char *name, const char *src,
                           attn_error *err) {
    char to[ATTN_CKPT_PATH_MAX], from[ATTN_CKPT_PATH_MAX];
    attn_status s = attn_ckpt_file(t, name, to, err);
    if (s) return s;
    if (attn_path_join(from, ATTN_CKPT_PATH_MAX, src, name))
        return attn_fail(err, ATTN_ERR_IO, "checkpoint path is too long");
    if (link(from, to) != 0)
        return attn_fail(err, ATTN_ERR_IO, "cannot link %s to %s: %s", from, to, strerror(errno));
    return ATTN_OK;
}

void attn_ckpt_abort(attn_ckpt_txn *t) {
    if (!t || !t->tmp[0]) return;
    remove_tree(t->tmp);
    t->tmp[0] = '\0';
}

/* Make DIR/<name> a symlink to latest/<name> unless it already is one; a
 * file there is replaced only when it is attn's. */
static int top_link(const char *dir, const char *name, int *changed) {
    char path[ATTN_CKPT_PATH_MAX], want[ATTN_CKPT_PATH_MAX], have[ATTN_CKPT_PATH_MAX],
        tmp[ATTN_CKPT_PATH_MAX];
    if (attn_path_join(path, ATTN_CKPT_PATH_MAX, dir, name) ||
        attn_path_join(want, ATTN_CKPT_PATH_MAX, ATTN_CKPT_LATEST, name))
        return ENAMETOOLONG;
    ssize_t k = readlink(path, have, sizeof have - 1);
    if (k > 0) {
        have[k] = '\0';
        if (!strcmp(have, want)) return 0;
    }
    entry_info ei;
    enum entry_kind kind = classify(dir, name, &ei);
    if (kind != E_ABSENT && kind != E_TOP) return EEXIST; /* the user's: stays */
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

/* Swap DIR/latest to name: a symlink made beside it, renamed over it. */
static int point_latest(const char *dir, const char *name) {
    char link_tmp[ATTN_CKPT_PATH_MAX], link_path[ATTN_CKPT_PATH_MAX];
    int n = snprintf(link_tmp, sizeof link_tmp, "%s/.%s.tmp-%ld", dir, ATTN_CKPT_LATEST,
                     (long)getpid());
    if (n < 0 || n >= (int)sizeof link_tmp ||
        attn_path_join(link_path, ATTN_CKPT_PATH_MAX, dir, ATTN_CKPT_LATEST))
        return ENAMETOOLONG;
    unlink(link_tmp);
    if (symlink(name, link_tmp) != 0) return errno;
    if (rename(link_tmp, link_path) != 0) { /* the commit point */
        int e = errno;
        unlink(link_tmp);
        return e;
    }
    return 0;
}

/* The pointer must be attn's to be swapped (a folder or a user's file named
 * latest is never replaced); else t is aborted. */
static attn_status check_latest(attn_ckpt_txn *t, attn_error *err) {
    entry_info li;
    enum entry_kind lk = classify(t->dir, ATTN_CKPT_LATEST, &li);
    if (lk != E_FOREIGN && !(lk == E_POINTER && li.is_dir)) return ATTN_OK;
    attn_ckpt_abort(t);
    return attn_fail(err, ATTN_ERR_IO,
                     "cannot save the checkpoint in '%s': %s/%s is %s, which attn does not "
                     "replace",
                     t->dir, t->dir, ATTN_CKPT_LATEST,
                     li.is_dir ? "a folder" : "not a link of attn's");
}

/* The folder's name (name, cap bytes) and path: ckpt-<step>, or with a
 * suffix when taken (the live folder when the same step is saved twice, a
 * folder of the user's): nothing is replaced. 0 or an errno. */
static int final_name(const char *dir, int64_t step, char *name, size_t cap, char *path) {
    char cur[256];
    struct stat sb;
    latest_target(dir, cur, sizeof cur);
    snprintf(name, cap, "ckpt-%" PRId64, step);
    for (int i = 1;; i++) {
        if (attn_path_join(path, ATTN_CKPT_PATH_MAX, dir, name)) return ENAMETOOLONG;
        if (strcmp(name, cur) != 0 && lstat(path, &sb) != 0 && errno == ENOENT) return 0;
        snprintf(name, cap, "ckpt-%" PRId64 ".%d", step, i);
    }
}

/* DIR/<name>, attn's link to latest/<name>, goes when the live folder (at
 * path) has no such file (a model-only checkpoint after a whole one). */
static int drop_top_link(const char *dir, const char *name, const char *path, int *changed) {
    char p[ATTN_CKPT_PATH_MAX];
    struct stat sb;
    if (attn_path_join(p, ATTN_CKPT_PATH_MAX, path, name)) return ENAMETOOLONG;
    if (lstat(p, &sb) == 0) return 0;
    entry_info ei;
    if (attn_path_join(p, ATTN_CKPT_PATH_MAX, dir, name) || classify(dir, name, &ei) != E_TOP ||
        lstat(p, &sb) != 0 || !S_ISLNK(sb.st_mode))
        return 0;
    *changed = 1;
    return unlink(p) != 0 && errno != ENOENT ? errno : 0;
}

/* Stable top-level names: DIR/<file> links to latest/<file> for each file
 * of the new folder (name, at path), and for no other. */
static attn_status link_files(const char *dir, const char *name, const char *path,
                              attn_error *err) {
    DIR *d = opendir(path);
    if (!d)
        return attn_fail(err, ATTN_ERR_IO, "saved checkpoint %s but cannot list it: %s", name,
                         strerror(errno));
    struct dirent *de;
    int links_changed = 0, e = 0;
    char bad[256] = "";
    while ((de = readdir(d)) && !e) {
        if (de->d_name[0] == '.') continue;
        e = top_link(dir, de->d_name, &links_changed);
        if (e == EEXIST) snprintf(bad, sizeof bad, "%s", de->d_name);
    }
    closedir(d);
    for (int i = 0; i < 2 && !e; i++)
        e = drop_top_link(dir, ckpt_files[i].name, path, &links_changed);
    if (!e && links_changed) e = sync_dir(dir);
    if (e == EEXIST)
        return attn_fail(err, ATTN_ERR_IO,
                         "saved checkpoint %s but %s/%s is not attn's, so it was left as is "
                         "(move it away)",
                         name, dir, bad);
    if (e)
        return attn_fail(err, ATTN_ERR_IO,
                         "saved checkpoint %s but cannot link its files in '%s': %s", name, dir,
                         strerror(e));
    return ATTN_OK;
}

/* The checkpoints older than name go (one left is cleaned next time). */
static void remove_older(const char *dir, const char *name) {
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (!ckpt_older(de->d_name, name)) continue;
        entry_info ei;
        char p[ATTN_CKPT_PATH_MAX];
        if (classify(dir, de->d_name, &ei) == E_FOLDER &&
            !attn_path_join(p, ATTN_CKPT_PATH_MAX, dir, de->d_name))
            remove_tree(p);
    }
    closedir(d);
}

attn_status attn_ckpt_commit(attn_ckpt_txn *t, attn_error *err) {
    if (!t->tmp[0])
        return attn_fail(err, ATTN_ERR_STATE, "checkpoint already committed or aborted");
    const char *dir = t->dir;
    char name[256], final_path[ATTN_CKPT_PATH_MAX];
    int e = sync_dir(t->tmp);
    if (!e) {
        attn_status s = check_latest(t, err);
        if (s) return s;
        e = final_name(dir, t->step, name, sizeof name, final_path);
    }
    if (!e && rename(t->tmp, final_path) != 0) e = errno;
    if (e) {
        attn_ckpt_abort(t);
        return attn_fail(err, ATTN_ERR_IO, "cannot save the checkpoint in '%s': %s", dir,
                         strerror(e));
    }
    t->tmp[0] = '\0';
    if ((e = sync_dir(dir)) || (e = point_latest(dir, name))) {
        remove_tree(final_path);
        return attn_fail(err, ATTN_ERR_IO, "cannot save the checkpoint in '%s': %s", dir,
                         strerror(e));
    }
    if ((e = sync_dir(dir)))
        return attn_fail(err, ATTN_ERR_IO, "saved checkpoint %s but cannot sync '%s': %s", name,
                         dir, strerror(e));
    attn_status s = link_files(dir, name, final_path, err);
    if (!s) remove_older(dir, name);
    return s;
}

/* ------------------------------------------------------------ reading */

attn_status attn_ckpt_resolve(const char *dir, char *out, attn_error *err) {
    char name[256], p[ATTN_CKPT_PATH_MAX];
    if (live_folder(dir, name, sizeof name) || newest_folder(dir, 1, name, NULL)) {
        if (attn_path_join(out, ATTN_CKPT_PATH_MAX, dir, name))
            return attn_fail(err, ATTN_ERR_IO, "checkpoint path is too long");
        return ATTN_OK;
    }
    entry_info ei; /* a copy made of latest as a folder (cp -rL, zip) */
    if (classify(dir, ATTN_CKPT_LATEST, &ei) == E_POINTER && ei.is_dir &&
        is_whole(&ei.fi, holds_states(dir)))
        return attn_path_join(out, ATTN_CKPT_PATH_MAX, dir, ATTN_CKPT_LATEST)
                   ? attn_fail(err, ATTN_ERR_IO, "checkpoint path is too long")
                   : ATTN_OK;
    /* The older layout: the files at the top. */
    if (attn_path_join(p, ATTN_CKPT_PATH_MAX, dir, ATTN_CKPT_STATE) ||
        snprintf(out, ATTN_CKPT_PATH_MAX, "%s", dir) < 0)
        return attn_fail(err, ATTN_ERR_IO, "checkpoint path is too long");
    if (file_state(p, ckpt_files[1].format, NULL) != NOT_ATTN) return ATTN_OK;
    out[0] = '\0';
    latest_target(dir, name, sizeof name);
    if (name[0])
        return attn_fail(err, ATTN_ERR_NOT_FOUND,
                         "%s holds no checkpoint (%s names %s, which is missing)", dir,
                         ATTN_CKPT_LATEST, name);
    return attn_fail(err, ATTN_ERR_NOT_FOUND, "%s holds no checkpoint", dir);
}

int attn_ckpt_exists(const char *dir, int64_t *step) {
    char name[256];
    int64_t s = -1;
    folder_info fi;
    entry_info ei;
    int found = 1;
    if (live_folder(dir, name, sizeof name) || newest_folder(dir, 0, name, &fi)) {
        parse_ckpt_name(name, &s, NULL);
    } else if (classify(dir, ATTN_CKPT_LATEST, &ei) == E_POINTER && ei.fi.files > 0) {
        s = ei.fi.step;
    } else if (classify(dir, ATTN_CKPT_STATE, &ei) == E_TOP && ei.fi.files) {
        s = ei.fi.step;
    } else if (classify(dir, ATTN_CKPT_MODEL, &ei) == E_TOP && ei.fi.files) {
        s = ei.fi.step;
    } else {
        found = 0;
    }
    if (step) *step = s;
    return found;
}

/* ----------------------------------------------------------- cleaning */

/* Remove dir/nm (a file, link or folder of files, checked to be attn's). */
static int remove_entry(const char *dir, const char *nm, const entry_info *ei) {
    char p[ATTN_CKPT_PATH_MAX];
    if (attn_path_join(p, ATTN_CKPT_PATH_MAX, dir, nm)) return ENAMETOOLONG;
    if (ei->is_dir) return remove_tree(p);
    return unlink(p) != 0 && errno != ENOENT ? errno : 0;
}

attn_status attn_ckpt_clean_stale(const char *dir, int *removed, attn_error *err) {
    char live[256];
    int count = 0, first_err = 0;
    if (removed) *removed = 0;
    const int has_live = live_folder(dir, live, sizeof live), states = holds_states(dir);
    DIR *d = opendir(dir);
    if (!d) {
        int e = errno;
        return attn_fail(err, ATTN_ERR_IO, "cannot list '%s': %s", dir, strerror(e));
    }
    struct dirent *de;
    while ((de = readdir(d))) {
        const char *nm = de->d_name;
        entry_info ei;
        enum entry_kind k = classify(dir, nm, &ei);
        int go = k == E_TEMP;
        /* Without a live pointer it is not known which one is live: none goes. */
        if (k == E_FOLDER && has_live && strcmp(nm, live) != 0)
            go = ckpt_older(nm, live) || is_whole(&ei.fi, states) || ei.fi.files == 0;
        if (!go) continue;
        int e = remove_entry(dir, nm, &ei);
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

attn_status attn_ckpt_repair(const char *dir, char *what, size_t cap, attn_error *err) {
    char name[256], was[192] = "missing";
    if (what && cap) what[0] = '\0';
    if (live_folder(dir, name, sizeof name)) return ATTN_OK;
    entry_info ei;
    enum entry_kind k = classify(dir, ATTN_CKPT_LATEST, &ei);
    if (k == E_FOREIGN)
        return attn_fail(err, ATTN_ERR_STATE, "%s/%s is not attn's: move it away", dir,
                         ATTN_CKPT_LATEST);
    char from[ATTN_CKPT_PATH_MAX], to[ATTN_CKPT_PATH_MAX];
    if (k == E_POINTER && ei.is_dir) {
        /* A copy made latest a folder: it becomes a checkpoint folder of its own. */
        if (attn_path_join(from, ATTN_CKPT_PATH_MAX, dir, ATTN_CKPT_LATEST))
            return attn_fail(err, ATTN_ERR_IO, "checkpoint path is too long");
        if (ei.fi.files == 0) {
            if (rmdir(from) != 0 && errno != ENOENT)
                return attn_fail(err, ATTN_ERR_IO, "cannot remove the empty folder %s: %s", from,
                                 strerror(errno));
            snprintf(was, sizeof was, "an empty folder");
        } else {
            char moved[64];
            struct stat sb;
            for (int i = 1;; i++) {
                snprintf(moved, sizeof moved, "ckpt-%" PRId64 ".%d",
                         ei.fi.step >= 0 ? ei.fi.step : 0, i);
                if (attn_path_join(to, ATTN_CKPT_PATH_MAX, dir, moved))
                    return attn_fail(err, ATTN_ERR_IO, "checkpoint path is too long");
                if (lstat(to, &sb) != 0 && errno == ENOENT) break;
            }
            if (rename(from, to) != 0)
                return attn_fail(err, ATTN_ERR_IO, "cannot rename %s to %s: %s", from, to,
                                 strerror(errno));
            snprintf(was, sizeof was, "a folder (a copy made without symbolic links), kept as %s",
                     moved);
        }
    } else if (k == E_POINTER) {
        struct stat sb;
        const int file = !attn_path_join(from, ATTN_CKPT_PATH_MAX, dir, ATTN_CKPT_LATEST) &&
                         lstat(from, &sb) == 0 && S_ISREG(sb.st_mode);
        snprintf(was, sizeof was, "%s naming %s",
                 file ? "a file (a copy made without symbolic links)" : "a link", ei.target);
    }
    if (!newest_folder(dir, 1, name, NULL)) { /* nothing whole to point at */
        if (k == E_POINTER && ei.is_dir) {
            sync_dir(dir);
            if (what && cap) snprintf(what, cap, "%s/%s was %s", dir, ATTN_CKPT_LATEST, was);
        }
        return ATTN_OK;
    }
    int e = point_latest(dir, name);
    if (!e) e = sync_dir(dir);
    if (e)
        return attn_fail(err, ATTN_ERR_IO, "cannot point %s/%s at %s: %s", dir, ATTN_CKPT_LATEST,
                         name, strerror(e));
    if (what && cap)
        snprintf(what, cap, "%s/%s was %s; it now names %s, the newest complete checkpoint", dir,
                 ATTN_CKPT_LATEST, was, name);
    return ATTN_OK;
}

attn_status attn_ckpt_remove_all(const char *dir, int *removed, attn_error *err) {
    int count = 0, first_err = 0;
    if (removed) *removed = 0;
    /* The pointer first: a kill part-way leaves no live old checkpoint. */
    static const char *const top[3] = {ATTN_CKPT_LATEST, ATTN_CKPT_MODEL, ATTN_CKPT_STATE};
    for (int i = 0; i < 3; i++) {
        entry_info ei;
        enum entry_kind k = classify(dir, top[i], &ei);
        if (k != E_POINTER && k != E_TOP) continue;
        int e = remove_entry(dir, top[i], &ei);
        if (e && !first_err) first_err = e;
        if (!e) count++;
    }
    DIR *d = opendir(dir);
    if (!d) {
        int e = errno;
        if (e == ENOENT) return ATTN_OK;
        return attn_fail(err, ATTN_ERR_IO, "cannot list '%s': %s", dir, strerror(e));
    }
    struct dirent *de;
    while ((de = readdir(d))) {
        entry_info ei;
        enum entry_kind k = classify(dir, de->d_name, &ei);
        if (k != E_FOLDER && k != E_TEMP) continue;
        int e = remove_entry(dir, de->d_name, &ei);
        if (e && !first_err) first_err = e;
        if (!e) count++;
    }
    closedir(d);
    if (removed) *removed = count;
    if (first_err)
        return attn_fail(err, ATTN_ERR_IO, "cannot remove the old checkpoints in '%s': %s", dir,
                         strerror(first_err));
    return ATTN_OK;
}
