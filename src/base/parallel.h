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

#endif
