/* A text tokenized once into a cached, mapped uint16 token file (see
 * attn/token_file.h). */
#define _GNU_SOURCE /* memrchr */
#include "attn/token_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "attn/checkpoint.h"
#include "attn/fileio.h"
#include "attn/parse.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "token files are mapped as little-endian uint16"
#endif

#define TF_MAGIC "ATTNTOK"
#define TF_VERSION 1u
#define TF_HEADER 72
#define TF_VOCAB_MAX 65536

/* What a cache file must say about itself. */
typedef struct tf_header {
    uint32_t version, vocab_size;
    uint64_t enc_hash, text_bytes, text_hash[2], n_tokens, tokens_hash;
} tf_header;

/* ------------------------------------------------------ safe boundaries */

/* Unicode White_Space as GPT-2's pattern reads \s ([\t-\r\x85\p{Z}]), plus
 * U+180E (Zs in older Unicode) and U+200B: stricter costs only a longer
 * window. */
static int is_space_cp(uint32_t c) {
    return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
           c == 0x180E || (c >= 0x2000 && c <= 0x200B) || c == 0x2028 || c == 0x2029 ||
           c == 0x202F || c == 0x205F || c == 0x3000;
}

/* The code point of the valid UTF-8 character of len bytes at u. */
static uint32_t decode_cp(const unsigned char *u, size_t len) {
    static const unsigned char lead_mask[5] = {0, 0x7F, 0x1F, 0x0F, 0x07};
    uint32_t c = u[0] & lead_mask[len];
    for (size_t k = 1; k < len; k++)
        c = (c << 6) | (u[k] & 0x3F);
    return c;
}

/* 1 when the character ending just before end (and starting at or after lo)
 * is valid UTF-8 and not white space. */
static int non_space_before(const unsigned char *u, size_t lo, size_t end) {
    for (size_t len = 1; len <= 4 && len <= end - lo; len++) {
        const size_t j = end - len;
        if ((u[j] & 0xC0) == 0x80) continue; /* a continuation byte: look further back */
        if (attn_utf8_prefix((const char *)u + j, len) != len) return 0;
        const size_t want = u[j] < 0x80 ? 1 : u[j] < 0xE0 ? 2 : u[j] < 0xF0 ? 3 : 4;
        return want == len && !is_space_cp(decode_cp(u + j, len));
    }
    return 0;
}

/* The length of the valid UTF-8 character at p (before n), its code point
 * in *cp; 0 when the bytes there are no valid character. */
static size_t char_at(const unsigned char *u, size_t p, size_t n, uint32_t *cp) {
    const size_t len = u[p] < 0x80 ? 1 : u[p] < 0xE0 ? 2 : u[p] < 0xF0 ? 3 : 4;
    if (n - p < len || attn_utf8_prefix((const char *)u + p, len) != len) return 0;
    *cp = decode_cp(u + p, len);
    return len;
}

/* A safe boundary p in a text t[lo:n] (see attn/token_file.h): a '\n' at
 * p-1 after a non-space, then a non-space at p, or one space character at p
 * and a non-space after it. */
static int safe_at(const char *t, size_t lo, size_t n, size_t p) {
    const unsigned char *u = (const unsigned char *)t;
    if (p < lo + 2 || p >= n || u[p - 1] != '\n' || !non_space_before(u, lo, p - 1)) return 0;
    uint32_t c, next;
    const size_t len = char_at(u, p, n, &c);
    if (!len) return 0;
    if (!is_space_cp(c)) return 1;
    const size_t len2 = p + len < n ? char_at(u, p + len, n, &next) : 0;
    return len2 && !is_space_cp(next);
}

/* Where the chunk starting at s ends: the last safe boundary in
 * (s, s + chunk], else the first one after it, else n. */
static size_t next_cut(const char *t, size_t s, size_t n, size_t chunk) {
    if (n - s <= chunk) return n;
    for (size_t end = s + chunk; end > s + 1;) {
        const char *nl = memrchr(t + s + 1, '\n', end - (s + 1));
        if (!nl) break;
        const size_t p = (size_t)(nl - t) + 1;
        if (safe_at(t, s, n, p)) return p;
        end = p - 1;
    }
    for (size_t from = s + chunk; from < n;) {
        const char *nl = memchr(t + from, '\n', n - from);
        if (!nl) break;
        const size_t p = (size_t)(nl - t) + 1;
        if (safe_at(t, s, n, p)) return p;
        from = p;
    }
    return n;
}

/* ------------------------------------------------------------ the text */

typedef struct text_map {
    void *base; /* the whole file, read-only (NULL when empty) */
    size_t size;
    const char *text; /* base + begin */
    size_t n;
} text_map;

static void text_unmap(text_map *m) {
    if (m->base) munmap(m->base, m->size);
    memset(m, 0, sizeof *m);
}

/* Map text_path read-only and point at [begin, end) (end SIZE_MAX: its end). */
static attn_status text_map_range(text_map *m, const char *path, size_t begin, size_t end,
                                  attn_error *err) {
    memset(m, 0, sizeof *m);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return attn_fail(err, ATTN_ERR_IO, "cannot open '%s': %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return attn_fail(err, ATTN_ERR_IO, "cannot map '%s': not a regular file", path);
    }
    m->size = (size_t)st.st_size;
    if (end == SIZE_MAX) end = m->size;
    if (begin > end || end > m->size) {
        close(fd);
        return attn_fail(err, ATTN_ERR_INVALID_ARG,
                         "text range [%zu, %zu) is not within '%s' (%zu bytes)", begin, end, path,
                         m->size);
    }
    if (m->size) m->base = mmap(NULL, m->size, PROT_READ, MAP_PRIVATE, fd, 0);
    int e = errno;
    close(fd);
    if (m->base == MAP_FAILED) {
        m->base = NULL;
        return attn_fail(err, ATTN_ERR_IO, "cannot map '%s': %s", path, strerror(e));
    }
    if (m->base) madvise(m->base, m->size, MADV_SEQUENTIAL);
    m->text = m->base ? (const char *)m->base + begin : "";
    m->n = end - begin;
    return ATTN_OK;
}

/* Drop the whole pages of [p, p + n) from this process's mapping: they
 * stay in the page cache (read-only file pages, never written) and fault
 * back in when read again, so one pass over a 1 GB file leaves no 1 GB in
 * the process's resident set. */
static void release_pages(const void *p, size_t n) {
    const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    const uintptr_t a = ((uintptr_t)p + page - 1) & ~(page - 1);
    const uintptr_t b = ((uintptr_t)p + n) & ~(page - 1);
    if (b > a) madvise((void *)a, b - a, MADV_DONTNEED);
}

/* XXH3-128 of the n bytes at t, fed in slices (one pass over the mapping,
 * each slice released once hashed). */
static attn_status hash_text(const char *t, size_t n, uint64_t out[2], attn_error *err) {
    XXH3_state_t *st = XXH3_createState();
    if (!st || XXH3_128bits_reset(st) != XXH_OK) {
        XXH3_freeState(st);
        return attn_fail(err, ATTN_ERR_NOMEM, "out of memory for the text's hash");
    }
    const size_t slice = (size_t)64 << 20;
    for (size_t i = 0; i < n; i += slice) {
        XXH3_128bits_update(st, t + i, n - i < slice ? n - i : slice);
        release_pages(t + i, n - i < slice ? n - i : slice);
    }
    XXH128_hash_t h = XXH3_128bits_digest(st);
    XXH3_freeState(st);
    out[0] = h.low64;
    out[1] = h.high64;
    return ATTN_OK;
}

/* ---------------------------------------------------------- the header */

static void put_u64(unsigned char *p, uint64_t v) {
    for (int i = 0; i < 8; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static uint64_t get_u64(const unsigned char *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

static void header_write(unsigned char b[TF_HEADER], const tf_header *h) {
    memset(b, 0, TF_HEADER);
    memcpy(b, TF_MAGIC, sizeof TF_MAGIC); /* with its '\0': 8 bytes */
    put_u64(b + 8, (uint64_t)h->version | (uint64_t)h->vocab_size << 32);
    put_u64(b + 16, h->enc_hash);
    put_u64(b + 24, h->text_bytes);
    put_u64(b + 32, h->text_hash[0]);
    put_u64(b + 40, h->text_hash[1]);
    put_u64(b + 48, h->n_tokens);
    put_u64(b + 56, h->tokens_hash);
    put_u64(b + 64, XXH3_64bits(b, 64)); /* the header's own check */
}

/* 1 when the size bytes at b are the cache file h describes (its tokens
 * hashed and checked against the vocabulary). */
static int file_matches(const unsigned char *b, size_t size, const tf_header *h) {
    if (size < TF_HEADER || memcmp(b, TF_MAGIC, sizeof TF_MAGIC) != 0) return 0;
    if (get_u64(b + 64) != XXH3_64bits(b, 64)) return 0;
    const uint64_t n = get_u64(b + 48);
    if (get_u64(b + 8) != ((uint64_t)h->version | (uint64_t)h->vocab_size << 32) ||
        get_u64(b + 16) != h->enc_hash || get_u64(b + 24) != h->text_bytes ||
        get_u64(b + 32) != h->text_hash[0] || get_u64(b + 40) != h->text_hash[1])
        return 0;
    if (n > (size - TF_HEADER) / 2 || size != TF_HEADER + 2 * n) return 0;
    const uint16_t *ids = (const uint16_t *)(b + TF_HEADER);
    XXH3_state_t *st = XXH3_createState();
    if (!st || XXH3_64bits_reset(st) != XXH_OK) {
        XXH3_freeState(st);
        return 0;
    }
    uint16_t top = 0;
    const uint64_t slice = (uint64_t)16 << 20; /* ids per slice, released once read */
    for (uint64_t i = 0; i < n; i += slice) {
        const uint64_t k = n - i < slice ? n - i : slice;
        XXH3_64bits_update(st, ids + i, 2 * k);
        for (uint64_t j = i; j < i + k; j++)
            top = ids[j] > top ? ids[j] : top;
        release_pages(ids + i, 2 * k);
    }
    const int same = XXH3_64bits_digest(st) == get_u64(b + 56);
    XXH3_freeState(st);
    return same && (n == 0 || top < h->vocab_size);
}

/* ------------------------------------------------------ the cache file */

/* Map path when it is the cache file h describes: 1 (tf filled), else 0. */
static int try_reuse(const char *path, const tf_header *h, attn_token_file *tf) {
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return 0;
    struct stat st;
    void *map = MAP_FAILED;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size >= TF_HEADER)
        map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (map == MAP_FAILED) return 0;
    if (!file_matches(map, (size_t)st.st_size, h)) {
        munmap(map, (size_t)st.st_size);
        return 0;
    }
    tf->map = map;
    tf->map_size = (size_t)st.st_size;
    tf->tokens = (const uint16_t *)((const unsigned char *)map + TF_HEADER);
    tf->n_tokens = (size_t)get_u64((const unsigned char *)map + 48);
    return 1;
}

/* mkdir -p dir. */
static attn_status make_dirs(const char *dir, attn_error *err) {
    char p[4096];
    if (snprintf(p, sizeof p, "%s", dir) >= (int)sizeof p)
        return attn_fail(err, ATTN_ERR_INVALID_ARG, "cache folder path is too long");
    for (char *c = p + 1;; c++) {
        if (*c != '/' && *c != '\0') continue;
        const char keep = *c;
        *c = '\0';
        struct stat st;
        if (mkdir(p, 0777) != 0 && errno != EEXIST)
            return attn_fail(err, ATTN_ERR_IO, "cannot make the cache folder '%s': %s", p,
                             strerror(errno));
        if (stat(p, &st) != 0 || !S_ISDIR(st.st_mode))
            return attn_fail(err, ATTN_ERR_IO, "cannot use '%s' as a cache folder: %s", p,
                             "not a folder");
        *c = keep;
        if (keep == '\0') return ATTN_OK;
    }
}

/* tf->path = the cache file for h in cache_dir, checked: outside any run
 * folder, not the text, and a regular file of ours when it exists. */
static attn_status cache_path(const char *cache_dir, const char *text_path, const tf_header *h,
                              attn_token_file *tf, attn_error *err) {
    char run[4096], name[96];
    if (attn_path_in_run(cache_dir, 1, run, sizeof run))
        return attn_fail(err, ATTN_ERR_INVALID_ARG,
                         "cannot keep token files in '%s': it lies in the run folder %s", cache_dir,
                         run);
    attn_status s = make_dirs(cache_dir, err);
    if (s) return s;
    snprintf(name, sizeof name, "tok-%016llx-%016llx%016llx.u16", (unsigned long long)h->enc_hash,
             (unsigned long long)h->text_hash[1], (unsigned long long)h->text_hash[0]);
    if (attn_path_join(tf->path, sizeof tf->path, cache_dir, name))
        return attn_fail(err, ATTN_ERR_INVALID_ARG, "cache folder path '%s' is too long",
                         cache_dir);
    struct stat st;
    if (lstat(tf->path, &st) == 0 && !S_ISREG(st.st_mode))
        return attn_fail(err, ATTN_ERR_IO,
                         "'%s' is not a regular file (a link, a folder or a device): attn "
                         "replaces only token files it wrote; remove it",
                         tf->path);
    const char *inputs[1] = {text_path};
    return attn_output_check(tf->path, inputs, 1, NULL, 0, err);
}

/* ------------------------------------------------------------ building */

typedef struct chunk_bufs {
    int32_t *ids;
    uint16_t *u16;
    size_t room;
} chunk_bufs;

static attn_status bufs_reserve(chunk_bufs *b, size_t need, attn_error *err) {
    if (need <= b->room) return ATTN_OK;
    if (need > SIZE_MAX / sizeof *b->ids)
        return attn_fail(err, ATTN_ERR_NOMEM, "a chunk of %zu bytes is too large", need);
    int32_t *ids = realloc(b->ids, need * sizeof *ids);
    if (ids) b->ids = ids;
    uint16_t *u16 = ids ? realloc(b->u16, need * sizeof *u16) : NULL;
    if (u16) b->u16 = u16;
    if (!ids || !u16)
        return attn_fail(err, ATTN_ERR_NOMEM, "out of memory for the ids of %zu bytes of text",
                         need);
    b->room = need;
    return ATTN_OK;
}

/* ids -> u16, every id checked against the vocabulary. */
static attn_status narrow_ids(const chunk_bufs *b, size_t k, int vocab, size_t at,
                              attn_error *err) {
    for (size_t i = 0; i < k; i++) {
        const int32_t id = b->ids[i];
        if (id < 0 || id >= vocab || id >= TF_VOCAB_MAX)
            return attn_fail(err, ATTN_ERR_INVALID_ARG,
                             "the encoder gave id %d in the chunk at byte %zu: not in [0, %d)", id,
                             at, vocab);
        b->u16[i] = (uint16_t)id;
    }
    return ATTN_OK;
}

/* Encode the text chunk by chunk into f (after its header; NULL: count
 * only); h gets the token count and hash, *calls the encode calls. */
static attn_status encode_chunks(const text_map *m, const attn_token_encoder *enc,
                                 attn_atomic_file *f, tf_header *h, size_t *calls,
                                 attn_error *err) {
    const size_t chunk = enc->chunk_bytes ? enc->chunk_bytes : ATTN_TOKEN_CHUNK_DEFAULT;
    chunk_bufs b = {0};
    XXH3_state_t *st = XXH3_createState();
    attn_status s = st && XXH3_64bits_reset(st) == XXH_OK
                        ? ATTN_OK
                        : attn_fail(err, ATTN_ERR_NOMEM, "out of memory for the tokens' hash");
    h->n_tokens = 0;
    for (size_t at = 0, end; at < m->n && !s; at = end) {
        end = next_cut(m->text, at, m->n, chunk);
        size_t k = 0, cap = end - at + 1;
        if ((s = bufs_reserve(&b, cap, err))) break;
        (*calls)++;
        if ((s = enc->encode(enc->ctx, m->text + at, end - at, b.ids, cap, &k, err))) break;
        if (k > cap) {
            s = attn_fail(err, ATTN_ERR_STATE, "the encoder gave %zu ids for room %zu", k, cap);
            break;
        }
        release_pages(m->text + at, end - at);
        if ((s = narrow_ids(&b, k, enc->vocab_size, at, err))) break;
        XXH3_64bits_update(st, b.u16, k * sizeof *b.u16);
        if (f) s = attn_atomic_write(f, b.u16, k * sizeof *b.u16, err);
        h->n_tokens += k;
    }
    if (!s) h->tokens_hash = XXH3_64bits_digest(st);
    XXH3_freeState(st);
    free(b.ids);
    free(b.u16);
    return s;
}

/* Write the cache file h describes for the text at m (atomically). */
static attn_status build_file(const char *path, const text_map *m, const attn_token_encoder *enc,
                              tf_header *h, size_t *calls, attn_error *err) {
    attn_atomic_file f;
    unsigned char hdr[TF_HEADER] = {0};
    attn_status s = attn_atomic_open(&f, path, err);
    if (s) return s;
    if (f.direct) s = attn_fail(err, ATTN_ERR_IO, "'%s' is not a regular file", path);
    if (!s) s = attn_atomic_write(&f, hdr, sizeof hdr, err); /* filled in below */
    if (!s) s = encode_chunks(m, enc, &f, h, calls, err);
    uint64_t again[2] = {0, 0};
    if (!s) s = hash_text(m->text, m->n, again, err);
    if (!s && (again[0] != h->text_hash[0] || again[1] != h->text_hash[1]))
        s = attn_fail(err, ATTN_ERR_IO, "the text changed while it was being tokenized");
    if (!s) {
        /* The count and hash are known only now: the header goes last. */
        header_write(hdr, h);
        if (pwrite(f.fd, hdr, sizeof hdr, 0) != (ssize_t)sizeof hdr)
            s = attn_fail(err, ATTN_ERR_IO, "cannot write '%s': %s", path, strerror(errno));
    }
    if (!s) return attn_atomic_commit(&f, err);
    attn_atomic_abort(&f);
    return s;
}

/* ------------------------------------------------------------- opening */

static attn_status check_encoder(const attn_token_encoder *enc, attn_error *err) {
    if (!enc || !enc->encode)
        return attn_fail(err, ATTN_ERR_INVALID_ARG, "the token encoder has no encode function");
    if (enc->vocab_size < 1 || enc->vocab_size > TF_VOCAB_MAX)
        return attn_fail(err, ATTN_ERR_INVALID_ARG,
                         "a token file needs a vocabulary of 1 .. %d tokens (got %d)", TF_VOCAB_MAX,
                         enc->vocab_size);
    if (enc->identity_len && !enc->identity)
        return attn_fail(err, ATTN_ERR_INVALID_ARG, "the token encoder's identity is NULL");
    return ATTN_OK;
}

attn_status attn_token_file_open_range(const char *text_path, size_t text_begin, size_t text_end,
                                       const attn_token_encoder *enc, const char *cache_dir,
                                       attn_token_file *tf, attn_error *err) {
    memset(tf, 0, sizeof *tf);
    attn_status s = check_encoder(enc, err);
    text_map m = {0};
    if (!s) s = text_map_range(&m, text_path, text_begin, text_end, err);
    tf_header h = {.version = TF_VERSION, .vocab_size = (uint32_t)enc->vocab_size};
    if (!s) {
        h.enc_hash = XXH3_64bits(enc->identity_len ? enc->identity : "", enc->identity_len);
        h.text_bytes = m.n;
        s = hash_text(m.text, m.n, h.text_hash, err);
    }
    if (!s) s = cache_path(cache_dir, text_path, &h, tf, err);
    if (!s && !try_reuse(tf->path, &h, tf)) {
        tf->rebuilt = 1;
        s = build_file(tf->path, &m, enc, &h, &tf->encode_calls, err);
        if (!s && !try_reuse(tf->path, &h, tf))
            s = attn_fail(err, ATTN_ERR_IO, "the token file '%s' does not read back as written",
                          tf->path);
    }
    text_unmap(&m);
    if (s) attn_token_file_close(tf);
    return s;
}

attn_status attn_token_file_open(const char *text_path, const attn_token_encoder *enc,
                                 const char *cache_dir, attn_token_file *tf, attn_error *err) {
    return attn_token_file_open_range(text_path, 0, SIZE_MAX, enc, cache_dir, tf, err);
}

void attn_token_file_close(attn_token_file *tf) {
    if (!tf) return;
    if (tf->map) munmap(tf->map, tf->map_size);
    memset(tf, 0, sizeof *tf);
}

size_t attn_token_file_len(const attn_token_file *tf) {
    return tf->n_tokens;
}

const uint16_t *attn_token_file_ids(const attn_token_file *tf) {
    return tf->tokens;
}

/* --------------------------------------------------------------- split */

/* Behind a pass over a mapping (release set): drop what it has read. */
static void release_behind(const char *t, size_t i, size_t *done, int release) {
    if (release && i - *done >= ((size_t)64 << 20)) {
        release_pages(t + *done, i - *done);
        *done = i;
    }
}

/* The valid UTF-8 run at t + i, looked for within the next 64 MiB (a pass
 * over a mapping releases what lies behind it as it goes); *bad: the run
 * ends at an invalid byte, not at that window's edge or at a character
 * the edge cut (the next call starts there). */
static size_t scan_run(const char *t, size_t i, size_t n, int *bad) {
    const size_t window = (size_t)64 << 20, w = n - i < window ? n - i : window;
    const size_t run = attn_utf8_prefix(t + i, w);
    *bad = run < w && !(w < n - i && run + 4 > w);
    return run;
}

/* Characters as Python counts them: code points, an invalid byte one each. */
static size_t count_chars(const char *t, size_t n, int release) {
    size_t chars = 0, done = 0;
    for (size_t i = 0; i < n;) {
        release_behind(t, i, &done, release);
        int bad;
        const size_t run = scan_run(t, i, n, &bad);
        for (size_t k = 0; k < run; k++)
            chars += ((unsigned char)t[i + k] & 0xC0) != 0x80;
        i += run;
        if (bad) chars++, i++;
    }
    return chars;
}

/* Byte offset of character k (k <= count_chars). */
static size_t char_offset(const char *t, size_t n, size_t k, int release) {
    size_t done = 0;
    for (size_t i = 0; i < n;) {
        release_behind(t, i, &done, release);
        int bad;
        const size_t run = scan_run(t, i, n, &bad);
        for (size_t j = 0; j < run; j++)
            if (((unsigned char)t[i + j] & 0xC0) != 0x80 && k-- == 0) return i + j;
        i += run;
        if (bad && k-- == 0) return i;
        if (bad) i++;
    }
    return n;
}

static size_t split_offset(const char *text, size_t n, int release) {
    const size_t chars = count_chars(text, n, release);
    return char_offset(text, n, chars / 10 * 9 + (chars % 10) * 9 / 10, release);
}

size_t attn_text_split_offset(const char *text, size_t n) {
    return split_offset(text, n, 0);
}

attn_status attn_token_file_open_split(const char *text_path, const attn_token_encoder *enc,
                                       const char *cache_dir, attn_token_file *train,
                                       attn_token_file *val, attn_error *err) {
    memset(train, 0, sizeof *train);
    memset(val, 0, sizeof *val);
    text_map m;
    attn_status s = text_map_range(&m, text_path, 0, SIZE_MAX, err);
    if (s) return s;
    const size_t split = split_offset(m.text, m.n, 1), n = m.n;
    text_unmap(&m);
    s = attn_token_file_open_range(text_path, 0, split, enc, cache_dir, train, err);
    if (!s) s = attn_token_file_open_range(text_path, split, n, enc, cache_dir, val, err);
    if (s) attn_token_file_close(train);
    return s;
}

attn_status attn_token_count_range(const char *text_path, size_t text_begin, size_t text_end,
                                   const attn_token_encoder *enc, size_t *n_tokens,
                                   attn_error *err) {
    *n_tokens = 0;
    text_map m = {0};
    attn_status s = check_encoder(enc, err);
    if (!s) s = text_map_range(&m, text_path, text_begin, text_end, err);
    tf_header h = {0};
    size_t calls = 0;
    if (!s) s = encode_chunks(&m, enc, NULL, &h, &calls, err);
    if (!s) *n_tokens = (size_t)h.n_tokens;
    text_unmap(&m);
    return s;
}

attn_status attn_token_count_split(const char *text_path, const attn_token_encoder *enc,
                                   size_t *n_train, size_t *n_val, attn_error *err) {
    *n_train = *n_val = 0;
    text_map m;
    attn_status s = text_map_range(&m, text_path, 0, SIZE_MAX, err);
    if (s) return s;
    const size_t split = split_offset(m.text, m.n, 1), n = m.n;
    text_unmap(&m);
    s = attn_token_count_range(text_path, 0, split, enc, n_train, err);
    if (!s) s = attn_token_count_range(text_path, split, n, enc, n_val, err);
    return s;
}

/* $name/suffix into buf when $name is set and not empty: 1, else 0. */
static int env_path(char *buf, size_t cap, const char *name, const char *suffix, int *too_long) {
    const char *v = getenv(name);
    if (!v || !*v) return 0;
    *too_long = snprintf(buf, cap, "%s%s", v, suffix) >= (int)cap;
    return 1;
}

attn_status attn_token_cache_dir(char *buf, size_t cap, attn_error *err) {
    int too_long = 0;
    if (!env_path(buf, cap, "ATTN_CACHE_DIR", "", &too_long) &&
        !env_path(buf, cap, "XDG_CACHE_HOME", "/attn/tokens", &too_long) &&
        !env_path(buf, cap, "HOME", "/.cache/attn/tokens", &too_long))
        return attn_fail(err, ATTN_ERR_INVALID_ARG,
                         "no cache folder: set ATTN_CACHE_DIR, XDG_CACHE_HOME or HOME");
    if (too_long) return attn_fail(err, ATTN_ERR_INVALID_ARG, "the cache folder path is too long");
    char run[4096];
    if (attn_path_in_run(buf, 1, run, sizeof run)) /* refused before anything is made */
        return attn_fail(err, ATTN_ERR_INVALID_ARG,
                         "cannot keep token files in '%s': it lies in the run folder %s", buf, run);
    return make_dirs(buf, err);
}
