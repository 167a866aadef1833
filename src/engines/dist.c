/* Data-parallel ranks over MPI, or one rank without it (see attn/dist.h).
 * MPI itself lives in libattn-mpi.so (src/engines/mpi/), opened only when the
 * launcher's environment says this process is one of several ranks. */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */

#include "attn/dist.h"
#include "base/clock.h"
#include "mpi/mpi_plugin.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Floats per bucket of the chain: 1 MiB, small enough to pipeline over a
 * few ranks, large enough that per-message latency stays small. */
#define BUCKET_FLOATS ((size_t)1 << 18)

int attn_dist_compiled(void) {
#ifdef ATTN_MPI_NOT_BUILT
    return 0;
#else
    return 1;
#endif
}

/* 1 when the launcher started this process as one of several ranks: Open
 * MPI (OMPI_COMM_WORLD_SIZE) or MPICH/Hydra (PMI_SIZE) say how many; a
 * PMIx or PMI rank without a size asks MPI. A world of one rank runs
 * without MPI: it has nobody to talk to. */
static int one_of_several_ranks(void) {
    static const char *const sizes[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"};
    static const char *const ranks[] = {"PMIX_RANK", "PMI_RANK"};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        const char *v = getenv(sizes[i]);
        if (v && *v) return strtol(v, NULL, 10) != 1;
    }
    for (size_t i = 0; i < sizeof ranks / sizeof ranks[0]; i++)
        if (getenv(ranks[i])) return 1;
    return 0;
}

void attn_dist_block(const attn_dist *d, size_t n, size_t *lo, size_t *hi) {
    size_t r = d ? (size_t)d->rank : 0, s = d ? (size_t)d->size : 1;
    *lo = n * r / s;
    *hi = n * (r + 1) / s;
}

static attn_status mpi_fail(const attn_dist *d, attn_error *err, int rc, const char *what) {
    char msg[256];
    d->ops->error_string(rc, msg, sizeof msg);
    return attn_fail(err, ATTN_ERR_IO, "MPI %s failed: %s", what, msg);
}

attn_status attn_dist_init(attn_dist *d, int *argc, char ***argv, attn_error *err) {
    memset(d, 0, sizeof *d);
    d->size = 1;
    if (!one_of_several_ranks()) return ATTN_OK;
    const attn_plugin_header *t = NULL;
    attn_error why;
    attn_status s = attn_engine_plugin(ATTN_PLUGIN_MPI, &t, &why);
    /* Several copies each training alone would silently waste the machines. */
    if (s) return attn_fail(err, s, "started by mpirun as one of several ranks, but %s", why.msg);
    const attn_mpi_ops *ops = (const attn_mpi_ops *)t;
    int rc = ops->init(argc, argv, &d->rank, &d->size);
    if (rc) return attn_fail(err, ATTN_ERR_IO, "MPI_Init failed (%d)", rc);
    d->ops = ops;
    d->mpi = 1;
    d->bucket = malloc(BUCKET_FLOATS * sizeof *d->bucket);
    d->counts = malloc((size_t)d->size * sizeof *d->counts);
    d->displs = malloc((size_t)d->size * sizeof *d->displs);
    if (!d->bucket || !d->counts || !d->displs) {
        attn_dist_free(d);
        return attn_fail(err, ATTN_ERR_NOMEM, "out of memory for MPI buffers");
    }
    return ATTN_OK;
}

void attn_dist_free(attn_dist *d) {
    if (d->mpi) d->ops->finalize();
    free(d->bucket);
    free(d->counts);
    free(d->displs);
    memset(d, 0, sizeof *d);
    d->size = 1;
}

void attn_dist_abort(attn_dist *d, int code) {
    if (d && d->mpi) d->ops->abort(code);
}

attn_status attn_dist_check_same(attn_dist *d, uint64_t value, const char *what, attn_error *err) {
    if (!d || d->size == 1) return ATTN_OK;
    uint64_t *all = malloc((size_t)d->size * sizeof *all);
    if (!all) return attn_fail(err, ATTN_ERR_NOMEM, "out of memory comparing ranks");
    double t0 = attn_now_s();
    int rc = d->ops->allgather_u64(value, all);
    d->comm_s += attn_now_s() - t0;
    attn_status st = ATTN_OK;
    if (rc) st = mpi_fail(d, err, rc, "Allgather");
    for (int r = 1; r < d->size && !st; r++)
        if (all[r] != all[0])
            st = attn_fail(err, ATTN_ERR_INVALID_ARG,
                           "rank %d's %s differs from rank 0's (hash %016llx vs %016llx): every "
                           "rank must run the same attn with the same arguments",
                           r, what, (unsigned long long)all[r], (unsigned long long)all[0]);
    free(all);
    return st;
}

int attn_dist_any(attn_dist *d, int flag) {
    if (!d || d->size == 1) return flag != 0;
    int out = flag != 0;
    double t0 = attn_now_s();
    if (d->ops->allreduce_max_int(flag != 0, &out)) out = 1;
    d->comm_s += attn_now_s() - t0;
    return out;
}

attn_status attn_dist_allgather(attn_dist *d, float *v, size_t n, attn_error *err) {
    if (!d || d->size == 1) return ATTN_OK;
    for (int r = 0; r < d->size; r++) {
        size_t lo = n * (size_t)r / (size_t)d->size, hi = n * (size_t)(r + 1) / (size_t)d->size;
        d->displs[r] = (int)lo;
        d->counts[r] = (int)(hi - lo);
    }
    double t0 = attn_now_s();
    int rc = d->ops->allgatherv_float(v, d->counts, d->displs);
    d->comm_s += attn_now_s() - t0;
    if (rc) return mpi_fail(d, err, rc, "Allgatherv");
    d->sent_bytes += (uint64_t)d->counts[d->rank] * sizeof(float);
    d->recv_bytes += (uint64_t)(n - (size_t)d->counts[d->rank]) * sizeof(float);
    return ATTN_OK;
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
    const int r = d->rank, last = d->size - 1;
    int rc = 0;
    if (r == 0) fold_into(s, locals + 1, k - 1, 0, n);
    for (size_t off = 0; off < n && !rc; off += BUCKET_FLOATS) {
        const size_t len = n - off < BUCKET_FLOATS ? n - off : BUCKET_FLOATS;
        double t0 = attn_now_s();
        if (r > 0) {
            rc = d->ops->recv_float(d->bucket, (int)len, r - 1);
            d->comm_s += attn_now_s() - t0;
            if (rc) break;
            d->recv_bytes += len * sizeof(float);
            /* partial + g_first + ... : the bucket comes first in the fold. */
            fold_into(d->bucket, locals, k, off, len);
            memcpy(s + off, d->bucket, len * sizeof(float));
            t0 = attn_now_s();
        }
        if (r < last) {
            rc = d->ops->send_float(s + off, (int)len, r + 1);
            d->comm_s += attn_now_s() - t0;
            d->sent_bytes += len * sizeof(float);
        }
    }
    if (rc) return mpi_fail(d, err, rc, "Send/Recv of gradients");
    /* The last rank holds S; everyone gets it. */
    for (size_t off = 0; off < n; off += (size_t)1 << 26) {
        const size_t len = n - off < ((size_t)1 << 26) ? n - off : ((size_t)1 << 26);
        double t0 = attn_now_s();
        rc = d->ops->bcast_float(s + off, (int)len, last);
        d->comm_s += attn_now_s() - t0;
        if (rc) return mpi_fail(d, err, rc, "Bcast of gradients");
        if (r == last)
            d->sent_bytes += len * sizeof(float);
        else
            d->recv_bytes += len * sizeof(float);
    }
    return ATTN_OK;
}
