/* attn generate — sample text from a trained checkpoint: the library's
 * attn_generator (attn/generate.h: KV cache or GPU, temperature, top-k,
 * top-p, sliding window, stop string) does the work; this file parses the
 * options and prints the characters. */
#include <float.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "attn/cuda.h"
#include "attn/generate.h"
#include "attn/membudget.h"
#include "attn/memory_plan.h"
#include "attn/train.h"
#include "attn/weights_format.h"
#include "clock.h"
#include "commands.h"
#include "finetune.h"
#include "options.h"
#include "threads.h"

typedef struct gen_opts {
    const char *checkpoint, *prompt, *stop, *device, *precision, *instruction, *input;
    long long max_new, top_k, window, threads, n_heads, num_samples;
    double temperature, top_p;
    double max_memory; /* bytes; 0: the memory available now */
    unsigned long long seed;
    int allow_special, dry_run;
} gen_opts;

enum {
    GEN_CHECKPOINT,
    GEN_PROMPT,
    GEN_MAX_NEW,
    GEN_TEMPERATURE,
    GEN_TOP_K,
    GEN_TOP_P,
    GEN_SEED,
    GEN_STOP,
    GEN_WINDOW,
    GEN_THREADS,
    GEN_MAX_MEMORY,
    GEN_DEVICE,
    GEN_PRECISION,
    GEN_ALLOW_SPECIAL,
    GEN_N_HEADS,
    GEN_NUM_SAMPLES,
    GEN_DRY_RUN,
    GEN_INSTRUCTION,
    GEN_INPUT,
    GEN_OPT_COUNT
};

#define OFF(f) offsetof(gen_opts, f)
static const cli_option gen_opts_table[] = {
    [GEN_CHECKPOINT] = {"checkpoint", CLI_STRING, "DIR", OFF(checkpoint), .required = 1,
                        .positional = 1,
                        .help = "a run folder of `attn train` (or its\n"
                                "model.safetensors); the flag may be left out"},
    [GEN_PROMPT] = {"prompt", CLI_STRING, "TEXT", OFF(prompt),
                    .help = "the text to continue (default: a newline); every\n"
                            "character must be in the checkpoint's vocabulary"},
    [GEN_MAX_NEW] = {"max-new-tokens", CLI_INT, "N", OFF(max_new), 0, CLI_NO_MAX, .def = "500",
                     .help = "tokens to sample after the prompt (characters\n"
                             "for a char model)"},
    [GEN_TEMPERATURE] = {"temperature", CLI_FLOAT, "T", OFF(temperature), 0, CLI_NO_MAX,
                         .def = "0.8",
                         .help = "divide the logits by T; 0 is greedy, and so is a T\n"
                                 "too small to scale by (below 1.2e-38, the smallest\n"
                                 "normal float)"},
    [GEN_TOP_K] = {"top-k", CLI_INT, "K", OFF(top_k), 0, INT_MAX, .def = "200",
                   .help = "sample among the K most likely (0 = all)"},
    [GEN_TOP_P] = {"top-p", CLI_FLOAT, "P", OFF(top_p), 0, 1, .lo_open = 1, .def = "1",
                   .help = "nucleus: the most likely characters whose probabilities\n"
                           "sum to P (1 = all)"},
    [GEN_SEED] = {"seed", CLI_U64, "N", OFF(seed), .def = "1337",
                  .help = "the sampler's generator, as torch.manual_seed(N)"},
    [GEN_STOP] = {"stop", CLI_STRING, "TEXT", OFF(stop),
                  .help = "end the output once it ends with TEXT (included)"},
    [GEN_WINDOW] = {"window", CLI_INT, "N", OFF(window), 1, INT_MAX,
                    .help = "once the context is full the model re-reads the last\n"
                            "N characters (below context_length; default\n"
                            "context_length/2) and continues: O(T) per token"},
    [GEN_THREADS] = CLI_THREADS_OPTION(OFF(threads)),
    [GEN_MAX_MEMORY] = CLI_MAX_MEMORY_OPTION(OFF(max_memory)),
    [GEN_DEVICE] = {"device", CLI_CHOICE, NULL, OFF(device), .choices = cli_device_choices,
                    .def = "cpu",
                    .help = "cuda: the GPU engine, which has no KV cache and\n"
                            "reruns the window per token (same text up to\n"
                            "rounding)"},
    [GEN_PRECISION] = {"precision", CLI_CHOICE, NULL, OFF(precision),
                       .choices = cli_precision_choices, .def = "fp32",
                       .help = "bf16: bf16 weights with fp32 sums, half the bytes per\n"
                               "token, on any CPU (widened to fp32 in the GEMV kernel);\n"
                               "the fp32 matrices are not kept (CPU)"},
    [GEN_ALLOW_SPECIAL] = {"allow-special", CLI_FLAG, NULL, OFF(allow_special),
                           .help = "gpt2 models: <|endoftext|> in --prompt is the\n"
                                   "end-of-text token (default: plain text)"},
    [GEN_N_HEADS] = CLI_N_HEADS_OPTION(OFF(n_heads)),
    [GEN_NUM_SAMPLES] = {"num-samples", CLI_INT, "N", OFF(num_samples), 1, 65536, .def = "1",
                         .help = "N samples of the prompt decoded together (each\n"
                                 "weight read serves N tokens); sample i is the\n"
                                 "text --seed SEED+i gives alone; printed one\n"
                                 "after the other, a line of 15 '-' between"},
    [GEN_DRY_RUN] = {"dry-run", CLI_FLAG, .offset = OFF(dry_run),
                     .help = "print the memory the run needs (the checkpoint's\n"
                             "header read; other formats are loaded), then exit"},
    [GEN_INSTRUCTION] = {"instruction", CLI_STRING, "TEXT", OFF(instruction),
                         .help = "chapter 7: the prompt is the book's template of TEXT\n"
                                 "(and --input); greedy, up to --max-new-tokens (256\n"
                                 "here), stops at <|endoftext|>; prints the response"},
    [GEN_INPUT] = {"input", CLI_STRING, "TEXT", OFF(input),
                   .help = "with --instruction: the entry's input"},
};
CLI_TABLE_CHECK(gen_opts_table, GEN_OPT_COUNT);

const cli_command generate_cli = {
    "generate",
    "attn generate [--checkpoint] DIR [--prompt TEXT] [--max-new-tokens N]\n"
    "                     [--temperature T] [--top-k K] [--top-p P] [--seed N]\n"
    "                     [--stop TEXT] [--window N] [--threads N]\n"
    "                     [--device cpu|cuda] [--precision fp32|bf16]\n"
    "                     [--allow-special] [--num-samples N] [--dry-run]\n"
    "       attn generate RUN --instruction TEXT [--input TEXT] [--max-new-tokens N]",
    "  Prints the prompt followed by max-new-tokens sampled tokens, then the\n"
    "  tokens per second on stderr. Sampling runs on the library's\n"
    "  attn_generator (attn/generate.h), as `attn viz --generate` does.\n",
    gen_opts_table,
    GEN_OPT_COUNT,
    0};

/* The table's values as the library's options. bf16 on the CPU is the
 * KV step's GEMV on bf16 weights (any CPU), not the bf16 engine: no check. */
static int library_options(const gen_opts *o, attn_generate_options *g) {
    attn_error err;
    attn_generate_options_default(g);
    attn_device_parse(o->device, &g->device, &err); /* the table allows only valid names */
    attn_precision_parse(o->precision, &g->precision, &err);
    g->temperature = o->temperature;
    g->top_k = (int)o->top_k;
    g->top_p = o->top_p;
    g->seed = o->seed;
    g->window_keep = (int)o->window;
    g->stop = o->stop;
    g->allow_special = o->allow_special;
    g->num_samples = (int)o->num_samples;
    if (g->device == ATTN_DEVICE_CUDA && g->num_samples > 1) {
        fprintf(stderr, "attn generate: --num-samples %lld: --device cuda decodes one sample\n",
                o->num_samples);
        return 2;
    }
    return 0;
}

/* Print n bytes through the display d (end: flush what it holds). */
typedef struct shown {
    attn_utf8_display d;
    char *buf;
    size_t cap;
} shown;

static int show(shown *s, const char *b, size_t n, int end) {
    const size_t need = ATTN_UTF8_DISPLAY_CAP(n);
    if (need > s->cap) {
        char *t = realloc(s->buf, need);
        if (!t) return fputs("attn generate: out of memory\n", stderr), 1;
        s->buf = t;
        s->cap = need;
    }
    const size_t k =
        end ? attn_utf8_display_end(&s->d, s->buf) : attn_utf8_display_put(&s->d, b, n, s->buf);
    fwrite(s->buf, 1, k, stdout);
    return cli_stdout_failed(); /* main.c says why */
}

/* Print the prompt and up to max_new sampled tokens. A gpt2 token may end
 * inside a character: the display holds it back until the next token
 * completes it, and shows invalid bytes as U+FFFD. */
static int generate_text(attn_generator *g, const char *prompt, long long max_new) {
    attn_error err;
    if (attn_generator_prompt(g, prompt, strlen(prompt), &err)) {
        fprintf(stderr, "attn generate: prompt: %s\n", err.msg);
        return 1;
    }
    shown s = {{{0}, 0}, NULL, 0};
    int rc = show(&s, prompt, strlen(prompt), 0);
    const double t0 = attn_now_s();
    for (long long i = 0; !rc && i < max_new && !g->stopped; i++) {
        const char *b;
        size_t k;
        if (attn_generator_next_token(g, NULL, &b, &k, &err)) {
            fprintf(stderr, "\nattn generate: %s\n", err.msg);
            rc = 1;
        } else {
            rc = show(&s, b, k, 0);
        }
    }
    if (!rc) rc = show(&s, NULL, 0, 1);
    free(s.buf);
    if (rc) return 1;
    fputc('\n', stdout);
    fflush(stdout);
    if (cli_stdout_failed()) return 1;
    const double dt = attn_now_s() - t0;
    fprintf(stderr, "attn generate: %lld tokens in %.2f s (%.0f tokens/s)\n",
            (long long)g->produced, dt, dt > 0 ? (double)g->produced / dt : 0.0);
    return 0;
}

/* Each sample's generated bytes. */
typedef struct sample_text {
    char *b;
    size_t n, cap;
} sample_text;

static int append(sample_text *t, const char *b, size_t k) {
    if (t->n + k > t->cap) {
        const size_t cap = (t->n + k) * 2 + 64;
        char *p = realloc(t->b, cap);
        if (!p) return fputs("attn generate: out of memory\n", stderr), 1;
        t->b = p;
        t->cap = cap;
    }
    memcpy(t->b + t->n, b, k);
    t->n += k;
    return 0;
}

/* Decode N samples together, then print each as one sample alone prints. */
static int decode_samples(attn_generator *g, long long max_new, sample_text *t) {
    attn_error err;
    const int N = g->num_samples;
    int32_t *ids = malloc((size_t)N * sizeof *ids);
    if (!ids) return fputs("attn generate: out of memory\n", stderr), 1;
    int rc = 0;
    for (long long i = 0; !rc && i < max_new && !g->stopped; i++) {
        if (attn_generator_next_tokens(g, ids, &err)) {
            fprintf(stderr, "attn generate: %s\n", err.msg);
            rc = 1;
        }
        for (int s = 0; !rc && s < N; s++) {
            if (ids[s] < 0) continue;
            char tmp[8];
            size_t k = 0;
            const char *b = attn_tokenizer_token(g->tok, ids[s], tmp, &k);
            rc = append(&t[s], b ? b : "", b ? k : 0);
        }
    }
    free(ids);
    return rc;
}

static int generate_samples(attn_generator *g, const char *prompt, long long max_new) {
    attn_error err;
    if (attn_generator_prompt(g, prompt, strlen(prompt), &err)) {
        fprintf(stderr, "attn generate: prompt: %s\n", err.msg);
        return 1;
    }
    const int N = g->num_samples;
    sample_text *t = calloc((size_t)N, sizeof *t);
    if (!t) return fputs("attn generate: out of memory\n", stderr), 1;
    const double t0 = attn_now_s();
    int rc = decode_samples(g, max_new, t);
    const double dt = attn_now_s() - t0;
    for (int s = 0; !rc && s < N; s++) {
        shown d = {{{0}, 0}, NULL, 0};
        if (s > 0) fputs("---------------\n", stdout);
        rc = show(&d, prompt, strlen(prompt), 0) || show(&d, t[s].b, t[s].n, 0) ||
             show(&d, NULL, 0, 1);
        free(d.buf);
        if (!rc) fputc('\n', stdout);
    }
    for (int s = 0; s < N; s++)
        free(t[s].b);
    free(t);
    fflush(stdout);
    if (rc || cli_stdout_failed()) return 1;
    fprintf(stderr, "attn generate: %d samples x %lld tokens in %.2f s (%.0f tokens/s)\n", N,
            (long long)g->produced, dt, dt > 0 ? (double)N * (double)g->produced / dt : 0.0);
    return 0;
}

static int generate_from(const gen_opts *o, const attn_generate_options *go, attn_gpt *model,
                         const attn_tokenizer *tok) {
    const int ctx = model->cfg.context_length;
    attn_error err;
    /* A model the engine does not compute: the request, not a failure. */
    if (go->device == ATTN_DEVICE_CUDA && attn_cuda_gpt_supports(&model->cfg, &err)) {
        fprintf(stderr, "attn generate: --device cuda: %s\n", err.msg);
        return 2;
    }
    if (o->window >= ctx) { /* the range depends on the model */
        return cli_bad_range(&generate_cli, &gen_opts_table[GEN_WINDOW], 1, ctx - 1,
                             "below the model's context_length", o->window);
    }
    attn_generator g; /* bf16: the fp32 Linear weights released first */
    if (attn_generate_prepare(model, go, &err) || attn_generator_init(&g, model, tok, go, &err)) {
        fprintf(stderr, "attn generate: %s%s\n", go->device ? "--device cuda: " : "", err.msg);
        return 1;
    }
    const char *prompt = o->prompt ? o->prompt : "\n";
    const int rc = g.num_samples > 1 ? generate_samples(&g, prompt, o->max_new)
                                     : generate_text(&g, prompt, o->max_new);
    attn_generator_free(&g);
    return rc;
}

/* The model of the checkpoint at path with the KV cache of a full context
 * per sample against the budget (attn/memory_plan.h: its file image while
 * it loads, the weights, the caches, bf16's copies, the process); or, with
 * the model of cfg already loaded, what the caches add. 0 to go on, else
 * the exit code. */
static int check_memory(const char *path, const attn_gpt_config *cfg, attn_tokenizer_kind kind,
                        const gen_opts *o) {
    attn_error err;
    attn_gpt_config c;
    attn_tokenizer tok;
    if (path) {
        if (attn_gpt_checkpoint_config(path, &c, &tok, NULL, &err)) {
            fprintf(stderr, "attn generate: %s\n", err.msg);
            return 1;
        }
        kind = tok.kind;
        attn_tokenizer_free(&tok);
        cfg = &c;
    }
    attn_mem_run run = {.mode = ATTN_MEM_GENERATE,
                        .batch = (int)o->num_samples,
                        .gpt2_tokenizer = kind == ATTN_TOKENIZER_GPT2,
                        .threads = o->threads > 0 ? (int)o->threads : attn_default_threads()};
    attn_device device = ATTN_DEVICE_CPU;
    attn_device_parse(o->device, &device, &err); /* the table allows only valid names */
    if (device == ATTN_DEVICE_CPU) attn_precision_parse(o->precision, &run.precision, &err);
    run.bf16_only = run.precision == ATTN_PRECISION_BF16; /* attn_generate_prepare's */
    attn_mem_plan p;
    attn_memory_plan(cfg, &run, &p);
    const double need = path ? p.total : p.kv_cache + p.bf16;
    if (o->dry_run) {
        char parts[512];
        printf("memory      ~%.1f MiB: %s\n", p.total / 1048576.0,
               attn_memory_plan_text(&p, parts, sizeof parts));
    }
    if (attn_mem_check(need, o->max_memory,
                       o->num_samples > 1 ? "the model with the samples' KV caches"
                                          : "the model with its KV cache",
                       &err)) {
        fprintf(stderr, "attn generate: %s\n", err.msg);
        return 1;
    }
    return 0;
}

/* --instruction: the book's generate on the entry's prompt (an instruct
 * run's adapters merged), the response printed as model_response. */
static int generate_instruction(const gen_opts *o, const cli_parsed *p) {
    static const int alone[] = {GEN_PROMPT, GEN_TEMPERATURE, GEN_TOP_K,         GEN_TOP_P,
                                GEN_SEED,   GEN_STOP,        GEN_WINDOW,        GEN_NUM_SAMPLES,
                                GEN_DEVICE, GEN_PRECISION,   GEN_ALLOW_SPECIAL, GEN_DRY_RUN};
    for (size_t k = 0; k < sizeof alone / sizeof alone[0]; k++)
        if (p->given[alone[k]]) {
            fprintf(stderr,
                    "attn generate: --%s does not apply with --instruction (the book's "
                    "greedy generate)\n",
                    gen_opts_table[alone[k]].name);
            return 2;
        }
    attn_error err;
    attn_gpt m;
    attn_tokenizer tok;
    attn_classifier_info info = {0};
    char task[16];
    attn_status s = attn_model_task(o->checkpoint, task, &err);
    if (!s && strcmp(task, "instruct") == 0) {
        s = attn_finetuned_load(o->checkpoint, &m, &tok, &info, &err);
    } else if (!s) {
        const attn_gpt_open_options open = {.n_heads = (int)o->n_heads, .budget = o->max_memory};
        s = attn_gpt_open(o->checkpoint, &open, &m, &tok, NULL, NULL, &err);
    }
    if (s) {
        fprintf(stderr, "attn generate: %s\n", err.msg);
        return 1;
    }
    int rc = 0;
    char *prompt = attn_instruct_prompt(o->instruction, o->input ? o->input : ""), *resp = NULL;
    int32_t *ids = NULL;
    size_t n = 0;
    if (tok.kind != ATTN_TOKENIZER_GPT2) {
        fprintf(stderr, "attn generate: --instruction needs a GPT-2 model\n");
        rc = 1;
    }
    const long long max_new = p->given[GEN_MAX_NEW] ? o->max_new : 256;
    const float scale = info.lora_rank ? info.lora_alpha / (float)info.lora_rank : 0;
    const int max_ids = (int)(max_new < INT_MAX ? max_new : INT_MAX);
    if (!rc && (!prompt || !(ids = malloc((size_t)max_ids * sizeof *ids + 1)))) {
        fprintf(stderr, "attn generate: out of memory\n");
        rc = 1;
    }
    if (!rc &&
        (attn_instruct_generate(&m, scale, &tok, prompt, max_ids, ATTN_PAD_ID, ids, &n, &err) ||
         attn_instruct_response(&tok, ids, n, &resp, &err))) {
        fprintf(stderr, "attn generate: %s\n", err.msg);
        rc = 1;
    }
    if (!rc) printf("%s\n", resp);
    free(prompt);
    free(ids);
    free(resp);
    attn_gpt_free(&m);
    attn_tokenizer_free(&tok);
    return rc;
}

int cmd_generate(int argc, char **argv) {
    gen_opts o;
    cli_parsed parsed;
    int rc = cli_parse(&generate_cli, argc, argv, &o, &parsed);
    if (rc) return rc == CLI_HELP ? 0 : rc;
    if (o.input && !o.instruction) {
        fprintf(stderr, "attn generate: --input goes with --instruction\n");
        return 2;
    }
    if (o.instruction) {
        cli_use_threads((int)o.threads, 1);
        return generate_instruction(&o, &parsed);
    }
    attn_generate_options go;
    if ((rc = library_options(&o, &go))) return rc;
    cli_use_threads((int)o.threads, 1); /* one token at a time: tiny products */
    attn_error err;
    attn_gpt model;
    attn_tokenizer tok;
    /* The weights and the KV cache of a full context against the budget,
     * from an attn checkpoint's header, before either exists. A stream, read
     * once, is checked once loaded (its weights are its bytes); GPT-2 files
     * of other programs (HF, llm.c, the book's) check their size as they
     * load, then the KV cache. */
    struct stat sb;
    const int file = stat(o.checkpoint, &sb) == 0 && (S_ISREG(sb.st_mode) || S_ISDIR(sb.st_mode));
    attn_weights_format fmt = ATTN_WEIGHTS_ATTN;
    if (file && attn_weights_detect(o.checkpoint, &fmt, &err)) {
        fprintf(stderr, "attn generate: %s\n", err.msg);
        return 1;
    }
    const int own = fmt == ATTN_WEIGHTS_ATTN;
    if (file && own &&
        ((rc = check_memory(o.checkpoint, NULL, ATTN_TOKENIZER_CHAR, &o)) || o.dry_run))
        return rc;
    const attn_gpt_open_options open = {.n_heads = (int)o.n_heads, .budget = o.max_memory};
    if (attn_gpt_open(o.checkpoint, &open, &model, &tok, NULL, NULL, &err)) {
        fprintf(stderr, "attn generate: %s\n", err.msg);
        return 1;
    }
    if ((!file || !own) && ((rc = check_memory(NULL, &model.cfg, tok.kind, &o)) || o.dry_run)) {
        attn_gpt_free(&model);
        attn_tokenizer_free(&tok);
        return rc;
    }
    rc = generate_from(&o, &go, &model, &tok);
    attn_gpt_free(&model);
    attn_tokenizer_free(&tok);
    return rc;
}
