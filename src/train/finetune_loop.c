/* The fine-tuning tasks' training loop (finetune_loop.h). The loaders'
 * draws are train_book.h's. */
#include "finetune_loop.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attn/cross_entropy.h"
#include "attn/gpt_family.h"
#include "train_book.h"

attn_status ft_loader(ft_run *r, int set, const size_t *order, size_t n, int want_acc,
                      int num_batches, double *out, attn_error *err) {
    const size_t B = (size_t)r->B, batches = (n + B - 1) / B;
    const size_t nb =
        num_batches > 0 && (size_t)num_batches < batches ? (size_t)num_batches : batches;
    if (nb == 0) {
        *out = NAN;
        return ATTN_OK;
    }
    double total = 0;
    size_t seen = 0, right = 0;
    for (size_t i = 0; i < nb; i++) {
        const size_t first = i * B, k = n - first < B ? n - first : B;
        int T = 0;
        r->t->fill(r->t->user, set, order + first, k, r->B, r->x, r->y, &T);
        float loss;
        attn_status s = attn_gpt_forward(r->m, r->x, r->y, r->B, T, NULL, &r->acts, &loss, err);
        if (s) return s;
        total += (double)loss;
        if (want_acc) right += r->t->right(r->t->user, &r->acts, set, order + first, k);
        seen += k;
    }
    *out = want_acc ? (double)right / (double)seen : total / (double)nb;
    return ATTN_OK;
}

attn_status ft_measure(ft_run *r, int want_acc, int num_batches, double *tr, double *va,
                       attn_error *err) {
    int64_t base, seed;
    const size_t n = r->t->n[FT_TRAIN], B = (size_t)r->B;
    attn_book_iterator(&r->rng, n, &base, &seed, r->scratch);
    /* the train loader drops its last partial batch */
    attn_status s = ft_loader(r, FT_TRAIN, r->scratch, n / B * B, want_acc, num_batches, tr, err);
    if (s) return s;
    (void)attn_rng_int64(&r->rng); /* iter(val_loader)'s base seed */
    return ft_loader(r, FT_VAL, r->ident, r->t->n[FT_VAL], want_acc, num_batches, va, err);
}

attn_status ft_run_init(ft_run *r, attn_gpt *m, const ft_task *t, int T_max,
                        const attn_classify_config *c, const attn_classify_events *ev,
                        attn_classify_result *res, int training, attn_error *err) {
    memset(r, 0, sizeof *r);
    r->m = m;
    r->t = t;
    r->c = c;
    r->ev = ev;
    r->res = res;
    r->B = c->batch_size;
    r->T_max = T_max;
    if (c->batch_size < 1 || c->batch_size > 4096 || c->epochs < 0 || c->eval_freq < 1 ||
        c->eval_iter < 0)
        return attn_fail(err, ATTN_ERR_INVALID_ARG,
                         "batch_size must be in [1, 4096], epochs >= 0, eval_freq >= 1, "
                         "eval_iter >= 0");
    if (training && t->n[FT_TRAIN] < (size_t)c->batch_size)
        return attn_fail(err, ATTN_ERR_INVALID_ARG,
                         "the training set has %zu rows, fewer than one batch of %d (the book's "
                         "loader drops the last partial batch)",
                         t->n[FT_TRAIN], c->batch_size);
    const size_t nmax = t->n[FT_TRAIN] > t->n[FT_VAL] ? t->n[FT_TRAIN] : t->n[FT_VAL];
    const size_t BT = (size_t)r->B * (size_t)T_max;
    r->perm = malloc(t->n[FT_TRAIN] * sizeof *r->perm);
    r->scratch = malloc(t->n[FT_TRAIN] * sizeof *r->scratch);
    r->ident = malloc(nmax * sizeof *r->ident);
    r->x = malloc(BT * sizeof *r->x);
    r->y = malloc(BT * sizeof *r->y);
    if (!r->perm || !r->scratch || !r->ident || !r->x || !r->y)
        return attn_fail(err, ATTN_ERR_NOMEM, "out of memory for the loaders");
    for (size_t i = 0; i < nmax; i++)
        r->ident[i] = i;
    attn_rng_seed(&r->rng, c->seed);
    /* Once, at the longest batch: each batch (the book pads each to its own
     * longest row) runs on their first B*T rows, laid out for its T. */
    attn_status s = attn_gpt_acts_init(&r->acts, m, r->B, T_max, err);
    if (s || !training) return s;
    const attn_adamw_config oc = {c->beta1, c->beta2, c->eps, c->weight_decay};
    s = attn_adamw_init(&r->opt, attn_gpt_params(m), &oc, err);
    if (s) return s;
    for (int i = 0; i < r->opt.n_params; i++)
        r->opt.decay[i] = 1; /* torch.optim.AdamW(model.parameters()): one group */
    return ATTN_OK;
}

void ft_run_free(ft_run *r) {
    free(r->hist);
    attn_text_free(&r->samples);
    attn_adamw_free(&r->opt);
    attn_gpt_acts_free(&r->acts);
    free(r->perm);
    free(r->scratch);
    free(r->ident);
    free(r->x);
    free(r->y);
    memset(r, 0, sizeof *r);
}

uint64_t ft_digest(uint64_t h, const void *p, size_t n) {
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

/* One optimizer step on rows perm[first..first+B). */
static attn_status train_step(ft_run *r, size_t first, float *loss, int *T, attn_error *err) {
    const attn_forward_mode mode = {1, &r->rng, ATTN_STREAM_TORCH_CPU};
    r->t->fill(r->t->user, FT_TRAIN, r->perm + first, (size_t)r->B, r->B, r->x, r->y, T);
    attn_gpt_zero_grad(r->m);
    attn_status s =
        attn_gpt_forward_backward(r->m, r->x, r->y, r->B, *T, &mode, &r->acts, 1.0f, loss, err);
    return s ? s : attn_adamw_step(&r->opt, attn_gpt_params(r->m), r->c->lr, err);
}

/* A new epoch's iterator: its draws and order. */
static void begin_epoch(ft_run *r) {
    int64_t base;
    attn_book_iterator(&r->rng, r->t->n[FT_TRAIN], &base, &r->st.sampler_seed, r->perm);
    r->st.epoch++;
    r->st.pos = 0;
    r->st.epoch_done = 0;
}

/* The step, then every eval_freq-th (from step 0) an evaluation. */
static attn_status step_and_eval(ft_run *r, attn_error *err) {
    const size_t B = (size_t)r->B;
    float loss;
    int T;
    attn_status s = train_step(r, r->st.pos * B, &loss, &T, err);
    if (s) return s;
    const int64_t step = r->st.step++;
    r->st.pos++;
    /* train_classifier_simple counts examples, train_model_simple tokens */
    r->st.seen += r->t->right ? (int64_t)B : (int64_t)B * T;
    const attn_classify_events *ev = r->ev;
    if (ev && ev->on_step) ev->on_step(ev->user, step, loss);
    if (step % r->c->eval_freq) return ATTN_OK;
    double tl, vl;
    s = ft_measure(r, 0, r->c->eval_iter, &tl, &vl, err);
    if (!s) s = ft_report(r, FT_H_EVAL, r->st.epoch, step, tl, vl, err);
    return s ? s : ft_save(r, err);
}

attn_status ft_epochs(ft_run *r, attn_error *err) {
    const size_t batches = r->t->n[FT_TRAIN] / (size_t)r->B;
    attn_status s = ATTN_OK;
    while (!s && (r->st.epoch < r->c->epochs || (r->st.epoch && !r->st.epoch_done))) {
        if (r->st.epoch == 0 || r->st.epoch_done) begin_epoch(r);
        while (!s && r->st.pos < batches)
            s = step_and_eval(r, err);
        if (!s) s = r->t->end_epoch(r, r->st.epoch, err);
        r->st.epoch_done = 1;
        if (!s) s = ft_save(r, err);
    }
    r->res->steps = r->st.step;
    r->res->examples_seen = r->st.seen;
    return s;
}
