/* Issue 34's fp32 floor row, taken apart: GPT-2 124M's training step at
 * llm.c's shape (batch 4 x 64 tokens) has a floor of its FLOPs at the
 * machine's 1024^3 sgemm rate; this times what the step cannot do without,
 * each alone, on its own buffers (weights, gradients, moments: 2 GB, as in
 * the step, so nothing is served from cache that the step would not have):
 *   products: every matrix product of one step through attn_sgemm, in the
 *     step's order and transposes (each Linear's forward x W^T, then in
 *     reverse its dW += dy^T x and dx = dy W; the lean head in 128-row
 *     chunks), which is OpenBLAS's sgemm at the step's shapes, packing
 *     included;
 *   adamw: attn_adamw_step_tensors over the 124.4 M parameters (a
 *     memory-bound pass: 28 bytes a parameter);
 *   zero: clearing the 124.4 M gradients (memset over the threads' halves).
 * Each: the median of 10 after 2 warm-ups, 2 threads (OMP_NUM_THREADS).
 * Not part of the build:
 *   gcc -O2 -fopenmp -Iinclude bench/step_floor.c -Lbuild -lattn \
 *       -Wl,-rpath,$PWD/build -o /tmp/step_floor && /tmp/step_floor */
#define _POSIX_C_SOURCE 200809L
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn/cost.h"
#include "attn/gemm.h"
#include "attn/optim.h"

enum { L = 12, C = 768, V = 50257, TOK = 256, CHUNK = 128, REPS = 10, WARM = 2 };

static const int lin_in[4] = {C, C, C, 4 * C}, lin_out[4] = {3 * C, C, 4 * C, C};

static float *buf(size_t n) {
    float *p = malloc(n * sizeof *p);
    if (!p) {
        fprintf(stderr, "step_floor: out of memory\n");
        exit(1);
    }
    for (size_t i = 0; i < n; i++)
        p[i] = (float)((i * 2654435761u) % 1000) * 1e-3f - 0.5f;
    return p;
}

static int cmp(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

typedef struct {
    float *w[L][4], *dw[L][4], *head, *dhead;
    float *x, *dy, *y, *dx, *logits;
} step_bufs;

/* One step's products, as the model issues them. */
static void products(step_bufs *s, int th) {
    for (int l = 0; l < L; l++)
        for (int j = 0; j < 4; j++)
            attn_sgemm(th, 0, 1, TOK, lin_out[j], lin_in[j], 1.0f, s->x, lin_in[j], s->w[l][j],
                       lin_in[j], 0.0f, s->y, lin_out[j]);
    for (int r0 = 0; r0 < TOK; r0 += CHUNK) {
        attn_sgemm(th, 0, 1, CHUNK, V, C, 1.0f, s->x, C, s->head, C, 0.0f, s->logits, V);
        attn_sgemm(th, 0, 0, CHUNK, C, V, 1.0f, s->logits, V, s->head, C, 0.0f, s->dx, C);
        attn_sgemm(th, 1, 0, V, C, CHUNK, 1.0f, s->logits, V, s->x, C, 1.0f, s->dhead, C);
    }
    for (int l = L - 1; l >= 0; l--)
        for (int j = 3; j >= 0; j--) {
            const int in = lin_in[j], out = lin_out[j];
            attn_sgemm(th, 1, 0, out, in, TOK, 1.0f, s->dy, out, s->x, in, 1.0f, s->dw[l][j], in);
            attn_sgemm(th, 0, 0, TOK, in, out, 1.0f, s->dy, out, s->w[l][j], in, 0.0f, s->dx, in);
        }
}

static double median(double *t, int n) {
    qsort(t, (size_t)n, sizeof *t, cmp);
    return t[n / 2];
}

int main(void) {
    const int th = omp_get_max_threads();
    /* the floor's rate: the fastest of 20 1024^3 products */
    const int n3 = 1024;
    float *a = buf((size_t)n3 * n3), *b = buf((size_t)n3 * n3), *c = buf((size_t)n3 * n3);
    double best = 1e9;
    for (int i = 0; i < 22; i++) {
        const double t0 = omp_get_wtime();
        attn_sgemm(th, 0, 0, n3, n3, n3, 1.0f, a, n3, b, n3, 0.0f, c, n3);
        const double t = omp_get_wtime() - t0;
        if (i >= 2 && t < best) best = t;
    }
    free(a), free(b), free(c);
    const double rate = 2.0 * n3 * n3 * n3 / best;
    size_t n_mm = (size_t)V * C;
    for (int j = 0; j < 4; j++)
        n_mm += (size_t)L * lin_in[j] * lin_out[j];
    /* attn's count (attn/cost.h): GPT-2 124M at B 4, T 64 */
    const attn_gpt_config gpt2 = {.vocab_size = V, .context_length = 1024, .emb_dim = C,
                                  .n_heads = 12, .n_layers = L, .qkv_bias = 1, .tie_weights = 1};
    const double flop = attn_gpt_flops_step(&gpt2, 4, TOK / 4);
    const double floor_s = flop / rate;

    step_bufs s;
    size_t n_params = n_mm + (size_t)1024 * C; /* + wpe; biases, norms below */
    for (int l = 0; l < L; l++)
        for (int j = 0; j < 4; j++) {
            s.w[l][j] = buf((size_t)lin_in[j] * lin_out[j]);
            s.dw[l][j] = buf((size_t)lin_in[j] * lin_out[j]);
        }
    s.head = buf(n_mm - (size_t)L * 7077888), s.dhead = buf((size_t)V * C);
    s.x = buf((size_t)TOK * 4 * C), s.dy = buf((size_t)TOK * 4 * C);
    s.y = buf((size_t)TOK * 4 * C), s.dx = buf((size_t)TOK * 4 * C);
    s.logits = buf((size_t)CHUNK * V);
    double t[REPS];
    for (int i = 0; i < WARM + REPS; i++) {
        const double t0 = omp_get_wtime();
        products(&s, th);
        if (i >= WARM) t[i - WARM] = omp_get_wtime() - t0;
    }
    const double prod_s = median(t, REPS);

    /* AdamW over every parameter: the matrices above, plus the position
     * embedding, biases and norms as one more tensor */
    n_params += (size_t)L * (2 * 3 * C + 2 * C + 4 * C + 2 * C) + 2 * C;
    const size_t extra = n_params - n_mm;
    attn_adamw_tensor ts[L * 4 + 2];
    int nt = 0;
    for (int l = 0; l < L; l++)
        for (int j = 0; j < 4; j++) {
            const size_t n = (size_t)lin_in[j] * lin_out[j];
            ts[nt++] = (attn_adamw_tensor){s.w[l][j], s.dw[l][j], buf(n), buf(n), n};
        }
    ts[nt++] =
        (attn_adamw_tensor){s.head, s.dhead, buf((size_t)V * C), buf((size_t)V * C), (size_t)V * C};
    ts[nt++] = (attn_adamw_tensor){buf(extra), buf(extra), buf(extra), buf(extra), extra};
    for (int i = 0; i < nt; i++) /* v >= 0, as AdamW keeps it */
        for (size_t k = 0; k < ts[i].numel; k++)
            ts[i].exp_avg_sq[k] =
                ts[i].exp_avg_sq[k] < 0 ? -ts[i].exp_avg_sq[k] : ts[i].exp_avg_sq[k];
    const attn_adamw_config cfg = {0.9, 0.95, 1e-8, 0.1};
    attn_error err;
    for (int i = 0; i < WARM + REPS; i++) {
        const double t0 = omp_get_wtime();
        if (attn_adamw_step_tensors(ts, nt, &cfg, 1e-4, i + 1, &err)) {
            fprintf(stderr, "step_floor: %s\n", err.msg);
            return 1;
        }
        if (i >= WARM) t[i - WARM] = omp_get_wtime() - t0;
    }
    const double adamw_s = median(t, REPS);
    for (int i = 0; i < WARM + REPS; i++) {
        const double t0 = omp_get_wtime();
#pragma omp parallel for schedule(static)
        for (int k = 0; k < nt; k++)
            memset((void *)ts[k].grad, 0, ts[k].numel * sizeof(float));
        if (i >= WARM) t[i - WARM] = omp_get_wtime() - t0;
    }
    const double zero_s = median(t, REPS);

    printf("threads=%d flop=%.1fG sgemm_1024=%.1fGFLOP/s floor_s=%.4f\n", th, flop / 1e9,
           rate / 1e9, floor_s);
    printf("products_s=%.4f (%.2fx floor, %.1f GFLOP/s)\n", prod_s, prod_s / floor_s,
           (flop - 3.5 * attn_gpt_flops_forward(&gpt2, 4, TOK / 4).attention) / prod_s / 1e9);
    printf("adamw_s=%.4f params=%.1fM (%.1f GB/s at 28 B a parameter)\n", adamw_s, n_params / 1e6,
           28.0 * n_params / adamw_s / 1e9);
    printf("zero_s=%.4f\n", zero_s);
    printf("products+adamw=%.4f s = %.2fx floor; 1.25x floor = %.4f s leaves %.4f s for the rest\n",
           prod_s + adamw_s, (prod_s + adamw_s) / floor_s, 1.25 * floor_s,
           1.25 * floor_s - prod_s - adamw_s);
    return 0;
}
