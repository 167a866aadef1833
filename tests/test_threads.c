/* The element-wise layers split over OpenMP threads (src/base/parallel.h) above
 * ATTN_PAR_MIN elements. Two properties, on sizes well above that threshold
 * and not multiples of the chunk: (1) the result is bit-for-bit the same for
 * 1, 2 and 3 threads (training runs must not depend on --threads); (2) the
 * split call equals the same layer applied piece by piece below the
 * threshold (serial), so no chunk or row is skipped, doubled or misplaced.
 * References are the library's own serial path, whose values the other
 * test files check against double-precision references and PyTorch. */
#include <criterion/criterion.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "attn/cross_entropy.h"
#include "attn/gelu.h"
#include "attn/layernorm.h"
#include "attn/optim.h"
#include "attn/residual.h"
#include "attn/rng.h"
#include "base/parallel.h"
#include "kernels/gemv.h"

#define ROWS 701
#define COLS 131 /* ROWS * COLS = 91,831: about 2.8 x ATTN_PAR_MIN */
#define NUMEL ((size_t)ROWS * COLS)

static float *random_floats(size_t n, uint64_t seed, float scale) {
    attn_rng rng;
    attn_rng_seed(&rng, seed);
    float *v = malloc(n * sizeof(float));
    cr_assert_not_null(v);
    attn_rng_uniform(&rng, v, n, -scale, scale);
    return v;
}

static float *copy_of(const float *v, size_t n) {
    float *c = malloc(n * sizeof(float));
    cr_assert_not_null(c);
    memcpy(c, v, n * sizeof(float));
    return c;
}

static void expect_same_bits(const float *a, const float *b, size_t n, const char *what,
                             int threads) {
    for (size_t i = 0; i < n; i++)
        cr_assert(memcmp(&a[i], &b[i], sizeof(float)) == 0,
                  "%s with %d threads differs at [%zu]: %.9g vs %.9g", what, threads, i, a[i],
                  b[i]);
}

Test(threads, threshold_is_below_the_test_sizes) {
    cr_assert_gt(NUMEL, 2 * (size_t)ATTN_PAR_MIN);
    cr_assert_neq(NUMEL % ATTN_PAR_CHUNK, 0);
}

Test(threads, gelu_split_matches_serial_pieces_for_any_thread_count) {
    const float *x = random_floats(NUMEL, 1, 4.0f);
    const float *dy = random_floats(NUMEL, 2, 1.0f);
    /* Serial reference: pieces of COLS elements (below the threshold). */
    float *y_ref = calloc(NUMEL, sizeof(float)), *dx_ref = calloc(NUMEL, sizeof(float));
    float *d_ref = copy_of(dy, NUMEL);
    for (size_t r = 0; r < ROWS; r++) {
        attn_gelu_forward(x + r * COLS, y_ref + r * COLS, COLS);
        attn_gelu_backward(x + r * COLS, dy + r * COLS, dx_ref + r * COLS, COLS);
        attn_gelu_backward_inplace(x + r * COLS, d_ref + r * COLS, COLS);
    }
    for (int threads = 1; threads <= 3; threads++) {
        omp_set_num_threads(threads);
        float *y = calloc(NUMEL, sizeof(float)), *dx = calloc(NUMEL, sizeof(float));
        float *d = copy_of(dy, NUMEL);
        attn_gelu_forward(x, y, NUMEL);
        attn_gelu_backward(x, dy, dx, NUMEL);
        attn_gelu_backward_inplace(x, d, NUMEL);
        expect_same_bits(y, y_ref, NUMEL, "gelu forward", threads);
        expect_same_bits(dx, dx_ref, NUMEL, "gelu backward", threads);
        expect_same_bits(d, d_ref, NUMEL, "gelu backward in place", threads);
        /* The bf16 engine's form: the forward's values rounded in its pass. */
        uint16_t *y16 = malloc(NUMEL * sizeof(uint16_t)), *y16_ref = malloc(NUMEL * 2);
        attn_f32_to_bf16(y_ref, y16_ref, NUMEL);
        attn_gelu_forward_bf16(x, y16, NUMEL);
        cr_assert(memcmp(y16, y16_ref, NUMEL * sizeof(uint16_t)) == 0,
                  "gelu forward to bf16 with %d threads differs from rounding the forward",
                  threads);
        free(y16);
        free(y16_ref);
        free(y);
        free(dx);
        free(d);
    }
}

Test(threads, layernorm_split_matches_serial_rows_for_any_thread_count) {
    attn_layernorm ln, ln_ref;
    attn_error err;
    cr_assert_eq(attn_layernorm_init(&ln, COLS, &err), ATTN_OK);
    cr_assert_eq(attn_layernorm_init(&ln_ref, COLS, &err), ATTN_OK);
    float *scale = random_floats(COLS, 3, 1.0f), *shift = random_floats(COLS, 4, 1.0f);
    memcpy(ln.scale, scale, COLS * sizeof(float));
    memcpy(ln.shift, shift, COLS * sizeof(float));
    memcpy(ln_ref.scale, scale, COLS * sizeof(float));
    memcpy(ln_ref.shift, shift, COLS * sizeof(float));
    const float *x = random_floats(NUMEL, 5, 3.0f);
    const float *dy = random_floats(NUMEL, 6, 1.0f);
    float *y_ref = malloc(NUMEL * sizeof(float)), *mean_ref = malloc(ROWS * sizeof(float));
    float *rstd_ref = malloc(ROWS * sizeof(float)), *dx_ref = calloc(NUMEL, sizeof(float));
    for (size_t r = 0; r < ROWS; r++) {
        attn_layernorm_forward(&ln_ref, x + r * COLS, y_ref + r * COLS, mean_ref + r, rstd_ref + r,
                               1);
        attn_layernorm_backward(&ln_ref, x + r * COLS, mean_ref + r, rstd_ref + r, dy + r * COLS,
                                dx_ref + r * COLS, 1);
    }
    for (int threads = 1; threads <= 3; threads++) {
        omp_set_num_threads(threads);
        float *y = malloc(NUMEL * sizeof(float)), *mean = malloc(ROWS * sizeof(float));
        float *rstd = malloc(ROWS * sizeof(float)), *dx = calloc(NUMEL, sizeof(float));
        memset(ln.grad_scale, 0, COLS * sizeof(float));
        memset(ln.grad_shift, 0, COLS * sizeof(float));
        attn_layernorm_forward(&ln, x, y, mean, rstd, ROWS);
        attn_layernorm_backward(&ln, x, mean, rstd, dy, dx, ROWS);
        expect_same_bits(y, y_ref, NUMEL, "layernorm forward", threads);
        expect_same_bits(mean, mean_ref, ROWS, "layernorm mean", threads);
        expect_same_bits(rstd, rstd_ref, ROWS, "layernorm rstd", threads);
        expect_same_bits(dx, dx_ref, NUMEL, "layernorm dx", threads);
        expect_same_bits(ln.grad_scale, ln_ref.grad_scale, COLS, "layernorm grad scale", threads);
        expect_same_bits(ln.grad_shift, ln_ref.grad_shift, COLS, "layernorm grad shift", threads);
        free(y);
        free(mean);
        free(rstd);
        free(dx);
    }
    attn_layernorm_free(&ln);
    attn_layernorm_free(&ln_ref);
}

Test(threads, cross_entropy_is_the_same_for_any_thread_count) {
    const float *logits = random_floats(NUMEL, 7, 5.0f);
    int32_t *targets = malloc(ROWS * sizeof(int32_t));
    for (size_t r = 0; r < ROWS; r++)
        targets[r] = (int32_t)((r * 37) % COLS);
    /* Double-precision reference of the mean loss. */
    double want = 0.0;
    for (size_t r = 0; r < ROWS; r++) {
        const float *row = logits + r * COLS;
        double mx = row[0], s = 0.0;
        for (size_t v = 1; v < COLS; v++)
            mx = row[v] > mx ? row[v] : mx;
        for (size_t v = 0; v < COLS; v++)
            s += exp((double)row[v] - mx);
        want += mx + log(s) - (double)row[targets[r]];
    }
    want /= ROWS;
    float *lse_ref = NULL, *d_ref = NULL;
    float loss_ref = 0.0f;
    for (int threads = 1; threads <= 3; threads++) {
        omp_set_num_threads(threads);
        float *lse = malloc(ROWS * sizeof(float)), *d = calloc(NUMEL, sizeof(float));
        const float loss = attn_cross_entropy_forward(logits, targets, lse, ROWS, COLS);
        attn_cross_entropy_backward(logits, targets, lse, 1.0f, d, ROWS, COLS);
        cr_assert(fabs(loss - want) <= 1e-6 * fabs(want), "loss %.9g, reference %.9g", loss, want);
        if (threads == 1) {
            lse_ref = lse;
            d_ref = d;
            loss_ref = loss;
            continue;
        }
        cr_assert(memcmp(&loss, &loss_ref, sizeof loss) == 0, "loss with %d threads: %.9g vs %.9g",
                  threads, loss, loss_ref);
        expect_same_bits(lse, lse_ref, ROWS, "log-sum-exp", threads);
        expect_same_bits(d, d_ref, NUMEL, "d logits", threads);
        free(lse);
        free(d);
    }
    free(lse_ref);
    free(d_ref);
}

Test(threads, residual_add_split_matches_serial_pieces) {
    const float *f = random_floats(NUMEL, 8, 1.0f), *shortcut = random_floats(NUMEL, 9, 1.0f);
    float *out_ref = malloc(NUMEL * sizeof(float)), *df_ref = calloc(NUMEL, sizeof(float));
    for (size_t r = 0; r < ROWS; r++) {
        attn_residual_dropout_forward(f + r * COLS, shortcut + r * COLS, out_ref + r * COLS, NULL,
                                      0.0, NULL, COLS);
        attn_residual_dropout_backward(f + r * COLS, NULL, 0.0, 0, df_ref + r * COLS, COLS);
    }
    for (int threads = 1; threads <= 3; threads++) {
        omp_set_num_threads(threads);
        float *out = malloc(NUMEL * sizeof(float)), *df = calloc(NUMEL, sizeof(float));
        attn_residual_dropout_forward(f, shortcut, out, NULL, 0.0, NULL, NUMEL);
        attn_residual_dropout_backward(f, NULL, 0.0, 0, df, NUMEL);
        expect_same_bits(out, out_ref, NUMEL, "residual add", threads);
        expect_same_bits(df, df_ref, NUMEL, "residual backward", threads);
        free(out);
        free(df);
    }
}

/* Three tensors, one large (split) and two small, through clipping and two
 * AdamW steps: parameters, moments and the norm agree bit for bit. */
Test(threads, clip_and_adamw_are_the_same_for_any_thread_count) {
    const size_t sizes[3] = {NUMEL, COLS, 1000};
    float *w_ref[3] = {0}, *g0[3];
    double norm_ref = 0.0;
    for (int i = 0; i < 3; i++)
        g0[i] = random_floats(sizes[i], 20 + (uint64_t)i, 0.05f);
    for (int threads = 1; threads <= 3; threads++) {
        omp_set_num_threads(threads);
        attn_param_list list;
        attn_param_list_init(&list);
        attn_error err;
        float *w[3], *g[3];
        for (int i = 0; i < 3; i++) {
            w[i] = random_floats(sizes[i], 10 + (uint64_t)i, 1.0f);
            g[i] = copy_of(g0[i], sizes[i]);
            const int64_t shape2[2] = {i == 0 ? ROWS : 1, i == 0 ? COLS : (int64_t)sizes[i]};
            const int64_t shape1[1] = {(int64_t)sizes[i]};
            const char *names[3] = {"big", "bias", "small"};
            cr_assert_eq(attn_param_list_add(&list, "p.", names[i], w[i], g[i], i == 1 ? 1 : 2,
                                             i == 1 ? shape1 : shape2, &err),
                         ATTN_OK);
        }
        attn_adamw opt;
        const attn_adamw_config cfg = {0.9, 0.99, 1e-8, 0.1};
        cr_assert_eq(attn_adamw_init(&opt, &list, &cfg, &err), ATTN_OK);
        const double norm = attn_clip_grad_norm(&list, 1.0);
        cr_assert_gt(norm, 1.0, "the test wants clipping to happen (norm %g)", norm);
        for (int step = 0; step < 2; step++)
            cr_assert_eq(attn_adamw_step(&opt, &list, 1e-3, &err), ATTN_OK);
        if (threads == 1) {
            norm_ref = norm;
            for (int i = 0; i < 3; i++)
                w_ref[i] = copy_of(w[i], sizes[i]);
        } else {
            cr_assert(memcmp(&norm, &norm_ref, sizeof norm) == 0, "norm %.17g vs %.17g", norm,
                      norm_ref);
            for (int i = 0; i < 3; i++)
                expect_same_bits(w[i], w_ref[i], sizes[i], "AdamW parameters", threads);
        }
        attn_adamw_free(&opt);
        attn_param_list_free(&list);
        for (int i = 0; i < 3; i++) {
            free(w[i]);
            free(g[i]);
        }
    }
    for (int i = 0; i < 3; i++) {
        free(w_ref[i]);
        free(g0[i]);
    }
}

/* base/parallel.h's loops around the products (zeroing, bias rows, bias
 * gradients, gradient adds) equal their serial loops for 1-3 threads,
 * including a strided column sum with a partial last block. */
Test(threads, parallel_helpers_match_serial_loops_for_any_thread_count) {
    const size_t ld = COLS + 5;
    const float *x = random_floats(ROWS * ld, 7, 2.0f), *row = random_floats(COLS, 8, 1.0f);
    const float *sum0 = random_floats(COLS, 9, 1.0f);
    float *sum_ref = copy_of(sum0, COLS), *fill_ref = malloc(NUMEL * sizeof(float));
    float *add_ref = copy_of(x, NUMEL);
    for (size_t n = 0; n < ROWS; n++)
        for (size_t c = 0; c < COLS; c++) {
            sum_ref[c] += x[n * ld + c];
            fill_ref[n * COLS + c] = row[c];
            add_ref[n * COLS + c] += x[NUMEL - 1 - (n * COLS + c)];
        }
    const float *rev = random_floats(NUMEL, 10, 1.0f);
    float *rev_src = malloc(NUMEL * sizeof(float));
    for (size_t i = 0; i < NUMEL; i++)
        rev_src[i] = x[NUMEL - 1 - i];
    for (int threads = 1; threads <= 3; threads++) {
        omp_set_num_threads(threads);
        float *sum = copy_of(sum0, COLS), *y = copy_of(rev, NUMEL), *a = copy_of(x, NUMEL);
        attn_par_col_sums(x, ROWS, COLS, ld, sum);
        expect_same_bits(sum, sum_ref, COLS, "column sums", threads);
        attn_par_fill_rows(y, ROWS, COLS, row);
        expect_same_bits(y, fill_ref, NUMEL, "bias rows", threads);
        attn_par_fill_rows(y, ROWS, COLS, NULL);
        for (size_t i = 0; i < NUMEL; i++)
            cr_assert(y[i] == 0.0f && !signbit(y[i]), "zero rows: [%zu] = %g", i, y[i]);
        memcpy(y, rev, NUMEL * sizeof(float));
        attn_par_zero(y, NUMEL - 3);
        for (size_t i = 0; i < NUMEL; i++)
            cr_assert(i < NUMEL - 3 ? y[i] == 0.0f : y[i] == rev[i], "zeroing: [%zu]", i);
        attn_par_add(a, rev_src, NUMEL);
        expect_same_bits(a, add_ref, NUMEL, "adds", threads);
        free(sum);
        free(y);
        free(a);
    }
    free(rev_src);
}
