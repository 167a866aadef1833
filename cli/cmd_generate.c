/* attn generate — sample text from a trained checkpoint with the KV cache:
 * temperature, top-k and top-p (nucleus) sampling, greedy at temperature 0. */
#define _POSIX_C_SOURCE 200809L /* sigaction, clock_gettime, mkdtemp */

#include <cblas.h>
#include <errno.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "attn/cuda.h"
#include "attn/generate.h"
#include "attn/sample.h"
#include "attn/train.h"
#include "commands.h"
#include "threads.h"

static void generate_usage(FILE *out) {
    fprintf(out,
            "usage: attn generate --checkpoint DIR [--prompt TEXT] [--max-new-tokens 500]\n"
            "                     [--temperature 0.8] [--top-k 200] [--top-p P] [--seed 1337]\n"
            "                     [--stop TEXT] [--window N] [--threads N]\n"
            "                     [--device cpu|cuda] [--precision fp32|bf16]\n"
            "  Prints the prompt (default: a newline) followed by max-new-tokens sampled\n"
            "  characters. Temperature 0 is greedy, and so is one too small to scale by\n"
            "  (below 1.2e-38, the smallest normal float); top-k 0 and top-p 1 disable those\n"
            "  filters. Once the context is full the window slides: the model re-reads\n"
            "  the last context_length/2 characters (--window N: the last N, 1 <= N <\n"
            "  context_length) and continues (O(T) per token). --stop TEXT ends the\n"
            "  output once it ends with TEXT (included). --threads N: OpenMP threads.\n"
            "  Sampling runs on the library's attn_generator (attn/generate.h); --stop\n"
            "  and --window are CPU only.\n"
            "  Tokens per second go to stderr at the end. --precision bf16 streams bf16\n"
            "  copies of the weights (half the bytes per token; sums stay fp32).\n");
}

/* --device cuda: the GPU has no KV cache; it runs the whole window the
 * CPU's cache would hold (same positions, same logits up to rounding). */
typedef struct {
    attn_cuda_gpt *g;
    float *logits; /* V: last token's logits */
    int len;       /* tokens in the window */
    int V;
} gpu_window;

static attn_status gpu_prefill(gpu_window *w, const int32_t *ids, int n, attn_error *err) {
    attn_status s = attn_cuda_gpt_forward(w->g, ids, NULL, 1, n, NULL, NULL, err);
    if (!s) s = attn_cuda_gpt_logits(w->g, (size_t)n - 1, 1, w->logits, err);
    w->len = n;
    return s;
}

/* The CPU path: the library's generator (attn/generate.h). */
static int generate_cpu(const attn_gpt *model, const attn_tokenizer *tok, const char *prompt,
                        long max_new, const attn_generate_options *o) {
    attn_generator g;
    attn_error err;
    if (attn_generator_init(&g, model, tok, o, &err)) {
        fprintf(stderr, "attn generate: %s\n", err.msg);
        return 2; /* the options */
    }
    int rc = 1;
    if (attn_generator_prompt(&g, prompt, strlen(prompt), &err)) {
        fprintf(stderr, "attn generate: prompt: %s\n", err.msg);
        goto out;
    }
    fputs(prompt, stdout);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (long i = 0; i < max_new && !g.stopped; i++) {
        char u8[8];
        int k;
        if (attn_generator_next(&g, NULL, u8, &k, &err)) {
            fprintf(stderr, "\nattn generate: %s\n", err.msg);
            goto out;
        }
        fwrite(u8, 1, (size_t)k, stdout);
    }
    fputc('\n', stdout);
    fflush(stdout);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double dt = (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) * 1e-9;
    fprintf(stderr, "attn generate: %lld tokens in %.2f s (%.0f tokens/s)\n", (long long)g.produced,
            dt, dt > 0 ? (double)g.produced / dt : 0.0);
    rc = 0;
out:
    attn_generator_free(&g);
    return rc;
}

int cmd_generate(int argc, char **argv) {
    const char *ckpt = NULL, *prompt = "\n";
    attn_error err;
    long max_new = 500, top_k = 200;
    double temperature = 0.8, top_p = 1.0;
    unsigned long long seed = 1337;
    attn_precision precision = ATTN_PRECISION_FP32;
    attn_device device = ATTN_DEVICE_CPU;
    const char *stop = NULL;
    long window_keep = 0, threads = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            generate_usage(stdout);
            return 0;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "attn generate: unknown or incomplete option '%s'\n", a);
            generate_usage(stderr);
            return 2;
        }
        const char *v = argv[++i];
        char *end = NULL; /* set by the numeric options */
        int bad = 0;
        errno = 0;
        if (strcmp(a, "--checkpoint") == 0)
            ckpt = v;
        else if (strcmp(a, "--device") == 0) {
            if (attn_device_parse(v, &device, &err)) {
                fprintf(stderr, "attn generate: --device: %s\n", err.msg);
                return 2;
            }
        } else if (strcmp(a, "--prompt") == 0)
            prompt = v;
        else if (strcmp(a, "--stop") == 0)
            stop = v;
        else if (strcmp(a, "--window") == 0) {
            window_keep = strtol(v, &end, 10);
            bad = window_keep < 1;
        } else if (strcmp(a, "--threads") == 0) {
            threads = strtol(v, &end, 10);
            bad = threads < 1;
        } else if (strcmp(a, "--precision") == 0) {
            attn_error perr;
            if (attn_precision_parse(v, &precision, &perr)) {
                fprintf(stderr, "attn generate: %s\n", perr.msg);
                return 2;
            }
        } else if (strcmp(a, "--max-new-tokens") == 0) {
            max_new = strtol(v, &end, 10);
            bad = max_new < 0;
        } else if (strcmp(a, "--temperature") == 0) {
            temperature = strtod(v, &end);
            bad = !(temperature >= 0) || !isfinite(temperature);
        } else if (strcmp(a, "--top-k") == 0) {
            top_k = strtol(v, &end, 10);
            bad = top_k < 0;
        } else if (strcmp(a, "--top-p") == 0) {
            top_p = strtod(v, &end);
            bad = !(top_p > 0 && top_p <= 1);
        } else if (strcmp(a, "--seed") == 0) {
            seed = strtoull(v, &end, 10);
            bad = v[0] == '-';
        } else {
            fprintf(stderr, "attn generate: unknown option '%s'\n", a);
            generate_usage(stderr);
            return 2;
        }
        if (end && (bad || errno || end == v || *end)) {
            fprintf(stderr, "attn generate: bad value '%s' for %s\n", v, a);
            return 2;
        }
    }
    if (!ckpt) {
        fprintf(stderr, "attn generate: --checkpoint DIR is required\n");
        generate_usage(stderr);
        return 2;
    }
    if (device != ATTN_DEVICE_CPU && (stop || window_keep)) {
        fprintf(stderr, "attn generate: --stop and --window run on --device cpu only\n");
        return 2;
    }
    cli_use_threads((int)threads, 1); /* one token at a time: tiny products */
    attn_error_clear(&err);
    attn_gpt model;
    attn_tokenizer tok;
    if (attn_gpt_load_checkpoint(ckpt, &model, &tok, NULL, &err)) {
        fprintf(stderr, "attn generate: %s\n", err.msg);
        return 1;
    }
    int rc = 1;
    const int V = model.cfg.vocab_size, ctx = model.cfg.context_length;
    if (device == ATTN_DEVICE_CPU) {
        if (window_keep >= ctx) {
            fprintf(stderr,
                    "attn generate: --window must be in 1..%d (context_length - 1), not %ld\n",
                    ctx - 1, window_keep);
            rc = 2;
        } else {
            attn_generate_options o;
            attn_generate_options_default(&o);
            o.temperature = temperature;
            o.top_k = (int)top_k;
            o.top_p = top_p;
            o.seed = seed;
            o.window_keep = (int)window_keep;
            o.stop = stop;
            o.precision = precision;
            rc = generate_cpu(&model, &tok, prompt, max_new, &o);
        }
        attn_gpt_free(&model);
        attn_tokenizer_free(&tok);
        return rc;
    }
    size_t plen = strlen(prompt), n_prompt = 0;
    int32_t *hist = NULL;
    attn_sample_candidate *buf = malloc((size_t)V * sizeof *buf);
    attn_gpt_kv_cache cache;
    memset(&cache, 0, sizeof cache);
    gpu_window gw = {NULL, NULL, 0, V};
    if (attn_utf8_count(prompt, plen, &n_prompt, &err)) {
        fprintf(stderr, "attn generate: prompt: %s\n", err.msg);
        goto out;
    }
    if (n_prompt == 0) {
        fprintf(stderr, "attn generate: the prompt is empty\n");
        goto out;
    }
    /* Only the last ctx tokens are ever needed. */
    hist = malloc(((size_t)n_prompt + (size_t)ctx + 1) * sizeof *hist);
    if (!hist || !buf) {
        fprintf(stderr, "attn generate: out of memory\n");
        goto out;
    }
    size_t got = 0;
    if (attn_tokenizer_encode(&tok, prompt, plen, hist, &got, &err)) {
        fprintf(stderr, "attn generate: prompt: %s\n", err.msg);
        goto out;
    }
    if (device == ATTN_DEVICE_CUDA) {
        gw.logits = malloc((size_t)V * sizeof *gw.logits);
        if (!gw.logits || attn_cuda_gpt_create(&gw.g, &model, 1, ctx, precision, &err)) {
            fprintf(stderr, "attn generate: --device cuda: %s\n",
                    gw.logits ? err.msg : "out of memory");
            goto out;
        }
    } else if (attn_gpt_kv_init(&cache, &model, &err) ||
               attn_gpt_kv_set_precision(&cache, &model, precision, &err)) {
        fprintf(stderr, "attn generate: %s\n", err.msg);
        goto out;
    }
    /* Keep the last ctx/2 prompt tokens in view when the prompt is long so
     * generation starts with room in the cache. */
    int n_hist = (int)got;
    int window = n_hist < ctx ? n_hist : ctx;
    attn_rng rng;
    attn_rng_seed(&rng, seed);
    fputs(prompt, stdout);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    if (max_new > 0 &&
        (gw.g ? gpu_prefill(&gw, hist + n_hist - window, window, &err)
              : attn_gpt_kv_prefill(&model, &cache, hist + n_hist - window, window, NULL, &err))) {
        fprintf(stderr, "\nattn generate: %s\n", err.msg);
        goto out;
    }
    /* hist keeps the last ctx tokens (shifted down when it fills). */
    if (window < n_hist) {
        memmove(hist, hist + n_hist - window, (size_t)window * sizeof *hist);
        n_hist = window;
    }
    char u8[8];
    for (long i = 0; i < max_new; i++) {
        int id = attn_sample_next(gw.g ? gw.logits : cache.logits, V, temperature, (int)top_k,
                                  top_p, &rng, buf);
        int k = attn_utf8_put(tok.chars[id], u8);
        fwrite(u8, 1, (size_t)k, stdout);
        if (i + 1 == max_new) break;
        if (n_hist == ctx) {
            memmove(hist, hist + 1, (size_t)(ctx - 1) * sizeof *hist);
            n_hist--;
        }
        hist[n_hist++] = id;
        attn_status s;
        if (gw.g) {
            /* The GPU reruns the window the CPU's cache would hold. */
            int len = gw.len == ctx ? (ctx / 2 > 0 ? ctx / 2 : 1) : gw.len + 1;
            s = gpu_prefill(&gw, hist + n_hist - len, len, &err);
        } else if (cache.len == cache.capacity) {
            int keep = ctx / 2 > 0 ? ctx / 2 : 1;
            s = attn_gpt_kv_prefill(&model, &cache, hist + n_hist - keep, keep, NULL, &err);
        } else {
            s = attn_gpt_kv_step(&model, &cache, id, NULL, &err);
        }
        if (s) {
            fprintf(stderr, "\nattn generate: %s\n", err.msg);
            goto out;
        }
    }
    fputc('\n', stdout);
    fflush(stdout);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double dt = (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) * 1e-9;
    fprintf(stderr, "attn generate: %ld tokens in %.2f s (%.0f tokens/s)\n", max_new, dt,
            dt > 0 ? (double)max_new / dt : 0.0);
    rc = 0;
out:
    attn_cuda_gpt_free(gw.g);
    free(gw.logits);
    attn_gpt_kv_free(&cache);
    free(hist);
    free(buf);
    attn_gpt_free(&model);
    attn_tokenizer_free(&tok);
    return rc;
}
