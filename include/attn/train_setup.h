/* attn/train_setup.h — from what a user asks for to a run's configs and
 * folder: the decisions of `attn train` before the first step, in the
 * library so any program can make them the same way.
 *
 *   attn_train_request rq;  attn_train_request_init(&rq);
 *   rq.preset = "tiny";  rq.data = "corpus.txt";  rq.out = "runs/x";
 *   attn_train_setup su;  attn_train_resolve(&rq, &su, &err);
 *   attn_train_claim cl;  attn_train_claim_dir(su.out, "my run", 0, 0, &lock, &cl, &err);
 *   ... read su.data, then attn_train_start(&tr, &rq, &su, text, n, &err)
 *
 * The configuration of a fresh run: the preset (default "tiny"), then with
 * init_from the model shape of that checkpoint, then the JSON file's keys
 * (model and training, attn_train_config_apply_json), then the keys set in
 * the request (rq.given). A resumed run continues the configs saved in
 * rq.out (and its recorded corpus unless rq.data is given). What the
 * request states is resolved as a fresh start of it would be (with no
 * preset or file named, from the saved configs instead of the default
 * preset) and must give the saved configs, but for max_steps, log_interval
 * and checkpoint_interval, which a resume takes from the keys set (not from
 * the preset or the file): so the request that started a run, resumed,
 * continues it (grad_accum, unless stated, stays the run's: the rank count
 * may differ). A difference is ATTN_ERR_INVALID_ARG naming the first key
 * that differs, both values and where the new one came from. */
#ifndef ATTN_TRAIN_SETUP_H
#define ATTN_TRAIN_SETUP_H

#include <stdint.h>

#include "attn/gpt.h"
#include "attn/runlock.h"
#include "attn/status.h"
#include "attn/train.h"

#ifdef __cplusplus
extern "C" {
#endif

#define ATTN_TRAIN_PATH_MAX 4096
#define ATTN_TRAIN_DEFAULT_PRESET "tiny"
#define ATTN_TRAIN_DEFAULT_DATA "data/tinyshakespeare.txt"

typedef struct attn_train_request {
    const char *preset;    /* NULL: the default (or, resuming, the saved config) */
    const char *config;    /* path of a JSON file of model and training keys, or NULL */
    const char *data;      /* corpus; NULL: the resumed run's, else the default */
    const char *out;       /* run folder; NULL: runs/<preset> (required to resume) */
    const char *init_from; /* checkpoint whose weights start a fresh run, or NULL */
    int resume, force;
    int ranks; /* processes (attn_dist size; 0 = 1): a fresh run's default grad_accum */
    /* Keys set one by one (bit i: key i of attn_train_key_at, value in
     * keys[i]). learning_rate without min_lr also sets min_lr to a tenth
     * of it; max_steps when resuming moves the end (attn_train_config_extend). */
    uint32_t given;
    attn_train_value keys[ATTN_TRAIN_KEY_COUNT];
} attn_train_request;

typedef struct attn_train_setup {
    attn_gpt_config model; /* vocab_size 1 unless vocab_given: the corpus decides */
    attn_train_config train;
    int vocab_given;                /* the JSON file set vocab_size */
    const char *preset;             /* the preset used; resuming: the one named, or NULL */
    char data[ATTN_TRAIN_PATH_MAX]; /* the corpus, made absolute (recorded for resumes) */
    char out[ATTN_TRAIN_PATH_MAX];  /* the run folder as asked (or the default) */
    /* On failure: 1 when the request is at fault (a bad preset, key or
     * combination), 0 when a file is (missing, unreadable). */
    int request_error;
} attn_train_setup;

void attn_train_request_init(attn_train_request *rq);

/* Set key i (attn_train_key_at) in the request. */
void attn_train_request_set(attn_train_request *rq, int i, attn_train_value v);

/* Resolve rq into *setup (see the top). Reads rq->config, the checkpoint in
 * rq->out when resuming and rq->init_from's config; writes nothing. */
attn_status attn_train_resolve(const attn_train_request *rq, attn_train_setup *setup,
                               attn_error *err);

/* The trainer of a resolved request (attn_train_resolve) on its corpus
 * (text, n bytes, read from setup->data): every check a run makes before its
 * first step, writing nothing (attn train --dry-run runs it too):
 *   fresh: attn_trainer_init (the corpus's vocabulary);
 *   rq->init_from: the checkpoint's vocabulary (attn_trainer_init_vocab: the
 *     corpus may use a subset of it; a character it lacks is an error naming
 *     it and where it is) and weights (attn_trainer_init_from);
 *   rq->resume: the saved run's vocabulary, then attn_trainer_resume (config,
 *     corpus and step checked against the checkpoint in setup->out).
 * tr->corpus_path is setup->data. On failure tr holds nothing. Call
 * attn_trainer_set_dist and attn_trainer_set_device after it. */
attn_status attn_train_start(attn_trainer *tr, const attn_train_request *rq,
                             const attn_train_setup *setup, const char *text, size_t n,
                             attn_error *err);

/* What attn_train_claim_dir found (for the caller to report). */
typedef struct attn_train_claim {
    int64_t replaced_step;             /* force: the step of the checkpoint it replaces; -1 none */
    int stale_removed;                 /* temporary files of an earlier run removed */
    char out_abs[ATTN_TRAIN_PATH_MAX]; /* the folder's absolute path */
    int request_error; /* on failure: 1 = a checkpoint is there (needs resume/force) */
    char warning[ATTN_ERROR_MSG_MAX]; /* a clean-up that failed (the run can go on), or "" */
} attn_train_claim;

/* Make out (mkdir -p), take its run lock (attn/runlock.h), refuse a folder
 * that holds a checkpoint unless resume or force (ATTN_ERR_STATE, request_error),
 * who describes the run in the lock file (attn_run_lock_acquire); a busy
 * folder is ATTN_ERR_STATE naming its holder. Then remove an earlier run's stale temporary files
 * (attn_ckpt_clean_stale) in out and out/best. Under attn_dist only rank 0 calls this. */
attn_status attn_train_claim_dir(const char *out, const char *who, int resume, int force,
                                 attn_run_lock *lock, attn_train_claim *claim, attn_error *err);

/* Start-up check of a distributed run (collective): every rank runs the same
 * executable on the same configs, corpus and initial state. */
attn_status attn_trainer_check_ranks(const attn_trainer *tr, attn_error *err);

#ifdef __cplusplus
}
#endif
#endif
