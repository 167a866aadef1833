/* finetune.h — `attn train --task classify` and `attn classify`
 * (cli/finetune.c, attn/finetune.h). */
#ifndef ATTN_CLI_FINETUNE_H
#define ATTN_CLI_FINETUNE_H

#include "attn/finetune.h"

/* --task's choices: lm (the trainer's), classify. */
extern const char *const finetune_task_choices[];

/* What `attn train --task classify` was given (cmd_train.c checks that no
 * other option was). */
typedef struct finetune_request {
    const char *task, *data, *val, *out, *init_from, *precision;
    int dry_run;
    long long threads;
    int n_heads; /* --n-heads: 0, the file's */
    attn_classify_config cfg;
} finetune_request;

/* Runs it: the exit code (2 usage, 1 a failure, nothing written). */
int finetune_train(const finetune_request *rq);

#endif
