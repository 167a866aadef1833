/* TokenIdsDataset (seed 004, In [8] and its walkthrough) and the shuffled
 * sampler. */
#define _DEFAULT_SOURCE /* mkstemp, ftruncate */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "attn/dataset.h"

/* Seed 004's walkthrough: data 1..9, block 4 -> 5 windows, window 4 is
 * x = [5,6,7,8], y = [6,7,8,9]. */
Test(dataset, seed004_walkthrough) {
    const int32_t data[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
    attn_token_dataset ds;
    cr_assert_eq(attn_dataset_init(&ds, data, 9, 4, NULL), ATTN_OK);
    cr_expect_eq(attn_dataset_len(&ds), 5);
    int32_t x[4], y[4];
    cr_assert_eq(attn_dataset_get(&ds, 0, x, y, NULL), ATTN_OK);
    cr_expect(x[0] == 1 && x[3] == 4 && y[0] == 2 && y[3] == 5);
    cr_assert_eq(attn_dataset_get(&ds, 4, x, y, NULL), ATTN_OK);
    cr_expect(x[0] == 5 && x[3] == 8 && y[0] == 6 && y[3] == 9);
}

Test(dataset, too_short_is_an_error) {
    const int32_t data[4] = {0, 1, 2, 3};
    attn_token_dataset ds;
    attn_error err;
    cr_expect_eq(attn_dataset_init(&ds, data, 4, 4, &err), ATTN_ERR_INVALID_ARG);
    cr_expect(strstr(err.msg, "context length 4") != NULL, "%s", err.msg);
    cr_expect_eq(attn_dataset_init(&ds, data, 4, 3, &err), ATTN_OK);
}

Test(dataset, split_is_nanogpt_int_point_nine) {
    cr_expect_eq(attn_split_point(1115394), 1003854); /* int(1115394 * 0.9) */
    cr_expect_eq(attn_split_point(10), 9);
    cr_expect_eq(attn_split_point(19), 17);
}

/* One epoch visits every window exactly once; the next epoch is another order. */
Test(dataset, sampler_epoch_is_a_permutation) {
    enum { N = 40, BLOCK = 3 };
    int32_t ids[N];
    for (int i = 0; i < N; i++)
        ids[i] = i;
    attn_token_dataset ds;
    attn_dataset_init(&ds, ids, N, BLOCK, NULL);
    attn_sampler s;
    cr_assert_eq(attn_sampler_init(&s, attn_dataset_len(&ds), 7, NULL), ATTN_OK);
    int seen[N] = {0}, moved = 0;
    int32_t x[BLOCK], y[BLOCK];
    for (size_t i = 0; i < attn_dataset_len(&ds); i++) {
        cr_assert_eq(attn_sampler_next_batch(&s, &ds, 1, x, y, NULL), ATTN_OK);
        seen[x[0]]++;
        moved += x[0] != (int32_t)i;
        cr_expect_eq(y[0], x[0] + 1);
    }
    for (size_t i = 0; i < attn_dataset_len(&ds); i++)
        cr_expect_eq(seen[i], 1, "window %zu seen %d times", i, seen[i]);
    cr_expect(moved > 0, "order is shuffled");
    uint32_t first[N];
    memcpy(first, s.perm, sizeof(uint32_t) * s.len);
    cr_assert_eq(attn_sampler_next_batch(&s, &ds, 1, x, y, NULL), ATTN_OK);
    cr_expect_eq(s.epoch, 1);
    cr_expect(memcmp(first, s.perm, sizeof(uint32_t) * s.len) != 0, "epoch 1 reshuffles");
    attn_sampler_free(&s);
}

/* The next n batches of 7 windows from a and b are the same. */
static void expect_same_batches(attn_sampler *a, attn_sampler *b, const attn_token_dataset *ds,
                                int n) {
    enum { B = 7, MAX = B * 16 };
    int32_t xa[MAX], ya[MAX], xb[MAX], yb[MAX];
    const size_t bytes = (size_t)B * (size_t)ds->block_size * sizeof *xa;
    cr_assert(ds->block_size * B <= MAX);
    for (int i = 0; i < n; i++) {
        cr_assert_eq(attn_sampler_next_batch(a, ds, B, xa, ya, NULL), ATTN_OK);
        cr_assert_eq(attn_sampler_next_batch(b, ds, B, xb, yb, NULL), ATTN_OK);
        cr_expect(memcmp(xa, xb, bytes) == 0 && memcmp(ya, yb, bytes) == 0, "batch %d", i);
    }
}

/* Saving (epoch, cursor) and restoring into a fresh sampler continues the
 * same batch stream, across an epoch boundary. */
Test(dataset, sampler_resume_is_exact) {
    enum { N = 50, BLOCK = 4, B = 7 };
    int32_t ids[N];
    for (int i = 0; i < N; i++)
        ids[i] = (i * 37) % 11;
    attn_token_dataset ds;
    attn_dataset_init(&ds, ids, N, BLOCK, NULL);
    attn_sampler a, b;
    attn_sampler_init(&a, attn_dataset_len(&ds), 1337, NULL);
    int32_t xa[B * BLOCK], ya[B * BLOCK];
    for (int i = 0; i < 9; i++)
        cr_assert_eq(attn_sampler_next_batch(&a, &ds, B, xa, ya, NULL), ATTN_OK);
    attn_sampler_init(&b, attn_dataset_len(&ds), 1337, NULL);
    cr_assert_eq(attn_sampler_restore(&b, a.epoch, a.cursor, NULL), ATTN_OK);
    expect_same_batches(&a, &b, &ds, 20);
    cr_expect(a.epoch >= 2);
    attn_sampler_free(&a);
    attn_sampler_free(&b);
}

Test(dataset, random_batch_is_seeded) {
    int32_t ids[100];
    for (int i = 0; i < 100; i++)
        ids[i] = i;
    attn_token_dataset ds;
    attn_dataset_init(&ds, ids, 100, 8, NULL);
    attn_rng r1, r2;
    attn_rng_seed(&r1, 5);
    attn_rng_seed(&r2, 5);
    int32_t x1[32], y1[32], x2[32], y2[32];
    cr_assert_eq(attn_dataset_random_batch(&ds, &r1, 4, x1, y1, NULL), ATTN_OK);
    cr_assert_eq(attn_dataset_random_batch(&ds, &r2, 4, x2, y2, NULL), ATTN_OK);
    cr_expect(memcmp(x1, x2, sizeof x1) == 0);
    for (int b = 0; b < 4; b++)
        cr_expect(x1[b * 8] <= 91 && y1[b * 8 + 7] == x1[b * 8] + 8);
}

/* The computed order (GPT-2 runs): at every length, each epoch visits
 * every window exactly once (block 1 over ids 0..n: x is the window's
 * position), epochs and seeds differ, it is not the identity, and a restore
 * continues it exactly. */
Test(dataset, computed_sampler_is_a_permutation_per_epoch) {
    static const size_t lens[] = {1, 2, 3, 4, 5, 15, 16, 17, 255, 1000, 4097};
    for (size_t li = 0; li < sizeof lens / sizeof *lens; li++) {
        const size_t len = lens[li];
        int32_t *ids = malloc((len + 1) * sizeof *ids);
        unsigned char *seen = calloc(len, 1);
        for (size_t i = 0; i <= len; i++)
            ids[i] = (int32_t)i;
        attn_token_dataset ds;
        cr_assert_eq(attn_dataset_init(&ds, ids, len + 1, 1, NULL), ATTN_OK);
        attn_sampler s;
        cr_assert_eq(attn_sampler_init_computed(&s, attn_dataset_len(&ds), 99, NULL), ATTN_OK);
        cr_assert_null(s.perm, "the computed order stores nothing");
        int32_t first[2][8] = {{0}}, x, y;
        for (int e = 0; e < 2; e++) {
            memset(seen, 0, len);
            for (size_t i = 0; i < len; i++) {
                cr_assert_eq(attn_sampler_next_batch(&s, &ds, 1, &x, &y, NULL), ATTN_OK);
                cr_assert(x >= 0 && (size_t)x < len && y == x + 1);
                cr_assert_eq(seen[x], 0, "len %zu epoch %d: window %d twice", len, e, x);
                seen[x] = 1;
                if (i < 8) first[e][i] = x;
            }
        }
        if (len >= 16) {
            cr_expect(memcmp(first[0], first[1], sizeof first[0]) != 0, "len %zu: epochs differ",
                      len);
            int identity = 1;
            for (int i = 0; i < 8; i++)
                identity &= first[0][i] == i;
            cr_expect(!identity, "len %zu: shuffled", len);
        }
        attn_sampler_free(&s);
        free(ids);
        free(seen);
    }
    enum { N = 300, BLOCK = 4, B = 7 };
    int32_t ids[N];
    for (int i = 0; i < N; i++)
        ids[i] = (i * 37) % 11;
    attn_token_dataset ds;
    attn_dataset_init(&ds, ids, N, BLOCK, NULL);
    attn_sampler a, b, c;
    attn_sampler_init_computed(&a, attn_dataset_len(&ds), 1337, NULL);
    attn_sampler_init_computed(&c, attn_dataset_len(&ds), 1338, NULL);
    int32_t xa[B * BLOCK], ya[B * BLOCK], xb[B * BLOCK], yb[B * BLOCK];
    cr_assert_eq(attn_sampler_next_batch(&a, &ds, B, xa, ya, NULL), ATTN_OK);
    cr_assert_eq(attn_sampler_next_batch(&c, &ds, B, xb, yb, NULL), ATTN_OK);
    cr_expect(memcmp(xa, xb, sizeof xa) != 0, "another seed, another order");
    for (int i = 1; i < 50; i++)
        cr_assert_eq(attn_sampler_next_batch(&a, &ds, B, xa, ya, NULL), ATTN_OK);
    attn_sampler_init_computed(&b, attn_dataset_len(&ds), 1337, NULL);
    cr_assert_eq(attn_sampler_restore(&b, a.epoch, a.cursor, NULL), ATTN_OK);
    expect_same_batches(&a, &b, &ds, 80);
    cr_expect(a.epoch >= 2);
    attn_sampler_free(&a);
    attn_sampler_free(&b);
    attn_sampler_free(&c);
}

/* ---- the file view (attn_dataset_init_file): pread, every read checked */

/* A temp file of 8 header bytes and then ids 0 .. n-1 (little-endian
 * uint16), open for reading: its fd; path gets its name. */
static int ids_file(char path[64], size_t n) {
    strcpy(path, "/tmp/attn-dataset-XXXXXX");
    const int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    unsigned char b[8 + 2 * 64] = "header!";
    cr_assert_leq(n, 64);
    for (size_t i = 0; i < n; i++)
        b[8 + 2 * i] = (unsigned char)i;
    cr_assert_eq(write(fd, b, 8 + 2 * n), (ssize_t)(8 + 2 * n));
    return fd;
}

Test(dataset, file_view_reads_the_windows) {
    char path[64];
    const int fd = ids_file(path, 20);
    attn_token_dataset ds;
    attn_error err;
    cr_assert_eq(attn_dataset_init_file(&ds, fd, path, 8, 20, 20, 4, &err), ATTN_OK, "%s", err.msg);
    int32_t x[4], y[4], all[20];
    cr_expect_eq(attn_dataset_len(&ds), 16);
    cr_assert_eq(attn_dataset_get(&ds, 15, x, y, &err), ATTN_OK, "%s", err.msg);
    for (int k = 0; k < 4; k++) /* the last window of ids 0..19: x 15..18, y 16..19 */
        cr_expect(x[k] == 15 + k && y[k] == 16 + k, "x[%d] %d y[%d] %d", k, x[k], k, y[k]);
    cr_assert_eq(attn_dataset_read(&ds, 0, 20, all, &err), ATTN_OK, "%s", err.msg);
    for (int i = 0; i < 20; i++)
        cr_expect_eq(all[i], i);
    close(fd);
    unlink(path);
}

/* Fewer bytes than the view was opened with: the read fails naming the
 * file, whatever part is missing. */
Test(dataset, file_view_short_read_is_an_error) {
    char path[64];
    const int fd = ids_file(path, 20);
    attn_token_dataset ds;
    attn_error err;
    cr_assert_eq(attn_dataset_init_file(&ds, fd, path, 8, 20, 20, 4, &err), ATTN_OK);
    cr_assert_eq(ftruncate(fd, 8 + 2 * 19 + 1), 0); /* the last id cut in half */
    int32_t x[4], y[4];
    cr_expect_eq(attn_dataset_get(&ds, 14, x, y, &err), ATTN_OK, "%s", err.msg);
    cr_expect_eq(attn_dataset_get(&ds, 15, x, y, &err), ATTN_ERR_IO);
    cr_expect(strstr(err.msg, path) && strstr(err.msg, "changed under the run"), "%s", err.msg);
    cr_assert_eq(ftruncate(fd, 0), 0);
    cr_expect_eq(attn_dataset_read(&ds, 0, 1, x, &err), ATTN_ERR_IO);
    attn_sampler s;
    cr_assert_eq(attn_sampler_init(&s, attn_dataset_len(&ds), 1, NULL), ATTN_OK);
    cr_expect_eq(attn_sampler_next_batch(&s, &ds, 1, x, y, &err), ATTN_ERR_IO);
    attn_rng r;
    attn_rng_seed(&r, 5);
    cr_expect_eq(attn_dataset_random_batch(&ds, &r, 1, x, y, &err), ATTN_ERR_IO);
    attn_sampler_free(&s);
    close(fd);
    unlink(path);
}

/* An id not below the vocabulary (the file overwritten with other bytes)
 * is never handed on: the read fails naming the file, the token and id. */
Test(dataset, file_view_id_past_the_vocabulary_is_an_error) {
    char path[64];
    const int fd = ids_file(path, 20);
    attn_token_dataset ds;
    attn_error err;
    cr_assert_eq(attn_dataset_init_file(&ds, fd, path, 8, 20, 18, 4, &err), ATTN_OK);
    int32_t x[4], y[4];
    cr_expect_eq(attn_dataset_get(&ds, 13, x, y, &err), ATTN_OK, "%s", err.msg); /* ids 13..17 */
    cr_expect_eq(attn_dataset_get(&ds, 14, x, y, &err), ATTN_ERR_IO); /* its y holds id 18 */
    cr_expect(strstr(err.msg, path) && strstr(err.msg, "token 18 is id 18, not below the "
                                                       "vocabulary's 18"),
              "%s", err.msg);
    const unsigned char big[2] = {0xFF, 0xFF};
    cr_assert_eq(pwrite(fd, big, 2, 8 + 2 * 3), 2);
    cr_expect_eq(attn_dataset_read(&ds, 0, 4, x, &err), ATTN_ERR_IO);
    cr_expect(strstr(err.msg, "token 3 is id 65535"), "%s", err.msg);
    close(fd);
    unlink(path);
}
