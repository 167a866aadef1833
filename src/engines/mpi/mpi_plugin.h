/* The MPI plug-in's table (internal): libattn-mpi.so exports one
 * attn_mpi_ops under ATTN_MPI_PLUGIN_SYMBOL. It is a thin layer over
 * MPI_COMM_WORLD; the algorithms (the ordered gradient chain, the rank
 * checks) stay in src/dist.c. Every int-returning entry returns an MPI
 * error code, 0 (MPI_SUCCESS) on success. Change ATTN_MPI_PLUGIN_ABI
 * whenever this table changes. */
#ifndef ATTN_MPI_PLUGIN_H
#define ATTN_MPI_PLUGIN_H

#include <stddef.h>
#include <stdint.h>

#include "engines/plugin.h"

#define ATTN_MPI_PLUGIN_ABI 1u
#define ATTN_MPI_PLUGIN_SYMBOL "attn_mpi_plugin_table"
#define ATTN_MPI_PLUGIN_FILE "libattn-mpi.so"

typedef struct attn_mpi_ops {
    attn_plugin_header header;
    /* MPI_Init, then this process's rank and the world's size. */
    int (*init)(int *argc, char ***argv, int *rank, int *size);
    void (*finalize)(void);
    void (*abort)(int code);
    /* MPI_Error_string into msg (cap bytes, always terminated). */
    void (*error_string)(int rc, char *msg, size_t cap);
    /* all[r] = rank r's value (MPI_Allgather of one uint64). */
    int (*allgather_u64)(uint64_t value, uint64_t *all);
    /* *out = max over the ranks of flag (MPI_Allreduce, MPI_MAX). */
    int (*allreduce_max_int)(int flag, int *out);
    /* In place: rank r's counts[r] floats at displs[r] go to every rank. */
    int (*allgatherv_float)(float *v, const int *counts, const int *displs);
    int (*send_float)(const float *p, int n, int to);
    int (*recv_float)(float *p, int n, int from);
    int (*bcast_float)(float *p, int n, int root);
} attn_mpi_ops;

#define ATTN_MPI_PLUGIN_LAYOUT ((uint64_t)sizeof(attn_mpi_ops))

#endif
