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
#include "clock.h"

/* The checkpoint, then the loss files that describe it (rank 0 writes). */
static attn_status save(const attn_trainer *tr, const char *out, attn_error *err) {
    if (!out || (tr->dist && tr->dist->rank != 0)) return ATTN_OK;
    attn_status s = attn_trainer_save(tr, out, err);
    return s ? s : attn_trainer_write_loss_files(tr, out, err);
}

/* After an evaluation at step > 0 that beats every earlier one on val
 * loss: its checkpoint into out/best (rank 0). */
static attn_status save_best(const attn_trainer *tr, const char *out, attn_error *err) {
    if (!out || (tr->dist && tr->dist->rank != 0) || tr->n_evals == 0) return ATTN_OK;
    const attn_eval_record *now = &tr->evals[tr->n_evals - 1];
    if (now->step == 0 || !isfinite(now->val_loss)) return ATTN_OK;
    for (size_t i = 0; i + 1 < tr->n_evals; i++)
        if (tr->evals[i].step > 0 && !(now->val_loss < tr->evals[i].val_loss)) return ATTN_OK;
    char best[4096];
    int k = snprintf(best, sizeof best, "%s/" ATTN_CKPT_BEST, out);
    if (k < 0 || k >= (int)sizeof best)
        return attn_fail(err, ATTN_ERR_IO, "output directory path is too long");
    if (mkdir(best, 0777) != 0 && errno != EEXIST)
        return attn_fail(err, ATTN_ERR_IO, "cannot create %s: %s", best, strerror(errno));
    return attn_trainer_save(tr, best, err);
}

attn_status attn_trainer_run(attn_trainer *tr, const char *out, int resumed,
                             const attn_trainer_events *events, attn_train_result *result,
                             attn_error *err) {
    static const attn_trainer_events none = {0};
    const attn_trainer_events *ev = events ? events : &none;
    const attn_train_config *c = &tr->tcfg;
    attn_dist *dist = tr->dist;
    const int accum = c->grad_accum > 1 ? c->grad_accum : 1;
    const double tokens_per_step = (double)c->batch_size * tr->mcfg.context_length * accum;
    attn_train_result res = {.start_step = tr->step};
    attn_eval_record er;
    attn_status s;
    if (!resumed && tr->step == 0) {
        if ((s = attn_trainer_evaluate(tr, &er, err))) return s;
        if (ev->on_eval) ev->on_eval(ev->user, tr, &er);
    }
    const double t_start = attn_now_s();
    int saved_now = resumed; /* a resumed run's state is already on disk */
    while (tr->step < c->max_steps) {
        int stop = ev->should_stop ? ev->should_stop(ev->user, tr) : 0;
        if (attn_dist_any(dist, stop)) break; /* all ranks stop together */
        const double t0 = attn_now_s(), c0 = dist ? dist->comm_s : 0;
        const uint64_t b0 = dist ? dist->sent_bytes + dist->recv_bytes : 0;
        attn_train_progress p = {.start_step = res.start_step};
        if ((s = attn_trainer_step(tr, &p.rec, err))) return s;
        p.step_s = attn_now_s() - t0;
        if (dist) {
            p.step_comm_s = dist->comm_s - c0;
            res.comm_bytes += dist->sent_bytes + dist->recv_bytes - b0;
        }
        res.comm_s += p.step_comm_s;
        res.train_s += p.step_s;
        saved_now = 0;
        const double done = (double)(tr->step - res.start_step);
        p.train_s = res.train_s;
        p.tokens_per_s = done * tokens_per_step / res.train_s;
        p.eta_s = (double)(c->max_steps - tr->step) * res.train_s / done;
        if (ev->on_step) ev->on_step(ev->user, tr, &p);
        const int did_eval = tr->step % c->eval_interval == 0 || tr->step == c->max_steps;
        if (did_eval) {
            if ((s = attn_trainer_evaluate(tr, &er, err))) return s;
            if (ev->on_eval) ev->on_eval(ev->user, tr, &er);
            if ((s = save_best(tr, out, err))) return s;
        }
        if (did_eval || (c->checkpoint_interval > 0 && tr->step % c->checkpoint_interval == 0)) {
            if ((s = save(tr, out, err))) return s;
            saved_now = 1;
        }
    }
    if (!saved_now && (s = save(tr, out, err))) return s;
    res.stopped = tr->step < c->max_steps;
    res.wall_s = attn_now_s() - t_start;
    res.tokens_per_s =
        res.train_s > 0 ? (double)(tr->step - res.start_step) * tokens_per_step / res.train_s : 0;
    if (result) *result = res;
    return ATTN_OK;
}
