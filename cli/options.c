/* The option-table parser (see options.h). */
#include "options.h"

#include <ctype.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "attn/membudget.h"
#include "attn/parse.h"

const char *const cli_device_choices[] = {"cpu", "cuda", NULL};
const char *const cli_precision_choices[] = {"fp32", "bf16", NULL};
const char *const cli_stream_choices[] = {"torch-mkl", "torch-cpu", NULL};

#define FIELD(opts, o, T) ((T *)(void *)((char *)(opts) + (o)->offset))

/* ------------------------------------------------------------ did you mean */

enum { NEAR_MAX = 64 }; /* longer words are only matched by case, prefix or part */

static int lower(char c) {
    return tolower((unsigned char)c);
}

/* Optimal string alignment distance (insert, delete, replace, swap two
 * neighbours), ignoring case. */
static int edits(const char *a, size_t na, const char *b, size_t nb) {
    int rows[3][NEAR_MAX + 1];
    int *pp = rows[0], *prev = rows[1], *cur = rows[2];
    for (size_t j = 0; j <= nb; j++)
        prev[j] = (int)j;
    for (size_t i = 1; i <= na; i++) {
        cur[0] = (int)i;
        for (size_t j = 1; j <= nb; j++) {
            const int same = lower(a[i - 1]) == lower(b[j - 1]);
            int d = prev[j - 1] + !same;
            if (prev[j] + 1 < d) d = prev[j] + 1;
            if (cur[j - 1] + 1 < d) d = cur[j - 1] + 1;
            if (i > 1 && j > 1 && lower(a[i - 1]) == lower(b[j - 2]) &&
                lower(a[i - 2]) == lower(b[j - 1]) && pp[j - 2] + 1 < d)
                d = pp[j - 2] + 1;
            cur[j] = d;
        }
        int *t = pp;
        pp = prev;
        prev = cur;
        cur = t;
    }
    return prev[nb];
}

static int starts_with(const char *s, size_t ns, const char *p, size_t np) {
    if (np > ns) return 0;
    for (size_t i = 0; i < np; i++)
        if (lower(s[i]) != lower(p[i])) return 0;
    return 1;
}

static int contains(const char *s, size_t ns, const char *p, size_t np) {
    for (size_t i = 0; i + np <= ns; i++)
        if (starts_with(s + i, ns - i, p, np)) return 1;
    return 0;
}

/* a and b (n characters each) differ by two neighbours swapped. */
static int is_swap(const char *a, const char *b, size_t n) {
    for (size_t i = 0; i + 1 < n; i++)
        if (lower(a[i]) != lower(b[i]))
            return lower(a[i]) == lower(b[i + 1]) && lower(a[i + 1]) == lower(b[i]) &&
                   starts_with(a + i + 2, n - i - 2, b + i + 2, n - i - 2);
    return 0;
}

void cli_near_init(cli_near *n, const char *word, size_t len) {
    n->word = word;
    n->len = len;
    n->best = NULL;
    n->score = 1 << 30;
}

/* How near name is to the word: 0 (case only) .. 5, or -1 (not near). */
static int nearness(const char *w, size_t nw, const char *name) {
    const size_t nn = strlen(name);
    if (nw == 0 || nn == 0) return -1;
    if (nw == nn && starts_with(name, nn, w, nw)) return 0;
    const int allowed = nw <= 2 ? 0 : nw <= 4 ? 1 : nw <= 8 ? 2 : 3;
    if (nw <= NEAR_MAX && nn <= NEAR_MAX) {
        const int d = edits(w, nw, name, nn);
        /* Three letters with one replaced are another word ("gpu" is not "cpu"). */
        const int replaced = nw <= 3 && nn == nw && d == 1 && !is_swap(w, name, nw);
        if (d <= allowed && !replaced) return d;
    }
    if (nw >= 3 && (starts_with(name, nn, w, nw) || (nn >= 3 && starts_with(w, nw, name, nn))))
        return 4;
    if (nw >= 3 && contains(name, nn, w, nw)) return 5;
    return -1;
}

void cli_near_add(cli_near *n, const char *name) {
    if (!name) return;
    const int s = nearness(n->word, n->len, name);
    if (s >= 0 && s < n->score) {
        n->score = s;
        n->best = name;
    }
}

void cli_near_add_list(cli_near *n, const char *const *names) {
    for (; names && *names; names++)
        cli_near_add(n, *names);
}

const char *cli_near_hint(const cli_near *n, const char *prefix, char *buf, size_t cap) {
    if (n->best)
        snprintf(buf, cap, " (did you mean '%s%s'?)", prefix, n->best);
    else if (cap)
        buf[0] = '\0';
    return buf;
}

/* ------------------------------------------------------------ the parser */

static const char *const *choices(const cli_option *o) {
    return o->choices_of ? o->choices_of() : o->choices;
}

static int is_huge(double hi) {
    return hi >= 9.0e18; /* "no upper bound" for an integer or a number */
}

static void num(char *buf, size_t cap, double v, int integer) {
    if (integer)
        snprintf(buf, cap, "%lld", (long long)v);
    else
        snprintf(buf, cap, "%g", v);
}

void cli_describe(const cli_option *o, char *buf, size_t cap) {
    char lo[32], hi[32];
    switch (o->type) {
    case CLI_FLAG: snprintf(buf, cap, "a flag without a value"); return;
    case CLI_U64: snprintf(buf, cap, "an integer in [0, 18446744073709551615]"); return;
    case CLI_STRING: snprintf(buf, cap, "%s", o->metavar ? o->metavar : "a value"); return;
    case CLI_SIZE:
        snprintf(buf, cap, "a size > 0 in bytes, with K, M, G or T (1024-based)");
        return;
    case CLI_CHOICE: {
        const char *const *c = choices(o);
        size_t used = (size_t)snprintf(buf, cap, "one of ");
        for (int i = 0; c && c[i] && used < cap; i++)
            used += (size_t)snprintf(buf + used, cap - used, "%s%s", i ? ", " : "", c[i]);
        return;
    }
    case CLI_INT:
    case CLI_FLOAT: {
        const int integer = o->type == CLI_INT;
        num(lo, sizeof lo, o->lo, integer);
        num(hi, sizeof hi, o->hi, integer);
        const char *what = integer ? "an integer" : "a number";
        const int lo_open = !integer && o->lo_open;
        if (is_huge(o->hi))
            snprintf(buf, cap, "%s %s %s", what, lo_open ? ">" : ">=", lo);
        else
            snprintf(buf, cap, "%s in %s%s, %s%s", what, lo_open ? "(" : "[", lo, hi,
                     o->hi_open ? ")" : "]");
        return;
    }
    }
    snprintf(buf, cap, "?");
}

/* A CLI_INT row's bound as an integer: hi of CLI_NO_MAX (or any huge bound)
 * is LLONG_MAX; the bounds are whole numbers, so the conversion is exact. */
static long long int_bound(double b) {
    return b >= 9223372036854775808.0    ? LLONG_MAX
           : b <= -9223372036854775808.0 ? LLONG_MIN
                                         : (long long)b;
}

/* Store text as o's value; 0 on success, -1 when it is not a valid value.
 * Numbers go through attn/parse.h: exact integers, decimal floats. */
static int set_value(const cli_option *o, const char *v, void *opts) {
    switch (o->type) {
    case CLI_FLAG: return -1;
    case CLI_STRING:
        if (!v[0]) return -1;
        if (o->metavar && strcmp(o->metavar, "TEXT") == 0 && !attn_utf8_valid(v, strlen(v)))
            return -1;
        *FIELD(opts, o, const char *) = v;
        return 0;
    case CLI_CHOICE: {
        const char *const *c = choices(o);
        for (int i = 0; c && c[i]; i++)
            if (strcmp(v, c[i]) == 0) {
                *FIELD(opts, o, const char *) = c[i];
                return 0;
            }
        return -1;
    }
    case CLI_U64: {
        unsigned long long x;
        if (attn_parse_uint(v, ULLONG_MAX, &x)) return -1;
        *FIELD(opts, o, unsigned long long) = x;
        return 0;
    }
    case CLI_INT: {
        long long x;
        if (attn_parse_int(v, int_bound(o->lo), int_bound(o->hi), &x)) return -1;
        *FIELD(opts, o, long long) = x;
        return 0;
    }
    case CLI_SIZE: {
        double x;
        if (attn_parse_size(v, &x)) return -1;
        *FIELD(opts, o, double) = x;
        return 0;
    }
    case CLI_FLOAT: {
        double x;
        if (attn_parse_float(v, &x) || x < o->lo || x > o->hi || (o->hi_open && x >= o->hi) ||
            (o->lo_open && x <= o->lo))
            return -1;
        *FIELD(opts, o, double) = x;
        return 0;
    }
    }
    return -1;
}

int cli_bad_value(const cli_command *cmd, const cli_option *o, const char *value) {
    char what[256], hint[128] = "";
    cli_describe(o, what, sizeof what);
    if (o->type == CLI_STRING && value[0] && !attn_utf8_valid(value, strlen(value))) {
        fprintf(stderr, "attn %s: --%s must be valid UTF-8 text\n", cmd->name, o->name);
        return CLI_USAGE;
    }
    if (o->type == CLI_STRING && !value[0]) {
        fprintf(stderr, "attn %s: --%s %s must not be an empty string\n", cmd->name, o->name, what);
        return CLI_USAGE;
    }
    if (o->type == CLI_CHOICE) {
        cli_near n;
        cli_near_init(&n, value, strlen(value));
        cli_near_add_list(&n, choices(o));
        cli_near_hint(&n, "", hint, sizeof hint);
    }
    fprintf(stderr, "attn %s: --%s must be %s, not '%s'%s\n", cmd->name, o->name, what, value,
            hint);
    return CLI_USAGE;
}

static const cli_option *find(const cli_command *cmd, const char *name, size_t len) {
    for (int i = 0; name && i < cmd->n_opts; i++)
        if (strlen(cmd->opts[i].name) == len && strncmp(cmd->opts[i].name, name, len) == 0)
            return &cmd->opts[i];
    return NULL;
}

/* "unknown option '--x' (did you mean '--y'?)", else "(see 'attn CMD --help')". */
static int unknown_option(const cli_command *cmd, const char *arg, const char *name, size_t len) {
    cli_near n;
    char hint[128];
    cli_near_init(&n, name, len);
    for (int i = 0; i < cmd->n_opts; i++)
        if (!cmd->opts[i].hidden) cli_near_add(&n, cmd->opts[i].name);
    cli_near_add(&n, "help");
    cli_near_hint(&n, "--", hint, sizeof hint);
    if (!hint[0]) snprintf(hint, sizeof hint, " (see 'attn %s --help')", cmd->name);
    fprintf(stderr, "attn %s: unknown option '%.*s'%s\n", cmd->name,
            (int)(name - arg + (ptrdiff_t)len), arg, hint);
    return CLI_USAGE;
}

/* The row given by a first positional argument as well as by its flag. */
static int given_twice(const cli_command *cmd, const cli_option *o) {
    fprintf(stderr, "attn %s: the %s is given twice: give %s or --%s %s (see 'attn %s --help')\n",
            cmd->name, o->name, o->metavar, o->name, o->metavar, cmd->name);
    return CLI_USAGE;
}

int cli_parse(const cli_command *cmd, int argc, char **argv, void *opts, cli_parsed *parsed) {
    memset(parsed, 0, sizeof *parsed);
    for (int i = 0; i < cmd->n_opts; i++) {
        const cli_option *o = &cmd->opts[i];
        switch (o->type) { /* zero first; given[] tells "not set" apart */
        case CLI_FLAG: *FIELD(opts, o, int) = 0; break;
        case CLI_INT: *FIELD(opts, o, long long) = 0; break;
        case CLI_U64: *FIELD(opts, o, unsigned long long) = 0; break;
        case CLI_FLOAT:
        case CLI_SIZE: *FIELD(opts, o, double) = 0.0; break;
        case CLI_STRING:
        case CLI_CHOICE: *FIELD(opts, o, const char *) = NULL; break;
        }
        if (o->def && o->type != CLI_FLAG && set_value(o, o->def, opts) != 0) {
            fprintf(stderr, "attn %s: internal error: bad default '%s' for --%s\n", cmd->name,
                    o->def, o->name);
            return CLI_USAGE;
        }
    }
    const cli_option *arg_row = NULL; /* the row a first positional argument gives */
    for (int i = 0; i < cmd->n_opts; i++)
        if (cmd->opts[i].positional) arg_row = &cmd->opts[i];
    int only_positional = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!only_positional && (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0)) {
            cli_help(cmd, stdout);
            return CLI_HELP;
        }
        if (!only_positional && strcmp(a, "--") == 0) {
            only_positional = 1;
            continue;
        }
        if (only_positional || a[0] != '-' || a[1] == '\0') {
            if (arg_row && (!parsed->given[arg_row - cmd->opts] || !cmd->max_positional)) {
                if (parsed->given[arg_row - cmd->opts]) return given_twice(cmd, arg_row);
                parsed->given[arg_row - cmd->opts] = 1; /* `attn generate DIR` */
                if (set_value(arg_row, a, opts) != 0) return cli_bad_value(cmd, arg_row, a);
                continue;
            }
            if (parsed->n_positional >= cmd->max_positional ||
                parsed->n_positional >= (int)(sizeof parsed->positional / sizeof(char *))) {
                fprintf(stderr, "attn %s: unexpected argument '%s' (see 'attn %s --help')\n",
                        cmd->name, a, cmd->name);
                return CLI_USAGE;
            }
            parsed->positional[parsed->n_positional++] = a;
            continue;
        }
        const char *name = a + (a[1] == '-' ? 2 : 1);
        const char *eq = strchr(name, '=');
        size_t len = eq ? (size_t)(eq - name) : strlen(name);
        const cli_option *o = a[1] == '-' ? find(cmd, name, len) : NULL;
        if (!o) return unknown_option(cmd, a, name, len);
        if (o == arg_row && parsed->given[o - cmd->opts]) return given_twice(cmd, o);
        char what[256];
        cli_describe(o, what, sizeof what);
        parsed->given[o - cmd->opts] = 1;
        if (o->type == CLI_FLAG) {
            if (eq) {
                fprintf(stderr, "attn %s: --%s takes no value\n", cmd->name, o->name);
                return CLI_USAGE;
            }
            *FIELD(opts, o, int) = 1;
            continue;
        }
        const char *v = eq ? eq + 1 : NULL;
        if (!v) {
            if (i + 1 >= argc) {
                fprintf(stderr, "attn %s: --%s needs a value (%s)\n", cmd->name, o->name, what);
                return CLI_USAGE;
            }
            v = argv[++i];
        }
        if (set_value(o, v, opts) != 0) return cli_bad_value(cmd, o, v);
    }
    for (int i = 0; i < cmd->n_opts; i++) {
        const cli_option *o = &cmd->opts[i];
        if (o->required && !parsed->given[i] && o == arg_row) {
            fprintf(stderr, "attn %s: which %s? give %s (or --%s %s; see 'attn %s --help')\n",
                    cmd->name, o->name, o->metavar, o->name, o->metavar, cmd->name);
            return CLI_USAGE;
        }
        if (o->required && !parsed->given[i]) {
            fprintf(stderr, "attn %s: --%s %s is required (see 'attn %s --help')\n", cmd->name,
                    o->name, o->metavar ? o->metavar : "", cmd->name);
            return CLI_USAGE;
        }
    }
    return CLI_OK;
}

enum { HELP_COLUMNS = 80, HELP_INDENT = 25 }; /* "  %-22s " */

/* text from column HELP_INDENT, broken at spaces before column 80. */
static void put_wrapped(FILE *out, const char *text) {
    const int room = HELP_COLUMNS - HELP_INDENT;
    while (*text) {
        int n = (int)strlen(text);
        if (n > room) {
            n = room;
            while (n > 0 && text[n] != ' ')
                n--;
            if (n == 0) n = room; /* one long word: cut */
        }
        fprintf(out, "%*s%.*s\n", HELP_INDENT, "", n, text);
        text += n;
        while (*text == ' ')
            text++;
    }
}

void cli_help(const cli_command *cmd, FILE *out) {
    fprintf(out, "usage: %s\n", cmd->synopsis);
    if (cmd->about) fprintf(out, "%s", cmd->about);
    fprintf(out, "\noptions:\n");
    for (int i = 0; i < cmd->n_opts; i++) {
        const cli_option *o = &cmd->opts[i];
        char head[64], what[256];
        if (o->hidden) continue;
        if (o->positional)
            snprintf(head, sizeof head, "[--%s] %s", o->name, o->metavar);
        else if (o->type == CLI_FLAG)
            snprintf(head, sizeof head, "--%s", o->name);
        else if (o->type == CLI_CHOICE)
            snprintf(head, sizeof head, "--%s NAME", o->name);
        else
            snprintf(head, sizeof head, "--%s %s", o->name, o->metavar ? o->metavar : "X");
        fprintf(out, "  %-22s ", head);
        for (const char *h = o->help; h && *h; h++) { /* continuation lines line up */
            if (*h == '\n')
                fprintf(out, "\n%25s", "");
            else
                fputc(*h, out);
        }
        fputc('\n', out);
        if (o->type == CLI_FLAG) continue;
        if (o->type == CLI_STRING) { /* the metavar says what it is */
            if (o->required || o->def)
                fprintf(out, "  %-22s (%s%s)\n", "", o->required ? "required" : "default ",
                        o->required ? "" : o->def);
            continue;
        }
        char line[400];
        cli_describe(o, what, sizeof what);
        snprintf(line, sizeof line, "(%s; %s%s)", what,
                 o->required ? "required"
                 : o->def    ? "default "
                             : "optional",
                 !o->required && o->def ? o->def : "");
        put_wrapped(out, line);
    }
    fprintf(out, "  %-22s %s\n", "-h, --help", "this text");
}

/* 1 (printed) when a line of text passes 80 columns: the first starts at
 * column indent, the others at column later. */
static int too_wide(const cli_command *cmd, const char *what, const char *text, int indent,
                    int later) {
    for (const char *l = text; l && *l; indent = later) {
        const char *e = strchr(l, '\n');
        const size_t n = e ? (size_t)(e - l) : strlen(l);
        if ((size_t)indent + n > HELP_COLUMNS) {
            fprintf(stderr, "attn %s: --help line of %s over %d columns: %.*s\n", cmd->name, what,
                    HELP_COLUMNS, (int)n, l);
            return 1;
        }
        l = e ? e + 1 : l + n;
    }
    return 0;
}

int cli_check_table(const cli_command *cmd) {
    int bad = 0;
    if (cmd->n_opts > CLI_MAX_OPTIONS) {
        fprintf(stderr, "attn %s: %d options, more than %d\n", cmd->name, cmd->n_opts,
                CLI_MAX_OPTIONS);
        return 1;
    }
    for (int i = 0; i < cmd->n_opts; i++) {
        const cli_option *o = &cmd->opts[i];
        if (!o->name || !o->name[0] || !o->help) {
            fprintf(stderr, "attn %s: option row %d has no name or help\n", cmd->name, i);
            bad = 1;
            continue;
        }
        if (strcmp(o->name, "help") == 0 || strchr(o->name, '=')) {
            fprintf(stderr, "attn %s: option name '%s' is reserved\n", cmd->name, o->name);
            bad = 1;
        }
        for (int j = 0; j < i; j++)
            if (cmd->opts[j].name && strcmp(cmd->opts[j].name, o->name) == 0) {
                fprintf(stderr, "attn %s: --%s appears twice\n", cmd->name, o->name);
                bad = 1;
            }
        if ((o->type == CLI_INT || o->type == CLI_FLOAT || o->type == CLI_U64 ||
             o->type == CLI_STRING || o->type == CLI_SIZE) &&
            !o->metavar) {
            fprintf(stderr, "attn %s: --%s has no metavar\n", cmd->name, o->name);
            bad = 1;
        }
        if (o->type == CLI_CHOICE && (!choices(o) || !choices(o)[0])) {
            fprintf(stderr, "attn %s: --%s has no choices\n", cmd->name, o->name);
            bad = 1;
        }
        if ((o->type == CLI_INT || o->type == CLI_FLOAT) && !(o->lo <= o->hi)) {
            fprintf(stderr, "attn %s: --%s has an empty range\n", cmd->name, o->name);
            bad = 1;
        }
        if (o->def && o->type != CLI_FLAG) {
            union {
                long long i;
                unsigned long long u;
                double d;
                const char *s;
            } scratch; /* any field type */
            cli_option copy = *o;
            copy.offset = 0;
            if (set_value(&copy, o->def, &scratch) != 0) {
                fprintf(stderr, "attn %s: --%s's default '%s' is not a valid value\n", cmd->name,
                        o->name, o->def);
                bad = 1;
            }
        }
        if (o->required && o->def) {
            fprintf(stderr, "attn %s: --%s is required and has a default\n", cmd->name, o->name);
            bad = 1;
        }
        bad |= too_wide(cmd, o->name, o->help, HELP_INDENT, HELP_INDENT);
    }
    int positional = 0;
    for (int i = 0; i < cmd->n_opts; i++) {
        const cli_option *o = &cmd->opts[i];
        if (o->positional && (o->type != CLI_STRING || o->hidden || positional++)) {
            fprintf(stderr, "attn %s: --%s: only one shown string row may be positional\n",
                    cmd->name, o->name);
            bad = 1;
        }
    }
    bad |= too_wide(cmd, "usage", cmd->synopsis, (int)strlen("usage: "), 0);
    bad |= too_wide(cmd, "about", cmd->about, 0, 0);
    return bad;
}

int cli_bad_range(const cli_command *cmd, const cli_option *o, long long lo, long long hi,
                  const char *why, long long value) {
    fprintf(stderr, "attn %s: --%s must be an integer in [%lld, %lld] (%s), not '%lld'\n",
            cmd->name, o->name, lo, hi, why, value);
    return CLI_USAGE;
}
