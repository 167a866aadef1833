/* One table of options per command: each row names a flag, its type, its
 * valid range or choices, its default and its help, and where the parsed
 * value goes (an offset into the command's options struct). The same rows
 * drive parsing (`--flag value` and `--flag=value`), the errors (one wording:
 * "attn CMD: --flag must be <what the row allows>, not 'x'"), and `--help`.
 *
 *     enum { RNG_SEED, RNG_COUNT, RNG_OPT_COUNT };
 *     static const cli_option rng_opts[] = {
 *         [RNG_SEED] = {"seed", CLI_U64, "N", OFF(seed), .def = "123", .help = "..."},
 *         ...};
 *     CLI_TABLE_CHECK(rng_opts, RNG_OPT_COUNT);
 *
 * Field types: CLI_FLAG int, CLI_INT long long, CLI_U64 unsigned long long,
 * CLI_FLOAT double, CLI_STRING / CLI_CHOICE const char *, CLI_SIZE double. Every field is
 * zeroed (NULL) and then set from .def before parsing, so the help text and
 * the behaviour cannot disagree; cli_parsed.given says what the user set. Exit codes: 2 for any
 * usage error, 0 for --help. A misspelt option or choice is answered with the
 * nearest name ("did you mean '--temperature'?", cli_near); a row marked
 * .hidden (a testing hook) is accepted but neither shown nor suggested. */
#ifndef ATTN_CLI_OPTIONS_H
#define ATTN_CLI_OPTIONS_H

#include <float.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef enum cli_type {
    CLI_FLAG,   /* no value; sets an int to 1 */
    CLI_INT,    /* long long in [lo, hi] */
    CLI_U64,    /* unsigned long long (a seed): any 64-bit value, no sign */
    CLI_FLOAT,  /* double in [lo, hi], (lo with lo_open, hi) with hi_open; never NaN */
    CLI_STRING, /* const char * (borrowed from argv); not the empty string */
    CLI_CHOICE, /* const char *, one of .choices (or .choices_of()) */
    CLI_SIZE    /* double: bytes, as "2G", "512M" (attn_parse_size); 0 when not given */
} cli_type;

#define CLI_MAX_CHOICES 8
#define CLI_MAX_OPTIONS 64

typedef struct cli_option {
    const char *name; /* without the leading "--" */
    cli_type type;
    const char *metavar;        /* "N", "DIR", ... (NULL for flags and choices) */
    size_t offset;              /* where the value goes in the command's struct */
    double lo, hi;              /* CLI_INT / CLI_FLOAT range */
    int hi_open;                /* CLI_FLOAT: hi itself is not allowed */
    const char *const *choices; /* CLI_CHOICE: NULL-terminated */
    const char *def;            /* default as typed on the command line; NULL = none */
    int required;
    const char *help;
    int lo_open; /* CLI_FLOAT: lo itself is not allowed (a rate > 0) */
    int hidden;  /* a testing hook: accepted, but not in --help nor suggested */
    /* CLI_STRING: the first positional argument may give it (`attn generate
     * DIR` = `attn generate --checkpoint DIR`; both is an error). One row at
     * most; the argument does not count in max_positional. */
    int positional;
    /* CLI_CHOICE: the choices from the library at run time (e.g.
     * attn_gpt_preset_names), used instead of .choices. */
    const char *const *(*choices_of)(void);
} cli_option;

typedef struct cli_command {
    const char *name;     /* "rng": messages read "attn rng: ..." */
    const char *synopsis; /* the usage line(s) after "usage: " */
    const char *about;    /* paragraph(s) printed before the options */
    const cli_option *opts;
    int n_opts;
    int max_positional; /* positional arguments allowed (0 = none) */
} cli_command;

/* Parsing outcome: CLI_OK, CLI_HELP (help printed: exit 0) or CLI_USAGE
 * (message printed: exit 2). */
enum { CLI_OK = 0, CLI_HELP = -1, CLI_USAGE = 2 };

typedef struct cli_parsed {
    unsigned char given[CLI_MAX_OPTIONS]; /* row i was on the command line */
    const char *positional[32];
    int n_positional;
} cli_parsed;

/* A table's row count must equal its enum's count (and fit the parser). */
#define CLI_TABLE_CHECK(table, count)                                                              \
    _Static_assert(sizeof(table) / sizeof((table)[0]) == (count),                                  \
                   #table " has a row for every option");                                          \
    _Static_assert((count) <= CLI_MAX_OPTIONS, #table " fits CLI_MAX_OPTIONS")

/* Apply the defaults to opts, then parse argv[1..argc-1] into it. */
int cli_parse(const cli_command *cmd, int argc, char **argv, void *opts, cli_parsed *parsed);

/* The generated help: usage, about, one line per option with its range and
 * default. */
void cli_help(const cli_command *cmd, FILE *out);

/* "an integer in [0, 1000000]", "one of torch-mkl, torch-cpu", ... */
void cli_describe(const cli_option *o, char *buf, size_t cap);

/* Print "attn CMD: --name must be <describe>, not 'value'" to stderr; returns
 * CLI_USAGE. For checks a command makes after parsing (e.g. against a model). */
int cli_bad_value(const cli_command *cmd, const cli_option *o, const char *value);

/* Check a table's rows (names set, unique, sane ranges and defaults that parse,
 * help that fits 80 columns); 0 when fine, else prints what is wrong. Run by
 * `attn --check-options`. */
int cli_check_table(const cli_command *cmd);

/* "Did you mean": the known name nearest to a misspelt word (commands,
 * options, choices, modules, presets). Near means equal but for case, at
 * most 1-3 edits away (insert, delete, replace, swap two neighbours; more
 * for longer words), or (3+ characters) a prefix or part of the name.
 *
 *     cli_near n;
 *     cli_near_init(&n, word, strlen(word));
 *     for (...) cli_near_add(&n, name);
 *     fprintf(stderr, "unknown '%s'%s\n", word, cli_near_hint(&n, "", hint, sizeof hint));
 */
typedef struct cli_near {
    const char *word;
    size_t len;
    const char *best; /* NULL: nothing near */
    int score;        /* lower is nearer */
} cli_near;
void cli_near_init(cli_near *n, const char *word, size_t len);
void cli_near_add(cli_near *n, const char *name);
void cli_near_add_list(cli_near *n, const char *const *names); /* NULL-terminated */
/* " (did you mean 'PREFIXbest'?)" in buf, or "" when nothing is near; returns buf. */
const char *cli_near_hint(const cli_near *n, const char *prefix, char *buf, size_t cap);

/* hi of a row with no upper bound: "an integer >= 0", "a number >= 0" (a
 * CLI_FLOAT row still refuses inf). */
#define CLI_NO_MAX DBL_MAX

/* Choices several tables share, as attn/engine.h and attn/dropout.h name them
 * (NULL-terminated): "cpu", "cuda"; "fp32", "bf16"; "torch-mkl", "torch-cpu". */
extern const char *const cli_device_choices[];
extern const char *const cli_precision_choices[];
extern const char *const cli_stream_choices[];

/* The `--threads N` row of every command that computes: a long long field at
 * offset, 0 when not given (the default; see cli_use_threads, threads.h). */
#define CLI_THREADS_MAX 4096
#define CLI_THREADS_HELP                                                                           \
    "OpenMP threads (default: OMP_NUM_THREADS, else the\nCPUs this process may use)"
#define CLI_THREADS_OPTION(offset)                                                                 \
    { "threads", CLI_INT, "N", (offset), 1, CLI_THREADS_MAX, .help = CLI_THREADS_HELP }

/* --n-heads N: the heads of GPT-2 weights that do not say (a book .pth,
 * an HF file without config.json); default GPT-2's by emb_dim. */
#define CLI_N_HEADS_OPTION(offset)                                                                 \
    {                                                                                              \
        "n-heads", CLI_INT, "N", (offset), 1, 4096,                                                \
            .help = "heads of GPT-2 weights that do not say (a book\n"                             \
                    ".pth; default: GPT-2's by emb_dim)"                                           \
    }

/* As cli_bad_value, for an integer whose range is known only after parsing
 * (it depends on the model): "attn CMD: --name must be an integer in
 * [lo, hi] (why), not 'value'"; returns CLI_USAGE. */
int cli_bad_range(const cli_command *cmd, const cli_option *o, long long lo, long long hi,
                  const char *why, long long value);

/* The `--max-memory SIZE` row of every command that builds a model or a
 * module: a double field at offset (bytes; 0 when not given: the memory
 * available now is the budget, attn/membudget.h). */
#define CLI_MAX_MEMORY_HELP                                                                        \
    "refuse sizes needing more memory (e.g. 2G;\ndefault: what is available now)"
#define CLI_MAX_MEMORY_OPTION(offset)                                                              \
    { "max-memory", CLI_SIZE, "SIZE", (offset), .help = CLI_MAX_MEMORY_HELP }

#endif
