/* A text tokenized once into a cached uint16 token file (see
 * attn/token_file.h). Nothing is mapped: the text is read in slices, the
 * cache file with pread (a file truncated under a mapping is a SIGBUS). */
#define _GNU_SOURCE /* memrchr */
#include "attn/token_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "attn/checkpoint.h"
#include "attn/fileio.h"
#include "attn/parse.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "token files are written as the host's uint16: little-endian only"
#endif

#define TF_MAGIC "ATTNTOK"
#define TF_VERSION 1u
#define TF_HEADER ATTN_TOKEN_FILE_HEADER
#define TF_VOCAB_MAX 65536
#define TF_SLICE ((size_t)1 << 20)      /* bytes per read of a text or a cache file */
#define TF_LOOKAHEAD ((size_t)64 << 10) /* read past a chunk's end to judge its cut */

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
 * (s, s + chunk], else the first one after it, else n. t[0:n) is the text
 * read so far, whole: up to its end. When it is not, a cut is judged only
 * with the 8 bytes after it in t (all safe_at looks at), and 0 says: read
 * further. */
static size_t next_cut(const char *t, size_t s, size_t n, size_t chunk, int whole) {
    if (n - s <= chunk) return whole ? n : 0;
    for (size_t end = s + chunk; end > s + 1;) {
        const char *nl = memrchr(t + s + 1, '\n', end - (s + 1));
        if (!nl) break;
        const size_t p = (size_t)(nl - t) + 1;
        if (!whole && p + 8 > n) return 0;
        if (safe_at(t, s, n, p)) return p;
        end = p - 1;
    }
    for (size_t from = s + chunk; from < n;) {
        const char *nl = memchr(t + from, '\n', n - from);
        if (!nl) break;
        const size_t p = (size_t)(nl - t) + 1;
        if (!whole && p + 8 > n) return 0;
        if (safe_at(t, s, n, p)) return p;
        from = p;
    }
    return whole ? n : 0;
}

/* ------------------------------------------------------------ the text */

/* A text (or a range of one) read on demand: from a file with pread, in
 * slices into buf, or from memory. */
typedef struct text_src {
    const char *mem; /* the text in memory, or NULL: read from fd */
    int fd;
    const char *path;
    uint64_t begin; /* the range's first byte in the file */
    size_t n;       /* the range's bytes */
    char *buf;      /* bytes [at, at + len) of the range */
    size_t cap, at, len;
} text_src;

static void text_close(text_src *t) {
    if (!t->mem && t->fd >= 0) close(t->fd);
    free(t->buf);
    memset(t, 0, sizeof *t);
    t->fd = -1;
}

/* Open text_path and take its bytes [begin, end) (end SIZE_MAX: its end). */
static attn_status text_open(text_src *t, const char *path, size_t begin, size_t end,
                             attn_error *err) {
    memset(t, 0, sizeof *t);
    t->path = path;
    t->fd = open(path, O_RDONLY | O_CLOEXEC);
    if (t->fd < 0)
        return attn_fail(err, ATTN_ERR_IO, "cannot open '%s': %s", path, strerror(errno));
    struct stat st;
    if (fstat(t->fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        text_close(t);
        return attn_fail(err, ATTN_ERR_IO, "cannot read '%s' in slices: not a regular file", path);
    }
    const size_t size = (size_t)st.st_size;
    if (end == SIZE_MAX) end = size;
    if (begin > end || end > size) {
        text_close(t);
        return attn_fail(err, ATTN_ERR_INVALID_ARG,
                         "text range [%zu, %zu) is not within '%s' (%zu bytes)", begin, end, path,
                         size);
    }
    t->begin = begin;
    t->n = end - begin;
    return ATTN_OK;
}

/* The text's bytes [i, i + *got) at *p, *got = min(want, n - i): valid
 * until the next view. A file that is shorter than when it was opened
 * changed while it was read. */
static attn_status text_view(text_src *t, size_t i, size_t want, const char **p, size_t *got,
                             attn_error *err) {
    const size_t k = t->n - i < want ? t->n - i : want;
    *got = k;
    if (t->mem) {
        *p = t->mem + i;
        return ATTN_OK;
    }
    if (i >= t->at && i + k <= t->at + t->len) {
        *p = t->buf + (i - t->at);
        return ATTN_OK;
    }
    if (k > t->cap) {
        char *b = realloc(t->buf, k);
        if (!b) return attn_fail(err, ATTN_ERR_NOMEM, "out of memory for %zu bytes of text", k);
        t->buf = b;
        t->cap = k;
    }
    size_t r = 0;
    t->len = 0;
    attn_status s = attn_file_pread(t->fd, t->path, t->buf, k, t->begin + i, &r, err);
    if (!s && r < k)
        s = attn_fail(err, ATTN_ERR_IO,
                      "the text '%s' changed while it was read: it ends at byte %llu", t->path,
                      (unsigned long long)(t->begin + i + r));
    if (s) return s;
    t->at = i;
    t->len = k;
    *p = t->buf;
    return ATTN_OK;
}

/* XXH3-128 of the text, read in slices. */
static attn_status hash_text(text_src *t, uint64_t out[2], attn_error *err) {
    XXH3_state_t *st = XXH3_createState();
    if (!st || XXH3_128bits_reset(st) != XXH_OK) {
        XXH3_freeState(st);
        return attn_fail(err, ATTN_ERR_NOMEM, "out of memory for the text's hash");
    }
    attn_status s = ATTN_OK;
    for (size_t i = 0, k = 0; i < t->n && !s; i += k) {
        const char *p = NULL;
        if (!(s = text_view(t, i, TF_SLICE, &p, &k, err))) XXH3_128bits_update(st, p, k);
    }
    XXH128_hash_t h = XXH3_128bits_digest(st);
    XXH3_freeState(st);
    out[0] = h.low64;
    out[1] = h.high64;
    return s;
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

/* 1 when the header b says what h says (its own check included). */
static int header_matches(const unsigned char *b, const tf_header *h) {
    return memcmp(b, TF_MAGIC, sizeof TF_MAGIC) == 0 && get_u64(b + 64) == XXH3_64bits(b, 64) &&
           get_u64(b + 8) == ((uint64_t)h->version | (uint64_t)h->vocab_size << 32) &&
           get_u64(b + 16) == h->enc_hash && get_u64(b + 24) == h->text_bytes &&
           get_u64(b + 32) == h->text_hash[0] && get_u64(b + 40) == h->text_hash[1];
}

/* 1 when the open file fd of size bytes is the cache file h describes:
 * its header, its tokens' hash, every id below the vocabulary (read in
 * slices); *n the token count. */
static int file_matches(int fd, const char *path, uint64_t size, const tf_header *h, size_t *n) {
    unsigned char hdr[TF_HEADER];
    size_t got = 0;
    if (size < TF_HEADER || attn_file_pread(fd, path, hdr, TF_HEADER, 0, &got, NULL) ||
        got != TF_HEADER || !header_matches(hdr, h))
        return 0;
    const uint64_t count = get_u64(hdr + 48);
    if (count > (size - TF_HEADER) / 2 || size != TF_HEADER + 2 * count) return 0;
    unsigned char *buf = malloc(TF_SLICE);
    XXH3_state_t *st = XXH3_createState();
    int ok = buf && st && XXH3_64bits_reset(st) == XXH_OK;
    for (uint64_t at = 0, k; ok && at < 2 * count; at += k) {
        k = 2 * count - at < TF_SLICE ? 2 * count - at : TF_SLICE;
        ok = !attn_file_pread(fd, path, buf, (size_t)k, TF_HEADER + at, &got, NULL) && got == k;
        for (size_t j = 0; ok && j < k; j += 2) /* little-endian uint16 ids */
            ok = ((uint32_t)buf[j] | (uint32_t)buf[j + 1] << 8) < h->vocab_size;
        if (ok) XXH3_64bits_update(st, buf, (size_t)k);
    }
    ok = ok && XXH3_64bits_digest(st) == get_u64(hdr + 56);
    XXH3_freeState(st);
    free(buf);
    *n = (size_t)count;
    return ok;
}

/* ------------------------------------------------------ the cache file */

/* Open path when it is the cache file h describes: 1 (tf holds it open),
 * else 0. */
static int try_reuse(const char *path, const tf_header *h, attn_token_file *tf) {
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return 0;
    struct stat st;
    size_t n = 0;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) ||
        !file_matches(fd, path, (uint64_t)st.st_size, h, &n)) {
        close(fd);
        return 0;
    }
    tf->fd = fd;
    tf->is_open = 1;
    tf->n_tokens = n;
    tf->vocab_size = (int)h->vocab_size;
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

/* The next chunk of the text, from byte at: [at, *end), its bytes at *p
 * (valid until the next view). Read with TF_LOOKAHEAD bytes past its
 * nominal end, and twice as much each time no cut can be judged yet. */
static attn_status next_chunk(text_src *t, size_t at, size_t chunk, const char **p, size_t *end,
                              attn_error *err) {
    for (size_t want = chunk + TF_LOOKAHEAD;; want = want > SIZE_MAX / 2 ? SIZE_MAX : want * 2) {
        size_t got = 0;
        attn_status s = text_view(t, at, want, p, &got, err);
        if (s) return s;
        const size_t cut = next_cut(*p, 0, got, chunk, at + got == t->n);
        if (cut) {
            *end = at + cut;
            return ATTN_OK;
        }
    }
}

/* Encode the text chunk by chunk into f (after its header; NULL: count
 * only); h gets the token count and hash, *calls the encode calls. */
static attn_status encode_chunks(text_src *t, const attn_token_encoder *enc, attn_atomic_file *f,
                                 tf_header *h, size_t *calls, attn_error *err) {
    const size_t chunk = enc->chunk_bytes ? enc->chunk_bytes : ATTN_TOKEN_CHUNK_DEFAULT;
    chunk_bufs b = {0};
    XXH3_state_t *st = XXH3_createState();
    attn_status s = st && XXH3_64bits_reset(st) == XXH_OK
                        ? ATTN_OK
                        : attn_fail(err, ATTN_ERR_NOMEM, "out of memory for the tokens' hash");
    h->n_tokens = 0;
    for (size_t at = 0, end = 0; at < t->n && !s; at = end) {
        const char *text = NULL;
        if ((s = next_chunk(t, at, chunk, &text, &end, err))) break;
        size_t k = 0, cap = end - at + 1;
        if ((s = bufs_reserve(&b, cap, err))) break;
        (*calls)++;
        if ((s = enc->encode(enc->ctx, text, end - at, b.ids, cap, &k, err))) break;
        if (k > cap) {
            s = attn_fail(err, ATTN_ERR_STATE, "the encoder gave %zu ids for room %zu", k, cap);
            break;
        }
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

/* Write the cache file h describes for the text t (atomically). */
static attn_status build_file(const char *path, text_src *t, const attn_token_encoder *enc,
                              tf_header *h, size_t *calls, attn_error *err) {
    attn_atomic_file f;
    unsigned char hdr[TF_HEADER] = {0};
    attn_status s = attn_atomic_open(&f, path, err);
    if (s) return s;
    if (f.direct) s = attn_fail(err, ATTN_ERR_IO, "'%s' is not a regular file", path);
    if (!s) s = attn_atomic_write(&f, hdr, sizeof hdr, err); /* filled in below */
    if (!s) s = encode_chunks(t, enc, &f, h, calls, err);
    uint64_t again[2] = {0, 0};
    if (!s) s = hash_text(t, again, err);
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
    text_src t = {.fd = -1};
    if (!s) s = text_open(&t, text_path, text_begin, text_end, err);
    tf_header h = {.version = TF_VERSION, .vocab_size = (uint32_t)enc->vocab_size};
    if (!s) {
        h.enc_hash = XXH3_64bits(enc->identity_len ? enc->identity : "", enc->identity_len);
        h.text_bytes = t.n;
        s = hash_text(&t, h.text_hash, err);
    }
    if (!s) s = cache_path(cache_dir, text_path, &h, tf, err);
    if (!s && !try_reuse(tf->path, &h, tf)) {
        tf->rebuilt = 1;
        s = build_file(tf->path, &t, enc, &h, &tf->encode_calls, err);
        if (!s && !try_reuse(tf->path, &h, tf))
            s = attn_fail(err, ATTN_ERR_IO, "the token file '%s' does not read back as written",
                          tf->path);
    }
    text_close(&t);
    if (s) attn_token_file_close(tf);
    return s;
}

attn_status attn_token_file_open(const char *text_path, const attn_token_encoder *enc,
                                 const char *cache_dir, attn_token_file *tf, attn_error *err) {
    return attn_token_file_open_range(text_path, 0, SIZE_MAX, enc, cache_dir, tf, err);
}

void attn_token_file_close(attn_token_file *tf) {
    if (!tf) return;
    if (tf->is_open) close(tf->fd);
    memset(tf, 0, sizeof *tf);
}

size_t attn_token_file_len(const attn_token_file *tf) {
    return tf->n_tokens;
}

attn_status attn_token_file_dataset(const attn_token_file *tf, int block_size,
                                    attn_token_dataset *ds, attn_error *err) {
    if (!tf->is_open) return attn_fail(err, ATTN_ERR_STATE, "the token file is not open");
    return attn_dataset_init_file(ds, tf->fd, tf->path, TF_HEADER, tf->n_tokens, tf->vocab_size,
                                  block_size, err);
}

/* --------------------------------------------------------------- split */

/* The valid UTF-8 run at byte i, looked for within the next slice; *bad:
 * the run ends at an invalid byte, not at the slice's edge or at a
 * character the edge cut (the next call starts there). */
static attn_status scan_run(text_src *t, size_t i, size_t *run, int *bad, attn_error *err) {
    const char *p = NULL;
    size_t w = 0;
    attn_status s = text_view(t, i, TF_SLICE, &p, &w, err);
    if (s) return s;
    *run = attn_utf8_prefix(p, w);
    *bad = *run < w && !(w<t->n - i && * run + 4> w);
    return ATTN_OK;
}

/* 1 when byte j of the text starts a character (j within the last view). */
static int starts_char(const text_src *t, size_t j) {
    const char *b = t->mem ? t->mem + j : t->buf + (j - t->at);
    return ((unsigned char)*b & 0xC0) != 0x80;
}

/* Characters as Python counts them (code points, an invalid byte one each)
 * up to the one that starts character stop: *at its byte offset (n when
 * there are no more), *chars the characters before it. */
static attn_status walk_chars(text_src *t, size_t stop, size_t *at, size_t *chars,
                              attn_error *err) {
    size_t c = 0;
    for (size_t i = 0; i < t->n;) {
        size_t run;
        int bad;
        attn_status s = scan_run(t, i, &run, &bad, err);
        if (s) return s;
        for (size_t j = i; j < i + run; j++) {
            if (!starts_char(t, j)) continue;
            if (c == stop) {
                *at = j, *chars = c;
                return ATTN_OK;
            }
            c++;
        }
        i += run;
        if (bad && c == stop) {
            *at = i, *chars = c;
            return ATTN_OK;
        }
        if (bad) c++, i++;
    }
    *at = t->n, *chars = c;
    return ATTN_OK;
}

/* The book's split of the text: the byte where character floor(0.9 *
 * characters) starts. */
static attn_status split_offset(text_src *t, size_t *at, attn_error *err) {
    size_t end, chars;
    attn_status s = walk_chars(t, SIZE_MAX, &end, &chars, err);
    if (!s) s = walk_chars(t, chars / 10 * 9 + (chars % 10) * 9 / 10, at, &chars, err);
    return s;
}

size_t attn_text_split_offset(const char *text, size_t n) {
    text_src t = {.mem = text, .fd = -1, .n = n};
    size_t at = n;
    split_offset(&t, &at, NULL); /* from memory: nothing can fail */
    return at;
}

/* The split offset of the file at text_path, and its size. */
static attn_status file_split(const char *text_path, size_t *split, size_t *n, attn_error *err) {
    text_src t;
    attn_status s = text_open(&t, text_path, 0, SIZE_MAX, err);
    if (!s) s = split_offset(&t, split, err);
    *n = t.n;
    text_close(&t);
    return s;
}

attn_status attn_token_file_open_split(const char *text_path, const attn_token_encoder *enc,
                                       const char *cache_dir, attn_token_file *train,
                                       attn_token_file *val, attn_error *err) {
    memset(train, 0, sizeof *train);
    memset(val, 0, sizeof *val);
    size_t split = 0, n = 0;
    attn_status s = file_split(text_path, &split, &n, err);
    if (!s) s = attn_token_file_open_range(text_path, 0, split, enc, cache_dir, train, err);
    if (!s) s = attn_token_file_open_range(text_path, split, n, enc, cache_dir, val, err);
    if (s) attn_token_file_close(train);
    return s;
}

attn_status attn_token_count_range(const char *text_path, size_t text_begin, size_t text_end,
                                   const attn_token_encoder *enc, size_t *n_tokens,
                                   attn_error *err) {
    *n_tokens = 0;
    text_src t = {.fd = -1};
    attn_status s = check_encoder(enc, err);
    if (!s) s = text_open(&t, text_path, text_begin, text_end, err);
    tf_header h = {0};
    size_t calls = 0;
    if (!s) s = encode_chunks(&t, enc, NULL, &h, &calls, err);
    if (!s) *n_tokens = (size_t)h.n_tokens;
    text_close(&t);
    return s;
}

attn_status attn_token_count_split(const char *text_path, const attn_token_encoder *enc,
                                   size_t *n_train, size_t *n_val, attn_error *err) {
    *n_train = *n_val = 0;
    size_t split = 0, n = 0;
    attn_status s = file_split(text_path, &split, &n, err);
    if (!s) s = attn_token_count_range(text_path, 0, split, enc, n_train, err);
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
