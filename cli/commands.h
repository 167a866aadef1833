/* The attn program's subcommands: one file each in cli/, one line each in
 * the table in main.c. Each returns the process exit status and prints its
 * own errors ("attn <cmd>: <message>") to stderr. Exit status: 0 done,
 * 1 a runtime failure (a missing or bad file, a failed write), 2 a usage
 * error (an unknown option, a value outside its range). */
#ifndef ATTN_CLI_COMMANDS_H
#define ATTN_CLI_COMMANDS_H

#include "options.h"

/* Nonzero once a write to stdout has failed (a command that streams stops
 * there). main.c flushes and checks stdout after every command and reports
 * a failure once: "attn CMD: cannot write to standard output: REASON",
 * exit 1. */
int cli_stdout_failed(void);

/* Option tables (options.h) of the commands that have one. */
extern const cli_command chapter3_cli, rng_cli, viz_cli, info_cli;
/* attn train's table: its training-key rows come from the library's key
 * table (attn_train_key_at), filled on the first call. */
const cli_command *train_cli_table(void);
int cmd_info(int argc, char **argv);

int cmd_bench(int argc, char **argv);
int cmd_chapter3(int argc, char **argv);
int cmd_rng(int argc, char **argv);
int cmd_forward(int argc, char **argv);
int cmd_train(int argc, char **argv);
int cmd_generate(int argc, char **argv);
int cmd_viz(int argc, char **argv);
/* `attn classify RUN TEXT...` (cli/finetune.c). */
int cmd_classify(int argc, char **argv);
/* `attn export RUN OUT --format ...` (cli/cmd_export.c). */
int cmd_export(int argc, char **argv);
/* `attn forward gpt ...` (cli/forward_gpt.c); argv[0] is "gpt". */
int cmd_forward_gpt(int argc, char **argv);
/* `attn bench train|generate ...` (cli/bench_model.c); argv[0] is the case. */
int cmd_bench_model(int argc, char **argv);

/* The option tables of generate, forward, forward gpt and bench. */
extern const cli_command generate_cli, forward_cli, forward_gpt_cli, bench_cli, bench_train_cli,
    bench_generate_cli, export_cli, classify_cli;

#endif
