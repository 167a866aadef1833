/* The CUDA engine (attn/cuda.h) against the CPU path and exact references.
 * A plain C program (no Criterion, so it runs under compute-sanitizer):
 * exits 77 — ctest "Skipped" — when there is no CUDA build or no GPU.
 *
 *  1. the fused attention kernel, forward and backward, against a float64
 *     reference computed here from the definition (softmax(QK^T/sqrt(hd))V
 *     with the full T x T matrix), over odd shapes: T = 1, T not a multiple
 *     of the 32-row tile, head dims 16..128; with dropout too, the mask
 *     rebuilt here from an independent Philox4x32-10;
 *  2. the GPT's fp32 forward and backward on the GPU against the fp32 CPU
 *     path (the project's reference) on the same weights and batch:
 *     logits <= 1e-4 relative, every gradient <= 1e-3 relative (norm-wise);
 *     clip + AdamW: the updated weights agree;
 *  3. dropout on the GPU: the same seed and step give the same bits, another
 *     step other masks, and the gradient matches a central difference of the
 *     (deterministic) dropout loss. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn/cuda.h"
#include "attn/gpt.h"
#include "attn/optim.h"
#include "attn/rng.h"

static int failures = 0, checks = 0;

static void check(int ok, const char *what, double got, double limit) {
    checks++;
    printf("%s %-60s %.3g (limit %.3g)\n", ok ? "ok  " : "FAIL", what, got, limit);
    if (!ok) failures++;
}

static double rel_err(const float *a, const double *ref, size_t n) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(a[i])) return INFINITY;
        num += (a[i] - ref[i]) * (a[i] - ref[i]);
        den += ref[i] * ref[i];
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

static double rel_err_f(const float *a, const float *b, size_t n) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(a[i])) return INFINITY;
        num += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
        den += (double)b[i] * b[i];
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

/* Philox4x32-10, first output word (written from the paper's constants). */
static uint32_t philox(uint32_t c0, uint32_t c1, uint32_t c2, uint32_t c3, uint32_t k0,
                       uint32_t k1) {
    for (int r = 0; r < 10; r++) {
        uint64_t p0 = (uint64_t)0xD2511F53u * c0, p1 = (uint64_t)0xCD9E8D57u * c2;
        uint32_t hi0 = (uint32_t)(p0 >> 32), lo0 = (uint32_t)p0;
        uint32_t hi1 = (uint32_t)(p1 >> 32), lo1 = (uint32_t)p1;
        c0 = hi1 ^ c1 ^ k0;
        c1 = lo1;
        c2 = hi0 ^ c3 ^ k1;
        c3 = lo0;
        k0 += 0x9E3779B9u;
        k1 += 0xBB67AE85u;
    }
    return c0;
}

/* ------------------------------------------------- 1. attention kernel */

static void attention_case(int B, int T, int H, int hd, double p, attn_rng *rng) {
    const size_t C = (size_t)H * hd, N = (size_t)B * T;
    float *qkv = malloc(N * 3 * C * sizeof *qkv), *dout = malloc(N * C * sizeof *dout);
    float *out = malloc(N * C * sizeof *out), *lse = malloc(N * H * sizeof *lse);
    float *dqkv = malloc(N * 3 * C * sizeof *dqkv);
    double *ro = calloc(N * C, sizeof *ro), *rd = calloc(N * 3 * C, sizeof *rd);
    double *P = malloc((size_t)T * T * sizeof *P), *Z = malloc((size_t)T * T * sizeof *Z);
    double *dP = malloc((size_t)T * T * sizeof *dP);
    attn_rng_normal(rng, qkv, N * 3 * C, 0.0f, 1.0f);
    attn_rng_normal(rng, dout, N * C, 0.0f, 1.0f);
    for (size_t i = 0; i < N * C; i++)
        out[i] = NAN; /* poison: every element must be written */
    attn_cuda_dropout drop = {0x1234567890abcdefULL, 7};
    attn_error err;
    if (attn_cuda_attention(qkv, B, T, H, hd, p, p > 0 ? &drop : NULL, out, lse, dout, dqkv,
                            &err)) {
        printf("FAIL attention: %s\n", err.msg);
        failures++;
        goto done;
    }
    const double sc = 1.0 / sqrt((double)hd), keep = 1.0 - p;
    const double zscale = p > 0 ? (double)(1.0f / (float)(1.0 - p)) : 1.0;
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++) {
#define Q(t, d) qkv[((size_t)b * T + (t)) * 3 * C + (size_t)h * hd + (d)]
#define K(t, d) qkv[((size_t)b * T + (t)) * 3 * C + C + (size_t)h * hd + (d)]
#define V(t, d) qkv[((size_t)b * T + (t)) * 3 * C + 2 * C + (size_t)h * hd + (d)]
#define DO(t, d) dout[((size_t)b * T + (t)) * C + (size_t)h * hd + (d)]
            for (int i = 0; i < T; i++) {
                double m = -INFINITY, s = 0;
                for (int j = 0; j <= i; j++) {
                    double d = 0;
                    for (int k = 0; k < hd; k++)
                        d += (double)Q(i, k) * K(j, k);
                    P[(size_t)i * T + j] = d * sc;
                    if (d * sc > m) m = d * sc;
                }
                for (int j = 0; j <= i; j++)
                    s += exp(P[(size_t)i * T + j] - m);
                for (int j = 0; j < T; j++) {
                    P[(size_t)i * T + j] = j <= i ? exp(P[(size_t)i * T + j] - m) / s : 0;
                    double z = 1;
                    if (p > 0) {
                        uint64_t idx = (((uint64_t)(b * H + h) * T + i) * T + j);
                        uint32_t u = philox((uint32_t)idx, (uint32_t)(idx >> 32), 1, 7,
                                            (uint32_t)drop.seed, (uint32_t)(drop.seed >> 32));
                        z = (double)u / 4294967296.0 < keep ? zscale : 0;
                    }
                    Z[(size_t)i * T + j] = z;
                }
                for (int k = 0; k < hd; k++) {
                    double o = 0;
                    for (int j = 0; j <= i; j++)
                        o += P[(size_t)i * T + j] * Z[(size_t)i * T + j] * V(j, k);
                    ro[((size_t)b * T + i) * C + (size_t)h * hd + k] = o;
                }
            }
            /* backward from the definition */
            for (int i = 0; i < T; i++) {
                double Dsum = 0;
                for (int j = 0; j <= i; j++) {
                    double d = 0;
                    for (int k = 0; k < hd; k++)
                        d += (double)DO(i, k) * V(j, k);
                    dP[(size_t)i * T + j] = d * Z[(size_t)i * T + j]; /* d loss / d P */
                    Dsum += dP[(size_t)i * T + j] * P[(size_t)i * T + j];
                }
                for (int j = 0; j <= i; j++) {
                    const double pz = P[(size_t)i * T + j] * Z[(size_t)i * T + j];
                    const double ds = P[(size_t)i * T + j] * (dP[(size_t)i * T + j] - Dsum) * sc;
                    for (int k = 0; k < hd; k++) {
                        rd[((size_t)b * T + i) * 3 * C + (size_t)h * hd + k] += ds * K(j, k);
                        rd[((size_t)b * T + j) * 3 * C + C + (size_t)h * hd + k] += ds * Q(i, k);
                        rd[((size_t)b * T + j) * 3 * C + 2 * C + (size_t)h * hd + k] +=
                            pz * DO(i, k);
                    }
                }
            }
        }
    char what[96];
    snprintf(what, sizeof what, "attention fwd B%d T%d H%d hd%d p%.1f vs float64", B, T, H, hd, p);
    double e = rel_err(out, ro, N * C);
    check(e <= 1e-5, what, e, 1e-5);
    snprintf(what, sizeof what, "attention bwd B%d T%d H%d hd%d p%.1f vs float64", B, T, H, hd, p);
    e = rel_err(dqkv, rd, N * 3 * C);
    check(e <= 1e-4, what, e, 1e-4);
done:
    free(qkv), free(dout), free(out), free(lse), free(dqkv), free(ro), free(rd), free(P), free(Z),
        free(dP);
}

/* --------------------------------------------------------- 2. the GPT */

static void fill_batch(attn_rng *rng, int32_t *ids, int32_t *tg, size_t n, int V) {
    for (size_t i = 0; i < n; i++) {
        ids[i] = (int32_t)(attn_rng_u32(rng) % (uint32_t)V);
        tg[i] = (int32_t)(attn_rng_u32(rng) % (uint32_t)V);
    }
}

static void gpt_parity(const attn_gpt_config *cfg, int B, int T, const char *name) {
    attn_rng rng;
    attn_rng_seed(&rng, 42);
    attn_gpt m;
    attn_gpt_acts a;
    attn_error err;
    attn_cuda_gpt *g = NULL;
    if (attn_gpt_init(&m, cfg, &rng, &err) || attn_gpt_acts_init(&a, &m, B, T, &err)) {
        printf("FAIL init: %s\n", err.msg);
        failures++;
        return;
    }
    /* Random LayerNorm parameters too, so their gradients are exercised. */
    const attn_param_list *pl = attn_gpt_params(&m);
    for (int i = 0; i < pl->count; i++)
        if (pl->items[i].ndim == 1)
            for (size_t k = 0; k < pl->items[i].numel; k++) {
                float z;
                attn_rng_normal(&rng, &z, 1, 0.0f, 0.1f);
                pl->items[i].data[k] += z;
            }
    const size_t N = (size_t)B * T, V = (size_t)cfg->vocab_size;
    int32_t *ids = malloc(N * sizeof *ids), *tg = malloc(N * sizeof *tg);
    float *logits = malloc(N * V * sizeof *logits);
    fill_batch(&rng, ids, tg, N, cfg->vocab_size);
    float loss_cpu = 0, loss_gpu = 0;
    attn_gpt_zero_grad(&m);
    if (attn_gpt_forward(&m, ids, tg, B, T, NULL, &a, &loss_cpu, &err) ||
        attn_gpt_backward(&m, &a, 1.0f, &err) ||
        attn_cuda_gpt_create(&g, &m, B, cfg->context_length, ATTN_PRECISION_FP32, &err) ||
        attn_cuda_gpt_forward(g, ids, tg, B, T, NULL, &loss_gpu, &err) ||
        attn_cuda_gpt_logits(g, 0, N, logits, &err) || attn_cuda_gpt_backward(g, &err)) {
        printf("FAIL %s: %s\n", name, err.msg);
        failures++;
        goto done;
    }
    char what[320];
    snprintf(what, sizeof what, "%s: logits GPU vs CPU (rel)", name);
    double e = rel_err_f(logits, a.logits, N * V);
    check(e <= 1e-4, what, e, 1e-4);
    snprintf(what, sizeof what, "%s: loss GPU %.6f vs CPU %.6f", name, (double)loss_gpu,
             (double)loss_cpu);
    e = fabs((double)loss_gpu - loss_cpu) / fabs((double)loss_cpu);
    check(e <= 1e-5, what, e, 1e-5);
    /* keep the CPU grads, fetch the GPU's into a copy */
    size_t total = attn_param_list_numel(pl), off = 0;
    float *cpu_g = malloc(total * sizeof *cpu_g);
    for (int i = 0; i < pl->count; i++) {
        memcpy(cpu_g + off, pl->items[i].grad, pl->items[i].numel * sizeof(float));
        off += pl->items[i].numel;
    }
    if (attn_cuda_gpt_download_grads(g, &m, &err)) {
        printf("FAIL %s: %s\n", name, err.msg);
        failures++;
        free(cpu_g);
        goto done;
    }
    double worst = 0, gsum = 0;
    const char *worst_name = "";
    for (size_t k = 0; k < total; k++)
        gsum += (double)cpu_g[k] * cpu_g[k];
    off = 0;
    for (int i = 0; i < pl->count; i++) {
        /* Relative to the tensor's own norm, except where that is rounding
         * noise: the key bias has an exactly zero gradient (softmax ignores a
         * constant q.b_k added to a whole row), so it is held to 1e-6 of the
         * global gradient norm instead. */
        double num = 0, den = 0;
        for (size_t k = 0; k < pl->items[i].numel; k++) {
            double d = (double)pl->items[i].grad[k] - cpu_g[off + k];
            num += d * d;
            den += (double)cpu_g[off + k] * cpu_g[off + k];
        }
        double r = sqrt(num) / fmax(sqrt(den), 1e-3 * sqrt(gsum));
        if (!isfinite(r)) r = INFINITY;
        if (!(r <= worst)) worst = r, worst_name = pl->items[i].name;
        off += pl->items[i].numel;
    }
    snprintf(what, sizeof what, "%s: worst gradient GPU vs CPU (%s)", name, worst_name);
    check(worst <= 1e-3, what, worst, 1e-3);
    /* clip + AdamW on both, from the CPU's gradients */
    off = 0;
    for (int i = 0; i < pl->count; i++) {
        memcpy(pl->items[i].grad, cpu_g + off, pl->items[i].numel * sizeof(float));
        off += pl->items[i].numel;
    }
    attn_adamw_config ac = {0.9, 0.95, 1e-8, 0.1};
    attn_adamw oc, og;
    if (attn_adamw_init(&oc, pl, &ac, &err) || attn_adamw_init(&og, pl, &ac, &err)) {
        free(cpu_g);
        goto done;
    }
    double n_cpu = attn_clip_grad_norm(pl, 0.5), n_gpu = 0;
    attn_adamw_step(&oc, pl, 1e-3, &err);
    float *w_cpu = malloc(total * sizeof *w_cpu), *w_gpu = malloc(total * sizeof *w_gpu);
    off = 0;
    for (int i = 0; i < pl->count; i++) {
        memcpy(w_cpu + off, pl->items[i].data, pl->items[i].numel * sizeof(float));
        off += pl->items[i].numel;
    }
    if (attn_cuda_gpt_clip_grad_norm(g, 0.5, &n_gpu, &err) ||
        attn_cuda_gpt_adamw_step(g, &og, 1e-3, &err) || attn_cuda_gpt_download(g, &m, &og, &err)) {
        printf("FAIL %s: %s\n", name, err.msg);
        failures++;
    } else {
        snprintf(what, sizeof what, "%s: grad norm GPU %.6g vs CPU %.6g", name, n_gpu, n_cpu);
        e = fabs(n_gpu - n_cpu) / n_cpu;
        check(e <= 1e-3, what, e, 1e-3);
        off = 0;
        for (int i = 0; i < pl->count; i++) {
            memcpy(w_gpu + off, pl->items[i].data, pl->items[i].numel * sizeof(float));
            off += pl->items[i].numel;
        }
        snprintf(what, sizeof what, "%s: weights after clip + AdamW GPU vs CPU", name);
        e = rel_err_f(w_gpu, w_cpu, total);
        check(e <= 1e-5, what, e, 1e-5);
        snprintf(what, sizeof what, "%s: AdamW moments m GPU vs CPU", name);
        e = rel_err_f(og.m, oc.m, total);
        check(e <= 1e-3, what, e, 1e-3);
    }
    free(w_cpu), free(w_gpu), free(cpu_g);
    attn_adamw_free(&oc);
    attn_adamw_free(&og);
done:
    attn_cuda_gpt_free(g);
    free(ids), free(tg), free(logits);
    attn_gpt_acts_free(&a);
    attn_gpt_free(&m);
}

/* ------------------------------------------------------- 3. dropout */

static void gpt_dropout(void) {
    attn_gpt_config cfg = {.vocab_size = 65,
                           .context_length = 48,
                           .emb_dim = 64,
                           .n_heads = 4,
                           .n_layers = 2,
                           .drop_rate = 0.2,
                           .qkv_bias = 0};
    const int B = 2, T = 40;
    const size_t N = (size_t)B * T;
    attn_rng rng;
    attn_rng_seed(&rng, 7);
    attn_gpt m;
    attn_error err;
    attn_cuda_gpt *g = NULL;
    if (attn_gpt_init(&m, &cfg, &rng, &err)) return;
    int32_t ids[80], tg[80];
    fill_batch(&rng, ids, tg, N, cfg.vocab_size);
    const attn_param_list *pl = attn_gpt_params(&m);
    size_t total = attn_param_list_numel(pl);
    float *g1 = malloc(total * sizeof *g1), *g2 = malloc(total * sizeof *g2);
    attn_cuda_dropout d = {99, 3}, d2 = {99, 4};
    float l1 = 0, l2 = 0, l3 = 0, l0 = 0;
    if (attn_cuda_gpt_create(&g, &m, B, T, ATTN_PRECISION_FP32, &err) ||
        attn_cuda_gpt_forward(g, ids, tg, B, T, NULL, &l0, &err) ||
        attn_cuda_gpt_forward(g, ids, tg, B, T, &d, &l1, &err) || attn_cuda_gpt_backward(g, &err) ||
        attn_cuda_gpt_download_grads(g, &m, &err)) {
        printf("FAIL dropout: %s\n", err.msg);
        failures++;
        goto done;
    }
    size_t off = 0;
    for (int i = 0; i < pl->count; i++) {
        memcpy(g1 + off, pl->items[i].grad, pl->items[i].numel * sizeof(float));
        off += pl->items[i].numel;
    }
    attn_cuda_gpt_forward(g, ids, tg, B, T, &d, &l2, &err);
    attn_cuda_gpt_backward(g, &err);
    attn_cuda_gpt_download_grads(g, &m, &err);
    off = 0;
    for (int i = 0; i < pl->count; i++) {
        memcpy(g2 + off, pl->items[i].grad, pl->items[i].numel * sizeof(float));
        off += pl->items[i].numel;
    }
    check(memcmp(&l1, &l2, sizeof l1) == 0 && memcmp(g1, g2, total * sizeof *g1) == 0,
          "dropout: same seed and step -> same loss and gradient bits", fabs((double)l1 - l2), 0);
    attn_cuda_gpt_forward(g, ids, tg, B, T, &d2, &l3, &err);
    check(l3 != l1 && l1 != l0, "dropout: another step (and eval) -> another loss",
          fabs((double)l3 - l1), 0);
    /* central difference along the gradient direction (masks fixed by the
     * counter, so the dropout loss is a smooth function of the weights) */
    double gn = 0;
    for (size_t i = 0; i < total; i++)
        gn += (double)g1[i] * g1[i];
    gn = sqrt(gn);
    const double h = 1e-2;
    float lp = 0, lm = 0;
    float *w0 = malloc(total * sizeof *w0);
    off = 0;
    for (int i = 0; i < pl->count; i++) {
        memcpy(w0 + off, pl->items[i].data, pl->items[i].numel * sizeof(float));
        off += pl->items[i].numel;
    }
    for (int sgn = -1; sgn <= 1; sgn += 2) {
        off = 0;
        for (int i = 0; i < pl->count; i++) {
            for (size_t k = 0; k < pl->items[i].numel; k++)
                pl->items[i].data[k] = w0[off + k] + (float)(sgn * h * g1[off + k] / gn);
            off += pl->items[i].numel;
        }
        attn_cuda_gpt_upload(g, &m, NULL, &err);
        attn_cuda_gpt_forward(g, ids, tg, B, T, &d, sgn < 0 ? &lm : &lp, &err);
    }
    double fd = ((double)lp - lm) / (2 * h);
    check(fabs(fd - gn) / gn <= 2e-2, "dropout: |grad| vs central difference along it",
          fabs(fd - gn) / gn, 2e-2);
    free(w0);
done:
    free(g1), free(g2);
    attn_cuda_gpt_free(g);
    attn_gpt_free(&m);
}

int main(void) {
    attn_error err;
    if (attn_cuda_check(&err)) {
        printf("SKIP: %s\n", err.msg);
        return 77;
    }
    attn_rng rng;
    attn_rng_seed(&rng, 2024);
    const int shapes[][4] = {{1, 1, 1, 16},   {2, 37, 3, 24},  {1, 100, 2, 64}, {2, 65, 2, 128},
                             {1, 33, 1, 100}, {1, 256, 2, 64}, {3, 31, 2, 32}};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        attention_case(shapes[i][0], shapes[i][1], shapes[i][2], shapes[i][3], 0.0, &rng);
    attention_case(2, 70, 2, 64, 0.1, &rng);
    attention_case(1, 45, 3, 40, 0.5, &rng);
    attn_gpt_config c1 = {.vocab_size = 65,
                          .context_length = 64,
                          .emb_dim = 128,
                          .n_heads = 4,
                          .n_layers = 2,
                          .drop_rate = 0.0,
                          .qkv_bias = 0};
    gpt_parity(&c1, 3, 64, "GPT C128 H4 L2 T64");
    gpt_parity(&c1, 2, 50, "GPT C128 H4 L2 T50");
    attn_gpt_config c2 = {.vocab_size = 65,
                          .context_length = 40,
                          .emb_dim = 96,
                          .n_heads = 2,
                          .n_layers = 2,
                          .drop_rate = 0.0,
                          .qkv_bias = 1};
    gpt_parity(&c2, 2, 37, "GPT C96 H2 L2 qkv_bias T37");
    gpt_dropout();
    printf("%d checks, %d failed\n", checks, failures);
    return failures ? 1 : 0;
}
