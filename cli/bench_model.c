/* attn bench train / attn bench generate — whole-model timings of a preset
 * (training steps with their page faults, KV-cached generation), one
 * key=value line each, for bench/bench_model.sh and PyTorch's figures next to
 * them. Dispatched from cmd_bench.c. */
#define _DEFAULT_SOURCE /* clock_gettime, setenv */
#include <cblas.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "attn/engine.h"
#include "attn/fileio.h"
#include "attn/flash_attention.h"
#include "attn/train.h"
#include "clock.h"
#include "commands.h"
#include "threads.h"

static void usage(FILE *out) {
    fprintf(out,
            "usage: attn bench train [--preset NAME] [--steps N] [--batch-size N] [--threads N]\n"
            "                        [--precision fp32|bf16] [--data FILE]\n"
            "       attn bench generate [--preset NAME] [--tokens N] [--threads N]\n"
            "                        [--precision fp32|bf16]\n"
            "  train: one untimed first step (it allocates the lazily sized buffers), then\n"
            "  --steps timed steps (default 3) of the preset's model (default seed004) on\n"
            "  FILE (default data/tinyshakespeare.txt), batch from the preset's recipe\n"
            "  unless --batch-size. Prints median/min step seconds, tokens/s, model\n"
            "  GFLOP/s (6 N params-in-matmuls + causal attention) and minor page faults\n"
            "  of the first step and per later step (getrusage).\n"
            "  generate: a randomly initialised model of the preset, greedy, --tokens\n"
            "  (default 200, at most context_length) KV-cached steps from one token;\n"
            "  prints tokens/s, and the fastest and median single token (ms).\n");
}

static long minor_faults(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_minflt;
}

static int cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

typedef struct model_args {
    const char *preset, *data;
    int steps, batch, threads, tokens;
    attn_precision precision;
} model_args;

static int parse(int argc, char **argv, model_args *a) {
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i];
        if (strcmp(o, "--help") == 0) {
            usage(stdout);
            exit(0);
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "attn bench %s: unknown or incomplete option '%s'\n", argv[0], o);
            return -1;
        }
        const char *v = argv[++i];
        int *target = NULL;
        if (strcmp(o, "--preset") == 0) {
            a->preset = v;
            continue;
        }
        if (strcmp(o, "--data") == 0) {
            a->data = v;
            continue;
        }
        if (strcmp(o, "--precision") == 0) {
            attn_error err;
            if (attn_precision_parse(v, &a->precision, &err) != ATTN_OK) {
                fprintf(stderr, "attn bench %s: %s\n", argv[0], err.msg);
                return -1;
            }
            continue;
        }
        if (strcmp(o, "--steps") == 0)
            target = &a->steps;
        else if (strcmp(o, "--batch-size") == 0)
            target = &a->batch;
        else if (strcmp(o, "--threads") == 0)
            target = &a->threads;
        else if (strcmp(o, "--tokens") == 0)
            target = &a->tokens;
        if (!target) {
            fprintf(stderr, "attn bench %s: unknown option '%s'\n", argv[0], o);
            return -1;
        }
        char *end = NULL;
        const long x = strtol(v, &end, 10);
        if (!end || *end || end == v || x < 1 || x > 1000000) {
            fprintf(stderr, "attn bench %s: %s needs an integer in [1, 1000000], not '%s'\n",
                    argv[0], o, v);
            return -1;
        }
        *target = (int)x;
    }
    return 0;
}

/* FLOPs of one training step: forward + backward (3x) of every matmul with a
 * weight (2 N per weight element), and of the causal attention (2 B C T (T+1)
 * per layer forward, 3.5x with backward, as `attn bench mha` counts it). */
static double step_flops(const attn_gpt_config *c, int B, int T) {
    const double N = (double)B * T, C = c->emb_dim, L = c->n_layers;
    const double weights = L * 12.0 * C * C + C * c->vocab_size;
    return 3.0 * 2.0 * N * weights + 3.5 * L * 2.0 * B * C * T * (T + 1.0);
}

static int bench_train(const model_args *a) {
    attn_error err;
    attn_error_clear(&err);
    attn_gpt_config mcfg;
    attn_train_config tcfg;
    if (attn_train_preset(a->preset, &mcfg, &tcfg, &err)) {
        fprintf(stderr, "attn bench train: %s\n", err.msg);
        return 2;
    }
    if (a->batch > 0) tcfg.batch_size = a->batch;
    tcfg.max_steps = a->steps + 1;
    char *text = NULL;
    size_t n = 0;
    if (attn_file_read_all(a->data, 0, (void **)&text, &n, &err)) {
        fprintf(stderr, "attn bench train: cannot read the corpus: %s\n", err.msg);
        return 1;
    }
    attn_trainer tr;
    attn_status s = attn_trainer_init(&tr, &mcfg, &tcfg, 0, text, n, &err);
    free(text);
    if (s == ATTN_OK) s = attn_gpt_set_precision(&tr.model, a->precision, &err);
    if (s) {
        fprintf(stderr, "attn bench train: %s\n", err.msg);
        return 1;
    }
    double *t = malloc((size_t)a->steps * sizeof *t);
    if (!t) {
        fprintf(stderr, "attn bench train: out of memory\n");
        attn_trainer_free(&tr);
        return 1;
    }
    attn_train_record rec;
    long f0 = minor_faults();
    double t0 = attn_now_s();
    s = attn_trainer_step(&tr, &rec, &err);
    const double first_s = attn_now_s() - t0;
    const long first_faults = minor_faults() - f0;
    f0 = minor_faults();
    for (int i = 0; i < a->steps && s == ATTN_OK; i++) {
        t0 = attn_now_s();
        s = attn_trainer_step(&tr, &rec, &err);
        t[i] = attn_now_s() - t0;
    }
    const long later_faults = minor_faults() - f0;
    if (s) {
        fprintf(stderr, "attn bench train: %s\n", err.msg);
        free(t);
        attn_trainer_free(&tr);
        return 1;
    }
    qsort(t, (size_t)a->steps, sizeof *t, cmp_double);
    const double med =
        a->steps % 2 ? t[a->steps / 2] : 0.5 * (t[a->steps / 2 - 1] + t[a->steps / 2]);
    const int B = tcfg.batch_size, T = tr.mcfg.context_length;
    const double flops = step_flops(&tr.mcfg, B, T);
    printf("case=train preset=%s B=%d T=%d precision=%s threads=%d steps=%d median_s=%.4f "
           "min_s=%.4f first_s=%.4f tokens_per_s=%.0f gflops=%.2f faults_first=%ld "
           "faults_per_step=%.1f loss=%.4f\n",
           a->preset, B, T, attn_precision_name(a->precision), a->threads, a->steps, med, t[0],
           first_s, (double)B * T / med, flops / med * 1e-9, first_faults,
           (double)later_faults / a->steps, (double)rec.loss);
    fflush(stdout);
    free(t);
    attn_trainer_free(&tr);
    return 0;
}

static int bench_generate(const model_args *a) {
    attn_error err;
    attn_error_clear(&err);
    attn_gpt_config cfg;
    if (attn_gpt_config_preset(a->preset, &cfg, &err)) {
        fprintf(stderr, "attn bench generate: %s\n", err.msg);
        return 2;
    }
    attn_rng rng;
    attn_rng_seed(&rng, 1337);
    attn_gpt m;
    if (attn_gpt_init(&m, &cfg, &rng, &err)) {
        fprintf(stderr, "attn bench generate: %s\n", err.msg);
        return 1;
    }
    attn_gpt_kv_cache c;
    if (attn_gpt_kv_init(&c, &m, &err) || attn_gpt_kv_set_precision(&c, &m, a->precision, &err)) {
        fprintf(stderr, "attn bench generate: %s\n", err.msg);
        attn_gpt_free(&m);
        return 1;
    }
    const int n = a->tokens < cfg.context_length ? a->tokens : cfg.context_length;
    int32_t tok = 0;
    attn_status s = ATTN_OK;
    /* One untimed pass over a few positions warms the weights' pages. */
    for (int i = 0; i < 4 && s == ATTN_OK; i++)
        s = attn_gpt_kv_step(&m, &c, tok, NULL, &err);
    attn_gpt_kv_reset(&c);
    const long f0 = minor_faults();
    const double t0 = attn_now_s();
    /* The fastest and median single token as well: on a shared machine the
     * fastest is the step that ran without being preempted. */
    double fastest = 1e30, times[1024];
    int nt = 0;
    for (int i = 0; i < n && s == ATTN_OK; i++) {
        const double ts = attn_now_s();
        s = attn_gpt_kv_step(&m, &c, tok, NULL, &err);
        const double tt = attn_now_s() - ts;
        if (tt < fastest) fastest = tt;
        if (nt < 1024) times[nt++] = tt;
        int best = 0;
        for (int v = 1; v < cfg.vocab_size; v++)
            if (c.logits[v] > c.logits[best]) best = v;
        tok = best;
    }
    const double dt = attn_now_s() - t0;
    const long faults = minor_faults() - f0;
    qsort(times, (size_t)nt, sizeof *times, cmp_double);
    if (s == ATTN_OK)
        printf("case=generate preset=%s precision=%s threads=%d tokens=%d seconds=%.4f "
               "tokens_per_s=%.1f faults=%ld fastest_token_ms=%.3f median_token_ms=%.3f\n",
               a->preset, attn_precision_name(a->precision), a->threads, n, dt, n / dt, faults,
               fastest * 1e3, nt ? times[nt / 2] * 1e3 : 0.0);
    else
        fprintf(stderr, "attn bench generate: %s\n", err.msg);
    attn_gpt_kv_free(&c);
    attn_gpt_free(&m);
    return s == ATTN_OK ? 0 : 1;
}

int cmd_bench_model(int argc, char **argv) {
    model_args a = {"seed004", "data/tinyshakespeare.txt", 3, 0, 0, 200, ATTN_PRECISION_FP32};
    if (parse(argc, argv, &a) != 0) {
        usage(stderr);
        return 2;
    }
    if (a.threads <= 0) a.threads = attn_default_threads();
    cli_use_threads(a.threads, 1);
    return strcmp(argv[0], "train") == 0 ? bench_train(&a) : bench_generate(&a);
}
