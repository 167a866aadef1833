/* finetune.h — `attn train --task classify` and `attn classify`
 * (cli/finetune.c, attn/finetune.h). */
#ifndef ATTN_CLI_FINETUNE_H
#define ATTN_CLI_FINETUNE_H

#include "attn/finetune.h"
#include "attn/finetune_run.h"

/* --task's choices: lm (the trainer's), classify. */
extern const char *const finetune_task_choices[];

/* What `attn train --task classify` was given (cmd_train.c checks that no
 * other option was). */
typedef struct finetune_request {
    const char *task, *data, *val, *out, *init_from, *precision;
    int dry_run, resume;
    long long threads;
    int n_heads;     /* --n-heads: 0, the file's */
    long long limit; /* instruct: each split cut to its first N entries (0: whole) */
    attn_classify_config cfg;
} finetune_request;

/* Runs it: the exit code (2 usage, 1 a failure, nothing written). */
int finetune_train(const finetune_request *rq);

/* ------------------------------------------- shared by the two tasks */

/* What trains, as a run's metadata names it. */
static inline const char *trainable_name(const attn_classify_config *c) {
    return c->lora_rank ? "adapters" : attn_trainable_set_names()[c->trainable];
}

/* evaluate_model's line, as the book prints it. */
void finetune_on_eval(void *user, int epoch, int64_t step, double tl, double vl);

/* The run folder as the training holds it (attn/finetune_run.h). */
typedef attn_finetune_folder finetune_folder;

/* Claim rq->out for a run of a model of info (attn_finetune_folder_open),
 * what the claim repaired said: -1 to go on, else the exit code. */
int finetune_claim(const finetune_request *rq, const attn_tokenizer *tok,
                   const attn_classifier_info *info, finetune_folder *f);

/* After the run: rc as the command exits (a failure of training keeps the
 * checkpoints; only a folder the claim made and nothing wrote goes). */
void finetune_release(finetune_folder *f, int rc);

/* What a resumed or finished run says on stderr, and how the library's
 * error exits (a resume the checkpoint refuses: 2). */
int finetune_train_failed(const finetune_request *rq, const attn_error *err);
void finetune_say_resumed(const finetune_request *rq, const attn_classify_result *res);

/* The --dry-run plan: the run, memory (attn/memory_plan.h), compute
 * (attn/cost.h) and checkpoints of B rows of at most T tokens, steps in all. */
void finetune_print_dry_run(const finetune_request *rq, const attn_gpt *m, int T, int64_t steps,
                            double data_bytes);

/* RUN/log.csv (and instruct's RUN/responses.json) of m trained on sets
 * (attn_finetune_folder_finish): 0 or 1. */
int finetune_save_run(finetune_folder *f, const attn_gpt *m, const attn_finetune_sets *sets);

/* --task instruct on the opened base (cli/finetune_instruct.c): the exit
 * code. */
int finetune_instruct(const finetune_request *rq, const attn_gpt *base, const attn_tokenizer *tok);

#endif
