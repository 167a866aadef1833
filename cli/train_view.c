/* What `attn train` draws around the library's trainer (train_view.h):
 * the progress bar or log lines, the cost warning, --dry-run's plan, the
 * opening and closing lines. */
#define _DEFAULT_SOURCE /* TIOCGWINSZ, with sigaction */

#include "train_view.h"

#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "attn/checkpoint.h"
#include "attn/cpu.h"
#include "attn/cuda.h"
#include "attn/dist.h"
#include "attn/membudget.h"
#include "attn/memory_plan.h"
#include "attn/thread_tuner.h"
#include "attn/tokenizer.h"
#include "attn/train.h"
#include "attn/train_setup.h"
#include "clock.h"
#include "threads.h"

static volatile sig_atomic_t g_interrupted = 0;

/* The signal that asked the run to stop (its number), 0 while none did. */
static void on_sigint(int sig) {
    g_interrupted = sig;
}

void train_view_catch_signals(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint;
    sa.sa_flags = SA_RESETHAND; /* a second Ctrl-C stops at once */
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL); /* the terminal closed: save like Ctrl-C */
}

static void fmt_eta(double s, char *out, size_t n) {
    if (!isfinite(s) || s < 0) s = 0;
    long t = (long)(s + 0.5);
    if (t >= 3600)
        snprintf(out, n, "%ld:%02ld:%02ld", t / 3600, t / 60 % 60, t % 60);
    else
        snprintf(out, n, "%ld:%02ld", t / 60, t % 60);
}

/* A duration in words: "about 27 hours 10 minutes", "about 4 minutes 5
 * seconds", "about 12 seconds"; days from 48 hours on. */
static void fmt_duration(double s, char *out, size_t n) {
    if (!isfinite(s) || s < 0) s = 0;
    const long t = (long)(s + 0.5);
    long big, small;
    const char *bu, *su;
    const long hours = (t + 1800) / 3600, minutes = (t + 30) / 60; /* rounded */
    if (t >= 48 * 3600)
        big = hours / 24, small = hours % 24, bu = "day", su = "hour";
    else if (t >= 3600)
        big = minutes / 60, small = minutes % 60, bu = "hour", su = "minute";
    else if (t >= 60)
        big = t / 60, small = t % 60, bu = "minute", su = "second";
    else {
        if (t < 1)
            snprintf(out, n, "under a second");
        else
            snprintf(out, n, "about %ld second%s", t, t == 1 ? "" : "s");
        return;
    }
    if (small)
        snprintf(out, n, "about %ld %s%s %ld %s%s", big, bu, big == 1 ? "" : "s", small, su,
                 small == 1 ? "" : "s");
    else
        snprintf(out, n, "about %ld %s%s", big, bu, big == 1 ? "" : "s");
}

/* What would make a run faster that this build and CPU offer and the run
 * does not use yet ("" when nothing). */
static void speed_hints(attn_device dev, attn_precision prec, int ranks, char *out, size_t n) {
    size_t used = 0;
    out[0] = '\0';
    if (dev == ATTN_DEVICE_CPU && prec == ATTN_PRECISION_FP32 &&
        attn_precision_check(ATTN_PRECISION_BF16, NULL) == ATTN_OK)
        used += (size_t)snprintf(out + used, n - used,
                                 "--precision bf16 (this CPU has AVX512-BF16: bf16 matrix "
                                 "products, fp32 sums)");
    /* Processes pay off only with cores to spare: at least 2 ranks of 2
     * threads (fewer cores: the threads of one process already use them). */
    const int cores = attn_cpu_count();
    if (dev == ATTN_DEVICE_CPU && ranks <= 1 && attn_dist_compiled() && cores >= 4 && used < n)
        used += (size_t)snprintf(out + used, n - used,
                                 "%s`mpirun -np %d attn train ... --threads 2` (processes share "
                                 "each step, bit for bit the same run)",
                                 used ? "; " : "", cores / 2);
    if (dev == ATTN_DEVICE_CPU && attn_cuda_compiled() && used < n)
        snprintf(out + used, n - used, "%s--device cuda (an NVIDIA GPU)", used ? "; " : "");
}

int train_view_columns(void) {
    struct winsize ws;
    if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) return ws.ws_col;
    const char *c = getenv("COLUMNS");
    int n = c ? atoi(c) : 0;
    return n > 0 ? n : 80;
}

/* One progress line that never reaches the last column (no wrapping): a
 * bar filled to frac, then the fields ("[#####.....] step 40/2000 | loss
 * 2.3456 | lr 2.0e-03 | 12345 tok/s | 0:12<1:23"), squeezed on narrow
 * terminals: shorter separators, then no bar, then fewer fields (from the
 * end), then cut. */
static void bar_line(int cols, double frac, char f[][64], int nf) {
    const int room = cols - 1;
    char text[400];
    int len = 0;
    const char *sep = " | ";
    for (;;) {
        len = 0;
        text[0] = '\0';
        for (int i = 0; i < nf; i++)
            len += snprintf(text + len, sizeof text - (size_t)len, "%s%s", i ? sep : "", f[i]);
        if (len <= room || nf == 1) break;
        if (sep[1] == '|')
            sep = " ";
        else
            nf--;
    }
    char bar[160];
    int width = room - len - 3; /* "[" bar "] " */
    if (width > 40) width = 40;
    if (width >= 8) {
        int fill = (int)(frac * width);
        for (int i = 0; i < width; i++)
            bar[i] = i < fill ? '#' : '.';
        bar[width] = '\0';
        printf("\r[%s] %s\033[K", bar, text);
    } else {
        printf("\r%.*s\033[K", room > 0 ? room : 0, text);
    }
    fflush(stdout);
}

/* A step's bar: step, loss, lr, tokens/s, elapsed<ETA (dropped from the end). */
static void progress(int cols, int64_t step, int64_t max, float loss, double lr, double tok_s,
                     double elapsed, double eta) {
    char f[5][64], el[24], e[24];
    fmt_eta(elapsed, el, sizeof el);
    fmt_eta(eta, e, sizeof e);
    snprintf(f[0], sizeof f[0], "step %" PRId64 "/%" PRId64, step, max);
    snprintf(f[1], sizeof f[1], "loss %.4f", (double)loss);
    snprintf(f[2], sizeof f[2], "lr %.1e", lr);
    snprintf(f[3], sizeof f[3], "%.0f tok/s", tok_s);
    snprintf(f[4], sizeof f[4], "%s<%s", el, e);
    bar_line(cols, (double)step / (double)max, f, 5);
}

/* Seconds for the run's steps if it ran at the GEMM speed measured now on
 * ranks processes (0 when unknown): a rough figure, slower on a busy
 * machine. */
static double plan_seconds(const attn_train_plan *p, int64_t steps, int threads, int ranks,
                           double *gflops) {
    *gflops = attn_train_probe_gflops(threads > 0 ? threads : 0) * (ranks > 0 ? ranks : 1);
    return *gflops > 0 ? p->flops_per_step * (double)steps / (*gflops * 1e9) : 0;
}

/* The plan of run r (its threads, 0: the default count; its precision on
 * the CPU; resumed or not) with a corpus of n bytes. */
static void plan_of(const train_run_info *r, const attn_gpt_config *m, const attn_train_config *t,
                    double n, attn_train_plan *p) {
    const attn_train_plan_env env = {
        .precision = r->device == ATTN_DEVICE_CPU ? r->precision : ATTN_PRECISION_FP32,
        .threads = r->threads > 0 ? r->threads : attn_default_threads(),
        .corpus_bytes = n,
        .resume = r->resume};
    attn_train_plan_env_of(m, t, &env, p);
}

/* The dry run's token counts and what its evaluations cost, against the
 * steps' work (flops: the steps still to take). */
static void print_eval_plan(const attn_trainer *tr, const attn_train_plan *p, int64_t steps) {
    const attn_train_config *t = attn_trainer_train_config(tr);
    size_t n_train = 0, n_val = 0;
    attn_trainer_split_tokens(tr, &n_train, &n_val);
    printf("tokens      %zu train, %zu val\n", n_train, n_val);
    if (steps <= 0) return;
    const double work = p->flops_per_step * (double)steps;
    const int accum = t->grad_accum > 1 ? t->grad_accum : 1;
    /* A sampled evaluation: eval_iters batches of each split, forward only
     * (a third of a training token's work). */
    const int64_t every = t->eval_interval > 0 ? t->eval_interval : steps; /* and the last */
    const int64_t n_evals = steps / every + 1 + (steps % every != 0);
    const double sampled = (double)n_evals * 2.0 * t->eval_iters * p->flops_per_step / accum / 3.0;
    double exact_flop = 0;
    const double share = attn_trainer_final_exact_share(tr, &exact_flop);
    printf("evaluation  %" PRId64 " evaluation%s of %d batches of each split (~%.1f%% of the "
           "steps' work)",
           n_evals, n_evals == 1 ? "" : "s", t->eval_iters,
           work > 0 ? 100.0 * sampled / work : 0.0);
    if (attn_trainer_final_is_exact(tr))
        printf("; the final exact pass over %zu val tokens (~%.1f%%)\n", n_val, 100.0 * share);
    else
        printf("; no final exact pass (it would cost %.2fx the steps' work; --final-eval exact "
               "runs it)\n",
               share);
}

/* --dry-run's report: the configs, where the run stands (run) and the cost
 * of the steps after step. */
static int print_plan(const train_run_info *r, const attn_trainer *tr, size_t n, const char *out,
                      int64_t step, const char *run) {
    const attn_gpt_config *m = attn_trainer_model_config(tr);
    const attn_train_config *t = attn_trainer_train_config(tr);
    const char *preset = r->preset, *data = r->data;
    const int threads = r->threads, ranks = r->ranks;
    const attn_device dev = r->device;
    const attn_precision prec = r->precision;
    attn_train_plan p;
    plan_of(r, m, t, (double)n, &p);
    char *mj = NULL, *tj = attn_train_config_to_json(t);
    attn_error err;
    if (attn_gpt_config_to_json(m, &mj, &err) || !tj) {
        fprintf(stderr, "attn train: out of memory\n");
        free(tj);
        return 1;
    }
    const int64_t steps = t->max_steps - step; /* still to take */
    char variant[512], parts[512];
    attn_gpt_config_describe_variants(m, 0, variant, sizeof variant);
    printf("attn train --dry-run: nothing is trained or written\n"
           "preset      %s\n"
           "model       %s\n"
           "variant     %s\n"
           "training    %s\n"
           "corpus      %s (%zu bytes, vocabulary %d)\n",
           preset ? preset : "saved config", mj, variant, tj, data, n, m->vocab_size);
    print_eval_plan(tr, &p, steps);
    printf("output      %s\n"
           "run         %s\n"
           "parameters  %zu (%.2f M)\n"
           "memory      ~%.1f MiB: %s\n"
           "checkpoint  %.1f MiB per save\n"
           "engine      %s, %s\n",
           out, run, p.n_params, (double)p.n_params / 1e6, p.mem_bytes / 1048576.0,
           attn_memory_plan_text(&p.mem, parts, sizeof parts), p.ckpt_bytes / 1048576.0,
           attn_device_name(dev), attn_precision_name(prec));
    if (steps > 0 && t->time_budget > 0) {
        double gflops, sec = plan_seconds(&p, steps, threads, ranks, &gflops);
        char budget[64];
        fmt_duration(t->time_budget, budget, sizeof budget);
        printf("time        %s (--time-budget %g s, evaluations included): the run then ends "
               "with an exact evaluation and a checkpoint, at most %" PRId64 " steps; the LR "
               "schedule (%s) follows the clock",
               budget, t->time_budget, t->max_steps,
               t->lr_schedule == ATTN_LR_WSD ? "warmup-stable-decay" : "cosine");
        if (gflops > 0 && sec > 0)
            printf(" (~%.0f steps fit at %.1f GFLOP/s, the speed of matrix products measured "
                   "now)",
                   (double)steps * t->time_budget / sec, gflops);
        printf("\n");
    } else if (steps > 0) {
        double gflops, sec = plan_seconds(&p, steps, threads, ranks, &gflops);
        char eta[64], hints[400] = "";
        if (gflops > 0)
            fmt_duration(sec, eta, sizeof eta);
        else
            snprintf(eta, sizeof eta, "unknown (no speed measured)");
        if (sec > 3600) speed_hints(dev, prec, ranks, hints, sizeof hints);
        printf("time        %s for %" PRId64 " step%s (%.3g TFLOP at %.1f GFLOP/s, the speed of "
               "matrix products measured now)\n",
               eta, steps, steps == 1 ? "" : "s", p.flops_per_step * (double)steps / 1e12, gflops);
        if (hints[0]) printf("faster      over an hour here; try %s\n", hints);
    }
    free(mj);
    free(tj);
    return 0;
}

void train_warn_cost(const train_run_info *r, const attn_gpt_config *m,
                     const attn_train_config *t) {
    const int threads = r->threads, ranks = r->ranks;
    const attn_device dev = r->device;
    const attn_precision prec = r->precision;
    attn_train_plan p;
    plan_of(r, m, t, r->corpus_bytes, &p);
    if (p.flops_per_step * (double)t->max_steps < 1e15) return;
    double gflops, sec = plan_seconds(&p, t->max_steps, threads, ranks, &gflops);
    char eta[64], hints[400] = "";
    if (gflops > 0)
        fmt_duration(sec, eta, sizeof eta);
    else
        snprintf(eta, sizeof eta, "an unknown time");
    if (sec > 3600) speed_hints(dev, prec, ranks, hints, sizeof hints);
    fprintf(stderr,
            "attn train: warning: a large run: %.1f M parameters, ~%.2f GB of memory, %.0f MB per "
            "checkpoint, %s for %" PRId64 " steps here (%.1f GFLOP/s); Ctrl-C saves "
            "and stops, --resume continues, --dry-run shows the plan\n",
            (double)p.n_params / 1e6, p.mem_bytes / 1e9, p.ckpt_bytes / 1e6, eta, t->max_steps,
            gflops);
    if (hints[0]) fprintf(stderr, "attn train: faster: %s\n", hints);
}

/* --interrupt-after's stop comes after its step's evaluation (a real
 * Ctrl-C stops the evaluation too). */
static int should_stop(void *user, const attn_trainer *tr) {
    const train_view *v = user;
    (void)tr;
    return g_interrupted != 0 || (v->interrupt_due && !v->in_eval);
}

int train_view_stop_code(void) {
    return 128 + (g_interrupted ? (int)g_interrupted : SIGINT);
}

static void on_step(void *user, const attn_trainer *tr, const attn_train_progress *p) {
    train_view *v = user;
    const attn_dist *dist = attn_trainer_dist(tr);
    const int64_t max = attn_trainer_train_config(tr)->max_steps;
    if (v->kill_after > 0 && attn_trainer_steps(tr) == v->kill_after && dist &&
        dist->rank == v->kill_rank)
        raise(SIGKILL);
    if (v->interrupt_after > 0 && attn_trainer_steps(tr) == v->interrupt_after)
        v->interrupt_due = 1;
    if (v->tuner) {
        const int n = attn_thread_tuner_step(v->tuner, attn_trainer_steps(tr), p->step_s);
        if (n != v->threads_now) cli_use_threads(n, 1);
        v->threads_now = n;
    }
    if (v->tty) {
        double t = attn_now_s();
        if (t - v->last_bar > 0.1 || attn_trainer_steps(tr) == max) {
            progress(v->cols, attn_trainer_steps(tr), max, p->rec.loss, p->rec.lr, p->tokens_per_s,
                     t - v->t_start, p->eta_s);
            v->last_bar = t;
            v->bar_shown = 1;
        }
    } else if (v->lead && (p->rec.step - 1) % attn_trainer_train_config(tr)->log_interval == 0) {
        printf("iter %" PRId64 ": loss %.4f, time %.2fms", p->rec.step - 1, (double)p->rec.loss,
               p->step_s * 1000);
        if (dist && dist->size > 1) printf(", mpi %.2fms", p->step_comm_s * 1000);
        printf("\n");
        fflush(stdout);
        v->last_line = attn_now_s();
    } else if (v->lead && v->every_s > 0 && attn_now_s() - v->last_line >= v->every_s) {
        char eta[24];
        fmt_eta(p->eta_s, eta, sizeof eta);
        fprintf(stderr,
                "attn train: step %" PRId64 "/%" PRId64 ": loss %.4f, %.1f s a step, %s left\n",
                p->rec.step, max, (double)p->rec.loss, p->step_s, eta);
        v->last_line = attn_now_s();
    }
}

/* What each part of an evaluation measures (attn_eval_part's order). */
static const char *const EVAL_PARTS[] = {"train loss estimate", "val loss estimate",
                                         "exact val loss"};

/* ETA as "1:23", or "?" before the evaluation's pace is known. */
static void fmt_left(double s, char *out, size_t n) {
    if (isfinite(s))
        fmt_eta(s, out, n);
    else
        snprintf(out, n, "?");
}

/* The evaluation's bar: what it is, how far, elapsed<ETA. */
static void eval_bar(const train_view *v, const attn_eval_progress *p) {
    char f[4][64], el[24], left[24];
    fmt_eta(p->elapsed_s, el, sizeof el);
    fmt_left(p->eta_s, left, sizeof left);
    snprintf(f[0], sizeof f[0], "eval at step %" PRId64 "%s", p->step, p->final ? " (final)" : "");
    snprintf(f[1], sizeof f[1], "%s %zu/%zu", EVAL_PARTS[p->part], p->batch, p->batches);
    snprintf(f[2], sizeof f[2], "%.0f%%", p->total > 0 ? 100 * p->done / p->total : 100.0);
    snprintf(f[3], sizeof f[3], "%s<%s", el, left);
    bar_line(v->cols, p->total > 0 ? p->done / p->total : 1, f, 4);
}

/* An evaluation as it goes: the bar on a terminal (as each part begins,
 * else at most every 0.1 s), else a line on stderr every every_s seconds
 * (0: per batch). */
static void on_eval_progress(void *user, const attn_trainer *tr, const attn_eval_progress *p) {
    train_view *v = user;
    (void)tr;
    v->in_eval = 1;
    if (v->interrupt_in_eval >= 0 && p->step == v->interrupt_in_eval && p->done >= 1)
        g_interrupted = SIGINT;
    if (!v->lead) return;
    const double now = attn_now_s();
    const int part = (int)p->part != v->line_part;
    const int moved = part || (int)p->batch != v->line_batch;
    if (v->tty) {
        if (!part && now - v->last_bar < 0.1) return;
        eval_bar(v, p);
        v->last_bar = now;
        v->bar_shown = 1;
        v->line_part = (int)p->part;
        return;
    }
    if (v->every_s > 0 ? now - v->last_line < v->every_s : !moved) return;
    char el[24], left[24];
    fmt_eta(p->elapsed_s, el, sizeof el);
    fmt_left(p->eta_s, left, sizeof left);
    fprintf(stderr,
            "attn train: evaluating at step %" PRId64 "%s: %s %zu/%zu batches, %.0f%% of the "
            "evaluation, %s elapsed, %s left\n",
            p->step, p->final ? " (the final evaluation)" : "", EVAL_PARTS[p->part], p->batch,
            p->batches, p->total > 0 ? 100 * p->done / p->total : 100.0, el, left);
    v->last_line = now;
    v->line_part = (int)p->part;
    v->line_batch = (int)p->batch;
}

static void on_eval(void *user, const attn_trainer *tr, const attn_eval_record *ev) {
    train_view *v = user;
    if (v->bar_shown) printf("\r\033[K");
    v->bar_shown = 0;
    v->last_line = attn_now_s();
    v->line_part = -1;
    v->in_eval = 0;
    /* The book's data order prints the book's line (gpt_train.py's
     * train_model_simple: the epoch, the step counted from 0). */
    if (v->lead && attn_trainer_epoch(tr) > 0) {
        printf("Ep %" PRId64 " (Step %06" PRId64 "): Train loss %.3f, Val loss %.3f\n",
               attn_trainer_epoch(tr), ev->step - 1, (double)ev->train_loss, (double)ev->val_loss);
    } else if (v->lead) { /* nanoGPT's line; an exact val loss (the whole split) says so. */
        printf("step %" PRId64 ": train loss %.4f", ev->step, (double)ev->train_loss);
        if (!isnan(ev->val_loss)) printf(", val loss %.4f", (double)ev->val_loss);
        if (!isnan(ev->val_exact)) printf(", exact val loss %.4f", (double)ev->val_exact);
        printf("\n");
    }
    fflush(stdout);
}

/* The book's start_context (gpt_train.py's OTHER_SETTINGS). */
#define TRAIN_VIEW_SAMPLE_PROMPT "Every effort moves you"

/* n bytes of decoded text on stdout: a cut character or an invalid byte as
 * U+FFFD, never raw (attn_utf8_display). */
static void train_view_put_text(const char *text, size_t n) {
    attn_utf8_display d = {0};
    char *buf = malloc(ATTN_UTF8_DISPLAY_CAP(n));
    if (!buf) return;
    size_t k = attn_utf8_display_put(&d, text, n, buf);
    fwrite(buf, 1, k, stdout);
    k = attn_utf8_display_end(&d, buf);
    fwrite(buf, 1, k, stdout);
    free(buf);
}

/* After each epoch of the book's data order: generate_and_print_sample's
 * line, 50 greedy tokens after the book's start context, newlines as spaces,
 * cut characters and invalid bytes shown as U+FFFD. */
static void on_epoch(void *user, const attn_trainer *tr, int64_t epoch) {
    train_view *v = user;
    (void)epoch;
    char *text = NULL;
    attn_error err;
    if (!v->lead) return;
    if (attn_trainer_greedy_text(tr, TRAIN_VIEW_SAMPLE_PROMPT, 50, &text, &err)) {
        fprintf(stderr, "attn train: the epoch's sample: %s\n", err.msg);
        return;
    }
    for (char *c = text; *c; c++)
        if (*c == '\n') *c = ' ';
    train_view_put_text(text, strlen(text));
    printf("\n");
    fflush(stdout);
    free(text);
}

attn_trainer_events train_view_events(train_view *v) {
    return (attn_trainer_events){.user = v,
                                 .should_stop = should_stop,
                                 .on_step = on_step,
                                 .on_eval = on_eval,
                                 .on_eval_progress = on_eval_progress,
                                 .on_epoch = on_epoch};
}

/* path as one shell word: quoted when it holds anything but [A-Za-z0-9/._+,:@%=-]. */
static void shell_word(const char *path, char *buf, size_t cap) {
    if (!path[strspn(path,
                     "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789/._+,:@%=-")]) {
        snprintf(buf, cap, "%s", path);
        return;
    }
    size_t used = (size_t)snprintf(buf, cap, "'");
    for (const char *c = path; *c && used + 5 < cap; c++)
        used += (size_t)snprintf(buf + used, cap - used, *c == '\'' ? "'\\''" : "%c", *c);
    snprintf(buf + used, cap - used, "'");
}

/* Why a run's final evaluation takes no exact val loss
 * (attn_trainer_final_is_exact's rule), and how to have one. */
static void final_sampled_why(const attn_trainer *tr, char *out, size_t n) {
    const attn_train_config *t = attn_trainer_train_config(tr);
    size_t n_train, n_val;
    attn_trainer_split_tokens(tr, &n_train, &n_val);
    if (t->final_eval == ATTN_FINAL_SAMPLED)
        snprintf(out, n, "--final-eval sampled");
    else if (n_val > ATTN_TRAIN_EXACT_FINAL_MAX)
        snprintf(out, n,
                 "the val split is too large for an exact pass; --final-eval exact forces "
                 "one");
    else
        snprintf(out, n,
                 "an exact pass over the %zu val tokens would cost %.2fx the steps (auto runs "
                 "one up to %.2fx); --final-eval exact runs it",
                 n_val, attn_trainer_final_exact_share(tr, NULL), ATTN_TRAIN_EXACT_FINAL_SHARE);
}

/* The hint names the folder by its absolute path and the run recorded its
 * corpus's, so it works from any folder. */
void train_report_end(const attn_trainer *tr, const attn_train_result *res, const char *out_abs) {
    const attn_dist *dist = attn_trainer_dist(tr);
    char dir[2 * ATTN_TRAIN_PATH_MAX];
    shell_word(out_abs, dir, sizeof dir);
    if (res->eval_stopped) {
        const attn_eval_progress *p = &res->eval_at;
        fprintf(stderr,
                "attn train: stopped during the evaluation at step %" PRId64 " (%s, batch %zu of "
                "%zu; %.1f of its %.0f batches done); a resume runs it again\n",
                p->step, EVAL_PARTS[p->part], p->batch, p->batches, p->done, p->total);
    }
    if (res->stopped) {
        fprintf(stderr,
                "attn train: interrupted after step %" PRId64 "; checkpoint saved in %s "
                "(continue with: attn train --out %s --resume)\n",
                attn_trainer_steps(tr), out_abs, dir);
        return;
    }
    size_t n_evals;
    const attn_eval_record *evals = attn_trainer_evals(tr, &n_evals);
    const attn_eval_record *last = n_evals ? &evals[n_evals - 1] : NULL;
    /* A spent time budget is the run's end: --resume would stop at once. */
    char hint[2 * ATTN_TRAIN_PATH_MAX + 64] = "", why[240] = "", because[200];
    if (attn_trainer_train_config(tr)->time_budget <= 0)
        snprintf(hint, sizeof hint, " (train on with: attn train --out %s --resume --steps N)",
                 dir);
    if (last && !isnan(last->val_exact)) {
        snprintf(why, sizeof why, " (exact: the whole val split)");
    } else if (last && attn_trainer_epoch(tr) == 0) { /* the book's order has no final one */
        final_sampled_why(tr, because, sizeof because);
        snprintf(why, sizeof why, " (sampled: %s)", because);
    }
    const int64_t steps = attn_trainer_steps(tr) - res->start_step;
    fprintf(stderr,
            "attn train: %" PRId64 " step%s in %.1f s (%.0f tokens/s); evaluations %.1f s, "
            "checkpoints %.1f s: %.1f s in all%s; final val loss %.4f%s; checkpoint in %s%s\n",
            steps, steps == 1 ? "" : "s", res->train_s, res->tokens_per_s, res->eval_s, res->save_s,
            res->wall_s, res->budget_spent ? ", the time budget spent" : "",
            last ? (double)attn_eval_val(last) : NAN, why, out_abs, hint);
    if (dist && dist->size > 1 && attn_trainer_steps(tr) > res->start_step) {
        const double k = (double)(attn_trainer_steps(tr) - res->start_step);
        fprintf(stderr,
                "attn train: MPI: %d ranks; rank 0 spent %.2f ms per step in MPI (%.1f%% of "
                "the step) and moved %.3f MB per step\n",
                dist->size, res->comm_s / k * 1e3,
                res->train_s > 0 ? 100 * res->comm_s / res->train_s : 0,
                (double)res->comm_bytes / k / 1e6);
    }
}

/* Where the run stands, its folder (a --force says what it replaces). */
int train_print_dry_run(const train_run_info *r, const attn_trainer *tr) {
    char run[ATTN_TRAIN_PATH_MAX + 160], out[ATTN_TRAIN_PATH_MAX + 64];
    int64_t old_step;
    if (r->force && attn_ckpt_exists(r->out, &old_step))
        snprintf(out, sizeof out, "%s (--force: its step-%" PRId64 " checkpoint is replaced)",
                 r->out, old_step);
    else
        snprintf(out, sizeof out, "%s", r->out);
    if (r->resume && attn_trainer_steps(tr) >= attn_trainer_train_config(tr)->max_steps)
        snprintf(run, sizeof run,
                 "finished at step %" PRId64 " (max_steps): nothing to train; --resume --steps N "
                 "trains it on to step N",
                 attn_trainer_steps(tr));
    else if (r->resume)
        snprintf(run, sizeof run, "resumes at step %" PRId64 " of %" PRId64, attn_trainer_steps(tr),
                 attn_trainer_train_config(tr)->max_steps);
    else if (r->init_from)
        snprintf(run, sizeof run, "a new run from the weights of %s (fine-tuning)", r->init_from);
    else
        snprintf(run, sizeof run, "a new run");
    return print_plan(r, tr, attn_trainer_corpus_bytes(tr), out, attn_trainer_steps(tr), run);
}

void train_announce(const train_run_info *r, const attn_trainer *tr) {
    const attn_train_config *t = attn_trainer_train_config(tr);
    const attn_gpt_config *m = attn_trainer_model_config(tr);
    const int ranks = r->ranks;
    size_t n_train, n_val;
    attn_trainer_split_tokens(tr, &n_train, &n_val);
    if (t->grad_accum > 1)
        fprintf(stderr, "attn train: %d micro-batches per step over %d rank%s\n", t->grad_accum,
                ranks, ranks > 1 ? "s" : "");
    fprintf(stderr,
            "attn train: %s, %zu parameters (vocab %d, ctx %d, emb %d, %d heads, %d layers); "
            "%zu train / %zu val tokens; batch %d, %" PRId64 " steps\n",
            r->preset ? r->preset : "saved config", attn_gpt_num_params(attn_trainer_model(tr)),
            m->vocab_size, m->context_length, m->emb_dim, m->n_heads, m->n_layers, n_train, n_val,
            t->batch_size, t->max_steps);
    const attn_token_file *ft = attn_trainer_token_file(tr, 0),
                          *fv = attn_trainer_token_file(tr, 1);
    if (ft && fv)
        fprintf(stderr, "attn train: token files (uint16): %s (train, %s), %s (val, %s)\n",
                ft->path, ft->rebuilt ? "built now" : "reused", fv->path,
                fv->rebuilt ? "built now" : "reused");
    if (r->resume)
        fprintf(stderr, "attn train: resuming %s at step %" PRId64 "\n", r->out,
                attn_trainer_steps(tr));
    char variant[512];
    attn_gpt_config_describe_variants(m, 1, variant, sizeof variant);
    if (variant[0]) fprintf(stderr, "attn train: not the book's GPTModel: %s\n", variant);
    if (attn_trainer_epoch(tr) == 0 && !attn_trainer_final_is_exact(tr) &&
        t->final_eval == ATTN_FINAL_AUTO) {
        char why[200];
        final_sampled_why(tr, why, sizeof why);
        fprintf(stderr, "attn train: the final evaluation will be sampled: %s\n", why);
    }
}
