/* What the backward's stop saves (attn/gpt_family.h): GPT-2 124M's training
 * step (zero the gradients, forward, backward; the lean head, as the trainer
 * runs this vocabulary) at batch 4 x 64 tokens, with every tensor trainable
 * and with chapter 6's freezing (everything but the last block, final_norm
 * and out_head), for the language model's head (50,257 wide) and a
 * classifier's (2 wide, chapter 6's out_head = nn.Linear(768, 2)). Rounds
 * alternate the two freezings; each prints the median of REPS steps after a
 * warm-up, and the summary the median over rounds.
 * Not part of the build:
 *   gcc -O2 -Iinclude bench/frozen_step.c -Lbuild -lattn -lm \
 *       -Wl,-rpath,$PWD/build -o /tmp/frozen_step && /tmp/frozen_step [fp32|bf16] [rounds] */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "attn/gpt_family.h"

enum { B = 4, T = 64, REPS = 5 };

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int cmp(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void die(const char *what, const attn_error *err) {
    fprintf(stderr, "frozen_step: %s: %s\n", what, err->msg);
    exit(1);
}

/* Median seconds of REPS steps (one warm-up first) of a fresh model. */
static double time_steps(int width, int frozen, attn_precision prec) {
    attn_gpt_config cfg;
    attn_error err;
    if (attn_gpt_config_preset("gpt2-124m", &cfg, &err)) die("preset", &err);
    cfg.drop_rate = 0.0;
    cfg.tie_weights = width ? 0 : cfg.tie_weights;
    const attn_gpt_build opts = {.head_width = width, .head_bias = width != 0};
    attn_rng rng;
    attn_rng_seed(&rng, 1);
    attn_gpt m;
    if (attn_gpt_init_family(&m, &cfg, NULL, &opts, &rng, &err)) die("init", &err);
    if (attn_gpt_set_precision(&m, prec, &err)) die("precision", &err);
    char p[32];
    for (int l = 0; frozen && l < cfg.n_layers - 1; l++) {
        snprintf(p, sizeof p, "trf_blocks.%d.", l);
        if (attn_gpt_set_trainable(&m, p, 0, &err)) die("freeze", &err);
    }
    if (frozen && (attn_gpt_set_trainable(&m, "tok_emb.", 0, &err) ||
                   attn_gpt_set_trainable(&m, "pos_emb.", 0, &err)))
        die("freeze", &err);
    attn_gpt_acts acts;
    if (attn_gpt_acts_init_lean(&acts, &m, B, T, &err)) die("acts", &err);
    static int32_t ids[B * T], tg[B * T];
    const int classes = attn_gpt_head_width(&m);
    for (int i = 0; i < B * T; i++)
        ids[i] = (int32_t)((i * 7919) % cfg.vocab_size), tg[i] = (int32_t)((i * 31) % classes);
    double t[REPS];
    for (int r = -1; r < REPS; r++) {
        const double t0 = now();
        attn_gpt_zero_grad_deferred(&m);
        if (attn_gpt_forward_backward(&m, ids, tg, B, T, NULL, &acts, 1.0f, NULL, &err))
            die("step", &err);
        if (r >= 0) t[r] = now() - t0;
    }
    qsort(t, REPS, sizeof *t, cmp);
    attn_gpt_acts_free(&acts);
    attn_gpt_free(&m);
    return t[REPS / 2];
}

int main(int argc, char **argv) {
    const attn_precision prec =
        argc > 1 && strcmp(argv[1], "bf16") == 0 ? ATTN_PRECISION_BF16 : ATTN_PRECISION_FP32;
    const int rounds = argc > 2 ? atoi(argv[2]) : 3;
    for (int w = 0; w < 2; w++) {
        const int width = w ? 2 : 0;
        double all[16], top[16];
        for (int r = 0; r < rounds && r < 16; r++) {
            all[r] = time_steps(width, 0, prec);
            top[r] = time_steps(width, 1, prec);
            printf("round %d head %s: all trainable %.4f s, last block + norm + head %.4f s\n", r,
                   width ? "2" : "50257", all[r], top[r]);
            fflush(stdout);
        }
        qsort(all, (size_t)rounds, sizeof *all, cmp);
        qsort(top, (size_t)rounds, sizeof *top, cmp);
        printf("head %s (%s): median all %.4f s, frozen %.4f s, saved %.0f%%\n",
               width ? "2" : "50257", argc > 1 ? argv[1] : "fp32", all[rounds / 2], top[rounds / 2],
               100.0 * (1.0 - top[rounds / 2] / all[rounds / 2]));
    }
    return 0;
}
