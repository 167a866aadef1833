/* The one-token products (kernels/gemv.h): the AVX2 kernels against the
 * AVX-512 ones (the same bits: same lanes, same tail, same final tree) and
 * against the portable C loops and a double sum (within float rounding),
 * fp32 and bf16 weights, every tail length, batches equal to their rows one
 * by one; the AVX2 bf16 rounding equals the scalar one on every kind of
 * value. Each path's test is skipped where the CPU (or ATTN_SIMD) lacks it. */
#define _POSIX_C_SOURCE 200809L /* setenv, strdup */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attn/cpu.h"
#include "attn/gpt.h"
#include "attn/rng.h"
#include "kernels/gemv.h"

#ifdef ATTN_GEMV_AVX512
typedef void (*gemv_f32_fn)(const float *, const float *, const float *, size_t, float *, size_t,
                            int, int, int, int);
typedef void (*gemv_bf16_fn)(const uint16_t *, const float *, const float *, size_t, float *,
                             size_t, int, int, int, int);

/* The portable loops: gemv.c's own, under ATTN_SIMD=generic (then the
 * cap the test runs under again). */
static void portable(const float *W, const uint16_t *Wb, const float *b, const float *x, size_t ldx,
                     float *y, size_t ldy, int n, int in, int r0, int r1) {
    const char *was = getenv("ATTN_SIMD");
    char *keep = was ? strdup(was) : NULL;
    setenv("ATTN_SIMD", "generic", 1);
    cr_assert_eq(attn_gemv_path(), ATTN_SIMD_GENERIC);
    if (Wb)
        attn_gemv_bf16_n(Wb, b, x, ldx, y, ldy, n, in, r0, r1);
    else
        attn_gemv_f32_n(W, b, x, ldx, y, ldy, n, in, r0, r1);
    if (keep)
        setenv("ATTN_SIMD", keep, 1);
    else
        unsetenv("ATTN_SIMD");
    free(keep);
}

/* Rows of `in` up to 3 chunks of 64 and every tail, 1 to 5 sequences. */
static const int INS[] = {1, 2, 7, 8, 9, 15, 16, 17, 31, 33, 63, 64, 65, 100, 127, 128, 129, 200};
enum { OUT = 13, MAXIN = 200, MAXN = 5 };

typedef struct gemv_case {
    float W[OUT * MAXIN], x[MAXN * MAXIN], b[OUT], y1[MAXN * OUT], y2[MAXN * OUT];
    uint16_t Wb[OUT * MAXIN];
} gemv_case;

static void fill(gemv_case *c, attn_rng *rng) {
    attn_rng_uniform(rng, c->W, OUT * MAXIN, -1.0f, 1.0f);
    attn_rng_uniform(rng, c->x, MAXN * MAXIN, -2.0f, 2.0f);
    attn_rng_uniform(rng, c->b, OUT, -1.0f, 1.0f);
    attn_f32_to_bf16_scalar(c->W, c->Wb, OUT * MAXIN);
}

/* y1 (f) and y2 (g) bit for bit, for every in, batch and bias choice. */
static void same_bits(gemv_f32_fn f, gemv_f32_fn g, gemv_bf16_fn fb, gemv_bf16_fn gb) {
    gemv_case *c = malloc(sizeof *c);
    attn_rng rng;
    attn_rng_seed(&rng, 50);
    fill(c, &rng);
    for (size_t k = 0; k < sizeof INS / sizeof *INS; k++)
        for (int n = 1; n <= MAXN; n++)
            for (int bias = 0; bias < 2; bias++) {
                const int in = INS[k];
                const float *b = bias ? c->b : NULL;
                f(c->W, b, c->x, MAXIN, c->y1, OUT, n, in, 0, OUT);
                g(c->W, b, c->x, MAXIN, c->y2, OUT, n, in, 0, OUT);
                cr_assert(memcmp(c->y1, c->y2, (size_t)n * OUT * sizeof(float)) == 0,
                          "fp32 in %d n %d", in, n);
                fb(c->Wb, b, c->x, MAXIN, c->y1, OUT, n, in, 0, OUT);
                gb(c->Wb, b, c->x, MAXIN, c->y2, OUT, n, in, 0, OUT);
                cr_assert(memcmp(c->y1, c->y2, (size_t)n * OUT * sizeof(float)) == 0,
                          "bf16 in %d n %d", in, n);
            }
    free(c);
}

static void need(attn_simd s) {
    if (!attn_simd_supported(s))
        cr_skip_test("no %s on this CPU (or ATTN_SIMD caps it)", attn_simd_name(s));
}

Test(gemv, avx2_equals_avx512) {
    need(ATTN_SIMD_AVX512);
    need(ATTN_SIMD_AVX2);
    same_bits(attn_gemv_f32_avx2, attn_gemv_f32_avx512, attn_gemv_bf16_avx2, attn_gemv_bf16_avx512);
}

/* A batch of n equals its n rows one by one (each sequence's sum is the
 * same whatever the batch), and rows [r0, r1) touch only those rows. */
static void batch_f32(const float *W, const float *b, const float *x, size_t ldx, float *y,
                      size_t ldy, int n, int in, int r0, int r1) {
    for (int s = 0; s < n; s++)
        for (int o = r0; o < r1; o += 3)
            attn_gemv_f32_avx2(W, b, x + (size_t)s * ldx, 0, y + (size_t)s * ldy, 0, 1, in, o,
                               o + 3 < r1 ? o + 3 : r1);
}
static void batch_bf16(const uint16_t *W, const float *b, const float *x, size_t ldx, float *y,
                       size_t ldy, int n, int in, int r0, int r1) {
    for (int s = 0; s < n; s++)
        for (int o = r0; o < r1; o += 3)
            attn_gemv_bf16_avx2(W, b, x + (size_t)s * ldx, 0, y + (size_t)s * ldy, 0, 1, in, o,
                                o + 3 < r1 ? o + 3 : r1);
}

Test(gemv, avx2_batch_equals_rows_one_by_one) {
    need(ATTN_SIMD_AVX2);
    same_bits(attn_gemv_f32_avx2, batch_f32, attn_gemv_bf16_avx2, batch_bf16);
}

/* Against the portable loops and a double sum: within a float rounding of
 * the sum of |w x| (two summation orders of the same products). */
Test(gemv, avx2_matches_portable_and_double) {
    need(ATTN_SIMD_AVX2);
    gemv_case *c = malloc(sizeof *c);
    attn_rng rng;
    attn_rng_seed(&rng, 51);
    fill(c, &rng);
    float Wf[OUT * MAXIN];
    for (int i = 0; i < OUT * MAXIN; i++)
        Wf[i] = attn_bf16_to_f32(c->Wb[i]);
    for (size_t k = 0; k < sizeof INS / sizeof *INS; k++) {
        const int in = INS[k], n = 2;
        for (int bf = 0; bf < 2; bf++) {
            const float *W = bf ? Wf : c->W; /* bf16: the widened weights */
            if (bf)
                attn_gemv_bf16_avx2(c->Wb, c->b, c->x, MAXIN, c->y1, OUT, n, in, 0, OUT);
            else
                attn_gemv_f32_avx2(c->W, c->b, c->x, MAXIN, c->y1, OUT, n, in, 0, OUT);
            portable(c->W, bf ? c->Wb : NULL, c->b, c->x, MAXIN, c->y2, OUT, n, in, 0, OUT);
            for (int s = 0; s < n; s++)
                for (int o = 0; o < OUT; o++) {
                    double d = c->b[o], mag = fabs(c->b[o]);
                    for (int i = 0; i < in; i++) {
                        const double p = (double)W[o * in + i] * c->x[s * MAXIN + i];
                        d += p;
                        mag += fabs(p);
                    }
                    const float got = c->y1[s * OUT + o], port = c->y2[s * OUT + o];
                    cr_assert(fabs(got - d) <= mag * 0x1p-20, "bf16 %d in %d: %a vs double %a", bf,
                              in, got, d);
                    cr_assert(fabs(got - port) <= mag * 0x1p-19, "bf16 %d in %d: %a vs C %a", bf,
                              in, got, port);
                }
        }
    }
    free(c);
}

/* bf16 rounding: nearest even, ties both ways, infinities, signed zeros,
 * subnormals, the largest floats, NaN kept NaN (quiet): the scalar bits. */
Test(gemv, avx2_bf16_rounding_equals_scalar) {
    need(ATTN_SIMD_AVX2);
    enum { N = 4099 }; /* a tail after the 8-wide loop */
    uint32_t *u = malloc(N * sizeof *u);
    uint16_t a[N], b[N];
    attn_rng rng;
    attn_rng_seed(&rng, 52);
    for (int i = 0; i < N; i++)
        u[i] = attn_rng_u32(&rng);
    const uint32_t edge[] = {0x00000000u, 0x80000000u, 0x7f800000u, 0xff800000u, 0x7f7fffffu,
                             0xff7fffffu, 0x00000001u, 0x807fffffu, 0x3f808000u, 0x3f818000u,
                             0x3f80ffffu, 0x7fc00000u, 0x7f800001u, 0xffffffffu, 0x7fffffffu};
    memcpy(u, edge, sizeof edge);
    float *x = malloc(N * sizeof *x);
    memcpy(x, u, N * sizeof *x);
    attn_f32_to_bf16_scalar(x, a, N);
    attn_f32_to_bf16_avx2(x, b, N);
    for (int i = 0; i < N; i++)
        cr_assert_eq(a[i], b[i], "%08x: scalar %04x avx2 %04x", u[i], a[i], b[i]);
    free(u), free(x);
}
/* 14 KV-cached steps of a small GPT (widths off the 64-element chunks)
 * with bf16 weights under ATTN_SIMD `level`: the logits of every step. */
enum { KV_V = 67, KV_STEPS = 14 };
static void kv_logits(const char *level, float *out) {
    const attn_gpt_config cfg = {.vocab_size = KV_V,
                                 .context_length = 16,
                                 .emb_dim = 72,
                                 .n_heads = 4,
                                 .n_layers = 2,
                                 .qkv_bias = 1};
    const char *was = getenv("ATTN_SIMD");
    char *keep = was ? strdup(was) : NULL;
    setenv("ATTN_SIMD", level, 1);
    attn_gpt m;
    attn_rng rng;
    attn_rng_seed(&rng, 8);
    attn_error err;
    cr_assert_eq(attn_gpt_init(&m, &cfg, &rng, &err), ATTN_OK, "%s", err.msg);
    attn_gpt_kv_cache c;
    cr_assert_eq(attn_gpt_kv_init(&c, &m, &err), ATTN_OK, "%s", err.msg);
    cr_assert_eq(attn_gpt_kv_set_precision(&c, &m, ATTN_PRECISION_BF16, &err), ATTN_OK, "%s",
                 err.msg);
    for (int t = 0; t < KV_STEPS; t++)
        cr_assert_eq(attn_gpt_kv_step(&m, &c, (t * 5) % KV_V, out + t * KV_V, &err), ATTN_OK);
    attn_gpt_kv_free(&c);
    attn_gpt_free(&m);
    if (keep)
        setenv("ATTN_SIMD", keep, 1);
    else
        unsetenv("ATTN_SIMD");
    free(keep);
}

/* Generation with bf16 weights: AVX2's logits are AVX-512's bit for bit
 * (so the same tokens, greedy or sampled); the portable kernel sums in
 * another order, within float rounding of them. */
Test(gemv, bf16_generation_same_logits_at_every_level) {
    need(ATTN_SIMD_AVX2);
    float *l2 = malloc(2 * KV_STEPS * KV_V * sizeof(float)), *lg = l2 + KV_STEPS * KV_V;
    kv_logits("avx2", l2);
    kv_logits("generic", lg);
    for (int i = 0; i < KV_STEPS * KV_V; i++)
        cr_assert(fabsf(l2[i] - lg[i]) <= 1e-5f * fmaxf(1.0f, fabsf(lg[i])),
                  "step %d logit %d: avx2 %g generic %g", i / KV_V, i % KV_V, l2[i], lg[i]);
    if (attn_simd_supported(ATTN_SIMD_AVX512)) {
        float *l5 = malloc(KV_STEPS * KV_V * sizeof(float));
        kv_logits("avx512", l5);
        cr_assert(memcmp(l2, l5, KV_STEPS * KV_V * sizeof(float)) == 0, "avx2 and avx512 differ");
        free(l5);
    }
    free(l2);
}
#else
Test(gemv, no_x86_kernels) {
    cr_skip_test("the AVX2 and AVX-512 kernels are x86 only");
}
#endif
