/* Mean cross-entropy fused with its softmax backward (see attn/cross_entropy.h). */
#include "attn/cross_entropy.h"

#include <math.h>

#include "base/parallel.h"

/* Rows are summed in blocks of CE_BLOCK, block sums then added in block order:
 * the same total whatever the thread count. */
#define CE_BLOCK 32

float attn_cross_entropy_forward(const float *logits, const int32_t *targets, float *lse, size_t N,
                                 size_t V) {
    double total = 0.0;
    attn_cross_entropy_accumulate(logits, targets, lse, N, V, &total);
    return (float)(total / (double)N);
}

void attn_cross_entropy_accumulate(const float *logits, const int32_t *targets, float *lse,
                                   size_t N, size_t V, double *total_out) {
    double total = *total_out;
    const long blocks = (long)((N + CE_BLOCK - 1) / CE_BLOCK);
#pragma omp parallel for ordered schedule(static, 1) if (N * V >= ATTN_PAR_MIN)
    for (long blk = 0; blk < blocks; blk++) {
        const size_t lo = (size_t)blk * CE_BLOCK, hi = lo + CE_BLOCK < N ? lo + CE_BLOCK : N;
        double part = 0.0;
        for (size_t n = lo; n < hi; n++) {
            const float *row = logits + n * V;
            float mx = row[0];
            for (size_t v = 1; v < V; v++)
                if (row[v] > mx) mx = row[v];
            double s = 0.0;
            for (size_t v = 0; v < V; v++)
                s += exp((double)(row[v] - mx));
            const double l = (double)mx + log(s);
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
    const float scale = dloss / (float)N;
    const long rows = (long)N;
#pragma omp parallel for schedule(static) if (N * V >= ATTN_PAR_MIN)
    for (long r = 0; r < rows; r++) {
        const size_t n = (size_t)r;
        const float *row = logits + n * V;
        float *d = dlogits + n * V;
        for (size_t v = 0; v < V; v++)
            d[v] += expf(row[v] - lse[n]) * scale;
        d[targets[n]] -= scale;
    }
}

void attn_cross_entropy_backward_inplace(float *logits, const int32_t *targets, const float *lse,
                                         float scale, size_t N, size_t V) {
    const long rows = (long)N;
#pragma omp parallel for schedule(static) if (N * V >= ATTN_PAR_MIN)
    for (long r = 0; r < rows; r++) {
        const size_t n = (size_t)r;
        float *d = logits + n * V;
        for (size_t v = 0; v < V; v++)
            d[v] = 0.0f + expf(d[v] - lse[n]) * scale; /* 0 + x: the plain path's += on zeros */
        d[targets[n]] -= scale;
    }
}
