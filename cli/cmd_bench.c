/* attn bench — time MultiHeadAttention (fused or step-by-step), the fused
 * attention kernel alone and an sgemm of the same size, one key=value line per
 * case, so runs can be compared with PyTorch (bench/bench_mha.py) and the
 * GFLOP/s read as a fraction of this machine's sgemm rate. */
#define _DEFAULT_SOURCE /* clock_gettime, setenv, madvise */
#include <cblas.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>

#include "attn/engine.h"
#include "attn/flash_attention.h"
#include "attn/gemm.h"
#include "attn/multi_head_attention.h"
#include "clock.h"
#include "commands.h"
#include "threads.h"

static void bench_usage(FILE *out) {
    fprintf(out,
            "usage: attn bench mha --batch B --tokens T --d-model D --heads H [--backward]\n"
            "                      [--repeat N] [--warmup N] [--threads N] [--reference]\n"
            "                      [--mha-only] [--simd PATH] [--block-q N --block-k N]\n"
            "                      [--dropout P [--rng torch-cpu|torch-mkl]]\n"
            "                      [--precision fp32|bf16]\n"
            "       attn bench sgemm [--m M] [--n N] [--k K] [--repeat N] [--threads N]\n"
            "                        [--precision fp32|bf16]\n"
            "       attn bench train|generate ... (whole model; attn bench train --help)\n"
            "  mha: times MultiHeadAttention forward (and backward with --backward) on the\n"
            "  fused path, or the step-by-step path with --reference, then the fused attention\n"
            "  kernel alone (case=core) and an sgemm of the QKV projection's size (case=sgemm;\n"
            "  both skipped with --mha-only). --warmup runs (default 1) are not timed.\n"
            "  One line per case: case B T D H mode threads median_s min_s gflops peak_rss_mb.\n"
            "  FLOPs count the causal half only: projections 8 B T D^2 (x3 with backward),\n"
            "  attention 2 B D T (T+1) (x3.5 with backward).\n"
            "  --threads defaults to OMP_NUM_THREADS, else the CPUs this process may use;\n"
            "  --simd is auto|generic|avx2|avx512 (or the ATTN_SIMD variable).\n"
            "  --precision bf16: the bf16 engine (oneDNN products, the bf16 attention kernel).\n"
            "  --rng is the dropout stream: torch-mkl by default, as in `attn chapter3`\n"
            "  and `attn rng` (`attn forward` defaults to torch-cpu, Debian's PyTorch).\n");
}

static double peak_rss_mb(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_maxrss / 1024.0; /* ru_maxrss is in KiB on Linux */
}

static int cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

typedef struct timing {
    double median, min;
} timing;

static timing summarize(double *t, int n) {
    qsort(t, (size_t)n, sizeof *t, cmp_double);
    timing r = {n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]), t[0]};
    return r;
}

static void print_case(const char *name, int B, int T, int D, int H, const char *mode, int threads,
                       timing t, double flops) {
    printf("case=%s B=%d T=%d D=%d H=%d mode=%s threads=%d median_s=%.6f min_s=%.6f gflops=%.2f "
           "peak_rss_mb=%.1f\n",
           name, B, T, D, H, mode, threads, t.median, t.min, flops / t.median * 1e-9,
           peak_rss_mb());
    fflush(stdout);
}

typedef struct bench_args {
    int B, T, D, H, backward, repeat, warmup, threads, reference, mha_only, block_q, block_k;
    int m, n, k;
    attn_simd simd;
    double dropout;
    attn_dropout_stream stream;
    attn_precision precision;
} bench_args;

static int parse_int(const char *v, int *out, int min) {
    char *end = NULL;
    const long x = strtol(v, &end, 10);
    if (!end || *end || end == v || x < min || x > 1000000000) return -1;
    *out = (int)x;
    return 0;
}

static int parse_args(int argc, char **argv, bench_args *a) {
    for (int i = 2; i < argc; i++) {
        const char *o = argv[i];
        if (strcmp(o, "--backward") == 0) {
            a->backward = 1;
            continue;
        }
        if (strcmp(o, "--reference") == 0) {
            a->reference = 1;
            continue;
        }
        if (strcmp(o, "--mha-only") == 0) {
            a->mha_only = 1;
            continue;
        }
        if (strcmp(o, "--help") == 0) {
            bench_usage(stdout);
            exit(0);
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "attn bench: unknown or incomplete option '%s'\n", o);
            return -1;
        }
        const char *v = argv[++i];
        int *target = NULL;
        if (strcmp(o, "--batch") == 0)
            target = &a->B;
        else if (strcmp(o, "--tokens") == 0)
            target = &a->T;
        else if (strcmp(o, "--d-model") == 0)
            target = &a->D;
        else if (strcmp(o, "--heads") == 0)
            target = &a->H;
        else if (strcmp(o, "--repeat") == 0)
            target = &a->repeat;
        else if (strcmp(o, "--warmup") == 0)
            target = &a->warmup;
        else if (strcmp(o, "--block-q") == 0)
            target = &a->block_q;
        else if (strcmp(o, "--block-k") == 0)
            target = &a->block_k;
        else if (strcmp(o, "--threads") == 0)
            target = &a->threads;
        else if (strcmp(o, "--m") == 0)
            target = &a->m;
        else if (strcmp(o, "--n") == 0)
            target = &a->n;
        else if (strcmp(o, "--k") == 0)
            target = &a->k;
        if (target) {
            const int min = target == &a->warmup ? 0 : 1;
            if (parse_int(v, target, min) != 0) {
                fprintf(stderr, "attn bench: %s needs an integer >= %d, not '%s'\n", o, min, v);
                return -1;
            }
        } else if (strcmp(o, "--simd") == 0) {
            if (attn_simd_parse(v, &a->simd) != 0 || !attn_simd_supported(a->simd)) {
                fprintf(stderr, "attn bench: --simd '%s' is unknown or not supported here\n", v);
                return -1;
            }
        } else if (strcmp(o, "--dropout") == 0) {
            char *end = NULL;
            a->dropout = strtod(v, &end);
            if (!end || *end || !(a->dropout >= 0.0 && a->dropout < 1.0)) {
                fprintf(stderr, "attn bench: --dropout must be in [0, 1), not '%s'\n", v);
                return -1;
            }
        } else if (strcmp(o, "--precision") == 0) {
            attn_error perr;
            if (attn_precision_parse(v, &a->precision, &perr) ||
                attn_precision_check(a->precision, &perr)) {
                fprintf(stderr, "attn bench: %s\n", perr.msg);
                return -1;
            }
        } else if (strcmp(o, "--rng") == 0) {
            if (attn_dropout_stream_parse(v, &a->stream) != 0) {
                fprintf(stderr, "attn bench: --rng must be torch-cpu or torch-mkl, not '%s'\n", v);
                return -1;
            }
        } else {
            fprintf(stderr, "attn bench: unknown option '%s'\n", o);
            return -1;
        }
    }
    return 0;
}

/* Large buffers on transparent huge pages, as the library's own
 * activations are (one head's slice of a row per 4 KiB page otherwise). */
static float *alloc_floats(size_t n) {
    void *p = NULL;
    const size_t huge = (size_t)2 << 20, bytes = (n * sizeof(float) + huge - 1) / huge * huge;
    if (posix_memalign(&p, huge, bytes) != 0) return NULL;
    (void)madvise(p, bytes, MADV_HUGEPAGE);
    return p;
}

static float *random_floats(size_t n, uint64_t seed) {
    float *p = alloc_floats(n);
    if (!p) return NULL;
    attn_rng rng;
    attn_rng_seed(&rng, seed);
    attn_rng_uniform(&rng, p, n, -1.0f, 1.0f);
    return p;
}

static int bench_sgemm(const bench_args *a, const char *label, int M, int N, int K) {
    float *A = random_floats((size_t)M * K, 1), *Bm = random_floats((size_t)N * K, 2);
    float *C = calloc((size_t)M * N, sizeof(float));
    double *t = malloc((size_t)a->repeat * sizeof(double));
    attn_bf16_gemm *g = NULL; /* --precision bf16: the bf16 engine's product instead */
    attn_error err;
    if (a->precision == ATTN_PRECISION_BF16 && attn_bf16_gemm_create(&g, &err) != ATTN_OK) {
        fprintf(stderr, "attn bench: %s\n", err.msg);
        free(A), free(Bm), free(C), free(t);
        return 1;
    }
    if (!A || !Bm || !C || !t) {
        fprintf(stderr, "attn bench: out of memory for sgemm %dx%dx%d\n", M, N, K);
        free(A), free(Bm), free(C), free(t);
        attn_bf16_gemm_free(g);
        return 1;
    }
    /* C = A B^T, as a Linear layer runs it (attn_gemm: the call attn uses) */
    attn_gemm(g, a->threads, 0, 1, M, N, K, 1.0f, A, K, Bm, K, 0.0f, C, N);
    for (int r = 0; r < a->repeat; r++) {
        const double t0 = attn_now_s();
        attn_gemm(g, a->threads, 0, 1, M, N, K, 1.0f, A, K, Bm, K, 0.0f, C, N);
        t[r] = attn_now_s() - t0;
    }
    char mode[64];
    snprintf(mode, sizeof mode, "%dx%dx%d%s", M, N, K, g ? ",bf16" : "");
    print_case(label, a->B, a->T, a->D, a->H, mode, a->threads, summarize(t, a->repeat),
               2.0 * M * N * (double)K);
    free(A), free(Bm), free(C), free(t);
    attn_bf16_gemm_free(g);
    return 0;
}

static int bench_mha(const bench_args *a) {
    attn_error err;
    attn_rng rng;
    attn_rng_seed(&rng, 123);
    attn_mha m;
    if (attn_mha_init(&m, a->D, a->D, a->T, a->dropout, a->H, 0, &rng, &err) != ATTN_OK) {
        fprintf(stderr, "attn bench: %s\n", err.msg);
        return 2;
    }
    m.path = a->reference ? ATTN_MHA_REFERENCE : ATTN_MHA_FUSED;
    attn_bf16_gemm *bf16 = NULL; /* --precision bf16: the projections in bf16 */
    if (a->precision == ATTN_PRECISION_BF16) {
        if (attn_bf16_gemm_create(&bf16, &err) != ATTN_OK) {
            fprintf(stderr, "attn bench: %s\n", err.msg);
            attn_mha_free(&m);
            return 1;
        }
        m.bf16 = m.out_proj.bf16 = m.W_query.bf16 = m.W_key.bf16 = m.W_value.bf16 = bf16;
    }
    m.flash.threads = a->threads;
    m.flash.simd = a->simd;
    m.flash.block_q = a->block_q;
    m.flash.block_k = a->block_k;
    const size_t n = (size_t)a->B * a->T * a->D;
    float *x = random_floats(n, 7), *dy = random_floats(n, 8);
    float *y = alloc_floats(n), *dx = alloc_floats(n);
    double *t = malloc((size_t)a->repeat * sizeof(double));
    attn_attention_cache cache;
    int rc = 1;
    if (!x || !dy || !y || !dx || !t) {
        fprintf(stderr, "attn bench: out of memory\n");
        goto done;
    }
    memset(dx, 0, n * sizeof(float));
    if (attn_mha_cache_init(&cache, &m, a->B, a->T, &err) != ATTN_OK) {
        fprintf(stderr, "attn bench: %s\n", err.msg);
        goto done;
    }
    attn_rng drop;
    attn_rng_seed(&drop, 1);
    const attn_forward_mode mode = {a->dropout > 0.0, &drop, a->stream};
    for (int r = -a->warmup; r < a->repeat; r++) { /* r < 0 warms up */
        const double t0 = attn_now_s();
        if (attn_mha_forward(&m, x, a->B, a->T, y, &mode, &cache, &err) != ATTN_OK ||
            (a->backward &&
             attn_mha_backward(&m, x, a->B, a->T, dy, dx, &cache, &err) != ATTN_OK)) {
            fprintf(stderr, "attn bench: %s\n", err.msg);
            attn_attention_cache_free(&cache);
            goto done;
        }
        if (r >= 0) t[r] = attn_now_s() - t0;
    }
    const double N = (double)a->B * a->T, D = a->D;
    const double proj = 8.0 * N * D * D, core = 2.0 * a->B * D * a->T * (a->T + 1.0);
    const double flops = a->backward ? 3.0 * proj + 3.5 * core : proj + core;
    const char *mode_name = a->backward
                                ? (a->precision ? "forward+backward,bf16" : "forward+backward")
                                : (a->precision ? "forward,bf16" : "forward");
    print_case(a->reference ? "mha_reference" : "mha", a->B, a->T, a->D, a->H, mode_name,
               a->threads, summarize(t, a->repeat), flops);
    attn_attention_cache_free(&cache);
    rc = 0;

    if (!a->reference && !a->mha_only) {
        /* The attention kernel alone on the packed layout, same sizes. */
        const int hd = a->D / a->H;
        const size_t ld = 3 * (size_t)a->D, nq = (size_t)a->B * a->T;
        float *qkv = random_floats(nq * ld, 9), *o = alloc_floats(n);
        float *lse = malloc((size_t)a->B * a->H * a->T * sizeof(float));
        float *dqkv = alloc_floats(nq * ld);
        attn_flash_workspace ws = {0};
        attn_flash_options opt = {.threads = a->threads,
                                  .simd = a->simd,
                                  .block_q = a->block_q,
                                  .block_k = a->block_k,
                                  .precision = a->precision};
        attn_flash_problem pb = {a->B, a->T, a->H, hd, qkv,          qkv + a->D, qkv + 2 * a->D,
                                 ld,   ld,   ld,   o,  (size_t)a->D, lse,        NULL};
        attn_flash_grads g = {dy, (size_t)a->D, dqkv, dqkv + a->D, dqkv + 2 * a->D, ld, ld, ld};
        if (!qkv || !o || !lse || !dqkv) {
            fprintf(stderr, "attn bench: out of memory\n");
            rc = 1;
        } else
            memset(dqkv, 0, nq * ld * sizeof(float));
        for (int r = -a->warmup; rc == 0 && r < a->repeat; r++) {
            const double t0 = attn_now_s();
            if (attn_flash_forward(&pb, &opt, &ws, &err) != ATTN_OK ||
                (a->backward && attn_flash_backward(&pb, &g, &opt, &ws, &err) != ATTN_OK)) {
                fprintf(stderr, "attn bench: %s\n", err.msg);
                rc = 1;
                break;
            }
            if (r >= 0) t[r] = attn_now_s() - t0;
        }
        if (rc == 0)
            print_case("core", a->B, a->T, a->D, a->H, mode_name, a->threads,
                       summarize(t, a->repeat), a->backward ? 3.5 * core : core);
        attn_flash_workspace_free(&ws);
        free(qkv), free(o), free(lse), free(dqkv);
        if (rc == 0) rc = bench_sgemm(a, "sgemm", a->B * a->T, 3 * a->D, a->D);
    }
done:
    attn_mha_free(&m);
    attn_bf16_gemm_free(bf16);
    free(x), free(dy), free(y), free(dx), free(t);
    return rc;
}

int cmd_bench(int argc, char **argv) {
    if (argc < 2 || strcmp(argv[1], "--help") == 0) {
        bench_usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (strcmp(argv[1], "train") == 0 || strcmp(argv[1], "generate") == 0)
        return cmd_bench_model(argc - 1, argv + 1);
    bench_args a = {0};
    a.B = 8;
    a.T = 1024;
    a.D = 768;
    a.H = 12;
    a.repeat = 5;
    a.warmup = 1;
    a.stream = ATTN_STREAM_TORCH_MKL;
    if (parse_args(argc, argv, &a) != 0) {
        bench_usage(stderr);
        return 2;
    }
    if (a.threads <= 0) a.threads = attn_default_threads();
    /* One thread count everywhere. The fused path runs a single pool
     * (OpenMP; OpenBLAS single-threaded inside it, see attn/gemm.h); the
     * reference path lets OpenBLAS thread its own calls, as it was written. */
    cli_use_threads(a.threads, a.reference ? a.threads : 1);
    if (strcmp(argv[1], "sgemm") == 0) {
        const int M = a.m ? a.m : a.B * a.T, N = a.n ? a.n : 3 * a.D, K = a.k ? a.k : a.D;
        return bench_sgemm(&a, "sgemm", M, N, K);
    }
    if (strcmp(argv[1], "mha") != 0) {
        fprintf(stderr, "attn bench: unknown benchmark '%s' (mha, sgemm, train or generate)\n",
                argv[1]);
        bench_usage(stderr);
        return 2;
    }
    if (a.D % a.H != 0) {
        fprintf(stderr, "attn bench: --d-model (%d) must be divisible by --heads (%d)\n", a.D, a.H);
        return 2;
    }
    return bench_mha(&a);
}
