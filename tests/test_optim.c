/* AdamW, gradient clipping and the learning-rate schedule. Reference values
 * come from PyTorch 1.13.1 (torch.optim.AdamW, clip_grad_norm_) via
 * scripts/gen_optim_reference.py; its output tests/fixtures/optim_reference.h
 * is committed. */
#include <criterion/criterion.h>
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <string.h>

#include "attn/optim.h"
#include "fixtures/optim_reference.h"

static void expect_close(const float *got, const float *want, size_t n, double rtol, double atol,
                         const char *what, int step) {
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)got[i] - (double)want[i]);
        cr_expect(d <= atol + rtol * fabs((double)want[i]), "%s[%zu] after step %d: %.9g vs %.9g",
                  what, i, step + 1, (double)got[i], (double)want[i]);
    }
}

Test(optim, adamw_matches_pytorch_with_clipping_and_decay_groups) {
    float w[12], b[4], gw[12], gb[4];
    memcpy(w, optim_ref_w0, sizeof w);
    memcpy(b, optim_ref_b0, sizeof b);
    attn_param_list params;
    attn_param_list_init(&params);
    const int64_t sw[2] = {3, 4}, sb[1] = {4};
    cr_assert_eq(attn_param_list_add(&params, "", "weight", w, gw, 2, sw, NULL), ATTN_OK);
    cr_assert_eq(attn_param_list_add(&params, "", "bias", b, gb, 1, sb, NULL), ATTN_OK);
    attn_adamw_config cfg = {0.9, 0.99, 1e-8, 0.1};
    attn_adamw opt;
    cr_assert_eq(attn_adamw_init(&opt, &params, &cfg, NULL), ATTN_OK);
    cr_expect_eq(opt.decay[0], 1, "2-D weight decays");
    cr_expect_eq(opt.decay[1], 0, "1-D bias does not decay");
    for (int s = 0; s < OPTIM_REF_STEPS; s++) {
        memcpy(gw, optim_ref_gw + 12 * s, sizeof gw);
        memcpy(gb, optim_ref_gb + 4 * s, sizeof gb);
        double norm = attn_clip_grad_norm(&params, 1.0);
        cr_expect(fabs(norm - optim_ref_norm[s]) <= 1e-6 * optim_ref_norm[s],
                  "norm %d: %.9g vs %.9g", s, norm, optim_ref_norm[s]);
        cr_assert_eq(attn_adamw_step(&opt, &params, optim_ref_lr[s], NULL), ATTN_OK);
        expect_close(w, optim_ref_w + 12 * s, 12, 1e-6, 1e-7, "weight", s);
        expect_close(b, optim_ref_b + 4 * s, 4, 1e-6, 1e-7, "bias", s);
        expect_close(opt.m, optim_ref_mw + 12 * s, 12, 1e-6, 1e-8, "exp_avg",
                     s); /* m cancels: absolute slack */
        expect_close(opt.v, optim_ref_vw + 12 * s, 12, 1e-6, 1e-12, "exp_avg_sq", s);
    }
    cr_expect_eq(opt.step, OPTIM_REF_STEPS);
    attn_adamw_free(&opt);
    attn_param_list_free(&params);
}

Test(optim, clip_leaves_small_gradients_alone) {
    float w[3] = {0}, g[3] = {0.1f, -0.2f, 0.2f};
    attn_param_list params;
    attn_param_list_init(&params);
    const int64_t s[1] = {3};
    attn_param_list_add(&params, "", "w", w, g, 1, s, NULL);
    double n = attn_clip_grad_norm(&params, 1.0);
    cr_expect(fabs(n - 0.3) < 1e-7);
    cr_expect_eq(g[1], -0.2f);
    n = attn_clip_grad_norm(&params, 0.15);
    cr_expect(fabs(sqrt((double)g[0] * g[0] + (double)g[1] * g[1] + (double)g[2] * g[2]) - 0.15) <
              1e-6);
    attn_param_list_free(&params);
}

Test(optim, bad_config_is_rejected) {
    attn_param_list params;
    attn_param_list_init(&params);
    attn_adamw opt;
    attn_error err;
    attn_adamw_config cfg = {0.9, 1.0, 1e-8, 0.1};
    cr_expect_eq(attn_adamw_init(&opt, &params, &cfg, &err), ATTN_ERR_INVALID_ARG);
    cr_expect(strstr(err.msg, "betas") != NULL, "%s", err.msg);
}

/* nanoGPT's get_lr for its shakespeare-char CPU config: lr 1e-3 -> 1e-4,
 * 100 warmup iterations, decay over 2000. */
Test(optim, warmup_cosine_schedule) {
    cr_expect(fabs(attn_lr_cosine(0, 100, 2000, 1e-3, 1e-4) - 1e-3 / 101) < 1e-15);
    cr_expect(fabs(attn_lr_cosine(99, 100, 2000, 1e-3, 1e-4) - 1e-3 * 100 / 101) < 1e-15);
    cr_expect(fabs(attn_lr_cosine(100, 100, 2000, 1e-3, 1e-4) - 1e-3) < 1e-15);
    cr_expect(fabs(attn_lr_cosine(1050, 100, 2000, 1e-3, 1e-4) - 5.5e-4) < 1e-12);
    cr_expect(fabs(attn_lr_cosine(2000, 100, 2000, 1e-3, 1e-4) - 1e-4) < 1e-15);
    cr_expect(fabs(attn_lr_cosine(5000, 100, 2000, 1e-3, 1e-4) - 1e-4) < 1e-15);
    for (int it = 101; it < 2000; it++)
        cr_expect(attn_lr_cosine(it, 100, 2000, 1e-3, 1e-4) <=
                  attn_lr_cosine(it - 1, 100, 2000, 1e-3, 1e-4));
}

/* attn_adamw_step_tensors (attn.torch.AdamW's kernel) is attn_adamw_step's
 * update, bit for bit, on state held by the caller (weight decay on every
 * tensor, as a torch parameter group applies it). */
Test(optim, tensors_entry_equals_the_trainers_step) {
    float w1[12], g[12], w2[12], m2[12] = {0}, v2[12] = {0};
    memcpy(w1, optim_ref_w0, sizeof w1);
    memcpy(w2, optim_ref_w0, sizeof w2);
    attn_param_list params;
    attn_param_list_init(&params);
    const int64_t sw[2] = {3, 4};
    cr_assert_eq(attn_param_list_add(&params, "", "weight", w1, g, 2, sw, NULL), ATTN_OK);
    attn_adamw_config cfg = {0.9, 0.99, 1e-8, 0.1};
    attn_adamw opt;
    cr_assert_eq(attn_adamw_init(&opt, &params, &cfg, NULL), ATTN_OK);
    attn_adamw_tensor t = {w2, g, m2, v2, 12};
    for (int s = 0; s < OPTIM_REF_STEPS; s++) {
        memcpy(g, optim_ref_gw + 12 * s, sizeof g);
        cr_assert_eq(attn_adamw_step(&opt, &params, optim_ref_lr[s], NULL), ATTN_OK);
        cr_assert_eq(attn_adamw_step_tensors(&t, 1, &cfg, optim_ref_lr[s], s + 1, NULL), ATTN_OK);
        cr_expect(memcmp(w1, w2, sizeof w1) == 0, "weights differ after step %d", s + 1);
        cr_expect(memcmp(opt.m, m2, sizeof m2) == 0 && memcmp(opt.v, v2, sizeof v2) == 0,
                  "moments differ after step %d", s + 1);
    }
    attn_error err;
    cr_expect_eq(attn_adamw_step_tensors(&t, 1, &cfg, 1e-3, 0, &err), ATTN_ERR_INVALID_ARG,
                 "step 0 refused");
    attn_adamw_tensor bad = {w2, NULL, m2, v2, 12};
    cr_expect_eq(attn_adamw_step_tensors(&bad, 1, &cfg, 1e-3, 1, &err), ATTN_ERR_INVALID_ARG);
    cr_expect(strstr(err.msg, "NULL") != NULL, "%s", err.msg);
    cr_expect(memcmp(w1, w2, sizeof w1) == 0, "a refused call changes nothing");
    attn_adamw_free(&opt);
    attn_param_list_free(&params);
}

/* The trainer's fused clip (attn_grad_norm, attn_clip_coef, then
 * attn_adamw_step_scaled) equals clip_grad_norm_ then the step, bit for bit,
 * on tensors long enough to be cut into parts and split over threads; the
 * norm is the same at 1 and 2 threads and within 1e-12 of a long double
 * sum; the gradients are left unscaled. */
Test(optim, scaled_step_equals_clip_then_step) {
    enum { NW = 300007, NB = 33 };
    static float w1[NW], w2[NW], g1[NW], g2[NW], b1[NB], b2[NB], gb1[NB], gb2[NB];
    uint32_t s = 12345u;
    long double ref = 0;
    for (int i = 0; i < NW + NB; i++) {
        s = s * 1664525u + 1013904223u;
        const float x = (float)((int)(s >> 8) - (1 << 23)) / (float)(1 << 23);
        if (i < NW)
            w1[i] = w2[i] = x, g1[i] = g2[i] = 0.01f * x * (float)(1 + i % 7);
        else
            b1[i - NW] = b2[i - NW] = x, gb1[i - NW] = gb2[i - NW] = 0.3f * x;
    }
    for (int i = 0; i < NW; i++)
        ref += (long double)g1[i] * g1[i];
    for (int i = 0; i < NB; i++)
        ref += (long double)gb1[i] * gb1[i];
    attn_param_list p1, p2;
    attn_param_list_init(&p1);
    attn_param_list_init(&p2);
    const int64_t sw[2] = {NW, 1}, sb[1] = {NB};
    cr_assert_eq(attn_param_list_add(&p1, "", "w", w1, g1, 2, sw, NULL), ATTN_OK);
    cr_assert_eq(attn_param_list_add(&p1, "", "b", b1, gb1, 1, sb, NULL), ATTN_OK);
    cr_assert_eq(attn_param_list_add(&p2, "", "w", w2, g2, 2, sw, NULL), ATTN_OK);
    cr_assert_eq(attn_param_list_add(&p2, "", "b", b2, gb2, 1, sb, NULL), ATTN_OK);
    attn_adamw_config cfg = {0.9, 0.95, 1e-8, 0.1};
    attn_adamw o1, o2;
    cr_assert_eq(attn_adamw_init(&o1, &p1, &cfg, NULL), ATTN_OK);
    cr_assert_eq(attn_adamw_init(&o2, &p2, &cfg, NULL), ATTN_OK);
    omp_set_num_threads(1);
    const double n1 = attn_grad_norm(&p2);
    omp_set_num_threads(2);
    const double n2 = attn_grad_norm(&p2);
    cr_expect(memcmp(&n1, &n2, sizeof n1) == 0, "norm %.17g at 1 thread, %.17g at 2", n1, n2);
    cr_expect(fabsl((long double)n1 - sqrtl(ref)) <= 1e-12L * sqrtl(ref), "norm %.17g vs %.17Lg",
              n1, sqrtl(ref));
    const double max_norm = 0.5 * n1; /* clips */
    for (int step = 0; step < 3; step++) {
        const double c1 = attn_clip_grad_norm(&p1, max_norm);
        cr_assert_eq(attn_adamw_step(&o1, &p1, 1e-3, NULL), ATTN_OK);
        const double c2 = attn_grad_norm(&p2);
        cr_expect(memcmp(&c1, &c2, sizeof c1) == 0, "norms differ at step %d", step + 1);
        const float coef = attn_clip_coef(c2, max_norm);
        cr_expect(coef < 1.0f);
        cr_assert_eq(attn_adamw_step_scaled(&o2, &p2, 1e-3, coef, NULL), ATTN_OK);
        cr_expect(memcmp(w1, w2, sizeof w1) == 0 && memcmp(b1, b2, sizeof b1) == 0,
                  "weights differ after step %d", step + 1);
        cr_expect(memcmp(o1.m, o2.m, (NW + NB) * sizeof(float)) == 0 &&
                      memcmp(o1.v, o2.v, (NW + NB) * sizeof(float)) == 0,
                  "moments differ after step %d", step + 1);
        cr_expect(g2[5] != g1[5], "the fused step leaves the gradients unscaled");
        memcpy(g1, g2, sizeof g1); /* the next step's gradients, unscaled */
        memcpy(gb1, gb2, sizeof gb1);
    }
    cr_expect_eq(attn_clip_coef(0.4, 0.5), 1.0f, "no clip below max_norm");
    cr_expect_eq(attn_clip_coef(2.0, 0.0), 1.0f, "max_norm 0 only measures");
    attn_adamw_free(&o1);
    attn_adamw_free(&o2);
    attn_param_list_free(&p1);
    attn_param_list_free(&p2);
}
