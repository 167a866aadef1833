/* attn train --task instruct (chapter 7's gpt_instruction_finetuning.py):
 * the library's run in its folder (attn/finetune_run.h: the training, the
 * per-epoch samples, the test split's responses), its lines printed as the
 * script prints them. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn/gpt_family.h"
#include "clock.h"
#include "finetune.h"

/* ------------------------------------------------------------ the run */

/* Python's repr of a float: the shortest text that reads back the same. */
static void py_repr(double v, char *buf, size_t cap) {
    for (int p = 1; p <= 17; p++) {
        snprintf(buf, cap, "%.*g", p, v);
        if (strtod(buf, NULL) == v) break;
    }
    if (isfinite(v) && !strpbrk(buf, ".e")) strncat(buf, ".0", cap - strlen(buf) - 1);
}

static void on_initial(void *user, double tl, double vl) {
    char a[40], b[40];
    py_repr(tl, a, sizeof a);
    py_repr(vl, b, sizeof b);
    printf("Initial losses\n   Training loss: %s\n   Validation loss: %s\n", a, b);
    fflush(stdout);
    (void)user;
}

/* generate_and_print_sample's print. */
static void on_sample_line(void *user, int epoch, const char *line) {
    (void)user, (void)epoch;
    printf("%s\n", line);
    fflush(stdout);
}

/* The sets of the book's split of d (--limit cuts each). */
static int split_sets(const finetune_request *rq, const attn_instruct_data *d,
                      attn_instruct_data set[3]) {
    size_t first[3], count[3];
    attn_instruct_split(d->n, (size_t)rq->limit, first, count);
    attn_error err;
    for (int k = 0; k < 3; k++)
        if (attn_instruct_view(d, first[k], count[k], &set[k], &err)) {
            fprintf(stderr, "attn train: %s\n", err.msg);
            return 1;
        }
    printf("Training set length: %zu\nValidation set length: %zu\nTest set length: %zu\n", count[0],
           count[2], count[1]);
    printf("--------------------------------------------------\n");
    if (count[0] < (size_t)rq->cfg.batch_size) {
        fprintf(stderr,
                "attn train: %s: the training split has %zu entries, fewer than one batch of %d "
                "(the book's loader drops the last partial batch)\n",
                rq->data, count[0], rq->cfg.batch_size);
        return 1;
    }
    return 0;
}

static void print_plan(const finetune_request *rq, const attn_gpt *m, const attn_instruct_data *s) {
    size_t trainable = 0;
    const attn_param_list *L = attn_gpt_params(m);
    for (int i = 0; i < L->count; i++)
        trainable += L->items[i].trainable ? L->items[i].numel : 0;
    printf("instruct: train %zu entries (longest %zu tokens), val %zu, test %zu; %zu trainable "
           "parameters of %zu; %d epochs of %zu steps%s\n",
           s[0].n, s[0].longest, s[2].n, s[1].n, trainable, L->values_numel, rq->cfg.epochs,
           s[0].n / (size_t)rq->cfg.batch_size, rq->cfg.mask_prompt ? "; prompts masked" : "");
}

/* Training, the samples, the responses and the run's files. */
static int run_instruct(const finetune_request *rq, attn_gpt *m, const attn_tokenizer *tok,
                        const attn_instruct_data *set) {
    const attn_classifier_info info = {
        0,          m->cfg.context_length,   rq->cfg.lora_rank, rq->cfg.lora_alpha,
        "instruct", trainable_name(&rq->cfg)};
    finetune_folder folder;
    int rc = finetune_claim(rq, tok, &info, &folder);
    if (rc >= 0) return rc;
    const attn_classify_events evu = {NULL, finetune_on_eval, NULL, NULL, on_initial,
                                      NULL, on_sample_line};
    const attn_finetune_sets sets = {NULL, NULL, &set[0], &set[2], &set[1]};
    attn_classify_result res;
    attn_error err;
    const double t0 = attn_now_s();
    rc = attn_finetune_folder_train(&folder, m, &sets, &rq->cfg, &evu, &res, &err)
             ? finetune_train_failed(rq, &err)
             : 0;
    if (!rc) {
        finetune_say_resumed(rq, &res);
        printf("Training completed in %.2f minutes.\n", (attn_now_s() - t0) / 60);
        printf("--------------------------------------------------\nGenerating responses\n");
        fflush(stdout);
        rc = finetune_save_run(&folder, m, &sets);
    }
    if (!rc)
        printf("Responses saved as %s/responses.json\n"
               "instruction model in %s (attn generate %s --instruction TEXT)\n",
               rq->out, rq->out, rq->out);
    finetune_release(&folder, rc);
    return rc;
}

/* --resume: the run in rq->out is this one (its task, data, settings), read
 * only, before the folder is locked: 0, else the exit code. */
static int resume_check(const finetune_request *rq, attn_gpt *m, const attn_tokenizer *tok,
                        const attn_instruct_data *set) {
    const attn_classifier_info info = {
        0,          m->cfg.context_length,   rq->cfg.lora_rank, rq->cfg.lora_alpha,
        "instruct", trainable_name(&rq->cfg)};
    attn_finetune_ckpt check = {rq->out, tok, &info, 1, 1};
    attn_classify_config c = rq->cfg;
    c.ckpt = &check;
    attn_classify_result res;
    attn_error err;
    return attn_instruct_train(m, &set[0], &set[2], &c, NULL, &res, &err)
               ? finetune_train_failed(rq, &err)
               : 0;
}

int finetune_instruct(const finetune_request *rq, const attn_gpt *base, const attn_tokenizer *tok) {
    attn_error err;
    attn_instruct_data all, set[3];
    if (attn_instruct_data_read(rq->data, tok, &all, &err)) {
        fprintf(stderr, "attn train: %s\n", err.msg);
        return 1;
    }
    int rc = split_sets(rq, &all, set);
    attn_gpt m;
    attn_precision prec = ATTN_PRECISION_FP32;
    attn_precision_parse(rq->precision, &prec, &err);
    if (!rc && (attn_classifier_from(&m, base, 0, &rq->cfg, &err) ||
                (prec != ATTN_PRECISION_FP32 && attn_gpt_set_precision(&m, prec, &err)))) {
        fprintf(stderr, "attn train: %s\n", err.msg);
        rc = 1;
    } else if (!rc) {
        print_plan(rq, &m, set);
        if (rq->resume) rc = resume_check(rq, &m, tok, set);
        if (rc) {
        } else if (rq->dry_run) {
            const size_t L = set[0].longest > set[2].longest ? set[0].longest : set[2].longest;
            const int T =
                L < (size_t)m.cfg.context_length ? (int)(L ? L : 1) : m.cfg.context_length;
            const int64_t steps =
                (int64_t)rq->cfg.epochs * (int64_t)(set[0].n / (size_t)rq->cfg.batch_size);
            finetune_print_dry_run(rq, &m, T, steps, (double)(all.off[all.n] * 4 + all.n * 16));
        } else {
            rc = run_instruct(rq, &m, tok, set);
        }
        attn_gpt_free(&m);
    }
    attn_instruct_data_free(&all);
    return rc;
}
