/* Double-precision references for the GPT layers (see gpt_ref.h). */
#include "gpt_ref.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void gref_layernorm(const double *x, const double *scale, const double *shift, double *y, size_t N,
                    size_t C) {
    for (size_t n = 0; n < N; n++) {
        const double *r = x + n * C;
        double m = 0, v = 0;
        for (size_t c = 0; c < C; c++)
            m += r[c];
        m /= (double)C;
        for (size_t c = 0; c < C; c++)
            v += (r[c] - m) * (r[c] - m);
        v /= (double)C;
        for (size_t c = 0; c < C; c++)
            y[n * C + c] = scale[c] * (r[c] - m) / sqrt(v + 1e-5) + shift[c];
    }
}

double gref_gelu(double x) {
    return 0.5 * x * (1.0 + tanh(sqrt(2.0 / 3.14159265358979323846) * (x + 0.044715 * x * x * x)));
}

void gref_linear(const double *x, const double *W, const double *b, double *y, size_t N, size_t in,
                 size_t out) {
    for (size_t n = 0; n < N; n++)
        for (size_t o = 0; o < out; o++) {
            double s = b ? b[o] : 0.0;
            for (size_t i = 0; i < in; i++)
                s += x[n * in + i] * W[o * in + i];
            y[n * out + o] = s;
        }
}

double gref_cross_entropy(const double *logits, const int32_t *targets, size_t N, size_t V) {
    double total = 0;
    size_t counted = 0;
    for (size_t n = 0; n < N; n++) {
        if (targets[n] == -100) continue; /* PyTorch's ignore_index */
        counted++;
        const double *r = logits + n * V;
        double mx = r[0], s = 0;
        for (size_t v = 1; v < V; v++)
            if (r[v] > mx) mx = r[v];
        for (size_t v = 0; v < V; v++)
            s += exp(r[v] - mx);
        total += mx + log(s) - r[targets[n]];
    }
    return total / (double)counted; /* none counted: NaN */
}

void gref_causal_attention(const double *Q, const double *K, const double *V, double *out, size_t B,
                           size_t T, size_t H, size_t hd) {
    const size_t D = H * hd;
    double *w = malloc(T * sizeof(double));
    for (size_t b = 0; b < B; b++)
        for (size_t h = 0; h < H; h++)
            for (size_t i = 0; i < T; i++) {
                const double *q = Q + (b * T + i) * D + h * hd;
                double mx = -INFINITY, s = 0;
                for (size_t j = 0; j <= i; j++) {
                    const double *k = K + (b * T + j) * D + h * hd;
                    double d = 0;
                    for (size_t e = 0; e < hd; e++)
                        d += q[e] * k[e];
                    w[j] = d / sqrt((double)hd);
                    if (w[j] > mx) mx = w[j];
                }
                for (size_t j = 0; j <= i; j++)
                    s += (w[j] = exp(w[j] - mx));
                double *o = out + (b * T + i) * D + h * hd;
                for (size_t e = 0; e < hd; e++) {
                    double acc = 0;
                    for (size_t j = 0; j <= i; j++)
                        acc += w[j] / s * V[(b * T + j) * D + h * hd + e];
                    o[e] = acc;
                }
            }
    free(w);
}

static const double *P(const attn_gpt *m, double *const *pd, const char *fmt, int i) {
    char name[ATTN_PARAM_NAME_MAX];
    snprintf(name, sizeof name, fmt, i);
    const attn_param_list *L = attn_gpt_params(m);
    for (int k = 0; k < L->count; k++)
        if (strcmp(L->items[k].name, name) == 0) return pd[k];
    return NULL;
}

/* y (N, out) = linear "<name>"(x): its weight and bias as "<name>.weight"
 * or, adapted, "<name>.linear.weight", plus alpha (x A) B when it has
 * "<name>.lora.A" and "<name>.lora.B" (the book's LinearWithLoRA). */
static void ref_linear(const attn_gpt *m, double *const *pd, const char *name, int l,
                       const double *x, double *y, size_t N, size_t in, size_t out) {
    char base[ATTN_PARAM_NAME_MAX], n[ATTN_PARAM_NAME_MAX + 16];
    snprintf(base, sizeof base, name, l);
    snprintf(n, sizeof n, "%s.weight", base);
    const double *W = P(m, pd, n, 0), *b;
    if (W) {
        snprintf(n, sizeof n, "%s.bias", base);
        b = P(m, pd, n, 0);
    } else {
        snprintf(n, sizeof n, "%s.linear.weight", base);
        W = P(m, pd, n, 0);
        snprintf(n, sizeof n, "%s.linear.bias", base);
        b = P(m, pd, n, 0);
    }
    if (!W) W = P(m, pd, "tok_emb.weight", 0); /* a tied head */
    gref_linear(x, W, b, y, N, in, out);
    snprintf(n, sizeof n, "%s.lora.A", base);
    const double *A = P(m, pd, n, 0);
    snprintf(n, sizeof n, "%s.lora.B", base);
    const double *Bm = P(m, pd, n, 0);
    if (!A || !Bm) return;
    const size_t r = (size_t)m->adapters[0].rank;
    const double alpha = m->adapters[0].alpha;
    for (size_t i = 0; i < N; i++)
        for (size_t k = 0; k < r; k++) {
            double h = 0;
            for (size_t c = 0; c < in; c++)
                h += x[i * in + c] * A[c * r + k];
            for (size_t o = 0; o < out; o++)
                y[i * out + o] += alpha * h * Bm[k * out + o];
        }
}

double gref_gpt_forward(const attn_gpt *m, double *const *pd, const int32_t *ids,
                        const int32_t *targets, size_t B, size_t T, double *logits_out) {
    const size_t C = (size_t)m->cfg.emb_dim, V = (size_t)m->out_head.out_features, N = B * T;
    const size_t H = (size_t)m->cfg.n_heads;
    double *x = malloc(N * C * sizeof(double)), *ln = malloc(N * C * sizeof(double));
    double *q = malloc(N * C * sizeof(double)), *k = malloc(N * C * sizeof(double));
    double *v = malloc(N * C * sizeof(double)), *a = malloc(N * C * sizeof(double));
    double *o = malloc(N * C * sizeof(double)), *h = malloc(N * 4 * C * sizeof(double));
    double *logits = malloc(N * V * sizeof(double));
    const double *tok = P(m, pd, "tok_emb.weight", 0), *pos = P(m, pd, "pos_emb.weight", 0);
    for (size_t b = 0; b < B; b++)
        for (size_t t = 0; t < T; t++)
            for (size_t c = 0; c < C; c++)
                x[(b * T + t) * C + c] = tok[(size_t)ids[b * T + t] * C + c] + pos[t * C + c];
    for (int l = 0; l < m->cfg.n_layers; l++) {
        gref_layernorm(x, P(m, pd, "trf_blocks.%d.norm1.scale", l),
                       P(m, pd, "trf_blocks.%d.norm1.shift", l), ln, N, C);
        ref_linear(m, pd, "trf_blocks.%d.att.W_query", l, ln, q, N, C, C);
        ref_linear(m, pd, "trf_blocks.%d.att.W_key", l, ln, k, N, C, C);
        ref_linear(m, pd, "trf_blocks.%d.att.W_value", l, ln, v, N, C, C);
        gref_causal_attention(q, k, v, a, B, T, H, C / H);
        ref_linear(m, pd, "trf_blocks.%d.att.out_proj", l, a, o, N, C, C);
        for (size_t i = 0; i < N * C; i++)
            x[i] += o[i];
        gref_layernorm(x, P(m, pd, "trf_blocks.%d.norm2.scale", l),
                       P(m, pd, "trf_blocks.%d.norm2.shift", l), ln, N, C);
        ref_linear(m, pd, "trf_blocks.%d.ff.layers.0", l, ln, h, N, C, 4 * C);
        for (size_t i = 0; i < N * 4 * C; i++)
            h[i] = gref_gelu(h[i]);
        ref_linear(m, pd, "trf_blocks.%d.ff.layers.2", l, h, o, N, 4 * C, C);
        for (size_t i = 0; i < N * C; i++)
            x[i] += o[i];
    }
    gref_layernorm(x, P(m, pd, "final_norm.scale", 0), P(m, pd, "final_norm.shift", 0), ln, N, C);
    ref_linear(m, pd, "out_head", 0, ln, logits, N, C, V);
    const double loss = targets ? gref_cross_entropy(logits, targets, N, V) : 0.0;
    if (logits_out) memcpy(logits_out, logits, N * V * sizeof(double));
    free(x), free(ln), free(q), free(k), free(v), free(a), free(o), free(h), free(logits);
    return loss;
}

double **gref_params_copy(const attn_param_list *list) {
    double **pd = calloc((size_t)list->count, sizeof *pd);
    for (int i = 0; i < list->count; i++) {
        pd[i] = malloc(list->items[i].numel * sizeof(double));
        for (size_t j = 0; j < list->items[i].numel; j++)
            pd[i][j] = list->items[i].data[j];
    }
    return pd;
}

void gref_params_free(double **pd, const attn_param_list *list) {
    for (int i = 0; i < list->count; i++)
        free(pd[i]);
    free(pd);
}

void gref_fill(float *x, size_t n, uint32_t seed, float a) {
    uint32_t s = seed * 2654435761u + 12345u;
    for (size_t i = 0; i < n; i++) {
        s = s * 1664525u + 1013904223u;
        x[i] = ((float)(s >> 8) / 16777216.0f * 2.0f - 1.0f) * a;
    }
}
