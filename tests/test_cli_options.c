/* The CLI's option-table parser (cli/options.c, issue 9) on its own: a test
 * table with every type, parsed from argv arrays. Compiled in here (the CLI
 * is not part of libattn). The commands' real tables are checked end to end
 * by tests/cli_options.sh. Parse errors print to stderr; these tests check
 * return codes and stored values. */
#define _POSIX_C_SOURCE 200809L /* open_memstream */
#include <criterion/criterion.h>
#include <math.h>
#include <stddef.h>
#include <string.h>

#include "../cli/options.c"

typedef struct t_opts {
    long long n, big;
    unsigned long long seed;
    double p, t;
    const char *name, *mode;
    int flag;
} t_opts;

enum { T_N, T_BIG, T_SEED, T_P, T_T, T_NAME, T_MODE, T_FLAG, T_COUNT };
static const char *const modes[] = {"fast", "exact", NULL};
static const cli_option t_table[] = {
    [T_N] = {"n", CLI_INT, "N", offsetof(t_opts, n), 1, 10, .def = "3", .help = "n"},
    [T_BIG] = {"big", CLI_INT, "N", offsetof(t_opts, big), -5, 1e19, .help = "unbounded"},
    [T_SEED] = {"seed", CLI_U64, "N", offsetof(t_opts, seed), .def = "1337", .help = "seed"},
    [T_P] = {"p", CLI_FLOAT, "P", offsetof(t_opts, p), 0, 1, .hi_open = 1, .help = "rate"},
    [T_T] = {"t", CLI_FLOAT, "T", offsetof(t_opts, t), 0, HUGE_VAL, .def = "0.8", .help = "temp"},
    [T_NAME] = {"name", CLI_STRING, "NAME", offsetof(t_opts, name), .required = 1, .help = "s"},
    [T_MODE] = {"mode", CLI_CHOICE, NULL, offsetof(t_opts, mode), .choices = modes, .def = "fast",
                .help = "choice"},
    [T_FLAG] = {"flag", CLI_FLAG, .offset = offsetof(t_opts, flag), .help = "flag"},
};
CLI_TABLE_CHECK(t_table, T_COUNT);
static const cli_command t_cmd = {"t", "attn t", NULL, t_table, T_COUNT, 1};

static int parse(t_opts *o, cli_parsed *p, int argc, const char **argv) {
    memset(o, 0x5a, sizeof *o); /* garbage: the parser must set every field */
    return cli_parse(&t_cmd, argc, (char **)argv, o, p);
}
#define PARSE(o, p, ...)                                                                           \
    parse((o), (p), (int)(sizeof((const char *[]){"t", __VA_ARGS__}) / sizeof(char *)),            \
          (const char *[]){"t", __VA_ARGS__})

Test(cli_options, defaults_then_values_both_forms) {
    t_opts o;
    cli_parsed p;
    cr_assert_eq(PARSE(&o, &p, "--name", "x"), CLI_OK);
    cr_assert(o.n == 3 && o.seed == 1337 && o.t == 0.8 && !strcmp(o.mode, "fast"));
    cr_assert(o.big == 0 && o.p == 0.0 && o.flag == 0, "fields without a default are zeroed");
    cr_assert(!p.given[T_N] && p.given[T_NAME] && p.n_positional == 0);
    cr_assert_eq(PARSE(&o, &p, "--n=10", "--big", "99999999999", "--seed=18446744073709551615",
                       "--p", "0.999", "--t=1e3", "--name=a=b", "--mode", "exact", "--flag", "pos"),
                 CLI_OK);
    cr_assert(o.n == 10 && o.big == 99999999999LL && o.seed == 18446744073709551615ULL);
    cr_assert(o.p == 0.999 && o.t == 1000.0 && !strcmp(o.name, "a=b") && !strcmp(o.mode, "exact"));
    cr_assert(o.flag == 1 && p.given[T_FLAG] && p.n_positional == 1);
    cr_assert_str_eq(p.positional[0], "pos");
    /* "--" ends the options: what follows is positional even if it looks like one. */
    cr_assert_eq(PARSE(&o, &p, "--name", "-x", "--", "--n"), CLI_OK);
    cr_assert_str_eq(o.name, "-x");
    cr_assert_str_eq(p.positional[0], "--n");
}

Test(cli_options, bad_values_are_usage_errors) {
    t_opts o;
    cli_parsed p;
    const char *bad[][2] = {
        {"--n", "0"},       {"--n", "11"},     {"--n", "2.5"},
        {"--n", ""},        {"--big", "-6"},   {"--seed", "-1"},
        {"--seed", "+1"},   {"--seed", "1e3"}, {"--p", "1"},
        {"--p", "-0.1"},    {"--p", "nan"},    {"--t", "-1"},
        {"--mode", "Fast"}, {"--name", ""},    {"--seed", "18446744073709551616"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        cr_assert_eq(PARSE(&o, &p, "--name", "x", bad[i][0], bad[i][1]), CLI_USAGE, "%s %s",
                     bad[i][0], bad[i][1]);
    cr_assert_eq(PARSE(&o, &p, "--name", "x", "--n"), CLI_USAGE, "missing value");
    cr_assert_eq(PARSE(&o, &p, "--name", "x", "--flag=1"), CLI_USAGE, "flag with a value");
    cr_assert_eq(PARSE(&o, &p, "--name", "x", "--nn", "1"), CLI_USAGE, "unknown option");
    cr_assert_eq(PARSE(&o, &p, "--name", "x", "-n", "1"), CLI_USAGE, "single dash");
    cr_assert_eq(PARSE(&o, &p, "--n", "2"), CLI_USAGE, "--name is required");
    cr_assert_eq(PARSE(&o, &p, "--name", "x", "a", "b"), CLI_USAGE, "one positional at most");
}

Test(cli_options, describe_states_the_range) {
    char buf[256];
    cli_describe(&t_table[T_N], buf, sizeof buf);
    cr_assert_str_eq(buf, "an integer in [1, 10]");
    cli_describe(&t_table[T_BIG], buf, sizeof buf);
    cr_assert_str_eq(buf, "an integer >= -5");
    cli_describe(&t_table[T_P], buf, sizeof buf);
    cr_assert_str_eq(buf, "a number in [0, 1)");
    cli_describe(&t_table[T_T], buf, sizeof buf);
    cr_assert_str_eq(buf, "a number >= 0");
    cli_describe(&t_table[T_MODE], buf, sizeof buf);
    cr_assert_str_eq(buf, "one of fast, exact");
}

Test(cli_options, check_table_finds_broken_rows) {
    cr_assert_eq(cli_check_table(&t_cmd), 0);
    cli_option rows[2] = {t_table[T_N], t_table[T_N]};
    cli_command c = {"t", "attn t", NULL, rows, 2, 0};
    cr_assert_neq(cli_check_table(&c), 0, "duplicate name");
    rows[1] = t_table[T_P];
    cr_assert_eq(cli_check_table(&c), 0);
    rows[1].def = "1"; /* outside [0, 1) */
    cr_assert_neq(cli_check_table(&c), 0, "default outside the range");
    rows[1] = t_table[T_MODE];
    rows[1].def = "slow";
    cr_assert_neq(cli_check_table(&c), 0, "default not a choice");
    rows[1] = t_table[T_NAME];
    rows[1].def = "x";
    cr_assert_neq(cli_check_table(&c), 0, "required with a default");
    rows[1] = t_table[T_N];
    rows[1].name = "help";
    cr_assert_neq(cli_check_table(&c), 0, "reserved name");
    rows[1] = t_table[T_N];
    rows[1].name = "m";
    rows[1].lo = 5;
    rows[1].hi = 4;
    rows[1].def = NULL;
    cr_assert_neq(cli_check_table(&c), 0, "empty range");
}

/* Did you mean (issue 17): the nearest name, or none. */
static const char *nearest(const char *word, const char *const *names) {
    cli_near n;
    cli_near_init(&n, word, strlen(word));
    cli_near_add_list(&n, names);
    return n.best;
}

Test(cli_options, near_names_typos_case_prefixes) {
    static const char *const cmds[] = {"bench",    "chapter3", "rng",  "forward", "train",
                                       "generate", "viz",      "info", NULL};
    static const char *const presets[] = {"seed004", "shakespeare-char", "nanogpt-cpu", "tiny",
                                          NULL};
    static const char *const streams[] = {"torch-mkl", "torch-cpu", NULL};
    static const char *const opts[] = {"temperature", "top-k", "top-p", "seed", NULL};
    cr_assert_str_eq(nearest("generat", cmds), "generate");  /* a letter short */
    cr_assert_str_eq(nearest("gneerate", cmds), "generate"); /* two swapped */
    cr_assert_str_eq(nearest("GENERATE", cmds), "generate"); /* case */
    cr_assert_str_eq(nearest("trian", cmds), "train");
    cr_assert_str_eq(nearest("temprature", opts), "temperature");
    cr_assert_str_eq(nearest("top_k", opts), "top-k");
    cr_assert_str_eq(nearest("nanogpt", presets), "nanogpt-cpu"); /* a prefix */
    cr_assert_str_eq(nearest("shakespeare", presets), "shakespeare-char");
    cr_assert_str_eq(nearest("mkl", streams), "torch-mkl"); /* a part */
    static const char *const devices[] = {"cpu", "cuda", NULL};
    static const char *const mods[] = {"mha", "mha-wrapper", "causal-attention", NULL};
    cr_assert_null(nearest("gpu", devices), "three letters, one replaced: another word");
    cr_assert_str_eq(nearest("cdua", devices), "cuda");
    cr_assert_str_eq(nearest("mah", mods), "mha"); /* three letters, two swapped */
    cr_assert_str_eq(nearest("rgn", cmds), "rng");
    cr_assert_null(nearest("nope", cmds));
    cr_assert_null(nearest("x", streams));
    cr_assert_null(nearest("", cmds));
    cr_assert_null(nearest("zz", cmds), "two letters: nothing but case");
    char hint[64];
    cli_near n;
    cli_near_init(&n, "temprature", 10);
    cli_near_add_list(&n, opts);
    cr_assert_str_eq(cli_near_hint(&n, "--", hint, sizeof hint),
                     " (did you mean '--temperature'?)");
    cli_near_init(&n, "qqqq", 4);
    cli_near_add_list(&n, opts);
    cr_assert_str_eq(cli_near_hint(&n, "--", hint, sizeof hint), "");
    /* A word longer than the edit table still matches by prefix. */
    char longw[200];
    memset(longw, 'a', sizeof longw - 1);
    longw[sizeof longw - 1] = '\0';
    const char *const longs[] = {longw + 100, NULL};
    cr_assert_eq(nearest(longw, longs), longs[0]);
}

/* A hidden row is parsed but not shown; the positional row takes a lone
 * first argument; both forms at once is a usage error. */
typedef struct h_opts {
    const char *ckpt;
    long long hook;
} h_opts;
enum { H_CKPT, H_HOOK, H_COUNT };
static const cli_option h_table[] = {
    [H_CKPT] = {"checkpoint", CLI_STRING, "DIR", offsetof(h_opts, ckpt), .required = 1,
                .positional = 1, .help = "the run"},
    [H_HOOK] = {"hook", CLI_INT, "N", offsetof(h_opts, hook), 1, 9, .hidden = 1, .help = "test"},
};
CLI_TABLE_CHECK(h_table, H_COUNT);
static const cli_command h_cmd = {"h", "attn h [--checkpoint] DIR", NULL, h_table, H_COUNT, 0};

static int hparse(h_opts *o, cli_parsed *p, int argc, const char **argv) {
    return cli_parse(&h_cmd, argc, (char **)argv, o, p);
}
#define HPARSE(o, p, ...)                                                                          \
    hparse((o), (p), (int)(sizeof((const char *[]){"h", __VA_ARGS__}) / sizeof(char *)),           \
           (const char *[]){"h", __VA_ARGS__})

Test(cli_options, hidden_and_positional_rows) {
    h_opts o;
    cli_parsed p;
    cr_assert_eq(cli_check_table(&h_cmd), 0);
    cr_assert_eq(HPARSE(&o, &p, "runs/a", "--hook", "3"), CLI_OK);
    cr_assert_str_eq(o.ckpt, "runs/a");
    cr_assert(p.given[H_CKPT] && o.hook == 3 && p.n_positional == 0);
    cr_assert_eq(HPARSE(&o, &p, "--checkpoint=runs/b"), CLI_OK);
    cr_assert_str_eq(o.ckpt, "runs/b");
    cr_assert_eq(HPARSE(&o, &p, "runs/a", "--checkpoint", "runs/b"), CLI_USAGE, "given twice");
    cr_assert_eq(HPARSE(&o, &p, "--checkpoint", "runs/b", "runs/a"), CLI_USAGE, "given twice");
    cr_assert_eq(HPARSE(&o, &p, "--hook", "1"), CLI_USAGE, "still required");
    cr_assert_eq(HPARSE(&o, &p, "a", "--hook", "10"), CLI_USAGE, "a hidden row keeps its range");
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    cli_help(&h_cmd, f);
    fclose(f);
    cr_assert(strstr(text, "  [--checkpoint] DIR     the run\n"), "%s", text);
    cr_assert_null(strstr(text, "hook"), "a hidden row is in --help:\n%s", text);
    free(text);
    /* Two positional rows, or a hidden one, fail the table check. */
    cli_option rows[2] = {h_table[H_CKPT], h_table[H_CKPT]};
    rows[1].name = "other";
    cli_command c = {"h", "attn h", NULL, rows, 2, 0};
    cr_assert_neq(cli_check_table(&c), 0, "two positional rows");
    rows[1].positional = 0;
    cr_assert_eq(cli_check_table(&c), 0);
    rows[1].help = "a help line far too long for the eighty columns of a terminal window";
    cr_assert_neq(cli_check_table(&c), 0, "a help line over 80 columns");
}
