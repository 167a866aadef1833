/* Engines as plug-ins: shared libraries opened on first use (internal).
 *
 * The CUDA engine (libattn-cuda.so: cuBLAS and the CUDA runtime) and the MPI
 * transport (libattn-mpi.so: libmpi) are built as plug-ins beside libattn, as
 * ggml builds its backends, so a program that never asks for a GPU or for
 * ranks loads neither library. A plug-in exports one table under a fixed
 * symbol; the table starts with an attn_plugin_header, which the loader
 * checks against the library: the kind, the ABI number, the attn version and
 * the sizes of the structs both sides read must all be equal.
 *
 * Where a plug-in is looked for, in order:
 *   1. $ATTN_PLUGIN_DIR, when set: that folder only ($ATTN_MODULE_DIR, its
 *      old name, is read when it is not; removed after 0.2);
 *   2. the folder of the file holding libattn's code: libattn.so, or the
 *      program linked with libattn.a (build/ in the build tree);
 *   3. the folder of libattn-ompwait.so, which attn and libattn.so load by
 *      their run path (an installed bin/attn finds PREFIX/lib this way);
 *   4. the library folder the build was configured to install into.
 * The loaded table stays for the life of the process (plug-ins are never
 * closed: the CUDA and MPI runtimes do not support being unloaded). */
#ifndef ATTN_ENGINE_PLUGIN_H
#define ATTN_ENGINE_PLUGIN_H

#include <stdint.h>

#include "attn/status.h"

typedef enum attn_plugin_kind {
    ATTN_PLUGIN_CUDA = 0,
    ATTN_PLUGIN_MPI,
    ATTN_PLUGIN_KINDS
} attn_plugin_kind;

typedef struct attn_plugin_header {
    uint32_t kind;       /* attn_plugin_kind */
    uint32_t abi;        /* the kind's ABI number (its table's layout) */
    const char *version; /* ATTN_VERSION of the build that made the plug-in */
    uint64_t layout;     /* sizes of the shared structs, as the plug-in saw them */
} attn_plugin_header;

/* The table of the plug-in kind, opened once per process (thread-safe): every
 * later call returns the same table, or the same error naming what is
 * missing ("was not built", "was not found", a dlopen error, a version
 * mismatch). */
attn_status attn_engine_plugin(attn_plugin_kind kind, const attn_plugin_header **table,
                               attn_error *err);

/* The same without the cache: dir (NULL: the search above) is the only
 * folder looked in. attn_engine_plugin calls it once per kind, with
 * $ATTN_PLUGIN_DIR. */
attn_status attn_engine_plugin_open(attn_plugin_kind kind, const char *dir,
                                    const attn_plugin_header **table, attn_error *err);

#endif
