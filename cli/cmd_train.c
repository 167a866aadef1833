/* attn train — train the char-level GPT on a text corpus (attn/train.h):
 * progress bar on a terminal, log lines otherwise, checkpoints, loss.csv and
 * loss.svg in the output directory, Ctrl-C saves and exits, --resume
 * continues bit for bit. Under mpirun every rank runs this; rank 0 alone
 * prints and writes (attn/dist.h). */
#define _DEFAULT_SOURCE /* TIOCGWINSZ, with sigaction, clock_gettime */

#include <cblas.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <omp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "attn/checkpoint.h"
#include "attn/checkpoint_info.h"
#include "attn/dist.h"
#include "attn/fileio.h"
#include "attn/flash_attention.h"
#include "attn/runlock.h"
#include "attn/train.h"
#include "clock.h"
#include "commands.h"
#include "threads.h"

static volatile sig_atomic_t g_interrupted = 0;

static void on_sigint(int sig) {
    (void)sig;
    g_interrupted = 1;
}

static void train_usage(FILE *out) {
    fprintf(out,
            "usage: attn train [--data FILE] [--preset NAME] [--config FILE] [--steps N]\n"
            "                  [--batch-size N] [--lr X] [--eval-interval N] [--eval-iters N]\n"
            "                  [--seed N] [--threads N] [--out DIR] [--checkpoint-interval N]\n"
            "                  [--log-interval N] [--grad-accum N] [--resume | --force]\n"
            "                  [--device cpu|cuda] [--precision fp32|bf16] [--dry-run]\n"
            "                  [--init-from CKPT]\n"
            "  Trains the char-level GPT (the book's GPTModel) on FILE (default\n"
            "  data/tinyshakespeare.txt): vocabulary = its sorted characters, first 90%%\n"
            "  trains, last 10%% validates. Presets: tiny (default), nanogpt-cpu,\n"
            "  shakespeare-char, seed004. --config FILE.json overrides model keys (book's or\n"
            "  seed 004's names) and training keys (batch_size, max_steps, learning_rate,\n"
            "  min_lr, warmup_steps, lr_decay_steps, beta1, beta2, eps, weight_decay,\n"
            "  grad_clip, eval_interval, eval_iters, log_interval, checkpoint_interval,\n"
            "  seed). --lr X sets the peak rate and min_lr = X/10.\n"
            "  Writes DIR/model.safetensors, DIR/train_state.safetensors, DIR/loss.csv and\n"
            "  DIR/loss.svg (DIR defaults to runs/<preset>), and in DIR/best/ the\n"
            "  checkpoint of the lowest val loss so far (attn generate --checkpoint\n"
            "  DIR/best samples from it); checkpoints at every eval,\n"
            "  every --checkpoint-interval steps, at the end and on Ctrl-C, SIGTERM or\n"
            "  SIGHUP; each checkpoint is committed whole (DIR/ckpt-<step>, DIR/latest).\n"
            "  --resume continues the run in DIR exactly where it stopped; with --steps N\n"
            "  it trains to step N instead (a finished run goes on): the LR schedule keeps\n"
            "  its old horizon, so steps past the old max_steps run at min_lr. A DIR that\n"
            "  already holds a checkpoint needs --resume or --force (start over, replacing\n"
            "  it at the first save). One run per DIR at a time (DIR/.lock).\n"
            "  --device cuda trains on the GPU (same checkpoint files; GPU dropout uses\n"
            "  Philox, so with dropout it differs from a CPU run of the same seed);\n"
            "  --precision bf16 runs the matrix products with bf16 operands and fp32\n"
            "  sums: on the GPU's tensor cores, or on the CPU with AVX512-BF16 (oneDNN);\n"
            "  weights, optimizer and checkpoints stay fp32 (default fp32).\n"
            "  --grad-accum N: N micro-batches of --batch-size per step, gradients averaged\n"
            "  (summed in a fixed order). Under `mpirun -np R` the N micro-batches (default\n"
            "  R; N a multiple of R) are split over the R ranks, bit for bit the same run\n"
            "  as one process with --grad-accum N; rank 0 prints and writes.\n"
            "  --init-from CKPT starts a new run (step 0, fresh AdamW) from the weights of\n"
            "  checkpoint CKPT (fine-tuning): the model's shape is CKPT's, the corpus must\n"
            "  have its vocabulary; the training recipe comes from the preset, --config\n"
            "  and the flags.\n"
            "  --dry-run prints the resolved config, parameter count, memory, checkpoint\n"
            "  size and a time estimate (matrix-product speed measured here), and exits.\n"
            "  Runs above 10^15 operations (seed004: hours) print that estimate first.\n"
            "  (testing) --interrupt-after N behaves as if Ctrl-C came after step N;\n"
            "  --kill-rank R --kill-after N: rank R kills itself (SIGKILL) after step N.\n");
}

static int parse_i64(const char *v, int64_t min, int64_t *out) {
    char *end;
    errno = 0;
    long long x = strtoll(v, &end, 10);
    if (errno || end == v || *end || x < min) return -1;
    *out = x;
    return 0;
}

/* mkdir -p */
static int make_dirs(const char *path) {
    char buf[4096];
    if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf) return -1;
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/') continue;
        *p = '\0';
        if (mkdir(buf, 0777) != 0 && errno != EEXIST) return -1;
        *p = '/';
    }
    if (mkdir(buf, 0777) != 0 && errno != EEXIST) return -1;
    struct stat sb;
    if (stat(buf, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
        errno = ENOTDIR;
        return -1;
    }
    return 0;
}

static void fmt_eta(double s, char *out, size_t n) {
    if (!isfinite(s) || s < 0) s = 0;
    long t = (long)(s + 0.5);
    if (t >= 3600)
        snprintf(out, n, "%ld:%02ld:%02ld", t / 3600, t / 60 % 60, t % 60);
    else
        snprintf(out, n, "%ld:%02ld", t / 60, t % 60);
}

/* Terminal width: the tty's (TIOCGWINSZ), else $COLUMNS, else 80. */
static int term_columns(void) {
    struct winsize ws;
    if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) return ws.ws_col;
    const char *c = getenv("COLUMNS");
    int n = c ? atoi(c) : 0;
    return n > 0 ? n : 80;
}

/* One progress line that never reaches the last column (no wrapping):
 * "[#####.....] step 40/2000 | loss 2.3456 | lr 2.0e-03 | 12345 tok/s |
 * 0:12<1:23" (elapsed<ETA), squeezed on narrow terminals: shorter
 * separators, then no bar, then fewer fields, then cut. */
static void progress(int cols, int64_t step, int64_t max, float loss, double lr, double tok_s,
                     double elapsed, double eta) {
    char f[5][64], el[24], e[24];
    fmt_eta(elapsed, el, sizeof el);
    fmt_eta(eta, e, sizeof e);
    snprintf(f[0], sizeof f[0], "step %" PRId64 "/%" PRId64, step, max);
    snprintf(f[1], sizeof f[1], "loss %.4f", (double)loss);
    snprintf(f[2], sizeof f[2], "%s<%s", el, e);
    snprintf(f[3], sizeof f[3], "%.0f tok/s", tok_s);
    snprintf(f[4], sizeof f[4], "lr %.1e", lr);
    const int order[5] = {0, 1, 4, 3, 2}; /* printed order; dropped from the end */
    const int room = cols - 1;
    char text[256];
    int nf = 5, len = 0;
    const char *sep = " | ";
    for (;;) {
        len = 0;
        text[0] = '\0';
        for (int i = 0; i < nf; i++)
            len +=
                snprintf(text + len, sizeof text - (size_t)len, "%s%s", i ? sep : "", f[order[i]]);
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
        int fill = (int)((double)step / (double)max * width);
        for (int i = 0; i < width; i++)
            bar[i] = i < fill ? '#' : '.';
        bar[width] = '\0';
        printf("\r[%s] %s\033[K", bar, text);
    } else {
        printf("\r%.*s\033[K", room > 0 ? room : 0, text);
    }
    fflush(stdout);
}

/* Seconds for the run's steps if it ran at the GEMM speed measured now on
 * ranks processes (0 when unknown): a rough figure, slower on a busy
 * machine. */
static double plan_seconds(const attn_train_plan *p, int64_t steps, int threads, int ranks,
                           double *gflops) {
    *gflops = attn_train_probe_gflops(threads > 0 ? threads : 0) * (ranks > 0 ? ranks : 1);
    return *gflops > 0 ? p->flops_per_step * (double)steps / (*gflops * 1e9) : 0;
}

static int print_plan(const attn_gpt_config *m, const attn_train_config *t, const char *preset,
                      const char *data, size_t n, const char *out, int threads, int ranks) {
    attn_train_plan p;
    attn_train_plan_of(m, t, &p);
    char *mj = NULL, *tj = attn_train_config_to_json(t);
    attn_error err;
    if (attn_gpt_config_to_json(m, &mj, &err) || !tj) {
        fprintf(stderr, "attn train: out of memory\n");
        free(tj);
        return 1;
    }
    double gflops, sec = plan_seconds(&p, t->max_steps, threads, ranks, &gflops);
    char eta[32];
    fmt_eta(sec, eta, sizeof eta);
    printf("attn train --dry-run: nothing is trained or written\n"
           "preset      %s\n"
           "model       %s\n"
           "training    %s\n"
           "corpus      %s (%zu bytes, vocabulary %d)\n"
           "output      %s\n"
           "parameters  %zu (%.2f M)\n"
           "memory      ~%.1f MiB: weights, gradients, AdamW moments %.1f MiB + activations "
           "~%.1f MiB\n"
           "checkpoint  %.1f MiB per save\n"
           "time        ~%s for %" PRId64 " steps (%.3g TFLOP at %.1f GFLOP/s, the speed of "
           "matrix products measured now)\n",
           preset ? preset : "saved config", mj, tj, data, n, m->vocab_size, out, p.n_params,
           (double)p.n_params / 1e6, (p.state_bytes + p.act_bytes) / 1048576.0,
           p.state_bytes / 1048576.0, p.act_bytes / 1048576.0, p.ckpt_bytes / 1048576.0, eta,
           t->max_steps, p.flops_per_step * (double)t->max_steps / 1e12, gflops);
    free(mj);
    free(tj);
    return 0;
}

/* Runs of seed004's size (over 10^15 floating-point operations, hours on
 * a laptop) say what they will cost before they start. */
static void warn_cost(const attn_gpt_config *m, const attn_train_config *t, int threads,
                      int ranks) {
    attn_train_plan p;
    attn_train_plan_of(m, t, &p);
    if (p.flops_per_step * (double)t->max_steps < 1e15) return;
    double gflops, sec = plan_seconds(&p, t->max_steps, threads, ranks, &gflops);
    char eta[32];
    fmt_eta(sec, eta, sizeof eta);
    fprintf(stderr,
            "attn train: warning: a large run: %.1f M parameters, ~%.2f GB of memory, %.0f MB per "
            "checkpoint, ~%s for %" PRId64 " steps here (%.1f GFLOP/s); Ctrl-C saves "
            "and stops, --resume continues, --dry-run shows the plan\n",
            (double)p.n_params / 1e6, (p.state_bytes + p.act_bytes) / 1e9, p.ckpt_bytes / 1e6, eta,
            t->max_steps, gflops);
}

/* Rank 0 alone writes, so it alone locks, checks and cleans DIR: 0 to go
 * on, else the exit code. */
static int claim_out_dir(const char *out, attn_run_lock *lock, int resume, int force) {
    attn_error err;
    char who[4200];
    snprintf(who, sizeof who, "attn train --out %s", out);
    if (attn_run_lock_acquire(lock, out, who, &err)) {
        fprintf(stderr, "attn train: %s; wait for it to finish or choose another --out\n", err.msg);
        return 1;
    }
    int64_t old_step;
    if (!resume && attn_ckpt_exists(out, &old_step)) {
        char at[64] = "";
        if (old_step >= 0) snprintf(at, sizeof at, " (step %" PRId64 ")", old_step);
        if (!force) {
            fprintf(stderr,
                    "attn train: %s already holds a checkpoint%s; continue it with --resume "
                    "or start over with --force\n",
                    out, at);
            return 2;
        }
        fprintf(stderr,
                "attn train: --force: starting over in %s; its checkpoint%s, loss.csv and "
                "loss.svg are replaced at the first save\n",
                out, at);
    }
    char best[4200];
    snprintf(best, sizeof best, "%s/%s", out, ATTN_CKPT_BEST);
    const char *dirs[2] = {out, best};
    for (int d = 0; d < 2; d++) {
        int removed = 0;
        if (d == 1 && access(best, F_OK) != 0) break;
        if (attn_ckpt_clean_stale(dirs[d], &removed, &err))
            fprintf(stderr, "attn train: warning: %s\n", err.msg);
        else if (removed)
            fprintf(stderr,
                    "attn train: removed %d stale temporary file(s) from an earlier run in "
                    "%s\n",
                    removed, dirs[d]);
    }
    return 0;
}

/* FNV-1a of this executable: ranks running different binaries are refused. */
static uint64_t exe_hash(void) {
    void *buf = NULL;
    size_t n = 0;
    uint64_t h = 0xcbf29ce484222325ull;
    if (attn_file_read_all("/proc/self/exe", 0, &buf, &n, NULL) == ATTN_OK)
        for (size_t i = 0; i < n; i++)
            h = (h ^ ((unsigned char *)buf)[i]) * 0x100000001b3ull;
    free(buf);
    return h;
}

/* Start-up check that all ranks agree (collective). */
static attn_status check_ranks(attn_dist *dist, const attn_trainer *tr, attn_error *err) {
    uint64_t cfg = 0, state = 0;
    attn_status s = attn_dist_check_same(dist, exe_hash(), "attn executable", err);
    if (s) return s;
    attn_trainer_fingerprint(tr, &cfg, &state);
    if ((s = attn_dist_check_same(dist, cfg, "configuration or corpus", err))) return s;
    return attn_dist_check_same(dist, state, "initial weights or training state", err);
}

/* What the command draws while the library trains (attn_trainer_events).
 * mpirun hands ranks a pseudo-terminal even when its output is a file: log
 * lines there (tty only for one process). */
typedef struct {
    int tty, lead, bar_shown, cols;
    double last_bar, t_start;
    int64_t interrupt_after, kill_rank, kill_after;
    cli_thread_tuner *tuner; /* NULL: the thread count is fixed */
} train_view;

static int should_stop(void *user, const attn_trainer *tr) {
    (void)user;
    (void)tr;
    return g_interrupted;
}

static void on_step(void *user, const attn_trainer *tr, const attn_train_progress *p) {
    train_view *v = user;
    const attn_dist *dist = tr->dist;
    const int64_t max = tr->tcfg.max_steps;
    if (v->kill_after > 0 && tr->step == v->kill_after && dist && dist->rank == v->kill_rank)
        raise(SIGKILL);
    if (v->interrupt_after > 0 && tr->step == v->interrupt_after) g_interrupted = 1;
    if (v->tuner) cli_tuner_step(v->tuner, tr->step, p->step_s);
    if (v->tty) {
        double t = attn_now_s();
        if (t - v->last_bar > 0.1 || tr->step == max) {
            progress(v->cols, tr->step, max, p->rec.loss, p->rec.lr, p->tokens_per_s,
                     t - v->t_start, p->eta_s);
            v->last_bar = t;
            v->bar_shown = 1;
        }
    } else if (v->lead && (p->rec.step - 1) % tr->tcfg.log_interval == 0) {
        printf("iter %" PRId64 ": loss %.4f, time %.2fms", p->rec.step - 1, (double)p->rec.loss,
               p->step_s * 1000);
        if (dist && dist->size > 1) printf(", mpi %.2fms", p->step_comm_s * 1000);
        printf("\n");
        fflush(stdout);
    }
}

static void on_eval(void *user, const attn_trainer *tr, const attn_eval_record *ev) {
    train_view *v = user;
    (void)tr;
    if (v->bar_shown) printf("\r\033[K");
    v->bar_shown = 0;
    if (v->lead)
        printf("step %" PRId64 ": train loss %.4f, val loss %.4f\n", ev->step,
               (double)ev->train_loss, (double)ev->val_loss);
    fflush(stdout);
}

/* The closing lines (rank 0). */
static void report_end(const attn_trainer *tr, const attn_train_result *res, const char *out) {
    const attn_dist *dist = tr->dist;
    if (res->stopped) {
        fprintf(stderr,
                "attn train: interrupted after step %" PRId64 "; checkpoint saved in %s "
                "(continue with: attn train --out %s --resume)\n",
                tr->step, out, out);
        return;
    }
    fprintf(stderr,
            "attn train: %" PRId64 " steps in %.1f s (%.0f tokens/s); final val loss %.4f; "
            "checkpoint in %s\n",
            tr->step - res->start_step, res->wall_s, res->tokens_per_s,
            tr->n_evals ? (double)tr->evals[tr->n_evals - 1].val_loss : NAN, out);
    if (dist && dist->size > 1 && tr->step > res->start_step) {
        const double k = (double)(tr->step - res->start_step);
        fprintf(stderr,
                "attn train: MPI: %d ranks; rank 0 spent %.2f ms per step in MPI (%.1f%% of "
                "the step) and moved %.3f MB per step\n",
                dist->size, res->comm_s / k * 1e3,
                res->train_s > 0 ? 100 * res->comm_s / res->train_s : 0,
                (double)res->comm_bytes / k / 1e6);
    }
}

static int train_run(int argc, char **argv, attn_dist *dist, attn_run_lock *lock, int *collective);

int cmd_train(int argc, char **argv) {
    attn_dist dist;
    attn_error err;
    attn_error_clear(&err);
    if (attn_dist_init(&dist, NULL, NULL, &err)) {
        fprintf(stderr, "attn train: %s\n", err.msg);
        return 1;
    }
    int collective = 0;
    attn_run_lock lock = {.fd = -1};
    int rc = train_run(argc, argv, &dist, &lock, &collective);
    attn_run_lock_release(&lock);
    if (rc != 0 && rc != 130 && dist.size > 1 && !collective) {
        /* The other ranks would wait for this one forever: end the job. */
        fprintf(stderr, "attn train: rank %d of %d failed (exit code %d); ending the job\n",
                dist.rank, dist.size, rc);
        fflush(stderr);
        attn_dist_abort(&dist, rc);
    }
    attn_dist_finalize(&dist);
    return rc;
}

/* The command line of attn train (-1: not given). */
typedef struct {
    const char *data, *preset, *config, *out, *init_from;
    int64_t steps, batch, eval_interval, eval_iters, seed, threads, ckpt_interval, log_interval,
        interrupt_after, grad_accum, kill_rank, kill_after;
    double lr;
    int resume, force, dry_run;
    attn_device device;
    attn_precision precision;
} train_args;

/* -1 when the run should go on, else the exit code (0 after --help). */
static int parse_args(int argc, char **argv, train_args *o) {
    const char *data = NULL, *preset = NULL, *config = NULL, *out = NULL, *init_from = NULL;
    int64_t steps = -1, batch = -1, eval_interval = -1, eval_iters = -1, seed = -1, threads = -1,
            ckpt_interval = -1, log_interval = -1, interrupt_after = -1, grad_accum = -1,
            kill_rank = -1, kill_after = -1;
    double lr = -1;
    int resume = 0, force = 0, dry_run = 0;
    attn_device device = ATTN_DEVICE_CPU;
    attn_precision precision = ATTN_PRECISION_FP32;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            train_usage(stdout);
            return 0;
        }
        if (strcmp(a, "--resume") == 0) {
            resume = 1;
            continue;
        }
        if (strcmp(a, "--force") == 0) {
            force = 1;
            continue;
        }
        if (strcmp(a, "--dry-run") == 0) {
            dry_run = 1;
            continue;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "attn train: unknown or incomplete option '%s'\n", a);
            train_usage(stderr);
            return 2;
        }
        const char *v = argv[++i];
        int bad = 0;
        if (strcmp(a, "--data") == 0)
            data = v;
        else if (strcmp(a, "--preset") == 0)
            preset = v;
        else if (strcmp(a, "--init-from") == 0)
            init_from = v;
        else if (strcmp(a, "--config") == 0)
            config = v;
        else if (strcmp(a, "--out") == 0)
            out = v;
        else if (strcmp(a, "--steps") == 0)
            bad = parse_i64(v, 1, &steps);
        else if (strcmp(a, "--batch-size") == 0)
            bad = parse_i64(v, 1, &batch);
        else if (strcmp(a, "--eval-interval") == 0)
            bad = parse_i64(v, 1, &eval_interval);
        else if (strcmp(a, "--eval-iters") == 0)
            bad = parse_i64(v, 1, &eval_iters);
        else if (strcmp(a, "--seed") == 0)
            bad = parse_i64(v, 0, &seed);
        else if (strcmp(a, "--threads") == 0)
            bad = parse_i64(v, 1, &threads);
        else if (strcmp(a, "--checkpoint-interval") == 0)
            bad = parse_i64(v, 0, &ckpt_interval);
        else if (strcmp(a, "--log-interval") == 0)
            bad = parse_i64(v, 1, &log_interval);
        else if (strcmp(a, "--interrupt-after") == 0)
            bad = parse_i64(v, 1, &interrupt_after);
        else if (strcmp(a, "--grad-accum") == 0)
            bad = parse_i64(v, 1, &grad_accum);
        else if (strcmp(a, "--kill-rank") == 0)
            bad = parse_i64(v, 0, &kill_rank);
        else if (strcmp(a, "--kill-after") == 0)
            bad = parse_i64(v, 1, &kill_after);
        else if (strcmp(a, "--device") == 0 || strcmp(a, "--precision") == 0) {
            attn_error perr;
            attn_status ps = a[2] == 'd' ? attn_device_parse(v, &device, &perr)
                                         : attn_precision_parse(v, &precision, &perr);
            if (ps) {
                fprintf(stderr, "attn train: %s: %s\n", a, perr.msg);
                return 2;
            }
        } else if (strcmp(a, "--lr") == 0) {
            char *end;
            lr = strtod(v, &end);
            bad = *end || end == v || !(lr > 0) || !isfinite(lr);
        } else {
            fprintf(stderr, "attn train: unknown option '%s'\n", a);
            train_usage(stderr);
            return 2;
        }
        if (bad) {
            if (strcmp(a, "--batch-size") == 0 || strcmp(a, "--grad-accum") == 0)
                fprintf(stderr, "attn train: %s must be a positive integer, not '%s'\n", a, v);
            else
                fprintf(stderr, "attn train: bad value '%s' for %s\n", v, a);
            return 2;
        }
    }
    *o = (train_args){
        data,         preset,          config,     out,       init_from,  steps,
        batch,        eval_interval,   eval_iters, seed,      threads,    ckpt_interval,
        log_interval, interrupt_after, grad_accum, kill_rank, kill_after, lr,
        resume,       force,           dry_run,    device,    precision};
    return -1;
}

static int train_run(int argc, char **argv, attn_dist *dist, attn_run_lock *lock, int *collective) {
    train_args A;
    int prc = parse_args(argc, argv, &A);
    if (prc >= 0) return prc;
    const char *data = A.data, *preset = A.preset, *config = A.config, *out = A.out,
               *init_from = A.init_from;
    const int64_t steps = A.steps, batch = A.batch, eval_interval = A.eval_interval,
                  eval_iters = A.eval_iters, seed = A.seed, threads = A.threads,
                  ckpt_interval = A.ckpt_interval, log_interval = A.log_interval,
                  interrupt_after = A.interrupt_after, grad_accum = A.grad_accum,
                  kill_rank = A.kill_rank, kill_after = A.kill_after;
    const int lead = dist->rank == 0, resume = A.resume, force = A.force, dry_run = A.dry_run;
    const double lr = A.lr;
    const attn_device device = A.device;
    const attn_precision precision = A.precision;
    /* One thread pool (attn/gemm.h): OpenMP threads, each calling a
     * single-threaded OpenBLAS. --threads N sets the OpenMP count, also
     * through OMP_NUM_THREADS, which attn_default_threads() reads. */
    cli_use_threads((int)threads, 1);

    /* Configuration: preset, then the config file, then flags. */
    attn_error err;
    attn_error_clear(&err);
    attn_gpt_config mcfg;
    attn_train_config tcfg;
    int vocab_given = 0;
    char outbuf[4096];
    char saved_data[4096] = ""; /* the corpus a resumed run recorded */
    char *recorded = NULL;
    if (resume && init_from) {
        fprintf(stderr, "attn train: --init-from starts a new run from trained weights and "
                        "--resume continues one: give one of them\n");
        return 2;
    }
    if (resume && force) {
        fprintf(stderr, "attn train: --resume continues a run and --force replaces it: "
                        "give one of them\n");
        return 2;
    }
    if (resume && !out) {
        fprintf(stderr, "attn train: --resume needs --out DIR (the run to continue)\n");
        return 2;
    }
    const int fresh_base = !resume || preset || config;
    if (!fresh_base) {
        /* Continue from exactly the saved configuration; flags given with
         * --resume must agree with it (checked by attn_trainer_resume). */
        if (attn_trainer_read_config(out, &mcfg, &tcfg, &recorded, &err)) {
            fprintf(stderr, "attn train: cannot resume: %s\n", err.msg);
            return 1;
        }
        if (recorded && strlen(recorded) < sizeof saved_data) strcpy(saved_data, recorded);
        free(recorded);
    } else {
        if (!preset) preset = "tiny";
        if (attn_train_preset(preset, &mcfg, &tcfg, &err)) {
            fprintf(stderr, "attn train: %s\n", err.msg);
            return 2;
        }
        if (init_from) {
            /* The model's shape comes from the checkpoint; the recipe from
             * the preset, the config file and the flags. */
            attn_checkpoint_info info;
            if (attn_checkpoint_info_read(init_from, &info, &err)) {
                fprintf(stderr, "attn train: --init-from: %s\n", err.msg);
                return 1;
            }
            mcfg = info.model;
            attn_checkpoint_info_free(&info);
        }
        if (config) {
            char *text = NULL;
            size_t n = 0;
            if (attn_file_read_all(config, 1 << 20, (void **)&text, &n, &err)) {
                fprintf(stderr, "attn train: %s\n", err.msg);
                return 1; /* a file that cannot be read: runtime, as everywhere */
            }
            attn_status s =
                attn_train_config_apply_json(&mcfg, &tcfg, text, config, &vocab_given, &err);
            free(text);
            if (s) {
                fprintf(stderr, "attn train: %s\n", err.msg);
                return 2;
            }
        }
    }
    if (steps > 0 && resume) {
        /* Longer or shorter than the saved run: its LR horizon stays. */
        attn_gpt_config smc;
        attn_train_config sv = tcfg;
        if (fresh_base && attn_trainer_read_config(out, &smc, &sv, NULL, &err)) {
            fprintf(stderr, "attn train: cannot resume: %s\n", err.msg);
            return 1;
        }
        attn_train_config_extend(&tcfg, &sv, steps);
    } else if (steps > 0) {
        tcfg.max_steps = steps;
    }
    if (batch > 0) tcfg.batch_size = (int)batch;
    if (lr > 0) {
        tcfg.learning_rate = lr;
        tcfg.min_lr = lr / 10;
    }
    if (eval_interval > 0) tcfg.eval_interval = eval_interval;
    if (eval_iters > 0) tcfg.eval_iters = (int)eval_iters;
    if (seed >= 0) tcfg.seed = (uint64_t)seed;
    if (ckpt_interval >= 0) tcfg.checkpoint_interval = ckpt_interval;
    if (log_interval > 0) tcfg.log_interval = log_interval;
    if (grad_accum > 0)
        tcfg.grad_accum = (int)grad_accum;
    else if (fresh_base && dist->size > 1)
        tcfg.grad_accum = dist->size; /* one micro-batch per rank */
    /* The corpus decides vocab_size unless a config file set it. */
    if (!vocab_given) mcfg.vocab_size = 1;
    if (attn_gpt_config_validate(&mcfg, &err) || attn_train_config_validate(&tcfg, &err)) {
        fprintf(stderr, "attn train: %s\n", err.msg);
        return 2;
    }
    if (!out) {
        snprintf(outbuf, sizeof outbuf, "runs/%s", preset ? preset : "tiny");
        out = outbuf;
    }

    /* Corpus: --data, else the one a resumed run recorded, else the default. */
    if (!data) data = saved_data[0] ? saved_data : "data/tinyshakespeare.txt";
    char *text = NULL;
    size_t n = 0;
    if (attn_file_read_all(data, 0, (void **)&text, &n, &err)) {
        fprintf(stderr, "attn train: cannot read the corpus: %s\n", err.msg);
        return 1;
    }
    if (n == 0) {
        fprintf(stderr, "attn train: the corpus %s is empty\n", data);
        free(text);
        return 1;
    }
    if (dry_run || lead) {
        attn_tokenizer tok;
        attn_gpt_config pm = mcfg;
        if (!vocab_given && attn_tokenizer_train(&tok, text, n, &err) == ATTN_OK) {
            pm.vocab_size = tok.vocab_size;
            attn_tokenizer_free(&tok);
        }
        if (dry_run) {
            int rc =
                !lead ? 0 : print_plan(&pm, &tcfg, preset, data, n, out, (int)threads, dist->size);
            free(text);
            *collective = 1;
            return rc;
        }
        warn_cost(&pm, &tcfg, (int)threads, dist->size);
    }
    /* Output directory: create, lock and check it before spending time. Rank
     * 0 alone writes, so it alone locks and cleans. */
    if (make_dirs(out) != 0 || access(out, W_OK | X_OK) != 0) {
        fprintf(stderr, "attn train: cannot write to the output directory %s: %s\n", out,
                strerror(errno));
        free(text);
        return 1;
    }
    int claim = lead ? claim_out_dir(out, lock, resume, force) : 0;
    if (claim != 0) {
        free(text);
        return claim;
    }
    attn_trainer tr;
    attn_status s = attn_trainer_init(&tr, &mcfg, &tcfg, vocab_given, text, n, &err);
    free(text);
    if (s) {
        fprintf(stderr, "attn train: %s: %s\n", data, err.msg);
        return 1;
    }
    if (attn_trainer_set_dist(&tr, dist, &err)) {
        if (lead) fprintf(stderr, "attn train: %s\n", err.msg);
        attn_trainer_free(&tr);
        *collective = 1; /* every rank sees the same config */
        return 2;
    }
    /* loss.csv/svg are written after each checkpoint: a run stopped in
     * between left them a step behind, so redo them from the checkpoint. */
    if (resume && (attn_trainer_resume(&tr, out, &err) ||
                   (lead && attn_trainer_write_loss_files(&tr, out, &err)))) {
        fprintf(stderr, "attn train: %s\n", err.msg);
        attn_trainer_free(&tr);
        return 1;
    }
    if (init_from && attn_trainer_init_from(&tr, init_from, &err)) {
        fprintf(stderr, "attn train: --init-from %s\n", err.msg);
        attn_trainer_free(&tr);
        return 1;
    }
    if (init_from && lead)
        fprintf(stderr, "attn train: starting from the weights of %s (fine-tuning)\n", init_from);
    if (device != ATTN_DEVICE_CPU && (tr.tcfg.grad_accum > 1 || dist->size > 1)) {
        if (lead)
            fprintf(stderr,
                    "attn train: --device %s does not combine with --grad-accum or "
                    "mpirun yet (they run on --device cpu)\n",
                    attn_device_name(device));
        attn_trainer_free(&tr);
        *collective = 1;
        return 2;
    }
    if (device != ATTN_DEVICE_CPU || precision != ATTN_PRECISION_FP32) {
        if (attn_trainer_set_device(&tr, device, precision, &err)) {
            fprintf(stderr, "attn train: --device %s: %s\n", attn_device_name(device), err.msg);
            attn_trainer_free(&tr);
            return device != ATTN_DEVICE_CPU ? 1 : 2;
        }
        fprintf(stderr, "attn train: on %s, %s\n", attn_device_name(device),
                attn_precision_name(precision));
    }
    tr.corpus_path = data;
    if (dist->size > 1 && check_ranks(dist, &tr, &err)) {
        if (lead) fprintf(stderr, "attn train: refusing to start: %s\n", err.msg);
        attn_trainer_free(&tr);
        *collective = 1;
        return 1;
    }
    const attn_train_config *c = &tr.tcfg;
    const int accum = c->grad_accum > 1 ? c->grad_accum : 1;
    if (lead && accum > 1)
        fprintf(stderr, "attn train: %d micro-batches per step over %d rank%s\n", accum, dist->size,
                dist->size > 1 ? "s" : "");
    if (lead)
        fprintf(stderr,
                "attn train: %s, %zu parameters (vocab %d, ctx %d, emb %d, %d heads, %d layers); "
                "%zu train / %zu val tokens; batch %d, %" PRId64 " steps\n",
                preset ? preset : "saved config", attn_gpt_num_params(&tr.model),
                tr.mcfg.vocab_size, tr.mcfg.context_length, tr.mcfg.emb_dim, tr.mcfg.n_heads,
                tr.mcfg.n_layers, tr.train.n_ids, tr.val.n_ids, c->batch_size, c->max_steps);
    if (resume && lead)
        fprintf(stderr, "attn train: resuming %s at step %" PRId64 "\n", out, tr.step);

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint;
    sa.sa_flags = SA_RESETHAND; /* a second Ctrl-C stops at once */
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL); /* the terminal closed: save like Ctrl-C */

    train_view view = {.tty = lead && dist->size == 1 && isatty(STDOUT_FILENO),
                       .lead = lead,
                       .cols = term_columns(),
                       .t_start = attn_now_s(),
                       .interrupt_after = interrupt_after,
                       .kill_rank = kill_rank,
                       .kill_after = kill_after};
    /* No --threads and no OMP_NUM_THREADS: the count adapts (threads.h), on
     * the fp32 CPU path of one process, whose results do not depend on it. */
    cli_thread_tuner tuner;
    if (threads <= 0 && !getenv("OMP_NUM_THREADS") && dist->size == 1 &&
        device == ATTN_DEVICE_CPU && precision == ATTN_PRECISION_FP32 &&
        attn_default_threads() >= 2) {
        cli_tuner_init(&tuner, attn_default_threads());
        view.tuner = &tuner;
    }
    attn_trainer_events events = {
        .user = &view, .should_stop = should_stop, .on_step = on_step, .on_eval = on_eval};
    attn_train_result res;
    s = attn_trainer_run(&tr, out, resume, &events, &res, &err);
    if (view.bar_shown) printf("\n");
    if (s) {
        fprintf(stderr, "attn train: %s\n", err.msg);
        attn_trainer_free(&tr);
        return 1;
    }
    if (lead && view.tuner && tuner.steps_one > 0)
        fprintf(stderr,
                "attn train: adaptive threads: %" PRId64 " steps on 1 thread, the rest on %d\n",
                tuner.steps_one, tuner.max);
    if (lead) report_end(&tr, &res, out);
    attn_trainer_free(&tr);
    return res.stopped ? 130 : 0;
}
