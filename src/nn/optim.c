/* AdamW, learning-rate schedule and gradient clipping (see attn/optim.h). */
#include "attn/optim.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/buffers.h"
#include "base/parallel.h"
#include "base/vec_clones.h"
#include "kernels/gemv.h"

static const double PI = 3.14159265358979323846;

attn_adamw_config attn_adamw_defaults(void) {
    attn_adamw_config c = {0.9, 0.999, 1e-8, 0.01};
    return c;
}

#define ADAMW_CHUNK 16384

/* Values [lo, lo + len) of parameter `param`. */
struct attn_adamw_piece {
    int param;
    size_t lo, len;
};

/* Pieces of the n values of a tensor. */
static size_t pieces_of(size_t n) {
    return (n + ADAMW_CHUNK - 1) / ADAMW_CHUNK;
}

/* The optimizer's buffers, listed once: per parameter (offset, decay, a
 * step's bf16 copy), per piece and per element (m, v); at least one of
 * each. */
static int adamw_buffers(attn_adamw *opt, size_t params, size_t pieces, size_t total,
                         attn_bufs_op op) {
    params = params ? params : 1;
    pieces = pieces ? pieces : 1;
    total = total ? total : 1;
    const attn_buf t[] = {
        ATTN_BUF(opt->offset, params), ATTN_BUF(opt->decay, params), ATTN_BUF(opt->w16, params),
        ATTN_BUF(opt->pieces, pieces), ATTN_BUF(opt->m, total),      ATTN_BUF(opt->v, total),
    };
    return ATTN_BUFS(t, op);
}

attn_status attn_adamw_init(attn_adamw *opt, const attn_param_list *params,
                            const attn_adamw_config *cfg, attn_error *err) {
    memset(opt, 0, sizeof *opt);
    if (!(cfg->beta1 >= 0 && cfg->beta1 < 1 && cfg->beta2 >= 0 && cfg->beta2 < 1))
        return attn_fail(err, ATTN_ERR_INVALID_ARG, "AdamW betas must be in [0, 1) (got %g, %g)",
                         cfg->beta1, cfg->beta2);
    if (!(cfg->eps > 0) || !(cfg->weight_decay >= 0))
        return attn_fail(err, ATTN_ERR_INVALID_ARG,
                         "AdamW needs eps > 0 and weight decay >= 0 (got %g, %g)", cfg->eps,
                         cfg->weight_decay);
    opt->cfg = *cfg;
    opt->n_params = params->count;
    opt->total = attn_param_list_numel(params);
    size_t pieces = 0;
    for (int i = 0; i < params->count; i++)
        pieces += pieces_of(params->items[i].numel);
    if (pieces > INT_MAX ||
        adamw_buffers(opt, (size_t)params->count, pieces, opt->total, ATTN_BUFS_ALLOC) != 0) {
        attn_adamw_free(opt);
        return attn_fail(err, ATTN_ERR_NOMEM, "out of memory for AdamW moments");
    }
    size_t off = 0;
    for (int i = 0; i < params->count; i++) {
        const size_t n = params->items[i].numel;
        opt->offset[i] = off;
        opt->decay[i] = params->items[i].ndim >= 2;
        off += n;
        for (size_t lo = 0; lo < n; lo += ADAMW_CHUNK)
            opt->pieces[opt->n_pieces++] =
                (struct attn_adamw_piece){i, lo, n - lo < ADAMW_CHUNK ? n - lo : ADAMW_CHUNK};
    }
    return ATTN_OK;
}

void attn_adamw_free(attn_adamw *opt) {
    adamw_buffers(opt, 0, 0, 0, ATTN_BUFS_FREE);
    memset(opt, 0, sizeof *opt);
}

/* One step's scalars, as Python computes them (double), then used as
 * float32 by the tensor ops, as PyTorch's CPU kernels do for float tensors. */
typedef struct adamw_scalars {
    float decay_f, b1f, omb1, b2f, omb2, bc2_sqrt, neg_step, eps;
} adamw_scalars;

static adamw_scalars adamw_scalars_of(const attn_adamw_config *c, double lr, int64_t step) {
    const double b1 = c->beta1, b2 = c->beta2, t = (double)step;
    adamw_scalars sc = {
        .decay_f = (float)(1.0 - lr * c->weight_decay),
        .b1f = (float)b1,
        .omb1 = (float)(1.0 - b1),
        .b2f = (float)b2,
        .omb2 = (float)(1.0 - b2),
        .bc2_sqrt = (float)sqrt(1.0 - pow(b2, t)),
        .neg_step = (float)(-(lr / (1.0 - pow(b1, t)))),
        .eps = (float)c->eps,
    };
    return sc;
}

/* The update of n values: the AdamW math, once. The gradient is read times
 * gscale (a clip factor; 1 is exact), so clipping needs no pass of its own.
 * Each element on its own: the same bits at every vector width. */
ATTN_VEC_PROC(adamw_chunk,
              (const adamw_scalars *sc, int decay, float gscale, float *w, const float *g, float *m,
               float *v, long n),
              (sc, decay, gscale, w, g, m, v, n), {
                  const adamw_scalars c = *sc;
                  for (long k = 0; k < n; k++) {
                      float wk = w[k];
                      if (decay) wk = wk * c.decay_f;
                      const float gk = g[k] * gscale;
                      float mk = m[k] * c.b1f + c.omb1 * gk;
                      float vk = v[k] * c.b2f + c.omb2 * (gk * gk);
                      float denom = sqrtf(vk) / c.bc2_sqrt + c.eps;
                      w[k] = wk + c.neg_step * (mk / denom);
                      m[k] = mk;
                      v[k] = vk;
                  }
              })

/* w16 non-NULL: also its bf16 rounding, each chunk while still in cache. */
static void adamw_tensor(const adamw_scalars *sc, int decay, float gscale, float *w, const float *g,
                         float *m, float *v, uint16_t *w16, long n) {
    const long chunks = (n + ADAMW_CHUNK - 1) / ADAMW_CHUNK;
#pragma omp parallel for schedule(static) if (n >= ATTN_PAR_MIN)
    for (long b = 0; b < chunks; b++) {
        const long lo = b * ADAMW_CHUNK, len = n - lo < ADAMW_CHUNK ? n - lo : ADAMW_CHUNK;
        adamw_chunk(sc, decay, gscale, w + lo, g + lo, m + lo, v + lo, len);
        if (w16) attn_f32_to_bf16(w + lo, w16 + lo, (size_t)len);
    }
}

/* Every piece of every tensor with a gradient, in one parallel pass. */
static void adamw_pieces(const attn_adamw *opt, const attn_param_list *params,
                         const adamw_scalars *sc, float gscale) {
    const long n = opt->n_pieces;
#pragma omp parallel for schedule(static) if (opt->total >= ATTN_PAR_MIN)
    for (long k = 0; k < n; k++) {
        const struct attn_adamw_piece *pc = &opt->pieces[k];
        const attn_param *p = &params->items[pc->param];
        if (!p->grad) continue; /* frozen */
        const int decay = opt->decay[pc->param] && opt->cfg.weight_decay != 0;
        const size_t lo = pc->lo, at = opt->offset[pc->param] + lo;
        adamw_chunk(sc, decay, gscale, p->data + lo, p->grad + lo, opt->m + at, opt->v + at,
                    (long)pc->len);
        uint16_t *w16 = opt->w16[pc->param];
        if (w16) attn_f32_to_bf16(p->data + lo, w16 + lo, pc->len);
    }
}

attn_status attn_adamw_step(attn_adamw *opt, const attn_param_list *params, double lr,
                            attn_error *err) {
    return attn_adamw_step_scaled(opt, params, lr, 1.0f, err);
}

attn_status attn_adamw_step_scaled(attn_adamw *opt, const attn_param_list *params, double lr,
                                   float grad_scale, attn_error *err) {
    return attn_adamw_step_bf16(opt, params, lr, grad_scale, NULL, err);
}

attn_status attn_adamw_step_bf16(attn_adamw *opt, const attn_param_list *params, double lr,
                                 float grad_scale, attn_bf16_gemm *bf16, attn_error *err) {
    if (params->count != opt->n_params || attn_param_list_numel(params) != opt->total)
        return attn_fail(err, ATTN_ERR_STATE,
                         "AdamW was set up for %d parameters (%zu values), given %d", opt->n_params,
                         opt->total, params->count);
    opt->step++;
    const adamw_scalars sc = adamw_scalars_of(&opt->cfg, lr, opt->step);
    for (int i = 0; i < params->count; i++) {
        const attn_param *p = &params->items[i];
        opt->w16[i] = p->grad ? attn_bf16_gemm_weight_copy(bf16, p->data, p->numel) : NULL;
    }
    adamw_pieces(opt, params, &sc, grad_scale);
    attn_bf16_gemm_carry_copies(bf16);
    return ATTN_OK;
}

attn_status attn_adamw_step_tensors(const attn_adamw_tensor *t, int count,
                                    const attn_adamw_config *cfg, double lr, int64_t step,
                                    attn_error *err) {
    if (count < 0 || (count > 0 && !t))
        return attn_fail(err, ATTN_ERR_INVALID_ARG, "AdamW: %d tensors given", count);
    if (!(cfg->beta1 >= 0 && cfg->beta1 < 1 && cfg->beta2 >= 0 && cfg->beta2 < 1) ||
        !(cfg->eps > 0) || !(cfg->weight_decay >= 0) || !(lr >= 0) || step < 1)
        return attn_fail(err, ATTN_ERR_INVALID_ARG,
                         "AdamW: betas in [0, 1), eps > 0, weight decay >= 0, lr >= 0 and step "
                         ">= 1 (got %g, %g, %g, %g, %g, %lld)",
                         cfg->beta1, cfg->beta2, cfg->eps, cfg->weight_decay, lr, (long long)step);
    for (int i = 0; i < count; i++)
        if (!t[i].param || !t[i].grad || !t[i].exp_avg || !t[i].exp_avg_sq || t[i].numel > LONG_MAX)
            return attn_fail(err, ATTN_ERR_INVALID_ARG, "AdamW: tensor %d has a NULL array", i);
    const adamw_scalars sc = adamw_scalars_of(cfg, lr, step);
    for (int i = 0; i < count; i++)
        adamw_tensor(&sc, cfg->weight_decay != 0, 1.0f, t[i].param, t[i].grad, t[i].exp_avg,
                     t[i].exp_avg_sq, NULL, (long)t[i].numel);
    return ATTN_OK;
}

/* Sum of squares of n floats in double: 32 lanes, each summing every 32nd
 * element, then the lanes in order. The lanes are independent sums (no
 * reassociation), so every vector width gives the same bits. */
ATTN_VEC_FN(double, sumsq_chunk, (const float *x, size_t n), (x, n), {
    double lane[32] = {0};
    size_t k = 0;
    for (; k + 32 <= n; k += 32)
        for (int j = 0; j < 32; j++)
            lane[j] += (double)x[k + j] * (double)x[k + j];
    for (int j = 0; k < n; k++, j++)
        lane[j] += (double)x[k] * (double)x[k];
    double s = 0.0;
    for (int j = 0; j < 32; j++)
        s += lane[j];
    return s;
})

/* At most SUMSQ_PARTS chunks per tensor, each at least SUMSQ_MIN long: the
 * cut depends on the tensor's size alone, so the partial sums, added in
 * order, give the same norm at every thread count. */
#define SUMSQ_PARTS 512
#define SUMSQ_MIN 65536

static double sumsq(const float *x, size_t n) {
    size_t len = (n + SUMSQ_PARTS - 1) / SUMSQ_PARTS;
    if (len < SUMSQ_MIN) len = SUMSQ_MIN;
    const long parts = (long)((n + len - 1) / len);
    if (parts <= 1) return sumsq_chunk(x, n);
    double part[SUMSQ_PARTS];
#pragma omp parallel for schedule(static)
    for (long b = 0; b < parts; b++) {
        const size_t lo = (size_t)b * len;
        part[b] = sumsq_chunk(x + lo, n - lo < len ? n - lo : len);
    }
    double s = 0.0;
    for (long b = 0; b < parts; b++)
        s += part[b];
    return s;
}

double attn_grad_norm(const attn_param_list *params) {
    double ss = 0.0;
    for (int i = 0; i < params->count; i++) {
        const attn_param *p = &params->items[i];
        if (p->grad) ss += sumsq(p->grad, p->numel);
    }
    return sqrt(ss);
}

float attn_clip_coef(double norm, double max_norm) {
    /* PyTorch forms the factor from the float32 norm, in float32. */
    return max_norm > 0 && norm > max_norm ? (float)max_norm / ((float)norm + 1e-6f) : 1.0f;
}

double attn_clip_grad_norm(const attn_param_list *params, double max_norm) {
    const double norm = attn_grad_norm(params);
    const float coef = attn_clip_coef(norm, max_norm);
    if (coef == 1.0f) return norm;
    for (int i = 0; i < params->count; i++) {
        const attn_param *p = &params->items[i];
        if (!p->grad) continue;
        const long n = (long)p->numel;
#pragma omp parallel for schedule(static) if (n >= ATTN_PAR_MIN)
        for (long k = 0; k < n; k++)
            p->grad[k] *= coef;
    }
    return norm;
}

double attn_lr_cosine(int64_t it, int64_t warmup, int64_t decay_steps, double lr_max,
                      double lr_min) {
    if (it < warmup) return lr_max * (double)(it + 1) / (double)(warmup + 1);
    if (it > decay_steps) return lr_min;
    if (decay_steps <= warmup) return lr_min;
    double ratio = (double)(it - warmup) / (double)(decay_steps - warmup);
    double coeff = 0.5 * (1.0 + cos(PI * ratio));
    return lr_min + coeff * (lr_max - lr_min);
}
