/* Double-precision reference forward (see ref_attention.h). */
#include "ref_attention.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* y (N, out) = x (N, in) W^T + b, W (out, in) as nn.Linear stores it. */
static void ref_linear(const double *x, const double *W, const double *b, int N, int in, int out,
                       double *y) {
    for (int n = 0; n < N; n++)
        for (int o = 0; o < out; o++) {
            double s = b ? b[o] : 0.0;
            for (int i = 0; i < in; i++)
                s += x[n * in + i] * W[o * in + i];
            y[n * out + o] = s;
        }
}

/* y (N, out) = x (N, in) W, W (in, out) as SelfAttention_v1 stores it. */
static void ref_matmul(const double *x, const double *W, int N, int in, int out, double *y) {
    for (int n = 0; n < N; n++)
        for (int o = 0; o < out; o++) {
            double s = 0.0;
            for (int i = 0; i < in; i++)
                s += x[n * in + i] * W[i * out + o];
            y[n * out + o] = s;
        }
}

/* q, k, v, out: (B, T, H * hd); head h is columns [h*hd, (h+1)*hd).
 * keep: (B, H, T, T) or NULL. */
static void ref_attend(const double *q, const double *k, const double *v, int B, int T, int H,
                       int hd, int causal, const uint8_t *keep, double dscale, double *out) {
    const int ld = H * hd;
    double *w = malloc((size_t)T * sizeof(double));
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++)
            for (int i = 0; i < T; i++) {
                /* scores row i, masked with -inf, divided by sqrt(hd), softmax */
                double mx = -INFINITY;
                for (int j = 0; j < T; j++) {
                    double s = 0.0;
                    for (int d = 0; d < hd; d++)
                        s += q[(b * T + i) * ld + h * hd + d] * k[(b * T + j) * ld + h * hd + d];
                    w[j] = (causal && j > i) ? -INFINITY : s / sqrt((double)hd);
                    if (w[j] > mx) mx = w[j];
                }
                double sum = 0.0;
                for (int j = 0; j < T; j++) {
                    w[j] = exp(w[j] - mx);
                    sum += w[j];
                }
                for (int j = 0; j < T; j++) {
                    w[j] /= sum;
                    if (keep) w[j] = keep[((b * H + h) * T + i) * T + j] ? w[j] * dscale : 0.0;
                }
                for (int d = 0; d < hd; d++) {
                    double s = 0.0;
                    for (int j = 0; j < T; j++)
                        s += w[j] * v[(b * T + j) * ld + h * hd + d];
                    out[(b * T + i) * ld + h * hd + d] = s;
                }
            }
    free(w);
}

/* Three Linear(d_in, d_out) projections from params starting at *pi
 * (weight[, bias] for W_query, W_key, W_value); advances *pi. */
static void ref_qkv(const double *const *params, int *pi, int bias, const double *x, int N,
                    int d_in, int d_out, double *q, double *k, double *v) {
    double *dst[3] = {q, k, v};
    for (int i = 0; i < 3; i++) {
        const double *W = params[(*pi)++];
        const double *b = bias ? params[(*pi)++] : NULL;
        ref_linear(x, W, b, N, d_in, d_out, dst[i]);
    }
}

void ref_module_forward(const attn_module_config *cfg, const double *const *params,
                        const uint8_t *const *keep, double dropout_scale, const double *x, int B,
                        int T, double *y) {
    const int N = B * T, d_in = cfg->d_in, d_out = cfg->d_out;
    const size_t n = (size_t)N * (size_t)d_out;
    double *q = malloc(n * sizeof(double)), *k = malloc(n * sizeof(double));
    double *v = malloc(n * sizeof(double)), *c = malloc(2 * n * sizeof(double));
    int pi = 0;
    switch (cfg->kind) {
    case ATTN_MODULE_SELF_ATTENTION_V1:
        ref_matmul(x, params[0], N, d_in, d_out, q);
        ref_matmul(x, params[1], N, d_in, d_out, k);
        ref_matmul(x, params[2], N, d_in, d_out, v);
        ref_attend(q, k, v, B, T, 1, d_out, 0, NULL, 1.0, y);
        break;
    case ATTN_MODULE_SELF_ATTENTION_V2:
        ref_qkv(params, &pi, cfg->qkv_bias, x, N, d_in, d_out, q, k, v);
        ref_attend(q, k, v, B, T, 1, d_out, 0, NULL, 1.0, y);
        break;
    case ATTN_MODULE_CAUSAL_ATTENTION:
        ref_qkv(params, &pi, cfg->qkv_bias, x, N, d_in, d_out, q, k, v);
        ref_attend(q, k, v, B, T, 1, d_out, 1, keep ? keep[0] : NULL, dropout_scale, y);
        break;
    case ATTN_MODULE_MHA_WRAPPER: {
        const int H = cfg->num_heads;
        for (int h = 0; h < H; h++) {
            ref_qkv(params, &pi, cfg->qkv_bias, x, N, d_in, d_out, q, k, v);
            ref_attend(q, k, v, B, T, 1, d_out, 1, keep ? keep[h] : NULL, dropout_scale, c);
            for (int r = 0; r < N; r++) /* torch.cat(..., dim=-1) */
                for (int d = 0; d < d_out; d++)
                    y[(size_t)r * (size_t)(H * d_out) + (size_t)(h * d_out + d)] =
                        c[(size_t)r * (size_t)d_out + (size_t)d];
        }
        break;
    }
    case ATTN_MODULE_MHA: {
        const int H = cfg->num_heads;
        ref_qkv(params, &pi, cfg->qkv_bias, x, N, d_in, d_out, q, k, v);
        ref_attend(q, k, v, B, T, H, d_out / H, 1, keep ? keep[0] : NULL, dropout_scale, c);
        ref_linear(c, params[pi], params[pi + 1], N, d_out, d_out, y);
        break;
    }
    case ATTN_MODULE_ATTENTION_HEAD: /* seed 004: mask, then scale: same values */
        ref_qkv(params, &pi, cfg->qkv_bias, x, N, d_in, d_out, q, k, v);
        ref_attend(q, k, v, B, T, 1, d_out, 1, keep ? keep[0] : NULL, dropout_scale, y);
        break;
    case ATTN_MODULE_SEED004_MHA: { /* heads.<i> (hs = d_out / H), concat, linear, dropout */
        const int H = cfg->num_heads, hs = d_out / H;
        for (int h = 0; h < H; h++) {
            ref_qkv(params, &pi, cfg->qkv_bias, x, N, d_in, hs, q, k, v);
            ref_attend(q, k, v, B, T, 1, hs, 1, keep ? keep[h] : NULL, dropout_scale, c + n);
            for (int r = 0; r < N; r++)
                for (int d = 0; d < hs; d++)
                    c[(size_t)r * (size_t)d_out + (size_t)(h * hs + d)] =
                        c[n + (size_t)r * (size_t)hs + (size_t)d];
        }
        ref_linear(c, params[pi], params[pi + 1], N, d_out, d_out, y);
        if (keep)
            for (size_t i = 0; i < n; i++)
                y[i] = keep[H][i] ? y[i] * dropout_scale : 0.0;
        break;
    }
    }
    free(q);
    free(k);
    free(v);
    free(c);
}
