/* attn/train_setup.h — from what a user asks for to a run's configs and
 * folder: the decisions of `attn train` before the first step, in the
 * library so any program can make them the same way.
 *
 *   attn_train_request rq;  attn_train_request_init(&rq);
 *   rq.preset = "tiny";  rq.data = "corpus.txt";  rq.out = "runs/x";
 *   attn_train_setup su;  attn_train_resolve(&rq, &su, &err);
 *   attn_train_claim cl;  attn_train_claim_dir(su.out, "my run", 0, 0, NULL, &lock, &cl, &err);
 *   attn_train_start(&tr, &rq, &su, NULL, 0, &err)   (attn_trainer *tr; the corpus su.data)
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
    /* attn_train_start makes a planning trainer: the checks of a real start
     * (configs, corpus, the checkpoint's headers), no model allocated; it
     * reports (attn_trainer_* accessors) but does not train. */
    int dry_run;
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

/* The trainer of a resolved request (attn_train_resolve) on its corpus:
 * text (n bytes, the contents of setup->data) or, text NULL, the file
 * setup->data itself. A gpt2 run on the file never holds the text or its
 * ids in memory: they are tokenized once into uint16 token files in the
 * cache folder (attn_token_cache_dir: $ATTN_CACHE_DIR, else
 * $XDG_CACHE_HOME/attn/tokens, else ~/.cache/attn/tokens), reused while
 * the text and GPT-2's files are unchanged, and read window by window (a
 * token file that changes under the run ends it with an error naming the
 * file; the last checkpoint stays the run's); a dry run
 * only counts the tokens (no cache read or written). A char run reads the
 * file whole (its vocabulary is the text's). Every check a run makes before
 * its first step, writing nothing but that cache (attn train --dry-run runs
 * it too, and writes nothing):
 *   fresh: attn_trainer_create (the corpus's vocabulary);
 *   rq->init_from: the checkpoint's vocabulary (attn_trainer_create_vocab: the
 *     corpus may use a subset of it; a character it lacks is an error naming
 *     it and where it is) and weights (attn_trainer_init_from);
 *   rq->resume: the saved run's vocabulary, then attn_trainer_resume (config,
 *     corpus and step checked against the checkpoint in setup->out).
 * *out gets the trainer (attn_trainer_free it), its corpus path setup->data;
 * on failure NULL. Call attn_trainer_set_dist and attn_trainer_set_device
 * after it. */
attn_status attn_train_start(attn_trainer **out, const attn_train_request *rq,
                             const attn_train_setup *setup, const char *text, size_t n,
                             attn_error *err);

/* What attn_train_claim_dir found and did (for the caller to report), and
 * what attn_train_claim_release undoes after a failed run. */
typedef struct attn_train_claim {
    int64_t replaced_step;             /* force: the step of the checkpoint it removed; -1 none */
    int removed;                       /* force: entries of the old run removed */
    int kept;                          /* entries of the user's in the folder (never touched) */
    int stale_removed;                 /* temporary files of an earlier run removed */
    char out_abs[ATTN_TRAIN_PATH_MAX]; /* the folder's absolute path */
    /* On failure: 1 = a checkpoint is there (needs resume or force); 2 = the
     * request is at fault otherwise (the message says how). */
    int request_error;
    char repaired[ATTN_ERROR_MSG_MAX]; /* resume: how DIR/latest was repaired, or "" */
    char warning[ATTN_ERROR_MSG_MAX];  /* a clean-up that failed (the run can go on), or "" */
    /* For attn_train_claim_release. */
    char dir[ATTN_TRAIN_PATH_MAX];  /* out as given */
    char made[ATTN_TRAIN_PATH_MAX]; /* the topmost folder the claim created, or "" */
    int marked;                     /* the claim wrote the folder's marker */
} attn_train_claim;

/* Make out (mkdir -p), take its run lock (attn/runlock.h; who describes the
 * run in the lock file, a busy folder is ATTN_ERR_STATE naming its holder),
 * and make sure the folder is attn's to write in:
 *  - out must leave room for checkpoint paths (ATTN_CKPT_DIR_MAX; else
 *    ATTN_ERR_INVALID_ARG, request_error 2, before anything is made);
 *  - the folder must be new or empty, hold attn's marker (.attn-run, written
 *    when attn makes or claims a folder) or be a run folder of an older attn
 *    (a checkpoint of attn's in it); anything else is refused even with
 *    force (ATTN_ERR_INVALID_ARG): attn deletes nothing it did not make;
 *  - an entry attn would have to replace but did not write (a loss.csv,
 *    latest or model.safetensors of the user's) is refused the same way;
 *  - a folder holding a checkpoint (in out or out/best) is refused unless
 *    resume or force (ATTN_ERR_INVALID_ARG, request_error 1). With force,
 *    the old run's entries that are attn's (checkpoints, best/, loss.csv,
 *    loss.svg) are removed now, so a stop before the first save mixes
 *    nothing; init_from (may be NULL) must then not lie inside out
 *    (request_error 2). The user's entries always stay.
 * Then an earlier run's stale temporary files go (attn_ckpt_clean_stale in
 * out and out/best), and, resuming, a DIR/latest that names no folder
 * (missing, dangling, or made a file or folder by a copy) is pointed at the
 * newest complete checkpoint (attn_ckpt_repair; claim->repaired says so;
 * nothing is deleted for it). On failure everything the claim made is
 * undone. Under attn_dist only rank 0 calls this. out inside another run's
 * folder (a parent holds .attn-run: best/, ckpt-*, a folder of the user's)
 * is refused first, with force or resume too (request_error 2). */
attn_status attn_train_claim_dir(const char *out, const char *who, int resume, int force,
                                 const char *init_from, attn_run_lock *lock,
                                 attn_train_claim *claim, attn_error *err);

/* What attn_train_claim_dir would refuse, read only (nothing is made, no
 * lock is taken; a missing out is a new run): attn train --dry-run. */
attn_status attn_train_check_dir(const char *out, int resume, int force, const char *init_from,
                                 attn_train_claim *claim, attn_error *err);

/* Let go of the folder (attn_run_lock_release). With failed set, what the
 * claim made goes again when it holds nothing else: the marker it wrote and
 * the folders it created; a folder that existed before stays. Safe on a
 * zeroed claim. */
void attn_train_claim_release(attn_train_claim *claim, attn_run_lock *lock, int failed);

/* Start-up check of a distributed run (collective): every rank runs the same
 * executable on the same configs, corpus and initial state. */
attn_status attn_trainer_check_ranks(const attn_trainer *tr, attn_error *err);

#ifdef __cplusplus
}
#endif
#endif
