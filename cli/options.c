/* The option-table parser (see options.h). */
#include "options.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

const char *const cli_device_choices[] = {"cpu", "cuda", NULL};
const char *const cli_precision_choices[] = {"fp32", "bf16", NULL};
const char *const cli_stream_choices[] = {"torch-mkl", "torch-cpu", NULL};

#define FIELD(opts, o, T) ((T *)(void *)((char *)(opts) + (o)->offset))

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
    case CLI_STRING:
        snprintf(buf, cap, "a non-empty %s", o->metavar ? o->metavar : "value");
        return;
    case CLI_CHOICE: {
        size_t used = (size_t)snprintf(buf, cap, "one of ");
        for (int i = 0; o->choices && o->choices[i] && used < cap; i++)
            used += (size_t)snprintf(buf + used, cap - used, "%s%s", i ? ", " : "", o->choices[i]);
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

/* Store text as o's value; 0 on success, -1 when it is not a valid value. */
static int set_value(const cli_option *o, const char *v, void *opts) {
    char *end = NULL;
    errno = 0;
    switch (o->type) {
    case CLI_FLAG: return -1;
    case CLI_STRING:
        if (!v[0]) return -1;
        *FIELD(opts, o, const char *) = v;
        return 0;
    case CLI_CHOICE:
        for (int i = 0; o->choices && o->choices[i]; i++)
            if (strcmp(v, o->choices[i]) == 0) {
                *FIELD(opts, o, const char *) = o->choices[i];
                return 0;
            }
        return -1;
    case CLI_U64: {
        if (v[0] < '0' || v[0] > '9') return -1; /* strtoull would wrap "-1" */
        unsigned long long x = strtoull(v, &end, 10);
        if (errno || *end) return -1;
        *FIELD(opts, o, unsigned long long) = x;
        return 0;
    }
    case CLI_INT: {
        long long x = strtoll(v, &end, 10);
        if (errno || end == v || *end || (double)x < o->lo || (double)x > o->hi) return -1;
        *FIELD(opts, o, long long) = x;
        return 0;
    }
    case CLI_FLOAT: {
        double x = strtod(v, &end);
        if (errno || end == v || *end || isnan(x) || x < o->lo || x > o->hi ||
            (o->hi_open && x >= o->hi) || (o->lo_open && x <= o->lo))
            return -1;
        *FIELD(opts, o, double) = x;
        return 0;
    }
    }
    return -1;
}

int cli_bad_value(const cli_command *cmd, const cli_option *o, const char *value) {
    char what[256];
    cli_describe(o, what, sizeof what);
    fprintf(stderr, "attn %s: --%s must be %s, not '%s'\n", cmd->name, o->name, what, value);
    return CLI_USAGE;
}

static const cli_option *find(const cli_command *cmd, const char *name, size_t len) {
    for (int i = 0; i < cmd->n_opts; i++)
        if (strlen(cmd->opts[i].name) == len && strncmp(cmd->opts[i].name, name, len) == 0)
            return &cmd->opts[i];
    return NULL;
}

int cli_parse(const cli_command *cmd, int argc, char **argv, void *opts, cli_parsed *parsed) {
    memset(parsed, 0, sizeof *parsed);
    for (int i = 0; i < cmd->n_opts; i++) {
        const cli_option *o = &cmd->opts[i];
        switch (o->type) { /* zero first; given[] tells "not set" apart */
        case CLI_FLAG: *FIELD(opts, o, int) = 0; break;
        case CLI_INT: *FIELD(opts, o, long long) = 0; break;
        case CLI_U64: *FIELD(opts, o, unsigned long long) = 0; break;
        case CLI_FLOAT: *FIELD(opts, o, double) = 0.0; break;
        case CLI_STRING:
        case CLI_CHOICE: *FIELD(opts, o, const char *) = NULL; break;
        }
        if (o->def && o->type != CLI_FLAG && set_value(o, o->def, opts) != 0) {
            fprintf(stderr, "attn %s: internal error: bad default '%s' for --%s\n", cmd->name,
                    o->def, o->name);
            return CLI_USAGE;
        }
    }
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
        if (!o) {
            fprintf(stderr, "attn %s: unknown option '%.*s' (see 'attn %s --help')\n", cmd->name,
                    (int)(name - a + (ptrdiff_t)len), a, cmd->name);
            return CLI_USAGE;
        }
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
        if (o->required && !parsed->given[i]) {
            fprintf(stderr, "attn %s: --%s %s is required (see 'attn %s --help')\n", cmd->name,
                    o->name, o->metavar ? o->metavar : "", cmd->name);
            return CLI_USAGE;
        }
    }
    return CLI_OK;
}

void cli_help(const cli_command *cmd, FILE *out) {
    fprintf(out, "usage: %s\n", cmd->synopsis);
    if (cmd->about) fprintf(out, "%s", cmd->about);
    fprintf(out, "\noptions:\n");
    for (int i = 0; i < cmd->n_opts; i++) {
        const cli_option *o = &cmd->opts[i];
        char head[64], what[256];
        if (o->type == CLI_FLAG)
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
        cli_describe(o, what, sizeof what);
        fprintf(out, "  %-22s (%s; %s%s)\n", "", what,
                o->required ? "required"
                : o->def    ? "default "
                            : "optional",
                !o->required && o->def ? o->def : "");
    }
    fprintf(out, "  %-22s %s\n", "-h, --help", "this text");
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
             o->type == CLI_STRING) &&
            !o->metavar) {
            fprintf(stderr, "attn %s: --%s has no metavar\n", cmd->name, o->name);
            bad = 1;
        }
        if (o->type == CLI_CHOICE && (!o->choices || !o->choices[0])) {
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
    }
    return bad;
}

int cli_bad_range(const cli_command *cmd, const cli_option *o, long long lo, long long hi,
                  const char *why, long long value) {
    fprintf(stderr, "attn %s: --%s must be an integer in [%lld, %lld] (%s), not '%lld'\n",
            cmd->name, o->name, lo, hi, why, value);
    return CLI_USAGE;
}
