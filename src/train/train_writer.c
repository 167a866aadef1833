/* attn_trainer_run's checkpoint writer: one thread, one save at a time
 * (see train_writer.h). */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */

#include "train_writer.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "attn/checkpoint.h"
#include "attn/fileio.h"
#include "base/clock.h"
#include "train_book.h"
#include "train_device.h"
#include "trainer.h"

typedef enum { JOB_NONE, JOB_QUEUED, JOB_DONE } job_phase;

enum { OUTCOME_PENDING = -1 };

/* A trainer as a save reads it: a shallow copy of the trainer whose history
 * and book position are copies (the trainer appends to the one and moves
 * the other), with no GPU, ranks or events (the trainer synced its weights
 * to the host before). The weights, moments, tokenizer, parameter table
 * and configs are the trainer's: unchanged until the save is written. */
typedef struct train_view {
    attn_trainer tr;
    attn_book_order book;
} train_view;

typedef struct train_job {
    char out[ATTN_CKPT_PATH_MAX];
    int what;                 /* TW_* */
    int gated;                /* an evaluation of its step runs meanwhile */
    int outcome;              /* gated: OUTCOME_PENDING until settled */
    int best;                 /* save best/ too (known at submit, or at settle) */
    int again;                /* settled: write the training state from `settled` */
    train_view view, settled; /* when asked for; after the evaluation */
} train_job;

typedef struct train_writer {
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int quit;
    job_phase phase;
    train_job job;
    attn_status status; /* the first failure, kept */
    attn_error err;
    double last_s, wait_s;
} train_writer;

/* ------------------------------------------------------------- views */

static void view_free(train_view *v) {
    free(v->tr.hist);
    free(v->tr.evals);
    v->tr.hist = NULL;
    v->tr.evals = NULL;
}

static attn_status view_take(train_view *v, const attn_trainer *tr, attn_error *err) {
    v->tr = *tr;
    attn_trainer *t = &v->tr;
    t->gpu = NULL;
    t->dist = NULL;
    t->ev = NULL;
    t->writer = NULL;
    if (tr->book) {
        v->book = *tr->book;
        t->book = &v->book;
    }
    t->hist = malloc((tr->n_hist + 1) * sizeof *t->hist);
    t->evals = malloc((tr->n_evals + 1) * sizeof *t->evals);
    if (!t->hist || !t->evals) {
        view_free(v);
        return attn_fail(err, ATTN_ERR_NOMEM, "out of memory saving a checkpoint");
    }
    if (tr->n_hist) memcpy(t->hist, tr->hist, tr->n_hist * sizeof *t->hist);
    if (tr->n_evals) memcpy(t->evals, tr->evals, tr->n_evals * sizeof *t->evals);
    t->cap_hist = tr->n_hist;
    t->cap_evals = tr->n_evals;
    return ATTN_OK;
}

/* ------------------------------------------------------------ the thread */

/* The gated save's wait for its evaluation (attn_trainer_save_gate). */
static const attn_trainer *gate(void *user, int *abort) {
    train_writer *w = user;
    pthread_mutex_lock(&w->mu);
    while (w->job.outcome == OUTCOME_PENDING)
        pthread_cond_wait(&w->cv, &w->mu);
    const int outcome = w->job.outcome, again = w->job.again;
    pthread_mutex_unlock(&w->mu);
    *abort = outcome == TW_FAILED;
    return again ? &w->job.settled.tr : NULL;
}

static attn_status run_job(train_writer *w, attn_error *err) {
    train_job *j = &w->job;
    attn_status s = ATTN_OK;
    if (j->what & TW_CKPT)
        s = attn_trainer_save_gated(&j->view.tr, j->out, j->gated ? gate : NULL, w, err);
    if (s || (j->gated && j->outcome == TW_FAILED)) return s;
    /* Settled by now (the gate waited): the files after the evaluation. */
    const attn_trainer *now = j->again ? &j->settled.tr : &j->view.tr;
    if (j->what & TW_LOSS) s = attn_trainer_write_loss_files(now, j->out, err);
    if (!s && j->best) {
        char best[ATTN_CKPT_PATH_MAX];
        if (attn_path_join(best, sizeof best, j->out, ATTN_CKPT_BEST))
            return attn_fail(err, ATTN_ERR_IO, "output directory path is too long");
        if (mkdir(best, 0777) != 0 && errno != EEXIST)
            return attn_fail(err, ATTN_ERR_IO, "cannot create %s: %s", best, strerror(errno));
        s = attn_trainer_save_best(now, best, j->out, err);
    }
    return s;
}

static void *writer_main(void *arg) {
    train_writer *w = arg;
    pthread_mutex_lock(&w->mu);
    for (;;) {
        while (!w->quit && w->phase != JOB_QUEUED)
            pthread_cond_wait(&w->cv, &w->mu);
        if (w->phase != JOB_QUEUED) break;
        pthread_mutex_unlock(&w->mu);
        attn_error e;
        attn_error_clear(&e);
        const double t0 = attn_now_s();
        const attn_status s = run_job(w, &e);
        pthread_mutex_lock(&w->mu);
        w->last_s = attn_now_s() - t0;
        if (s && !w->status) {
            w->status = s;
            w->err = e;
        }
        view_free(&w->job.view);
        view_free(&w->job.settled);
        w->phase = JOB_DONE;
        pthread_cond_broadcast(&w->cv);
    }
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

/* ------------------------------------------------------- the trainer's */

/* Wait (w->mu held) until no save is in progress; the seconds waited. */
static double wait_done(train_writer *w) {
    const double t0 = attn_now_s();
    while (w->phase == JOB_QUEUED)
        pthread_cond_wait(&w->cv, &w->mu);
    return attn_now_s() - t0;
}

static attn_status failed(train_writer *w, attn_error *err) {
    if (w->status && err) *err = w->err;
    return w->status;
}

static attn_status writer_open(attn_trainer *tr, attn_error *err) {
    train_writer *w = calloc(1, sizeof *w);
    if (!w) return attn_fail(err, ATTN_ERR_NOMEM, "out of memory for the checkpoint writer");
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->cv, NULL);
    /* The thread (and the threads it starts) takes no asynchronous signal:
     * a Ctrl-C's handler runs on the trainer's thread, and no write or sync
     * of the checkpoint is interrupted by it (EINTR). Faults stay open. */
    sigset_t block, old;
    sigfillset(&block);
    static const int faults[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGABRT};
    for (size_t i = 0; i < sizeof faults / sizeof faults[0]; i++)
        sigdelset(&block, faults[i]);
    pthread_sigmask(SIG_BLOCK, &block, &old);
    const int started = pthread_create(&w->thread, NULL, writer_main, w) == 0;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (!started) {
        pthread_cond_destroy(&w->cv);
        pthread_mutex_destroy(&w->mu);
        free(w);
        return attn_fail(err, ATTN_ERR_NOMEM, "cannot start the checkpoint writer's thread");
    }
    tr->writer = w;
    return ATTN_OK;
}

attn_status train_writer_submit(attn_trainer *tr, const char *out, int what, int gated,
                                attn_error *err) {
    if (strlen(out) >= ATTN_CKPT_PATH_MAX)
        return attn_fail(err, ATTN_ERR_IO, "output directory path is too long");
    attn_status s = tr->writer ? ATTN_OK : writer_open(tr, err);
    if (s) return s;
    train_writer *w = tr->writer;
    pthread_mutex_lock(&w->mu);
    w->wait_s += wait_done(w);
    s = failed(w, err);
    train_job *j = &w->job;
    /* The weights to the host first (a GPU run's), as attn_trainer_save. */
    if (!s && tr->gpu) s = attn_trainer_device_sync(tr, err);
    if (!s) s = view_take(&j->view, tr, err);
    if (!s) {
        snprintf(j->out, sizeof j->out, "%s", out);
        j->what = what & (TW_CKPT | TW_LOSS);
        j->best = (what & TW_BEST) != 0;
        j->gated = gated && (what & TW_CKPT);
        j->outcome = j->gated ? OUTCOME_PENDING : TW_COMPLETED;
        j->again = 0;
        w->phase = JOB_QUEUED;
        pthread_cond_broadcast(&w->cv);
    }
    pthread_mutex_unlock(&w->mu);
    return s;
}

void train_writer_settle(attn_trainer *tr, train_writer_outcome outcome, int best) {
    train_writer *w = tr->writer;
    if (!w) return;
    pthread_mutex_lock(&w->mu);
    train_job *j = &w->job;
    if (w->phase == JOB_QUEUED && j->outcome == OUTCOME_PENDING) {
        /* Taken again where the file would differ: a record, a clock. A view
         * that cannot be taken (out of memory) gives the save up: the run fails. */
        const int again =
            outcome == TW_COMPLETED || (outcome == TW_STOPPED && tr->tcfg.time_budget > 0);
        attn_error e;
        const attn_status took = again ? view_take(&j->settled, tr, &e) : ATTN_OK;
        if (took && !w->status) { /* the run's failure, at its next call */
            w->status = took;
            w->err = e;
        }
        j->again = again && !took;
        j->best = outcome == TW_COMPLETED && best;
        j->outcome = took ? TW_FAILED : (int)outcome;
        pthread_cond_broadcast(&w->cv);
    }
    pthread_mutex_unlock(&w->mu);
}

attn_status train_writer_release(attn_trainer *tr, attn_error *err) {
    train_writer *w = tr->writer;
    if (!w) return ATTN_OK;
    pthread_mutex_lock(&w->mu);
    w->wait_s += wait_done(w);
    const attn_status s = failed(w, err);
    pthread_mutex_unlock(&w->mu);
    return s;
}

attn_status train_writer_close(attn_trainer *tr, attn_error *err) {
    train_writer *w = tr->writer;
    if (!w) return ATTN_OK;
    train_writer_settle(tr, TW_FAILED, 0);
    pthread_mutex_lock(&w->mu);
    w->wait_s += wait_done(w);
    w->quit = 1;
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
    pthread_join(w->thread, NULL);
    const attn_status s = failed(w, err);
    pthread_cond_destroy(&w->cv);
    pthread_mutex_destroy(&w->mu);
    free(w);
    tr->writer = NULL;
    return s;
}

double train_writer_wait_s(const attn_trainer *tr) {
    return tr->writer ? tr->writer->wait_s : 0;
}

double train_writer_last_s(const attn_trainer *tr) {
    train_writer *w = tr->writer;
    if (!w) return 0;
    pthread_mutex_lock(&w->mu);
    const double s = w->last_s;
    pthread_mutex_unlock(&w->mu);
    return s;
}
