/* The chapter's operations: softmax (stable vs naive, masked rows, large
 * logits), masks, matmul forms and the 4-D batched matmul. */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "attn/attn.h"

static const float INPUTS[6 * 3] = {0.43f, 0.15f, 0.89f, 0.55f, 0.87f, 0.66f, 0.57f, 0.85f, 0.64f,
                                    0.22f, 0.58f, 0.33f, 0.77f, 0.25f, 0.10f, 0.05f, 0.80f, 0.55f};

static void expect_table(const float *got, const float *want, size_t n, const char *what) {
    for (size_t i = 0; i < n; i++)
        cr_expect(fabsf(got[i] - want[i]) <= 5.001e-5f, "%s[%zu]: got %.6f, want %.4f", what, i,
                  (double)got[i], (double)want[i]);
}

Test(ops, dot_and_scores_seed000) {
    /* seed 000 In [2]: scores of x^2 against every input, and In [3] sum-normalised */
    const float want[6] = {0.9544f, 1.4950f, 1.4754f, 0.8434f, 0.7070f, 1.0865f};
    float s[6], w[6];
    for (int i = 0; i < 6; i++)
        s[i] = attn_dot(INPUTS + 3 * i, INPUTS + 3, 3);
    expect_table(s, want, 6, "scores");
    attn_sum_normalize(s, w, 1, 6);
    const float norm[6] = {0.1455f, 0.2278f, 0.2249f, 0.1285f, 0.1077f, 0.1656f};
    expect_table(w, norm, 6, "sum-normalised");
    /* In [4]/[5]: naive and stable softmax agree here */
    const float sm[6] = {0.1385f, 0.2379f, 0.2333f, 0.1240f, 0.1082f, 0.1581f};
    float a[6], b[6];
    attn_softmax_naive(s, a, 1, 6);
    attn_softmax_forward(s, b, 1, 6);
    expect_table(a, sm, 6, "naive");
    expect_table(b, sm, 6, "stable");
}

Test(ops, matmul_forms_agree_seed000) {
    /* seed 000 In [7]/[8]: loop scores == inputs @ inputs.T; In [10] context vectors */
    float s1[36], s2[36], w[36], ctx[18];
    for (int i = 0; i < 6; i++)
        for (int j = 0; j < 6; j++)
            s1[i * 6 + j] = attn_dot(INPUTS + 3 * i, INPUTS + 3 * j, 3);
    attn_matmul_bt(INPUTS, INPUTS, s2, 6, 3, 6);
    cr_expect(memcmp(s1, s2, sizeof s1) == 0);
    const float row0[6] = {0.9995f, 0.9544f, 0.9422f, 0.4753f, 0.4576f, 0.6310f};
    expect_table(s2, row0, 6, "scores row 0");
    attn_softmax_forward(s2, w, 6, 6);
    const float wrow4[6] = {0.1526f, 0.1958f, 0.1975f, 0.1367f, 0.1879f, 0.1295f};
    expect_table(w + 24, wrow4, 6, "weights row 4");
    attn_matmul(w, INPUTS, ctx, 6, 6, 3);
    const float c[18] = {0.4421f, 0.5931f, 0.5790f, 0.4419f, 0.6515f, 0.5683f,
                         0.4431f, 0.6496f, 0.5671f, 0.4304f, 0.6298f, 0.5510f,
                         0.4671f, 0.5910f, 0.5266f, 0.4177f, 0.6503f, 0.5645f};
    expect_table(ctx, c, 18, "context");
}

Test(ops, bmm_4d_seed001) {
    /* seed 001: a (1, 2, 3, 4); print(a @ a.transpose(2, 3)) */
    const float a[24] = {0.2745f, 0.6584f, 0.2775f, 0.8573f, 0.8993f, 0.0390f, 0.9268f, 0.7388f,
                         0.7179f, 0.7058f, 0.9156f, 0.4340f, 0.0772f, 0.3565f, 0.1479f, 0.5331f,
                         0.4066f, 0.2318f, 0.4545f, 0.9737f, 0.4606f, 0.5159f, 0.4220f, 0.5786f};
    const float want[18] = {1.3208f, 1.1631f, 1.2879f, 1.1631f, 2.2150f, 1.8424f,
                            1.2879f, 1.8424f, 2.0402f, 0.4391f, 0.7003f, 0.5903f,
                            0.7003f, 1.3737f, 1.0620f, 0.5903f, 1.0620f, 0.9912f};
    float c[18];
    attn_bmm_bt(a, a, c, 2, 3, 4, 3);
    expect_table(c, want, 18, "a @ a^T");
}

Test(ops, masks) {
    float tril[16], triu[16], x[16], y[16];
    attn_tril_ones(tril, 4);
    attn_triu_ones(triu, 4, 1);
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++) {
            cr_expect_eq(tril[i * 4 + j], j <= i ? 1.0f : 0.0f);
            cr_expect_eq(triu[i * 4 + j], j >= i + 1 ? 1.0f : 0.0f);
            x[i * 4 + j] = (float)(1 + i * 4 + j);
        }
    attn_triu_ones(triu, 4, 0); /* diagonal 0 includes the diagonal */
    cr_expect_eq(triu[0], 1.0f);
    cr_expect_eq(triu[4], 0.0f);
    attn_causal_fill(x, y, 1, 4, -INFINITY);
    for (int i = 0; i < 16; i++)
        cr_expect(((i % 4) > (i / 4)) ? isinf(y[i]) && y[i] < 0 : y[i] == x[i]);
    attn_causal_multiply(x, y, 1, 4);
    for (int i = 0; i < 16; i++)
        cr_expect_eq(y[i], (i % 4) > (i / 4) ? 0.0f : x[i]);
    /* in place, two stacked matrices */
    float z[32];
    memcpy(z, x, sizeof x);
    memcpy(z + 16, x, sizeof x);
    attn_causal_fill(z, z, 2, 4, 0.0f);
    cr_expect_eq(z[16 + 1], 0.0f);
    cr_expect_eq(z[16 + 4], x[4]);
}

Test(ops, causal_softmax_equals_renormalised_tril) {
    /* The chapter's two routes to causal weights agree: -inf then softmax, and
     * softmax, tril multiply, renormalise. */
    float s[36], m[36], a[36], b[36];
    attn_matmul_bt(INPUTS, INPUTS, s, 6, 3, 6);
    attn_causal_fill(s, m, 1, 6, -INFINITY);
    attn_softmax_forward(m, a, 6, 6);
    attn_softmax_forward(s, b, 6, 6);
    attn_causal_multiply(b, b, 1, 6);
    attn_sum_normalize(b, b, 6, 6);
    for (int i = 0; i < 36; i++)
        cr_expect(fabsf(a[i] - b[i]) < 1e-6f, "[%d] %g vs %g", i, (double)a[i], (double)b[i]);
    cr_expect_eq(a[0], 1.0f);
}

Test(ops, softmax_large_logits_and_masked_rows) {
    const float x[8] = {1000.0f,   1001.0f,   999.0f,    -INFINITY,
                        -INFINITY, -INFINITY, -INFINITY, -INFINITY};
    float y[8], naive[8];
    attn_softmax_forward(x, y, 2, 4);
    /* stable: same as softmax of (0, 1, -1, -inf) */
    const double e0 = 1.0, e1 = exp(1.0), e2 = exp(-1.0), s = e0 + e1 + e2;
    cr_expect(fabs(y[0] - e0 / s) < 1e-6 && fabs(y[1] - e1 / s) < 1e-6 &&
              fabs(y[2] - e2 / s) < 1e-6);
    cr_expect_eq(y[3], 0.0f);
    for (int i = 4; i < 8; i++) /* fully masked row: zeros, not NaN */
        cr_expect_eq(y[i], 0.0f, "masked row [%d] = %g", i, (double)y[i]);
    attn_softmax_naive(x, naive, 1, 4); /* exp(1000) overflows: the chapter's warning */
    cr_expect(isnan(naive[0]) || isinf(naive[0]) || naive[0] == 0.0f);
    /* moderate logits: naive and stable agree */
    const float z[5] = {-2.0f, 0.5f, 3.0f, 0.0f, 1.25f};
    float p[5], q[5];
    attn_softmax_forward(z, p, 1, 5);
    attn_softmax_naive(z, q, 1, 5);
    for (int i = 0; i < 5; i++)
        cr_expect(fabsf(p[i] - q[i]) < 1e-6f);
}

Test(ops, softmax_backward_matches_finite_difference) {
    const float x[5] = {0.3f, -1.2f, 2.0f, 0.7f, -INFINITY};
    const float dy[5] = {0.5f, -0.25f, 1.0f, 0.1f, 3.0f};
    float y[5], dx[5] = {0};
    attn_softmax_forward(x, y, 1, 5);
    attn_softmax_backward(y, dy, dx, 1, 5);
    for (int i = 0; i < 4; i++) {
        /* d/dx_i sum_j dy_j softmax(x)_j by central differences in double */
        double f[2];
        for (int sgn = 0; sgn < 2; sgn++) {
            double xs[4], mx = -1e300, sum = 0, acc = 0;
            for (int j = 0; j < 4; j++) {
                xs[j] = x[j] + (j == i ? (sgn ? -1e-6 : 1e-6) : 0.0);
                if (xs[j] > mx) mx = xs[j];
            }
            for (int j = 0; j < 4; j++)
                sum += exp(xs[j] - mx);
            for (int j = 0; j < 4; j++)
                acc += dy[j] * exp(xs[j] - mx) / sum;
            f[sgn] = acc;
        }
        const double fd = (f[0] - f[1]) / 2e-6;
        cr_expect(fabs(dx[i] - fd) < 1e-5, "dx[%d] %g vs fd %g", i, (double)dx[i], fd);
    }
    cr_expect_eq(dx[4], 0.0f); /* masked entry gets no gradient */
    /* accumulates */
    attn_softmax_backward(y, dy, dx, 1, 5);
    float once[5] = {0};
    attn_softmax_backward(y, dy, once, 1, 5);
    for (int i = 0; i < 5; i++)
        cr_expect(fabsf(dx[i] - 2 * once[i]) < 1e-7f);
}

Test(ops, linear_matches_loops_and_torch_init_bound) {
    attn_rng rng;
    attn_rng_seed(&rng, 42);
    attn_linear l;
    cr_assert_eq(attn_linear_init(&l, 3, 4, 1, &rng, NULL), ATTN_OK);
    const float bound = 1.0f / sqrtf(3.0f);
    for (int i = 0; i < 12; i++)
        cr_expect(fabsf(l.weight[i]) <= bound + 1e-7f);
    for (int i = 0; i < 4; i++)
        cr_expect(fabsf(l.bias[i]) <= bound + 1e-7f);
    float y[8];
    attn_linear_forward(&l, INPUTS, y, 2);
    for (int n = 0; n < 2; n++)
        for (int o = 0; o < 4; o++) {
            float s = l.bias[o];
            for (int i = 0; i < 3; i++)
                s += INPUTS[n * 3 + i] * l.weight[o * 3 + i];
            cr_expect(fabsf(y[n * 4 + o] - s) < 1e-6f);
        }
    attn_error err;
    attn_linear bad;
    cr_expect_eq(attn_linear_init(&bad, 0, 4, 0, NULL, &err), ATTN_ERR_INVALID_ARG);
    attn_linear_free(&l);
}
