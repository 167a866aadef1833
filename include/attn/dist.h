/* attn/dist.h — data-parallel training over MPI ranks, deterministically.
 *
 * A run of `mpirun -np N attn train` is N ranks; each runs the same trainer
 * (train.h) from the same seed. One optimizer step of grad_accum = M
 * micro-batches (M a multiple of N) gives rank r the micro-batches
 * j in [r*M/N, (r+1)*M/N); every rank draws all M from the shared sampler
 * stream and keeps its own. The gradients g_0 .. g_{M-1} (each a full
 * parameter vector, flat in parameter-list order, n floats) are combined as
 * the left fold
 *     S = (((g_0 + g_1) + g_2) + ... ) + g_{M-1}
 * whatever N is — the same sum, element for element, that one process with
 * --grad-accum M forms — so the ranks' runs and the single process's are bit
 * for bit the same. The fold is a pipelined chain (attn_dist_fold): rank 0
 * sends its partial to rank 1 in buckets, rank r adds its gradients to each
 * bucket as it arrives and passes it on, and the last rank broadcasts S.
 * Per step a rank passes n floats along the chain and gets n from the
 * broadcast, about what an allreduce ring moves (2 n (N-1)/N), but the chain
 * adds N-1 bucket latencies and its order is fixed, unlike MPI_Allreduce's
 * (whose algorithm, and so rounding, depends on N, sizes and tuning).
 *
 * Without MPI (a build without it, or a program not started by mpirun as
 * one of several ranks) the same calls work for one rank: rank 0 of 1, no
 * communication. MPI lives in a plug-in, libattn-mpi.so, beside libattn: it
 * (and so libmpi) is opened only by attn_dist_init in a process that is one
 * of several ranks, so libattn itself never links MPI.
 *
 * The functions other than attn_dist_init/free/abort are collective:
 * every rank must call them in the same order. */
#ifndef ATTN_DIST_H
#define ATTN_DIST_H

#include <stddef.h>
#include <stdint.h>

#include "attn/status.h"
#include "attn/version.h" /* ATTN_DEPRECATED */

#ifdef __cplusplus
extern "C" {
#endif

typedef struct attn_dist {
    int rank, size;
    int mpi;                        /* 1 when MPI was initialised by attn_dist_init */
    double comm_s;                  /* seconds spent inside MPI calls, cumulative */
    uint64_t sent_bytes;            /* bytes this rank sent, cumulative */
    uint64_t recv_bytes;            /* bytes this rank received, cumulative */
    float *bucket;                  /* one bucket of the chain (internal) */
    int *counts, *displs;           /* size entries each (internal) */
    const struct attn_mpi_ops *ops; /* the MPI plug-in's table (internal) */
} attn_dist;

/* 1 when this build made the MPI plug-in (libattn-mpi.so). */
int attn_dist_compiled(void);

/* Starts MPI when the launcher's environment says this process is one of
 * several ranks (OMPI_COMM_WORLD_SIZE or PMI_SIZE above 1; a PMIX_RANK or
 * PMI_RANK without a size): opens libattn-mpi.so, then MPI_Init. Otherwise
 * (a plain run, or mpirun -np 1) one rank, and MPI is never loaded. Several
 * ranks without the plug-in (a build without MPI, the plug-in missing) is an
 * error naming what is missing: the ranks would train alone. argc/argv may
 * be NULL. */
attn_status attn_dist_init(attn_dist *d, int *argc, char ***argv, attn_error *err);
/* Frees what attn_dist_init made, with MPI_Finalize when MPI was started
 * (MPI cannot start again in this process); d is then one rank again. */
void attn_dist_free(attn_dist *d);
/* deprecated: use attn_dist_free; removed after 0.2 */
ATTN_DEPRECATED("use attn_dist_free")
static inline void attn_dist_finalize(attn_dist *d) {
    attn_dist_free(d);
}
/* End the whole job now with exit code code (MPI_Abort); returns only when
 * there is no MPI (the caller then exits as usual). */
void attn_dist_abort(attn_dist *d, int code);

/* The rank's share of n items split into size contiguous blocks:
 * [*lo, *hi) = [n*rank/size, n*(rank+1)/size). d NULL = the whole. */
void attn_dist_block(const attn_dist *d, size_t n, size_t *lo, size_t *hi);

/* Every rank brings value; all must be equal. Otherwise every rank gets an
 * error naming the first rank whose value differs from rank 0's and what
 * (e.g. "config"). */
attn_status attn_dist_check_same(attn_dist *d, uint64_t value, const char *what, attn_error *err);

/* 1 on every rank when flag is non-zero on any rank. */
int attn_dist_any(attn_dist *d, int flag);

/* v holds n floats of which this rank filled its attn_dist_block(d, n);
 * afterwards every rank has all n (copies, no arithmetic). */
attn_status attn_dist_allgather(attn_dist *d, float *v, size_t n, attn_error *err);

/* The ordered gradient sum. locals[0..k-1] hold this rank's gradients of
 * its micro-batches in order (rank 0 may pass k = 1 with its own partial
 * sum already folded in locals[0]); on return locals[0] holds the left fold
 * S over all ranks' gradients in rank order, on every rank. locals[1..]
 * are left as they were. */
attn_status attn_dist_fold(attn_dist *d, float *const *locals, int k, size_t n, attn_error *err);

#ifdef __cplusplus
}
#endif
#endif
