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
#include <sys/stat.h>
#include <time.h>

#include "attn/cost.h"
#include "attn/engine.h"
#include "attn/fileio.h"
#include "attn/flash_attention.h"
#include "attn/membudget.h"
#include "attn/membw.h"
#include "attn/memory_plan.h"
#include "attn/train.h"
#include "clock.h"
#include "commands.h"
#include "threads.h"

typedef struct model_args {
    const char *preset, *data, *precision_name, *config;
    long long steps, batch, threads, tokens, context, num_samples;
    double max_memory; /* bytes; 0: the memory available now */
    int dry_run;
    attn_precision precision;
} model_args;

enum {
    MB_PRESET,
    MB_STEPS,
    MB_BATCH,
    MB_CONTEXT,
    MB_TOKENS,
    MB_DATA,
    MB_THREADS,
    MB_PRECISION,
    MB_MAX_MEMORY,
    MB_NUM_SAMPLES,
    MB_CONFIG,
    MB_DRY_RUN,
    MB_OPT_COUNT
};

#define OFF(f) offsetof(model_args, f)
static const cli_option model_opts_table[] = {
    [MB_PRESET] = {"preset", CLI_CHOICE, NULL, OFF(preset), .def = "seed004",
                   .choices_of = attn_gpt_preset_names,
                   .help = "the model (and train: the recipe's batch size)"},
    [MB_STEPS] = {"steps", CLI_INT, "N", OFF(steps), 1, 1000000, .def = "3",
                  .help = "train: timed steps after the untimed first one"},
    [MB_BATCH] = {"batch-size", CLI_INT, "N", OFF(batch), 1, 1000000,
                  .help = "train: batch size (default: the preset's recipe)"},
    [MB_CONTEXT] = {"context", CLI_INT, "N", OFF(context), 1, 1000000,
                    .help = "train: tokens per sequence, at most the preset's\n"
                            "context_length (default: all of it), e.g. llm.c's 64"},
    [MB_TOKENS] = {"tokens", CLI_INT, "N", OFF(tokens), 1, 1000000, .def = "200",
                   .help = "generate: KV-cached steps (at most context_length)"},
    [MB_DATA] = {"data", CLI_STRING, "FILE", OFF(data), .def = "data/tinyshakespeare.txt",
                 .help = "train: the corpus"},
    [MB_THREADS] = CLI_THREADS_OPTION(OFF(threads)),
    [MB_PRECISION] = {"precision", CLI_CHOICE, NULL, OFF(precision_name),
                      .choices = cli_precision_choices, .def = "fp32",
                      .help = "bf16: bf16 products with fp32 sums (AVX512-BF16 CPUs)"},
    [MB_MAX_MEMORY] = CLI_MAX_MEMORY_OPTION(OFF(max_memory)),
    [MB_NUM_SAMPLES] = {"num-samples", CLI_INT, "N", OFF(num_samples), 1, 65536, .def = "1",
                        .help = "generate: sequences decoded together (each weight\n"
                                "read serves N tokens)"},
    [MB_CONFIG] = {"config", CLI_STRING, "FILE.json", OFF(config),
                   .help = "model (and train: training) keys over the preset's,\n"
                           "as attn train --config (e.g. {\"tie_weights\": true})"},
    [MB_DRY_RUN] = {"dry-run", CLI_FLAG, .offset = OFF(dry_run),
                    .help = "print the memory the run needs, then exit"},
};
CLI_TABLE_CHECK(model_opts_table, MB_OPT_COUNT);

/* The preset, then --config's keys. */
static int model_config(const model_args *a, const char *who, attn_gpt_config *mcfg,
                        attn_train_config *tcfg) {
    attn_error err;
    if (attn_train_preset(a->preset, mcfg, tcfg, &err)) {
        fprintf(stderr, "attn %s: %s\n", who, err.msg);
        return 2;
    }
    if (!a->config) return 0;
    char *text = NULL;
    size_t n = 0;
    int vocab_given = 0;
    if (attn_file_read_all(a->config, 1 << 20, (void **)&text, &n, &err)) {
        fprintf(stderr, "attn %s: --config: %s\n", who, err.msg);
        return 1;
    }
    const attn_status s =
        attn_train_config_apply_json(mcfg, tcfg, text, a->config, &vocab_given, &err);
    free(text);
    if (s) {
        fprintf(stderr, "attn %s: %s\n", who, err.msg);
        return 2;
    }
    return 0;
}

static const char model_about[] =
    "  train: one untimed first step (it allocates the lazily sized buffers), then\n"
    "  --steps timed steps of the preset's model on the corpus. Prints median/min\n"
    "  step seconds, tokens/s, model GFLOP/s (6 N params-in-matmuls + causal\n"
    "  attention) and minor page faults of the first step and per later step\n"
    "  (getrusage).\n"
    "  generate: a randomly initialised model of the preset, greedy, --tokens\n"
    "  KV-cached steps of --num-samples sequences from one token each; prints\n"
    "  tokens/s (all sequences), the fastest and median step (ms), the bytes of\n"
    "  weights a step streams, their GB/s, the machine's read bandwidth measured\n"
    "  after the steps on as many bytes at the run's threads (attn_membw_read)\n"
    "  and the share of it reached\n"
    "  (floor_pct: 100 is the memory-bandwidth floor; fastest_floor_pct: the\n"
    "  fastest step's).\n"
    "  Both check the memory they need (attn/memory_plan.h) against --max-memory\n"
    "  first; --dry-run prints it and exits.\n";

const cli_command bench_train_cli = {
    "bench train",
    "attn bench train [--preset NAME] [--config FILE.json] [--steps N]\n"
    "                        [--batch-size N] [--context N] [--data FILE]\n"
    "                        [--threads N] [--precision fp32|bf16] [--dry-run]",
    model_about,
    model_opts_table,
    MB_OPT_COUNT,
    0};
const cli_command bench_generate_cli = {
    "bench generate",
    "attn bench generate [--preset NAME] [--config FILE.json] [--tokens N]\n"
    "                           [--threads N] [--precision fp32|bf16] [--dry-run]\n"
    "                           [--num-samples N]",
    model_about,
    model_opts_table,
    MB_OPT_COUNT,
    0};

static long minor_faults(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_minflt;
}

static int cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* need bytes (plan's parts) against the budget; --dry-run prints them.
 * 0 to go on, 1 refused. */
static int check_memory(const model_args *a, const char *who, const char *what,
                        const attn_mem_plan *plan) {
    attn_error err;
    if (a->dry_run) {
        char parts[512];
        printf("memory      ~%.1f MiB: %s\n", plan->total / 1048576.0,
               attn_memory_plan_text(plan, parts, sizeof parts));
    }
    if (attn_mem_check(plan->total, a->max_memory, what, &err)) {
        fprintf(stderr, "attn %s: %s\n", who, err.msg);
        return 1;
    }
    return 0;
}

/* The preset's trainer on the corpus (batch and steps from the options). */
static int setup_trainer(const model_args *a, attn_trainer **out) {
    attn_error err;
    attn_error_clear(&err);
    attn_gpt_config mcfg;
    attn_train_config tcfg;
    const int rc = model_config(a, "bench train", &mcfg, &tcfg);
    if (rc) return rc;
    if (a->batch > 0) tcfg.batch_size = (int)a->batch;
    if (a->context > mcfg.context_length) {
        fprintf(stderr, "attn bench train: --context %lld is over the preset's context_length %d\n",
                a->context, mcfg.context_length);
        return 2;
    }
    /* The model's positions are the context's: a shorter one trains on
     * that many tokens (pos_emb rows past it are unused in a step anyway). */
    if (a->context > 0) mcfg.context_length = (int)a->context;
    tcfg.max_steps = a->steps + 1;
    /* The preset's vocabulary (the corpus's may differ a little), the
     * corpus's size, before anything is read. */
    struct stat sb;
    const attn_train_plan_env env = {.precision = a->precision,
                                     .threads = (int)a->threads,
                                     .corpus_bytes =
                                         stat(a->data, &sb) == 0 ? (double)sb.st_size : 0};
    attn_train_plan p;
    attn_train_plan_env_of(&mcfg, &tcfg, &env, &p);
    const int refused = check_memory(
        a, "bench train", "the run (weights, gradients, AdamW moments and activations)", &p.mem);
    if (refused || a->dry_run) return refused ? 1 : -1;
    char *text = NULL;
    size_t n = 0;
    if (attn_file_read_all(a->data, 0, (void **)&text, &n, &err)) {
        fprintf(stderr, "attn bench train: cannot read the corpus: %s\n", err.msg);
        return 1;
    }
    attn_status s = attn_trainer_create(out, &mcfg, &tcfg, 0, text, n, &err);
    attn_trainer *tr = *out;
    free(text);
    if (s) {
        fprintf(stderr, "attn bench train: %s\n", err.msg);
        return 1;
    }
    if (attn_trainer_set_device(tr, ATTN_DEVICE_CPU, a->precision, &err)) {
        fprintf(stderr, "attn bench train: %s\n", err.msg);
        attn_trainer_free(tr);
        *out = NULL;
        return 1;
    }
    return 0;
}

/* What bench train measures. */
typedef struct step_timing {
    double *t; /* a->steps step times, sorted */
    double first_s;
    long first_faults, later_faults;
    attn_train_record rec; /* the last step's */
} step_timing;

/* One untimed step, then a->steps timed ones. */
static attn_status time_steps(const model_args *a, attn_trainer *tr, step_timing *m,
                              attn_error *err) {
    long f0 = minor_faults();
    double t0 = attn_now_s();
    attn_status s = attn_trainer_step(tr, &m->rec, err);
    m->first_s = attn_now_s() - t0;
    m->first_faults = minor_faults() - f0;
    f0 = minor_faults();
    for (int i = 0; i < a->steps && s == ATTN_OK; i++) {
        t0 = attn_now_s();
        s = attn_trainer_step(tr, &m->rec, err);
        m->t[i] = attn_now_s() - t0;
    }
    m->later_faults = minor_faults() - f0;
    if (s == ATTN_OK) qsort(m->t, (size_t)a->steps, sizeof *m->t, cmp_double);
    return s;
}

static void print_train(const model_args *a, const attn_trainer *tr, const step_timing *m) {
    const int steps = (int)a->steps, B = attn_trainer_train_config(tr)->batch_size,
              T = attn_trainer_model_config(tr)->context_length;
    const double *t = m->t;
    const double med = steps % 2 ? t[steps / 2] : 0.5 * (t[steps / 2 - 1] + t[steps / 2]);
    const double flops = attn_gpt_flops_step(attn_trainer_model_config(tr), B, T);
    printf("case=train preset=%s B=%d T=%d precision=%s threads=%lld steps=%d median_s=%.4f "
           "min_s=%.4f first_s=%.4f tokens_per_s=%.0f gflops=%.2f faults_first=%ld "
           "faults_per_step=%.1f loss=%.4f\n",
           a->preset, B, T, attn_precision_name(a->precision), a->threads, steps, med, t[0],
           m->first_s, (double)B * T / med, flops / med * 1e-9, m->first_faults,
           (double)m->later_faults / steps, (double)m->rec.loss);
    fflush(stdout);
}

static int bench_train(const model_args *a) {
    attn_trainer *tr = NULL;
    int rc = setup_trainer(a, &tr);
    if (rc) return rc < 0 ? 0 : rc; /* -1: --dry-run printed the plan */
    step_timing m;
    attn_error err;
    rc = 1;
    if (!(m.t = malloc((size_t)a->steps * sizeof *m.t)))
        fprintf(stderr, "attn bench train: out of memory\n");
    else if (time_steps(a, tr, &m, &err))
        fprintf(stderr, "attn bench train: %s\n", err.msg);
    else {
        print_train(a, tr, &m);
        rc = 0;
    }
    free(m.t);
    attn_trainer_free(tr);
    return rc;
}

/* Bytes of weights one step streams: every Linear weight of the blocks and
 * the output head (at the precision's width); norms, biases and the
 * embedding rows are a few KB. */
static double step_weight_bytes(const attn_gpt *m, attn_precision p) {
    return (double)attn_gpt_kv_weight_numel(m) * (p == ATTN_PRECISION_BF16 ? 2.0 : 4.0);
}

typedef struct gen_timing {
    int steps, nt;
    double seconds, fastest, times[1024];
    long faults;
} gen_timing;

/* n greedy steps of the cache's sequences (sequence s starts at token s). */
static attn_status time_gen_steps(const attn_gpt *m, attn_gpt_kv_cache *c, int n, gen_timing *t,
                                  attn_error *err) {
    const int B = c->batch, V = m->cfg.vocab_size;
    int32_t *tok = malloc((size_t)B * sizeof *tok);
    if (!tok) return attn_fail(err, ATTN_ERR_NOMEM, "out of memory");
    for (int s = 0; s < B; s++)
        tok[s] = s % V;
    attn_status s = ATTN_OK;
    /* One untimed pass over a few positions warms the weights' pages. */
    for (int i = 0; i < 4 && s == ATTN_OK; i++)
        s = attn_gpt_kv_step_batch(m, c, tok, NULL, err);
    attn_gpt_kv_reset(c);
    memset(t, 0, sizeof *t);
    t->fastest = 1e30;
    const long f0 = minor_faults();
    const double t0 = attn_now_s();
    /* The fastest and median single step as well: on a shared machine the
     * fastest is the step that ran without being preempted. */
    for (int i = 0; i < n && s == ATTN_OK; i++, t->steps++) {
        const double ts = attn_now_s();
        s = attn_gpt_kv_step_batch(m, c, tok, NULL, err);
        const double tt = attn_now_s() - ts;
        if (tt < t->fastest) t->fastest = tt;
        if (t->nt < 1024) t->times[t->nt++] = tt;
        for (int q = 0; q < B; q++) {
            const float *l = c->logits + (size_t)q * (size_t)V;
            int best = 0;
            for (int v = 1; v < V; v++)
                if (l[v] > l[best]) best = v;
            tok[q] = best;
        }
    }
    t->seconds = attn_now_s() - t0;
    t->faults = minor_faults() - f0;
    qsort(t->times, (size_t)t->nt, sizeof *t->times, cmp_double);
    free(tok);
    return s;
}

static void print_generate(const model_args *a, const attn_gpt *m, const gen_timing *t,
                           double membw) {
    const double B = (double)a->num_samples, bytes = step_weight_bytes(m, a->precision);
    const double gbs = bytes * t->steps / t->seconds / 1e9, fast = bytes / t->fastest / 1e9;
    printf("case=generate preset=%s precision=%s threads=%lld tokens=%d seconds=%.4f "
           "tokens_per_s=%.1f faults=%ld fastest_token_ms=%.3f median_token_ms=%.3f "
           "num_samples=%lld weight_mb_per_step=%.1f weight_gbs=%.2f membw_gbs=%.2f "
           "floor_pct=%.1f fastest_floor_pct=%.1f\n",
           a->preset, attn_precision_name(a->precision), a->threads, t->steps, t->seconds,
           B * t->steps / t->seconds, t->faults, t->fastest * 1e3,
           t->nt ? t->times[t->nt / 2] * 1e3 : 0.0, a->num_samples, bytes / 1e6, gbs, membw / 1e9,
           membw > 0 ? 100.0 * gbs * 1e9 / membw : 0.0,
           membw > 0 ? 100.0 * fast * 1e9 / membw : 0.0);
}

static int bench_generate(const model_args *a) {
    attn_error err;
    attn_error_clear(&err);
    attn_gpt_config cfg;
    attn_train_config tcfg_unused;
    const int rc = model_config(a, "bench generate", &cfg, &tcfg_unused);
    if (rc) return rc;
    const attn_mem_run run = {.mode = ATTN_MEM_GENERATE,
                              .batch = (int)a->num_samples,
                              .membw = 1,
                              .precision = a->precision,
                              .threads = (int)a->threads};
    attn_mem_plan plan;
    attn_memory_plan(&cfg, &run, &plan);
    if (check_memory(a, "bench generate", "the model with its KV cache", &plan)) return 1;
    if (a->dry_run) return 0;
    attn_rng rng;
    attn_rng_seed(&rng, 1337);
    attn_gpt m;
    if (attn_gpt_init(&m, &cfg, &rng, &err)) {
        fprintf(stderr, "attn bench generate: %s\n", err.msg);
        return 1;
    }
    attn_gpt_kv_cache c = {0};
    gen_timing *t = malloc(sizeof *t);
    attn_status s = t ? ATTN_OK : attn_fail(&err, ATTN_ERR_NOMEM, "out of memory");
    if (!s) s = attn_gpt_kv_init_batch(&c, &m, (int)a->num_samples, &err);
    if (!s) s = attn_gpt_kv_set_precision(&c, &m, a->precision, &err);
    const int n = a->tokens < cfg.context_length ? (int)a->tokens : cfg.context_length;
    if (!s) s = time_gen_steps(&m, &c, n, t, &err);
    /* The floor: a plain read of as many bytes as a step streams, at the
     * run's threads (the same working set against the same caches). */
    double membw = 0;
    const size_t bytes = (size_t)step_weight_bytes(&m, a->precision);
    if (!s) s = attn_membw_read((int)a->threads, bytes, 0, &membw, &err);
    if (s == ATTN_OK)
        print_generate(a, &m, t, membw);
    else
        fprintf(stderr, "attn bench generate: %s\n", err.msg);
    free(t);
    attn_gpt_kv_free(&c);
    attn_gpt_free(&m);
    return s == ATTN_OK ? 0 : 1;
}

int cmd_bench_model(int argc, char **argv) {
    const int train = strcmp(argv[0], "train") == 0;
    const cli_command *cmd = train ? &bench_train_cli : &bench_generate_cli;
    model_args a;
    cli_parsed parsed;
    int rc = cli_parse(cmd, argc, argv, &a, &parsed);
    if (rc) return rc == CLI_HELP ? 0 : rc;
    attn_error err;
    attn_precision_parse(a.precision_name, &a.precision, &err); /* the table allows only these */
    if (a.threads <= 0) a.threads = attn_default_threads();
    cli_use_threads((int)a.threads, 1);
    return train ? bench_train(&a) : bench_generate(&a);
}
