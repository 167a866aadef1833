/* train_view.h — what `attn train` (cli/cmd_train.c) prints around the
 * library's trainer: the progress bar or log lines while it runs, the cost
 * warning of a large run, --dry-run's plan, the opening and closing lines.
 * cmd_train.c parses and calls; this file only draws. */
#ifndef ATTN_CLI_TRAIN_VIEW_H
#define ATTN_CLI_TRAIN_VIEW_H

#include <stdint.h>

#include "attn/thread_tuner.h"
#include "attn/train.h"

/* What the command knows of a run besides its trainer. */
typedef struct train_run_info {
    const char *preset; /* NULL: the saved run's config */
    const char *data, *out, *init_from;
    int resume, force;
    int threads; /* --threads, 0 when not given */
    int ranks;
    attn_device device;
    attn_precision precision;
    double corpus_bytes; /* the corpus file's size (0: unknown) */
} train_run_info;

/* What the command draws while the library trains (attn_trainer_events).
 * mpirun hands ranks a pseudo-terminal even when its output is a file: log
 * lines there (tty only for one process). Off a terminal the steps' log
 * lines (every log_interval steps) go to stdout, and progress lines to
 * stderr whenever every_s seconds passed without a line: a long step or
 * evaluation shows in a log (every_s 0: an evaluation's line per batch). */
#define TRAIN_PROGRESS_EVERY_S "10" /* train_view.every_s's default */

typedef struct train_view {
    int tty, lead, bar_shown, cols;
    int threads_now; /* the count the tuner last asked for */
    double last_bar, t_start;
    double every_s, last_line; /* off a terminal: the gap allowed, the last line's time */
    int line_part, line_batch; /* the evaluation's part and batch the last line showed */
    int in_eval;               /* an evaluation reports progress and has not ended */
    int64_t interrupt_after, kill_rank, kill_after;
    int interrupt_due;         /* interrupt_after's step is taken */
    int64_t interrupt_in_eval; /* testing: a Ctrl-C in the evaluation at this step */
    attn_thread_tuner *tuner;  /* NULL: the thread count is fixed */
} train_view;

/* Terminal width: the tty's (TIOCGWINSZ), else $COLUMNS, else 80. */
int train_view_columns(void);

/* Ctrl-C, SIGTERM and SIGHUP ask the run to save and stop (a second Ctrl-C
 * stops at once). */
void train_view_catch_signals(void);

/* The exit code of a run stopped that way, after its save: 128 + the signal
 * (130 SIGINT, 143 SIGTERM, 129 SIGHUP); 130 when another rank was the one
 * signalled. */
int train_view_stop_code(void);

/* The trainer's events, drawing into v. */
attn_trainer_events train_view_events(train_view *v);

/* Runs of seed004's size (over 10^15 floating-point operations, hours on
 * a laptop) say on stderr what they will cost before they start. */
void train_warn_cost(const train_run_info *r, const attn_gpt_config *m, const attn_train_config *t);

/* --dry-run's report (rank 0) of the trainer the real set-up made: 0, or
 * 1 when out of memory (said on stderr). */
int train_print_dry_run(const train_run_info *r, const attn_trainer *tr);

/* What the run is, before its first step (rank 0, stderr). */
void train_announce(const train_run_info *r, const attn_trainer *tr);

/* The closing lines (rank 0, stderr); out_abs is the run folder's
 * absolute path. */
void train_report_end(const attn_trainer *tr, const attn_train_result *res, const char *out_abs);

#endif
