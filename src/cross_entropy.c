/* Mean cross-entropy fused with its softmax backward (see attn/cross_entropy.h). */
#include "attn/cross_entropy.h"

#include <math.h>

float attn_cross_entropy_forward(const float *logits, const int32_t *targets, float *lse, size_t N,
                                 size_t V) {
    double total = 0.0;
    for (size_t n = 0; n < N; n++) {
        const float *row = logits + n * V;
        float mx = row[0];
        for (size_t v = 1; v < V; v++)
            if (row[v] > mx) mx = row[v];
        double s = 0.0;
        for (size_t v = 0; v < V; v++)
            s += exp((double)(row[v] - mx));
        const double l = (double)mx + log(s);
        if (lse) lse[n] = (float)l;
        total += l - (double)row[targets[n]];
    }
    return (float)(total / (double)N);
}

void attn_cross_entropy_backward(const float *logits, const int32_t *targets, const float *lse,
                                 float dloss, float *dlogits, size_t N, size_t V) {
    const float scale = dloss / (float)N;
    for (size_t n = 0; n < N; n++) {
        const float *row = logits + n * V;
        float *d = dlogits + n * V;
        for (size_t v = 0; v < V; v++)
            d[v] = expf(row[v] - lse[n]) * scale;
        d[targets[n]] -= scale;
    }
}
