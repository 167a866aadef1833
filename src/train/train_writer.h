/* train_writer.h — attn_trainer_run's checkpoints, written while training
 * goes on (train_writer.c; train_loop.c drives it).
 *
 * One thread writes one save at a time, in the order asked, into the run
 * folder: so a crash leaves what the synchronous saves would have left at
 * that point (attn/checkpoint.h's commit protocol is unchanged), and each
 * file is the bytes attn_trainer_save writes. A save reads a view of the
 * trainer taken when it is asked for (train_writer_submit): its history,
 * generators, data position and metadata copied; its weights and AdamW
 * moments the trainer's own, read in place, with no copy: the trainer
 * changes them only in the optimizer update at the end of a step, which
 * waits for the write (train_writer_release, from attn_trainer_step). So an
 * evaluation and the next step's forward and backward run while the save
 * is written, and nothing more is held in memory. A failure is the run's:
 * the next call returns it. */
#ifndef ATTN_SRC_TRAIN_WRITER_H
#define ATTN_SRC_TRAIN_WRITER_H

#include "attn/status.h"
#include "attn/train.h"

/* What a save writes into the run folder. */
enum {
    TW_CKPT = 1, /* the checkpoint: model and training state (attn_trainer_save) */
    TW_LOSS = 2, /* loss.csv and loss.svg */
    TW_BEST = 4  /* best/: the model alone (attn_trainer_save_best) */
};

/* How the evaluation of a gated save's step ended (train_writer_settle). */
typedef enum {
    TW_COMPLETED, /* its record is in the trainer: the training state is written with it */
    TW_STOPPED,   /* a stop abandoned it: the state is written as it was asked for */
    TW_FAILED     /* the run fails: the save is given up (nothing committed) */
} train_writer_outcome;

/* Start saving tr as it stands into out (what: TW_*; the thread starts at
 * the first call), after the previous save is written. gated: this step's
 * evaluation runs meanwhile; the save writes the model file, waits for
 * train_writer_settle, then writes the training state and commits. */
attn_status train_writer_submit(attn_trainer *tr, const char *out, int what, int gated,
                                attn_error *err);

/* The gated save's evaluation ended (a no-op without one): COMPLETED
 * takes tr's view again (the record, and any clock change) and, best set,
 * also saves best/ from it. STOPPED takes it again only where the clock is
 * in the file (a time-budgeted run). */
void train_writer_settle(attn_trainer *tr, train_writer_outcome outcome, int best);

/* Wait until the save in progress is written (ATTN_OK at once without
 * one): before tr's weights or moments change. Returns the first failure
 * of any save. */
attn_status train_writer_release(attn_trainer *tr, attn_error *err);

/* Wait for the last save (a gated one never settled is given up), end the
 * thread: ATTN_OK, or the first failure of any save. */
attn_status train_writer_close(attn_trainer *tr, attn_error *err);

/* Seconds the trainer spent waiting in train_writer_release so far, and
 * the last finished save's seconds (its thread's), 0 before any. */
double train_writer_wait_s(const attn_trainer *tr);
double train_writer_last_s(const attn_trainer *tr);

#endif
