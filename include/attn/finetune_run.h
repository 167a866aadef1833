/* finetune_run.h — a fine-tuning run in its run folder (attn train --task
 * classify|instruct and attn.train(task=...) both run it so): the folder
 * checked and claimed (attn/train_setup.h), the training checkpointed after
 * every evaluation, epoch and at the end (attn_finetune_ckpt) and resumable,
 * and RUN/log.csv, every reported number at full precision:
 *
 *   kind,epoch,step,train,val
 *   initial_loss,,0,TL,VL          (instruct, before training)
 *   loss,EPOCH,STEP,TL,VL          (each evaluation)
 *   accuracy,EPOCH,,TA,VA          (classify, each epoch)
 *   final_accuracy,,STEPS,TA,VA    (classify, the whole sets at the end)
 *
 *   attn_finetune_check_out(out, "classify", resume, "--", &err);
 *   attn_finetune_folder_open(&f, out, who, resume, init_from, &tok, &info, &err);
 *   attn_finetune_folder_train(&f, &m, &sets, &cfg, &ev, &res, &err);
 *   attn_finetune_folder_finish(&f, &m, &sets, &err);  (RUN/log.csv;
 *                                                 instruct: RUN/responses.json)
 *   attn_finetune_folder_close(&f, failed); */
#ifndef ATTN_FINETUNE_RUN_H
#define ATTN_FINETUNE_RUN_H

#include "attn/finetune.h"
#include "attn/runlock.h"
#include "attn/text.h"
#include "attn/train_setup.h"

#ifdef __cplusplus
extern "C" {
#endif

/* out as a run of task can take it: resuming, it holds a checkpoint (not
 * one of another task's run); else it is absent or an empty folder (attn
 * deletes nothing it did not make). The messages name the options as
 * dash + "out", dash + "resume" ("--" for the program). A folder in use is
 * ATTN_ERR_STATE, a resume that cannot be ATTN_ERR_INVALID_ARG. */
attn_status attn_finetune_check_out(const char *out, const char *task, int resume, const char *dash,
                                    attn_error *err);

/* The sets of a run: classify's (train, val) or instruct's (itrain, ival,
 * itest: the book's split), as the folder's info.task says; val and test
 * may be empty. */
typedef struct attn_finetune_sets {
    const attn_class_data *train, *val;
    const attn_instruct_data *itrain, *ival, *itest;
} attn_finetune_sets;

/* A run folder held for a run (zero it or let open fill it). */
typedef struct attn_finetune_folder {
    attn_train_claim claim; /* what the claim found and did (repaired, warning) */
    attn_run_lock lock;
    attn_finetune_ckpt ckpt;   /* the checkpoints' settings */
    attn_classifier_info info; /* the model's metadata */
    attn_classify_events ev;   /* the caller's, called after the log's row */
    attn_text log;             /* log.csv, head and rows */
} attn_finetune_folder;

/* Claim out (attn_train_claim_dir: made, or resuming found, marked with
 * who, locked) for a run of a model of info (copied) with tok. On failure
 * f->claim.request_error says why as the claim does (1: a checkpoint is
 * there, resume it). */
attn_status attn_finetune_folder_open(attn_finetune_folder *f, const char *out, const char *who,
                                      int resume, const char *init_from, const attn_tokenizer *tok,
                                      const attn_classifier_info *info, attn_error *err);

/* attn_classify_train or attn_instruct_train of m on sets with cfg (its
 * ckpt set to the folder's), ev's events reported (the logged ones, and a
 * resume's replayed ones, after their log rows); classify's final
 * accuracies logged. Instruct: after each epoch trained, ev->on_sample_line
 * (when given) gets the script's sample of the first validation entry's
 * prompt (the first training entry's when val is empty); a resume reports
 * the samples of the epochs done again, at their place among the other
 * events. A resume the checkpoint refuses: ATTN_ERR_INVALID_ARG. */
attn_status attn_finetune_folder_train(attn_finetune_folder *f, attn_gpt *m,
                                       const attn_finetune_sets *sets,
                                       const attn_classify_config *cfg,
                                       const attn_classify_events *ev, attn_classify_result *res,
                                       attn_error *err);

/* After a successful _train of m on sets: RUN/log.csv, atomically (a
 * resumed run's is rewritten only when it is attn's, its head; else
 * ATTN_ERR_FORMAT and it stays as it is); then, instruct, the test split's
 * responses (sets->itest, attn_instruct_responses) as RUN/responses.json,
 * atomically. */
attn_status attn_finetune_folder_finish(attn_finetune_folder *f, const attn_gpt *m,
                                        const attn_finetune_sets *sets, attn_error *err);

/* Let go of the folder and the log; failed: what the claim made and
 * nothing wrote goes (checkpoints stay for a resume). */
void attn_finetune_folder_close(attn_finetune_folder *f, int failed);

#ifdef __cplusplus
}
#endif
#endif
