/* attn train — train a GPT on a text corpus (attn/train.h):
 * progress bar on a terminal, log lines otherwise, checkpoints, loss.csv and
 * loss.svg in the output directory, Ctrl-C saves and exits, --resume
 * continues bit for bit. Under mpirun every rank runs this; rank 0 alone
 * prints and writes (attn/dist.h). The decisions before the first step are
 * the library's (attn/train_setup.h); this file parses the command line and
 * calls the library; what is drawn and printed is train_view.c's. */
#define _DEFAULT_SOURCE /* isatty, access */

#include <inttypes.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "attn/checkpoint.h"
#include "attn/cpu.h" /* attn_default_threads */
#include "attn/cuda.h"
#include "attn/dist.h"
#include "attn/fileio.h"
#include "attn/finetune.h"
#include "attn/lora.h"
#include "attn/membudget.h"
#include "attn/runlock.h"
#include "attn/thread_tuner.h"
#include "attn/train.h"
#include "attn/train_setup.h"
#include "clock.h"
#include "commands.h"
#include "finetune.h"
#include "options.h"
#include "threads.h"
#include "train_view.h"

/* ------------------------------------------------------------ options */

/* A training key's value as the parser stores it (by the row's type). */
typedef union key_slot {
    long long i;
    double d;
    const char *s;
} key_slot;

typedef struct train_opts {
    const char *data, *preset, *config, *out, *init_from, *device, *precision;
    const char *task, *val, *trainable; /* fine-tuning (cli/finetune.c) */
    long long epochs, lora_rank, n_heads, limit;
    double lora_alpha;
    int mask_prompt;
    long long threads, interrupt_after, kill_rank, kill_after, interrupt_in_eval;
    double progress_every; /* seconds (given: else TRAIN_PROGRESS_EVERY_S) */
    double max_memory;     /* bytes; 0: the memory available now */
    int resume, force, dry_run;
    key_slot keys[ATTN_TRAIN_KEY_COUNT]; /* the training keys (attn_train_key_at) */
} train_opts;

/* The command's own options, then one per training key (rows made from the
 * library's key table: flag, range and help are the library's), then the
 * testing hooks. */
enum {
    T_DATA,
    T_PRESET,
    T_CONFIG,
    T_OUT,
    T_RESUME,
    T_FORCE,
    T_INIT_FROM,
    T_DRY_RUN,
    T_THREADS,
    T_DEVICE,
    T_PRECISION,
    T_MAX_MEMORY,
    T_TASK,
    T_VAL,
    T_TRAINABLE,
    T_EPOCHS,
    T_LORA_RANK,
    T_LORA_ALPHA,
    T_N_HEADS,
    T_MASK_PROMPT,
    T_LIMIT,
    T_KEY0,
    T_INTERRUPT_AFTER = T_KEY0 + ATTN_TRAIN_KEY_COUNT,
    T_KILL_RANK,
    T_KILL_AFTER,
    T_INTERRUPT_IN_EVAL,
    T_PROGRESS_EVERY,
    TRAIN_OPT_COUNT
};

#define OFF(f) offsetof(train_opts, f)
static cli_option train_rows[TRAIN_OPT_COUNT] = {
    [T_DATA] = {"data", CLI_STRING, "FILE", OFF(data),
                .help = "the corpus (default " ATTN_TRAIN_DEFAULT_DATA ", or the\n"
                        "resumed run's)"},
    [T_PRESET] = {"preset", CLI_CHOICE, NULL, OFF(preset), .def = ATTN_TRAIN_DEFAULT_PRESET,
                  .choices_of = attn_gpt_preset_names,
                  .help = "the model and training recipe (resuming: the saved\n"
                          "run's config)"},
    [T_CONFIG] = {"config", CLI_STRING, "FILE.json", OFF(config),
                  .help = "model keys (the book's or seed 004's names) and\n"
                          "training keys (as named below)"},
    [T_OUT] = {"out", CLI_STRING, "DIR", OFF(out),
               .help = "the run folder (default runs/<preset>)"},
    [T_RESUME] = {"resume", CLI_FLAG, .offset = OFF(resume),
                  .help = "continue the run in DIR where it stopped (see above)"},
    [T_FORCE] = {"force", CLI_FLAG, .offset = OFF(force),
                 .help = "start over in a DIR that holds a checkpoint (its old\n"
                         "run's files go first)"},
    [T_INIT_FROM] = {"init-from", CLI_STRING, "CKPT", OFF(init_from),
                     .help = "a new run from CKPT's weights (fine-tuning, see above)"},
    [T_DRY_RUN] = {"dry-run", CLI_FLAG, .offset = OFF(dry_run),
                   .help = "print the resolved config and the plan, then exit"},
    [T_THREADS] = {"threads", CLI_INT, "N", OFF(threads), 1, 4096,
                   .help = "threads (default: all cores, or 1 where timed faster)"},
    [T_DEVICE] = {"device", CLI_CHOICE, NULL, OFF(device), .choices = cli_device_choices,
                  .def = "cpu", .help = "where the steps run (see above)"},
    [T_PRECISION] = {"precision", CLI_CHOICE, NULL, OFF(precision),
                     .choices = cli_precision_choices, .def = "fp32",
                     .help = "of the matrix products (see above)"},
    [T_MAX_MEMORY] = CLI_MAX_MEMORY_OPTION(OFF(max_memory)),
    [T_TASK] = {"task", CLI_CHOICE, NULL, OFF(task), .choices = finetune_task_choices, .def = "lm",
                .help = "lm: pre-train or fine-tune a language model; classify:\n"
                        "chapter 6's classifier; instruct: chapter 7's\n"
                        "instruction fine-tuning (both need --init-from)"},
    [T_VAL] = {"val", CLI_STRING, "FILE", OFF(val),
               .help = "classify: the validation set (CSV or TSV)"},
    [T_TRAINABLE] = {"trainable", CLI_CHOICE, NULL, OFF(trainable),
                     .choices_of = attn_trainable_set_names,
                     .help = "classify, instruct: what trains (classify: the book's\n"
                             "last block, final norm and head; instruct: all)"},
    [T_EPOCHS] = {"epochs", CLI_INT, "N", OFF(epochs), 1, 1e6,
                  .help = "classify, instruct: passes over the training set (the\n"
                          "book's 5 and 2)"},
    [T_LORA_RANK] = {"lora-rank", CLI_INT, "R", OFF(lora_rank), 1, ATTN_LORA_MAX_RANK,
                     .help = "classify: an adapter of rank R on every Linear\n"
                             "(appendix E); only the adapters train"},
    [T_LORA_ALPHA] = {"lora-alpha", CLI_FLOAT, "A", OFF(lora_alpha), 0, 1e6, .lo_open = 1,
                      .def = "16", .help = "the adapters' alpha (scale alpha / R, the book's)"},
    [T_N_HEADS] = CLI_N_HEADS_OPTION(OFF(n_heads)),
    [T_MASK_PROMPT] = {"mask-prompt", CLI_FLAG, .offset = OFF(mask_prompt),
                       .help = "instruct: no loss on the prompt's tokens either\n"
                               "(the book's exercise 7.2)"},
    [T_LIMIT] = {"limit", CLI_INT, "N", OFF(limit), 1, 1e15,
                 .help = "instruct: each split cut to its first N entries (the\n"
                         "script's --test_mode: 10)"},
    /* Testing hooks (tests/train_*.sh, mpi_train.sh): accepted, not in --help. */
    [T_INTERRUPT_AFTER] = {"interrupt-after", CLI_INT, "N", OFF(interrupt_after), 1, 1e19,
                           .hidden = 1,
                           .help = "as if Ctrl-C came after step N and its\nevaluation"},
    [T_KILL_RANK] = {"kill-rank", CLI_INT, "R", OFF(kill_rank), 0, 1e6, .hidden = 1,
                     .help = "with --kill-after: the rank to kill"},
    [T_KILL_AFTER] = {"kill-after", CLI_INT, "N", OFF(kill_after), 1, 1e19, .hidden = 1,
                      .help = "rank R sends itself SIGKILL after step N"},
    [T_INTERRUPT_IN_EVAL] = {"interrupt-in-eval", CLI_INT, "N", OFF(interrupt_in_eval), 0, 1e19,
                             .hidden = 1,
                             .help = "as if Ctrl-C came in the evaluation at step\n"
                                     "N, after its first batch"},
    [T_PROGRESS_EVERY] = {"progress-every", CLI_FLOAT, "S", OFF(progress_every), 0, 1e9,
                          .hidden = 1,
                          .help = "off a terminal, a progress line after S\n"
                                  "silent seconds (default " TRAIN_PROGRESS_EVERY_S "; 0: an\n"
                                  "evaluation's line per batch)"},
};
CLI_TABLE_CHECK(train_rows, TRAIN_OPT_COUNT);

static cli_command train_cli = {
    "train",
    "attn train [--data FILE] [--preset NAME] [--config FILE.json]\n"
    "                  [--out DIR] [--resume | --force | --init-from CKPT]\n"
    "                  [--dry-run] [--threads N] [--device cpu|cuda]\n"
    "                  [--precision fp32|bf16] [--steps N] [--lr X] ...\n"
    "       attn train --task classify --init-from MODEL --data FILE [--val FILE]\n"
    "                  --out RUN [--trainable all|last-block|head]\n"
    "                  [--lora-rank R [--lora-alpha A]] [--epochs N] ...\n"
    "       attn train --task instruct --init-from MODEL --data FILE.json\n"
    "                  --out RUN [--mask-prompt] [--limit N]\n"
    "                  [--lora-rank R [--lora-alpha A]] ...",
    "  Trains a GPT (the book's GPTModel) on FILE. --tokenizer char (the default):\n"
    "  vocabulary = its sorted characters, first 90% of the ids trains, the last\n"
    "  10% validates. --tokenizer gpt2 (the gpt2-* and book-ch05 presets): GPT-2's\n"
    "  BPE (its files: $ATTN_GPT2_DIR, else those installed with attn, else\n"
    "  data/gpt2 from scripts/get-data.sh gpt2; docs/training.md); the\n"
    "  first 90% of the text's characters trains, the rest validates, each part\n"
    "  encoded on its own, <|endoftext|> as the special token; the checkpoint\n"
    "  carries the tokenizer. The config is the\n"
    "  preset's, then --config's keys, then the options. --lr X sets the peak rate\n"
    "  and min_lr = X/10 (unless --min-lr is given).\n"
    "  Writes DIR/model.safetensors, DIR/train_state.safetensors, DIR/loss.csv and\n"
    "  DIR/loss.svg, and in DIR/best/ the model alone of the lowest val loss so far\n"
    "  (attn generate --checkpoint DIR/best samples from it); checkpoints at step 0,\n"
    "  every --checkpoint-interval steps (none given: at an evaluation 10 minutes\n"
    "  or more after the last), at the end and on Ctrl-C, SIGTERM or SIGHUP,\n"
    "  written while training goes on; each evaluation writes the loss\n"
    "  files; each checkpoint is committed whole (DIR/ckpt-<step>, DIR/latest).\n"
    "  --resume continues the run in DIR exactly where it stopped, with its saved\n"
    "  config and corpus (the command that started it plus --resume continues it;\n"
    "  a --preset, --config or option that changes the config is refused);\n"
    "  with --steps N it trains to step N instead (a finished run goes on): the LR\n"
    "  schedule keeps its old horizon, so steps past the old max_steps run at\n"
    "  min_lr. A DIR that already holds a checkpoint needs --resume or --force\n"
    "  (start over: the old run's checkpoints, best/ and loss files go first; files\n"
    "  of yours stay). DIR must be new, empty or a run folder of attn's (it deletes\n"
    "  nothing it did not make). One run per DIR at a time.\n"
    "  --device cuda trains on the GPU (same checkpoint files; GPU dropout uses\n"
    "  Philox, so with dropout it differs from a CPU run of the same seed);\n"
    "  --precision bf16 runs the matrix products with bf16 operands and fp32\n"
    "  sums: on the GPU's tensor cores, or on the CPU with AVX512-BF16 (oneDNN);\n"
    "  weights, optimizer and checkpoints stay fp32. --preset speedrun runs bf16\n"
    "  where the CPU has AVX512-BF16 (else fp32) unless --precision says.\n"
    "  --grad-accum N: N micro-batches of --batch-size per step, gradients averaged\n"
    "  (summed in a fixed order). Under `mpirun -np R` the N micro-batches (default\n"
    "  R; N a multiple of R) are split over the R ranks, bit for bit the same run\n"
    "  as one process with --grad-accum N; rank 0 prints and writes.\n"
    "  --init-from CKPT starts a new run (step 0, fresh AdamW) from the weights of\n"
    "  checkpoint CKPT (fine-tuning): the model's shape and vocabulary are CKPT's\n"
    "  (the corpus may use part of it); the training recipe comes from the\n"
    "  preset, --config and the options.\n"
    "  --dry-run makes the real run's checks, prints the resolved config, the\n"
    "  tokens of each split, what the evaluations cost, where the run stands,\n"
    "  parameter count, memory, checkpoint size and a time estimate (the median\n"
    "  of nine matrix-product timings here), and exits; writes nothing\n"
    "  and allocates no model (checkpoints are read from their headers).\n"
    "  Runs above 10^15 operations (seed004: hours) print that estimate first.\n"
    "  --task classify fine-tunes MODEL (any weights file attn reads) as the book's\n"
    "  chapter 6 does: FILE and --val are CSVs (header Label,Text) or TSVs\n"
    "  (label<TAB>text), the head has a class per label, the loss is on the last\n"
    "  position; batch 8, lr 5e-5, weight decay 0.1, 5 epochs, evaluations every\n"
    "  50 steps on 5 batches unless --batch-size, --lr, --weight-decay, --epochs,\n"
    "  --eval-interval, --eval-iters, --seed say; it prints the book's lines and\n"
    "  writes RUN/model.safetensors and RUN/log.csv (docs/finetuning.md).\n"
    "  --task instruct: chapter 7 (FILE.json as the book's instruction-data.json;\n"
    "  the test split's responses in RUN/responses.json; docs/finetuning.md).\n"
    "  Training options without a default take the preset's (or the saved run's).\n",
    train_rows,
    TRAIN_OPT_COUNT,
    0};

/* The option row of training key i (attn_train_key_at): its flag, range and
 * help are the library's. */
static cli_option key_row(int i, char *help, size_t cap) {
    static const cli_type types[] = {
        [ATTN_TKEY_INT] = CLI_INT, [ATTN_TKEY_NUMBER] = CLI_FLOAT, [ATTN_TKEY_CHOICE] = CLI_CHOICE};
    const attn_train_key *k = attn_train_key_at(i);
    snprintf(help, cap, "%s: %s", k->name, k->help);
    return (cli_option){.name = k->flag,
                        .type = types[k->type],
                        .metavar = k->type == ATTN_TKEY_CHOICE ? NULL
                                   : k->type == ATTN_TKEY_INT  ? "N"
                                                               : "X",
                        .offset = OFF(keys) + (size_t)i * sizeof(key_slot),
                        .lo = k->lo,
                        .hi = k->hi,
                        .hi_open = k->hi_open,
                        .lo_open = k->lo_open,
                        .choices = k->choices,
                        .help = help};
}

/* The rows made from the library's tables, filled on the first call. */
const cli_command *train_cli_table(void) {
    static char help[ATTN_TRAIN_KEY_COUNT][256];
    static char about[8192];
    if (train_rows[T_KEY0].name) return &train_cli;
    for (int i = 0; i < ATTN_TRAIN_KEY_COUNT; i++)
        train_rows[T_KEY0 + i] = key_row(i, help[i], sizeof help[i]);
    /* The model keys of --config, from the library's table. */
    size_t used = (size_t)snprintf(about, sizeof about,
                                   "%s  Model keys of --config (the variant keys from pos_emb on "
                                   "default to the book's\n  GPTModel; docs/model-variants.md):\n",
                                   train_cli.about);
    for (int i = 0; i < ATTN_GPT_KEY_COUNT && used < sizeof about; i++) {
        const attn_gpt_key *k = attn_gpt_key_at(i);
        char range[96];
        attn_gpt_key_describe(k, range, sizeof range);
        used += (size_t)snprintf(about + used, sizeof about - used, "    %s%s%s: %s\n      %s\n",
                                 k->name, k->alias ? ", " : "", k->alias ? k->alias : "", range,
                                 k->help);
    }
    train_cli.about = about;
    return &train_cli;
}

/* The request of the parsed command line (attn/train_setup.h). */
static void make_request(const train_opts *o, const cli_parsed *p, int ranks,
                         attn_train_request *rq) {
    attn_train_request_init(rq);
    rq->preset = p->given[T_PRESET] ? o->preset : NULL; /* resuming: the saved one */
    rq->config = o->config;
    rq->data = o->data;
    rq->out = o->out;
    rq->init_from = o->init_from;
    rq->resume = o->resume;
    rq->force = o->force;
    rq->dry_run = o->dry_run;
    rq->ranks = ranks;
    for (int i = 0; i < ATTN_TRAIN_KEY_COUNT; i++) {
        if (!p->given[T_KEY0 + i]) continue;
        const attn_train_key *k = attn_train_key_at(i);
        attn_train_value v = {0, 0, NULL};
        if (k->type == ATTN_TKEY_INT)
            v.i = o->keys[i].i;
        else if (k->type == ATTN_TKEY_NUMBER)
            v.d = o->keys[i].d;
        else
            v.s = o->keys[i].s;
        attn_train_request_set(rq, i, v);
    }
}

/* ------------------------------------------------------- fine-tuning */

/* A training key that --task classify reads (its config's field), else -1. */
static int classify_key(const char *name) {
    static const char *const keys[] = {"batch_size",    "learning_rate", "beta1",
                                       "beta2",         "eps",           "weight_decay",
                                       "eval_interval", "eval_iters",    "seed"};
    for (int i = 0; i < (int)(sizeof keys / sizeof keys[0]); i++)
        if (strcmp(name, keys[i]) == 0) return i;
    return -1;
}

static void set_classify_key(attn_classify_config *c, int k, const key_slot *v) {
    switch (k) {
    case 0: c->batch_size = (int)v->i; break;
    case 1: c->lr = v->d; break;
    case 2: c->beta1 = v->d; break;
    case 3: c->beta2 = v->d; break;
    case 4: c->eps = v->d; break;
    case 5: c->weight_decay = v->d; break;
    case 6: c->eval_freq = (int)v->i; break;
    case 7: c->eval_iter = (int)v->i; break;
    default: c->seed = (uint64_t)v->i; break;
    }
}

/* The options of a fine-tuning task: its own, and the training keys it
 * reads; any other is a usage error (2) naming it. */
static int finetune_request_of(const train_opts *o, const cli_parsed *p, finetune_request *rq) {
    static const int allowed[] = {T_DATA,      T_OUT,         T_INIT_FROM, T_DRY_RUN,
                                  T_THREADS,   T_PRECISION,   T_TASK,      T_VAL,
                                  T_TRAINABLE, T_EPOCHS,      T_LORA_RANK, T_LORA_ALPHA,
                                  T_N_HEADS,   T_MASK_PROMPT, T_LIMIT,     T_RESUME};
    const int instruct = strcmp(o->task, "instruct") == 0;
    memset(rq, 0, sizeof *rq);
    rq->cfg = instruct ? attn_instruct_defaults() : attn_classify_defaults();
    const int own[] = {instruct ? T_VAL : T_MASK_PROMPT, instruct ? T_VAL : T_LIMIT};
    for (int k = 0; k < 2; k++)
        if (p->given[own[k]]) {
            fprintf(stderr, "attn train: --%s does not apply to --task %s (docs/finetuning.md)\n",
                    train_rows[own[k]].name, o->task);
            return 2;
        }
    for (int i = 0; i < TRAIN_OPT_COUNT; i++) {
        if (!p->given[i]) continue;
        int ok = 0;
        for (size_t k = 0; k < sizeof allowed / sizeof allowed[0]; k++)
            ok |= allowed[k] == i;
        const int key = i >= T_KEY0 && i < T_KEY0 + ATTN_TRAIN_KEY_COUNT
                            ? classify_key(attn_train_key_at(i - T_KEY0)->name)
                            : -1;
        if (key >= 0) set_classify_key(&rq->cfg, key, &o->keys[i - T_KEY0]);
        if (!ok && key < 0) {
            fprintf(stderr, "attn train: --%s does not apply to --task %s (docs/finetuning.md)\n",
                    train_rows[i].name, o->task);
            return 2;
        }
    }
    rq->task = o->task;
    rq->data = o->data;
    rq->val = o->val;
    rq->out = o->out;
    rq->init_from = o->init_from;
    rq->precision = o->precision;
    rq->dry_run = o->dry_run;
    rq->resume = o->resume;
    rq->threads = o->threads;
    rq->n_heads = (int)o->n_heads;
    rq->limit = o->limit;
    rq->cfg.mask_prompt = o->mask_prompt;
    if (p->given[T_EPOCHS]) rq->cfg.epochs = (int)o->epochs;
    for (int i = 0; o->trainable && attn_trainable_set_names()[i]; i++)
        if (strcmp(o->trainable, attn_trainable_set_names()[i]) == 0)
            rq->cfg.trainable = (attn_trainable_set)i;
    rq->cfg.lora_rank = (int)o->lora_rank;
    rq->cfg.lora_alpha = (float)o->lora_alpha;
    if (p->given[T_TRAINABLE] && rq->cfg.lora_rank) {
        fprintf(stderr, "attn train: --trainable and --lora-rank: with adapters only they train "
                        "(appendix E); give one of them\n");
        return 2;
    }
    return -1;
}

/* --task lm with an option of the fine-tuning tasks: a usage error. */
static int lm_refuses(const train_opts *o, const cli_parsed *p) {
    static const int rows[] = {T_VAL,        T_TRAINABLE, T_EPOCHS,      T_LORA_RANK,
                               T_LORA_ALPHA, T_N_HEADS,   T_MASK_PROMPT, T_LIMIT};
    for (size_t k = 0; k < sizeof rows / sizeof rows[0]; k++)
        if (p->given[rows[k]]) {
            fprintf(stderr,
                    "attn train: --%s is an option of --task classify or instruct, not of --task "
                    "%s\n",
                    train_rows[rows[k]].name, o->task);
            return 2;
        }
    return -1;
}

/* ------------------------------------------------------------ the run */

/* Everything one run of the command holds. */
typedef struct train_cmd {
    train_opts o;
    cli_parsed parsed;
    attn_train_request rq;
    attn_train_setup su;
    attn_device device;
    attn_precision precision;
    int preset_bf16_denied; /* the preset asks for bf16 and this CPU has none */
    attn_dist *dist;
    attn_run_lock *lock;
    attn_train_claim cl; /* the run folder, released (and undone on failure) at the end */
    int lead, collective, claimed;
    char out_abs[ATTN_TRAIN_PATH_MAX];
    char *text;
    size_t n;
} train_cmd;

/* The corpus's bytes: the text read (a char run), else the file's size. */
static double corpus_size(const train_cmd *c) {
    struct stat sb;
    if (c->text) return (double)c->n;
    return c->su.data[0] && stat(c->su.data, &sb) == 0 ? (double)sb.st_size : 0;
}

/* What train_view.c prints of the run besides its trainer. */
static train_run_info run_info(const train_cmd *c) {
    return (train_run_info){.preset = c->su.preset,
                            .data = c->su.data,
                            .out = c->su.out,
                            .init_from = c->o.init_from,
                            .resume = c->o.resume,
                            .force = c->o.force,
                            .threads = (int)c->o.threads,
                            .ranks = c->dist->size,
                            .device = c->device,
                            .precision = c->precision,
                            .corpus_bytes = corpus_size(c)};
}

/* The command line: -1 to go on, else the exit code. */
static int parse(train_cmd *c, int argc, char **argv) {
    int prc = cli_parse(train_cli_table(), argc, argv, &c->o, &c->parsed);
    if (prc) return prc == CLI_HELP ? 0 : prc;
    attn_error err; /* the table allows only valid names */
    attn_device_parse(c->o.device, &c->device, &err);
    attn_precision_parse(c->o.precision, &c->precision, &err);
    /* A preset may ask for bf16 (speedrun); --precision, or a CPU without
     * AVX512-BF16, says fp32. */
    if (!c->parsed.given[T_PRECISION] && c->parsed.given[T_PRESET] &&
        c->device == ATTN_DEVICE_CPU &&
        attn_train_preset_precision(c->o.preset) == ATTN_PRECISION_BF16) {
        if (attn_precision_check(ATTN_PRECISION_BF16, NULL) == ATTN_OK)
            c->precision = ATTN_PRECISION_BF16;
        else
            c->preset_bf16_denied = 1;
    }
    /* a fine-tuning run's --init-from is its base, given again to resume */
    const int finetune = strcmp(c->o.task, "lm") != 0;
    const char *clash = !c->o.resume ? NULL
                        : c->o.init_from && !finetune
                            ? "--init-from starts a new run from trained weights"
                        : c->o.force ? "--force replaces the run"
                                     : NULL;
    if (clash) {
        fprintf(stderr, "attn train: %s and --resume continues one: give one of them\n", clash);
        return 2;
    }
    if (c->o.resume && !c->o.out) {
        fprintf(stderr, "attn train: --resume needs --out DIR (the run to continue)\n");
        return 2;
    }
    /* One thread pool (attn/gemm.h): OpenMP threads, each calling a
     * single-threaded OpenBLAS; --threads N also sets OMP_NUM_THREADS. */
    cli_use_threads((int)c->o.threads, 1);
    return -1;
}

/* The configs and the corpus: -1 to go on, else the exit code. */
static int resolve(train_cmd *c) {
    attn_error err;
    make_request(&c->o, &c->parsed, c->dist->size, &c->rq);
    if (attn_train_resolve(&c->rq, &c->su, &err)) {
        fprintf(stderr, "attn train: %s\n", err.msg);
        return c->su.request_error ? 2 : 1;
    }
    if (c->device == ATTN_DEVICE_CUDA && attn_cuda_gpt_supports(&c->su.model, &err)) {
        fprintf(stderr, "attn train: --device cuda: %s\n", err.msg);
        return 2;
    }
    /* A gpt2 run maps its token files (attn_train_start): only a char run,
     * whose vocabulary is the text's, reads the corpus here. */
    if (c->su.train.tokenizer == ATTN_TOKENIZER_GPT2) return -1;
    if (attn_file_read_all(c->su.data, 0, (void **)&c->text, &c->n, &err)) {
        fprintf(stderr, "attn train: cannot read the corpus: %s\n", err.msg);
        return 1;
    }
    if (c->n == 0) {
        fprintf(stderr, "attn train: the corpus %s is empty\n", c->su.data);
        return 1;
    }
    return -1;
}

/* The run's model, optimizer and activations against the memory budget,
 * from the configs alone: nothing of the model is allocated before this. */
static int check_memory(train_cmd *c) {
    attn_gpt_config pm = c->su.model;
    attn_tokenizer tok;
    attn_error err;
    if (!c->su.vocab_given && attn_tokenizer_train(&tok, c->text, c->n, &err) == ATTN_OK) {
        pm.vocab_size = tok.vocab_size;
        attn_tokenizer_free(&tok);
    }
    const attn_train_plan_env env = {
        .precision = c->device == ATTN_DEVICE_CPU ? c->precision : ATTN_PRECISION_FP32,
        .threads = c->o.threads > 0 ? (int)c->o.threads : attn_default_threads(),
        .corpus_bytes = corpus_size(c),
        .resume = c->o.resume};
    attn_train_plan p;
    attn_train_plan_env_of(&pm, &c->su.train, &env, &p);
    if (attn_mem_check(p.mem_bytes, c->o.max_memory,
                       "the run (weights, gradients, AdamW moments and activations)", &err)) {
        c->collective = c->o.max_memory > 0; /* every rank has the same limit */
        if (c->lead || !c->collective) fprintf(stderr, "attn train: %s\n", err.msg);
        return 1;
    }
    return -1;
}

/* The cost warning of a large run (rank 0, before the folder is claimed). */
static void warn_big(train_cmd *c) {
    attn_gpt_config pm = c->su.model;
    attn_tokenizer tok;
    attn_error err;
    if (!c->su.vocab_given && attn_tokenizer_train(&tok, c->text, c->n, &err) == ATTN_OK) {
        pm.vocab_size = tok.vocab_size;
        attn_tokenizer_free(&tok);
    }
    const train_run_info info = run_info(c);
    train_warn_cost(&info, &pm, &c->su.train);
}

/* --dry-run: what claim() refuses of out, read only (no folder made, no lock). */
static int check_dir(const train_cmd *c, const char *out) {
    attn_train_claim cl;
    attn_error err;
    if (!attn_train_check_dir(out, c->o.resume, c->o.force, c->o.init_from, &cl, &err)) return -1;
    if (cl.request_error == 1)
        fprintf(stderr, "attn train: %s; continue it with --resume or start over with --force\n",
                err.msg);
    else
        fprintf(stderr, "attn train: %s\n", err.msg);
    return cl.request_error ? 2 : 1; /* as claim() */
}

/* Rank 0 makes, locks and checks the run folder out: -1 to go on. */
static int claim(train_cmd *c, const char *out) {
    attn_train_claim *cl = &c->cl;
    attn_error err;
    char who[ATTN_TRAIN_PATH_MAX + 32];
    c->claimed = 1;
    snprintf(who, sizeof who, "attn train --out %s", out);
    if (attn_train_claim_dir(out, who, c->o.resume, c->o.force, c->o.init_from, c->lock, cl,
                             &err)) {
        if (cl->request_error == 1)
            fprintf(stderr,
                    "attn train: %s; continue it with --resume or start over with --force\n",
                    err.msg);
        else if (err.code == ATTN_ERR_STATE)
            fprintf(stderr, "attn train: %s; wait for it to finish or choose another --out\n",
                    err.msg);
        else
            fprintf(stderr, "attn train: %s\n", err.msg);
        return cl->request_error ? 2 : 1;
    }
    if (cl->replaced_step >= 0)
        fprintf(stderr,
                "attn train: --force: starting over in %s; removed the old run (its checkpoint at "
                "step %" PRId64 ", best/, loss.csv, loss.svg)%s\n",
                out, cl->replaced_step, cl->kept ? "; the files of yours in it stay" : "");
    if (cl->repaired[0]) fprintf(stderr, "attn train: %s\n", cl->repaired);
    if (cl->warning[0]) fprintf(stderr, "attn train: warning: %s\n", cl->warning);
    if (cl->stale_removed)
        fprintf(stderr,
                "attn train: removed %d stale temporary file(s) from an earlier run in %s\n",
                cl->stale_removed, out);
    snprintf(c->out_abs, sizeof c->out_abs, "%s", cl->out_abs);
    return -1;
}

/* The trainer (attn_train_start: fresh, resumed or started from CKPT) on
 * its device: -1 to go on. --dry-run runs it too: it writes nothing. */
static int start(train_cmd *c, attn_trainer **out) {
    attn_error err;
    const int lead = c->lead;
    if (attn_train_start(out, &c->rq, &c->su, c->text, c->n, &err)) {
        fprintf(stderr, "attn train: %s\n", err.msg);
        return 1;
    }
    attn_trainer *tr = *out;
    if (attn_trainer_set_dist(tr, c->dist, &err)) {
        if (lead) fprintf(stderr, "attn train: %s\n", err.msg);
        c->collective = 1; /* every rank sees the same config */
        return 2;
    }
    /* loss.csv/svg are written after each checkpoint: a run stopped in
     * between left them a step behind, so redo them from the checkpoint. */
    if (c->o.resume && lead && !c->o.dry_run &&
        attn_trainer_write_loss_files(tr, c->su.out, &err)) {
        fprintf(stderr, "attn train: %s\n", err.msg);
        return 1;
    }
    if (c->o.init_from && lead && !c->o.dry_run)
        fprintf(stderr, "attn train: starting from the weights of %s (fine-tuning)\n",
                c->o.init_from);
    const attn_device dev = c->device;
    if (dev != ATTN_DEVICE_CPU &&
        (attn_trainer_train_config(tr)->grad_accum > 1 || c->dist->size > 1)) {
        if (lead)
            fprintf(stderr,
                    "attn train: --device %s does not combine with --grad-accum or mpirun yet "
                    "(they run on --device cpu)\n",
                    attn_device_name(dev));
        c->collective = 1;
        return 2;
    }
    if (c->preset_bf16_denied && lead)
        fprintf(stderr,
                "attn train: --preset %s runs in bf16 where the CPU has AVX512-BF16; this one "
                "has not: fp32 (the preset's 600-s figures are bf16's)\n",
                c->o.preset);
    if (dev != ATTN_DEVICE_CPU || c->precision != ATTN_PRECISION_FP32) {
        if (attn_trainer_set_device(tr, dev, c->precision, &err)) {
            fprintf(stderr, "attn train: --device %s: %s\n", attn_device_name(dev), err.msg);
            return dev != ATTN_DEVICE_CPU ? 1 : 2;
        }
        fprintf(stderr, "attn train: on %s, %s\n", attn_device_name(dev),
                attn_precision_name(c->precision));
    }
    if (c->dist->size > 1 && attn_trainer_check_ranks(tr, &err)) {
        if (lead) fprintf(stderr, "attn train: refusing to start: %s\n", err.msg);
        c->collective = 1;
        return 1;
    }
    return -1;
}

/* The steps, drawn as they come; Ctrl-C, SIGTERM and SIGHUP save and stop. */
static int train_loop(train_cmd *c, attn_trainer *tr) {
    train_view_catch_signals();
    train_view view = {.tty = c->lead && c->dist->size == 1 && isatty(STDOUT_FILENO),
                       .lead = c->lead,
                       .cols = train_view_columns(),
                       .t_start = attn_now_s(),
                       .every_s = c->parsed.given[T_PROGRESS_EVERY] ? c->o.progress_every
                                                                    : atof(TRAIN_PROGRESS_EVERY_S),
                       .last_line = attn_now_s(),
                       .line_part = -1,
                       .interrupt_after = c->o.interrupt_after,
                       .interrupt_in_eval =
                           c->parsed.given[T_INTERRUPT_IN_EVAL] ? c->o.interrupt_in_eval : -1,
                       .kill_rank = c->parsed.given[T_KILL_RANK] ? c->o.kill_rank : -1,
                       .kill_after = c->o.kill_after};
    /* No --threads and no OMP_NUM_THREADS: the count adapts
     * (attn/thread_tuner.h), on the fp32 CPU path of one process, whose
     * results do not depend on it. */
    attn_thread_tuner tuner;
    if (!c->parsed.given[T_THREADS] && c->o.threads <= 0 && !getenv("OMP_NUM_THREADS") &&
        c->dist->size == 1 && c->device == ATTN_DEVICE_CPU && c->precision == ATTN_PRECISION_FP32 &&
        attn_default_threads() >= 2) {
        attn_thread_tuner_init(&tuner, attn_default_threads());
        view.tuner = &tuner;
        view.threads_now = tuner.cur;
    }
    const attn_trainer_events events = train_view_events(&view);
    attn_train_result res;
    attn_error err;
    attn_status s = attn_trainer_run(tr, c->su.out, c->o.resume, &events, &res, &err);
    if (view.bar_shown) printf("\n");
    if (s) {
        fprintf(stderr, "attn train: %s\n", err.msg);
        return 1;
    }
    if (c->lead && view.tuner && tuner.steps_one > 0)
        fprintf(stderr,
                "attn train: adaptive threads: %" PRId64 " steps on 1 thread, the rest on %d\n",
                tuner.steps_one, tuner.max);
    if (c->lead) train_report_end(tr, &res, c->out_abs);
    return res.stopped ? train_view_stop_code() : 0;
}

static int train_run(train_cmd *c, int argc, char **argv) {
    const double t_cmd = attn_now_s();
    int rc = parse(c, argc, argv);
    if (rc < 0 && strcmp(c->o.task, "lm") != 0) {
        finetune_request frq;
        if (c->dist->size > 1) {
            fprintf(stderr, "attn train: --task %s runs in one process, not under mpirun\n",
                    c->o.task);
            return 2;
        }
        rc = finetune_request_of(&c->o, &c->parsed, &frq);
        return rc < 0 ? finetune_train(&frq) : rc;
    }
    if (rc < 0) rc = lm_refuses(&c->o, &c->parsed);
    const int dry = c->o.dry_run;
    /* A run to continue is locked (a dry run's checked) before its
     * checkpoint is read. */
    if (rc < 0 && c->lead && c->o.resume && c->o.out && access(c->o.out, F_OK) == 0)
        rc = dry ? check_dir(c, c->o.out) : claim(c, c->o.out);
    if (rc < 0) rc = resolve(c);
    if (rc < 0) rc = check_memory(c);
    if (rc < 0 && c->lead && !dry) warn_big(c);
    /* --dry-run makes every check of the real set-up but writes nothing:
     * no folder, no lock, no loss files; then reports instead of training. */
    if (rc < 0 && c->lead && dry) rc = check_dir(c, c->su.out);
    if (rc < 0 && c->lead && !dry && !c->claimed) rc = claim(c, c->su.out);
    if (rc >= 0) return rc;
    attn_trainer *tr = NULL;
    rc = start(c, &tr);
    free(c->text);
    c->text = NULL;
    const train_run_info info = run_info(c);
    if (rc < 0 && dry) {
        c->collective = 1;
        rc = c->lead ? train_print_dry_run(&info, tr) : 0;
    } else if (rc < 0) {
        /* --time-budget is wall time from the command's start: the set-up
         * (corpus, model, checkpoint) is on the run's clock too. */
        if (attn_trainer_train_config(tr)->time_budget > 0)
            attn_trainer_add_elapsed(tr, attn_now_s() - t_cmd);
        if (c->lead) train_announce(&info, tr);
        rc = train_loop(c, tr);
    }
    attn_trainer_free(tr);
    return rc;
}

/* A run stopped by a signal after its save (train_view_stop_code). */
static int stopped(int rc) {
    return rc == 128 + SIGINT || rc == 128 + SIGTERM || rc == 128 + SIGHUP;
}

int cmd_train(int argc, char **argv) {
    attn_dist dist;
    attn_error err;
    attn_error_clear(&err);
    if (attn_dist_init(&dist, NULL, NULL, &err)) {
        fprintf(stderr, "attn train: %s\n", err.msg);
        return 1;
    }
    attn_run_lock lock = {.fd = -1};
    train_cmd *c = calloc(1, sizeof *c);
    int rc = 1;
    if (c) {
        c->dist = &dist;
        c->lock = &lock;
        c->lead = dist.rank == 0;
        rc = train_run(c, argc, argv);
        free(c->text);
        /* A run that failed before saving takes back the folder it made. */
        attn_train_claim_release(&c->cl, &lock, rc != 0 && !stopped(rc));
    }
    attn_run_lock_release(&lock);
    if (rc != 0 && !stopped(rc) && dist.size > 1 && !(c && c->collective)) {
        /* The other ranks would wait for this one forever: end the job. */
        fprintf(stderr, "attn train: rank %d of %d failed (exit code %d); ending the job\n",
                dist.rank, dist.size, rc);
        fflush(stderr);
        attn_dist_abort(&dist, rc);
    }
    free(c);
    attn_dist_free(&dist);
    return rc;
}
