/* The training loop's rhythm: steps, evaluations, checkpoints, stop
 * requests (see attn_trainer_run in attn/train.h). */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */

#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "attn/train.h"
#include "base/clock.h"
#include "train_writer.h"
#include "trainer.h"

/* Whether the last evaluation, at step > 0, beats every earlier one on val
 * loss. The runs with exact evaluations compare exact losses; the others
 * the sampled estimates (the final exact loss of such a run is not compared
 * with them). */
static int is_best(const attn_trainer *tr) {
    if (tr->n_evals == 0) return 0;
    const int exact = tr->tcfg.eval_mode == ATTN_EVAL_EXACT;
    const attn_eval_record *now = &tr->evals[tr->n_evals - 1];
    const float v = exact ? now->val_exact : now->val_loss;
    if (now->step == 0 || !isfinite(v)) return 0;
    for (size_t i = 0; i + 1 < tr->n_evals; i++) {
        const float w = exact ? tr->evals[i].val_exact : tr->evals[i].val_loss;
        if (tr->evals[i].step > 0 && !isnan(w) && !(v < w)) return 0;
    }
    return 1;
}

/* time_budget's bookkeeping: the run's clock and what the end must keep for
 * its final evaluation and checkpoint. */
typedef struct budget_clock {
    double t0, elapsed0;     /* attn_now_s() at the start; tr->elapsed_s then */
    double fwd_token_s;      /* seconds per token of an eval forward (0 = not measured) */
    double exact_s;          /* the last exact evaluation's seconds (0 = none yet) */
    double save_s, step_s;   /* the last save's seconds (written), the last step's */
    double evals_s, saves_s; /* all the run's evaluations', saves' (the summary: the time
                                the run waited on its saves) */
    double full_at;          /* attn_now_s() at the last full checkpoint's start */
    int fulls;               /* full checkpoints submitted */
} budget_clock;

static double clock_now(const budget_clock *k) {
    return k->elapsed0 + (attn_now_s() - k->t0);
}

/* Seconds the final evaluation will take: the last exact one's, else its
 * tokens at the measured forward speed (an eval's, else a step's third),
 * with a quarter to spare. */
static double final_eval_s(const attn_trainer *tr, const budget_clock *k) {
    if (k->exact_s > 0) return 1.25 * k->exact_s;
    const double B = tr->tcfg.batch_size, T = tr->mcfg.context_length;
    const double windows =
        attn_trainer_final_is_exact(tr) ? ceil((double)(tr->val.n_ids - 1) / T) : 0;
    const double tokens = ceil(windows / B) * B * T + 2.0 * tr->tcfg.eval_iters * B * T;
    const double per = k->fwd_token_s > 0 ? k->fwd_token_s : k->step_s / (3 * B * T);
    return 1.25 * per * tokens;
}

/* An evaluation (final: attn_trainer_evaluate_final), timed for the clock.
 * One a stop abandoned fails with tr->eval_stopped set. */
static attn_status timed_eval(attn_trainer *tr, int final, budget_clock *k, attn_eval_record *er,
                              attn_error *err) {
    const double t = attn_now_s();
    attn_status s =
        final ? attn_trainer_evaluate_final(tr, er, err) : attn_trainer_evaluate(tr, er, err);
    const double dt = attn_now_s() - t;
    k->evals_s += dt;
    if (!s && !isnan(er->val_exact)) k->exact_s = dt;
    if (!s && isnan(er->val_exact)) {
        const double tokens =
            2.0 * tr->tcfg.eval_iters * tr->tcfg.batch_size * tr->mcfg.context_length;
        k->fwd_token_s = dt / tokens;
    }
    return s;
}

/* Save tr as it stands into out (train_writer.h: what, gated), on the
 * clock; rank 0 writes, out NULL: nothing. */
static attn_status submit(attn_trainer *tr, const char *out, int what, int gated, budget_clock *k,
                          attn_error *err) {
    tr->elapsed_s = clock_now(k);
    if (!out || (tr->dist && tr->dist->rank != 0)) return ATTN_OK;
    const double t = attn_now_s();
    if (what & TW_CKPT) {
        k->full_at = t;
        k->fulls++;
    }
    attn_status s = train_writer_submit(tr, out, what, gated, err);
    k->saves_s += attn_now_s() - t;
    const double last = train_writer_last_s(tr);
    if (last > 0) k->save_s = last;
    return s;
}

/* An evaluation (final: attn_trainer_evaluate_final), reported (on_eval). */
static attn_status eval_report(attn_trainer *tr, int final, budget_clock *k,
                               const attn_trainer_events *ev, attn_error *err) {
    attn_eval_record er;
    attn_status s = timed_eval(tr, final, k, &er, err);
    if (s) return s;
    if (ev->on_eval) ev->on_eval(ev->user, tr, &er);
    return ATTN_OK;
}

/* time_budget: 1 when the run must stop now, while the final evaluation
 * and checkpoint still fit (the ranks agree: their clocks differ); else the
 * LR follows the share of the budget the steps have. */
static int budget_spent(attn_trainer *tr, const budget_clock *k) {
    const double budget = tr->tcfg.time_budget;
    /* keep: the final evaluation, then up to two saves (best/ and the
     * checkpoint). */
    const double now = clock_now(k), keep = final_eval_s(tr, k) + 2 * k->save_s;
    if (attn_dist_any(tr->dist, now + keep + k->step_s >= budget)) return 1;
    /* Never back (keep's estimate moves): the LR only goes down. */
    const double room = budget - keep, prog = room > 0 ? now / room : 1;
    tr->progress = prog > tr->progress ? (prog < 1 ? prog : 1) : tr->progress;
    tr->elapsed_s = now;
    return 0;
}

/* One step, timed into res and reported (on_step). */
static attn_status timed_step(attn_trainer *tr, const attn_trainer_events *ev, budget_clock *k,
                              attn_train_result *res, double tokens_per_step, attn_error *err) {
    const attn_train_config *c = &tr->tcfg;
    attn_dist *dist = tr->dist;
    const double t0 = attn_now_s(), c0 = dist ? dist->comm_s : 0, w0 = train_writer_wait_s(tr);
    const uint64_t b0 = dist ? dist->sent_bytes + dist->recv_bytes : 0;
    attn_train_progress p = {.start_step = res->start_step};
    attn_status s = attn_trainer_step(tr, &p.rec, err);
    if (s) return s;
    /* A wait for a checkpoint's write (its update waits: train_writer.h) is
     * the save's time, not the step's. */
    const double waited = train_writer_wait_s(tr) - w0;
    k->saves_s += waited;
    p.step_s = attn_now_s() - t0 - waited;
    k->step_s = p.step_s;
    if (dist) {
        p.step_comm_s = dist->comm_s - c0;
        res->comm_bytes += dist->sent_bytes + dist->recv_bytes - b0;
    }
    res->comm_s += p.step_comm_s;
    res->train_s += p.step_s;
    const double done = (double)(tr->step - res->start_step);
    p.train_s = res->train_s;
    p.tokens_per_s = done * tokens_per_step / res->train_s;
    p.eta_s = (double)(c->max_steps - tr->step) * res->train_s / done;
    if (c->time_budget > 0) {
        const double left = c->time_budget - clock_now(k);
        p.eta_s = left < p.eta_s ? (left > 0 ? left : 0) : p.eta_s;
    }
    if (ev->on_step) ev->on_step(ev->user, tr, &p);
    return ATTN_OK;
}

/* Whether the current step (> 0) has an evaluation: every eval_interval
 * steps and the last; the book's after global step 0, eval_interval, ... */
static int eval_step(const attn_trainer *tr) {
    const attn_train_config *c = &tr->tcfg;
    return tr->book ? (tr->step - 1) % c->eval_interval == 0
                    : tr->step % c->eval_interval == 0 || tr->step == c->max_steps;
}

/* Whether the run must evaluate before its next step: a fresh run's first
 * evaluation (not in the book's order), or the one of the checkpoint's step
 * that a stop abandoned (its record is missing). */
static int eval_due(const attn_trainer *tr) {
    if (tr->n_evals && tr->evals[tr->n_evals - 1].step == tr->step) return 0;
    return tr->step == 0 ? !tr->book : eval_step(tr);
}

/* The evaluation of a checkpoint's step has ended (the save waits for it:
 * train_writer_settle): stopped, failed, or with its record (and best/ when
 * it beats the earlier ones). A stop is not the run's failure. */
static attn_status settle(attn_trainer *tr, attn_status s) {
    if (s && tr->eval_stopped) {
        train_writer_settle(tr, TW_STOPPED, 0);
        return ATTN_OK;
    }
    train_writer_settle(tr, s ? TW_FAILED : TW_COMPLETED, !s && is_best(tr));
    return s;
}

/* Whether step's state is saved whole: at the last step, every
 * checkpoint_interval steps, and without an interval at an evaluation when
 * the last full save is ATTN_TRAIN_CKPT_AUTO_S old (a kill -9 loses at most
 * that much work, and a short run writes AdamW's state only at its ends). */
static int full_save_due(const attn_trainer *tr, const budget_clock *k, int did_eval) {
    const attn_train_config *c = &tr->tcfg;
    if (tr->step == c->max_steps) return 1;
    if (c->checkpoint_interval > 0) return tr->step % c->checkpoint_interval == 0;
    return did_eval && attn_now_s() - k->full_at >= tr->ckpt_auto_s;
}

/* After a step: the checkpoint full_save_due asks for (*saved: one was), started now, so it is
 * written while the step's evaluation runs (every eval_interval steps and at the last); that
 * evaluation's record goes into it when it ends. An evaluation without a
 * checkpoint writes the loss files, and best/ when its val loss is the
 * lowest. An evaluation a stop abandoned leaves the step's checkpoint
 * without it: a resume runs it again (eval_due). */
static attn_status after_step(attn_trainer *tr, const char *out, const attn_trainer_events *ev,
                              budget_clock *k, int *saved, attn_error *err) {
    const attn_train_config *c = &tr->tcfg;
    const int last = tr->step == c->max_steps;
    const int did_eval = eval_step(tr);
    const int ckpt = full_save_due(tr, k, did_eval);
    attn_status s;
    *saved = 0;
    if (ckpt && (s = submit(tr, out, TW_CKPT | TW_LOSS, did_eval, k, err))) return s;
    *saved = ckpt;
    if (did_eval) {
        s = eval_report(tr, last && !tr->book, k, ev, err);
        if (ckpt) {
            if ((s = settle(tr, s)) || tr->eval_stopped) return s;
        } else if (s && tr->eval_stopped) {
            *saved = 1;
            return submit(tr, out, TW_CKPT | TW_LOSS, 0, k, err);
        } else if (s || (s = submit(tr, out, TW_LOSS | (is_best(tr) ? TW_BEST : 0), 0, k, err))) {
            return s;
        }
    }
    if (tr->book && ev->on_epoch && tr->step % attn_trainer_book_batches(tr) == 0)
        ev->on_epoch(ev->user, tr, attn_trainer_book_epoch(tr));
    return ATTN_OK;
}

/* The step-0 evaluation; a fresh run (!*saved) writes its step-0
 * checkpoint meanwhile, as after_step does (step 0 is never a best), so a
 * stop during this evaluation, however long, waits only for what is left of
 * that write (the AdamW moments are zeros: holes, no I/O). */
static attn_status first_eval(attn_trainer *tr, const char *out, const attn_trainer_events *ev,
                              budget_clock *k, int *saved, attn_error *err) {
    attn_status s = *saved ? ATTN_OK : submit(tr, out, TW_CKPT | TW_LOSS, 1, k, err);
    if (s) return s;
    *saved = 1;
    return settle(tr, eval_report(tr, 0, k, ev, err));
}

/* The end: a spent budget's final evaluation, its checkpoint written
 * meanwhile (as after_step's), whose clock says the whole budget is spent
 * (it kept time for them), so a --resume takes no further step; else a
 * checkpoint unless the last step saved one. A stop during that evaluation
 * saves on the clock as it is. */
static attn_status finish(attn_trainer *tr, const char *out, int spent, int saved, budget_clock *k,
                          const attn_trainer_events *ev, attn_error *err) {
    if (!spent || tr->eval_stopped)
        return saved ? ATTN_OK : submit(tr, out, TW_CKPT | TW_LOSS, 0, k, err);
    attn_status s = submit(tr, out, TW_CKPT | TW_LOSS, 1, k, err);
    if (s) return s;
    s = eval_report(tr, 1, k, ev, err);
    const double now = clock_now(k), budget = tr->tcfg.time_budget;
    tr->elapsed_s = s || now > budget ? now : budget;
    return settle(tr, s);
}

static double step_tokens(const attn_trainer *tr) {
    const attn_train_config *c = &tr->tcfg;
    const int accum = c->grad_accum > 1 ? c->grad_accum : 1;
    return (double)c->batch_size * tr->mcfg.context_length * accum;
}

/* The steps from tr->step on, with their evaluations and checkpoints, and
 * the end (*spent: the time budget ended the run). */
static attn_status run_steps(attn_trainer *tr, const char *out, int resumed,
                             const attn_trainer_events *ev, budget_clock *k, attn_train_result *res,
                             int *spent, attn_error *err) {
    const attn_train_config *c = &tr->tcfg;
    const double tokens_per_step = step_tokens(tr);
    int saved = resumed; /* a resumed run's state is already on disk */
    attn_status s = ATTN_OK;
    /* The first evaluation, or the one a stop abandoned, with its step's
     * checkpoint. */
    if (eval_due(tr))
        s = tr->step == 0 ? first_eval(tr, out, ev, k, &saved, err)
                          : after_step(tr, out, ev, k, &saved, err);
    if (s && !tr->eval_stopped) return s;
    while (!tr->eval_stopped && tr->step < c->max_steps) {
        int stop = ev->should_stop ? ev->should_stop(ev->user, tr) : 0;
        if (attn_dist_any(tr->dist, stop)) break; /* all ranks stop together */
        if (c->time_budget > 0 && (*spent = budget_spent(tr, k))) break;
        if ((s = timed_step(tr, ev, k, res, tokens_per_step, err)) ||
            (s = after_step(tr, out, ev, k, &saved, err)))
            return s;
    }
    return finish(tr, out, *spent, saved, k, ev, err);
}

attn_status attn_trainer_run(attn_trainer *tr, const char *out, int resumed,
                             const attn_trainer_events *events, attn_train_result *result,
                             attn_error *err) {
    static const attn_trainer_events none = {0};
    const attn_trainer_events *ev = events ? events : &none;
    const attn_train_config *c = &tr->tcfg;
    attn_train_result res = {.start_step = tr->step};
    const double t0 = attn_now_s(); /* a resumed run's state on disk is whole */
    budget_clock k = {.t0 = t0, .elapsed0 = tr->elapsed_s, .full_at = t0};
    int spent = 0; /* the time budget ended the run */
    tr->ev = ev;   /* evaluations report and stop through it */
    tr->eval_stopped = 0;
    attn_status s = run_steps(tr, out, resumed, ev, &k, &res, &spent, err);
    tr->ev = NULL;
    /* The last save written (a failed run's too: its saves are the steps it
     * took), the writer's thread ended. */
    const double t = attn_now_s();
    attn_error close_err;
    const attn_status closed = train_writer_close(tr, s ? &close_err : err);
    k.saves_s += attn_now_s() - t;
    if (!s) s = closed;
    if (s) return s;
    res.eval_stopped = tr->eval_stopped;
    if (res.eval_stopped) res.eval_at = tr->eval_now;
    res.stopped = res.eval_stopped || (tr->step < c->max_steps && !spent);
    res.budget_spent = spent && !res.eval_stopped;
    res.wall_s = attn_now_s() - k.t0;
    res.eval_s = k.evals_s;
    res.save_s = k.saves_s;
    res.checkpoints = k.fulls;
    res.tokens_per_s =
        res.train_s > 0 ? (double)(tr->step - res.start_step) * step_tokens(tr) / res.train_s : 0;
    if (result) *result = res;
    return ATTN_OK;
}
