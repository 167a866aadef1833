/* attn/checkpoint.h — crash-safe checkpoint folders.
 *
 * A checkpoint is several files (model + training state) that must change
 * together. A run folder DIR holds:
 *
 *   DIR/ckpt-<step>/          one complete checkpoint (its files fsync'ed)
 *   DIR/latest -> ckpt-<step> the commit point: one symlink, swapped by rename
 *   DIR/model.safetensors       -> latest/model.safetensors
 *   DIR/train_state.safetensors -> latest/train_state.safetensors
 *
 * so the usual names keep working for every reader (PyTorch's safe_open, attn
 * generate) and always show one step. Saving (attn_ckpt_begin, write the files
 * into attn_ckpt_file paths, attn_ckpt_commit):
 *   1. files go into a fresh DIR/.ckpt-<step>.tmp-<pid>/ and are fsync'ed;
 *   2. that folder is fsync'ed and renamed to DIR/ckpt-<step>;
 *   3. a new symlink DIR/.latest.tmp-<pid> -> ckpt-<step> is renamed over
 *      DIR/latest (atomic), then DIR is fsync'ed: the new checkpoint is live;
 *   4. the two top-level links are made if missing and the older ckpt-*
 *      folders are removed.
 * A kill or failure before 3 leaves the previous checkpoint live and some
 * debris that attn_ckpt_clean_stale removes; after 3 the new one is live.
 * A folder written before this layout (two regular files at the top) is still
 * read; the first save converts it.
 *
 * Cleaning and saving assume one writer per folder (attn/runlock.h). */
#ifndef ATTN_CHECKPOINT_H
#define ATTN_CHECKPOINT_H

#include <stddef.h>
#include <stdint.h>

#include "attn/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define ATTN_CKPT_LATEST "latest"
#define ATTN_CKPT_PATH_MAX 4096

/* One checkpoint being written. */
typedef struct attn_ckpt_txn {
    char dir[ATTN_CKPT_PATH_MAX]; /* the run folder */
    char tmp[ATTN_CKPT_PATH_MAX]; /* DIR/.ckpt-<step>.tmp-<pid>, "" when gone */
    int64_t step;
} attn_ckpt_txn;

/* Start a checkpoint of `step` in the existing folder dir. */
attn_status attn_ckpt_begin(attn_ckpt_txn *t, const char *dir, int64_t step, attn_error *err);

/* out (ATTN_CKPT_PATH_MAX bytes) = the path where file `name` of this
 * checkpoint is to be written (atomically, attn/fileio.h). */
attn_status attn_ckpt_file(const attn_ckpt_txn *t, const char *name, char *out, attn_error *err);

/* Make the checkpoint the live one (steps 2-4 above). On failure the previous
 * checkpoint stays live and the partial one is removed. */
attn_status attn_ckpt_commit(attn_ckpt_txn *t, attn_error *err);

/* Give up: remove the partial checkpoint. Safe to call twice. */
void attn_ckpt_abort(attn_ckpt_txn *t);

/* out (ATTN_CKPT_PATH_MAX bytes) = the folder holding the live checkpoint's
 * files: DIR/ckpt-<step> read once through DIR/latest, or DIR itself for the
 * older layout. ATTN_ERR_NOT_FOUND (message names dir) when dir holds no
 * checkpoint. */
attn_status attn_ckpt_resolve(const char *dir, char *out, attn_error *err);

/* 1 if dir holds a checkpoint (either layout), else 0. *step (may be NULL)
 * gets its step when the layout names it, else -1. */
int attn_ckpt_exists(const char *dir, int64_t *step);

/* Remove what a killed writer left in dir: temp files and folders
 * (".<name>.tmp-*") and ckpt-<step> folders that DIR/latest does not name
 * (a folder holding folders is not ours and stays).
 * *removed (may be NULL) counts the entries removed. Only call it while
 * holding the folder's run lock. */
attn_status attn_ckpt_clean_stale(const char *dir, int *removed, attn_error *err);

#ifdef __cplusplus
}
#endif
#endif
