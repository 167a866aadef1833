/* attn_rng against PyTorch 1.13.1's CPU generator.
 * References: tests/fixtures/rng_ref.h, written by scripts/gen_rng_fixtures.py
 * (torch.rand / uniform_ / randn / nn.Dropout on Debian's non-MKL build), and
 * the dropout tables printed in the seeds (torch-mkl: seed 000 In [31];
 * torch-cpu: seed 003 In [232]). */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "attn/dropout.h"
#include "attn/rng.h"
#include "fixtures/rng_ref.h"

#define N_OF(a) (sizeof(a) / sizeof((a)[0]))

static void expect_exact(const float *got, const float *want, size_t n, const char *what) {
    for (size_t i = 0; i < n; i++)
        cr_assert(got[i] == want[i], "%s[%zu]: got %.9g, PyTorch %.9g", what, i, got[i], want[i]);
}

Test(rng, rand_matches_torch_bit_for_bit) {
    attn_rng rng;
    float got[N_OF(ref_rand_seed123)];
    attn_rng_seed(&rng, 123);
    attn_rng_rand(&rng, got, N_OF(got));
    expect_exact(got, ref_rand_seed123, N_OF(got), "rand(seed 123)");
}

Test(rng, seed_uses_low_32_bits) {
    attn_rng rng;
    float got[N_OF(ref_rand_seed_2p32_plus5)];
    attn_rng_seed(&rng, (UINT64_C(1) << 32) + 5);
    attn_rng_rand(&rng, got, N_OF(got));
    expect_exact(got, ref_rand_seed_2p32_plus5, N_OF(got), "rand(seed 2^32+5)");
}

Test(rng, uniform_across_state_refill) {
    attn_rng rng;
    float got[N_OF(ref_uniform_seed7)];
    attn_rng_seed(&rng, 7);
    attn_rng_uniform(&rng, got, N_OF(got), -0.3f, 0.3f);
    expect_exact(got, ref_uniform_seed7, N_OF(got), "uniform_(-0.3, 0.3)");
}

/* PyTorch's batched normal_ uses SIMD log/sin/cos (Sleef) on AVX2 machines,
 * libm here: equal to a few ulp, not bit for bit. */
static void expect_close(const float *got, const float *want, size_t n, const char *what) {
    for (size_t i = 0; i < n; i++)
        cr_assert(fabsf(got[i] - want[i]) <= 4e-6f * fmaxf(1.0f, fabsf(want[i])),
                  "%s[%zu]: got %.9g, PyTorch %.9g", what, i, got[i], want[i]);
}

Test(rng, normal_batched_and_scalar_paths) {
    attn_rng rng;
    float got[N_OF(ref_normal_seed0_n37)];
    attn_rng_seed(&rng, 0);
    attn_rng_normal(&rng, got, N_OF(ref_normal_seed0_n37), 0.0f, 1.0f);
    expect_close(got, ref_normal_seed0_n37, N_OF(ref_normal_seed0_n37), "randn(37)");
    attn_rng_seed(&rng, 0);
    attn_rng_normal(&rng, got, N_OF(ref_normal_seed0_n5), 0.0f, 1.0f);
    expect_close(got, ref_normal_seed0_n5, N_OF(ref_normal_seed0_n5), "randn(5)");
}

static void dropout_ones(uint64_t seed, attn_dropout_stream stream, double p, float *out,
                         size_t n) {
    attn_rng rng;
    uint8_t keep[512];
    float ones[512];
    cr_assert(n <= 512);
    for (size_t i = 0; i < n; i++)
        ones[i] = 1.0f;
    attn_rng_seed(&rng, seed);
    attn_dropout_mask(&rng, stream, p, keep, n);
    attn_dropout_apply(ones, keep, p, out, n);
}

Test(dropout, torch_cpu_stream_matches_debian_torch) {
    float got[300];
    dropout_ones(7, ATTN_STREAM_TORCH_CPU, 0.1, got, 300);
    expect_exact(got, ref_dropout_cpu_seed7_p01, 300, "Dropout(0.1)(ones(300))");
    dropout_ones(123, ATTN_STREAM_TORCH_CPU, 0.5, got, 36);
    expect_exact(got, ref_dropout_cpu_seed123_p05, 36, "Dropout(0.5)(ones(36))");
}

Test(dropout, torch_cpu_stream_consumes_two_words_per_element) {
    attn_rng rng;
    uint8_t keep[10];
    float got[4];
    attn_rng_seed(&rng, 9);
    attn_dropout_mask(&rng, ATTN_STREAM_TORCH_CPU, 0.3, keep, 10);
    attn_rng_rand(&rng, got, 4);
    expect_exact(got, ref_rand_after_dropout_seed9, 4, "rand after Dropout(0.3)(ones(10))");
}

/* The 6x6 ones tables printed by torch.manual_seed(123); nn.Dropout(0.5). */
static const float seed000_in31[36] = {/* seed 000, In [31] (book, MKL build) */
                                       2, 2, 2, 2, 2, 2, 0, 2, 0, 0, 0, 0, 0, 0, 2, 0, 2, 0,
                                       2, 2, 0, 0, 0, 2, 2, 0, 0, 0, 0, 2, 0, 2, 0, 0, 0, 0};
static const float seed003_in232[36] = {/* seed 003, In [232] (non-MKL build) */
                                        2, 2, 0, 2, 2, 0, 0, 0, 0, 2, 0, 2, 2, 2, 2, 2, 0, 2,
                                        0, 2, 2, 0, 0, 2, 0, 2, 0, 2, 0, 2, 0, 2, 2, 2, 2, 0};

Test(dropout, seed_tables_both_streams) {
    float got[36];
    dropout_ones(123, ATTN_STREAM_TORCH_MKL, 0.5, got, 36);
    expect_exact(got, seed000_in31, 36, "torch-mkl Dropout(0.5)(ones(6,6))");
    dropout_ones(123, ATTN_STREAM_TORCH_CPU, 0.5, got, 36);
    expect_exact(got, seed003_in232, 36, "torch-cpu Dropout(0.5)(ones(6,6))");
}

Test(dropout, mkl_stream_takes_one_draw_per_tensor) {
    attn_rng a, b;
    uint8_t keep[100];
    attn_rng_seed(&a, 5);
    attn_rng_seed(&b, 5);
    attn_dropout_mask(&a, ATTN_STREAM_TORCH_MKL, 0.2, keep, 100);
    (void)attn_rng_u32(&b);
    cr_assert(attn_rng_u32(&a) == attn_rng_u32(&b));
}

Test(dropout, backward_routes_through_kept_elements_only) {
    const uint8_t keep[4] = {1, 0, 1, 0};
    const float dy[4] = {1, 2, 3, 4};
    float dx[4] = {10, 10, 10, 10};
    attn_dropout_backward(dy, keep, 0.25, dx, 4);
    const float s = 1.0f / 0.75f;
    cr_assert(dx[0] == 10 + 1 * s && dx[1] == 10 && dx[2] == 10 + 3 * s && dx[3] == 10);
}

Test(dropout, stream_names_parse) {
    attn_dropout_stream s;
    cr_assert(attn_dropout_stream_parse("torch-cpu", &s) == 0 && s == ATTN_STREAM_TORCH_CPU);
    cr_assert(attn_dropout_stream_parse("torch-mkl", &s) == 0 && s == ATTN_STREAM_TORCH_MKL);
    cr_assert(attn_dropout_stream_parse("mkl", &s) == -1);
}

/* The bulk draws (vectorised twist and tempering, an integer threshold for
 * the dropout test) against one-at-a-time draws and the double compare they
 * replace, from unaligned positions in the state and across refills. */
Test(rng, bulk_draws_equal_one_at_a_time) {
    enum { N = 3000 };
    static uint32_t a[N], b[N];
    static uint8_t keep[N], want[N], bits[(N + 7) / 8];
    const double keeps[] = {0.9, 0.5, 1.0 - 1e-9, 0.0, 1.0, 0.1};
    for (int off = 0; off < 5; off++)
        for (size_t ki = 0; ki < sizeof keeps / sizeof keeps[0]; ki++) {
            attn_rng r1, r2;
            attn_rng_seed(&r1, 77 + off);
            for (int i = 0; i < 600 * off + off; i++) /* start anywhere in the state */
                (void)attn_rng_u32(&r1);
            r2 = r1;
            attn_rng_fill_u32(&r1, a, N);
            for (int i = 0; i < N; i++)
                b[i] = attn_rng_u32(&r2);
            cr_assert(memcmp(a, b, sizeof a) == 0, "fill_u32 differs (offset %d)", off);
            const size_t n = N - 7 * (size_t)off; /* also lengths not a multiple of 8 */
            attn_rng r3 = r1, r4 = r1;
            attn_rng_keep_mask(&r1, keeps[ki], keep, n, 0);
            attn_rng_keep_mask(&r3, keeps[ki], bits, n, 1);
            for (size_t i = 0; i < n; i++) {
                const double u =
                    (double)(attn_rng_u64(&r4) & ((UINT64_C(1) << 53) - 1)) * 0x1.0p-53;
                want[i] = u < keeps[ki];
            }
            cr_assert(memcmp(&r1, &r4, sizeof r1) == 0 && memcmp(&r3, &r4, sizeof r3) == 0,
                      "generator left elsewhere");
            for (size_t i = 0; i < n; i++) {
                cr_assert_eq(keep[i], want[i], "keep %g element %zu", keeps[ki], i);
                cr_assert_eq((bits[i >> 3] >> (i & 7)) & 1, want[i], "bit %zu", i);
            }
            if (n % 8) /* the last byte's bits past n are zero */
                cr_assert_eq(bits[n >> 3] >> (n % 8), 0, "bits past %zu", n);
        }
}
