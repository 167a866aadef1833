/* run_dir.h — a training run's folder: whose it is and what attn may delete
 * in it (attn_train_claim_dir, attn/train_setup.h). A run folder DIR is a
 * checkpoint folder (attn/checkpoint.h) that also holds DIR/loss.csv,
 * DIR/loss.svg (attn's by their first line and title), DIR/best/ (a
 * checkpoint folder), DIR/.lock (attn/runlock.h) and DIR/.attn-run, the
 * marker attn writes when it makes or claims the folder; and their temp
 * files (.<name>.tmp-XXXXXX). Everything else in it is the user's. */
#ifndef ATTN_SRC_RUN_DIR_H
#define ATTN_SRC_RUN_DIR_H

#include <stddef.h>
#include <stdint.h>

#include "attn/status.h"

#define RUN_DIR_MARKER ".attn-run"

typedef struct run_dir_info {
    int marked;         /* DIR/.attn-run is attn's marker */
    int has_checkpoint; /* a checkpoint of attn's in DIR or DIR/best: trained */
    int64_t step;       /* its step (DIR's, else best's), -1 unknown */
    int user_entries;   /* entries that are not attn's (kept, in DIR and best/) */
    char foreign[512];  /* an entry attn would replace but did not write, "" */
} run_dir_info;

/* Look at dir (read only); a missing folder reads as empty. */
attn_status run_dir_inspect(const char *dir, run_dir_info *info, attn_error *err);

/* Write dir's marker (atomically). */
attn_status run_dir_mark(const char *dir, attn_error *err);

/* 1 when dir holds nothing but its marker. */
int run_dir_only_marker(const char *dir);

/* Starting over (--force): remove the old run's entries that are attn's
 * (checkpoints, best/, loss.csv, loss.svg, temp files); the marker, the lock
 * and the user's entries stay. *removed counts what went. */
attn_status run_dir_clear(const char *dir, int *removed, attn_error *err);

/* A killed run's debris (attn_ckpt_clean_stale in dir and dir/best, and the
 * loss files' and marker's temp files). */
attn_status run_dir_clean(const char *dir, int *removed, attn_error *err);

/* attn_ckpt_repair in dir and dir/best; what (cap bytes) says what was done. */
attn_status run_dir_repair(const char *dir, char *what, size_t cap, attn_error *err);

#endif
