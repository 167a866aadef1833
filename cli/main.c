/* attn — command-line front end: dispatches to one subcommand per file. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "attn/cpu_report.h"
#include "attn/version.h"
#include "commands.h"

typedef struct {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
} command;

static const command commands[] = {
    {"bench", cmd_bench, "time MultiHeadAttention, the attention kernel, sgemm, a model"},
    {"chapter3", cmd_chapter3, "walk chapter 3 step by step, printing each tensor as PyTorch does"},
    {"rng", cmd_rng, "print torch.rand / dropout draws for a seed (PyTorch's generator)"},
    {"forward", cmd_forward, "run one attention module (and backward) on a .npy input"},
    {"train", cmd_train, "train a GPT (char-level or GPT-2) on a text (checkpoints, resume)"},
    {"generate", cmd_generate, "sample text from a trained GPT checkpoint"},
    {"viz", cmd_viz, "a checkpoint's attention on a prompt as an HTML page or SVG heatmap"},
    {"info", cmd_info, "a checkpoint's config, step, losses, vocabulary and size"},
    {"export", cmd_export, "write a model's weights as HF, llm.c or book GPT-2 files"},
    {"classify", cmd_classify, "label texts with a classifier (attn train --task classify)"},
};

/* The commands whose options come from a table (options.h). */
static const cli_command *const tables[] = {&chapter3_cli,       &rng_cli,      &viz_cli,
                                            &info_cli,           &generate_cli, &forward_cli,
                                            &forward_gpt_cli,    &bench_cli,    &bench_train_cli,
                                            &bench_generate_cli, &export_cli,   &classify_cli};

static void usage(FILE *out) {
    fprintf(out, "usage: attn <command> [options]\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(out, "  %-10s %s\n", commands[i].name, commands[i].summary);
    fprintf(out, "\n'attn <command> --help' describes one command; 'attn --version' prints\n"
                 "the version. Exit status: 0 done, 1 failed (a file, a write), 2 bad usage.\n");
}

/* A closed standard stream is reopened on /dev/null before anything else
 * is opened, so no file attn writes can become fd 1 or 2 and receive its
 * printing. Stdout is reopened read-only: writes to it then fail (EBADF) and
 * are reported at exit, as a closed stdout should be. */
static void reserve_std_fds(void) {
    static const int mode[3] = {O_RDONLY, O_RDONLY, O_WRONLY};
    for (int fd = 0; fd < 3; fd++)
        if (fcntl(fd, F_GETFD) == -1 && errno == EBADF) {
            const int got = open("/dev/null", mode[fd]);
            if (got >= 0 && got != fd) close(got); /* a lower one was closed too: taken */
        }
}

static int stdout_errno; /* why the first failed write to stdout failed */

int cli_stdout_failed(void) {
    if (!ferror(stdout)) return 0;
    if (!stdout_errno) stdout_errno = errno; /* called right after the write */
    return 1;
}

/* Everything the command printed must have reached stdout: flush and close
 * it, and turn a failed write (ENOSPC on /dev/full, EBADF when closed, EPIPE
 * with SIGPIPE ignored) into exit status 1 with a message. */
static int finish_stdout(const char *cmd, int rc) {
    errno = 0;
    fflush(stdout);
    int bad = cli_stdout_failed();
    errno = 0;
    if (fclose(stdout) != 0 && !bad) {
        bad = 1;
        stdout_errno = errno;
    }
    if (!bad) return rc;
    const int why = stdout_errno;
    fprintf(stderr, "attn%s%s: cannot write to standard output%s%s\n", cmd ? " " : "",
            cmd ? cmd : "", why ? ": " : "", why ? strerror(why) : "");
    return rc ? rc : 1;
}

/* The short OpenMP spin a busy machine needs is set before libgomp starts,
 * in this process, by libattn-ompwait.so (src/base/ompwait/ompwait.c). */
int main(int argc, char **argv) {
    reserve_std_fds();
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
        strcmp(argv[1], "help") == 0) {
        usage(stdout);
        return finish_stdout(NULL, 0);
    }
    if (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "version") == 0) {
        printf("attn %s\n", attn_version());
        return finish_stdout(NULL, 0);
    }
    if (strcmp(argv[1], "--check-options") == 0) { /* maintainers: every table is sound */
        int bad = 0;
        for (size_t i = 0; i < sizeof tables / sizeof tables[0]; i++)
            bad |= cli_check_table(tables[i]);
        bad |= cli_check_table(train_cli_table());
        return bad;
    }
    attn_error cap_err;
    if (attn_cpu_cap_check(&cap_err) != ATTN_OK) { /* a typo would silently cap nothing */
        fprintf(stderr, "attn: %s\n", cap_err.msg);
        return 2;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (strcmp(argv[1], commands[i].name) == 0)
            return finish_stdout(commands[i].name, commands[i].run(argc - 1, argv + 1));
    cli_near near;
    char hint[96];
    cli_near_init(&near, argv[1], strlen(argv[1]));
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        cli_near_add(&near, commands[i].name);
    cli_near_add(&near, "help");
    cli_near_add(&near, "version");
    fprintf(stderr, "attn: unknown command '%s'%s\n", argv[1],
            cli_near_hint(&near, "", hint, sizeof hint));
    usage(stderr);
    return 2;
}
