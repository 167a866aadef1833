/* GPT-2's byte-level BPE (see attn/bpe.h), tiktoken's algorithm: a pair of
 * adjacent parts merges when their joined bytes are a token, lowest rank
 * first (in GPT-2's files a token's rank is its id), leftmost on a tie. */
#define _GNU_SOURCE /* memmem */
#define PCRE2_CODE_UNIT_WIDTH 8
#include "attn/bpe.h"

#include <cjson/cJSON.h>
#include <pcre2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn/fileio.h"
#include "attn/parse.h"
#include "base/json_strict.h"

#define EOT_TEXT "<|endoftext|>"
#define EOT_LEN (sizeof EOT_TEXT - 1)
#define FILE_MAX ((size_t)64 << 20) /* GPT-2's files are 1 MB and 0.5 MB */

/* GPT-2's pre-tokenizer. \s is written out as Unicode White_Space
 * ([\t-\r\x85\p{Z}]), as tiktoken's Rust regex reads it (PCRE2's \s leaves
 * out U+0085). */
#define WS "\\t-\\r\\x{85}\\p{Z}"
static const char PATTERN[] = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^" WS
                              "\\p{L}\\p{N}]+|[" WS "]+(?![^" WS "])|[" WS "]+";

struct attn_bpe {
    int n;                /* tokens */
    int32_t eot;          /* <|endoftext|>, or -1 */
    uint32_t *off, *len;  /* token i's bytes: bytes[off[i] .. off[i] + len[i]) */
    char *bytes;          /* every token's bytes */
    int32_t byte_id[256]; /* the token of each single byte */
    int32_t *table;       /* open addressing: bytes -> id (-1 empty) */
    size_t mask;          /* table size - 1 */
    pcre2_code *re;
    int jit; /* the pattern is JIT-compiled */
};

/* ---- GPT-2's byte <-> printable character map ------------------------- */

/* Bytes '!'..'~', 0xA1..0xAC and 0xAE..0xFF stand for themselves; the other
 * 68 bytes, in order, for U+0100 onwards. rank_of: a byte's rank (its id in
 * GPT-2's encoder.json): the printable ones first, then the others. */
static void byte_chars(uint32_t cp_of[256], int16_t byte_of[324], int rank_of[256]) {
    int next = 256, printable = 0, other = 188;
    for (int i = 0; i < 324; i++)
        byte_of[i] = -1;
    for (int b = 0; b < 256; b++) {
        const int self = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
        cp_of[b] = self ? (uint32_t)b : (uint32_t)next++;
        rank_of[b] = self ? printable++ : other++;
        byte_of[cp_of[b]] = (int16_t)b;
    }
}

/* ---- bytes -> id ---------------------------------------------------------- */

static uint64_t fnv(const char *s, size_t n) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)s[i]) * 0x100000001b3ull;
    return h;
}

static int32_t lookup(const attn_bpe *t, const char *s, size_t n) {
    for (size_t i = fnv(s, n) & t->mask;; i = (i + 1) & t->mask) {
        const int32_t id = t->table[i];
        if (id < 0) return -1;
        if (t->len[id] == n && memcmp(t->bytes + t->off[id], s, n) == 0) return id;
    }
}

/* ---- loading ---------------------------------------------------------------- */

/* Decode one encoder.json / vocab.bpe string (code points through the map)
 * into out (room for n bytes); the byte count, or -1 when a character is
 * not in the map or the UTF-8 is bad. */
static long map_string(const int16_t byte_of[324], const char *s, size_t n, char *out) {
    size_t k = 0;
    for (size_t i = 0; i < n;) {
        const unsigned char c = (unsigned char)s[i];
        uint32_t cp;
        if (c < 0x80) {
            cp = c;
            i += 1;
        } else if ((c & 0xE0) == 0xC0 && i + 1 < n && ((unsigned char)s[i + 1] & 0xC0) == 0x80) {
            cp = (uint32_t)(c & 0x1F) << 6 | ((unsigned char)s[i + 1] & 0x3F);
            i += 2;
        } else {
            return -1; /* every mapped character is below U+0800 */
        }
        if (cp >= 324 || byte_of[cp] < 0) return -1;
        out[k++] = (char)byte_of[cp];
    }
    return (long)k;
}

/* The names the two files go by in messages (their paths, when loaded
 * from files). */
typedef struct bpe_names {
    const char *enc, *voc;
} bpe_names;

/* encoder.json parsed strictly (json_strict.h: one object, the whole text:
 * no second object, text after it, NUL byte or byte order mark). */
static attn_status parse_encoder(const char *json, size_t n, const char *name, cJSON **root,
                                 attn_error *err) {
    char *text = malloc(n + 1); /* the parser wants text[n] == '\0' */
    if (!text) return attn_fail(err, ATTN_ERR_NOMEM, "out of memory for %s", name);
    memcpy(text, json, n);
    text[n] = '\0';
    attn_status s = attn_json_parse_strict(text, n, name, root, err);
    free(text);
    if (!s && !cJSON_IsObject(*root)) {
        cJSON_Delete(*root);
        *root = NULL;
        s = attn_fail(err, ATTN_ERR_FORMAT, "%s is not a JSON object", name);
    }
    return s;
}

static attn_status load_encoder(attn_bpe *t, const int16_t byte_of[324], const char *json, size_t n,
                                const char *name, attn_error *err) {
    cJSON *root = NULL;
    attn_status s = parse_encoder(json, n, name, &root, err);
    if (s) return s;
    t->n = cJSON_GetArraySize(root);
    size_t total = 0;
    for (const cJSON *it = root->child; it; it = it->next)
        total += strlen(it->string);
    t->off = malloc((size_t)t->n * sizeof *t->off);
    t->len = calloc((size_t)t->n, sizeof *t->len);
    t->bytes = malloc(total + 1);
    if (!t->off || !t->len || !t->bytes) {
        s = attn_fail(err, ATTN_ERR_NOMEM, "out of memory for %d tokens", t->n);
        goto out;
    }
    for (int i = 0; i < t->n; i++)
        t->off[i] = UINT32_MAX; /* not seen yet */
    size_t used = 0;
    for (const cJSON *it = root->child; it; it = it->next) {
        const double v = cJSON_IsNumber(it) ? it->valuedouble : -1;
        if (!(v >= 0 && v < t->n && v == (double)(int)v)) {
            s = attn_fail(
                err, ATTN_ERR_FORMAT, "%s: token \"%.40s\" has id %.40s, not an integer in [0, %d)",
                name, it->string, cJSON_IsNumber(it) ? "out of range" : "that is no number", t->n);
            goto out;
        }
        const int id = (int)v;
        if (t->off[id] != UINT32_MAX) {
            s = attn_fail(err, ATTN_ERR_FORMAT, "%s: id %d is given twice", name, id);
            goto out;
        }
        const size_t klen = strlen(it->string);
        const long b = map_string(byte_of, it->string, klen, t->bytes + used);
        if (b <= 0) {
            s = attn_fail(err, ATTN_ERR_FORMAT,
                          "%s: token %d (\"%.40s\") is not spelled in GPT-2's byte characters",
                          name, id, it->string);
            goto out;
        }
        t->off[id] = (uint32_t)used;
        t->len[id] = (uint32_t)b;
        used += (size_t)b;
        if (strcmp(it->string, EOT_TEXT) == 0) t->eot = id;
    }
out:
    cJSON_Delete(root);
    return s;
}

static attn_status build_table(attn_bpe *t, const char *name, attn_error *err) {
    size_t size = 1;
    while (size < (size_t)t->n * 2)
        size <<= 1;
    t->table = malloc(size * sizeof *t->table);
    if (!t->table) return attn_fail(err, ATTN_ERR_NOMEM, "out of memory for the token table");
    t->mask = size - 1;
    for (size_t i = 0; i < size; i++)
        t->table[i] = -1;
    for (int id = 0; id < t->n; id++) {
        if (id == t->eot) continue; /* special: never made by merges */
        const char *b = t->bytes + t->off[id];
        if (lookup(t, b, t->len[id]) >= 0)
            return attn_fail(err, ATTN_ERR_FORMAT, "%s: two tokens have the bytes of %d", name, id);
        size_t i = fnv(b, t->len[id]) & t->mask;
        while (t->table[i] >= 0)
            i = (i + 1) & t->mask;
        t->table[i] = id;
    }
    for (int b = 0; b < 256; b++) {
        const char c = (char)b;
        if ((t->byte_id[b] = lookup(t, &c, 1)) < 0)
            return attn_fail(err, ATTN_ERR_FORMAT, "%s has no token for byte 0x%02x", name, b);
    }
    return ATTN_OK;
}

/* vocab.bpe's first line is "#version..." (OpenAI's files: "#version:
 * 0.2"). tiktoken and Hugging Face skip line 1 whatever it holds, so a file
 * without it would lose its first merge there: refused. A CRLF file is read
 * as its LF form (they split lines on white space too). */
static attn_status check_version_line(const char *text, size_t n, const char *name,
                                      attn_error *err) {
    if (n >= 3 && memcmp(text, "\xEF\xBB\xBF", 3) == 0)
        return attn_fail(err, ATTN_ERR_FORMAT,
                         "%s line 1: a byte order mark (EF BB BF) before \"#version\" (save it as "
                         "UTF-8 without BOM)",
                         name);
    if (n < 8 || memcmp(text, "#version", 8) != 0)
        return attn_fail(err, ATTN_ERR_FORMAT,
                         "%s line 1 is not its \"#version\" line (GPT-2's starts \"#version: "
                         "0.2\"; tiktoken and Hugging Face skip line 1 unread, so its first merge "
                         "would be lost)",
                         name);
    return ATTN_OK;
}

/* The id merge line l (ll bytes, "a b") makes, or -1 when it is not two
 * tokens whose join is one (-2: not "a b" at all). */
static int32_t merge_of(const attn_bpe *t, const int16_t byte_of[324], const char *l, size_t ll) {
    char buf[1024];
    const char *sp = memchr(l, ' ', ll);
    if (!sp || sp == l || sp == l + ll - 1 || memchr(sp + 1, ' ', (size_t)(l + ll - sp - 1)) ||
        ll > sizeof buf)
        return -2;
    const long na = map_string(byte_of, l, (size_t)(sp - l), buf);
    const long nb = na < 0 ? -1 : map_string(byte_of, sp + 1, (size_t)(l + ll - sp - 1), buf + na);
    const int32_t a = na > 0 ? lookup(t, buf, (size_t)na) : -1;
    const int32_t b = nb > 0 ? lookup(t, buf + na, (size_t)nb) : -1;
    return a >= 0 && b >= 0 ? lookup(t, buf, (size_t)(na + nb)) : -1;
}

/* vocab.bpe: "#version" then one merge "a b" a line. tiktoken's rule, which
 * it asserts of GPT-2's files: the single bytes are ids 0..255 in the map's
 * order and merge i (0-based) makes token 256 + i, so an id is its rank. */
static attn_status check_merges(const attn_bpe *t, const int16_t byte_of[324], const char *text,
                                size_t n, const bpe_names *nm, attn_error *err) {
    uint32_t cp_of[256];
    int16_t unused[324];
    int rank_of[256];
    byte_chars(cp_of, unused, rank_of);
    for (int b = 0; b < 256; b++)
        if (t->byte_id[b] != rank_of[b])
            return attn_fail(err, ATTN_ERR_FORMAT,
                             "%s: byte 0x%02x is id %d, not %d as in GPT-2's order", nm->enc, b,
                             t->byte_id[b], rank_of[b]);
    attn_status s = check_version_line(text, n, nm->voc, err);
    int rank = 0, line = 0;
    for (size_t i = 0; i < n && !s;) {
        size_t e = i;
        while (e < n && text[e] != '\n')
            e++;
        line++;
        const char *l = text + i;
        size_t ll = e - i;
        i = e + 1;
        if (ll && l[ll - 1] == '\r') ll--;
        if (ll == 0 || line == 1) continue;
        const int32_t ab = merge_of(t, byte_of, l, ll);
        if (ab == -2)
            return attn_fail(err, ATTN_ERR_FORMAT, "%s line %d is not one merge \"a b\"", nm->voc,
                             line);
        if (ab < 0)
            return attn_fail(err, ATTN_ERR_FORMAT,
                             "%s line %d: \"%.*s\" does not join two tokens of %s into one "
                             "(mismatched files?)",
                             nm->voc, line, (int)(ll < 60 ? ll : 60), l, nm->enc);
        if (ab != 256 + rank)
            return attn_fail(err, ATTN_ERR_FORMAT,
                             "%s line %d makes token %d, but merge %d must make token %d (a merge "
                             "given twice, or files that do not belong together)",
                             nm->voc, line, ab, rank, 256 + rank);
        rank++;
    }
    const int want = t->n - 256 - (t->eot >= 0);
    if (!s && rank != want)
        return attn_fail(err, ATTN_ERR_FORMAT,
                         "%s has %d merges but %s has %d tokens to make (a truncated or "
                         "mismatched file)",
                         nm->voc, rank, nm->enc, want);
    if (!s && t->eot >= 0 && t->eot != t->n - 1)
        return attn_fail(err, ATTN_ERR_FORMAT, "%s: %s is id %d, not the last id %d", nm->enc,
                         EOT_TEXT, t->eot, t->n - 1);
    return s;
}

static attn_status compile_pattern(attn_bpe *t, attn_error *err) {
    int code;
    PCRE2_SIZE at;
    t->re = pcre2_compile((PCRE2_SPTR)PATTERN, PCRE2_ZERO_TERMINATED, PCRE2_UTF, &code, &at, NULL);
    if (!t->re) {
        PCRE2_UCHAR msg[160];
        pcre2_get_error_message(code, msg, sizeof msg);
        return attn_fail(err, ATTN_ERR_STATE, "PCRE2 refused GPT-2's pattern at %zu: %s",
                         (size_t)at, (const char *)msg);
    }
    t->jit = pcre2_jit_compile(t->re, PCRE2_JIT_COMPLETE) == 0; /* else the interpreter */
    return ATTN_OK;
}

/* attn_bpe_from_memory, the files called by nm in messages. */
static attn_status bpe_build(attn_bpe **out, const char *encoder_json, size_t encoder_len,
                             const char *vocab_bpe, size_t vocab_len, const bpe_names *nm,
                             attn_error *err) {
    *out = NULL;
    attn_bpe *t = calloc(1, sizeof *t);
    if (!t) return attn_fail(err, ATTN_ERR_NOMEM, "out of memory for the tokenizer");
    t->eot = -1;
    uint32_t cp_of[256];
    int16_t byte_of[324];
    int rank_of[256];
    byte_chars(cp_of, byte_of, rank_of);
    attn_status s = load_encoder(t, byte_of, encoder_json, encoder_len, nm->enc, err);
    if (!s) s = build_table(t, nm->enc, err);
    if (!s) s = check_merges(t, byte_of, vocab_bpe, vocab_len, nm, err);
    if (!s) s = compile_pattern(t, err);
    if (s) {
        attn_bpe_free(t);
        return s;
    }
    *out = t;
    return ATTN_OK;
}

attn_status attn_bpe_from_memory(attn_bpe **out, const char *encoder_json, size_t encoder_len,
                                 const char *vocab_bpe, size_t vocab_len, attn_error *err) {
    const bpe_names nm = {"encoder.json", "vocab.bpe"};
    return bpe_build(out, encoder_json, encoder_len, vocab_bpe, vocab_len, &nm, err);
}

/* A file's name in messages: its path, and the role when the path's last
 * part is another name ("/x/merges.txt (vocab.bpe)"). */
static const char *role_name(char *buf, size_t cap, const char *path, const char *role) {
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    snprintf(buf, cap, strcmp(base, role) == 0 ? "%s" : "%s (%s)", path, role);
    return buf;
}

attn_status attn_bpe_load(attn_bpe **out, const char *encoder_json_path, const char *vocab_bpe_path,
                          attn_error *err) {
    void *enc = NULL, *voc = NULL;
    size_t ne = 0, nv = 0;
    *out = NULL;
    char en[512], vn[512];
    const bpe_names nm = {role_name(en, sizeof en, encoder_json_path, "encoder.json"),
                          role_name(vn, sizeof vn, vocab_bpe_path, "vocab.bpe")};
    attn_status s = attn_file_read_all(encoder_json_path, FILE_MAX, &enc, &ne, err);
    if (!s) s = attn_file_read_all(vocab_bpe_path, FILE_MAX, &voc, &nv, err);
    if (!s) s = bpe_build(out, enc, ne, voc, nv, &nm, err);
    free(enc);
    free(voc);
    return s;
}

void attn_bpe_free(attn_bpe *t) {
    if (!t) return;
    pcre2_code_free(t->re);
    free(t->off);
    free(t->len);
    free(t->bytes);
    free(t->table);
    free(t);
}

int attn_bpe_n_vocab(const attn_bpe *t) {
    return t->n;
}

int32_t attn_bpe_eot(const attn_bpe *t) {
    return t->eot;
}

const char *attn_bpe_token(const attn_bpe *t, int32_t id, size_t *len) {
    if (id < 0 || id >= t->n) return NULL;
    *len = t->len[id];
    return t->bytes + t->off[id];
}

/* ---- encoding ---------------------------------------------------------- */

/* One call's working memory, grown to the longest piece (amortised: no
 * allocation per piece once the pieces stop growing). */
/* Pieces repeat (words): a direct-mapped cache of short pieces' tokens,
 * large enough for a book's vocabulary of words (Tiny Shakespeare has ~25k
 * distinct pieces; calloc'd per call, so only the slots used are touched). */
#define CACHE_SLOTS 65536
#define CACHE_BYTES 24
#define CACHE_IDS 6
typedef struct cached {
    const char *p; /* the piece, in the caller's text (alive for the call) */
    uint8_t len, n;
    int32_t ids[CACHE_IDS];
} cached;

typedef struct scratch {
    pcre2_match_data *md;
    cached *cache;
    size_t cap;          /* parts the arrays hold */
    uint32_t *nxt, *prv; /* parts as a list over their start offsets */
    uint8_t *alive;
    struct pair *heap; /* candidate merges */
    size_t heap_n;
} scratch;

typedef struct pair {
    int32_t rank;  /* the joined token's id */
    uint32_t s, e; /* the joined bytes [s, e) */
} pair;

static int pair_less(const pair *a, const pair *b) {
    return a->rank != b->rank ? a->rank < b->rank : a->s < b->s; /* leftmost on a tie */
}

static void heap_push(scratch *w, pair p) {
    size_t i = w->heap_n++;
    while (i > 0 && pair_less(&p, &w->heap[(i - 1) / 2])) {
        w->heap[i] = w->heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    w->heap[i] = p;
}

static pair heap_pop(scratch *w) {
    const pair top = w->heap[0], last = w->heap[--w->heap_n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= w->heap_n) break;
        if (c + 1 < w->heap_n && pair_less(&w->heap[c + 1], &w->heap[c])) c++;
        if (!pair_less(&w->heap[c], &last)) break;
        w->heap[i] = w->heap[c];
        i = c;
    }
    if (w->heap_n) w->heap[i] = last;
    return top;
}

static attn_status reserve(scratch *w, size_t m, attn_error *err) {
    if (m <= w->cap) return ATTN_OK;
    size_t cap = w->cap ? w->cap : 64;
    while (cap < m)
        cap *= 2;
    uint32_t *nxt = realloc(w->nxt, cap * sizeof *nxt);
    if (nxt) w->nxt = nxt;
    uint32_t *prv = nxt ? realloc(w->prv, cap * sizeof *prv) : NULL;
    if (prv) w->prv = prv;
    uint8_t *alive = prv ? realloc(w->alive, cap) : NULL;
    if (alive) w->alive = alive;
    pair *heap = alive ? realloc(w->heap, 2 * cap * sizeof *heap) : NULL;
    if (!heap) return attn_fail(err, ATTN_ERR_NOMEM, "out of memory for a %zu-byte piece", m);
    w->heap = heap;
    w->cap = cap;
    return ATTN_OK;
}

/* Push the pair that starts at part s (if it has a right neighbour and the
 * two join into a token). */
static void push_pair(const attn_bpe *t, scratch *w, const char *p, size_t m, uint32_t s) {
    const uint32_t r = w->nxt[s];
    if (r >= m) return;
    const uint32_t e = w->nxt[r];
    const int32_t id = lookup(t, p + s, e - s);
    if (id >= 0) heap_push(w, (pair){id, s, e});
}

/* The tokens of one piece (m bytes at p) into ids; returns how many. */
static size_t bpe_piece(const attn_bpe *t, scratch *w, const char *p, size_t m, int32_t *ids) {
    if (m == 1) {
        ids[0] = t->byte_id[(unsigned char)p[0]];
        return 1;
    }
    const int32_t whole = lookup(t, p, m); /* tiktoken takes a whole token as is */
    if (whole >= 0) {
        ids[0] = whole;
        return 1;
    }
    for (uint32_t i = 0; i < m; i++) {
        w->nxt[i] = i + 1;
        w->prv[i] = i ? i - 1 : UINT32_MAX;
        w->alive[i] = 1;
    }
    w->heap_n = 0;
    for (uint32_t i = 0; i + 1 < m; i++)
        push_pair(t, w, p, m, i);
    while (w->heap_n) {
        const pair q = heap_pop(w);
        /* Stale when part s is gone or its pair no longer ends at e. */
        if (!w->alive[q.s] || w->nxt[q.s] >= m || w->nxt[w->nxt[q.s]] != q.e) continue;
        const uint32_t r = w->nxt[q.s];
        w->alive[r] = 0;
        w->nxt[q.s] = q.e;
        if (q.e < m) w->prv[q.e] = q.s;
        push_pair(t, w, p, m, q.s);
        if (w->prv[q.s] != UINT32_MAX) push_pair(t, w, p, m, w->prv[q.s]);
    }
    size_t k = 0;
    for (uint32_t s = 0; s < m; s = w->nxt[s])
        ids[k++] = lookup(t, p + s, w->nxt[s] - s);
    return k;
}

typedef struct sink {
    int32_t *ids;
    size_t cap, n;
} sink;

static attn_status emit_piece(const attn_bpe *t, scratch *w, const char *p, size_t m, sink *o,
                              attn_error *err) {
    if (o->cap - o->n < m)
        return attn_fail(err, ATTN_ERR_INVALID_ARG, "the ids buffer (%zu) is too small", o->cap);
    cached *c = NULL;
    if (m <= CACHE_BYTES && m > 1) {
        c = &w->cache[fnv(p, m) & (CACHE_SLOTS - 1)];
        if (c->len == m && memcmp(c->p, p, m) == 0) {
            memcpy(o->ids + o->n, c->ids, c->n * sizeof *c->ids);
            o->n += c->n;
            return ATTN_OK;
        }
    }
    attn_status s = reserve(w, m, err);
    if (s) return s;
    const size_t k = bpe_piece(t, w, p, m, o->ids + o->n);
    if (c && k <= CACHE_IDS) {
        *c = (cached){p, (uint8_t)m, (uint8_t)k, {0}};
        memcpy(c->ids, o->ids + o->n, k * sizeof *c->ids);
    }
    o->n += k;
    return ATTN_OK;
}

/* Text without special tokens: valid runs through the pattern, each invalid
 * byte a piece of its own. */
static attn_status encode_ordinary(const attn_bpe *t, scratch *w, const char *text, size_t n,
                                   sink *o, attn_error *err) {
    size_t i = 0;
    attn_status s = ATTN_OK;
    while (i < n && !s) {
        const size_t run = attn_utf8_prefix(text + i, n - i);
        const PCRE2_SPTR subj = (PCRE2_SPTR)(text + i);
        for (size_t at = 0; at < run && !s;) {
            const int rc =
                t->jit ? pcre2_jit_match(t->re, subj, run, at, PCRE2_NO_UTF_CHECK, w->md, NULL)
                       : pcre2_match(t->re, subj, run, at, PCRE2_NO_UTF_CHECK, w->md, NULL);
            const PCRE2_SIZE *ov = pcre2_get_ovector_pointer(w->md);
            /* The pattern matches every character, so pieces tile the run;
             * should it not, the rest is one piece rather than lost. */
            const size_t b = rc > 0 && ov[0] == at && ov[1] > at ? ov[1] : run;
            s = emit_piece(t, w, text + i + at, b - at, o, err);
            at = b;
        }
        i += run;
        if (i < n && !s) s = emit_piece(t, w, text + i++, 1, o, err);
    }
    return s;
}

attn_status attn_bpe_encode(const attn_bpe *t, const char *text, size_t n, int allow_special,
                            int32_t *ids, size_t cap, size_t *n_ids, attn_error *err) {
    *n_ids = 0;
    scratch w = {0};
    sink o = {ids, cap, 0};
    w.md = pcre2_match_data_create_from_pattern(t->re, NULL);
    w.cache = calloc(CACHE_SLOTS, sizeof *w.cache);
    attn_status s =
        w.md && w.cache ? ATTN_OK : attn_fail(err, ATTN_ERR_NOMEM, "out of memory for encoding");
    size_t i = 0;
    while (i < n && !s) {
        const char *eot =
            allow_special && t->eot >= 0 ? memmem(text + i, n - i, EOT_TEXT, EOT_LEN) : NULL;
        const size_t end = eot ? (size_t)(eot - text) : n;
        s = encode_ordinary(t, &w, text + i, end - i, &o, err);
        i = end;
        if (eot && !s) {
            if (o.n == o.cap)
                s = attn_fail(err, ATTN_ERR_INVALID_ARG, "the ids buffer (%zu) is too small", cap);
            else
                o.ids[o.n++] = t->eot;
            i += EOT_LEN;
        }
    }
    pcre2_match_data_free(w.md);
    free(w.cache);
    free(w.nxt);
    free(w.prv);
    free(w.alive);
    free(w.heap);
    if (!s) *n_ids = o.n;
    return s;
}

attn_status attn_bpe_decode(const attn_bpe *t, const int32_t *ids, size_t n, char *out, size_t cap,
                            size_t *len, attn_error *err) {
    size_t need = 0;
    for (size_t i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= t->n)
            return attn_fail(err, ATTN_ERR_INVALID_ARG, "token id %d at %zu is not in [0, %d)",
                             ids[i], i, t->n);
        need += t->len[ids[i]];
    }
    *len = need;
    if (need > cap)
        return attn_fail(err, ATTN_ERR_INVALID_ARG, "decoding needs %zu bytes, the buffer has %zu",
                         need, cap);
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        memcpy(out + k, t->bytes + t->off[ids[i]], t->len[ids[i]]);
        k += t->len[ids[i]];
    }
    return ATTN_OK;
}
