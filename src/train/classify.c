/* Chapter 6's classifier and appendix E's adapters (attn/finetune.h): the
 * model made from a language model, train_classifier_simple, the
 * evaluations. The loaders' draws are train_book.h's. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn/cross_entropy.h"
#include "attn/finetune.h"
#include "attn/gpt_family.h"
#include "attn/linear.h"
#include "attn/lora.h"
#include "attn/optim.h"
#include "train_book.h"

attn_classify_config attn_classify_defaults(void) {
    attn_classify_config c = {.batch_size = 8,
                              .epochs = 5,
                              .eval_freq = 50,
                              .eval_iter = 5,
                              .lr = 5e-5,
                              .weight_decay = 0.1,
                              .beta1 = 0.9,
                              .beta2 = 0.999,
                              .eps = 1e-8,
                              .seed = 123,
                              .trainable = ATTN_TRAIN_LAST_BLOCK,
                              .lora_rank = 0,
                              .lora_alpha = 16.0f};
    return c;
}

const char *const *attn_trainable_set_names(void) {
    static const char *const names[] = {"last-block", "all", "head", NULL};
    return names;
}

/* ------------------------------------------------------------ the model */

/* The base's tensor that name (a classifier's) was: an adapted Linear's
 * "<x>.linear.weight" is "<x>.weight"; NULL for the head and adapters. */
static const attn_param *base_of(const attn_param_list *base, const char *name) {
    if (strncmp(name, "out_head.", 9) == 0 || strstr(name, ".lora.")) return NULL;
    char plain[ATTN_PARAM_NAME_MAX + 8];
    const char *lin = strstr(name, ".linear.");
    if (lin)
        snprintf(plain, sizeof plain, "%.*s.%s", (int)(lin - name), name, lin + 8);
    else
        snprintf(plain, sizeof plain, "%s", name);
    return attn_param_list_find(base, plain);
}

static attn_status copy_base(attn_gpt *m, const attn_gpt *base, attn_error *err) {
    const attn_param_list *L = attn_gpt_params(m), *BL = attn_gpt_params(base);
    for (int i = 0; i < L->count; i++) {
        const attn_param *p = &L->items[i];
        if (strncmp(p->name, "out_head.", 9) == 0 || strstr(p->name, ".lora.")) continue;
        const attn_param *q = base_of(BL, p->name);
        if (!q || q->numel != p->numel)
            return attn_fail(err, ATTN_ERR_STATE, "the base model has no %s of %zu values",
                             p->name, p->numel);
        memcpy(p->data, q->data, p->numel * sizeof(float));
    }
    return ATTN_OK;
}

static attn_param *find(attn_gpt *m, const char *name) {
    return (attn_param *)attn_param_list_find(attn_gpt_params(m), name);
}

/* torch.manual_seed(seed); nn.Linear(emb, n): the weight, then the bias.
 * With LoRA, reseeded, appendix E's four iterator draws, then each A in
 * the table's order (replace_linear_with_lora's). */
static void draw_head(attn_gpt *m, const attn_classify_config *c) {
    attn_rng rng;
    attn_rng_seed(&rng, c->seed);
    attn_param *w = find(m, c->lora_rank ? "out_head.linear.weight" : "out_head.weight");
    attn_param *b = find(m, c->lora_rank ? "out_head.linear.bias" : "out_head.bias");
    const int C = m->cfg.emb_dim;
    attn_linear_draw(&rng, w->data, w->numel, C, 0);
    attn_linear_draw(&rng, b->data, b->numel, C, 1);
    if (!c->lora_rank) return;
    attn_rng_seed(&rng, c->seed);
    for (int k = 0; k < 4; k++)
        (void)attn_rng_int64(&rng);
    const attn_param_list *L = attn_gpt_params(m);
    for (int i = 0; i < L->count; i++)
        if (L->items[i].role == ATTN_ROLE_LORA_A)
            attn_lora_draw(&rng, L->items[i].data, L->items[i].numel, c->lora_rank);
}

static attn_status set_trainable(attn_gpt *m, const attn_classify_config *c, attn_error *err) {
    if (c->trainable == ATTN_TRAIN_ALL && !c->lora_rank) return ATTN_OK;
    attn_status s = attn_gpt_set_trainable(m, "", 0, err);
    if (s) return s;
    if (c->lora_rank) {
        const attn_param_list *L = attn_gpt_params(m);
        for (int i = 0; !s && i < L->count; i++)
            if (strstr(L->items[i].name, ".lora."))
                s = attn_gpt_set_trainable(m, L->items[i].name, 1, err);
        return s;
    }
    if (c->trainable == ATTN_TRAIN_LAST_BLOCK) {
        char last[32];
        snprintf(last, sizeof last, "trf_blocks.%d.", m->cfg.n_layers - 1);
        s = attn_gpt_set_trainable(m, last, 1, err);
        if (!s && find(m, "final_norm.scale")) s = attn_gpt_set_trainable(m, "final_norm.", 1, err);
    }
    return s ? s : attn_gpt_set_trainable(m, "out_head.", 1, err);
}

attn_status attn_classifier_from(attn_gpt *out, const attn_gpt *base, int n_classes,
                                 const attn_classify_config *c, attn_error *err) {
    memset(out, 0, sizeof *out);
    if (n_classes < 1 || c->lora_rank < 0 || (c->lora_rank && !(c->lora_alpha > 0)))
        return attn_fail(err, ATTN_ERR_INVALID_ARG,
                         "a classifier needs n_classes >= 1 (got %d) and a LoRA rank >= 0 with "
                         "alpha > 0",
                         n_classes);
    attn_gpt_config cfg = base->cfg;
    cfg.tie_weights = 0; /* the book loads GPT-2 untied; the head is new anyway */
    const attn_gpt_build o = {.head_width = n_classes,
                              .head_bias = 1,
                              .lora_rank = c->lora_rank,
                              .lora_alpha = c->lora_rank ? c->lora_alpha / (float)c->lora_rank : 0};
    attn_status s = attn_gpt_init_family(out, &cfg, NULL, &o, NULL, err);
    if (s) return s;
    if ((s = copy_base(out, base, err)) == ATTN_OK) {
        draw_head(out, c);
        s = set_trainable(out, c, err);
    }
    if (s) attn_gpt_free(out);
    return s;
}

/* ------------------------------------------------------------ the passes */

/* One pass's workspace: (B, T) ids and targets, the activations. */
typedef struct classify_ws {
    int B, T, width;
    int32_t *x, *y;
    attn_gpt_acts acts;
} classify_ws;

static void ws_free(classify_ws *w) {
    free(w->x);
    free(w->y);
    attn_gpt_acts_free(&w->acts);
}

static attn_status ws_init(classify_ws *w, attn_gpt *m, int B, int T, attn_error *err) {
    memset(w, 0, sizeof *w);
    w->B = B;
    w->T = T;
    w->width = attn_gpt_head_width(m);
    w->x = malloc((size_t)B * (size_t)T * sizeof *w->x);
    w->y = malloc((size_t)B * (size_t)T * sizeof *w->y);
    if (!w->x || !w->y) {
        ws_free(w);
        return attn_fail(err, ATTN_ERR_NOMEM, "out of memory for a batch");
    }
    attn_status s = attn_gpt_acts_init(&w->acts, m, B, T, err);
    if (s) ws_free(w);
    return s;
}

/* Rows rows[0..n) of d (rows NULL: first..first+n) into the batch, its
 * targets -100 but the last position's label; the rows past n padded and
 * all -100 (a short last batch: they count nowhere). */
static void fill(classify_ws *w, const attn_class_data *d, const size_t *rows, size_t first,
                 size_t n) {
    const size_t T = (size_t)w->T;
    for (size_t b = 0; b < (size_t)w->B; b++) {
        const size_t r = rows ? rows[b < n ? b : 0] : first + (b < n ? b : 0);
        memcpy(w->x + b * T, d->ids + r * T, T * sizeof(int32_t));
        for (size_t t = 0; t < T; t++)
            w->y[b * T + t] = ATTN_IGNORE_INDEX;
        if (b < n) w->y[b * T + T - 1] = d->labels[r];
    }
}

/* Right predictions among the batch's first n rows (torch.argmax: the
 * first of equal maxima). */
static int correct(const classify_ws *w, size_t n, const int32_t *labels_of_rows) {
    int right = 0;
    const size_t T = (size_t)w->T, V = (size_t)w->width;
    for (size_t b = 0; b < n; b++) {
        const float *row = w->acts.logits + (b * T + T - 1) * V;
        size_t best = 0;
        for (size_t v = 1; v < V; v++)
            best = row[v] > row[best] ? v : best;
        right += (int32_t)best == labels_of_rows[b];
    }
    return right;
}

/* What a loader pass measures. */
typedef struct loader_pass {
    const attn_class_data *d;
    const size_t *order; /* NULL: file order */
    size_t batches;      /* len(loader) */
    int num_batches;     /* eval_iter (0: all) */
} loader_pass;

/* calc_loss_loader / calc_accuracy_loader (want_acc) over a loader. */
static attn_status loader_run(attn_gpt *m, classify_ws *w, const loader_pass *lp, int want_acc,
                              double *out, attn_error *err) {
    size_t nb = lp->num_batches > 0 && (size_t)lp->num_batches < lp->batches
                    ? (size_t)lp->num_batches
                    : lp->batches;
    if (nb == 0) {
        *out = NAN;
        return ATTN_OK;
    }
    double total = 0;
    size_t seen = 0, right = 0;
    for (size_t i = 0; i < nb; i++) {
        const size_t first = i * (size_t)w->B;
        const size_t n = lp->d->n - first < (size_t)w->B ? lp->d->n - first : (size_t)w->B;
        fill(w, lp->d, lp->order ? lp->order + first : NULL, first, n);
        float loss;
        attn_status s = attn_gpt_forward(m, w->x, w->y, w->B, w->T, NULL, &w->acts, &loss, err);
        if (s) return s;
        total += (double)loss;
        int32_t lab[4096];
        for (size_t b = 0; b < n; b++)
            lab[b] = lp->d->labels[lp->order ? lp->order[first + b] : first + b];
        right += (size_t)correct(w, n, lab);
        seen += n;
    }
    *out = want_acc ? (double)right / (double)seen : total / (double)nb;
    return ATTN_OK;
}

/* The run's loaders and their generator. */
typedef struct classify_run {
    attn_gpt *m;
    classify_ws w;
    const attn_class_data *train, *val;
    attn_rng rng;
    size_t *perm, *scratch;
    const attn_classify_config *c;
} classify_run;

/* A fresh train iterator (its two draws) and a fresh val one (one draw),
 * each measured over eval_iter batches: evaluate_model, or the epoch's
 * accuracies. */
static attn_status measure(classify_run *r, int want_acc, int num_batches, double *tr,
                           double *va, attn_error *err) {
    int64_t base, seed;
    attn_book_iterator(&r->rng, r->train->n, &base, &seed, r->scratch);
    const size_t B = (size_t)r->c->batch_size;
    const loader_pass t = {r->train, r->scratch, r->train->n / B, num_batches};
    attn_status s = loader_run(r->m, &r->w, &t, want_acc, tr, err);
    if (s) return s;
    (void)attn_rng_int64(&r->rng); /* iter(val_loader)'s base seed */
    const loader_pass v = {r->val, NULL, (r->val->n + B - 1) / B, num_batches};
    return loader_run(r->m, &r->w, &v, want_acc, va, err);
}

static attn_status check_sets(const attn_gpt *m, const attn_class_data *train,
                              const attn_class_data *val, const attn_classify_config *c,
                              attn_error *err) {
    if (c->batch_size < 1 || c->batch_size > 4096 || c->epochs < 0 || c->eval_freq < 1 ||
        c->eval_iter < 0)
        return attn_fail(err, ATTN_ERR_INVALID_ARG,
                         "batch_size must be in [1, 4096], epochs >= 0, eval_freq >= 1, "
                         "eval_iter >= 0");
    if (train->n < (size_t)c->batch_size)
        return attn_fail(err, ATTN_ERR_INVALID_ARG,
                         "the training set has %zu rows, fewer than one batch of %d (the book's "
                         "loader drops the last partial batch)",
                         train->n, c->batch_size);
    if (val->n && val->max_len != train->max_len)
        return attn_fail(err, ATTN_ERR_SHAPE, "the val set is padded to %d, the training set to %d",
                         val->max_len, train->max_len);
    const int width = attn_gpt_head_width(m);
    if (train->max_label >= width || (val->n && val->max_label >= width))
        return attn_fail(err, ATTN_ERR_INVALID_ARG, "a label is outside the head's %d classes",
                         width);
    if (train->max_len > m->cfg.context_length)
        return attn_fail(err, ATTN_ERR_SHAPE, "rows of %d tokens exceed the context of %d",
                         train->max_len, m->cfg.context_length);
    return ATTN_OK;
}

static attn_status run_init(classify_run *r, attn_gpt *m, const attn_class_data *train,
                            const attn_class_data *val, const attn_classify_config *c,
                            attn_adamw *opt, attn_error *err) {
    memset(r, 0, sizeof *r);
    r->m = m;
    r->train = train;
    r->val = val;
    r->c = c;
    attn_status s = check_sets(m, train, val, c, err);
    if (s) return s;
    r->perm = malloc(train->n * sizeof *r->perm);
    r->scratch = malloc(train->n * sizeof *r->scratch);
    if (!r->perm || !r->scratch) return attn_fail(err, ATTN_ERR_NOMEM, "out of memory");
    if ((s = ws_init(&r->w, m, c->batch_size, train->max_len, err))) return s;
    const attn_adamw_config oc = {c->beta1, c->beta2, c->eps, c->weight_decay};
    if ((s = attn_adamw_init(opt, attn_gpt_params(m), &oc, err))) return s;
    for (int i = 0; i < opt->n_params; i++)
        opt->decay[i] = 1; /* torch.optim.AdamW(model.parameters()): one group */
    attn_rng_seed(&r->rng, c->seed);
    return ATTN_OK;
}

/* One optimizer step on rows perm[first..first+B). */
static attn_status train_step(classify_run *r, attn_adamw *opt, size_t first, float *loss,
                              attn_error *err) {
    const attn_forward_mode mode = {1, &r->rng, ATTN_STREAM_TORCH_CPU};
    fill(&r->w, r->train, r->perm + first, 0, (size_t)r->w.B);
    attn_gpt_zero_grad(r->m);
    attn_status s = attn_gpt_forward_backward(r->m, r->w.x, r->w.y, r->w.B, r->w.T, &mode,
                                              &r->w.acts, 1.0f, loss, err);
    return s ? s : attn_adamw_step(opt, attn_gpt_params(r->m), r->c->lr, err);
}

static attn_status epochs(classify_run *r, attn_adamw *opt, const attn_classify_events *ev,
                          attn_classify_result *res, attn_error *err) {
    const size_t B = (size_t)r->c->batch_size, batches = r->train->n / B;
    int64_t step = -1;
    attn_status s = ATTN_OK;
    for (int e = 1; e <= r->c->epochs && !s; e++) {
        int64_t base, seed;
        attn_book_iterator(&r->rng, r->train->n, &base, &seed, r->perm);
        for (size_t i = 0; i < batches && !s; i++) {
            float loss;
            if ((s = train_step(r, opt, i * B, &loss, err))) break;
            step++;
            res->examples_seen += (int64_t)B;
            if (ev && ev->on_step) ev->on_step(ev->user, step, loss);
            if (step % r->c->eval_freq) continue;
            double tl, vl;
            s = measure(r, 0, r->c->eval_iter, &tl, &vl, err);
            if (!s && ev && ev->on_eval) ev->on_eval(ev->user, e, step, tl, vl);
        }
        if (!s) s = measure(r, 1, r->c->eval_iter, &res->train_acc, &res->val_acc, err);
        if (!s && ev && ev->on_epoch) ev->on_epoch(ev->user, e, res->train_acc, res->val_acc);
    }
    res->steps = step + 1;
    /* ch06.ipynb's after training: whole loaders (the train one shuffled) */
    return s ? s : measure(r, 1, 0, &res->final_train_acc, &res->final_val_acc, err);
}

attn_status attn_classify_train(attn_gpt *m, const attn_class_data *train,
                                const attn_class_data *val, const attn_classify_config *c,
                                const attn_classify_events *ev, attn_classify_result *res,
                                attn_error *err) {
    memset(res, 0, sizeof *res);
    res->train_acc = res->val_acc = res->final_train_acc = res->final_val_acc = NAN;
    classify_run r;
    attn_adamw opt;
    memset(&opt, 0, sizeof opt);
    attn_status s = run_init(&r, m, train, val, c, &opt, err);
    if (!s) s = epochs(&r, &opt, ev, res, err);
    attn_adamw_free(&opt);
    ws_free(&r.w);
    free(r.perm);
    free(r.scratch);
    return s;
}

attn_status attn_classify_logits(attn_gpt *m, const attn_class_data *d, size_t first, size_t n,
                                 float *logits, attn_error *err) {
    if (first > d->n || n > d->n - first || n == 0 || n > 4096)
        return attn_fail(err, ATTN_ERR_INVALID_ARG, "rows [%zu, %zu) outside the set's %zu",
                         first, first + n, d->n);
    classify_ws w;
    attn_status s = ws_init(&w, m, (int)n, d->max_len, err);
    if (s) return s;
    fill(&w, d, NULL, first, n);
    s = attn_gpt_forward(m, w.x, NULL, w.B, w.T, NULL, &w.acts, NULL, err);
    const size_t T = (size_t)w.T, V = (size_t)w.width;
    for (size_t b = 0; !s && b < n; b++)
        memcpy(logits + b * V, w.acts.logits + (b * T + T - 1) * V, V * sizeof(float));
    ws_free(&w);
    return s;
}

attn_status attn_classify_accuracy(attn_gpt *m, const attn_class_data *d, int batch_size,
                                   int num_batches, double *acc, attn_error *err) {
    if (batch_size < 1 || batch_size > 4096 || d->n == 0)
        return attn_fail(err, ATTN_ERR_INVALID_ARG, "batch_size in [1, 4096] and rows needed");
    if (d->max_label >= attn_gpt_head_width(m))
        return attn_fail(err, ATTN_ERR_INVALID_ARG, "a label is outside the head's %d classes",
                         attn_gpt_head_width(m));
    classify_ws w;
    attn_status s = ws_init(&w, m, batch_size, d->max_len, err);
    if (s) return s;
    const size_t B = (size_t)batch_size;
    const loader_pass lp = {d, NULL, (d->n + B - 1) / B, num_batches};
    s = loader_run(m, &w, &lp, 1, acc, err);
    ws_free(&w);
    return s;
}
