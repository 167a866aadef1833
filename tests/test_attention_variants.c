/* The attention core's variants on MultiHeadAttention itself (issue 20,
 * attn/attention.h): grouped-query heads, RoPE (whole and partial), ALiBi,
 * sliding window, QK-norm and soft-cap, alone and combined.
 *
 * - fused == reference: every variant on the fused path gives the reference path's output (<= 1e-5)
 * and gradients
 *   (<= 1e-4) on every SIMD path, at tiles that do not divide T, odd T and
 *   head dims 16..128, at 1 and 2 threads; bf16 within bf16's error.
 * - the reference path gives the same bits at 1 and 2 threads.
 * - the pieces against their definitions: ALiBi's slopes, RoPE's inverse,
 *   the window's mask, the soft-cap's derivative (finite differences).
 * - PyTorch: with ATTN_ATTENTION_DUMP=DIR the `dump` test writes random
 *   combinations for scripts/attention_parity.py check
 *   (tests/attention_parity_live.sh). */
#define _POSIX_C_SOURCE 200809L
#include <criterion/criterion.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn/attention.h"
#include "attn/engine.h"
#include "attn/multi_head_attention.h"
#include "attn/rng.h"
#include "attn/safetensors.h"

static double max_rel(const float *got, const float *want, size_t n, double floor) {
    double md = 0, mr = 0;
    for (size_t i = 0; i < n; i++) {
        md = fmax(md, fabs((double)got[i] - (double)want[i]));
        mr = fmax(mr, fabs((double)want[i]));
    }
    return md / fmax(mr, floor);
}

typedef struct run_out {
    float *y, *dx, *grads; /* (B T d_out), (B T d_in), every parameter's grad */
    size_t ngrad;
} run_out;

static void run_free(run_out *r) {
    free(r->y);
    free(r->dx);
    free(r->grads);
}

/* Forward + backward of m on x, dy; training with dropout when stream >= 0
 * (the generator seeded 77). */
static void run_mode(attn_mha *m, attn_mha_path path, const float *x, const float *dy, int B, int T,
                     int stream, run_out *r) {
    attn_error err;
    m->path = path;
    attn_attention_cache cache;
    cr_assert_eq(attn_mha_cache_init(&cache, m, B, T, &err), ATTN_OK, "%s", err.msg);
    const size_t N = (size_t)B * (size_t)T;
    r->y = calloc(N * (size_t)m->d_out, sizeof(float));
    r->dx = calloc(N * (size_t)m->d_in, sizeof(float));
    attn_param_list L;
    attn_param_list_init(&L);
    cr_assert_eq(attn_mha_params(m, "", &L, &err), ATTN_OK);
    attn_param_list_zero_grad(&L);
    attn_rng drop;
    attn_rng_seed(&drop, 77);
    attn_forward_mode mode = {1, &drop, (attn_dropout_stream)(stream >= 0 ? stream : 0)};
    cr_assert_eq(attn_mha_forward(m, x, B, T, r->y, stream >= 0 ? &mode : NULL, &cache, &err),
                 ATTN_OK, "%s", err.msg);
    cr_assert_eq(attn_mha_backward(m, x, B, T, dy, r->dx, &cache, &err), ATTN_OK, "%s", err.msg);
    r->ngrad = attn_param_list_numel(&L);
    r->grads = malloc(r->ngrad * sizeof(float));
    float *g = r->grads;
    for (int i = 0; i < L.count; i++) {
        memcpy(g, L.items[i].grad, L.items[i].numel * sizeof(float));
        g += L.items[i].numel;
    }
    attn_param_list_free(&L);
    attn_attention_cache_free(&cache);
}

static void run(attn_mha *m, attn_mha_path path, const float *x, const float *dy, int B, int T,
                run_out *r) {
    run_mode(m, path, x, dy, B, T, -1, r);
}

static void make(attn_mha *m, const attn_attention_spec *sp, int d_in, int ctx, uint64_t seed) {
    attn_rng rng;
    attn_rng_seed(&rng, seed);
    attn_error err;
    cr_assert_eq(attn_mha_init_spec(m, d_in, sp->heads * sp->head_dim, ctx, sp, 1, &rng, &err),
                 ATTN_OK, "%s", err.msg);
    if (sp->qk_norm) { /* scales away from 1, so their gradients matter */
        attn_rng_uniform(&rng, m->q_norm.scale, (size_t)sp->head_dim, 0.5f, 1.5f);
        attn_rng_uniform(&rng, m->k_norm.scale, (size_t)sp->head_dim, 0.5f, 1.5f);
    }
}

static const attn_simd ALL_SIMD[] = {ATTN_SIMD_GENERIC, ATTN_SIMD_AVX2, ATTN_SIMD_AVX512};

/* Grouped-query (every kv count dividing the heads), RoPE (whole, partial,
 * another theta) and QK-norm on the fused path == the reference path. */
Test(attention_variants, fused_equals_reference_on_every_simd_path) {
    const struct {
        int heads, kv, hd, T, pos, qk, window; /* pos 1: RoPE, 2: ALiBi */
        double frac, softcap;
    } cases[] = {
        {4, 4, 16, 17, 1, 0, 0, 1.0, 0},   {4, 2, 16, 33, 0, 0, 0, 0, 0},
        {4, 1, 32, 19, 1, 1, 0, 0.5, 0},   {6, 3, 16, 67, 1, 0, 0, 1.0, 0},
        {6, 2, 24, 5, 0, 1, 0, 0, 0},      {2, 1, 128, 9, 1, 1, 0, 0.25, 0},
        {3, 1, 64, 1, 1, 0, 0, 1.0, 0},    {4, 2, 48, 70, 1, 1, 0, 1.0, 0},
        {4, 4, 16, 97, 0, 0, 5, 0, 0},     {4, 2, 32, 97, 1, 0, 20, 1.0, 0},
        {2, 2, 16, 70, 0, 1, 33, 0, 0},    {3, 3, 24, 67, 0, 0, 1, 0, 0},
        {2, 1, 64, 130, 1, 1, 64, 1.0, 0}, {6, 3, 16, 67, 2, 0, 0, 0, 0},
        {4, 4, 32, 45, 0, 0, 0, 0, 1.5},   {6, 2, 16, 97, 2, 1, 17, 0, 3.0},
        {3, 1, 24, 70, 1, 0, 9, 0.5, 0.8}, {5, 5, 16, 33, 2, 0, 0, 0, 0.5},
    };
    const int tiles[2][2] = {{16, 16}, {64, 32}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        attn_attention_spec sp = attn_attention_book(cases[c].heads, cases[c].hd, 0.0);
        sp.kv_heads = cases[c].kv;
        sp.positions = (attn_positions)cases[c].pos;
        sp.softcap = cases[c].softcap;
        sp.rope_fraction = cases[c].frac;
        sp.rope_theta = c % 2 ? 500.0 : 0.0;
        sp.qk_norm = cases[c].qk;
        sp.window = cases[c].window;
        const int B = 2, T = cases[c].T, d_in = 20;
        attn_mha m;
        make(&m, &sp, d_in, 160, 100 + c);
        const size_t N = (size_t)B * (size_t)T;
        float *x = malloc(N * d_in * sizeof(float)), *dy = malloc(N * m.d_out * sizeof(float));
        attn_rng rng;
        attn_rng_seed(&rng, 7 + c);
        attn_rng_uniform(&rng, x, N * d_in, -1.0f, 1.0f);
        attn_rng_uniform(&rng, dy, N * m.d_out, -1.0f, 1.0f);
        run_out ref;
        run(&m, ATTN_MHA_REFERENCE, x, dy, B, T, &ref);
        for (size_t s = 0; s < 3; s++) {
            if (!attn_simd_supported(ALL_SIMD[s])) continue;
            for (int t = 0; t < 2; t++)
                for (int threads = 1; threads <= 2; threads++) {
                    m.flash = (attn_flash_options){.threads = threads,
                                                   .simd = ALL_SIMD[s],
                                                   .block_q = tiles[t][0],
                                                   .block_k = tiles[t][1]};
                    run_out f;
                    run(&m, ATTN_MHA_FUSED, x, dy, B, T, &f);
                    const double ey = max_rel(f.y, ref.y, N * m.d_out, 1e-6);
                    const double ex = max_rel(f.dx, ref.dx, N * d_in, 1e-3);
                    const double eg = max_rel(f.grads, ref.grads, f.ngrad, 1e-3);
                    cr_expect(ey <= 1e-5 && ex <= 1e-4 && eg <= 1e-4,
                              "case %zu %s tiles %d threads %d: out %g, dx %g, grads %g", c,
                              attn_simd_name(ALL_SIMD[s]), tiles[t][0], threads, ey, ex, eg);
                    run_free(&f);
                }
        }
        m.flash = (attn_flash_options){0};
        run_free(&ref);
        free(x);
        free(dy);
        attn_mha_free(&m);
    }
}

/* A window with dropout: the fused kernel skips key tiles, yet draws (or
 * jumps to) the mask PyTorch draws, on both streams: the reference path's
 * numbers. */
Test(attention_variants, fused_window_with_dropout_equals_reference) {
    const attn_dropout_stream streams[2] = {ATTN_STREAM_TORCH_CPU, ATTN_STREAM_TORCH_MKL};
    for (int k = 0; k < 2; k++) {
        attn_attention_spec sp = attn_attention_book(4, 16, 0.3);
        sp.kv_heads = 2;
        sp.window = 7;
        const int B = 2, T = 70, d_in = 16;
        attn_mha m;
        make(&m, &sp, d_in, 80, 31);
        m.flash = (attn_flash_options){.threads = 2, .block_q = 16, .block_k = 16};
        const size_t N = (size_t)B * T;
        float *x = malloc(N * d_in * sizeof(float)), *dy = malloc(N * m.d_out * sizeof(float));
        attn_rng rng;
        attn_rng_seed(&rng, 4);
        attn_rng_uniform(&rng, x, N * d_in, -1.0f, 1.0f);
        attn_rng_uniform(&rng, dy, N * m.d_out, -1.0f, 1.0f);
        run_out ref, f;
        run_mode(&m, ATTN_MHA_REFERENCE, x, dy, B, T, (int)streams[k], &ref);
        run_mode(&m, ATTN_MHA_FUSED, x, dy, B, T, (int)streams[k], &f);
        const double ey = max_rel(f.y, ref.y, N * m.d_out, 1e-6);
        const double eg = max_rel(f.grads, ref.grads, f.ngrad, 1e-3);
        cr_expect(ey <= 1e-5 && eg <= 1e-4, "stream %d: out %g, grads %g", k, ey, eg);
        run_free(&ref);
        run_free(&f);
        free(x);
        free(dy);
        attn_mha_free(&m);
    }
}

/* Every variant runs on the fused path; a kv count that does not divide
 * the heads is refused by name. */
Test(attention_variants, every_variant_is_on_the_fused_path) {
    attn_attention_spec sp = attn_attention_book(4, 8, 0.0);
    sp.kv_heads = 2;
    sp.window = 4;
    sp.positions = ATTN_POSITIONS_ALIBI;
    sp.qk_norm = 1;
    sp.softcap = 4;
    attn_mha m;
    make(&m, &sp, 8, 16, 1);
    cr_expect_eq(m.path, ATTN_MHA_FUSED);
    attn_mha_free(&m);
    attn_error err;
    sp.kv_heads = 3;
    cr_expect_neq(attn_mha_init_spec(&m, 8, 32, 16, &sp, 0, NULL, &err), ATTN_OK);
    cr_expect(strstr(err.msg, "n_kv_heads 3 must divide n_heads 4"), "%s", err.msg);
}

/* Every variant at once on the reference path: 1 and 2 threads, the same
 * bits. */
Test(attention_variants, reference_gives_the_same_bits_at_1_and_2_threads) {
    attn_attention_spec sp = attn_attention_book(6, 16, 0.0);
    sp.kv_heads = 2;
    sp.window = 5;
    sp.positions = ATTN_POSITIONS_ALIBI;
    sp.qk_norm = 1;
    sp.softcap = 2.0;
    const int B = 3, T = 37, d_in = 24;
    attn_mha m;
    make(&m, &sp, d_in, 40, 3);
    const size_t N = (size_t)B * T;
    float *x = malloc(N * d_in * sizeof(float)), *dy = malloc(N * m.d_out * sizeof(float));
    attn_rng rng;
    attn_rng_seed(&rng, 5);
    attn_rng_uniform(&rng, x, N * d_in, -1.0f, 1.0f);
    attn_rng_uniform(&rng, dy, N * m.d_out, -1.0f, 1.0f);
    const int max_threads = omp_get_max_threads();
    run_out a, b;
    omp_set_num_threads(1);
    run(&m, ATTN_MHA_REFERENCE, x, dy, B, T, &a);
    omp_set_num_threads(2);
    run(&m, ATTN_MHA_REFERENCE, x, dy, B, T, &b);
    omp_set_num_threads(max_threads);
    cr_expect(memcmp(a.y, b.y, N * m.d_out * sizeof(float)) == 0);
    cr_expect(memcmp(a.dx, b.dx, N * d_in * sizeof(float)) == 0);
    cr_expect(memcmp(a.grads, b.grads, a.ngrad * sizeof(float)) == 0);
    run_free(&a);
    run_free(&b);
    free(x);
    free(dy);
    attn_mha_free(&m);
}

/* The pieces against their definitions. */
Test(attention_variants, alibi_rope_window_softcap_as_defined) {
    /* Press et al.: 8 heads 1/2 .. 1/256; 6 heads: 4's, then 8's odd ones. */
    for (int h = 0; h < 8; h++)
        cr_expect_eq(attn_alibi_slope(8, h), ldexpf(1.0f, -(h + 1)));
    const float six[6] = {0.25f, 0.0625f, 0.015625f, 0.00390625f, 0.5f, 0.125f};
    for (int h = 0; h < 6; h++)
        cr_expect_eq(attn_alibi_slope(6, h), six[h], "head %d: %g", h, attn_alibi_slope(6, h));
    /* RoPE: rotation by pos * theta^(-2d/rot) on (d, d + rot/2); the inverse undoes it. */
    attn_attention_spec sp = attn_attention_book(2, 8, 0.0);
    sp.positions = ATTN_POSITIONS_ROPE;
    sp.rope_fraction = 0.5; /* rot 4: dims 0, 2 pair; 1, 3 pair; 4..7 pass */
    cr_expect_eq(attn_rope_dims(&sp), 4);
    float v[16], w[16];
    for (int i = 0; i < 16; i++)
        v[i] = w[i] = (float)(i + 1);
    attn_rope_apply(&sp, v, 1, 1, 16, 2, 3, 0);
    const double a0 = 3.0, a1 = 3.0 / 100.0; /* theta 10000, rot 4: 1, 1/100 */
    cr_expect(fabs(v[0] - (1 * cos(a0) - 3 * sin(a0))) < 1e-5);
    cr_expect(fabs(v[2] - (3 * cos(a0) + 1 * sin(a0))) < 1e-5);
    cr_expect(fabs(v[1] - (2 * cos(a1) - 4 * sin(a1))) < 1e-5);
    cr_expect(v[4] == 5.0f && v[7] == 8.0f && v[12] == 13.0f);
    attn_rope_apply(&sp, v, 1, 1, 16, 2, 3, 1);
    for (int i = 0; i < 16; i++)
        cr_expect(fabsf(v[i] - w[i]) < 1e-5f, "%d: %g vs %g", i, v[i], w[i]);
    /* Window 3: query 5 sees keys 3, 4, 5. */
    sp = attn_attention_book(1, 4, 0.0);
    sp.window = 3;
    for (int j = 0; j < 8; j++)
        cr_expect_eq(attn_score_masked(&sp, 5, j), !(j >= 3 && j <= 5), "key %d", j);
    /* Soft-cap: c tanh(s / c), its derivative by finite differences. */
    sp.softcap = 1.5;
    for (float dot = -9.0f; dot <= 9.0f; dot += 1.5f) {
        const float s = attn_score(&sp, dot, 0.0f, 5, 5);
        cr_expect(fabs(s - 1.5 * tanh(dot / 2.0 / 1.5)) < 1e-6);
        const double fd =
            (attn_score(&sp, dot + 1e-2f, 0, 5, 5) - attn_score(&sp, dot - 1e-2f, 0, 5, 5)) / 2e-2;
        cr_expect(fabs(fd - attn_score_grad(&sp, dot)) < 1e-3, "dot %g: %g vs %g", dot, fd,
                  attn_score_grad(&sp, dot));
    }
}

/* bf16 kernels with every variant: within bf16's error of the fp32
 * reference. */
Test(attention_variants, fused_bf16_within_bf16_tolerance) {
    if (attn_precision_check(ATTN_PRECISION_BF16, NULL) != ATTN_OK)
        cr_skip_test("no AVX512-BF16 on this CPU");
    attn_attention_spec sp = attn_attention_book(4, 32, 0.0);
    sp.kv_heads = 2;
    sp.positions = ATTN_POSITIONS_ROPE;
    sp.qk_norm = 1;
    sp.window = 9;
    sp.softcap = 2.0;
    const int B = 2, T = 45, d_in = 32;
    attn_mha m;
    make(&m, &sp, d_in, 64, 9);
    const size_t N = (size_t)B * T;
    float *x = malloc(N * d_in * sizeof(float)), *dy = malloc(N * m.d_out * sizeof(float));
    attn_rng rng;
    attn_rng_seed(&rng, 2);
    attn_rng_uniform(&rng, x, N * d_in, -1.0f, 1.0f);
    attn_rng_uniform(&rng, dy, N * m.d_out, -1.0f, 1.0f);
    run_out ref, f;
    run(&m, ATTN_MHA_REFERENCE, x, dy, B, T, &ref);
    m.flash.precision = ATTN_PRECISION_BF16;
    run(&m, ATTN_MHA_FUSED, x, dy, B, T, &f);
    const double ey = max_rel(f.y, ref.y, N * m.d_out, 1e-3);
    const double eg = max_rel(f.grads, ref.grads, f.ngrad, 1e-3);
    cr_expect(ey > 0 && ey < 3e-2 && eg < 6e-2, "bf16: out %g, grads %g", ey, eg);
    run_free(&ref);
    run_free(&f);
    free(x);
    free(dy);
    attn_mha_free(&m);
}

/* Random combinations for scripts/attention_parity.py check: with
 * ATTN_ATTENTION_DUMP=DIR, DIR/case<i>.safetensors per case holds the spec
 * (metadata), the module's weights, x, dy, attn's output, dx and parameter
 * gradients (the fused path, as the module picks). Odd T, T not a
 * multiple of the tiles, head dims 16..128, every kv count dividing the
 * heads. */
Test(attention_variants, dump) {
    const char *dir = getenv("ATTN_ATTENTION_DUMP");
    if (!dir || !*dir) return;
    const int n_cases = getenv("ATTN_ATTENTION_CASES") ? atoi(getenv("ATTN_ATTENTION_CASES")) : 24;
    const int heads_of[] = {1, 2, 3, 4, 6, 8}, hd_of[] = {16, 24, 32, 48, 64, 128};
    const int T_of[] = {1, 7, 33, 65, 67, 97};
    attn_rng pick;
    attn_rng_seed(&pick, 2026);
    for (int c = 0; c < n_cases; c++) {
        const int H = heads_of[attn_rng_u32(&pick) % 6], hd = hd_of[attn_rng_u32(&pick) % 6];
        int divisors[8], nd = 0;
        for (int k = 1; k <= H; k++)
            if (H % k == 0) divisors[nd++] = k;
        attn_attention_spec sp = attn_attention_book(H, hd, 0.0);
        sp.kv_heads = divisors[c % nd]; /* every divisor, in turn */
        sp.positions = (attn_positions)(attn_rng_u32(&pick) % 3);
        if (sp.positions == ATTN_POSITIONS_ROPE) {
            sp.rope_fraction = attn_rng_u32(&pick) % 2 ? 1.0 : 0.5;
            sp.rope_theta = attn_rng_u32(&pick) % 2 ? 10000.0 : 500.0;
        }
        const int T = T_of[attn_rng_u32(&pick) % 6], B = 2, d_in = 24;
        sp.window = attn_rng_u32(&pick) % 2 ? 1 + (int)(attn_rng_u32(&pick) % (uint32_t)T) : 0;
        sp.qk_norm = (int)(attn_rng_u32(&pick) % 2);
        sp.softcap = attn_rng_u32(&pick) % 3 == 0 ? 0.5 + (attn_rng_u32(&pick) % 4) : 0.0;
        attn_mha m;
        make(&m, &sp, d_in, 128, 500 + (uint64_t)c);
        const size_t N = (size_t)B * (size_t)T, C = (size_t)m.d_out;
        float *x = malloc(N * d_in * sizeof(float)), *dy = malloc(N * C * sizeof(float));
        attn_rng rng;
        attn_rng_seed(&rng, 900 + (uint64_t)c);
        attn_rng_uniform(&rng, x, N * d_in, -1.0f, 1.0f);
        attn_rng_uniform(&rng, dy, N * C, -1.0f, 1.0f);
        run_out r;
        const attn_mha_path path = m.path;
        run(&m, path, x, dy, B, T, &r);
        attn_param_list L;
        attn_param_list_init(&L);
        attn_error err;
        cr_assert_eq(attn_mha_params(&m, "", &L, &err), ATTN_OK);
        attn_st_entry e[32];
        char names[12][ATTN_PARAM_NAME_MAX + 8];
        int k = 0;
        const float *g = r.grads;
        for (int i = 0; i < L.count; i++) {
            const attn_param *p = &L.items[i];
            snprintf(names[i], sizeof names[i], "grad.%s", p->name);
            e[k++] = (attn_st_entry){p->name,  "F32",   p->ndim,
                                     p->shape, p->data, p->numel * sizeof(float)};
            e[k++] =
                (attn_st_entry){names[i], "F32", p->ndim, p->shape, g, p->numel * sizeof(float)};
            g += p->numel;
        }
        const int64_t sx[3] = {B, T, d_in}, sy[3] = {B, T, (int64_t)C};
        e[k++] = (attn_st_entry){"x", "F32", 3, sx, x, N * d_in * sizeof(float)};
        e[k++] = (attn_st_entry){"dy", "F32", 3, sy, dy, N * C * sizeof(float)};
        e[k++] = (attn_st_entry){"y", "F32", 3, sy, r.y, N * C * sizeof(float)};
        e[k++] = (attn_st_entry){"dx", "F32", 3, sx, r.dx, N * d_in * sizeof(float)};
        char spec[512], file[1024];
        static const char *const POS[] = {"none", "rope", "alibi"};
        snprintf(spec, sizeof spec,
                 "{\"heads\": %d, \"kv_heads\": %d, \"head_dim\": %d, \"positions\": \"%s\", "
                 "\"rope_theta\": %.17g, \"rope_fraction\": %.17g, \"window\": %d, "
                 "\"qk_norm\": %d, \"softcap\": %.17g, \"path\": \"%s\"}",
                 H, sp.kv_heads, hd, POS[sp.positions], sp.rope_theta ? sp.rope_theta : 10000.0,
                 sp.rope_fraction ? sp.rope_fraction : 1.0, sp.window, sp.qk_norm, sp.softcap,
                 path == ATTN_MHA_FUSED ? "fused" : "reference");
        const attn_st_kv meta[1] = {{"spec", spec}};
        snprintf(file, sizeof file, "%s/case%02d.safetensors", dir, c);
        cr_assert_eq(attn_safetensors_write(file, e, k, meta, 1, &err), ATTN_OK, "%s", err.msg);
        attn_param_list_free(&L);
        run_free(&r);
        free(x);
        free(dy);
        attn_mha_free(&m);
    }
}
