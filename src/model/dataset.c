/* Token-window dataset and resumable shuffled sampler (see attn/dataset.h). */
#include "attn/dataset.h"

#include <stdlib.h>
#include <string.h>

#include "attn/fileio.h"

static attn_status check_len(size_t n, int block_size, attn_error *err) {
    if (block_size < 1)
        return attn_fail(err, ATTN_ERR_INVALID_ARG, "block size must be >= 1 (got %d)", block_size);
    if (n < (size_t)block_size + 1)
        return attn_fail(err, ATTN_ERR_INVALID_ARG,
                         "%zu tokens are too few for context length %d (need at least %d)", n,
                         block_size, block_size + 1);
    return ATTN_OK;
}

attn_status attn_dataset_init(attn_token_dataset *ds, const int32_t *ids, size_t n, int block_size,
                              attn_error *err) {
    attn_status s = check_len(n, block_size, err);
    if (s) return s;
    *ds = (attn_token_dataset){.ids = ids, .n_ids = n, .block_size = block_size, .fd = -1};
    return ATTN_OK;
}

attn_status attn_dataset_init_file(attn_token_dataset *ds, int fd, const char *path,
                                   uint64_t offset, size_t n, int vocab_size, int block_size,
                                   attn_error *err) {
    attn_status s = check_len(n, block_size, err);
    if (s) return s;
    if (fd < 0 || !path || vocab_size < 1 || vocab_size > 65536)
        return attn_fail(err, ATTN_ERR_INVALID_ARG,
                         "a file view needs an open file, its path and a vocabulary of 1 .. "
                         "65536 tokens (got fd %d, vocabulary %d)",
                         fd, vocab_size);
    *ds = (attn_token_dataset){.n_ids = n,
                               .block_size = block_size,
                               .path = path,
                               .fd = fd,
                               .offset = offset,
                               .vocab_size = vocab_size};
    return ATTN_OK;
}

size_t attn_dataset_len(const attn_token_dataset *ds) {
    return ds->n_ids - (size_t)ds->block_size;
}

/* Id k of the little-endian uint16 ids at b. */
static uint32_t id16(const unsigned char *b, size_t k) {
    return (uint32_t)b[2 * k] | (uint32_t)b[2 * k + 1] << 8;
}

/* Ids [i, i + n) of a file view as bytes into b (2 n bytes), each checked:
 * a short read (the file shrank) or an id past the vocabulary (other bytes
 * than the ones the run opened) says the file changed. */
static attn_status read_file_ids(const attn_token_dataset *ds, size_t i, size_t n, unsigned char *b,
                                 attn_error *err) {
    const uint64_t at = ds->offset + 2 * (uint64_t)i;
    size_t got = 0;
    attn_status s = attn_file_pread(ds->fd, ds->path, b, 2 * n, at, &got, err);
    if (s) return s;
    if (got < 2 * n)
        return attn_fail(err, ATTN_ERR_IO,
                         "the token file '%s' changed under the run: it ends before byte %llu "
                         "(%zu of the %zu bytes of tokens %zu .. %zu were there)",
                         ds->path, (unsigned long long)(at + 2 * n), got, 2 * n, i, i + n - 1);
    for (size_t k = 0; k < n; k++)
        if (id16(b, k) >= (uint32_t)ds->vocab_size)
            return attn_fail(err, ATTN_ERR_IO,
                             "the token file '%s' changed under the run: token %zu is id %u, not "
                             "below the vocabulary's %d",
                             ds->path, i + k, id16(b, k), ds->vocab_size);
    return ATTN_OK;
}

/* Ids read as bytes into the front of out (2 n bytes) become n int32s in
 * place: from the last down, each write lands on bytes already read. */
static void widen_in_place(int32_t *out, size_t n) {
    const unsigned char *b = (const unsigned char *)out;
    for (size_t k = n; k-- > 0;)
        out[k] = (int32_t)id16(b, k);
}

attn_status attn_dataset_read(const attn_token_dataset *ds, size_t i, size_t n, int32_t *out,
                              attn_error *err) {
    if (!ds->path) {
        memcpy(out, ds->ids + i, n * sizeof *out);
        return ATTN_OK;
    }
    attn_status s = n ? read_file_ids(ds, i, n, (unsigned char *)out, err) : ATTN_OK;
    if (!s) widen_in_place(out, n);
    return s;
}

attn_status attn_dataset_get(const attn_token_dataset *ds, size_t pos, int32_t *x, int32_t *y,
                             attn_error *err) {
    const size_t b = (size_t)ds->block_size;
    if (!ds->path) {
        memcpy(x, ds->ids + pos, b * sizeof *x);
        memcpy(y, ds->ids + pos + 1, b * sizeof *y);
        return ATTN_OK;
    }
    /* One read of the b + 1 ids (2 b + 2 bytes: they fit in x's 4 b). */
    unsigned char *raw = (unsigned char *)x;
    attn_status s = read_file_ids(ds, pos, b + 1, raw, err);
    if (s) return s;
    for (size_t k = 0; k < b; k++)
        y[k] = (int32_t)id16(raw, k + 1);
    widen_in_place(x, b);
    return ATTN_OK;
}

size_t attn_split_point(size_t n) {
    /* Integer form of floor(0.9 * n), exact for any n that fits in memory. */
    return n / 10 * 9 + (n % 10) * 9 / 10;
}

/* Uniform integer in [0, bound) without modulo bias (bound <= 2^32). */
static uint64_t rand_below(attn_rng *rng, uint64_t bound) {
    uint64_t limit = UINT64_MAX - UINT64_MAX % bound;
    uint64_t r;
    do {
        r = attn_rng_u64(rng);
    } while (r >= limit);
    return r % bound;
}

attn_status attn_dataset_random_batch(const attn_token_dataset *ds, attn_rng *rng, int B,
                                      int32_t *x, int32_t *y, attn_error *err) {
    size_t len = attn_dataset_len(ds), bs = (size_t)ds->block_size;
    for (int b = 0; b < B; b++) {
        size_t pos = (size_t)rand_below(rng, len);
        attn_status s = attn_dataset_get(ds, pos, x + (size_t)b * bs, y + (size_t)b * bs, err);
        if (s) return s;
    }
    return ATTN_OK;
}

/* splitmix64's finaliser: a well-mixed 64-bit function of z. */
static uint64_t mix64(uint64_t z) {
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Window i (< len) of this epoch's computed order: the Feistel network
 * maps [0, 4^half_bits) onto itself; walking it until the value is below
 * len is a bijection of [0, len) (at most 4 steps expected). */
static size_t computed_index(const attn_sampler *s, size_t i) {
    const unsigned h = s->half_bits;
    const uint64_t mask = (UINT64_C(1) << h) - 1;
    uint64_t x = i;
    do {
        uint64_t l = x >> h, r = x & mask;
        for (int k = 0; k < 4; k++) {
            const uint64_t t = l ^ (mix64(r ^ s->keys[k]) & mask);
            l = r;
            r = t;
        }
        x = (l << h) | r;
    } while (x >= s->len);
    return (size_t)x;
}

/* This epoch's order: Fisher-Yates from a generator seeded by (seed, epoch),
 * or the computed order's keys. */
static void fill_perm(attn_sampler *s) {
    if (!s->perm) {
        for (int k = 0; k < 4; k++)
            s->keys[k] = mix64(s->seed ^ mix64(s->epoch * 4 + (uint64_t)k));
        return;
    }
    attn_rng rng;
    /* Mix epoch into the 32 bits attn_rng_seed uses so epochs differ. */
    uint64_t mixed = (s->seed ^ (s->epoch * 0x9E3779B97F4A7C15ull)) * 0xBF58476D1CE4E5B9ull;
    attn_rng_seed(&rng, (uint32_t)(mixed ^ (mixed >> 31)));
    for (size_t i = 0; i < s->len; i++)
        s->perm[i] = (uint32_t)i;
    for (size_t i = s->len - 1; i > 0; i--) {
        size_t j = (size_t)rand_below(&rng, (uint64_t)i + 1);
        uint32_t t = s->perm[i];
        s->perm[i] = s->perm[j];
        s->perm[j] = t;
    }
}

attn_status attn_sampler_init(attn_sampler *s, size_t len, uint64_t seed, attn_error *err) {
    memset(s, 0, sizeof *s);
    if (len == 0 || len > UINT32_MAX)
        return attn_fail(err, ATTN_ERR_INVALID_ARG, "sampler needs 1 .. 2^32-1 windows (got %zu)",
                         len);
    s->perm = malloc(len * sizeof *s->perm);
    if (!s->perm) return attn_fail(err, ATTN_ERR_NOMEM, "out of memory for the sampler");
    s->len = len;
    s->seed = seed;
    fill_perm(s);
    return ATTN_OK;
}

attn_status attn_sampler_init_computed(attn_sampler *s, size_t len, uint64_t seed,
                                       attn_error *err) {
    memset(s, 0, sizeof *s);
    if (len == 0 || len > SIZE_MAX / 4)
        return attn_fail(err, ATTN_ERR_INVALID_ARG, "sampler needs 1 .. %zu windows (got %zu)",
                         SIZE_MAX / 4, len);
    unsigned bits = 1;
    while (bits < 31 && (UINT64_C(1) << (2 * bits)) < (uint64_t)len)
        bits++;
    s->half_bits = bits;
    s->len = len;
    s->seed = seed;
    fill_perm(s);
    return ATTN_OK;
}

attn_status attn_sampler_restore(attn_sampler *s, uint64_t epoch, size_t cursor, attn_error *err) {
    if (cursor > s->len)
        return attn_fail(err, ATTN_ERR_FORMAT,
                         "sampler position %zu is past the dataset's %zu windows", cursor, s->len);
    if (epoch != s->epoch) {
        s->epoch = epoch;
        fill_perm(s);
    }
    s->cursor = cursor;
    return ATTN_OK;
}

void attn_sampler_free(attn_sampler *s) {
    free(s->perm);
    memset(s, 0, sizeof *s);
}

attn_status attn_sampler_next_batch(attn_sampler *s, const attn_token_dataset *ds, int B,
                                    int32_t *x, int32_t *y, attn_error *err) {
    size_t bs = (size_t)ds->block_size;
    for (int b = 0; b < B; b++) {
        if (s->cursor == s->len) {
            s->epoch++;
            s->cursor = 0;
            fill_perm(s);
        }
        const size_t i = s->cursor++;
        const size_t pos = s->perm ? s->perm[i] : computed_index(s, i);
        attn_status st = attn_dataset_get(ds, pos, x + (size_t)b * bs, y + (size_t)b * bs, err);
        if (st) return st;
    }
    return ATTN_OK;
}
