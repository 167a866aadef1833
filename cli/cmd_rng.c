/* attn rng — show what PyTorch's CPU generator yields for a seed, so a
 * reader can hold torch.rand / dropout draws beside attn's. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

#include "attn/dropout.h"
#include "attn/rng.h"
#include "commands.h"
#include "options.h"

typedef struct rng_opts {
    unsigned long long seed;
    long long count;
    double dropout;
    const char *rng;
} rng_opts;

enum { RNG_SEED, RNG_COUNT, RNG_DROPOUT, RNG_STREAM, RNG_OPT_COUNT };

static const char *const streams[] = {"torch-mkl", "torch-cpu", NULL};

#define OFF(f) offsetof(rng_opts, f)
static const cli_option rng_opts_table[] = {
    [RNG_SEED] = {"seed", CLI_U64, "N", OFF(seed), .def = "123",
                  .help = "torch.manual_seed(N) before drawing"},
    [RNG_COUNT] = {"count", CLI_INT, "N", OFF(count), 1, 1000000, .def = "6",
                   .help = "how many values to draw"},
    [RNG_DROPOUT] = {"dropout", CLI_FLOAT, "P", OFF(dropout), 0, 1, .hi_open = 1,
                     .help = "print nn.Dropout(P)'s keep-mask (1/0) instead of\n"
                             "torch.rand"},
    [RNG_STREAM] = {"rng", CLI_CHOICE, NULL, OFF(rng), .choices = streams, .def = "torch-mkl",
                    .help = "dropout stream: torch-mkl (MKL builds: the book's\n"
                            "tables; the default, as in `attn chapter3`) or\n"
                            "torch-cpu (Debian's non-MKL PyTorch: the default of\n"
                            "`attn forward`)"},
};
CLI_TABLE_CHECK(rng_opts_table, RNG_OPT_COUNT);

const cli_command rng_cli = {
    "rng",
    "attn rng [--seed N] [--count N] [--dropout P [--rng torch-mkl|torch-cpu]]",
    "  Prints torch.rand(count) after torch.manual_seed(seed); with --dropout, the\n"
    "  keep-mask (1/0) nn.Dropout(P) would draw for count elements instead.\n",
    rng_opts_table,
    RNG_OPT_COUNT,
    0};

int cmd_rng(int argc, char **argv) {
    rng_opts o;
    cli_parsed parsed;
    int rc = cli_parse(&rng_cli, argc, argv, &o, &parsed);
    if (rc) return rc == CLI_HELP ? 0 : rc;
    attn_dropout_stream stream;
    attn_dropout_stream_parse(o.rng, &stream); /* the table allows only valid names */
    attn_rng rng;
    attn_rng_seed(&rng, o.seed);
    if (!parsed.given[RNG_DROPOUT]) {
        for (long long i = 0; i < o.count; i++) {
            float x;
            attn_rng_rand(&rng, &x, 1);
            printf("%.8f\n", (double)x);
        }
        return 0;
    }
    unsigned char *keep = malloc((size_t)o.count);
    if (!keep) {
        fprintf(stderr, "attn rng: out of memory\n");
        return 1;
    }
    attn_dropout_mask(&rng, stream, o.dropout, keep, (size_t)o.count);
    for (long long i = 0; i < o.count; i++)
        printf("%d\n", keep[i]);
    free(keep);
    return 0;
}
