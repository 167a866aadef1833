/* Element-wise loops split over OpenMP threads (internal).
 *
 * A training step of a small GPT spends a fifth of its single-thread time in
 * LayerNorm, GELU, residual adds, cross-entropy and AdamW; left serial, that
 * part caps the 2-thread speed-up. Each split keeps every element's
 * arithmetic as in the serial loop, and every reduction runs in a fixed order
 * (rows, blocks or tensors added in index order), so results do not depend
 * on the thread count. Loops shorter than ATTN_PAR_MIN elements
 * stay on one thread (a parallel region costs a few microseconds). */
#ifndef ATTN_SRC_PARALLEL_H
#define ATTN_SRC_PARALLEL_H

#define ATTN_PAR_MIN 32768
/* Chunk of a split element-wise loop: whole cache lines, enough work per call. */
#define ATTN_PAR_CHUNK 4096
/* Columns of a split column sum: one cache line of floats or more per thread. */
#define ATTN_PAR_COLS 16

#include <omp.h>
#include <stddef.h>

/* Values in piece c of a loop over n values cut into ATTN_PAR_CHUNK pieces
 * (the piece starts at c * ATTN_PAR_CHUNK). */
static inline size_t attn_par_piece(size_t n, long c) {
    const size_t lo = (size_t)c * ATTN_PAR_CHUNK;
    return n - lo < ATTN_PAR_CHUNK ? n - lo : ATTN_PAR_CHUNK;
}

/* Inside a parallel region: this thread's share [*c0, *c1) of cols columns,
 * whole ATTN_PAR_COLS blocks, contiguous, possibly empty. */
static inline void attn_par_cols(size_t cols, size_t *c0, size_t *c1) {
    const size_t blocks = (cols + ATTN_PAR_COLS - 1) / ATTN_PAR_COLS;
    const size_t nt = (size_t)omp_get_num_threads(), t = (size_t)omp_get_thread_num();
    const size_t e = blocks * (t + 1) / nt * ATTN_PAR_COLS;
    *c0 = blocks * t / nt * ATTN_PAR_COLS;
    *c1 = e < cols ? e : cols;
}

/* The plain loops a layer runs around its products, split over the threads
 * (bit for bit the serial loop: a column's sum stays in row order). Left on
 * one core they were a tenth of a small GPT's two-thread step. */

/* x[0, n) = 0. */
void attn_par_zero(float *x, size_t n);

/* Each of y's rows (rows x width, compact) = row; row NULL: zeros. */
void attn_par_fill_rows(float *y, size_t rows, size_t width, const float *row);

/* sum[c] += x[n * ld + c] for n = 0 .. rows-1 in order, c < cols. */
void attn_par_col_sums(const float *x, size_t rows, size_t cols, size_t ld, float *sum);

/* dst[i] += src[i], i < n. */
void attn_par_add(float *dst, const float *src, size_t n);

#endif
