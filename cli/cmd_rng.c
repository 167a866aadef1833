/* attn rng — show what PyTorch's CPU generator yields for a seed, so a
 * reader can hold torch.rand / dropout draws beside attn's. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn/dropout.h"
#include "attn/rng.h"
#include "commands.h"

static void rng_usage(FILE *out) {
    fprintf(out,
            "usage: attn rng [--seed N] [--count N] [--dropout P [--rng torch-cpu|torch-mkl]]\n"
            "  Prints torch.rand(count) after torch.manual_seed(seed); with --dropout, the\n"
            "  keep-mask (1/0) nn.Dropout(P) would draw for count elements instead.\n");
}

int cmd_rng(int argc, char **argv) {
    unsigned long long seed = 123;
    long count = 6;
    double p = -1.0;
    attn_dropout_stream stream = ATTN_STREAM_TORCH_MKL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0) {
            rng_usage(stdout);
            return 0;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "attn rng: unknown or incomplete option '%s'\n", a);
            rng_usage(stderr);
            return 2;
        }
        const char *v = argv[++i];
        char *end = NULL;
        if (strcmp(a, "--seed") == 0) {
            seed = strtoull(v, &end, 10);
        } else if (strcmp(a, "--count") == 0) {
            count = strtol(v, &end, 10);
            if (count <= 0 || count > 1000000) end = NULL;
        } else if (strcmp(a, "--dropout") == 0) {
            p = strtod(v, &end);
            if (!(p >= 0.0 && p < 1.0)) end = NULL;
        } else if (strcmp(a, "--rng") == 0) {
            if (attn_dropout_stream_parse(v, &stream) != 0) {
                fprintf(stderr, "attn rng: --rng must be torch-cpu or torch-mkl, not '%s'\n", v);
                return 2;
            }
            continue;
        } else {
            fprintf(stderr, "attn rng: unknown option '%s'\n", a);
            rng_usage(stderr);
            return 2;
        }
        if (!end || *end) {
            fprintf(stderr, "attn rng: bad value '%s' for %s\n", v, a);
            return 2;
        }
    }
    attn_rng rng;
    attn_rng_seed(&rng, seed);
    if (p < 0) {
        for (long i = 0; i < count; i++) {
            float x;
            attn_rng_rand(&rng, &x, 1);
            printf("%.8f\n", (double)x);
        }
        return 0;
    }
    unsigned char *keep = malloc((size_t)count);
    if (!keep) {
        fprintf(stderr, "attn rng: out of memory\n");
        return 1;
    }
    attn_dropout_mask(&rng, stream, p, keep, (size_t)count);
    for (long i = 0; i < count; i++)
        printf("%d\n", keep[i]);
    free(keep);
    return 0;
}
