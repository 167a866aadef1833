/* Chapter 6's classifier and appendix E's adapters (attn/finetune.h): the
 * model made from a language model, train_classifier_simple, the
 * task of the fine-tuning loop (finetune_loop.h). */
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
#include "finetune_loop.h"

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

/* The base's tensor that name (a fine-tuned model's) was: an adapted
 * Linear's "<x>.linear.weight" is "<x>.weight", a tied base's head its
 * token embedding; NULL for adapters and a new head (lm 0). */
static const attn_param *base_of(const attn_param_list *base, const char *name, int lm) {
    if ((!lm && strncmp(name, "out_head.", 9) == 0) || strstr(name, ".lora.")) return NULL;
    char plain[ATTN_PARAM_NAME_MAX + 8];
    const char *lin = strstr(name, ".linear.");
    if (lin)
        snprintf(plain, sizeof plain, "%.*s.%s", (int)(lin - name), name, lin + 8);
    else
        snprintf(plain, sizeof plain, "%s", name);
    const attn_param *p = attn_param_list_find(base, plain);
    if (!p && strcmp(plain, "out_head.weight") == 0)
        p = attn_param_list_find(base, "tok_emb.weight");
    return p;
}

static attn_status copy_base(attn_gpt *m, const attn_gpt *base, int lm, attn_error *err) {
    const attn_param_list *L = attn_gpt_params(m), *BL = attn_gpt_params(base);
    for (int i = 0; i < L->count; i++) {
        const attn_param *p = &L->items[i];
        if ((!lm && strncmp(p->name, "out_head.", 9) == 0) || strstr(p->name, ".lora.")) continue;
        const attn_param *q = base_of(BL, p->name, lm);
        if (!q || q->numel != p->numel)
            return attn_fail(err, ATTN_ERR_STATE, "the base model has no %s of %zu values", p->name,
                             p->numel);
        memcpy(p->data, q->data, p->numel * sizeof(float));
    }
    return ATTN_OK;
}

static attn_param *find(attn_gpt *m, const char *name) {
    return (attn_param *)attn_param_list_find(attn_gpt_params(m), name);
}

/* torch.manual_seed(seed); nn.Linear(emb, n): the weight, then the bias.
 * With LoRA, reseeded, appendix E's four iterator draws, then each A in
 * the table's order (replace_linear_with_lora's). A language head (lm):
 * no head drawn, the A's right after the seed. */
/* Each adapter's A in the table's order (replace_linear_with_lora's). */
static void draw_adapters(attn_gpt *m, const attn_classify_config *c, attn_rng *rng) {
    if (!c->lora_rank) return;
    const attn_param_list *L = attn_gpt_params(m);
    for (int i = 0; i < L->count; i++)
        if (L->items[i].role == ATTN_ROLE_LORA_A)
            attn_lora_draw(rng, L->items[i].data, L->items[i].numel, c->lora_rank);
}

static void draw_head(attn_gpt *m, const attn_classify_config *c, int lm) {
    attn_rng rng;
    attn_rng_seed(&rng, c->seed);
    if (lm) {
        draw_adapters(m, c, &rng);
        return;
    }
    attn_param *w = find(m, c->lora_rank ? "out_head.linear.weight" : "out_head.weight");
    attn_param *b = find(m, c->lora_rank ? "out_head.linear.bias" : "out_head.bias");
    const int C = m->cfg.emb_dim;
    attn_linear_draw(&rng, w->data, w->numel, C, 0);
    attn_linear_draw(&rng, b->data, b->numel, C, 1);
    if (!c->lora_rank) return;
    attn_rng_seed(&rng, c->seed);
    for (int k = 0; k < 4; k++)
        (void)attn_rng_int64(&rng);
    draw_adapters(m, c, &rng);
}

attn_status attn_finetune_set_trainable(attn_gpt *m, const attn_classify_config *c,
                                        attn_error *err) {
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
    attn_status st = attn_gpt_check_fp32(base, "a classifier from the model", err);
    if (st) return st;
    if (n_classes < 0 || c->lora_rank < 0 || (c->lora_rank && !(c->lora_alpha > 0)))
        return attn_fail(
            err, ATTN_ERR_INVALID_ARG,
            "a fine-tuned model needs n_classes >= 0 (got %d) and a LoRA rank >= 0 with "
            "alpha > 0",
            n_classes);
    attn_gpt_config cfg = base->cfg;
    cfg.tie_weights = 0; /* the book loads GPT-2 untied; the head is new anyway */
    const attn_gpt_build o = {.head_width = n_classes,
                              .head_bias = n_classes > 0,
                              .lora_rank = c->lora_rank,
                              .lora_alpha = c->lora_rank ? c->lora_alpha / (float)c->lora_rank : 0};
    attn_status s = attn_gpt_init_family(out, &cfg, NULL, &o, NULL, err);
    if (s) return s;
    if ((s = copy_base(out, base, n_classes == 0, err)) == ATTN_OK) {
        draw_head(out, c, n_classes == 0);
        s = attn_finetune_set_trainable(out, c, err);
    }
    if (s) attn_gpt_free(out);
    return s;
}

/* ------------------------------------------------------------ the task */

/* A classifier's two sets, for the loop. */
typedef struct class_sets {
    const attn_class_data *d[2];
    int width;
} class_sets;

/* Each row padded to max_len; its targets -100 but the last position's
 * label (the book's loss on model(x)[:, -1, :]). */
static void class_fill(void *user, int set, const size_t *rows, size_t n, int B, int32_t *x,
                       int32_t *y, int *T_out) {
    const attn_class_data *d = ((const class_sets *)user)->d[set];
    const size_t T = (size_t)d->max_len;
    for (size_t b = 0; b < (size_t)B; b++) {
        const size_t r = rows[b < n ? b : 0];
        memcpy(x + b * T, d->ids + r * T, T * sizeof(int32_t));
        for (size_t t = 0; t < T; t++)
            y[b * T + t] = ATTN_IGNORE_INDEX;
        if (b < n) y[b * T + T - 1] = d->labels[r];
    }
    *T_out = (int)T;
}

/* Right predictions among the batch's first n rows (torch.argmax: the
 * first of equal maxima). */
static size_t class_right(void *user, const attn_gpt_acts *a, int set, const size_t *rows,
                          size_t n) {
    const class_sets *cs = user;
    size_t right = 0;
    const size_t T = (size_t)a->T, V = (size_t)cs->width;
    for (size_t b = 0; b < n; b++) {
        const float *row = a->logits + (b * T + T - 1) * V;
        size_t best = 0;
        for (size_t v = 1; v < V; v++)
            best = row[v] > row[best] ? v : best;
        right += (int32_t)best == cs->d[set]->labels[rows[b]];
    }
    return right;
}

/* After an epoch: calc_accuracy_loader of eval_iter batches of each. */
static attn_status class_end_epoch(ft_run *r, int epoch, attn_error *err) {
    attn_classify_result *res = r->res;
    attn_status s = ft_measure(r, 1, r->c->eval_iter, &res->train_acc, &res->val_acc, err);
    return s ? s : ft_report(r, FT_H_EPOCH, epoch, r->st.step, res->train_acc, res->val_acc, err);
}

static attn_status check_sets(const attn_gpt *m, const attn_class_data *train,
                              const attn_class_data *val, attn_error *err) {
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

attn_status attn_classify_train(attn_gpt *m, const attn_class_data *train,
                                const attn_class_data *val, const attn_classify_config *c,
                                const attn_classify_events *ev, attn_classify_result *res,
                                attn_error *err) {
    memset(res, 0, sizeof *res);
    res->train_acc = res->val_acc = res->final_train_acc = res->final_val_acc = NAN;
    attn_status s = check_sets(m, train, val, err);
    if (s) return s;
    class_sets cs = {{train, val}, attn_gpt_head_width(m)};
    const ft_task task = {&cs, {train->n, val->n}, class_fill, class_right, class_end_epoch};
    ft_run r;
    s = ft_run_init(&r, m, &task, train->max_len, c, ev, res, 1, err);
    r.task = "classify";
    for (int k = 0; k < 2; k++) {
        const attn_class_data *d = cs.d[k];
        const size_t n = d->n, T = (size_t)d->max_len;
        r.data_digest = ft_digest(k ? r.data_digest : FT_DIGEST0, &n, sizeof n);
        r.data_digest = ft_digest(r.data_digest, &T, sizeof T);
        r.data_digest = ft_digest(r.data_digest, d->ids, n * T * sizeof *d->ids);
        r.data_digest = ft_digest(r.data_digest, d->labels, n * sizeof *d->labels);
    }
    if (!s) s = ft_resume(&r, err);
    if (c->ckpt && c->ckpt->check_only) {
        ft_run_free(&r);
        return s;
    }
    const int done = r.st.finished;
    if (!s && !done) s = ft_epochs(&r, err);
    /* ch06.ipynb's after training: whole loaders (the train one shuffled) */
    if (!s && !done) s = ft_measure(&r, 1, 0, &res->final_train_acc, &res->final_val_acc, err);
    if (!s && !done)
        s = ft_report(&r, FT_H_FINAL, r.st.epoch, r.st.step, res->final_train_acc,
                      res->final_val_acc, err);
    r.st.finished = 1;
    if (!s && !done) s = ft_save(&r, err);
    ft_run_free(&r);
    return s;
}

/* A set in file order through the loop's loader (no training). */
static attn_status class_pass(attn_gpt *m, const attn_class_data *d, int batch_size,
                              int num_batches, double *acc, attn_error *err) {
    class_sets cs = {{d, d}, attn_gpt_head_width(m)};
    const ft_task task = {&cs, {d->n, d->n}, class_fill, class_right, class_end_epoch};
    attn_classify_config c = attn_classify_defaults();
    c.batch_size = batch_size;
    attn_classify_result res;
    ft_run r;
    attn_status s = ft_run_init(&r, m, &task, d->max_len, &c, NULL, &res, 0, err);
    if (!s) s = ft_loader(&r, FT_VAL, r.ident, d->n, 1, num_batches, acc, err);
    ft_run_free(&r);
    return s;
}

attn_status attn_classify_logits(attn_gpt *m, const attn_class_data *d, size_t first, size_t n,
                                 float *logits, attn_error *err) {
    if (first > d->n || n > d->n - first || n == 0 || n > 4096)
        return attn_fail(err, ATTN_ERR_INVALID_ARG, "rows [%zu, %zu) outside the set's %zu", first,
                         first + n, d->n);
    size_t *rows = malloc(n * sizeof *rows);
    const size_t T = (size_t)d->max_len, V = (size_t)attn_gpt_head_width(m);
    int32_t *x = malloc(n * T * sizeof *x), *y = malloc(n * T * sizeof *y);
    attn_gpt_acts a;
    memset(&a, 0, sizeof a);
    attn_status s = rows && x && y ? ATTN_OK : attn_fail(err, ATTN_ERR_NOMEM, "out of memory");
    if (!s) s = attn_gpt_acts_init(&a, m, (int)n, (int)T, err);
    if (!s) {
        for (size_t i = 0; i < n; i++)
            rows[i] = first + i;
        class_sets cs = {{d, d}, (int)V};
        int Tb;
        class_fill(&cs, 0, rows, n, (int)n, x, y, &Tb);
        s = attn_gpt_forward(m, x, NULL, (int)n, Tb, NULL, &a, NULL, err);
    }
    for (size_t b = 0; !s && b < n; b++)
        memcpy(logits + b * V, a.logits + (b * T + T - 1) * V, V * sizeof(float));
    attn_gpt_acts_free(&a);
    free(rows);
    free(x);
    free(y);
    return s;
}

attn_status attn_classify_accuracy(attn_gpt *m, const attn_class_data *d, int batch_size,
                                   int num_batches, double *acc, attn_error *err) {
    if (batch_size < 1 || batch_size > 4096 || d->n == 0)
        return attn_fail(err, ATTN_ERR_INVALID_ARG, "batch_size in [1, 4096] and rows needed");
    if (d->max_label >= attn_gpt_head_width(m))
        return attn_fail(err, ATTN_ERR_INVALID_ARG, "a label is outside the head's %d classes",
                         attn_gpt_head_width(m));
    return class_pass(m, d, batch_size, num_batches, acc, err);
}
