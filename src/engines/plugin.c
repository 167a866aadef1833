/* Finding, opening and checking the engine plug-ins (plugin.h). */
#define _GNU_SOURCE /* dl_iterate_phdr, realpath */
#include "plugin.h"

#include <dlfcn.h>
#include <limits.h>
#include <link.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "attn/version.h"
#include "cuda/cuda_plugin.h"
#include "mpi/mpi_plugin.h"

/* Set by CMakeLists.txt: where `make install` puts the plug-ins, and why a
 * plug-in was not built. */
#ifndef ATTN_PLUGIN_LIBDIR
#error "ATTN_PLUGIN_LIBDIR (the install library folder) must be defined"
#endif
#ifndef ATTN_CUDA_NOT_BUILT
#define ATTN_CUDA_NOT_BUILT NULL
#endif
#ifndef ATTN_MPI_NOT_BUILT
#define ATTN_MPI_NOT_BUILT NULL
#endif

typedef struct kind_spec {
    const char *what; /* for messages */
    const char *file;
    const char *symbol;
    uint32_t abi;
    uint64_t layout;
    const char *not_built; /* NULL when the build made the plug-in, else why not */
    const char *unbuilt_msg;
    /* Open MPI opens plugins of its own; in builds whose plugins do not
     * link libmpi they need its symbols global (why mpi4py loads it so;
     * Debian's work either way). The CUDA engine keeps its symbols local. */
    int global;
} kind_spec;

static const kind_spec KINDS[ATTN_PLUGIN_KINDS] = {
    [ATTN_PLUGIN_CUDA] = {"the CUDA engine", ATTN_CUDA_PLUGIN_FILE, ATTN_CUDA_PLUGIN_SYMBOL,
                          ATTN_CUDA_PLUGIN_ABI, ATTN_CUDA_PLUGIN_LAYOUT, ATTN_CUDA_NOT_BUILT,
                          "attn was built without CUDA: the CUDA engine was not built (%s); "
                          "configure with nvcc available (on PATH, or CUDACXX) and -DATTN_CUDA=ON",
                          0},
    [ATTN_PLUGIN_MPI] = {"the MPI", ATTN_MPI_PLUGIN_FILE, ATTN_MPI_PLUGIN_SYMBOL,
                         ATTN_MPI_PLUGIN_ABI, ATTN_MPI_PLUGIN_LAYOUT, ATTN_MPI_NOT_BUILT,
                         "this attn was built without MPI: the MPI plug-in was not built (%s); "
                         "install libopenmpi-dev and configure with -DATTN_MPI=ON",
                         1},
};

/* ------------------------------------------------------- where to look */

#define MAX_DIRS 3

/* The file holding addr, or else the one called name ("/libattn-...so"):
 * its canonical path. The main program has an empty name. */
typedef struct find_image {
    const void *addr;
    const char *name;
    char path[PATH_MAX];
    int found;
} find_image;

static int holds(const struct dl_phdr_info *info, const void *addr) {
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        const char *lo = (const char *)(info->dlpi_addr + ph->p_vaddr);
        if (ph->p_type == PT_LOAD && (const char *)addr >= lo &&
            (const char *)addr < lo + ph->p_memsz)
            return 1;
    }
    return 0;
}

static int visit(struct dl_phdr_info *info, size_t size, void *data) {
    (void)size;
    find_image *f = data;
    const char *name = info->dlpi_name;
    size_t n = strlen(name), k = f->name ? strlen(f->name) : 0;
    if (f->addr ? !holds(info, f->addr) : !(n >= k && strcmp(name + n - k, f->name) == 0)) return 0;
    if (name[0] == '\0') {
        ssize_t len = readlink("/proc/self/exe", f->path, sizeof f->path - 1);
        if (len <= 0) return 1;
        f->path[len] = '\0';
    } else if (!realpath(name, f->path)) {
        return 1;
    }
    f->found = 1;
    return 1;
}

/* Adds the folder of the image find looks for, unless it is there already. */
static void add_dir_of(char dirs[MAX_DIRS][PATH_MAX], int *n, find_image *f) {
    dl_iterate_phdr(visit, f);
    char *slash = f->found ? strrchr(f->path, '/') : NULL;
    if (!slash || *n >= MAX_DIRS) return;
    *slash = '\0';
    for (int i = 0; i < *n; i++)
        if (strcmp(dirs[i], f->path) == 0) return;
    snprintf(dirs[(*n)++], PATH_MAX, "%s", f->path);
}

static const char anchor = 0; /* any object of libattn's own image */

static int search_dirs(char dirs[MAX_DIRS][PATH_MAX]) {
    int n = 0;
    find_image self = {.addr = &anchor}, ompwait = {.name = "/libattn-ompwait.so"};
    add_dir_of(dirs, &n, &self);
    add_dir_of(dirs, &n, &ompwait);
    char real[PATH_MAX];
    const char *libdir = realpath(ATTN_PLUGIN_LIBDIR, real) ? real : ATTN_PLUGIN_LIBDIR;
    for (int i = 0; i < n; i++)
        if (strcmp(dirs[i], libdir) == 0) return n;
    snprintf(dirs[n++], PATH_MAX, "%s", libdir);
    return n;
}

/* ------------------------------------------------------------- opening */

static attn_status open_file(const kind_spec *k, const char *path, const attn_plugin_header **table,
                             attn_error *err) {
    void *h = dlopen(path, RTLD_NOW | (k->global ? RTLD_GLOBAL : RTLD_LOCAL));
    if (!h) {
        const char *why = dlerror();
        return attn_fail(err, ATTN_ERR_IO, "cannot open %s plug-in %s: %s", k->what, path,
                         why ? why : "unknown error");
    }
    const attn_plugin_header *t = dlsym(h, k->symbol);
    if (!t)
        return attn_fail(err, ATTN_ERR_FORMAT, "%s is not %s plug-in (it has no symbol %s)", path,
                         k->what, k->symbol);
    if (t->kind != (uint32_t)(k - KINDS) || t->abi != k->abi || !t->version ||
        strcmp(t->version, ATTN_VERSION) != 0 || t->layout != k->layout)
        return attn_fail(err, ATTN_ERR_FORMAT,
                         "%s was built with attn %s (plug-in ABI %u), not with this library "
                         "(attn %s, ABI %u): install the plug-in built with this attn",
                         path, t->version ? t->version : "?", (unsigned)t->abi, ATTN_VERSION,
                         (unsigned)k->abi);
    *table = t;
    return ATTN_OK;
}

attn_status attn_engine_plugin_open(attn_plugin_kind kind, const char *dir,
                                    const attn_plugin_header **table, attn_error *err) {
    *table = NULL;
    if ((unsigned)kind >= ATTN_PLUGIN_KINDS)
        return attn_fail(err, ATTN_ERR_INVALID_ARG, "unknown engine plug-in %d", (int)kind);
    const kind_spec *k = &KINDS[kind];
    if (k->not_built) return attn_fail(err, ATTN_ERR_STATE, k->unbuilt_msg, k->not_built);
    char dirs[MAX_DIRS][PATH_MAX];
    int n = 0;
    if (dir)
        snprintf(dirs[n++], PATH_MAX, "%s", dir);
    else
        n = search_dirs(dirs);
    char looked[ATTN_ERROR_MSG_MAX] = "";
    size_t used = 0;
    for (int i = 0; i < n; i++) {
        char path[PATH_MAX];
        struct stat st;
        if ((size_t)snprintf(path, sizeof path, "%s/%s", dirs[i], k->file) >= sizeof path) continue;
        if (stat(path, &st) == 0) return open_file(k, path, table, err);
        if (used < sizeof looked)
            used +=
                (size_t)snprintf(looked + used, sizeof looked - used, "%s%s", i ? ", " : "", path);
    }
    return attn_fail(err, ATTN_ERR_NOT_FOUND,
                     "%s plug-in %s was not found at %s (ATTN_PLUGIN_DIR=FOLDER says where it is)",
                     k->what, k->file, n ? looked : "(no folder to look in)");
}

/* ------------------------------------------------------- once a process */

/* The process's plug-ins: like the dlopen handles under them, one per
 * process, loaded by the first call that needs one. */
static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
    int done;
    attn_status status;
    attn_error err;
    const attn_plugin_header *table;
} cache[ATTN_PLUGIN_KINDS];

attn_status attn_engine_plugin(attn_plugin_kind kind, const attn_plugin_header **table,
                               attn_error *err) {
    *table = NULL;
    if ((unsigned)kind >= ATTN_PLUGIN_KINDS)
        return attn_fail(err, ATTN_ERR_INVALID_ARG, "unknown engine plug-in %d", (int)kind);
    pthread_mutex_lock(&cache_lock);
    if (!cache[kind].done) {
        const char *dir = getenv("ATTN_PLUGIN_DIR");
        if (!dir) dir = getenv("ATTN_MODULE_DIR"); /* deprecated name; removed after 0.2 */
        attn_error_clear(&cache[kind].err);
        cache[kind].status = attn_engine_plugin_open(kind, dir && *dir ? dir : NULL,
                                                     &cache[kind].table, &cache[kind].err);
        cache[kind].done = 1;
    }
    attn_status s = cache[kind].status;
    *table = cache[kind].table;
    if (s) attn_fail(err, s, "%s", cache[kind].err.msg);
    pthread_mutex_unlock(&cache_lock);
    return s;
}
