/* The CLI's option-table parser (cli/options.c, issue 9) on its own: a test
 * table with every type, parsed from argv arrays. Compiled in here (the CLI
 * is not part of libattn). The commands' real tables are checked end to end
 * by tests/cli_options.sh. Parse errors print to stderr; these tests check
 * return codes and stored values. */
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
