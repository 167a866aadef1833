/* Chapter 7's instruction fine-tuning (attn_instruct_train, attn/finetune.h)
 * as a task of the fine-tuning loop (finetune_loop.h): the book's
 * custom_collate_fn and gpt_instruction_finetuning.py's order of draws. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attn/cross_entropy.h"
#include "attn/finetune.h"
#include "attn/gpt_family.h"
#include "finetune_loop.h"

attn_classify_config attn_instruct_defaults(void) {
    attn_classify_config c = attn_classify_defaults();
    c.epochs = 2;
    c.eval_freq = 5;
    c.eval_iter = 5;
    c.trainable = ATTN_TRAIN_ALL;
    return c;
}

typedef struct instruct_sets {
    const attn_instruct_data *d[2];
    int allowed; /* allowed_max_length: the model's context */
    int mask_prompt;
} instruct_sets;

/* One row of custom_collate_fn: the entry, 50256 appended and padded to
 * T + 1; inputs the first T, targets the last T with every pad after the
 * first -100 (and the prompt's first plen - 1 with mask_prompt). */
static void collate_row(const int32_t *item, size_t len, int plen, int mask_prompt, size_t T,
                        int32_t *x, int32_t *y) {
    int pads = 0;
    for (size_t t = 0; t <= T; t++) {
        const int32_t v = t < len ? item[t] : ATTN_PAD_ID;
        if (t < T) x[t] = v;
        if (t == 0) continue;
        pads += v == ATTN_PAD_ID;
        y[t - 1] = v == ATTN_PAD_ID && pads > 1 ? ATTN_IGNORE_INDEX : v;
    }
    for (size_t t = 0; mask_prompt && plen > 1 && t < (size_t)(plen - 1) && t < T; t++)
        y[t] = ATTN_IGNORE_INDEX;
}

static void instruct_fill(void *user, int set, const size_t *rows, size_t n, int B, int32_t *x,
                          int32_t *y, int *T_out) {
    const instruct_sets *is = user;
    const attn_instruct_data *d = is->d[set];
    size_t T = 0; /* batch_max_length - 1, cut to allowed_max_length */
    for (size_t b = 0; b < n; b++) {
        const size_t len = d->off[rows[b] + 1] - d->off[rows[b]];
        T = len > T ? len : T;
    }
    T = T < (size_t)is->allowed ? T : (size_t)is->allowed;
    T = T ? T : 1;
    for (size_t b = 0; b < (size_t)B; b++) {
        const size_t r = rows[b < n ? b : 0];
        const int32_t *item = d->ids + d->off[r];
        collate_row(item, d->off[r + 1] - d->off[r], d->prompt_len[r], is->mask_prompt, T,
                    x + b * T, y + b * T);
        for (size_t t = 0; b >= n && t < T; t++)
            y[b * T + t] = ATTN_IGNORE_INDEX;
    }
    *T_out = (int)T;
}

/* generate_and_print_sample: the caller's hook, then (asked for with
 * on_sample_line) the script's line of the first validation entry's prompt
 * (the first training entry's when val is empty), kept for the checkpoints
 * so that a resume prints it again. */
static attn_status instruct_end_epoch(ft_run *r, int epoch, attn_error *err) {
    const attn_classify_events *ev = r->ev;
    if (ev && ev->on_sample && ev->on_sample(ev->user, epoch, r->m))
        return attn_fail(err, ATTN_ERR_STATE, "stopped after epoch %d's sample", epoch);
    if (!ev || !ev->on_sample_line) return ATTN_OK;
    const instruct_sets *is = r->t->user;
    const attn_instruct_data *d = is->d[FT_VAL]->n ? is->d[FT_VAL] : is->d[FT_TRAIN];
    const struct attn_classifier_info *info = r->c->ckpt->info;
    const float scale = info->lora_rank ? info->lora_alpha / (float)info->lora_rank : 0;
    char *start = attn_instruct_prompt(d->instruction[0], d->input[0]), *line = NULL;
    attn_status s = start ? attn_instruct_sample(r->m, scale, r->c->ckpt->tok, start, &line, err)
                          : attn_fail(err, ATTN_ERR_NOMEM, "out of memory for the sample");
    if (!s) s = ft_report_sample(r, epoch, r->st.step, line, err);
    free(start);
    free(line);
    return s;
}

/* n normal_ draws of a tensor, as attn_rng_normal takes them. */
static void skip_normal(attn_rng *rng, size_t n) {
    if (n < 16) { /* the scalar path keeps a spare: draw it */
        float tmp[16];
        attn_rng_normal(rng, tmp, n, 0.0f, 1.0f);
        return;
    }
    attn_rng_skip(rng, n + (n % 16 ? 16 : 0)); /* PyTorch redraws the last 16 */
}

/* The draws of the book's GPTModel(cfg) constructor (attn/gpt.h's book
 * init): the embeddings' normal_, then each Linear's kaiming_uniform_ and
 * bias (one word a value), the untied out_head last. */
static void skip_book_model(attn_rng *rng, const attn_gpt_config *c) {
    const size_t V = (size_t)c->vocab_size, C = (size_t)c->emb_dim;
    skip_normal(rng, V * C);
    skip_normal(rng, (size_t)c->context_length * C);
    const size_t per_block = 3 * C * C + (c->qkv_bias ? 3 * C : 0) /* W_query, W_key, W_value */
                             + C * C + C                           /* out_proj */
                             + 4 * C * C + 4 * C + 4 * C * C + C;  /* ff */
    attn_rng_skip(rng, (uint64_t)c->n_layers * per_block + V * C);
}

attn_status attn_instruct_train(attn_gpt *m, const attn_instruct_data *train,
                                const attn_instruct_data *val, const attn_classify_config *c,
                                const attn_classify_events *ev, attn_classify_result *res,
                                attn_error *err) {
    memset(res, 0, sizeof *res);
    res->train_acc = res->val_acc = res->final_train_acc = res->final_val_acc = NAN;
    if (attn_gpt_head_width(m) != m->cfg.vocab_size)
        return attn_fail(err, ATTN_ERR_INVALID_ARG,
                         "instruction fine-tuning needs a language head (vocab_size %d wide), "
                         "not %d classes",
                         m->cfg.vocab_size, attn_gpt_head_width(m));
    if (ev && ev->on_sample_line && !(c->ckpt && c->ckpt->tok && c->ckpt->info))
        return attn_fail(err, ATTN_ERR_INVALID_ARG,
                         "on_sample_line needs the run's checkpoints (cfg->ckpt): their tokenizer "
                         "makes the sample and they keep it");
    instruct_sets is = {{train, val}, m->cfg.context_length, c->mask_prompt};
    const ft_task task = {&is, {train->n, val->n}, instruct_fill, NULL, instruct_end_epoch};
    const size_t longest = train->longest > val->longest ? train->longest : val->longest;
    const int T_max = longest < (size_t)is.allowed ? (int)(longest ? longest : 1) : is.allowed;
    ft_run r;
    attn_status s = ft_run_init(&r, m, &task, T_max, c, ev, res, 1, err);
    r.task = "instruct";
    r.data_digest = FT_DIGEST0;
    for (int k = 0; k < 2; k++) {
        const attn_instruct_data *d = is.d[k];
        r.data_digest = ft_digest(r.data_digest, &d->n, sizeof d->n);
        r.data_digest = ft_digest(r.data_digest, d->off, (d->n + 1) * sizeof *d->off);
        r.data_digest = ft_digest(r.data_digest, d->ids + d->off[0],
                                  (d->off[d->n] - d->off[0]) * sizeof *d->ids);
        r.data_digest = ft_digest(r.data_digest, d->prompt_len, d->n * sizeof *d->prompt_len);
    }
    if (!s) s = ft_resume(&r, err);
    if (c->ckpt && c->ckpt->check_only) {
        ft_run_free(&r);
        return s;
    }
    const int fresh = res->resumed_step < 0, done = r.st.finished;
    if (!s && fresh) { /* "Initial losses", under the generator the model's constructor left */
        double tl, vl;
        skip_book_model(&r.rng, &m->cfg);
        s = ft_measure(&r, 0, 5, &tl, &vl, err);
        if (!s) s = ft_report(&r, FT_H_INITIAL, 0, 0, tl, vl, err);
        attn_rng_seed(&r.rng, c->seed);
    }
    if (!s && !done) s = ft_epochs(&r, err);
    r.st.finished = 1;
    if (!s && !done) s = ft_save(&r, err);
    ft_run_free(&r);
    return s;
}
