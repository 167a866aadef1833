/* The one check every output path goes through (see attn/checkpoint.h):
 * a run folder is the trainer's alone, an input is never overwritten, and
 * two outputs of one command never share a file. */
#define _DEFAULT_SOURCE /* realpath */
#define _POSIX_C_SOURCE 200809L
#include <cjson/cJSON.h>
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "attn/checkpoint.h"
#include "attn/fileio.h"
#include "run_dir.h"

#define OUT_PATH_MAX ATTN_CKPT_PATH_MAX
#define LINKS_MAX 40                    /* as the kernel's ELOOP limit */
#define HEADER_MAX ((uint64_t)16 << 20) /* attn's headers are far smaller */

/* out = the absolute path a write to path lands on: every link followed,
 * the last one too even when it dangles; folders that do not exist yet are
 * kept as named. 0 or an errno. */
static int resolve_out(const char *path, char *out, int depth) {
    if (depth > LINKS_MAX) return ELOOP;
    if (!*path) return ENOENT;
    char *full = realpath(path, NULL);
    if (full) {
        int e = strlen(full) < OUT_PATH_MAX ? 0 : ENAMETOOLONG;
        if (!e) strcpy(out, full);
        free(full);
        return e;
    }
    /* path does not exist (or dangles): resolve its folder, then its name. */
    char buf[OUT_PATH_MAX];
    size_t n = strlen(path);
    if (n >= OUT_PATH_MAX) return ENAMETOOLONG;
    memcpy(buf, path, n + 1);
    while (n > 1 && buf[n - 1] == '/')
        buf[--n] = '\0';
    char *slash = strrchr(buf, '/');
    const char *name = slash ? slash + 1 : buf;
    if (!strcmp(name, ".") || !strcmp(name, "..")) return ENOENT; /* a missing folder's parent */
    char dir[OUT_PATH_MAX];
    int e;
    if (!slash)
        e = resolve_out(".", dir, depth + 1);
    else if (slash == buf)
        e = (strcpy(dir, "/"), 0);
    else {
        *slash = '\0';
        e = resolve_out(buf, dir, depth + 1);
    }
    if (e) return e;
    char joined[OUT_PATH_MAX];
    if (attn_path_join(joined, sizeof joined, strcmp(dir, "/") ? dir : "", name))
        return ENAMETOOLONG;
    char target[OUT_PATH_MAX];
    ssize_t k = readlink(joined, target, sizeof target - 1);
    if (k < 0) return (strcpy(out, joined), 0); /* a new name */
    target[k] = '\0';
    if (target[0] == '/') return resolve_out(target, out, depth + 1);
    char rel[OUT_PATH_MAX];
    if (attn_path_join(rel, sizeof rel, strcmp(dir, "/") ? dir : "", target)) return ENAMETOOLONG;
    return resolve_out(rel, out, depth + 1);
}

int attn_path_in_run(const char *path, int self, char *run, size_t cap) {
    char p[OUT_PATH_MAX], m[OUT_PATH_MAX + sizeof RUN_DIR_MARKER + 1];
    if (!path || resolve_out(path, p, 0)) return 0;
    struct stat sb;
    for (int first = 1;; first = 0) {
        if (!first || self) {
            if (attn_path_join(m, sizeof m, strcmp(p, "/") ? p : "", RUN_DIR_MARKER) == 0 &&
                lstat(m, &sb) == 0) {
                if (run && cap) snprintf(run, cap, "%s", p);
                return 1;
            }
        }
        char *slash = strrchr(p, '/');
        if (!slash || !strcmp(p, "/")) return 0;
        if (slash == p)
            p[1] = '\0';
        else
            *slash = '\0';
    }
}

/* a and b are one file: the same resolved name, or the same inode. */
static int same_file(const char *ra, const char *rb) {
    struct stat sa, sb;
    if (!strcmp(ra, rb)) return 1;
    return stat(ra, &sa) == 0 && stat(rb, &sb) == 0 && sa.st_dev == sb.st_dev &&
           sa.st_ino == sb.st_ino;
}

static int is_stdio(const char *p) {
    return !p || !strcmp(p, "-");
}

attn_status attn_output_check(const char *out, const char *const *inputs, int n_inputs,
                              const char *const *outputs, int n_outputs, attn_error *err) {
    if (is_stdio(out)) return ATTN_OK;
    char r[OUT_PATH_MAX], run[OUT_PATH_MAX], ro[OUT_PATH_MAX];
    int e = resolve_out(out, r, 0);
    if (e) return attn_fail(err, ATTN_ERR_IO, "cannot write '%s': %s", out, strerror(e));
    if (attn_path_in_run(r, 1, run, sizeof run))
        return attn_fail(err, ATTN_ERR_INVALID_ARG,
                         "cannot write '%s': it lies in the run folder %s (it holds %s), where "
                         "only attn train writes; choose a path outside it",
                         out, run, RUN_DIR_MARKER);
    const char *base = strrchr(r, '/');
    if (base && !strcmp(base + 1, RUN_DIR_MARKER))
        return attn_fail(err, ATTN_ERR_INVALID_ARG,
                         "cannot write '%s': %s is the name of attn's run marker", out,
                         RUN_DIR_MARKER);
    struct stat so, si;
    if (stat(r, &so) == 0 && S_ISREG(so.st_mode)) {
        for (int i = 0; i < n_inputs; i++) {
            if (is_stdio(inputs[i]) || stat(inputs[i], &si) != 0) continue;
            if (si.st_dev == so.st_dev && si.st_ino == so.st_ino)
                return attn_fail(err, ATTN_ERR_INVALID_ARG,
                                 "cannot write '%s': it is the input '%s'%s, which writing would "
                                 "destroy; choose another output path",
                                 out, inputs[i],
                                 strcmp(out, inputs[i]) ? " under another name" : "");
        }
    }
    for (int i = 0; i < n_outputs; i++) {
        if (is_stdio(outputs[i]) || resolve_out(outputs[i], ro, 0)) continue;
        if (same_file(r, ro))
            return attn_fail(err, ATTN_ERR_INVALID_ARG,
                             "'%s' and '%s' name one file: give each output its own", out,
                             outputs[i]);
    }
    return ATTN_OK;
}

/* The "corpus_path" metadata of the safetensors file at path, read from its
 * header only (a training state holds the optimizer's moments: large). */
static char *header_corpus(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    unsigned char len8[8];
    char *hdr = NULL, *corpus = NULL;
    uint64_t n = 0;
    if (fread(len8, 1, 8, f) == 8) {
        for (int i = 0; i < 8; i++)
            n |= (uint64_t)len8[i] << (8 * i);
        if (n >= 2 && n <= HEADER_MAX && (hdr = malloc((size_t)n)) &&
            fread(hdr, 1, (size_t)n, f) == (size_t)n) {
            cJSON *root = cJSON_ParseWithLength(hdr, (size_t)n);
            const cJSON *meta = cJSON_GetObjectItemCaseSensitive(root, "__metadata__");
            const cJSON *cp = cJSON_GetObjectItemCaseSensitive(meta, "corpus_path");
            if (cJSON_IsString(cp) && *cp->valuestring &&
                (corpus = malloc(strlen(cp->valuestring) + 1)))
                strcpy(corpus, cp->valuestring);
            cJSON_Delete(root);
        }
    }
    free(hdr);
    fclose(f);
    return corpus;
}

char *attn_ckpt_corpus_path(const char *ckpt) {
    char live[ATTN_CKPT_PATH_MAX], path[ATTN_CKPT_PATH_MAX];
    struct stat sb;
    if (!ckpt || stat(ckpt, &sb) != 0 || !S_ISDIR(sb.st_mode)) return NULL; /* a model file */
    if (attn_ckpt_resolve(ckpt, live, NULL) ||
        attn_path_join(path, sizeof path, live, ATTN_CKPT_STATE))
        return NULL;
    return header_corpus(path);
}

attn_status attn_ckpt_output_check(const char *ckpt, const char *out, const char *const *inputs,
                                   int n_inputs, const char *const *outputs, int n_outputs,
                                   attn_error *err) {
    if (is_stdio(out)) return ATTN_OK;
    char files[4][ATTN_CKPT_PATH_MAX], live[ATTN_CKPT_PATH_MAX];
    const char **all = malloc((size_t)(6 + (n_inputs > 0 ? n_inputs : 0)) * sizeof *all);
    if (!all) return attn_fail(err, ATTN_ERR_NOMEM, "out of memory");
    int n = 0;
    all[n++] = ckpt;
    struct stat sb;
    if (ckpt && stat(ckpt, &sb) == 0 && S_ISDIR(sb.st_mode)) {
        const int has_live = attn_ckpt_resolve(ckpt, live, NULL) == ATTN_OK;
        const char *names[2] = {ATTN_CKPT_MODEL, ATTN_CKPT_STATE};
        for (int i = 0; i < 2; i++) {
            if (!attn_path_join(files[2 * i], ATTN_CKPT_PATH_MAX, ckpt, names[i]))
                all[n++] = files[2 * i];
            if (has_live && !attn_path_join(files[2 * i + 1], ATTN_CKPT_PATH_MAX, live, names[i]))
                all[n++] = files[2 * i + 1];
        }
    }
    char *corpus = attn_ckpt_corpus_path(ckpt); /* an unreadable state is the loader's to report */
    if (corpus) all[n++] = corpus;
    for (int i = 0; i < n_inputs; i++)
        all[n++] = inputs[i];
    attn_status s = attn_output_check(out, all, n, outputs, n_outputs, err);
    free(corpus);
    free(all);
    return s;
}

attn_status attn_ckpt_check_output(const char *ckpt, const char *path, attn_error *err) {
    return attn_ckpt_output_check(ckpt, path, NULL, 0, NULL, 0, err);
}
