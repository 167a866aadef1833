/* One-row Linear products for the KV-cached step (internal): y = W x (+ b)
 * through the GEMV kernels (gemv.h), from the fp32 weights or a bf16 copy.
 *
 * Shapes: x (in_features), y (out_features); a bf16 copy w is the weight
 * (out_features, in_features) rounded to bf16, as attn_linear_bf16_copy
 * writes it (w == NULL: the fp32 weight). */
#ifndef ATTN_SRC_LINEAR_STEP_H
#define ATTN_SRC_LINEAR_STEP_H

#include <stddef.h>
#include <stdint.h>

#include "attn/linear.h"
#include "kernels/gemv.h"

/* Rows of y a thread takes at a time: whole cache lines of y. */
#define ATTN_STEP_ROWS 16

/* Rows [r0, r1) of y for n sequences: x row s at x + s ldx, y row s at
 * y + s ldy. Each weight row is read once for the n. */
static inline void attn_linear_rows_n(const attn_linear *l, const uint16_t *w, const float *x,
                                      size_t ldx, float *y, size_t ldy, int n, int r0, int r1) {
    if (w)
        attn_gemv_bf16_n(w, l->bias, x, ldx, y, ldy, n, l->in_features, r0, r1);
    else
        attn_gemv_f32_n(l->weight, l->bias, x, ldx, y, ldy, n, l->in_features, r0, r1);
}

/* Rows [r0, r1) of y (one sequence). */
static inline void attn_linear_rows(const attn_linear *l, const uint16_t *w, const float *x,
                                    float *y, int r0, int r1) {
    attn_linear_rows_n(l, w, x, 0, y, 0, 1, r0, r1);
}

/* All of y (n rows of out_features; x row s at x + s ldx, y row s at
 * y + s ldy), its row chunks split over the calling team (an orphaned
 * `omp for`): call from every thread of a team, or from one thread alone.
 * wait 0: no barrier at the end (`nowait`: the team goes on to a product
 * that reads nothing this one writes). */
void attn_linear_step_ld(const attn_linear *l, const uint16_t *w, const float *x, size_t ldx,
                         float *y, size_t ldy, int n, int wait);
/* The same with y's rows out_features apart, ending in a barrier. */
void attn_linear_step_n(const attn_linear *l, const uint16_t *w, const float *x, size_t ldx,
                        float *y, int n);
static inline void attn_linear_step(const attn_linear *l, const uint16_t *w, const float *x,
                                    float *y) {
    attn_linear_step_n(l, w, x, 0, y, 1);
}

/* Writes the weight rounded to bf16 into w; returns the values written
 * (out_features * in_features). */
size_t attn_linear_bf16_copy(const attn_linear *l, uint16_t *w);
/* The same copy (the same bits), the fp32 weight's pages handed back
 * (attn_release_pages) a chunk at a time as it goes: memory never holds
 * both in full. The weight reads zero afterwards. */
size_t attn_linear_bf16_move(const attn_linear *l, uint16_t *w);
/* 1 when l's weight (out_features * in_features values) lies within
 * lo[0..n): storage that attn_linear_bf16_move may hand back. */
int attn_linear_weight_within(const attn_linear *l, const float *lo, size_t n);

#endif
