/* attn/runlock.h — one writer per run folder.
 *
 * A run (attn train) holds an exclusive flock(2) on DIR/.lock for its whole
 * life; the kernel drops it when the process ends, however it ends, so a
 * killed run never leaves the folder locked. The holder writes "pid N: WHO"
 * into the file so a second run can name it, and removes the file when it
 * lets go (a killed run leaves it behind, unlocked and harmless). */
#ifndef ATTN_RUNLOCK_H
#define ATTN_RUNLOCK_H

#include "attn/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define ATTN_RUN_LOCK_FILE ".lock"

typedef struct attn_run_lock {
    int fd;          /* -1 when not held */
    char path[4096]; /* DIR/.lock, removed on release */
} attn_run_lock;

/* Take the lock on the existing folder dir without waiting. who (may be
 * NULL) describes the holder, e.g. "attn train --out runs/tiny". If another
 * process holds it: ATTN_ERR_STATE with a message naming that process. A
 * DIR/.lock that is not attn's (not a regular file, or text other than
 * "pid N: ...") is left as it is: ATTN_ERR_INVALID_ARG. */
attn_status attn_run_lock_acquire(attn_run_lock *l, const char *dir, const char *who,
                                  attn_error *err);

/* Let go (also done by the kernel at exit). Safe on a lock not held. */
void attn_run_lock_release(attn_run_lock *l);

#ifdef __cplusplus
}
#endif
#endif
