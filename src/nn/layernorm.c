/* The book's LayerNorm and RMSNorm (see attn/layernorm.h): each function
 * switches on ln->kind per row, so every caller (the block's forward,
 * backward and step, the final norm) runs either. */
#include "attn/layernorm.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/parallel.h"

attn_status attn_layernorm_init(attn_layernorm *ln, int C, attn_error *err) {
    return attn_norm_init(ln, C, ATTN_NORM_LAYERNORM, err);
}

attn_status attn_norm_init_view(attn_layernorm *ln, int C, attn_norm_kind kind, attn_error *err) {
    memset(ln, 0, sizeof *ln);
    if (C <= 0)
        return attn_fail(err, ATTN_ERR_INVALID_ARG, "layernorm: emb_dim %d must be >= 1", C);
    if (kind != ATTN_NORM_LAYERNORM && kind != ATTN_NORM_RMSNORM)
        return attn_fail(err, ATTN_ERR_INVALID_ARG, "unknown norm kind %d", (int)kind);
    ln->C = C;
    ln->kind = kind;
    ln->eps = ATTN_LAYERNORM_EPS;
    ln->views = 1;
    return ATTN_OK;
}

attn_status attn_norm_init(attn_layernorm *ln, int C, attn_norm_kind kind, attn_error *err) {
    attn_status s = attn_norm_init_view(ln, C, kind, err);
    if (s != ATTN_OK) return s;
    ln->views = 0;
    /* One block: scale, shift, grad_scale, grad_shift. */
    float *mem = calloc((size_t)C * 4, sizeof(float));
    if (!mem) return attn_fail(err, ATTN_ERR_NOMEM, "layernorm: out of memory");
    ln->scale = mem;
    ln->shift = mem + C;
    ln->grad_scale = mem + 2 * (size_t)C;
    ln->grad_shift = mem + 3 * (size_t)C;
    for (int i = 0; i < C; i++)
        ln->scale[i] = 1.0f;
    return ATTN_OK;
}

void attn_layernorm_free(attn_layernorm *ln) {
    if (!ln->views) free(ln->scale);
    memset(ln, 0, sizeof *ln);
}

attn_status attn_layernorm_params(attn_layernorm *ln, const char *prefix, attn_param_list *list,
                                  attn_error *err) {
    const int64_t shape[1] = {ln->C};
    attn_status s = attn_param_list_add_view(list, prefix, "scale", &ln->scale, &ln->grad_scale, 1,
                                             shape, ATTN_ROLE_SCALE, 0, err);
    if (s != ATTN_OK || ln->kind == ATTN_NORM_RMSNORM) return s;
    return attn_param_list_add_view(list, prefix, "shift", &ln->shift, &ln->grad_shift, 1, shape,
                                    ATTN_ROLE_SHIFT, 0, err);
}

static void forward_row(const attn_layernorm *ln, const float *x, float *y, float *mean,
                        float *rstd, size_t n) {
    const size_t C = (size_t)ln->C;
    const float *xr = x + n * C;
    float *yr = y + n * C;
    /* Double accumulation: the mean and variance are then within an ulp of
     * PyTorch's float reductions whatever their summation order. */
    double s = 0.0;
#pragma omp simd reduction(+ : s)
    for (size_t c = 0; c < C; c++)
        s += xr[c];
    const float m = (float)(s / (double)C);
    double v = 0.0;
#pragma omp simd reduction(+ : v)
    for (size_t c = 0; c < C; c++) {
        const double d = (double)xr[c] - (double)m;
        v += d * d;
    }
    const float r = (float)(1.0 / sqrt(v / (double)C + (double)ln->eps));
    for (size_t c = 0; c < C; c++)
        yr[c] = (xr[c] - m) * r * ln->scale[c] + ln->shift[c];
    if (mean) mean[n] = m;
    if (rstd) rstd[n] = r;
}

/* RMSNorm's row: the same double accumulation, no mean, no shift. */
static void rms_forward_row(const attn_layernorm *ln, const float *x, float *y, float *mean,
                            float *rstd, size_t n) {
    const size_t C = (size_t)ln->C;
    const float *xr = x + n * C;
    float *yr = y + n * C;
    double v = 0.0;
#pragma omp simd reduction(+ : v)
    for (size_t c = 0; c < C; c++)
        v += (double)xr[c] * (double)xr[c];
    const float r = (float)(1.0 / sqrt(v / (double)C + (double)ln->eps));
    for (size_t c = 0; c < C; c++)
        yr[c] = xr[c] * r * ln->scale[c];
    if (mean) mean[n] = 0.0f;
    if (rstd) rstd[n] = r;
}

static void norm_row(const attn_layernorm *ln, const float *x, float *y, float *mean, float *rstd,
                     size_t n) {
    if (ln->kind == ATTN_NORM_RMSNORM)
        rms_forward_row(ln, x, y, mean, rstd, n);
    else
        forward_row(ln, x, y, mean, rstd, n);
}

void attn_layernorm_forward(const attn_layernorm *ln, const float *x, float *y, float *mean,
                            float *rstd, size_t N) {
    const long rows = (long)N;
    /* Small inputs (one token while generating) skip the OpenMP runtime. */
    if (N * (size_t)ln->C < ATTN_PAR_MIN) {
        for (size_t n = 0; n < N; n++)
            norm_row(ln, x, y, mean, rstd, n);
        return;
    }
#pragma omp parallel for schedule(static)
    for (long row = 0; row < rows; row++)
        norm_row(ln, x, y, mean, rstd, (size_t)row);
}

/* The parameters' gradients, each skipped when NULL (frozen):
 * grad_scale += dy * xhat, xhat = (x - mean) * rstd (mean NULL or RMSNorm's
 * zeros: x * rstd), and LayerNorm's grad_shift += dy. Columns are
 * independent, rows are summed in order, so the columns split over the
 * threads. */
static void param_grads(attn_layernorm *ln, const float *x, const float *mean, const float *rstd,
                        const float *dy, size_t N) {
    float *gs = ln->grad_scale, *gb = ln->kind == ATTN_NORM_LAYERNORM ? ln->grad_shift : NULL;
    const size_t C = (size_t)ln->C;
    if (!gs && !gb) return;
#pragma omp parallel if (N * C >= ATTN_PAR_MIN && C > ATTN_PAR_COLS)
    {
        size_t c0, c1;
        attn_par_cols(C, &c0, &c1);
        for (size_t n = 0; n < N && c0 < c1; n++) {
            const float *xr = x + n * C, *dyr = dy + n * C;
            const float m = mean ? mean[n] : 0.0f, r = rstd[n];
            for (size_t c = c0; gs && c < c1; c++)
                gs[c] += dyr[c] * (xr[c] - m) * r;
            for (size_t c = c0; gb && c < c1; c++)
                gb[c] += dyr[c];
        }
    }
}

/* RMSNorm: dx += rstd * (g - xhat * mean(g * xhat)), xhat = x * rstd,
 * g = dy * scale. */
static void rms_backward(attn_layernorm *ln, const float *x, const float *rstd, const float *dy,
                         float *dx, size_t N) {
    const size_t C = (size_t)ln->C;
    param_grads(ln, x, NULL, rstd, dy, N);
    if (!dx) return;
    const long rows = (long)N;
#pragma omp parallel for schedule(static) if (N * C >= ATTN_PAR_MIN)
    for (long row = 0; row < rows; row++) {
        const size_t n = (size_t)row;
        const float *xr = x + n * C, *dyr = dy + n * C;
        float *dxr = dx + n * C;
        const float r = rstd[n];
        float sum_gx = 0.0f;
        for (size_t c = 0; c < C; c++)
            sum_gx += dyr[c] * ln->scale[c] * xr[c] * r;
        const float mgx = sum_gx / (float)C;
        for (size_t c = 0; c < C; c++)
            dxr[c] += r * (dyr[c] * ln->scale[c] - xr[c] * r * mgx);
    }
}

void attn_layernorm_backward(attn_layernorm *ln, const float *x, const float *mean,
                             const float *rstd, const float *dy, float *dx, size_t N) {
    if (ln->kind == ATTN_NORM_RMSNORM) {
        rms_backward(ln, x, rstd, dy, dx, N);
        return;
    }
    const size_t C = (size_t)ln->C;
    param_grads(ln, x, mean, rstd, dy, N);
    if (!dx) return;
    /* dx = rstd * (g - mean(g) - xhat * mean(g * xhat)), g = dy * scale. */
    const long rows = (long)N;
#pragma omp parallel for schedule(static) if (N * C >= ATTN_PAR_MIN)
    for (long row = 0; row < rows; row++) {
        const size_t n = (size_t)row;
        const float *xr = x + n * C, *dyr = dy + n * C;
        float *dxr = dx + n * C;
        const float m = mean[n], r = rstd[n];
        float sum_g = 0.0f, sum_gx = 0.0f;
        for (size_t c = 0; c < C; c++) {
            const float g = dyr[c] * ln->scale[c];
            sum_g += g;
            sum_gx += g * (xr[c] - m) * r;
        }
        const float mg = sum_g / (float)C, mgx = sum_gx / (float)C;
        for (size_t c = 0; c < C; c++) {
            const float xhat = (xr[c] - m) * r;
            dxr[c] += r * (dyr[c] * ln->scale[c] - mg - xhat * mgx);
        }
    }
}
