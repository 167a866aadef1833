/* What a run will cost before it starts: parameters, memory, checkpoint
 * size, arithmetic and a measured matrix-product speed (see
 * attn_train_plan_env_of in attn/train.h; the memory is attn/memory_plan.h's). */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */

#include <stdlib.h>
#include <time.h>

#include "attn/cost.h"
#include "attn/gemm.h"
#include "attn/train.h"
#include "base/clock.h"
#include "trainer.h"

/* What the trainer holds of a corpus of n bytes: a char run the text (the
 * CLI's copy), its ids (int32, at most one a byte) and the sampler's order of
 * the 90% of training windows (size_t each); a gpt2 run the pages of its
 * mapped uint16 token files (GPT-2's BPE: about 4 bytes a token). */
static double corpus_bytes(const attn_train_config *t, double n) {
    if (n <= 0) return 0;
    if (t->tokenizer == ATTN_TOKENIZER_GPT2) return n / 4 * 2;
    return n + 4 * n + 0.9 * n * 8;
}

void attn_train_plan_env_of(const attn_gpt_config *m, const attn_train_config *t,
                            const attn_train_plan_env *env, attn_train_plan *p) {
    const attn_train_plan_env none = {0};
    if (!env) env = &none;
    const double T = m->context_length;
    p->n_params = (size_t)attn_gpt_config_params(m);
    const int accum = t->grad_accum > 1 ? t->grad_accum : 1;
    p->tokens_per_step = (double)t->batch_size * T * accum;
    const attn_mem_run run = {.mode = ATTN_MEM_TRAIN,
                              .batch = t->batch_size,
                              .grad_accum = accum,
                              .lean_head = m->vocab_size >= ATTN_TRAIN_LEAN_VOCAB,
                              .resume = env->resume,
                              .stream = t->dropout_stream,
                              .precision = env->precision,
                              .threads = env->threads,
                              .gpt2_tokenizer = t->tokenizer == ATTN_TOKENIZER_GPT2,
                              .data_bytes = corpus_bytes(t, env->corpus_bytes)};
    attn_memory_plan(m, &run, &p->mem);
    const attn_mem_plan *mp = &p->mem;
    p->state_bytes = mp->weights + mp->grads + mp->optimizer + mp->accum;
    p->act_bytes = mp->activations + mp->head + mp->bf16;
    p->mem_bytes = mp->total;
    /* model.safetensors + train_state.safetensors (weights, m, v). */
    p->ckpt_bytes = (double)p->n_params * 4 * 3;
    /* attn/cost.h's rule: the weight products 3x, the causal half of
     * attention 3.5x, for each micro-batch. */
    p->flops_per_step = accum * attn_gpt_flops_step(m, t->batch_size, T);
}

void attn_train_plan_of(const attn_gpt_config *m, const attn_train_config *t, attn_train_plan *p) {
    attn_train_plan_env_of(m, t, NULL, p);
}

double attn_train_probe_gflops(int threads) {
    enum { N = 384 };
    float *a = malloc(sizeof(float) * N * N * 3);
    if (!a) return 0;
    float *b = a + N * N, *c = b + N * N;
    for (int i = 0; i < N * N; i++)
        a[i] = b[i] = (float)(i % 17) * 0.01f;
    attn_sgemm(threads, 0, 0, N, N, N, 1.0f, a, N, b, N, 0.0f, c, N); /* warm-up */
    /* The median of ROUNDS short rounds: one 0.2 s window moved with
     * whatever else ran then (two calls minutes apart planned 5 h and 9 h);
     * the median of nine 30 ms rounds shrugs off a few disturbed ones. */
    enum { ROUNDS = 9 };
    double rate[ROUNDS];
    for (int r = 0; r < ROUNDS; r++) {
        int reps = 0;
        const double t0 = attn_now_s();
        double dt = 0;
        while (dt < 0.03) {
            attn_sgemm(threads, 0, 0, N, N, N, 1.0f, a, N, b, N, 0.0f, c, N);
            reps++;
            dt = attn_now_s() - t0;
        }
        rate[r] = 2.0 * N * N * N * reps / dt / 1e9;
        for (int i = r; i > 0 && rate[i - 1] > rate[i]; i--) { /* insertion: keep sorted */
            const double x = rate[i];
            rate[i] = rate[i - 1];
            rate[i - 1] = x;
        }
    }
    free(a);
    return rate[ROUNDS / 2];
}
