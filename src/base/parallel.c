/* Split element-wise loops (base/parallel.h). */
#include "base/parallel.h"

#include <string.h>

#include "base/vec_clones.h"

void attn_par_zero(float *x, size_t n) {
    const long chunks = (long)((n + ATTN_PAR_CHUNK - 1) / ATTN_PAR_CHUNK);
#pragma omp parallel for schedule(static) if (n >= ATTN_PAR_MIN)
    for (long c = 0; c < chunks; c++)
        memset(x + (size_t)c * ATTN_PAR_CHUNK, 0, attn_par_piece(n, c) * sizeof(float));
}

void attn_par_fill_rows(float *y, size_t rows, size_t width, const float *row) {
    const long r_end = (long)rows;
#pragma omp parallel for schedule(static) if (rows * width >= ATTN_PAR_MIN)
    for (long r = 0; r < r_end; r++) {
        float *dst = y + (size_t)r * width;
        if (row)
            memcpy(dst, row, width * sizeof(float));
        else
            memset(dst, 0, width * sizeof(float));
    }
}

/* Up to 64 columns at a time, summed in registers over all rows (a sum kept
 * in memory waits on its own store each row). Inlined with w = COL_RUN, a
 * constant, for the full runs. */
#define COL_RUN 64
static inline void col_run(const float *x, size_t rows, size_t c, size_t w, size_t ld, float *sum) {
    float acc[COL_RUN];
    for (size_t j = 0; j < w; j++)
        acc[j] = sum[c + j];
    for (size_t n = 0; n < rows; n++) {
        const float *xr = x + n * ld + c;
        for (size_t j = 0; j < w; j++)
            acc[j] += xr[j];
    }
    for (size_t j = 0; j < w; j++)
        sum[c + j] = acc[j];
}

ATTN_VEC_PROC(col_sums_block,
              (const float *x, size_t rows, size_t c0, size_t c1, size_t ld, float *sum),
              (x, rows, c0, c1, ld, sum), {
                  for (size_t c = c0; c < c1; c += COL_RUN) {
                      if (c1 - c >= COL_RUN)
                          col_run(x, rows, c, COL_RUN, ld, sum);
                      else
                          col_run(x, rows, c, c1 - c, ld, sum);
                  }
              })

void attn_par_col_sums(const float *x, size_t rows, size_t cols, size_t ld, float *sum) {
    /* Contiguous column blocks, one run per thread: each column in row order. */
#pragma omp parallel if (rows * cols >= ATTN_PAR_MIN && cols > ATTN_PAR_COLS)
    {
        size_t c0, c1;
        attn_par_cols(cols, &c0, &c1);
        if (c0 < c1) col_sums_block(x, rows, c0, c1, ld, sum);
    }
}

ATTN_VEC_PROC(add_chunk, (float *dst, const float *src, size_t n), (dst, src, n), {
    for (size_t i = 0; i < n; i++)
        dst[i] += src[i];
})

void attn_par_add(float *dst, const float *src, size_t n) {
    const long chunks = (long)((n + ATTN_PAR_CHUNK - 1) / ATTN_PAR_CHUNK);
#pragma omp parallel for schedule(static) if (n >= ATTN_PAR_MIN)
    for (long c = 0; c < chunks; c++) {
        const size_t lo = (size_t)c * ATTN_PAR_CHUNK;
        add_chunk(dst + lo, src + lo, attn_par_piece(n, c));
    }
}
