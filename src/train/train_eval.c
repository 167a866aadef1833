/* The trainer's evaluations (see attn/train.h): the sampled estimates, the
 * exact pass, the final evaluation's rule, and an evaluation's progress and
 * stop while attn_trainer_run runs it (trainer.h). */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */

#include <math.h>
#include <stddef.h>

#include "attn/cost.h"
#include "attn/train.h"
#include "base/clock.h"
#include "train_book.h"
#include "train_device.h"
#include "train_history.h"
#include "trainer.h"

/* ------------------------------------------------- progress and stop */

static int stop_asked(attn_trainer *tr) {
    const attn_trainer_events *ev = tr->ev;
    return ev && ev->should_stop && ev->should_stop(ev->user, tr) != 0;
}

/* The running forward is `within` (0..1) done. */
static void report(attn_trainer *tr, double within) {
    attn_eval_progress *p = &tr->eval_now;
    size_t before = 0; /* the forwards of the parts before this one */
    for (int q = 0; q < (int)p->part; q++)
        before += tr->eval_parts[q];
    p->done = (double)(before + p->batch) + within;
    p->elapsed_s = attn_now_s() - tr->eval_t0;
    p->eta_s = p->done > 0 ? p->elapsed_s * (p->total - p->done) / p->done : NAN;
    if (tr->ev && tr->ev->on_eval_progress) tr->ev->on_eval_progress(tr->ev->user, tr, p);
}

/* Part `part` of the running evaluation stands at `batch` of `batches`
 * forwards: reported (on_eval_progress), then with poll the stop request
 * asked (the ranks agree: every rank polls at the same points). 1: stop
 * (tr->eval_stopped is set; the caller abandons the evaluation). */
static int eval_tick(attn_trainer *tr, attn_eval_part part, size_t batch, size_t batches,
                     int poll) {
    attn_eval_progress *p = &tr->eval_now;
    p->part = part;
    p->batch = batch;
    p->batches = batches;
    report(tr, 0);
    if (!poll || !tr->ev) return 0;
    if (!attn_dist_any(tr->dist, stop_asked(tr))) return 0;
    tr->eval_stopped = 1;
    return 1;
}

/* acts->poll between a forward's layers: its share done; one process stops
 * here (ranks agree between batches only: eval_tick). */
static int layer_poll(void *user, int done, int stages) {
    attn_trainer *tr = user;
    report(tr, (double)done / (double)stages);
    if ((tr->dist && tr->dist->size > 1) || !stop_asked(tr)) return 0;
    tr->eval_stopped = 1;
    return 1;
}

/* The exact pass's batches of windows (0 for a split too short to score). */
static size_t exact_batches(const attn_trainer *tr) {
    const size_t T = (size_t)tr->mcfg.context_length, B = (size_t)tr->tcfg.batch_size;
    const size_t n = tr->val.n_ids, windows = n >= 2 ? (n - 1 + T - 1) / T : 0;
    return (windows + B - 1) / B;
}

/* An evaluation begins: its parts' forwards (train estimate, val estimate,
 * exact pass; 0: none), watched while attn_trainer_run runs it. */
static void eval_begin(attn_trainer *tr, int final, size_t train, size_t val, size_t exact) {
    tr->eval_parts[0] = train;
    tr->eval_parts[1] = val;
    tr->eval_parts[2] = exact;
    tr->eval_now = (attn_eval_progress){
        .step = tr->step, .final = final, .total = (double)(train + val + exact), .eta_s = NAN};
    tr->eval_t0 = attn_now_s();
    tr->eval_stopped = 0;
    tr->acts.poll = tr->ev ? layer_poll : NULL;
    tr->acts.poll_user = tr;
}

/* ... and ends: a stopped one leaves the generators as they were before it
 * (rng: the one its batches drew from), so a resume draws the same. */
static attn_status eval_end(attn_trainer *tr, attn_status st, attn_rng *rng, const attn_rng *before,
                            attn_error *err) {
    tr->acts.poll = NULL;
    tr->acts.poll_user = NULL;
    if (!st || !tr->eval_stopped) return st;
    *rng = *before;
    return attn_fail(err, ATTN_ERR_STATE, "the evaluation at step %lld was stopped",
                     (long long)tr->step);
}

/* --------------------------------------------------------- the passes */

/* The sampled estimate of split s (0 train, 1 val): eval_iters random
 * batches (drawn on every rank, split over the ranks). */
static attn_status sampled_loss(attn_trainer *tr, int s, float *mean, attn_error *err) {
    const int B = tr->tcfg.batch_size, T = tr->mcfg.context_length;
    const attn_token_dataset *split = s ? &tr->val : &tr->train;
    const attn_eval_part part = s ? ATTN_EVAL_PART_VAL : ATTN_EVAL_PART_TRAIN;
    const size_t n_it = (size_t)tr->tcfg.eval_iters;
    size_t lo, hi; /* this rank's share of the batches (all of them alone) */
    attn_dist_block(tr->dist, n_it, &lo, &hi);
    for (size_t i = 0; i < n_it; i++) {
        const size_t mine = i < lo ? 0 : i - lo < hi - lo ? i - lo : hi - lo;
        if (eval_tick(tr, part, mine, hi - lo, 1)) return attn_fail(err, ATTN_ERR_STATE, "stopped");
        attn_status st = attn_dataset_random_batch(split, &tr->eval_rng, B, tr->xb, tr->yb, err);
        if (st) return st;
        if (i < lo || i >= hi) continue;
        st = tr->gpu ? attn_trainer_device_eval(tr, &tr->eval_loss[i], err)
                     : attn_gpt_forward(&tr->model, tr->xb, tr->yb, B, T, NULL, &tr->acts,
                                        &tr->eval_loss[i], err);
        if (st) return st;
    }
    eval_tick(tr, part, hi - lo, hi - lo, 0);
    attn_status st = attn_dist_allgather(tr->dist, tr->eval_loss, n_it, err);
    if (st) return st;
    double sum = 0;
    for (size_t i = 0; i < n_it; i++)
        sum += tr->eval_loss[i];
    *mean = (float)(sum / tr->tcfg.eval_iters);
    return ATTN_OK;
}

static int exact_tick(void *user, size_t batch, size_t batches) {
    return eval_tick(user, ATTN_EVAL_PART_EXACT, batch, batches, batch < batches);
}

/* The exact val loss (every rank computes it whole: it is deterministic, and
 * the ranks hold the same weights). */
static attn_status exact_val(attn_trainer *tr, float *out, attn_error *err) {
    attn_status st = tr->gpu ? attn_trainer_device_sync(tr, err) : ATTN_OK;
    double loss = 0;
    if (!st)
        st = attn_gpt_loss_dataset_ticked(&tr->model, &tr->acts, &tr->val, &loss, NULL, exact_tick,
                                          tr, err);
    if (!st) *out = (float)loss;
    return st;
}

static attn_status evaluate(attn_trainer *tr, int final, int sampled_val, int exact,
                            attn_eval_record *rec, attn_error *err) {
    attn_eval_record r = {tr->step, NAN, NAN, NAN};
    if (attn_trainer_planning(tr, err)) return ATTN_ERR_STATE;
    size_t lo, hi;
    attn_dist_block(tr->dist, (size_t)tr->tcfg.eval_iters, &lo, &hi);
    const attn_rng before = tr->eval_rng;
    eval_begin(tr, final, hi - lo, sampled_val ? hi - lo : 0, exact ? exact_batches(tr) : 0);
    attn_status st = sampled_loss(tr, 0, &r.train_loss, err);
    if (!st && sampled_val) st = sampled_loss(tr, 1, &r.val_loss, err);
    if (!st && exact) st = exact_val(tr, &r.val_exact, err);
    if ((st = eval_end(tr, st, &tr->eval_rng, &before, err))) return st;
    if ((st = train_history_push_eval(tr, &r, err))) return st;
    if (rec) *rec = r;
    return ATTN_OK;
}

/* ------------------------------------- the book's order (train_book.h) */

/* One eval-mode batch of k windows (k < batch_size: the val loader's last
 * one, drop_last False, on a workspace of its own). */
static attn_status batch_loss(attn_trainer *tr, const attn_token_dataset *ds, const size_t *win,
                              int k, float *loss, attn_error *err) {
    const int T = tr->mcfg.context_length;
    attn_status st = attn_book_fill(ds, win, k, T, tr->xb, tr->yb, err);
    if (st) return st;
    if (k == tr->tcfg.batch_size)
        return attn_gpt_forward(&tr->model, tr->xb, tr->yb, k, T, NULL, &tr->acts, loss, err);
    attn_gpt_acts acts;
    st = attn_gpt_acts_init(&acts, &tr->model, k, T, err);
    if (st) return st;
    st = attn_gpt_forward(&tr->model, tr->xb, tr->yb, k, T, NULL, &acts, loss, err);
    attn_gpt_acts_free(&acts);
    return st;
}

/* calc_loss_loader's batches over n_win windows: eval_iters at most. */
static size_t loader_batches(const attn_trainer *tr, size_t n_win) {
    const size_t B = (size_t)tr->tcfg.batch_size, nb = (n_win + B - 1) / B;
    return nb < (size_t)tr->tcfg.eval_iters ? nb : (size_t)tr->tcfg.eval_iters;
}

/* The book's evaluation's forwards: of the train loader, of the val loader. */
static void book_eval_batches(const attn_trainer *tr, size_t *train, size_t *val) {
    const attn_book_order *o = tr->book;
    *train = loader_batches(tr, o->batches * (size_t)o->B);
    *val = loader_batches(tr, o->val_windows);
}

/* calc_loss_loader(loader, num_batches = eval_iters): the mean of the
 * first batches' losses (win: the loader's order of its n_win windows),
 * reported as part `part` of the evaluation (eval_tick). */
static attn_status loader_loss(attn_trainer *tr, attn_eval_part part, const attn_token_dataset *ds,
                               const size_t *win, size_t n_win, float *out, attn_error *err) {
    const size_t B = (size_t)tr->tcfg.batch_size, nb = loader_batches(tr, n_win);
    double total = 0;
    for (size_t b = 0; b < nb; b++) {
        float loss = 0;
        const size_t k = n_win - b * B < B ? n_win - b * B : B;
        if (eval_tick(tr, part, b, nb, 1)) return attn_fail(err, ATTN_ERR_STATE, "stopped");
        attn_status st = batch_loss(tr, ds, win + b * B, (int)k, &loss, err);
        if (st) return st;
        total += (double)loss; /* loss.item(): a Python float */
    }
    eval_tick(tr, part, nb, nb, 0);
    *out = (float)(total / (double)nb);
    return ATTN_OK;
}

/* evaluate_model(eval_iter = eval_iters): its iterators drawn from the
 * model generator (train_book.h). */
static attn_status book_evaluate(attn_trainer *tr, attn_eval_record *rec, attn_error *err) {
    attn_book_order *o = tr->book;
    attn_eval_record r = {tr->step, NAN, NAN, NAN};
    if (tr->gpu)
        return attn_fail(err, ATTN_ERR_INVALID_ARG, "the book's data order runs on the CPU only");
    int64_t base, seed;
    attn_book_iterator(&tr->model_rng, o->windows, &base, &seed, o->scratch);
    attn_status st = loader_loss(tr, ATTN_EVAL_PART_TRAIN, &tr->train, o->scratch,
                                 o->batches * (size_t)o->B, &r.train_loss, err);
    if (st) return st;
    base = attn_rng_int64(&tr->model_rng); /* the val iterator: SequentialSampler */
    for (size_t k = 0; k < o->val_windows; k++)
        o->scratch[k] = k;
    if ((st = loader_loss(tr, ATTN_EVAL_PART_VAL, &tr->val, o->scratch, o->val_windows, &r.val_loss,
                          err)))
        return st;
    if ((st = train_history_push_eval(tr, &r, err))) return st;
    if (rec) *rec = r;
    return ATTN_OK;
}

/* The book's evaluation, watched: a stop undoes its model-generator draws. */
static attn_status evaluate_book(attn_trainer *tr, attn_eval_record *rec, attn_error *err) {
    const attn_rng before = tr->model_rng;
    size_t train, val;
    book_eval_batches(tr, &train, &val);
    eval_begin(tr, 0, train, val, 0);
    attn_status st = book_evaluate(tr, rec, err);
    return eval_end(tr, st, &tr->model_rng, &before, err);
}

attn_status attn_trainer_evaluate(attn_trainer *tr, attn_eval_record *rec, attn_error *err) {
    if (tr->book && !attn_trainer_planning(tr, err)) return evaluate_book(tr, rec, err);
    const int exact = tr->tcfg.eval_mode == ATTN_EVAL_EXACT;
    return evaluate(tr, 0, !exact, exact, rec, err);
}

/* ------------------------------------------------- the final evaluation */

double attn_trainer_final_exact_share(const attn_trainer *tr, double *flop) {
    attn_train_plan p;
    attn_train_plan_of(&tr->mcfg, &tr->tcfg, &p);
    /* Forwards of whole batches (the last one padded), attn/cost.h's rule. */
    const attn_gpt_flops f =
        attn_gpt_flops_forward(&tr->mcfg, tr->tcfg.batch_size, tr->mcfg.context_length);
    const double pass = (double)exact_batches(tr) * (f.matmul + f.attention);
    const double steps = p.flops_per_step * (double)tr->tcfg.max_steps;
    if (flop) *flop = pass;
    return steps > 0 ? pass / steps : INFINITY;
}

int attn_trainer_final_is_exact(const attn_trainer *tr) {
    const attn_train_config *c = &tr->tcfg;
    if (c->eval_mode == ATTN_EVAL_EXACT || c->final_eval == ATTN_FINAL_EXACT) return 1;
    if (c->final_eval == ATTN_FINAL_SAMPLED || tr->val.n_ids > ATTN_TRAIN_EXACT_FINAL_MAX) return 0;
    double flop;
    const double share = attn_trainer_final_exact_share(tr, &flop);
    return share <= ATTN_TRAIN_EXACT_FINAL_SHARE || flop <= ATTN_TRAIN_EXACT_FINAL_FLOP;
}

attn_status attn_trainer_evaluate_final(attn_trainer *tr, attn_eval_record *rec, attn_error *err) {
    return evaluate(tr, 1, tr->tcfg.eval_mode != ATTN_EVAL_EXACT, attn_trainer_final_is_exact(tr),
                    rec, err);
}
