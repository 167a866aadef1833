/* attn train --task classify (chapter 6, appendix E's LoRA) and
 * attn classify: the library's attn/finetune.h, its lines printed as the
 * book's script prints them. */
#define _POSIX_C_SOURCE 200809L /* stat, opendir */
#include "finetune.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "attn/checkpoint.h"
#include "attn/cost.h"
#include "attn/fileio.h"
#include "attn/gpt_family.h"
#include "attn/memory_plan.h"
#include "attn/weights_format.h"
#include "commands.h"
#include "threads.h"

const char *const finetune_task_choices[] = {"lm", "classify", "instruct", NULL};

/* --------------------------------------------------------- the training */

void finetune_on_eval(void *user, int epoch, int64_t step, double tl, double vl) {
    (void)user;
    printf("Ep %d (Step %06lld): Train loss %.3f, Val loss %.3f\n", epoch, (long long)step, tl, vl);
    fflush(stdout);
}

static void on_epoch(void *user, int epoch, double ta, double va) {
    (void)user, (void)epoch;
    printf("Training accuracy: %.2f%% | Validation accuracy: %.2f%%\n", ta * 100, va * 100);
    fflush(stdout);
}

/* The training and val sets (val padded as the training set). */
static int read_sets(const finetune_request *rq, const attn_tokenizer *tok, int context,
                     attn_class_data *tr, attn_class_data *va) {
    attn_error err;
    memset(va, 0, sizeof *va);
    if (attn_class_data_read(rq->data, tok, 0, context, tr, &err) ||
        (rq->val && attn_class_data_read(rq->val, tok, tr->max_len, context, va, &err))) {
        fprintf(stderr, "attn train: %s\n", err.msg);
        attn_class_data_free(tr);
        return 1;
    }
    if (tr->truncated)
        printf("%s: %zu texts are longer than the context (%d tokens); cut to it, as the book's "
               "SpamDataset does\n",
               rq->data, tr->truncated, context);
    if (va->truncated)
        printf("%s: %zu texts are longer than the training set's %d tokens; cut to them, as the "
               "book's SpamDataset does\n",
               rq->val, va->truncated, tr->max_len);
    return -1;
}

int finetune_save_run(finetune_folder *f, const attn_gpt *m, const attn_finetune_sets *sets) {
    attn_error err;
    if (!attn_finetune_folder_finish(f, m, sets, &err)) return 0;
    fprintf(stderr, "attn train: %s\n", err.msg);
    return 1;
}

int finetune_claim(const finetune_request *rq, const attn_tokenizer *tok,
                   const attn_classifier_info *info, finetune_folder *f) {
    attn_error err;
    char who[ATTN_CKPT_PATH_MAX + 64];
    snprintf(who, sizeof who, "attn train --task %s --out %s", rq->task, rq->out);
    if (attn_finetune_folder_open(f, rq->out, who, rq->resume, rq->init_from, tok, info, &err)) {
        fprintf(stderr, "attn train: %s%s\n", err.msg,
                f->claim.request_error == 1 ? "; continue it with --resume" : "");
        return f->claim.request_error ? 2 : 1;
    }
    if (f->claim.repaired[0]) fprintf(stderr, "attn train: %s\n", f->claim.repaired);
    if (f->claim.warning[0]) fprintf(stderr, "attn train: warning: %s\n", f->claim.warning);
    return -1;
}

void finetune_release(finetune_folder *f, int rc) {
    attn_finetune_folder_close(f, rc != 0);
}

int finetune_train_failed(const finetune_request *rq, const attn_error *err) {
    fprintf(stderr, "attn train: %s\n", err->msg);
    return rq->resume && err->code == ATTN_ERR_INVALID_ARG ? 2 : 1;
}

void finetune_say_resumed(const finetune_request *rq, const attn_classify_result *res) {
    if (res->resumed_step < 0) return;
    fprintf(stderr,
            res->finished ? "attn train: %s had finished (step %lld): nothing trained; its lines "
                            "printed again\n"
                          : "attn train: resumed %s at step %lld (epoch %d); the lines before "
                            "it printed again from its checkpoint\n",
            rq->out, (long long)res->resumed_step, res->resumed_epoch);
}

void finetune_print_dry_run(const finetune_request *rq, const attn_gpt *m, int T, int64_t steps,
                            double data_bytes) {
    const attn_classify_config *c = &rq->cfg;
    int64_t at = -1;
    char run[ATTN_CKPT_PATH_MAX + 64];
    if (rq->resume && attn_ckpt_exists(rq->out, &at))
        snprintf(run, sizeof run, "%s: resumes from its checkpoint at step %lld of %lld", rq->out,
                 (long long)at, (long long)steps);
    else
        snprintf(run, sizeof run, "%s: a new run from %s", rq->out, rq->init_from);
    attn_mem_run mr = {.mode = ATTN_MEM_TRAIN,
                       .batch = c->batch_size,
                       .tokens = T,
                       .resume = rq->resume,
                       .precision = m->precision,
                       .threads = (int)rq->threads,
                       .gpt2_tokenizer = 1,
                       .data_bytes = data_bytes};
    attn_mem_run_of_model(m, &mr); /* the head's width, the frozen set's saving */
    attn_mem_plan mp;
    attn_memory_plan(&m->cfg, &mr, &mp);
    char parts[512];
    const double flops =
        attn_gpt_flops_step_frozen(&m->cfg, mr.head_width, c->batch_size, T, mr.frozen_blocks);
    /* the state file keeps every tensor's moments, the frozen ones' zeros */
    const double ckpt = 3.0 * mr.params * sizeof(float);
    printf("run         %s\n"
           "memory      ~%.1f MiB: %s\n"
           "compute     at most %.3g GFLOP a step (%d rows of %d tokens, the backward through "
           "%d of %d blocks), %.3g TFLOP in %lld steps\n"
           "checkpoints %s/ckpt-<step> after every evaluation (every %d steps) and epoch, and at "
           "the end: ~%.1f MiB each (model and AdamW), the older one removed\n",
           run, mp.total / 1048576.0, attn_memory_plan_text(&mp, parts, sizeof parts), flops / 1e9,
           c->batch_size, T, m->cfg.n_layers - mr.frozen_blocks, m->cfg.n_layers,
           flops * (double)steps / 1e12, (long long)steps, rq->out, c->eval_freq, ckpt / 1048576.0);
}

static void print_plan(const finetune_request *rq, const attn_gpt *m, const attn_class_data *tr,
                       const attn_class_data *va, int n_classes) {
    size_t trainable = 0;
    const attn_param_list *L = attn_gpt_params(m);
    for (int i = 0; i < L->count; i++)
        trainable += L->items[i].trainable ? L->items[i].numel : 0;
    const size_t batches = tr->n / (size_t)rq->cfg.batch_size;
    printf("classify: %d classes; train %zu rows, val %zu, padded to %d tokens; %zu trainable "
           "parameters of %zu; %d epochs of %zu steps\n",
           n_classes, tr->n, va->n, tr->max_len, trainable, L->values_numel, rq->cfg.epochs,
           batches);
}

/* Everything after the sets are read: the model, the run, the save. */
static int train_classifier(const finetune_request *rq, attn_gpt *base, const attn_tokenizer *tok,
                            const attn_class_data *tr, const attn_class_data *va) {
    attn_error err;
    attn_precision prec = ATTN_PRECISION_FP32;
    attn_precision_parse(rq->precision, &prec, &err);
    const int n_classes = (tr->max_label > va->max_label ? tr->max_label : va->max_label) + 1;
    attn_gpt m;
    if (attn_classifier_from(&m, base, n_classes, &rq->cfg, &err) ||
        (prec != ATTN_PRECISION_FP32 && attn_gpt_set_precision(&m, prec, &err))) {
        fprintf(stderr, "attn train: %s\n", err.msg);
        return 1;
    }
    print_plan(rq, &m, tr, va, n_classes);
    const attn_classifier_info info = {n_classes,          tr->max_len, rq->cfg.lora_rank,
                                       rq->cfg.lora_alpha, "classify",  trainable_name(&rq->cfg)};
    finetune_request run = *rq;
    attn_finetune_ckpt check = {rq->out, tok, &info, 1, 1};
    run.cfg.ckpt = &check;
    attn_classify_result res;
    if (rq->resume && attn_classify_train(&m, tr, va, &run.cfg, NULL, &res, &err)) {
        attn_gpt_free(&m);
        return finetune_train_failed(rq, &err);
    }
    if (rq->dry_run) {
        const int64_t steps =
            (int64_t)rq->cfg.epochs * (int64_t)(tr->n / (size_t)rq->cfg.batch_size);
        finetune_print_dry_run(rq, &m, tr->max_len, steps,
                               (double)(tr->n + va->n) * (double)(tr->max_len + 1) * 4);
        attn_gpt_free(&m);
        return 0;
    }
    finetune_folder folder;
    int rc = finetune_claim(rq, tok, &info, &folder);
    if (rc >= 0) {
        attn_gpt_free(&m);
        return rc;
    }
    const attn_classify_events ev = {NULL, finetune_on_eval, on_epoch, NULL, NULL, NULL, NULL};
    const attn_finetune_sets sets = {tr, va, NULL, NULL, NULL};
    rc = attn_finetune_folder_train(&folder, &m, &sets, &rq->cfg, &ev, &res, &err)
             ? finetune_train_failed(rq, &err)
             : 0;
    if (!rc) {
        finetune_say_resumed(rq, &res);
        printf("Final accuracy: training %.2f%% | validation %.2f%% (whole sets)\n",
               res.final_train_acc * 100, res.final_val_acc * 100);
        rc = finetune_save_run(&folder, &m, &sets);
    }
    if (!rc) printf("classifier in %s (attn classify %s TEXT...)\n", rq->out, rq->out);
    finetune_release(&folder, rc);
    attn_gpt_free(&m);
    return rc;
}

int finetune_train(const finetune_request *rq) {
    const char *missing = !rq->init_from ? "--init-from MODEL (the model to fine-tune)"
                          : !rq->data    ? "--data FILE (the training set)"
                          : !rq->out     ? "--out RUN (a new folder)"
                                         : NULL;
    if (missing) {
        fprintf(stderr, "attn train: --task %s needs %s\n", rq->task, missing);
        return 2;
    }
    attn_error err;
    if (attn_finetune_check_out(rq->out, rq->task, rq->resume, "--", &err)) {
        fprintf(stderr, "attn train: %s\n", err.msg);
        return err.code == ATTN_ERR_STATE ? 1 : 2;
    }
    char task[16];
    if (attn_model_task(rq->init_from, task, &err) == ATTN_OK && strcmp(task, "lm") != 0 &&
        strcmp(task, "instruct") != 0) {
        fprintf(stderr,
                "attn train: --task %s: %s is a model of task %s; --init-from takes a language "
                "model\n",
                rq->task, rq->init_from, task);
        return 1;
    }
    cli_use_threads((int)rq->threads, 1);
    attn_gpt base;
    attn_tokenizer tok;
    const attn_gpt_open_options open = {.n_heads = rq->n_heads};
    if (attn_gpt_open(rq->init_from, &open, &base, &tok, NULL, NULL, &err)) {
        fprintf(stderr, "attn train: %s\n", err.msg);
        return 1;
    }
    attn_class_data tr, va;
    int rc = strcmp(rq->task, "instruct") == 0
                 ? finetune_instruct(rq, &base, &tok)
                 : read_sets(rq, &tok, base.cfg.context_length, &tr, &va);
    if (rc < 0) {
        rc = train_classifier(rq, &base, &tok, &tr, &va);
        attn_class_data_free(&tr);
        attn_class_data_free(&va);
    }
    attn_gpt_free(&base);
    attn_tokenizer_free(&tok);
    return rc;
}

/* ------------------------------------------------------- attn classify */

typedef struct classify_opts {
    const char *checkpoint, *data;
    long long batch_size, threads;
} classify_opts;

enum { C_CHECKPOINT, C_DATA, C_BATCH, C_THREADS, C_OPT_COUNT };
#define COFF(f) offsetof(classify_opts, f)
static const cli_option classify_rows[C_OPT_COUNT] = {
    [C_CHECKPOINT] = {"checkpoint", CLI_STRING, "RUN", COFF(checkpoint), .required = 1,
                      .positional = 1,
                      .help = "the classifier (attn train --task classify's folder)"},
    [C_DATA] = {"data", CLI_STRING, "FILE", COFF(data),
                .help = "a labelled CSV or TSV: print the accuracy"},
    [C_BATCH] = {"batch-size", CLI_INT, "N", COFF(batch_size), 1, 4096, .def = "8",
                 .help = "rows a forward (the accuracy is the same)"},
    [C_THREADS] = CLI_THREADS_OPTION(COFF(threads)),
};
CLI_TABLE_CHECK(classify_rows, C_OPT_COUNT);

const cli_command classify_cli = {
    "classify",
    "attn classify RUN TEXT... | attn classify RUN --data FILE",
    "  Runs a classifier made by attn train --task classify: each TEXT's label\n"
    "  (the argmax of the last position's logits) and its classes' probabilities\n"
    "  (softmax), the text encoded, cut and padded as in training (the book's\n"
    "  classify_review); with --data, the accuracy over the file's rows\n"
    "  (calc_accuracy_loader).\n",
    classify_rows,
    C_OPT_COUNT,
    31};

/* The texts as a set padded to the classifier's length. */
static int texts_set(const cli_parsed *p, const attn_tokenizer *tok, int L, attn_class_data *d) {
    attn_error err;
    memset(d, 0, sizeof *d);
    d->n = (size_t)p->n_positional;
    d->max_len = L;
    d->ids = malloc(d->n * (size_t)L * sizeof *d->ids);
    d->labels = calloc(d->n, sizeof *d->labels);
    int rc = d->ids && d->labels ? -1 : 1;
    if (rc > 0) fprintf(stderr, "attn classify: out of memory\n");
    for (size_t i = 0; rc < 0 && i < d->n; i++) {
        const char *t = p->positional[i];
        if (attn_class_text_row(tok, t, strlen(t), L, d->ids + i * (size_t)L, &err)) {
            fprintf(stderr, "attn classify: %s\n", err.msg);
            rc = 1;
        }
    }
    if (rc > 0) attn_class_data_free(d);
    return rc;
}

static int print_texts(attn_gpt *m, const attn_class_data *d, const cli_parsed *p) {
    const int V = attn_gpt_head_width(m);
    float *lg = malloc((size_t)V * sizeof *lg);
    double *pr = malloc((size_t)V * sizeof *pr);
    attn_error err;
    int rc = lg && pr ? 0 : 1;
    for (size_t i = 0; !rc && i < d->n; i++) {
        if (attn_classify_logits(m, d, i, 1, lg, &err)) {
            fprintf(stderr, "attn classify: %s\n", err.msg);
            rc = 1;
            break;
        }
        printf("%d\t", attn_class_softmax(lg, V, pr));
        for (int v = 0; v < V; v++)
            printf("%s%.6f", v ? " " : "", pr[v]);
        printf("\t%s\n", p->positional[i]);
    }
    free(lg);
    free(pr);
    return rc;
}

static int classify_with(const classify_opts *o, const cli_parsed *p, attn_gpt *m,
                         const attn_tokenizer *tok, const attn_classifier_info *info) {
    attn_error err;
    attn_class_data d;
    if (o->data) {
        double acc;
        if (attn_class_data_read(o->data, tok, info->max_len, m->cfg.context_length, &d, &err) ||
            attn_classify_accuracy(m, &d, (int)o->batch_size, 0, &acc, &err)) {
            fprintf(stderr, "attn classify: %s\n", err.msg);
            attn_class_data_free(&d);
            return 1;
        }
        printf("accuracy: %.2f%% (%.0f of %zu rows of %s)\n", acc * 100, acc * (double)d.n, d.n,
               o->data);
        attn_class_data_free(&d);
        return 0;
    }
    int rc = texts_set(p, tok, info->max_len, &d);
    if (rc < 0) rc = print_texts(m, &d, p);
    attn_class_data_free(&d);
    return rc;
}

int cmd_classify(int argc, char **argv) {
    classify_opts o;
    cli_parsed p;
    const int prc = cli_parse(&classify_cli, argc, argv, &o, &p);
    if (prc) return prc == CLI_HELP ? 0 : prc;
    if (!o.data == !p.n_positional) {
        fprintf(stderr, "attn classify: give TEXT... or --data FILE (one of them)\n");
        return 2;
    }
    cli_use_threads((int)o.threads, 1);
    attn_gpt m;
    attn_tokenizer tok;
    attn_classifier_info info;
    attn_error err;
    if (attn_classifier_load(o.checkpoint, &m, &tok, &info, &err)) {
        fprintf(stderr, "attn classify: %s\n", err.msg);
        return 1;
    }
    const int rc = classify_with(&o, &p, &m, &tok, &info);
    attn_gpt_free(&m);
    attn_tokenizer_free(&tok);
    return rc;
}
