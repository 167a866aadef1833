/* Data-parallel ranks over MPI, or one rank without it (see attn/dist.h). */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */

#include "attn/dist.h"
#include "clock.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifdef ATTN_HAVE_MPI
#include <mpi.h>
#endif

/* Floats per bucket of the chain: 1 MiB, small enough to pipeline over a
 * few ranks, large enough that per-message latency stays small. */
#define BUCKET_FLOATS ((size_t)1 << 18)

int attn_dist_compiled(void) {
#ifdef ATTN_HAVE_MPI
    return 1;
#else
    return 0;
#endif
}

static int launched_by_mpirun(void) {
    static const char *const vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "PMI_RANK"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
        if (getenv(vars[i])) return 1;
    return 0;
}

void attn_dist_block(const attn_dist *d, size_t n, size_t *lo, size_t *hi) {
    size_t r = d ? (size_t)d->rank : 0, s = d ? (size_t)d->size : 1;
    *lo = n * r / s;
    *hi = n * (r + 1) / s;
}

#ifdef ATTN_HAVE_MPI
static attn_status mpi_fail(attn_error *err, int rc, const char *what) {
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(rc, msg, &len);
    return attn_fail(err, ATTN_ERR_IO, "MPI %s failed: %s", what, msg);
}
#endif

attn_status attn_dist_init(attn_dist *d, int *argc, char ***argv, attn_error *err) {
    memset(d, 0, sizeof *d);
    d->size = 1;
    if (!launched_by_mpirun()) return ATTN_OK;
#ifdef ATTN_HAVE_MPI
    int rc = MPI_Init(argc, argv);
    if (rc != MPI_SUCCESS) return attn_fail(err, ATTN_ERR_IO, "MPI_Init failed (%d)", rc);
    d->mpi = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &d->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &d->size);
    d->bucket = malloc(BUCKET_FLOATS * sizeof *d->bucket);
    d->counts = malloc((size_t)d->size * sizeof *d->counts);
    d->displs = malloc((size_t)d->size * sizeof *d->displs);
    if (!d->bucket || !d->counts || !d->displs) {
        attn_dist_finalize(d);
        return attn_fail(err, ATTN_ERR_NOMEM, "out of memory for MPI buffers");
    }
    return ATTN_OK;
#else
    (void)argc;
    (void)argv;
    /* Several copies each training alone would silently waste the machines. */
    return attn_fail(err, ATTN_ERR_INVALID_ARG,
                     "started by mpirun, but this attn was built without MPI "
                     "(install libopenmpi-dev and rebuild)");
#endif
}

void attn_dist_finalize(attn_dist *d) {
#ifdef ATTN_HAVE_MPI
    if (d->mpi) MPI_Finalize();
#endif
    free(d->bucket);
    free(d->counts);
    free(d->displs);
    memset(d, 0, sizeof *d);
    d->size = 1;
}

void attn_dist_abort(attn_dist *d, int code) {
#ifdef ATTN_HAVE_MPI
    if (d && d->mpi) MPI_Abort(MPI_COMM_WORLD, code);
#else
    (void)d;
    (void)code;
#endif
}

attn_status attn_dist_check_same(attn_dist *d, uint64_t value, const char *what, attn_error *err) {
    if (!d || d->size == 1) return ATTN_OK;
#ifdef ATTN_HAVE_MPI
    uint64_t *all = malloc((size_t)d->size * sizeof *all);
    if (!all) return attn_fail(err, ATTN_ERR_NOMEM, "out of memory comparing ranks");
    double t0 = attn_now_s();
    int rc = MPI_Allgather(&value, 1, MPI_UINT64_T, all, 1, MPI_UINT64_T, MPI_COMM_WORLD);
    d->comm_s += attn_now_s() - t0;
    attn_status st = ATTN_OK;
    if (rc != MPI_SUCCESS) st = mpi_fail(err, rc, "Allgather");
    for (int r = 1; r < d->size && !st; r++)
        if (all[r] != all[0])
            st = attn_fail(err, ATTN_ERR_INVALID_ARG,
                           "rank %d's %s differs from rank 0's (hash %016llx vs %016llx): every "
                           "rank must run the same attn with the same arguments",
                           r, what, (unsigned long long)all[r], (unsigned long long)all[0]);
    free(all);
    return st;
#else
    (void)value;
    (void)what;
    (void)err;
    return ATTN_OK;
#endif
}

int attn_dist_any(attn_dist *d, int flag) {
    if (!d || d->size == 1) return flag != 0;
#ifdef ATTN_HAVE_MPI
    int in = flag != 0, out = in;
    double t0 = attn_now_s();
    if (MPI_Allreduce(&in, &out, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD) != MPI_SUCCESS) out = 1;
    d->comm_s += attn_now_s() - t0;
    return out;
#else
    return flag != 0;
#endif
}

attn_status attn_dist_allgather(attn_dist *d, float *v, size_t n, attn_error *err) {
    if (!d || d->size == 1) return ATTN_OK;
#ifdef ATTN_HAVE_MPI
    for (int r = 0; r < d->size; r++) {
        size_t lo = n * (size_t)r / (size_t)d->size, hi = n * (size_t)(r + 1) / (size_t)d->size;
        d->displs[r] = (int)lo;
        d->counts[r] = (int)(hi - lo);
    }
    double t0 = attn_now_s();
    int rc = MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, v, d->counts, d->displs, MPI_FLOAT,
                            MPI_COMM_WORLD);
    d->comm_s += attn_now_s() - t0;
    if (rc != MPI_SUCCESS) return mpi_fail(err, rc, "Allgatherv");
    d->sent_bytes += (uint64_t)d->counts[d->rank] * sizeof(float);
    d->recv_bytes += (uint64_t)(n - (size_t)d->counts[d->rank]) * sizeof(float);
    return ATTN_OK;
#else
    (void)v;
    (void)n;
    (void)err;
    return ATTN_OK;
#endif
}

/* acc[i] = ((acc[i] + l[0][i]) + l[1][i]) + ... for i in [off, off+len). */
static void fold_into(float *acc, float *const *l, int k, size_t off, size_t len) {
    for (int j = 0; j < k; j++) {
        const float *g = l[j] + off;
        for (size_t i = 0; i < len; i++)
            acc[i] += g[i];
    }
}

attn_status attn_dist_fold(attn_dist *d, float *const *locals, int k, size_t n, attn_error *err) {
    float *s = locals[0];
    if (!d || d->size == 1) {
        fold_into(s, locals + 1, k - 1, 0, n);
        return ATTN_OK;
    }
#ifdef ATTN_HAVE_MPI
    const int r = d->rank, last = d->size - 1;
    int rc = MPI_SUCCESS;
    if (r == 0) fold_into(s, locals + 1, k - 1, 0, n);
    for (size_t off = 0; off < n && rc == MPI_SUCCESS; off += BUCKET_FLOATS) {
        const size_t len = n - off < BUCKET_FLOATS ? n - off : BUCKET_FLOATS;
        double t0 = attn_now_s();
        if (r > 0) {
            rc = MPI_Recv(d->bucket, (int)len, MPI_FLOAT, r - 1, 0, MPI_COMM_WORLD,
                          MPI_STATUS_IGNORE);
            d->comm_s += attn_now_s() - t0;
            if (rc != MPI_SUCCESS) break;
            d->recv_bytes += len * sizeof(float);
            /* partial + g_first + ... : the bucket comes first in the fold. */
            fold_into(d->bucket, locals, k, off, len);
            memcpy(s + off, d->bucket, len * sizeof(float));
            t0 = attn_now_s();
        }
        if (r < last) {
            rc = MPI_Send(s + off, (int)len, MPI_FLOAT, r + 1, 0, MPI_COMM_WORLD);
            d->comm_s += attn_now_s() - t0;
            d->sent_bytes += len * sizeof(float);
        }
    }
    if (rc != MPI_SUCCESS) return mpi_fail(err, rc, "Send/Recv of gradients");
    /* The last rank holds S; everyone gets it. */
    for (size_t off = 0; off < n; off += (size_t)1 << 26) {
        const size_t len = n - off < ((size_t)1 << 26) ? n - off : ((size_t)1 << 26);
        double t0 = attn_now_s();
        rc = MPI_Bcast(s + off, (int)len, MPI_FLOAT, last, MPI_COMM_WORLD);
        d->comm_s += attn_now_s() - t0;
        if (rc != MPI_SUCCESS) return mpi_fail(err, rc, "Bcast of gradients");
        if (r == last)
            d->sent_bytes += len * sizeof(float);
        else
            d->recv_bytes += len * sizeof(float);
    }
    return ATTN_OK;
#else
    (void)err;
    return ATTN_OK;
#endif
}
