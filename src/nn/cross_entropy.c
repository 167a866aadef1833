/* Mean cross-entropy fused with its softmax backward (see attn/cross_entropy.h). */
#include "attn/cross_entropy.h"

#include <math.h>

#include "attn/cpu.h"
#include "base/parallel.h"
#include "kernels/ce_kernels.h"

/* Rows are summed in blocks of CE_BLOCK, block sums then added in block order:
 * the same total whatever the thread count. */
#define CE_BLOCK 32

size_t attn_cross_entropy_count(const int32_t *targets, size_t N) {
    size_t k = 0;
    for (size_t n = 0; n < N; n++)
        k += targets[n] != ATTN_IGNORE_INDEX;
    return k;
}

float attn_cross_entropy_forward(const float *logits, const int32_t *targets, float *lse, size_t N,
                                 size_t V) {
    double total = 0.0;
    attn_cross_entropy_accumulate(logits, targets, lse, N, V, &total);
    /* 0 / 0 when every row is ignored: NaN, as PyTorch. */
    return (float)(total / (double)attn_cross_entropy_count(targets, N));
}

/* The row loops in C, in ce_kernels.h's order (the AVX-512 and AVX2 ones
 * are the same but for exp). */
static float max_c(const float *row, size_t V) {
    float mx = row[0];
    for (size_t v = 1; v < V; v++)
        if (row[v] > mx) mx = row[v];
    return mx;
}

static double sumexp_c(const float *row, size_t V, float mx) {
    double lane[ATTN_CE_LANES] = {0};
    for (size_t v = 0; v < V; v++)
        lane[v % ATTN_CE_LANES] += (double)expf(row[v] - mx);
    double s = 0.0;
    for (int j = 0; j < ATTN_CE_LANES; j++)
        s += lane[j];
    return s;
}

static void grad_row_c(const float *x, float *d, size_t V, float lse, float scale, int add) {
    for (size_t v = 0; v < V; v++)
        d[v] = (add ? d[v] : 0.0f) + expf(x[v] - lse) * scale;
}

typedef struct ce_rows {
    float (*max)(const float *, size_t);
    double (*sumexp)(const float *, size_t, float);
    void (*grad)(const float *, float *, size_t, float, float, int);
} ce_rows;

static const ce_rows *rows_impl(void) {
    static const ce_rows c = {max_c, sumexp_c, grad_row_c};
#if defined(__x86_64__) && defined(__GNUC__)
    static const ce_rows avx512 = {attn_ce_max_avx512, attn_ce_sumexp_avx512,
                                   attn_ce_grad_row_avx512};
    static const ce_rows avx2 = {attn_ce_max_avx2, attn_ce_sumexp_avx2, attn_ce_grad_row_avx2};
    const attn_simd s = attn_simd_resolve(ATTN_SIMD_AUTO);
    if (s == ATTN_SIMD_AVX512) return &avx512;
    if (s == ATTN_SIMD_AVX2) return &avx2; /* the same bits */
#endif
    return &c;
}

void attn_cross_entropy_accumulate(const float *logits, const int32_t *targets, float *lse,
                                   size_t N, size_t V, double *total_out) {
    double total = *total_out;
    const ce_rows *k = rows_impl();
    const long blocks = (long)((N + CE_BLOCK - 1) / CE_BLOCK);
#pragma omp parallel for ordered schedule(static, 1) if (N * V >= ATTN_PAR_MIN)
    for (long blk = 0; blk < blocks; blk++) {
        const size_t lo = (size_t)blk * CE_BLOCK, hi = lo + CE_BLOCK < N ? lo + CE_BLOCK : N;
        double part = 0.0;
        for (size_t n = lo; n < hi; n++) {
            const float *row = logits + n * V;
            if (targets[n] == ATTN_IGNORE_INDEX) {
                if (lse) lse[n] = 0.0f;
                continue;
            }
            const float mx = k->max(row, V);
            const double l = (double)mx + log(k->sumexp(row, V, mx));
            if (lse) lse[n] = (float)l;
            part += l - (double)row[targets[n]];
        }
#pragma omp ordered
        total += part;
    }
    *total_out = total;
}

void attn_cross_entropy_backward(const float *logits, const int32_t *targets, const float *lse,
                                 float dloss, float *dlogits, size_t N, size_t V) {
    const float scale = dloss / (float)attn_cross_entropy_count(targets, N);
    const ce_rows *k = rows_impl();
    const long rows = (long)N;
#pragma omp parallel for schedule(static) if (N * V >= ATTN_PAR_MIN)
    for (long r = 0; r < rows; r++) {
        const size_t n = (size_t)r;
        if (targets[n] == ATTN_IGNORE_INDEX) continue;
        k->grad(logits + n * V, dlogits + n * V, V, lse[n], scale, 1);
        dlogits[n * V + (size_t)targets[n]] -= scale;
    }
}

void attn_cross_entropy_grad(const float *logits, const int32_t *targets, const float *lse,
                             float scale, float *dlogits, size_t N, size_t V) {
    const ce_rows *k = rows_impl();
    const long rows = (long)N;
#pragma omp parallel for schedule(static) if (N * V >= ATTN_PAR_MIN)
    for (long r = 0; r < rows; r++) {
        const size_t n = (size_t)r;
        if (targets[n] == ATTN_IGNORE_INDEX) {
            for (size_t v = 0; v < V; v++)
                dlogits[n * V + v] = 0.0f;
            continue;
        }
        /* 0 + x: the plain path's += on zeros */
        k->grad(logits + n * V, dlogits + n * V, V, lse[n], scale, 0);
        dlogits[n * V + (size_t)targets[n]] -= scale;
    }
}

void attn_cross_entropy_backward_inplace(float *logits, const int32_t *targets, const float *lse,
                                         float scale, size_t N, size_t V) {
    attn_cross_entropy_grad(logits, targets, lse, scale, logits, N, V);
}
