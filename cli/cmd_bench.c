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

#include "attn/cost.h"
#include "attn/engine.h"
#include "attn/flash_attention.h"
#include "attn/gemm.h"
#include "attn/membudget.h"
#include "attn/memory_plan.h"
#include "attn/module.h"
#include "attn/multi_head_attention.h"
#include "clock.h"
#include "commands.h"
#include "threads.h"

typedef struct bench_args {
    long long B, T, D, H, repeat, warmup, threads, block_q, block_k, m, n, k;
    long long kv_heads, window;
    int backward, reference, mha_only, dry_run;
    double dropout;
    double max_memory; /* bytes; 0: the memory available now */
    const char *simd_name, *rng, *precision_name, *positions_name;
    /* Resolved from the names after parsing: */
    attn_simd simd;
    attn_dropout_stream stream;
    attn_precision precision;
} bench_args;

enum {
    BENCH_BATCH,
    BENCH_TOKENS,
    BENCH_D_MODEL,
    BENCH_HEADS,
    BENCH_BACKWARD,
    BENCH_REPEAT,
    BENCH_WARMUP,
    BENCH_THREADS,
    BENCH_REFERENCE,
    BENCH_MHA_ONLY,
    BENCH_SIMD,
    BENCH_BLOCK_Q,
    BENCH_BLOCK_K,
    BENCH_DROPOUT,
    BENCH_RNG,
    BENCH_PRECISION,
    BENCH_M,
    BENCH_N,
    BENCH_K,
    BENCH_KV_HEADS,
    BENCH_WINDOW,
    BENCH_POSITIONS,
    BENCH_MAX_MEMORY,
    BENCH_DRY_RUN,
    BENCH_OPT_COUNT
};

#define BIG 1000000000
static const char *const simd_names[] = {"auto", "generic", "avx2", "avx512", NULL};
static const char *const position_names[] = {"none", "rope", "alibi", NULL};

#define OFF(f) offsetof(bench_args, f)
static const cli_option bench_opts_table[] = {
    [BENCH_BATCH] = {"batch", CLI_INT, "B", OFF(B), 1, BIG, .def = "8", .help = "batch size"},
    [BENCH_TOKENS] = {"tokens", CLI_INT, "T", OFF(T), 1, BIG, .def = "1024",
                      .help = "sequence length"},
    [BENCH_D_MODEL] = {"d-model", CLI_INT, "D", OFF(D), 1, BIG, .def = "768",
                       .help = "d_in = d_out"},
    [BENCH_HEADS] = {"heads", CLI_INT, "H", OFF(H), 1, BIG, .def = "12",
                     .help = "num_heads (D must be divisible by H)"},
    [BENCH_BACKWARD] = {"backward", CLI_FLAG, .offset = OFF(backward),
                        .help = "time forward + backward"},
    [BENCH_REPEAT] = {"repeat", CLI_INT, "N", OFF(repeat), 1, BIG, .def = "5",
                      .help = "timed runs (median and min are printed)"},
    [BENCH_WARMUP] = {"warmup", CLI_INT, "N", OFF(warmup), 0, BIG, .def = "1",
                      .help = "untimed runs first"},
    [BENCH_THREADS] = CLI_THREADS_OPTION(OFF(threads)),
    [BENCH_REFERENCE] = {"reference", CLI_FLAG, .offset = OFF(reference),
                         .help = "the step-by-step path instead of the fused one"},
    [BENCH_MHA_ONLY] = {"mha-only", CLI_FLAG, .offset = OFF(mha_only),
                        .help = "skip the kernel-alone and sgemm cases"},
    [BENCH_SIMD] = {"simd", CLI_CHOICE, NULL, OFF(simd_name), .choices = simd_names, .def = "auto",
                    .help = "the fused kernels' path (auto: the best this CPU has\n"
                            "under the ATTN_SIMD cap; one above the cap is refused)"},
    [BENCH_BLOCK_Q] = {"block-q", CLI_INT, "N", OFF(block_q), 1, BIG,
                       .help = "the fused kernel's query tile (default: its own)"},
    [BENCH_BLOCK_K] = {"block-k", CLI_INT, "N", OFF(block_k), 1, BIG,
                       .help = "the fused kernel's key tile (default: its own)"},
    [BENCH_DROPOUT] = {"dropout", CLI_FLOAT, "P", OFF(dropout), 0, 1, .hi_open = 1, .def = "0",
                       .help = "dropout on the attention weights (training mode)"},
    [BENCH_RNG] = {"rng", CLI_CHOICE, NULL, OFF(rng), .choices = cli_stream_choices,
                   .def = "torch-mkl",
                   .help = "the dropout stream: torch-mkl, as in `attn chapter3`\n"
                           "and `attn rng` (`attn forward` defaults to torch-cpu)"},
    [BENCH_PRECISION] = {"precision", CLI_CHOICE, NULL, OFF(precision_name),
                         .choices = cli_precision_choices, .def = "fp32",
                         .help = "bf16: the projections and the attention kernel\n"
                                 "in bf16 (sgemm: the bf16 engine's product;\n"
                                 "AVX512-BF16 CPUs)"},
    [BENCH_M] = {"m", CLI_INT, "M", OFF(m), 1, BIG, .help = "sgemm: rows (default B*T)"},
    [BENCH_N] = {"n", CLI_INT, "N", OFF(n), 1, BIG, .help = "sgemm: columns (default 3*D)"},
    [BENCH_K] = {"k", CLI_INT, "K", OFF(k), 1, BIG, .help = "sgemm: inner size (default D)"},
    [BENCH_KV_HEADS] = {"kv-heads", CLI_INT, "K", OFF(kv_heads), 1, BIG,
                        .help = "grouped-query: key/value heads, dividing H (default H)"},
    [BENCH_WINDOW] = {"window", CLI_INT, "W", OFF(window), 0, BIG, .def = "0",
                      .help = "sliding window: a query sees its last W keys (0: all)"},
    [BENCH_POSITIONS] = {"positions", CLI_CHOICE, NULL, OFF(positions_name),
                         .choices = position_names, .def = "none",
                         .help = "positions inside attention: rope or alibi"},
    [BENCH_MAX_MEMORY] = CLI_MAX_MEMORY_OPTION(OFF(max_memory)),
    [BENCH_DRY_RUN] = {"dry-run", CLI_FLAG, .offset = OFF(dry_run),
                       .help = "print the memory the run needs, then exit"},
};
CLI_TABLE_CHECK(bench_opts_table, BENCH_OPT_COUNT);

const cli_command bench_cli = {
    "bench",
    "attn bench mha [--batch B] [--tokens T] [--d-model D] [--heads H]\n"
    "                      [--backward] [--repeat N] [--warmup N] [--threads N]\n"
    "                      [--reference] [--mha-only] [--simd NAME]\n"
    "                      [--block-q N --block-k N] [--precision fp32|bf16]\n"
    "                      [--dropout P [--rng torch-cpu|torch-mkl]]\n"
    "                      [--kv-heads K] [--window W] [--positions none|rope|alibi]\n"
    "                      [--dry-run]\n"
    "       attn bench sgemm [--m M] [--n N] [--k K] [--repeat N] [--threads N]\n"
    "                        [--precision fp32|bf16] [--dry-run]\n"
    "       attn bench train|generate ... (whole model; attn bench train --help)",
    "  mha: times MultiHeadAttention forward (and backward with --backward) on\n"
    "  the fused path, or the step-by-step path with --reference, then the fused\n"
    "  attention kernel alone (case=core) and an sgemm of the QKV projection's\n"
    "  size (case=sgemm; both skipped with --mha-only). One line per case:\n"
    "  case B T D H mode threads median_s min_s gflops peak_rss_mb.\n"
    "  FLOPs count the causal half only: projections 8 B T D^2 (x3 with backward),\n"
    "  attention 2 B D T (T+1) (x3.5 with backward), also with a window.\n"
    "  Then case=floor: those FLOPs at case=sgemm's rate (floor_s), case=mha's\n"
    "  median over it (mha_over_floor), the attention kernels that ran\n"
    "  (kernels=generic|avx2|avx512|avx512-bf16|amx) and OpenBLAS's.\n"
    "  --kv-heads, --window, --positions: the attention variants\n"
    "  (docs/model-variants.md); the kernel-alone case takes --window;\n"
    "  --positions rope adds case=rope: the rotations alone, same sizes.\n"
    "  The buffers are checked against --max-memory first (attn/memory_plan.h's\n"
    "  count: the fused path holds no T x T matrix); --dry-run prints that count\n"
    "  and exits.\n",
    bench_opts_table,
    BENCH_OPT_COUNT,
    1};

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

/* Times attn_gemm at M x N x K; *rate (when not NULL): its FLOP/s at the median. */
static int bench_sgemm(const bench_args *a, const char *label, int M, int N, int K, double *rate) {
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
    const timing tm = summarize(t, a->repeat);
    print_case(label, a->B, a->T, a->D, a->H, mode, a->threads, tm, 2.0 * M * N * (double)K);
    if (rate) *rate = 2.0 * M * N * (double)K / tm.median;
    free(A), free(Bm), free(C), free(t);
    attn_bf16_gemm_free(g);
    return 0;
}

/* The mode= of a line: forward or forward+backward, and bf16. */
static const char *mode_name(const bench_args *a) {
    if (a->backward) return a->precision ? "forward+backward,bf16" : "forward+backward";
    return a->precision ? "forward,bf16" : "forward";
}

/* The module, its path and kernel options; bf16 borrows *bf16 (freed by the caller). */
static int setup_mha(const bench_args *a, attn_mha *m, attn_bf16_gemm **bf16) {
    attn_error err;
    attn_rng rng;
    attn_rng_seed(&rng, 123);
    *bf16 = NULL;
    attn_attention_spec sp = attn_attention_book((int)a->H, (int)(a->D / a->H), a->dropout);
    sp.kv_heads = (int)a->kv_heads;
    sp.window = (int)a->window;
    sp.positions = strcmp(a->positions_name, "rope") == 0    ? ATTN_POSITIONS_ROPE
                   : strcmp(a->positions_name, "alibi") == 0 ? ATTN_POSITIONS_ALIBI
                                                             : ATTN_POSITIONS_NONE;
    const attn_status s = attn_mha_init_spec(m, a->D, a->D, a->T, &sp, 0, &rng, &err);
    if (s != ATTN_OK) {
        fprintf(stderr, "attn bench: %s\n", err.msg);
        return s == ATTN_ERR_NOMEM ? 1 : 2; /* out of memory is a run-time failure */
    }
    if (a->reference) m->path = ATTN_MHA_REFERENCE; /* else the module's own choice */
    if (a->precision == ATTN_PRECISION_BF16) {      /* the projections in bf16 */
        if (attn_bf16_gemm_create(bf16, &err) != ATTN_OK) {
            fprintf(stderr, "attn bench: %s\n", err.msg);
            attn_mha_free(m);
            return 1;
        }
        m->bf16 = m->out_proj.bf16 = m->W_query.bf16 = m->W_key.bf16 = m->W_value.bf16 = *bf16;
    }
    m->flash.threads = (int)a->threads;
    m->flash.simd = a->simd;
    m->flash.block_q = (int)a->block_q;
    m->flash.block_k = (int)a->block_k;
    return 0;
}

/* warmup + repeat runs of the module on x (dy with --backward) into t. */
static int time_mha(const bench_args *a, attn_mha *m, const float *x, const float *dy, float *y,
                    float *dx, double *t) {
    attn_error err;
    attn_attention_cache cache;
    if (attn_mha_cache_init(&cache, m, a->B, a->T, &err) != ATTN_OK) {
        fprintf(stderr, "attn bench: %s\n", err.msg);
        return 1;
    }
    attn_rng drop;
    attn_rng_seed(&drop, 1);
    const attn_forward_mode mode = {a->dropout > 0.0, &drop, a->stream};
    int rc = 0;
    for (int r = (int)-a->warmup; r < a->repeat; r++) { /* r < 0 warms up */
        const double t0 = attn_now_s();
        if (attn_mha_forward(m, x, a->B, a->T, y, &mode, &cache, &err) != ATTN_OK ||
            (a->backward && attn_mha_backward(m, x, a->B, a->T, dy, dx, &cache, &err) != ATTN_OK)) {
            fprintf(stderr, "attn bench: %s\n", err.msg);
            rc = 1;
            break;
        }
        if (r >= 0) t[r] = attn_now_s() - t0;
    }
    attn_attention_cache_free(&cache);
    return rc;
}

/* The attention kernel alone on the packed layout, same sizes (case=core). */
static int bench_core(const bench_args *a, const float *dy, double *t, double core_flops) {
    attn_error err;
    const int B = (int)a->B, T = (int)a->T, D = (int)a->D, H = (int)a->H, hd = D / H;
    const size_t ld = 3 * (size_t)D, nq = (size_t)B * T;
    float *qkv = random_floats(nq * ld, 9), *o = alloc_floats(nq * D);
    float *lse = malloc((size_t)B * H * T * sizeof(float)), *dqkv = alloc_floats(nq * ld);
    attn_flash_workspace ws = {0};
    attn_flash_options opt = {.threads = (int)a->threads,
                              .simd = a->simd,
                              .block_q = (int)a->block_q,
                              .block_k = (int)a->block_k,
                              .precision = a->precision};
    attn_flash_problem pb = {B,  T,  H, hd,        qkv, qkv + D, qkv + 2 * D,    ld,
                             ld, ld, o, (size_t)D, lse, NULL,    (int)a->window, NULL};
    attn_flash_grads g = {dy, (size_t)D, dqkv, dqkv + D, dqkv + 2 * D, ld, ld, ld};
    int rc = 0;
    if (!qkv || !o || !lse || !dqkv) {
        fprintf(stderr, "attn bench: out of memory\n");
        rc = 1;
    } else
        memset(dqkv, 0, nq * ld * sizeof(float));
    for (int r = (int)-a->warmup; rc == 0 && r < a->repeat; r++) {
        const double t0 = attn_now_s();
        if (attn_flash_forward(&pb, &opt, &ws, &err) != ATTN_OK ||
            (a->backward && attn_flash_backward(&pb, &g, &opt, &ws, &err) != ATTN_OK)) {
            fprintf(stderr, "attn bench: %s\n", err.msg);
            rc = 1;
        } else if (r >= 0)
            t[r] = attn_now_s() - t0;
    }
    if (rc == 0)
        print_case("core", B, T, D, H, mode_name(a), (int)a->threads, summarize(t, (int)a->repeat),
                   a->backward ? 3.5 * core_flops : core_flops);
    attn_flash_workspace_free(&ws);
    free(qkv), free(o), free(lse), free(dqkv);
    return rc;
}

/* RoPE alone at the module's sizes (case=rope, with --positions rope): the
 * rotations of q and k, and with --backward their transposes, so that its
 * share of case=mha comes from one run rather than two noisy ones. */
static int bench_rope(const bench_args *a, const attn_mha *m, double *t) {
    const size_t N = (size_t)a->B * a->T, ld = (size_t)m->d_out + 2 * (size_t)m->kv_dim;
    float *qkv = random_floats(N * ld, 3); /* the fused path's packed rows */
    if (!qkv) {
        fprintf(stderr, "attn bench: out of memory\n");
        return 1;
    }
    const attn_attention_spec *sp = &m->spec;
    for (int r = (int)-a->warmup; r < a->repeat; r++) {
        const double t0 = attn_now_s();
        for (int inverse = 0; inverse <= (a->backward ? 1 : 0); inverse++) {
            attn_rope_apply(sp, qkv, N, (int)a->T, ld, m->num_heads, 0, inverse);
            attn_rope_apply(sp, qkv + m->d_out, N, (int)a->T, ld, sp->kv_heads, 0, inverse);
        }
        if (r >= 0) t[r] = attn_now_s() - t0;
    }
    /* 6 flops per rotated pair (4 mul, 2 add), the angles not counted */
    const double pairs = (double)N * (m->num_heads + sp->kv_heads) * attn_rope_dims(sp) / 2.0;
    print_case("rope", a->B, a->T, a->D, a->H, mode_name(a), a->threads, summarize(t, a->repeat),
               (a->backward ? 2.0 : 1.0) * 6.0 * pairs);
    free(qkv);
    return 0;
}

/* case=floor: the module's FLOPs (case=mha's) at this run's sgemm rate
 * (case=sgemm's median), case=mha's median over it, and the attention
 * kernels and OpenBLAS kernels that ran. */
static void print_floor(const bench_args *a, double mha_s, double sgemm_rate,
                        attn_flash_options opt) {
    const double flops = attn_mha_flops(a->B, a->T, a->D, (int)a->H, 0, 0, a->backward);
    const double floor_s = flops / sgemm_rate;
    opt.precision = a->precision; /* the module's projections set it per call */
    const char *kernels = attn_flash_kernel_path(&opt), *blas = openblas_get_corename();
    printf("case=floor B=%lld T=%lld D=%lld H=%lld mode=%s threads=%lld gflop=%.2f floor_s=%.6f "
           "mha_over_floor=%.3f kernels=%s openblas=%s\n",
           a->B, a->T, a->D, a->H, mode_name(a), a->threads, flops * 1e-9, floor_s, mha_s / floor_s,
           kernels ? kernels : "?", blas ? blas : "?");
    fflush(stdout);
}

static int bench_mha(const bench_args *a) {
    attn_mha m;
    attn_bf16_gemm *bf16;
    int rc = setup_mha(a, &m, &bf16);
    if (rc) return rc;
    const size_t n = (size_t)a->B * a->T * a->D;
    float *x = random_floats(n, 7), *dy = random_floats(n, 8);
    float *y = alloc_floats(n), *dx = alloc_floats(n);
    double *t = malloc((size_t)a->repeat * sizeof(double));
    rc = 1;
    if (!x || !dy || !y || !dx || !t)
        fprintf(stderr, "attn bench: out of memory\n");
    else {
        memset(dx, 0, n * sizeof(float));
        rc = time_mha(a, &m, x, dy, y, dx, t);
    }
    /* attn/cost.h's rule; the windowed kernel skips tiles, not pairs: the
     * whole causal half is counted, as before. */
    const double core = attn_attention_flops(a->B, a->T, a->D, 0, 0);
    double mha_s = 0;
    if (rc == 0) {
        const timing tm = summarize(t, a->repeat);
        mha_s = tm.median;
        print_case(m.path == ATTN_MHA_REFERENCE ? "mha_reference" : "mha", a->B, a->T, a->D, a->H,
                   mode_name(a), a->threads, tm,
                   attn_mha_flops(a->B, a->T, a->D, (int)a->H, 0, 0, a->backward));
    }
    if (rc == 0 && m.spec.positions == ATTN_POSITIONS_ROPE) rc = bench_rope(a, &m, t);
    if (rc == 0 && !a->reference && !a->mha_only) {
        rc = bench_core(a, dy, t, core);
        double rate = 0;
        if (rc == 0) rc = bench_sgemm(a, "sgemm", a->B * a->T, 3 * a->D, a->D, &rate);
        if (rc == 0) print_floor(a, mha_s, rate, m.flash);
    }
    attn_mha_free(&m);
    attn_bf16_gemm_free(bf16);
    free(x), free(dy), free(y), free(dx), free(t);
    return rc;
}

/* The benchmark's buffers against the budget, before any exists: sgemm's
 * three matrices (and bf16's rounded copies); mha's as attn/memory_plan.h
 * counts them (the fused path holds no (T, T) matrix). 0 to go on, else the
 * exit code. */
static int check_memory(const bench_args *a, const char *which) {
    attn_error err;
    double need;
    char parts[512] = "";
    const int threads = a->threads > 0 ? (int)a->threads : attn_default_threads();
    if (strcmp(which, "sgemm") == 0) {
        const double M = a->m ? a->m : a->B * a->T, N = a->n ? a->n : 3 * a->D,
                     K = a->k ? a->k : a->D;
        need = 4.0 * (M * K + K * N + M * N) + (a->precision ? 2.0 * (M * K + K * N) : 0);
    } else {
        const attn_gpt_config mc = {.emb_dim = (int)a->D,
                                    .n_heads = (int)a->H,
                                    .n_kv_heads = (int)a->kv_heads,
                                    .window = (int)a->window,
                                    .context_length = (int)a->T,
                                    .n_layers = 1,
                                    .drop_rate = a->dropout};
        const attn_mem_run run = {.mode = ATTN_MEM_MHA,
                                  .batch = (int)a->B,
                                  .tokens = (int)a->T,
                                  .backward = a->backward,
                                  .reference = a->reference,
                                  .kernel_cases = !a->mha_only,
                                  .stream = a->stream,
                                  .precision = a->precision,
                                  .threads = threads};
        attn_mem_plan p;
        attn_memory_plan(&mc, &run, &p);
        need = p.total;
        attn_memory_plan_text(&p, parts, sizeof parts);
    }
    if (a->dry_run)
        printf("memory      ~%.1f MiB%s%s\n", need / 1048576.0, parts[0] ? ": " : "", parts);
    if (attn_mem_check(need, a->max_memory, "the benchmark's buffers", &err)) {
        fprintf(stderr, "attn bench: %s\n", err.msg);
        return 1;
    }
    return 0;
}

/* Names to values, and checks the table cannot make (CPU support, D % H). */
static int resolve(bench_args *a, const char *which) {
    attn_error err;
    attn_dropout_stream_parse(a->rng, &a->stream); /* the table allows only valid names */
    attn_precision_parse(a->precision_name, &a->precision, &err);
    attn_simd_parse(a->simd_name, &a->simd);
    if (!attn_simd_supported(a->simd)) {
        fprintf(stderr, "attn bench: --simd %s is not supported on this CPU\n", a->simd_name);
        return 2;
    }
    if (attn_precision_check(a->precision, &err)) {
        fprintf(stderr, "attn bench: %s\n", err.msg);
        return 2;
    }
    if (strcmp(which, "mha") == 0 && a->D % a->H != 0) {
        fprintf(stderr, "attn bench: --d-model (%lld) must be divisible by --heads (%lld)\n", a->D,
                a->H);
        return 2;
    }
    return 0;
}

/* The benchmark named on the command line: mha or sgemm. */
static const char *which_bench(const cli_parsed *p) {
    const char *w = p->n_positional ? p->positional[0] : NULL;
    if (w && (strcmp(w, "mha") == 0 || strcmp(w, "sgemm") == 0)) return w;
    static const char *const names[] = {"mha", "sgemm", "train", "generate", NULL};
    if (w) {
        cli_near near;
        char hint[96];
        cli_near_init(&near, w, strlen(w));
        cli_near_add_list(&near, names);
        fprintf(stderr,
                "attn bench: unknown benchmark '%s'%s; one of mha, sgemm, train, generate\n", w,
                cli_near_hint(&near, "", hint, sizeof hint));
    } else
        fprintf(stderr, "attn bench: which benchmark? mha, sgemm, train or generate\n");
    return NULL;
}

int cmd_bench(int argc, char **argv) {
    if (argc > 1 && (strcmp(argv[1], "train") == 0 || strcmp(argv[1], "generate") == 0))
        return cmd_bench_model(argc - 1, argv + 1);
    bench_args a;
    cli_parsed parsed;
    int rc = cli_parse(&bench_cli, argc, argv, &a, &parsed);
    if (rc) return rc == CLI_HELP ? 0 : rc;
    const char *which = which_bench(&parsed);
    if (!which) return 2;
    if ((rc = resolve(&a, which)) || (rc = check_memory(&a, which)) || a.dry_run) return rc;
    if (a.threads <= 0) a.threads = attn_default_threads();
    /* One thread count everywhere. The fused path runs a single pool
     * (OpenMP; OpenBLAS single-threaded inside it, see attn/gemm.h); the
     * reference path lets OpenBLAS thread its own calls, as it was written. */
    cli_use_threads((int)a.threads, a.reference ? (int)a.threads : 1);
    if (strcmp(which, "sgemm") == 0)
        return bench_sgemm(&a, "sgemm", a.m ? a.m : a.B * a.T, a.n ? a.n : 3 * a.D, a.k ? a.k : a.D,
                           NULL);
    return bench_mha(&a);
}
