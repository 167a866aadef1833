/* Next-token sampling (see attn/sample.h). */
#include "attn/sample.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>

static int cand_desc(const void *a, const void *b) {
    const attn_sample_candidate *x = a, *y = b;
    if (x->p != y->p) return x->p < y->p ? 1 : -1;
    return x->id - y->id;
}

int attn_sample_next(const float *logits, int V, double temperature, int top_k, double top_p,
                     attn_rng *rng, attn_sample_candidate *buf) {
    /* Below the smallest normal float (subnormal, 0) the scaled logits
     * overflow: the limit of the distribution is the argmax, so be greedy. */
    int greedy = !(temperature >= FLT_MIN);
    if (!greedy) {
        for (int i = 0; i < V; i++) {
            buf[i].p = (float)(logits[i] / temperature);
            buf[i].id = i;
        }
        qsort(buf, (size_t)V, sizeof *buf, cand_desc);
        greedy = isinf(buf[0].p) && buf[0].p > 0; /* a tiny normal T overflowed too */
    }
    if (greedy) {
        int best = 0;
        for (int i = 1; i < V; i++)
            if (logits[i] > logits[best]) best = i;
        return best;
    }
    int n = (top_k > 0 && top_k < V) ? top_k : V;
    double maxv = buf[0].p, sum = 0;
    for (int i = 0; i < n; i++)
        sum += exp((double)buf[i].p - maxv);
    double cum = 0;
    int keep = n;
    for (int i = 0; i < n; i++) {
        double pi = exp((double)buf[i].p - maxv) / sum;
        buf[i].p = (float)pi;
        cum += pi;
        if (top_p < 1.0 && cum >= top_p && keep == n) keep = i + 1;
    }
    double mass = 0;
    for (int i = 0; i < keep; i++)
        mass += buf[i].p;
    /* One 53-bit uniform draw. */
    double u = (double)(attn_rng_u64(rng) >> 11) * (1.0 / 9007199254740992.0) * mass;
    double acc = 0;
    for (int i = 0; i < keep; i++) {
        acc += buf[i].p;
        if (u < acc) return buf[i].id;
    }
    return buf[keep - 1].id;
}

void attn_sample_probs(const float *logits, int V, double temperature, float *probs) {
    const double t = temperature > 0 ? temperature : 1.0;
    double maxv = -INFINITY, sum = 0;
    for (int i = 0; i < V; i++)
        if ((double)(float)(logits[i] / t) > maxv) maxv = (double)(float)(logits[i] / t);
    if (!(t >= FLT_MIN) || isinf(maxv)) { /* as attn_sample_next: the greedy limit */
        int best = 0;
        for (int i = 0; i < V; i++) {
            probs[i] = 0.0f;
            if (logits[i] > logits[best]) best = i;
        }
        probs[best] = 1.0f;
        return;
    }
    for (int i = 0; i < V; i++)
        sum += exp((double)(float)(logits[i] / t) - maxv);
    for (int i = 0; i < V; i++)
        probs[i] = (float)(exp((double)(float)(logits[i] / t) - maxv) / sum);
}
