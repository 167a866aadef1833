/* The flat calls for bindings (attn/handles.h) and the caller-given dropout
 * masks they rest on (attn_dropout_given, attn/dropout.h): masks given equal
 * the masks drawn, for every module with dropout and in the fused kernel;
 * the fused attention on PyTorch's (B, H, T, D) layout against a
 * double-precision reference; training stopped by the callback and resumed
 * equals an uninterrupted run; the GPT handle's forward, weights, generator
 * and page. */
#define _POSIX_C_SOURCE 200809L /* mkdtemp */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn/attn.h"
#include "attn/handles.h"
#include "support/trainer_check.h"

/* ---------------------------------------------------------- given masks */

typedef struct kind_case {
    const char *kind;
    int d_in, d_out, heads, ctx;
    double p;
    int qkv_bias;
} kind_case;

static const kind_case DROP_KINDS[] = {
    {"causal-attention", 5, 4, 1, 9, 0.3, 1},
    {"mha-wrapper", 5, 3, 2, 9, 0.25, 0},
    {"mha", 6, 6, 3, 9, 0.4, 1},
    {"attention-head", 6, 4, 1, 9, 0.2, 0},
    {"seed004-mha", 6, 6, 2, 9, 0.35, 1},
};

/* The masks a training forward draws, drawn the same way from rng: one
 * tensor per dropout, in the order attn_h_module_mask_numel documents. */
static void draw_masks(const kind_case *k, int B, int T, attn_rng *rng, uint8_t *keep, size_t n) {
    const size_t tt = (size_t)B * T * T;
    size_t off = 0;
    const int per_head = strcmp(k->kind, "mha-wrapper") == 0 || strcmp(k->kind, "seed004-mha") == 0;
    const int tensors = per_head ? k->heads : 1;
    const size_t first = strcmp(k->kind, "mha") == 0 ? (size_t)k->heads * tt : tt;
    for (int h = 0; h < tensors; h++, off += first)
        attn_dropout_mask(rng, ATTN_STREAM_TORCH_CPU, k->p, keep + off, first);
    if (strcmp(k->kind, "seed004-mha") == 0) {
        attn_dropout_mask(rng, ATTN_STREAM_TORCH_CPU, k->p, keep + off, (size_t)B * T * k->d_in);
        off += (size_t)B * T * k->d_in;
    }
    cr_assert_eq(off, n, "%s: %zu mask elements drawn, the library says %zu", k->kind, off, n);
}

static attn_module *make(const kind_case *k) {
    attn_rng *rng = attn_h_rng_create(123);
    attn_module *m = NULL;
    attn_error err;
    cr_assert_eq(attn_h_module_create(k->kind, k->d_in, k->d_out, k->heads, k->ctx, k->p,
                                      k->qkv_bias, rng, &m, &err),
                 ATTN_OK, "%s: %s", k->kind, err.msg);
    attn_h_rng_free(rng);
    return m;
}

Test(given, masks_equal_drawn_in_every_module) {
    const int B = 2, T = 7;
    for (size_t c = 0; c < sizeof DROP_KINDS / sizeof DROP_KINDS[0]; c++) {
        const kind_case *k = &DROP_KINDS[c];
        attn_module *a = make(k), *b = make(k);
        const int od = attn_module_out_dim(a);
        const size_t nx = (size_t)B * T * k->d_in, ny = (size_t)B * T * od;
        const size_t n = attn_h_module_mask_numel(a, B, T);
        cr_assert_gt(n, 0);
        float *x = malloc(nx * sizeof *x), *ya = malloc(ny * sizeof *ya),
              *yb = malloc(ny * sizeof *yb), *dy = malloc(ny * sizeof *dy),
              *dxa = malloc(nx * sizeof *dxa), *dxb = malloc(nx * sizeof *dxb);
        uint8_t *keep = malloc(n);
        attn_rng r;
        attn_rng_seed(&r, 9);
        attn_rng_rand(&r, x, nx);
        attn_rng_rand(&r, dy, ny);
        attn_rng *drop = attn_h_rng_create(5);
        attn_rng_seed(&r, 5);
        draw_masks(k, B, T, &r, keep, n);
        size_t dropped = 0;
        for (size_t i = 0; i < n; i++)
            dropped += !keep[i];
        cr_expect(dropped > 0 && dropped < n, "%s: a mask with some drops", k->kind);
        attn_error err;
        cr_assert_eq(
            attn_h_module_forward(a, x, B, T, ya, 1, drop, ATTN_STREAM_TORCH_CPU, NULL, 0, &err),
            ATTN_OK, "%s drawn: %s", k->kind, err.msg);
        cr_assert_eq(attn_h_module_forward(b, x, B, T, yb, 1, NULL, 0, keep, n, &err), ATTN_OK,
                     "%s given: %s", k->kind, err.msg);
        cr_expect(memcmp(ya, yb, ny * sizeof *ya) == 0, "%s: outputs with given masks differ",
                  k->kind);
        /* Backward accumulates (tests/test_backward_rule.c): zeroed first. */
        memset(dxa, 0, nx * sizeof *dxa);
        memset(dxb, 0, nx * sizeof *dxb);
        attn_param_list_zero_grad(attn_module_params(a));
        attn_param_list_zero_grad(attn_module_params(b));
        cr_assert_eq(attn_h_module_backward(a, x, B, T, dy, dxa, &err), ATTN_OK, "%s", err.msg);
        cr_assert_eq(attn_h_module_backward(b, x, B, T, dy, dxb, &err), ATTN_OK, "%s", err.msg);
        cr_expect(memcmp(dxa, dxb, nx * sizeof *dxa) == 0, "%s: dx differs", k->kind);
        const attn_param_list *pa = attn_module_params(a), *pb = attn_module_params(b);
        for (int i = 0; i < attn_h_param_count(pa); i++) {
            int64_t shape[ATTN_PARAM_MAX_DIMS];
            const int nd = attn_h_param_shape(pa, i, shape);
            size_t numel = 1;
            for (int d = 0; d < nd; d++)
                numel *= (size_t)shape[d];
            cr_expect(strcmp(attn_h_param_name(pa, i), attn_h_param_name(pb, i)) == 0);
            cr_expect(memcmp(attn_h_param_grad(pa, i), attn_h_param_grad(pb, i),
                             numel * sizeof(float)) == 0,
                      "%s: grad %s differs", k->kind, attn_h_param_name(pa, i));
        }
        /* One element short, one too many: refused, naming both counts. */
        cr_expect_eq(attn_h_module_forward(b, x, B, T, yb, 1, NULL, 0, keep, n - 1, &err),
                     ATTN_ERR_SHAPE);
        char want[96];
        snprintf(want, sizeof want, "takes %zu mask elements, %zu were given", n, n - 1);
        cr_expect(strstr(err.msg, want), "%s: '%s'", k->kind, err.msg);
        uint8_t *more = calloc(n + 1, 1);
        cr_expect_eq(attn_h_module_forward(b, x, B, T, yb, 1, NULL, 0, more, n + 1, &err),
                     ATTN_ERR_SHAPE);
        free(more);
        /* Eval takes none. */
        cr_expect_eq(attn_h_module_forward(b, x, B, T, yb, 0, NULL, 0, NULL, 0, &err), ATTN_OK);
        free(x), free(ya), free(yb), free(dy), free(dxa), free(dxb), free(keep);
        attn_h_rng_free(drop);
        attn_module_free(a);
        attn_module_free(b);
    }
}

Test(given, reference_mha_path_takes_the_same_masks) {
    /* The step-by-step MultiHeadAttention (attn chapter3's path) reads given
     * masks through attn_dropout_mask, the fused one through its bits. */
    const int B = 2, T = 5, H = 2, D = 4;
    attn_rng rng;
    attn_mha fused, ref;
    attn_rng_seed(&rng, 1);
    cr_assert_eq(attn_mha_init(&fused, D, D, T, 0.5, H, 0, &rng, NULL), ATTN_OK);
    attn_rng_seed(&rng, 1);
    cr_assert_eq(attn_mha_init(&ref, D, D, T, 0.5, H, 0, &rng, NULL), ATTN_OK);
    ref.path = ATTN_MHA_REFERENCE;
    const size_t n = (size_t)B * H * T * T;
    uint8_t keep[2 * 2 * 5 * 5];
    for (size_t i = 0; i < n; i++)
        keep[i] = (uint8_t)((i * 7 + 3) % 5 != 0);
    float x[2 * 5 * 4], y1[2 * 5 * 4], y2[2 * 5 * 4];
    attn_rng_rand(&rng, x, sizeof x / sizeof x[0]);
    attn_attention_cache c1, c2;
    cr_assert_eq(attn_attention_cache_init(&c1, B, T, H, D, NULL), ATTN_OK);
    cr_assert_eq(attn_attention_cache_init(&c2, B, T, H, D, NULL), ATTN_OK);
    attn_dropout_given g1, g2;
    attn_dropout_given_init(&g1, keep, n);
    attn_dropout_given_init(&g2, keep, n);
    attn_forward_mode m1 = {1, &g1.rng, ATTN_STREAM_GIVEN}, m2 = {1, &g2.rng, ATTN_STREAM_GIVEN};
    cr_assert_eq(attn_mha_forward(&fused, x, B, T, y1, &m1, &c1, NULL), ATTN_OK);
    cr_assert_eq(attn_mha_forward(&ref, x, B, T, y2, &m2, &c2, NULL), ATTN_OK);
    cr_expect_eq(attn_dropout_given_check(&g1, NULL), ATTN_OK);
    cr_expect_eq(attn_dropout_given_check(&g2, NULL), ATTN_OK);
    for (size_t i = 0; i < sizeof y1 / sizeof y1[0]; i++)
        cr_expect(fabsf(y1[i] - y2[i]) <= 1e-6f, "y[%zu]: fused %g, reference %g", i, (double)y1[i],
                  (double)y2[i]);
    for (size_t i = 0; i < n; i++)
        cr_expect_eq(c2.keep[i], keep[i]);
    attn_attention_cache_free(&c1);
    attn_attention_cache_free(&c2);
    attn_mha_free(&fused);
    attn_mha_free(&ref);
}

/* ----------------------------------------------------- fused attention */

/* Double-precision causal attention of one (b, h) slice: o = drop(softmax(
 * scale q k^T)) v, and its gradients for d_o. */
static void ref_slice(int T, int D, const float *q, const float *k, const float *v, double scale,
                      const uint8_t *keep, double keep_scale, const float *d_o, double *o,
                      double *dq, double *dk, double *dv) {
    double *P = calloc((size_t)T * T, sizeof *P), *dP = calloc((size_t)T * T, sizeof *dP);
    for (int i = 0; i < T; i++) {
        double mx = -INFINITY, sum = 0;
        for (int j = 0; j <= i; j++) {
            double s = 0;
            for (int d = 0; d < D; d++)
                s += (double)q[i * D + d] * k[j * D + d];
            P[i * T + j] = s * scale;
            mx = fmax(mx, P[i * T + j]);
        }
        for (int j = 0; j <= i; j++)
            sum += (P[i * T + j] = exp(P[i * T + j] - mx));
        for (int j = 0; j <= i; j++)
            P[i * T + j] /= sum;
    }
    for (int i = 0; i < T; i++)
        for (int d = 0; d < D; d++) {
            double acc = 0;
            for (int j = 0; j <= i; j++) {
                const double m = keep ? keep[i * T + j] * keep_scale : 1.0;
                acc += P[i * T + j] * m * v[j * D + d];
            }
            o[i * D + d] = acc;
        }
    for (int i = 0; i < T; i++) {
        double rs = 0;
        for (int j = 0; j <= i; j++) {
            const double m = keep ? keep[i * T + j] * keep_scale : 1.0;
            double g = 0;
            for (int d = 0; d < D; d++) {
                g += (double)d_o[i * D + d] * v[j * D + d];
                dv[j * D + d] += P[i * T + j] * m * d_o[i * D + d];
            }
            dP[i * T + j] = g * m;
            rs += dP[i * T + j] * P[i * T + j];
        }
        for (int j = 0; j <= i; j++) {
            const double ds = P[i * T + j] * (dP[i * T + j] - rs) * scale;
            for (int d = 0; d < D; d++) {
                dq[i * D + d] += ds * k[j * D + d];
                dk[j * D + d] += ds * q[i * D + d];
            }
        }
    }
    free(P);
    free(dP);
}

static void expect_close(const float *got, const double *want, size_t n, double tol,
                         const char *what) {
    double worst = 0, big = 1e-3;
    for (size_t i = 0; i < n; i++) {
        worst = fmax(worst, fabs(got[i] - want[i]));
        big = fmax(big, fabs(want[i]));
    }
    cr_expect(worst <= tol * big, "%s: max |diff| %g (scale %g)", what, worst, big);
}

static void sdpa_case(int B, int H, int T, int D, float scale, double p) {
    const size_t n = (size_t)B * H * T * D, nm = (size_t)B * H * T * T;
    float *q = malloc(n * 4), *k = malloc(n * 4), *v = malloc(n * 4), *o = malloc(n * 4),
          *d_o = malloc(n * 4), *dq = calloc(n, 4), *dk = calloc(n, 4), *dv = calloc(n, 4),
          *lse = malloc((size_t)B * H * T * 4);
    double *ro = calloc(n, 8), *rdq = calloc(n, 8), *rdk = calloc(n, 8), *rdv = calloc(n, 8);
    uint8_t *keep = malloc(nm), *bits = calloc((nm + 7) / 8, 1);
    attn_rng r;
    attn_rng_seed(&r, (uint64_t)(T * 131 + D));
    attn_rng_uniform(&r, q, n, -2, 2);
    attn_rng_uniform(&r, k, n, -2, 2);
    attn_rng_uniform(&r, v, n, -1, 1);
    attn_rng_uniform(&r, d_o, n, -1, 1);
    attn_dropout_mask(&r, ATTN_STREAM_TORCH_CPU, p, keep, nm);
    for (size_t i = 0; i < nm; i++)
        bits[i >> 3] |= (uint8_t)(keep[i] << (i & 7));
    const double sc = scale > 0 ? scale : 1.0 / sqrt(D);
    for (int s = 0; s < B * H; s++) {
        const size_t off = (size_t)s * T * D;
        ref_slice(T, D, q + off, k + off, v + off, sc, p > 0 ? keep + (size_t)s * T * T : NULL,
                  attn_dropout_scale(p), d_o + off, ro + off, rdq + off, rdk + off, rdv + off);
    }
    attn_error err;
    cr_assert_eq(
        attn_h_sdpa_forward(B, H, T, D, q, k, v, scale, p, p > 0 ? bits : NULL, 0, 2, o, lse, &err),
        ATTN_OK, "%s", err.msg);
    cr_assert_eq(attn_h_sdpa_backward(B, H, T, D, q, k, v, o, lse, scale, p, p > 0 ? bits : NULL, 0,
                                      2, d_o, dq, dk, dv, &err),
                 ATTN_OK, "%s", err.msg);
    char what[64];
    snprintf(what, sizeof what, "B%d H%d T%d D%d scale %g p %g", B, H, T, D, (double)scale, p);
    expect_close(o, ro, n, 2e-6, what);
    expect_close(dq, rdq, n, 1e-5, what);
    expect_close(dk, rdk, n, 1e-5, what);
    expect_close(dv, rdv, n, 1e-5, what);
    free(q), free(k), free(v), free(o), free(d_o), free(dq), free(dk), free(dv), free(lse);
    free(ro), free(rdq), free(rdk), free(rdv), free(keep), free(bits);
}

Test(sdpa, against_double_reference) {
    sdpa_case(1, 1, 1, 16, 0, 0);       /* one token */
    sdpa_case(2, 3, 70, 16, 0, 0);      /* T across two 64-row tiles */
    sdpa_case(1, 2, 33, 64, 0.05f, 0);  /* another scale */
    sdpa_case(2, 2, 65, 128, 0, 0.3);   /* dropout from given bits */
    sdpa_case(1, 1, 17, 24, 0.3f, 0.5); /* both */
}

Test(sdpa, bad_inputs) {
    float a[16] = {0}, lse[4];
    attn_error err;
    cr_expect_eq(attn_h_sdpa_forward(1, 1, 0, 4, a, a, a, 0, 0, NULL, 0, 1, a, lse, &err),
                 ATTN_ERR_SHAPE);
    cr_expect_eq(attn_h_sdpa_forward(1, 1, 4, 4, a, a, a, 0, 0.5, NULL, 0, 1, a, lse, &err),
                 ATTN_ERR_INVALID_ARG);
    cr_expect(strstr(err.msg, "needs a mask"), "%s", err.msg);
    cr_expect_eq(attn_h_sdpa_forward(1, 1, 4, 4, a, a, a, 0, 1.0, NULL, 0, 1, a, lse, &err),
                 ATTN_ERR_INVALID_ARG);
    cr_expect_eq(attn_h_sdpa_forward(1, 1, 4, 4, a, a, a, 0, 0, NULL, 7, 1, a, lse, &err),
                 ATTN_ERR_INVALID_ARG);
}

/* ------------------------------------------------------ training, GPT */

static char corpus[256], cfg[256];

static void files(const char *dir) {
    snprintf(corpus, sizeof corpus, "%s/corpus.txt", dir);
    snprintf(cfg, sizeof cfg, "%s/cfg.json", dir);
    FILE *f = fopen(corpus, "w");
    cr_assert(f);
    for (int i = 0; i < 60; i++)
        fprintf(f, "First Citizen: before we proceed any further, hear me speak %d.\n", i % 7);
    fclose(f);
    f = fopen(cfg, "w");
    cr_assert(f);
    fputs("{\"context_length\": 16, \"emb_dim\": 16, \"n_heads\": 2, \"n_layers\": 2, "
          "\"drop_rate\": 0.1}",
          f);
    fclose(f);
}

typedef struct stop_at {
    int64_t at, steps, evals;
} stop_at;

static int stop_cb(void *user, int event, int64_t step, int64_t max_steps, double a, double b,
                   double c) {
    stop_at *s = user;
    (void)b, (void)c;
    cr_expect_eq(max_steps, 8);
    cr_expect(isfinite(a));
    if (event == 1) {
        s->evals++;
        return 0;
    }
    s->steps++;
    return s->at > 0 && step >= s->at;
}

static void *slurp(const char *path, size_t *n) {
    void *data = NULL;
    cr_assert_eq(attn_file_read_all(path, 0, &data, n, NULL), ATTN_OK, "%s", path);
    return data;
}

Test(train, stopped_by_the_callback_then_resumed_equals_uninterrupted) {
    char tmpl[] = "/tmp/attn-handles-XXXXXX", a[300], b[300], abs_out[ATTN_TRAIN_PATH_MAX];
    const char *dir = mkdtemp(tmpl);
    cr_assert(dir);
    files(dir);
    snprintf(a, sizeof a, "%s/a", dir);
    snprintf(b, sizeof b, "%s/b", dir);
    const char *keys = "{\"max_steps\": 8, \"batch_size\": 3, \"eval_interval\": 4, "
                       "\"eval_iters\": 1, \"warmup_steps\": 2}";
    attn_error err;
    int64_t step = -1;
    int stopped = -1, req = -1;
    stop_at sa = {0, 0, 0}, sb = {3, 0, 0};
    cr_assert_eq(attn_h_train("tiny", cfg, corpus, a, NULL, keys, 0, 0, stop_cb, &sa, &step,
                              &stopped, abs_out, &req, &err),
                 ATTN_OK, "%s", err.msg);
    cr_expect_eq(step, 8);
    cr_expect_eq(stopped, 0);
    cr_expect_eq(sa.steps, 8);
    cr_expect_eq(sa.evals, 3, "evaluations at 0, 4 and 8");
    cr_expect_str_eq(abs_out, a);
    cr_assert_eq(attn_h_train("tiny", cfg, corpus, b, NULL, keys, 0, 0, stop_cb, &sb, &step,
                              &stopped, NULL, NULL, &err),
                 ATTN_OK, "%s", err.msg);
    cr_expect_eq(step, 3);
    cr_expect_eq(stopped, 1);
    int64_t saved = -1;
    cr_expect(attn_ckpt_exists(b, &saved) && saved == 3, "the stopped run saved step 3 (%lld)",
              (long long)saved);
    /* A second run in the same folder without resume or force is refused. */
    cr_expect_neq(attn_h_train("tiny", cfg, corpus, b, NULL, keys, 0, 0, NULL, NULL, &step,
                               &stopped, NULL, &req, &err),
                  ATTN_OK);
    cr_expect_eq(req, 1, "%s", err.msg);
    sb.at = 0;
    cr_assert_eq(attn_h_train(NULL, NULL, NULL, b, NULL, NULL, 1, 0, stop_cb, &sb, &step, &stopped,
                              NULL, NULL, &err),
                 ATTN_OK, "resume: %s", err.msg);
    cr_expect_eq(step, 8);
    char pa[400], pb[400];
    snprintf(pa, sizeof pa, "%s/model.safetensors", a);
    snprintf(pb, sizeof pb, "%s/model.safetensors", b);
    size_t na, nb;
    void *da = slurp(pa, &na), *db = slurp(pb, &nb);
    cr_expect(na == nb && memcmp(da, db, na) == 0,
              "stopped at 3 + resumed == uninterrupted, byte for byte");
    free(da);
    free(db);

    /* The GPT handle on that checkpoint. */
    attn_h_gpt *g = NULL;
    cr_assert_eq(attn_h_gpt_load(a, &g, &err), ATTN_OK, "%s", err.msg);
    char *info = attn_h_gpt_info_json(g);
    cr_assert(info);
    cr_expect(strstr(info, "\"context_length\":16") && strstr(info, "\"step\":8"), "%s", info);
    attn_h_free(info);
    const int64_t ids[10] = {1, 2, 3, 4, 5, 5, 4, 3, 2, 1}, tg[10] = {2, 3, 4, 5, 6, 4, 3, 2, 1, 0};
    float loss = 0, logits[10 * 64];
    cr_assert_eq(attn_h_gpt_forward(g, ids, tg, 2, 5, NULL, &loss, &err), ATTN_OK, "%s", err.msg);
    cr_expect(isfinite(loss) && loss > 0);
    const int64_t bad[2] = {0, 999};
    cr_expect_eq(attn_h_gpt_forward(g, bad, NULL, 1, 2, logits, NULL, &err), ATTN_ERR_INVALID_ARG);
    int64_t long_ids[17] = {0};
    cr_expect_eq(attn_h_gpt_forward(g, long_ids, NULL, 1, 17, NULL, NULL, &err), ATTN_ERR_SHAPE);
    cr_expect(strstr(err.msg, "context_length = 16"), "%s", err.msg);
    float w[2 * 2 * 10 * 10];
    cr_assert_eq(attn_h_gpt_attention(g, ids, 10, w, &err), ATTN_OK, "%s", err.msg);
    for (int r = 0; r < 2 * 2 * 10; r++) {
        double s = 0;
        for (int j = 0; j < 10; j++) {
            s += w[r * 10 + j];
            if (j > r % 10) cr_expect_eq(w[r * 10 + j], 0.0f);
        }
        cr_expect(fabs(s - 1) < 1e-5, "row %d sums to %g", r, s);
    }
    attn_generator *gen = NULL;
    cr_assert_eq(attn_h_generator_create(g, 0.8, 200, 1.0, 7, "e", 0, &gen, &err), ATTN_OK, "%s",
                 err.msg);
    cr_assert_eq(attn_generator_prompt(gen, "First", 5, &err), ATTN_OK, "%s", err.msg);
    int produced = 0;
    char u8[8];
    while (!attn_h_generator_stopped(gen) && produced < 200) {
        cr_assert_eq(attn_generator_next(gen, NULL, u8, NULL, &err), ATTN_OK, "%s", err.msg);
        produced++;
    }
    cr_expect(attn_h_generator_stopped(gen) && strcmp(u8, "e") == 0, "stops at 'e'");
    attn_h_generator_free(gen);
    char *html = NULL;
    size_t len = 0;
    cr_assert_eq(attn_h_viz_html(g, "First", 5, 3, 0.8, 200, 7, "test", &html, &len, &err), ATTN_OK,
                 "%s", err.msg);
    cr_expect(len == strlen(html) && strstr(html, "id=\"attn-data\""));
    attn_h_free(html);
    attn_h_gpt_free(g);
    cr_expect_neq(attn_h_gpt_load("/nonexistent/run", &g, &err), ATTN_OK);
    cr_expect(g == NULL && strstr(err.msg, "/nonexistent/run"), "%s", err.msg);
    remove_tree(a);
    remove_tree(b);
    remove(corpus);
    remove(cfg);
    remove(dir);
}

Test(train, bad_requests) {
    attn_error err;
    int req = 0;
    cr_expect_neq(attn_h_train(NULL, NULL, NULL, NULL, NULL, "{\"no_such_key\": 1}", 0, 0, NULL,
                               NULL, NULL, NULL, NULL, &req, &err),
                  ATTN_OK);
    cr_expect(req == 1 && strstr(err.msg, "no_such_key"), "%s", err.msg);
    cr_expect_neq(attn_h_train(NULL, NULL, NULL, NULL, NULL, "{\"max_steps\": 2.5}", 0, 0, NULL,
                               NULL, NULL, NULL, NULL, &req, &err),
                  ATTN_OK);
    cr_expect(req == 1 && strstr(err.msg, "integer"), "%s", err.msg);
    cr_expect_neq(attn_h_train(NULL, NULL, NULL, NULL, NULL, NULL, 1, 0, NULL, NULL, NULL, NULL,
                               NULL, &req, &err),
                  ATTN_OK);
    cr_expect(req == 1 && strstr(err.msg, "resume needs out"), "%s", err.msg);
    cr_expect_neq(attn_h_train("nope", NULL, NULL, "/tmp/attn-handles-never", NULL, NULL, 0, 0,
                               NULL, NULL, NULL, NULL, NULL, &req, &err),
                  ATTN_OK);
    cr_expect(req == 1 && strstr(err.msg, "nope"), "%s", err.msg);
    attn_module *m = NULL;
    cr_expect_eq(attn_h_module_create("mha3", 3, 2, 1, 6, 0, 0, NULL, &m, &err),
                 ATTN_ERR_INVALID_ARG);
    cr_expect(strstr(err.msg, "seed004-mha"), "%s", err.msg);
}

/* The old names of renamed calls (deprecated, removed after 0.2) still
 * build and run the new ones. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
Test(handles, deprecated_names_still_work) {
    attn_error err;
    attn_rng *rng = attn_h_rng_new(123);
    cr_assert(rng);
    attn_module *m = NULL;
    cr_assert_eq(attn_h_module_new("mha", 4, 4, 2, 6, 0, 0, rng, &m, &err), ATTN_OK, "%s", err.msg);
    cr_expect_eq(attn_module_out_dim(m), 4);
    attn_module_destroy(m);
    attn_h_rng_free(rng);
    attn_dist d;
    cr_assert_eq(attn_dist_init(&d, NULL, NULL, &err), ATTN_OK, "%s", err.msg);
    attn_dist_finalize(&d);
    cr_expect_eq(d.size, 1);
}
#pragma GCC diagnostic pop

/* attn_h_alloc_huge: every byte usable, 2 MiB-aligned past 4 MiB (so the
 * kernel can back it with huge pages), small and zero sizes served too. */
Test(alloc, huge_buffers_are_usable_and_aligned) {
    const size_t sizes[] = {0, 1, 4096, (size_t)4 << 20, ((size_t)9 << 20) + 3};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        unsigned char *p = attn_h_alloc_huge(sizes[i]);
        cr_assert(p, "size %zu", sizes[i]);
        memset(p, 0xA5, sizes[i]);
        if (sizes[i]) cr_expect(p[sizes[i] - 1] == 0xA5);
        if (sizes[i] >= ((size_t)4 << 20))
            cr_expect(((uintptr_t)p & (((uintptr_t)2 << 20) - 1)) == 0, "size %zu: %p", sizes[i],
                      (void *)p);
        attn_h_free(p);
    }
}
