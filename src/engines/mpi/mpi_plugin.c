/* libattn-mpi.so: MPI_COMM_WORLD behind the table of mpi_plugin.h. Only
 * this plug-in links libmpi; libattn opens it when the process is one of
 * several ranks (src/dist.c). */
#include "mpi_plugin.h"

#include <mpi.h>
#include <stdio.h>

#include "attn/version.h"

static int init(int *argc, char ***argv, int *rank, int *size) {
    int rc = MPI_Init(argc, argv);
    if (rc == MPI_SUCCESS) rc = MPI_Comm_rank(MPI_COMM_WORLD, rank);
    if (rc == MPI_SUCCESS) rc = MPI_Comm_size(MPI_COMM_WORLD, size);
    return rc;
}

static void finalize(void) {
    MPI_Finalize();
}

static void abort_job(int code) {
    MPI_Abort(MPI_COMM_WORLD, code);
}

static void error_string(int rc, char *msg, size_t cap) {
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(rc, text, &len) != MPI_SUCCESS)
        snprintf(text, sizeof text, "error %d", rc);
    snprintf(msg, cap, "%s", text);
}

static int allgather_u64(uint64_t value, uint64_t *all) {
    return MPI_Allgather(&value, 1, MPI_UINT64_T, all, 1, MPI_UINT64_T, MPI_COMM_WORLD);
}

static int allreduce_max_int(int flag, int *out) {
    return MPI_Allreduce(&flag, out, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
}

static int allgatherv_float(float *v, const int *counts, const int *displs) {
    return MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, v, counts, displs, MPI_FLOAT,
                          MPI_COMM_WORLD);
}

static int send_float(const float *p, int n, int to) {
    return MPI_Send(p, n, MPI_FLOAT, to, 0, MPI_COMM_WORLD);
}

static int recv_float(float *p, int n, int from) {
    return MPI_Recv(p, n, MPI_FLOAT, from, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
}

static int bcast_float(float *p, int n, int root) {
    return MPI_Bcast(p, n, MPI_FLOAT, root, MPI_COMM_WORLD);
}

__attribute__((visibility("default"))) const attn_mpi_ops attn_mpi_plugin_table = {
    .header = {ATTN_PLUGIN_MPI, ATTN_MPI_PLUGIN_ABI, ATTN_VERSION, ATTN_MPI_PLUGIN_LAYOUT},
    .init = init,
    .finalize = finalize,
    .abort = abort_job,
    .error_string = error_string,
    .allgather_u64 = allgather_u64,
    .allreduce_max_int = allreduce_max_int,
    .allgatherv_float = allgatherv_float,
    .send_float = send_float,
    .recv_float = recv_float,
    .bcast_float = bcast_float,
};
