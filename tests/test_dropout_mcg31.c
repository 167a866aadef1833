/* The torch-mkl dropout stream drawn in pieces (src/base/mcg31.h) against the
 * serial recurrence PyTorch's MKL build runs (x <- a x mod 2^31 - 1, kept
 * when x / m < 1 - p in double): the power table, every tail length, the
 * threshold's edges, both drawers (generic, AVX-512), the float multipliers,
 * and 1 thread == 2 threads bit for bit through attn_dropout_mask. */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include <criterion/criterion.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "attn/dropout.h"
#include "attn/flash_attention.h"
#include "base/mcg31.h"

/* The serial recurrence with PyTorch's double-precision test, as MKL's
 * VSL_BRNG_MCG31 runs it (a plain % m, no folding). */
static void serial_keep(uint32_t x, double p, uint8_t *keep, size_t n) {
    uint64_t s = x;
    for (size_t i = 0; i < n; i++) {
        keep[i] = ((double)s / 2147483647.0) < 1.0 - p;
        s = (1132489760ULL * s) % 2147483647ULL;
    }
}

Test(dropout_mcg31, power_table_and_pow) {
    uint64_t want = 1;
    for (int j = 0; j <= ATTN_MCG31_BLOCK; j++) {
        cr_assert_eq(attn_mcg31_apow[j], (uint32_t)want, "a^%d", j);
        cr_assert_eq(attn_mcg31_pow((uint64_t)j), (uint32_t)want, "pow(%d)", j);
        want = want * 1132489760ULL % 2147483647ULL;
    }
    /* Fermat: a^(m - 1) = 1; and a jump composes: a^(s + t) = a^s a^t. */
    cr_assert_eq(attn_mcg31_pow(2147483646ULL), 1u);
    cr_assert_eq(attn_mcg31_pow(1000003ULL),
                 attn_mcg31_mul(attn_mcg31_pow(1000000ULL), attn_mcg31_pow(3ULL)));
}

Test(dropout_mcg31, threshold_is_the_double_test) {
    const double ps[] = {0.0, 0.1, 0.2, 0.5, 1e-9, 0.999999, 1.0 / 3.0};
    for (size_t k = 0; k < sizeof ps / sizeof ps[0]; k++) {
        const uint32_t t = attn_mcg31_threshold(ps[k]);
        const double keep = 1.0 - ps[k];
        /* the cut point and its neighbours decide as PyTorch's test does */
        for (int d = -2; d <= 2; d++) {
            const int64_t x = (int64_t)t + d;
            if (x < 1 || x > 2147483646) continue;
            cr_assert_eq(((double)x / 2147483647.0) < keep, x < (int64_t)t, "p %g x %lld", ps[k],
                         (long long)x);
        }
    }
}

/* Both drawers against the serial recurrence, every length to 200 and a few
 * starting states: 1 and m - 1 the ends, and a^-j, whose element j is the
 * state 1 (where an unfinished reduction would leave m + 1 and drop it). */
static void check_rows(const char *simd) {
    setenv("ATTN_SIMD", simd, 1);
    const attn_mcg31_rows *rows = attn_mcg31_pick();
    unsetenv("ATTN_SIMD");
    const uint32_t xs[] = {1u,
                           2147483646u,
                           12345u,
                           987654321u,
                           attn_mcg31_pow(2147483646ULL - 5),
                           attn_mcg31_pow(2147483646ULL - 37),
                           attn_mcg31_pow(2147483646ULL - 63),
                           attn_mcg31_pow(2147483646ULL - 64),
                           attn_mcg31_pow(2147483646ULL - 150)};
    const double p = 0.3;
    const uint32_t thr = attn_mcg31_threshold(p);
    const float scale = attn_dropout_scale(p);
    uint8_t want[200], got[208];
    float mult[208];
    for (size_t k = 0; k < sizeof xs / sizeof xs[0]; k++)
        for (size_t n = 1; n <= 200; n++) {
            serial_keep(xs[k], p, want, n);
            memset(got, 7, sizeof got);
            for (size_t j = 0; j < 208; j++)
                mult[j] = -1.0f;
            rows->keep(xs[k], thr, got, n);
            rows->mult(xs[k], thr, scale, mult, n);
            for (size_t j = 0; j < n; j++) {
                cr_assert_eq(got[j], want[j], "%s x %u n %zu j %zu", simd, xs[k], n, j);
                cr_assert_eq(mult[j], want[j] ? scale : 0.0f, "%s mult n %zu j %zu", simd, n, j);
            }
            cr_assert_eq(got[n], 7, "%s keep wrote past n = %zu", simd, n);
            cr_assert_eq(mult[n], -1.0f, "%s mult wrote past n = %zu", simd, n);
        }
}

Test(dropout_mcg31, generic_rows_match_serial) {
    check_rows("generic");
}

Test(dropout_mcg31, avx512_rows_match_serial) {
    if (!attn_simd_supported(ATTN_SIMD_AVX512)) cr_skip_test("no AVX-512 on this CPU");
    check_rows("avx512");
}

/* A whole tensor through attn_dropout_mask: the serial stream's bits, equal
 * at 1 and 2 threads (the parallel split jumps ahead with a^k). */
Test(dropout_mcg31, mask_matches_serial_at_every_thread_count) {
    const size_t n = 3 * 32768 + 77; /* over the parallel cut, a ragged end */
    const double p = 0.1;
    uint8_t *want = malloc(n), *got = malloc(n);
    for (int threads = 1; threads <= 2; threads++) {
        omp_set_num_threads(threads);
        attn_rng a, b;
        attn_rng_seed(&a, 123);
        attn_rng_seed(&b, 123);
        attn_dropout_mask(&a, ATTN_STREAM_TORCH_MKL, p, got, n);
        serial_keep(attn_mcg31_seed(attn_rng_u32(&b)), p, want, n);
        cr_assert_eq(memcmp(got, want, n), 0, "%d threads", threads);
        /* one draw per tensor, as MKL's bernoulli takes */
        cr_assert_eq(attn_rng_u32(&a), attn_rng_u32(&b));
    }
    free(want);
    free(got);
}
