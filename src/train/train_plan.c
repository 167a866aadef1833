/* What a run will cost before it starts: parameters, memory, checkpoint
 * size, arithmetic and a measured matrix-product speed (see
 * attn_train_plan_of in attn/train.h). */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */

#include <stdlib.h>
#include <time.h>

#include "attn/flash_attention.h"
#include "attn/gemm.h"
#include "attn/train.h"
#include "base/clock.h"
#include "trainer.h"

void attn_train_plan_of(const attn_gpt_config *m, const attn_train_config *t, attn_train_plan *p) {
    const double V = m->vocab_size, T = m->context_length, C = m->emb_dim, H = m->n_heads,
                 L = m->n_layers;
    const double head = m->tie_weights ? 0 : C * V;
    p->n_params = (size_t)attn_gpt_config_params(m);
    const int accum = t->grad_accum > 1 ? t->grad_accum : 1;
    p->tokens_per_step = (double)t->batch_size * T * accum;
    const double tokens = (double)t->batch_size * T; /* one micro-batch */
    /* Weights, gradients, AdamW m and v; one more gradient when
     * accumulating. */
    p->state_bytes = (double)p->n_params * 4 * (accum > 1 ? 5 : 4);
    /* Kept for backward per token and block: ~18 C floats (block inputs,
     * LayerNorm outputs, q, k, v, context, the 4C hidden layer and its
     * GELU) and H T attention weights; logits and their gradient, or with
     * the fused head (a large vocabulary) one chunk of logits. */
    const double head_acts =
        V >= ATTN_TRAIN_LEAN_VOCAB ? ATTN_GPT_HEAD_ROWS * V * 4 : tokens * 2 * V * 4;
    p->act_bytes = tokens * L * (18 * C + H * T) * 4 + head_acts;
    /* model.safetensors + train_state.safetensors (weights, m, v). */
    p->ckpt_bytes = (double)p->n_params * 4 * 3;
    /* Forward + backward: 6 per parameter per token, plus attention's
     * QK^T and AV (12 L T C per token, causal mask not discounted). */
    p->flops_per_step = p->tokens_per_step * (6 * ((double)p->n_params + C * V - head) +
                                              12 * L * T * C); /* a tied head still multiplies */
}

double attn_train_probe_gflops(int threads) {
    enum { N = 384 };
    float *a = malloc(sizeof(float) * N * N * 3);
    if (!a) return 0;
    float *b = a + N * N, *c = b + N * N;
    for (int i = 0; i < N * N; i++)
        a[i] = b[i] = (float)(i % 17) * 0.01f;
    attn_sgemm(threads, 0, 0, N, N, N, 1.0f, a, N, b, N, 0.0f, c, N); /* warm-up */
    int reps = 0;
    const double t0 = attn_now_s();
    double dt = 0;
    while (dt < 0.2) {
        attn_sgemm(threads, 0, 0, N, N, N, 1.0f, a, N, b, N, 0.0f, c, N);
        reps++;
        dt = attn_now_s() - t0;
    }
    free(a);
    return 2.0 * N * N * N * reps / dt / 1e9;
}
