/* The book's tanh-form GELU (see attn/gelu.h).
 *
 * glibc's tanhf is a scalar call and was half of a training step, so tanh is
 * computed here from a branch-free exp that the compiler can vectorise
 * (IEEE arithmetic only, no -ffast-math): relative error a few 1e-7, far
 * below the 1e-4 parity budget. */
#include "attn/gelu.h"

#include <stdint.h>
#include <string.h>

#include "base/parallel.h"
#include "base/vec_clones.h"
#include "kernels/gemv.h"

/* Let GCC compute both sides of the selects below so the loops vectorise;
 * this only drops assumptions about FP exception flags (which attn never
 * reads), not IEEE results. On x86-64 the loops are also cloned for AVX2 and
 * AVX-512 and picked at load time (vec_clones.h). */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-trapping-math")
#endif

/* sqrt(2 / pi) as the book computes it: torch.sqrt(torch.tensor(2.0 / pi)) in float32. */
#define GELU_K 0.7978845608028654f
#define GELU_A 0.044715f

/* exp(x) for x in [-87, 0]: x = n ln2 + r, |r| <= ln2 / 2, degree-7 Taylor
 * polynomial for exp(r) (truncation < 6e-9), scaled by 2^n through the
 * exponent bits. */
static inline float exp_nonpos(float x) {
    x = x >= -87.0f ? x : -87.0f; /* also maps NaN to a finite value */
    /* Round to nearest with the 1.5 * 2^23 trick (exact for |v| < 2^22). */
    const float n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
    const float r = (x - n * 0.693145751953125f) - n * 1.42860682030941723212e-6f;
    float p = 1.0f / 5040.0f;
    p = p * r + 1.0f / 720.0f;
    p = p * r + 1.0f / 120.0f;
    p = p * r + 1.0f / 24.0f;
    p = p * r + 1.0f / 6.0f;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    const int32_t bits = ((int32_t)n + 127) << 23;
    float scale;
    memcpy(&scale, &bits, sizeof scale);
    return p * scale;
}

/* tanh(u): odd Taylor series up to u^13 for |u| < 0.35 (truncation < 1e-9
 * relative), else sign(u) (1 - 2 / (exp(2|u|) + 1)) computed as
 * (1 - e) / (1 + e) with e = exp(-2|u|) <= 0.5, so nothing cancels. */
static inline float tanh_fast(float u) {
    const float a = u < 0.0f ? -u : u;
    const float e = exp_nonpos(-2.0f * a);
    float big = (1.0f - e) / (1.0f + e);
    big = u < 0.0f ? -big : big;
    const float u2 = u * u;
    float s = 21844.0f / 6081075.0f;
    s = s * u2 - 1382.0f / 155925.0f;
    s = s * u2 + 62.0f / 2835.0f;
    s = s * u2 - 17.0f / 315.0f;
    s = s * u2 + 2.0f / 15.0f;
    s = s * u2 - 1.0f / 3.0f;
    const float small = u + u * u2 * s;
    /* NaN in, NaN out (a diverging run must show it). */
    return a < 0.35f ? small : (a == a ? big : u);
}

float attn_tanhf(float u) {
    return tanh_fast(u);
}

ATTN_VEC_PROC(gelu_forward_chunk, (const float *x, float *y, size_t n), (x, y, n), {
    for (size_t i = 0; i < n; i++) {
        const float v = x[i];
        y[i] = 0.5f * v * (1.0f + tanh_fast(GELU_K * (v + GELU_A * (v * v * v))));
    }
})

static inline float gelu_grad(float v) {
    const float t = tanh_fast(GELU_K * (v + GELU_A * (v * v * v)));
    /* d/dv [0.5 v (1 + t)] = 0.5 (1 + t) + 0.5 v (1 - t^2) K (1 + 3 A v^2) */
    return 0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * GELU_K * (1.0f + 3.0f * GELU_A * v * v);
}

ATTN_VEC_PROC(gelu_backward_chunk, (const float *x, const float *dy, float *dx, size_t n),
              (x, dy, dx, n), {
                  for (size_t i = 0; i < n; i++)
                      dx[i] += gelu_grad(x[i]) * dy[i];
              })

ATTN_VEC_PROC(gelu_backward_inplace_chunk, (const float *x, float *d, size_t n), (x, d, n), {
    for (size_t i = 0; i < n; i++)
        d[i] *= gelu_grad(x[i]);
})

/* The public entry points split [0, n) into ATTN_PAR_CHUNK pieces over the
 * OpenMP threads; each piece runs the vectorised clone of one of these. */
typedef enum { GELU_FORWARD, GELU_FORWARD_BF16, GELU_BACKWARD, GELU_BACKWARD_INPLACE } gelu_op;

/* FORWARD: out = gelu(x). FORWARD_BF16: out (uint16_t) = bf16(gelu(x)).
 * BACKWARD: out += gelu'(x) * b. INPLACE: out *= gelu'(x). */
static void gelu_chunk(gelu_op op, const float *x, const float *b, void *out_, size_t n, long c) {
    const size_t o = (size_t)c * ATTN_PAR_CHUNK;
    const size_t len = attn_par_piece(n, c);
    float *out = out_;
    if (op == GELU_FORWARD_BF16) {
        float tmp[ATTN_PAR_CHUNK]; /* 16 KiB: stays in L1 between the two */
        gelu_forward_chunk(x + o, tmp, len);
        attn_f32_to_bf16(tmp, (uint16_t *)out_ + o, len);
    } else if (op == GELU_FORWARD)
        gelu_forward_chunk(x + o, out + o, len);
    else if (op == GELU_BACKWARD)
        gelu_backward_chunk(x + o, b + o, out + o, len);
    else
        gelu_backward_inplace_chunk(x + o, out + o, len);
}

static void gelu_split(gelu_op op, const float *x, const float *b, void *out, size_t n) {
    const long chunks = (long)((n + ATTN_PAR_CHUNK - 1) / ATTN_PAR_CHUNK);
    /* Small inputs (one token while generating) skip the OpenMP runtime. */
    if (n < ATTN_PAR_MIN) {
        for (long c = 0; c < chunks; c++)
            gelu_chunk(op, x, b, out, n, c);
        return;
    }
#pragma omp parallel for schedule(static)
    for (long c = 0; c < chunks; c++)
        gelu_chunk(op, x, b, out, n, c);
}

void attn_gelu_forward(const float *x, float *y, size_t n) {
    gelu_split(GELU_FORWARD, x, NULL, y, n);
}

void attn_gelu_forward_bf16(const float *x, uint16_t *y16, size_t n) {
    gelu_split(GELU_FORWARD_BF16, x, NULL, y16, n);
}

void attn_gelu_backward(const float *x, const float *dy, float *dx, size_t n) {
    gelu_split(GELU_BACKWARD, x, dy, dx, n);
}

void attn_gelu_backward_inplace(const float *x, float *d, size_t n) {
    gelu_split(GELU_BACKWARD_INPLACE, x, NULL, d, n);
}
