/* attn/dataset.h — seed 004's TokenIdsDataset and a resumable shuffled sampler.
 *
 * A dataset views n token ids (borrowed, int32) as len = n - block_size
 * windows: window p is x = ids[p : p+block], y = ids[p+1 : p+1+block].
 * attn_dataset_init_file views n uint16 ids in an open file instead (a
 * token file, attn/token_file.h), read window by window with pread: no id
 * is held in memory, and nothing is mapped, so a file that is truncated,
 * replaced in place or overwritten under a run is an error (ATTN_ERR_IO
 * naming the file: "... changed under the run"), never a SIGBUS. Every id
 * read is checked: fewer bytes than asked (a shorter file) or an id not
 * below vocab_size (other bytes) fail the read. get, read and both batch
 * functions give int32 x, y, the same as the int32 view of the same ids;
 * they return a status for the file view's sake (the int32 view never
 * fails).
 *
 * Splits: the first 90% of the ids train, the last 10% validate (the split
 * point is floor(0.9 * n), as nanoGPT's int(n * 0.9)).
 *
 * The sampler is DataLoader(shuffle=True) without a partial last batch:
 * each epoch visits every window once in an order drawn from a generator
 * seeded by (seed, epoch); a batch that runs past the end of an epoch
 * continues in the next one, so every batch has exactly B windows. Its whole
 * state is (seed, epoch, cursor): save those three numbers and
 * attn_sampler_restore rebuilds the identical permutation, so a resumed run
 * draws the same batches as one that never stopped. */
#ifndef ATTN_DATASET_H
#define ATTN_DATASET_H

#include <stddef.h>
#include <stdint.h>

#include "attn/rng.h"
#include "attn/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct attn_token_dataset {
    const int32_t *ids; /* borrowed; NULL for a file view */
    size_t n_ids;
    int block_size;
    /* A file view (attn_dataset_init_file) reads ids from here: */
    const char *path; /* the file, named in errors (borrowed); NULL: no file view */
    int fd;           /* open for reading (borrowed: the caller closes it) */
    uint64_t offset;  /* byte of id 0; id i is the little-endian uint16 at offset + 2 i */
    int vocab_size;   /* every id read must be below it */
} attn_token_dataset;

/* Fails unless n >= block_size + 1 (at least one window) and block_size >= 1. */
attn_status attn_dataset_init(attn_token_dataset *ds, const int32_t *ids, size_t n, int block_size,
                              attn_error *err);

/* The same over n uint16 ids at byte offset of the open file fd (path names
 * it in errors; both are borrowed), each to be below vocab_size (1 ..
 * 65536). Nothing is read here: the reads check what they get. */
attn_status attn_dataset_init_file(attn_token_dataset *ds, int fd, const char *path,
                                   uint64_t offset, size_t n, int vocab_size, int block_size,
                                   attn_error *err);

/* Number of windows: n_ids - block_size. */
size_t attn_dataset_len(const attn_token_dataset *ds);

/* Ids [i, i + n) of the view (i + n <= n_ids) into out, whichever width
 * they are stored in. */
attn_status attn_dataset_read(const attn_token_dataset *ds, size_t i, size_t n, int32_t *out,
                              attn_error *err);

/* Copy window pos (< len) into x and y (block_size ids each). */
attn_status attn_dataset_get(const attn_token_dataset *ds, size_t pos, int32_t *x, int32_t *y,
                             attn_error *err);

/* Where the training split ends: floor(0.9 * n). Train = ids[0:s], val = ids[s:n]. */
size_t attn_split_point(size_t n);

/* B windows at uniformly random positions drawn from rng (for loss
 * estimates); x, y are (B, block_size) row-major. */
attn_status attn_dataset_random_batch(const attn_token_dataset *ds, attn_rng *rng, int B,
                                      int32_t *x, int32_t *y, attn_error *err);

typedef struct attn_sampler {
    size_t len; /* windows in the dataset */
    uint64_t seed;
    uint64_t epoch;     /* completed passes */
    size_t cursor;      /* next index into perm */
    uint32_t *perm;     /* this epoch's order, len entries; NULL: computed (below) */
    unsigned half_bits; /* computed order: the Feistel network's half width */
    uint64_t keys[4];   /* computed order: this epoch's round keys */
} attn_sampler;

/* Start at epoch 0, cursor 0. len must be in 1 .. 2^32-1. */
attn_status attn_sampler_init(attn_sampler *s, size_t len, uint64_t seed, attn_error *err);

/* The same sampler with its order computed rather than stored, so that it
 * takes no memory at any length (a 1 GB corpus has some 250 M windows: a
 * stored order would be 1 GB). Each epoch's order is a keyed bijection of
 * [0, len): a 4-round Feistel network on the smallest even bit width that
 * holds len, keys drawn from (seed, epoch), cycle-walked back into range.
 * Another order than attn_sampler_init's for the same seed (the GPT-2 runs
 * use this one, the char runs keep theirs); the state is the same three
 * numbers, restored the same way. len in 1 .. SIZE_MAX / 4. */
attn_status attn_sampler_init_computed(attn_sampler *s, size_t len, uint64_t seed, attn_error *err);
/* Jump to (epoch, cursor) as saved from another sampler of the same len and seed. */
attn_status attn_sampler_restore(attn_sampler *s, uint64_t epoch, size_t cursor, attn_error *err);
void attn_sampler_free(attn_sampler *s);

/* The next B windows of the shuffled order into x, y (B, block_size). A
 * failed read leaves the sampler past the windows it drew. */
attn_status attn_sampler_next_batch(attn_sampler *s, const attn_token_dataset *ds, int B,
                                    int32_t *x, int32_t *y, attn_error *err);

#ifdef __cplusplus
}
#endif
#endif
