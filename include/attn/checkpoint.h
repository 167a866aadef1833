/* attn/checkpoint.h — crash-safe checkpoint folders.
 *
 * A checkpoint is two files that must change together: the model
 * (ATTN_CKPT_MODEL) and the training state (ATTN_CKPT_STATE), safetensors
 * files whose metadata "format" is attn's ("attn-gpt", "attn-train-state").
 * A checkpoint folder DIR (a run folder, or its best/) holds:
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
 *   2. that folder is fsync'ed and renamed to DIR/ckpt-<step> (a suffix
 *      .<k> when that name is taken);
 *   3. a new symlink DIR/.latest.tmp-<pid> -> ckpt-<step> is renamed over
 *      DIR/latest (atomic), then DIR is fsync'ed: the new checkpoint is live;
 *   4. the two top-level links are made if missing and the older ckpt-*
 *      folders of attn's are removed.
 * A kill or failure before 3 leaves the previous checkpoint live and some
 * debris that attn_ckpt_clean_stale removes; after 3 the new one is live.
 * A folder written before this layout (two regular files at the top) is still
 * read; the first save converts it.
 *
 * What is attn's: attn deletes or replaces only entries it can prove it
 * wrote, by name and content:
 *   latest            a symlink to ckpt-<step>[.<k>], or what a copy made
 *                     without symlinks (rsync without -l, cp -rL, zip) left of
 *                     one: a file holding that name, a folder of checkpoint files;
 *   model.safetensors, train_state.safetensors
 *                     links to latest/<name>, or attn's files (older layout, copy);
 *   ckpt-<step>[.<k>]/ holding nothing but checkpoint files: each named as
 *                     above and holding attn's metadata (a temp file of one too);
 *   .<name>.tmp-<suffix>  a save's temp files, and .ckpt-<step>.tmp-<pid>/
 *                     folders holding nothing but checkpoint files.
 * Anything else, or one of those names holding something else (a user's
 * notes in ckpt-7/, their own model.safetensors) is the user's: never
 * deleted, never replaced.
 *
 * When DIR/latest names no folder (missing, dangling, or made a file or a
 * folder by a copy), the live checkpoint is the newest complete ckpt-* folder
 * (both files whole); attn_ckpt_repair points latest at it again.
 *
 * Cleaning and saving assume one writer per folder (attn/runlock.h). */
#ifndef ATTN_CHECKPOINT_H
#define ATTN_CHECKPOINT_H

#include <stddef.h>
#include <stdint.h>

#include "attn/gpt.h"
#include "attn/safetensors.h"
#include "attn/status.h"
#include "attn/tokenizer.h"

#ifdef __cplusplus
extern "C" {
#endif

#define ATTN_CKPT_LATEST "latest"
#define ATTN_CKPT_BEST "best" /* a run folder's best-val checkpoint (attn_trainer_run) */
#define ATTN_CKPT_MODEL "model.safetensors"       /* metadata format "attn-gpt" */
#define ATTN_CKPT_STATE "train_state.safetensors" /* metadata format "attn-train-state" */
#define ATTN_CKPT_PATH_MAX 4096
/* The longest folder path a checkpoint can be saved in: its files lie up to
 * 128 characters deeper (DIR/.ckpt-<step>.tmp-<pid>/.<file>.tmp-XXXXXX). */
#define ATTN_CKPT_DIR_MAX (ATTN_CKPT_PATH_MAX - 128)

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

/* Put file `name` of the checkpoint folder src (a committed ckpt-* folder,
 * attn_ckpt_resolve's answer) into this checkpoint as a hard link rather
 * than a copy: a run's best/ and its checkpoint of the same step share their
 * bytes. Committed checkpoint files are never changed in place (each save
 * writes new files), so the two stay equal; removing either folder removes a
 * link only. ATTN_ERR_IO when the file system cannot link (the caller then
 * writes the file). */
attn_status attn_ckpt_link(const attn_ckpt_txn *t, const char *name, const char *src,
                           attn_error *err);

/* Make the checkpoint the live one (steps 2-4 above). On failure the previous
 * checkpoint stays live and the partial one is removed. A DIR/latest or
 * top-level name that is not attn's is never replaced (ATTN_ERR_IO). */
attn_status attn_ckpt_commit(attn_ckpt_txn *t, attn_error *err);

/* Give up: remove the partial checkpoint. Safe to call twice. */
void attn_ckpt_abort(attn_ckpt_txn *t);

/* out (ATTN_CKPT_PATH_MAX bytes) = the folder holding the live checkpoint's
 * files: DIR/ckpt-<step> read once through DIR/latest; when latest names no
 * folder, the newest complete ckpt-* folder (or a complete folder that a copy
 * made of latest); else DIR itself for the older layout. Reads only.
 * ATTN_ERR_NOT_FOUND (message names dir) when dir holds no checkpoint. */
attn_status attn_ckpt_resolve(const char *dir, char *out, attn_error *err);

/* 1 if dir holds a checkpoint of attn's (live through latest, a ckpt-*
 * folder holding an attn file even when incomplete, or the older layout's
 * files), else 0. *step (may be NULL) gets the live step, else the newest
 * one's, -1 when unknown. */
int attn_ckpt_exists(const char *dir, int64_t *step);

/* 1 if the entry `name` of dir is attn's (see the top), else 0. */
int attn_ckpt_is_ours(const char *dir, const char *name);

/* 1 if dir holds an entry that a save would replace but attn did not write
 * (latest, model.safetensors or train_state.safetensors of the user's); its
 * name goes to name (cap bytes). Else 0. */
int attn_ckpt_find_foreign(const char *dir, char *name, size_t cap);

/* The one check of every output path of attn's commands and of the Python
 * package, before anything is written (NULL and "-" pass). A run folder (one
 * holding .attn-run) is attn train's alone: out is refused when it, once
 * every link is followed, is a run folder or lies anywhere below one (best/,
 * ckpt-*, a folder of the user's), or is named .attn-run. It is refused when
 * it is an existing file that is one of the n_inputs inputs (same device
 * and inode: a link or hard link too), or one file with one of the
 * n_outputs other outputs of the command (NULL entries skipped).
 * ATTN_ERR_INVALID_ARG says why; ATTN_ERR_IO when out cannot be resolved. */
attn_status attn_output_check(const char *out, const char *const *inputs, int n_inputs,
                              const char *const *outputs, int n_outputs, attn_error *err);

/* 1 when path (links followed; it need not exist) lies below a run folder,
 * or is one when self; the run folder goes to run (cap bytes, may be NULL). */
int attn_path_in_run(const char *path, int self, char *run, size_t cap);

/* The corpus path the run in the checkpoint folder ckpt recorded (the live
 * training state's "corpus_path", read from its header), malloc'd; NULL when
 * ckpt is a model file, records none or cannot be read. */
char *attn_ckpt_corpus_path(const char *ckpt);

/* attn_output_check for a command that reads the checkpoint ckpt: its files
 * (ckpt itself when a file, else its model and training state as the folder
 * and its live checkpoint name them) and the corpus its run was trained on
 * are inputs too. */
attn_status attn_ckpt_output_check(const char *ckpt, const char *out, const char *const *inputs,
                                   int n_inputs, const char *const *outputs, int n_outputs,
                                   attn_error *err);

/* attn_ckpt_output_check with no other inputs or outputs. */
attn_status attn_ckpt_check_output(const char *ckpt, const char *path, attn_error *err);

/* Remove what a killed writer left in dir: attn's temp files and folders,
 * and, when DIR/latest names a live folder, attn's ckpt-* folders older than
 * it or complete (or empty) ones it does not name. Nothing else: without a
 * live pointer no checkpoint goes. *removed (may be NULL) counts the entries
 * removed. Only call it while holding the folder's run lock. */
attn_status attn_ckpt_clean_stale(const char *dir, int *removed, attn_error *err);

/* When DIR/latest names no folder: point it at the newest complete ckpt-*
 * folder (atomically). A folder that a copy made of latest is first renamed
 * to a free ckpt-<step>.<k>; nothing is deleted. what (cap bytes, may be
 * NULL) says what was done, "" when nothing was. Under the run lock. */
attn_status attn_ckpt_repair(const char *dir, char *what, size_t cap, attn_error *err);

/* Remove every checkpoint entry of dir that is attn's (latest first, then the
 * top-level names, the ckpt-* folders and temp files): starting a run over.
 * The user's entries stay. *removed (may be NULL) counts the entries removed.
 * Under the run lock. */
attn_status attn_ckpt_remove_all(const char *dir, int *removed, attn_error *err);

/* ------------------------------------------------------ loading a model */

/* A model file carries its tokenizer in its metadata (string values):
 *   char  "vocabulary": the characters in id order (the only key, so char
 *         checkpoints are as they always were);
 *   gpt2  "tokenizer": "gpt2", "gpt2_encoder_json" and "gpt2_vocab_bpe":
 *         the text of encoder.json and vocab.bpe (1.5 MB), so the file needs
 *         no vocabulary files to be read. Metadata, not tensors: PyTorch's
 *         strict load_state_dict (and attn's) sees only the weights.
 * No "tokenizer" key means char. */
#define ATTN_CKPT_META_VOCABULARY "vocabulary"
#define ATTN_CKPT_META_TOKENIZER "tokenizer"
#define ATTN_CKPT_META_GPT2_ENCODER "gpt2_encoder_json"
#define ATTN_CKPT_META_GPT2_MERGES "gpt2_vocab_bpe"
#define ATTN_CKPT_TOKENIZER_META_MAX 3

/* The metadata entries of tok (up to ATTN_CKPT_TOKENIZER_META_MAX into kv,
 * *n of them), pointing into tok and into *owned (malloc'd, may be NULL;
 * the caller frees it after writing). */
attn_status attn_ckpt_tokenizer_meta(const attn_tokenizer *tok, attn_st_kv *kv, int *n,
                                     char **owned, attn_error *err);

/* The tokenizer a model file's metadata holds (file names it in messages):
 * ATTN_ERR_FORMAT when missing or corrupt (a gpt2 vocabulary that fails
 * attn_bpe_load's checks). */
attn_status attn_ckpt_read_tokenizer(const attn_safetensors *st, const char *file,
                                     attn_tokenizer *tok, attn_error *err);

/* Load a checkpoint folder's live model (dir/model.safetensors) or a
 * .safetensors path into m (not initialised: this initialises it), its
 * tokenizer into tok and its step into *step (-1 for a file without one;
 * step NULL: not wanted). Checks that the config in the metadata is valid,
 * that the tokenizer has vocab_size tokens (the embedding's rows; either
 * kind, above) and that every tensor's
 * shape matches the config (ATTN_ERR_SHAPE naming the tensor otherwise). On
 * failure nothing is left allocated; on success free with attn_gpt_free and
 * attn_tokenizer_free. */
attn_status attn_gpt_load_checkpoint(const char *path, attn_gpt *m, attn_tokenizer *tok,
                                     int64_t *step, attn_error *err);

/* The same checks from the file's header alone: *cfg, the tokenizer and the
 * step of the checkpoint at path, with no weights read and no model made
 * (what a dry run and a run's set-up need). Free tok with attn_tokenizer_free. */
attn_status attn_gpt_checkpoint_config(const char *path, attn_gpt_config *cfg, attn_tokenizer *tok,
                                       int64_t *step, attn_error *err);

#ifdef __cplusplus
}
#endif
#endif
