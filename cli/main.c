/* attn — command-line front end: dispatches to one subcommand per file. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn/version.h"
#include "commands.h"

typedef struct {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
} command;

static const command commands[] = {
    {"bench", cmd_bench,
     "time MultiHeadAttention (fused or reference), the attention kernel, sgemm"},
    {"chapter3", cmd_chapter3, "walk chapter 3 step by step, printing each tensor as PyTorch does"},
    {"rng", cmd_rng, "print torch.rand / dropout draws for a seed (PyTorch's generator)"},
    {"forward", cmd_forward, "run one attention module (and backward) on a .npy input"},
    {"train", cmd_train, "train the char-level GPT on a text corpus (checkpoints, resume)"},
    {"generate", cmd_generate, "sample text from a trained GPT checkpoint"},
    {"viz", cmd_viz, "a checkpoint's attention on a prompt as an HTML page or SVG heatmap"},
    {"info", cmd_info, "a checkpoint's config, step, losses, vocabulary and size"},
};

/* The commands whose options come from a table (options.h). */
static const cli_command *const tables[] = {
    &chapter3_cli, &rng_cli,         &viz_cli,   &info_cli,        &generate_cli,
    &forward_cli,  &forward_gpt_cli, &bench_cli, &bench_train_cli, &bench_generate_cli};

static void usage(FILE *out) {
    fprintf(out, "usage: attn <command> [options]\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(out, "  %-10s %s\n", commands[i].name, commands[i].summary);
    fprintf(out, "\n'attn <command> --help' describes one command; 'attn --version' prints\n"
                 "the version. Exit status: 0 done, 1 failed (a file, a write), 2 bad usage.\n");
}

/* The short OpenMP spin a busy machine needs is set before libgomp starts,
 * in this process, by libattn-ompwait.so (src/ompwait/ompwait.c). */
int main(int argc, char **argv) {
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
        strcmp(argv[1], "help") == 0) {
        usage(stdout);
        return 0;
    }
    if (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "version") == 0) {
        printf("attn %s\n", attn_version());
        return 0;
    }
    if (strcmp(argv[1], "--check-options") == 0) { /* maintainers: every table is sound */
        int bad = 0;
        for (size_t i = 0; i < sizeof tables / sizeof tables[0]; i++)
            bad |= cli_check_table(tables[i]);
        bad |= cli_check_table(train_cli_table());
        return bad;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (strcmp(argv[1], commands[i].name) == 0) return commands[i].run(argc - 1, argv + 1);
    fprintf(stderr, "attn: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}
