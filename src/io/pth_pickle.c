/* A restricted unpickler for torch.save'd state_dicts (see pth_pickle.h).
 *
 * It interprets only the protocol-2 opcodes torch.save emits for a dict of
 * tensors and builds plain values; the only callables are the few allowed
 * globals, each "called" by code here that checks its arguments. Every count
 * is bounded by the pickle's own size: a value is made per opcode at most,
 * memo indices must be sequential as Python's pickler writes them, strings
 * lie inside the pickle, marks nest at most PTH_MAX_MARKS deep. */
#include "pth_pickle.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn/parse.h"

#define PTH_MAX_MARKS 64
#define PTH_MAX_GLOBAL 64 /* longest module or name of an allowed global */

const pth_dtype PTH_DTYPES[] = {{"FloatStorage", "F32", 4}, {"DoubleStorage", "F64", 8},
                                {"HalfStorage", "F16", 2},  {"BFloat16Storage", "BF16", 2},
                                {"LongStorage", "I64", 8},  {"IntStorage", "I32", 4},
                                {"ShortStorage", "I16", 2}, {"CharStorage", "I8", 1},
                                {"ByteStorage", "U8", 1},   {"BoolStorage", "BOOL", 1}};
const int PTH_NDTYPES = (int)(sizeof PTH_DTYPES / sizeof PTH_DTYPES[0]);

enum { V_NONE, V_BOOL, V_INT, V_STR, V_TUPLE, V_LIST, V_DICT, V_GLOBAL, V_STORAGE, V_TENSOR };
enum { G_ODICT, G_REBUILD_TENSOR, G_REBUILD_PARAM, G_STORAGE };

typedef struct pval {
    int kind;
    int64_t i; /* BOOL, INT; GLOBAL: G_*; STORAGE, TENSOR: index */
    int sub;   /* GLOBAL G_STORAGE: dtype index */
    const char *s;
    size_t len;          /* STR: bytes inside the pickle */
    struct pval **items; /* TUPLE, LIST; DICT: key, value, key, value, ... */
    size_t n, cap;
} pval;

typedef struct up {
    const unsigned char *p;
    size_t n, pos;
    const char *name;
    attn_error *err;
    pval **all; /* every value made, freed together */
    size_t nall, capall;
    pval **stack;
    size_t sp, capstack;
    size_t marks[PTH_MAX_MARKS];
    int nmarks;
    pval **memo;
    size_t nmemo, capmemo;
    pth_tensor *descs;
    size_t ndescs, capdescs;
    pth_storage *storages;
    size_t nstorages, capstorages;
} up;

#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
static attn_status
bad(up *u, const char *fmt, ...) {
    char msg[ATTN_ERROR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return attn_fail(u->err, ATTN_ERR_FORMAT, "%s: not a state_dict of tensors: %s", u->name, msg);
}

static attn_status nomem(up *u) {
    return attn_fail(u->err, ATTN_ERR_NOMEM, "%s: out of memory reading the pickle", u->name);
}

/* Room for need elements of elem bytes in the array *pp points to (a typed
 * pointer, moved through memcpy), capacity *cap: 0, or -1 out of memory. */
static int grow_to(void *pp, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap) return 0;
    size_t c = *cap ? *cap : 8;
    while (c < need)
        c *= 2;
    void *old, *q;
    memcpy(&old, pp, sizeof old);
    if (c > SIZE_MAX / elem || !(q = realloc(old, c * elem))) return -1;
    memcpy(pp, &q, sizeof q);
    *cap = c;
    return 0;
}
#define GROW(arr, cap, need) grow_to(&(arr), &(cap), (need), sizeof *(arr))

static pval *nv(up *u, int kind) {
    if (GROW(u->all, u->capall, u->nall + 1)) return NULL;
    pval *v = calloc(1, sizeof *v);
    if (!v) return NULL;
    v->kind = kind;
    u->all[u->nall++] = v;
    return v;
}

static int add_item(pval *c, pval *x) {
    if (GROW(c->items, c->cap, c->n + 1)) return -1;
    c->items[c->n++] = x;
    return 0;
}

static attn_status push(up *u, pval *v) {
    if (!v || GROW(u->stack, u->capstack, u->sp + 1)) return nomem(u);
    u->stack[u->sp++] = v;
    return ATTN_OK;
}

/* The lowest stack slot the current mark leaves reachable. */
static size_t floor_sp(const up *u) {
    return u->nmarks ? u->marks[u->nmarks - 1] : 0;
}

static attn_status pop(up *u, pval **v, size_t at) {
    if (u->sp <= floor_sp(u)) return bad(u, "stack underflow at byte %zu", at);
    *v = u->stack[--u->sp];
    return ATTN_OK;
}

static attn_status peek(up *u, pval **v, size_t at) {
    if (u->sp <= floor_sp(u)) return bad(u, "stack underflow at byte %zu", at);
    *v = u->stack[u->sp - 1];
    return ATTN_OK;
}

static attn_status need(up *u, size_t k, size_t at) {
    if (u->n - u->pos < k) return bad(u, "truncated at byte %zu", at);
    return ATTN_OK;
}

static uint64_t le(const unsigned char *b, int k) {
    uint64_t x = 0;
    for (int i = k - 1; i >= 0; i--)
        x = x << 8 | b[i];
    return x;
}

/* ---- constants: ints, strings, None, bools ------------------------------ */

static attn_status push_int(up *u, int64_t x) {
    pval *v = nv(u, V_INT);
    if (v) v->i = x;
    return push(u, v);
}

/* BININT (4 bytes, signed), BININT1 (1), BININT2 (2, unsigned), LONG1. */
static attn_status op_int(up *u, int op, size_t at) {
    int k = op == 'J' ? 4 : op == 'K' ? 1 : op == 'M' ? 2 : -1;
    attn_status s;
    if (k < 0) {
        if ((s = need(u, 1, at))) return s;
        k = u->p[u->pos++];
        if (k > 8) return bad(u, "LONG1 of %d bytes at byte %zu", k, at);
    }
    if ((s = need(u, (size_t)k, at))) return s;
    uint64_t x = le(u->p + u->pos, k);
    u->pos += (size_t)k;
    if ((op == 'J' || op == 0x8a) && k > 0 && k < 8 && (x >> (8 * k - 1)) & 1)
        x |= ~(uint64_t)0 << (8 * k); /* sign-extend */
    return push_int(u, (int64_t)x);
}

/* BINUNICODE (4-byte length), SHORT_BINUNICODE (1-byte length). */
static attn_status op_str(up *u, int op, size_t at) {
    int k = op == 'X' ? 4 : 1;
    attn_status s;
    if ((s = need(u, (size_t)k, at))) return s;
    uint64_t len = le(u->p + u->pos, k);
    u->pos += (size_t)k;
    if ((s = need(u, len, at))) return s;
    pval *v = nv(u, V_STR);
    if (v) {
        v->s = (const char *)u->p + u->pos;
        v->len = (size_t)len;
    }
    u->pos += (size_t)len;
    return push(u, v);
}

static attn_status op_const(up *u, int op) {
    pval *v = nv(u, op == 'N' ? V_NONE : V_BOOL);
    if (v) v->i = op == 0x88;
    return push(u, v);
}

/* ---- containers and marks ---------------------------------------------- */

static attn_status op_mark(up *u, size_t at) {
    if (u->nmarks == PTH_MAX_MARKS)
        return bad(u, "marks nest deeper than %d at byte %zu", PTH_MAX_MARKS, at);
    u->marks[u->nmarks++] = u->sp;
    return ATTN_OK;
}

/* Move the top k stack items into c (k = everything above the mark when
 * from_mark, which is then dropped). */
static attn_status collect(up *u, pval *c, size_t k, int from_mark, size_t at) {
    if (!c) return nomem(u);
    if (from_mark) {
        if (!u->nmarks) return bad(u, "no MARK before byte %zu", at);
        k = u->sp - u->marks[--u->nmarks];
    } else if (u->sp - floor_sp(u) < k) {
        return bad(u, "stack underflow at byte %zu", at);
    }
    if (k && GROW(c->items, c->cap, c->n + k)) return nomem(u);
    memcpy(c->items + c->n, u->stack + u->sp - k, k * sizeof *c->items);
    c->n += k;
    u->sp -= k;
    return ATTN_OK;
}

static attn_status op_tuple(up *u, int op, size_t at) {
    pval *t = nv(u, V_TUPLE);
    attn_status s;
    if (op == ')')
        s = t ? ATTN_OK : nomem(u);
    else if (op == 't')
        s = collect(u, t, 0, 1, at);
    else
        s = collect(u, t, (size_t)(op - 0x84), 0, at); /* TUPLE1..3 */
    return s ? s : push(u, t);
}

/* SETITEM, SETITEMS, APPEND, APPENDS into the dict or list below. */
static attn_status op_fill(up *u, int op, size_t at) {
    int many = op == 'u' || op == 'e';
    pval tmp = {0}, *c = NULL;
    attn_status s = collect(u, &tmp, op == 's' ? 2 : 1, many, at);
    if (!s) s = peek(u, &c, at);
    int dict = op == 's' || op == 'u';
    if (!s && c->kind != (dict ? V_DICT : V_LIST))
        s = bad(u, "%s into a non-%s at byte %zu", dict ? "SETITEM" : "APPEND",
                dict ? "dict" : "list", at);
    if (!s && dict && tmp.n % 2) s = bad(u, "SETITEMS of an odd count at byte %zu", at);
    for (size_t i = 0; !s && i < tmp.n; i++)
        if (add_item(c, tmp.items[i])) s = nomem(u);
    free(tmp.items);
    return s;
}

/* ---- memo ------------------------------------------------------------- */

static attn_status op_memo(up *u, int op, size_t at) {
    int k = op == 'q' || op == 'h' ? 1 : 4;
    attn_status s = need(u, (size_t)k, at);
    if (s) return s;
    uint64_t idx = le(u->p + u->pos, k);
    u->pos += (size_t)k;
    if (op == 'h' || op == 'j') {
        if (idx >= u->nmemo || !u->memo[idx])
            return bad(u, "no memo %llu at byte %zu", (unsigned long long)idx, at);
        return push(u, u->memo[idx]);
    }
    pval *v = NULL;
    if ((s = peek(u, &v, at))) return s;
    if (idx > u->nmemo) /* Python numbers memo entries 0, 1, 2, ... */
        return bad(u, "memo index %llu out of order at byte %zu", (unsigned long long)idx, at);
    if (idx == u->nmemo) {
        if (GROW(u->memo, u->capmemo, u->nmemo + 1)) return nomem(u);
        u->nmemo++;
    }
    u->memo[idx] = v;
    return ATTN_OK;
}

/* ---- globals, persistent ids and calls --------------------------------- */

/* One line of a GLOBAL: up to '\n', inside the pickle, at most
 * PTH_MAX_GLOBAL bytes (longer names are no allowed global anyway). */
static attn_status global_line(up *u, const char **s, size_t *len, size_t at) {
    const unsigned char *nl = memchr(u->p + u->pos, '\n', u->n - u->pos);
    if (!nl) return bad(u, "GLOBAL without end of line at byte %zu", at);
    *s = (const char *)u->p + u->pos;
    *len = (size_t)(nl - (u->p + u->pos));
    u->pos += *len + 1;
    if (*len > PTH_MAX_GLOBAL) *len = PTH_MAX_GLOBAL; /* named, truncated, then refused */
    return ATTN_OK;
}

static int is(const char *s, size_t len, const char *lit) {
    return strlen(lit) == len && memcmp(s, lit, len) == 0;
}

static attn_status op_global(up *u, size_t at) {
    const char *m = NULL, *nm = NULL;
    size_t ml = 0, nl = 0;
    attn_status s = global_line(u, &m, &ml, at);
    if (!s) s = global_line(u, &nm, &nl, at);
    if (s) return s;
    int g = -1, sub = 0;
    if (is(m, ml, "collections") && is(nm, nl, "OrderedDict")) g = G_ODICT;
    if (is(m, ml, "torch._utils") && is(nm, nl, "_rebuild_tensor_v2")) g = G_REBUILD_TENSOR;
    if (is(m, ml, "torch._utils") && is(nm, nl, "_rebuild_parameter")) g = G_REBUILD_PARAM;
    for (int d = 0; d < PTH_NDTYPES && is(m, ml, "torch"); d++)
        if (is(nm, nl, PTH_DTYPES[d].storage)) g = G_STORAGE, sub = d;
    if (g < 0)
        return bad(u, "global '%.*s %.*s' at byte %zu is not allowed", (int)ml, m, (int)nl, nm, at);
    pval *v = nv(u, V_GLOBAL);
    if (v) v->i = g, v->sub = sub;
    return push(u, v);
}

static int is_str(const pval *v, const char *lit) {
    return v->kind == V_STR && is(v->s, v->len, lit);
}

/* A new storage, or the one already seen under this key (same type and size). */
static attn_status add_storage(up *u, const pval *key, int dtype, uint64_t numel, int64_t *idx,
                               size_t at) {
    for (size_t i = 0; i < u->nstorages; i++) {
        pth_storage *st = &u->storages[i];
        if (strlen(st->key) != key->len || memcmp(st->key, key->s, key->len) != 0) continue;
        if (st->dtype != dtype || st->numel != numel)
            return bad(u, "storage '%s' described twice differently (byte %zu)", st->key, at);
        *idx = (int64_t)i;
        return ATTN_OK;
    }
    if (GROW(u->storages, u->capstorages, u->nstorages + 1)) return nomem(u);
    pth_storage *st = &u->storages[u->nstorages];
    if (!(st->key = malloc(key->len + 1))) return nomem(u);
    memcpy(st->key, key->s, key->len);
    st->key[key->len] = '\0';
    st->dtype = dtype;
    st->numel = numel;
    *idx = (int64_t)u->nstorages++;
    return ATTN_OK;
}

/* BINPERSID: ('storage', torch.<T>Storage, key, location, numel). */
static attn_status op_persid(up *u, size_t at) {
    pval *pid = NULL;
    attn_status s = pop(u, &pid, at);
    if (s) return s;
    pval **it = pid->items;
    if (pid->kind != V_TUPLE || pid->n != 5 || !is_str(it[0], "storage") ||
        it[1]->kind != V_GLOBAL || it[1]->i != G_STORAGE || it[2]->kind != V_STR ||
        it[3]->kind != V_STR || it[4]->kind != V_INT || it[4]->i < 0)
        return bad(u, "persistent id at byte %zu is not a storage", at);
    const pval *key = it[2];
    /* The key names a zip entry: short, plain ASCII letters and digits. */
    if (key->len == 0 || key->len > 64) return bad(u, "storage key at byte %zu", at);
    for (size_t i = 0; i < key->len; i++)
        if (!strchr("0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_", key->s[i]) ||
            key->s[i] == '\0')
            return bad(u, "storage key '%.*s' at byte %zu", (int)key->len, key->s, at);
    int64_t idx = 0;
    if ((s = add_storage(u, key, it[1]->sub, (uint64_t)it[4]->i, &idx, at))) return s;
    pval *v = nv(u, V_STORAGE);
    if (v) v->i = idx;
    return push(u, v);
}

static int int_tuple(const pval *t, int64_t *out) {
    if (t->kind != V_TUPLE || t->n > ATTN_ST_MAX_DIMS) return 0;
    for (size_t i = 0; i < t->n; i++) {
        if (t->items[i]->kind != V_INT) return 0;
        out[i] = t->items[i]->i;
    }
    return 1;
}

/* _rebuild_tensor_v2(storage, offset, size, stride, requires_grad, hooks
 * [, metadata]). */
static attn_status rebuild_tensor(up *u, const pval *a, size_t at) {
    pval **it = a->items;
    pth_tensor d = {0};
    if ((a->n != 6 && a->n != 7) || it[0]->kind != V_STORAGE || it[1]->kind != V_INT ||
        !int_tuple(it[2], d.shape) || !int_tuple(it[3], d.stride) || it[2]->n != it[3]->n ||
        it[4]->kind != V_BOOL || it[5]->kind != V_DICT ||
        (a->n == 7 && it[6]->kind != V_DICT && it[6]->kind != V_NONE))
        return bad(u, "_rebuild_tensor_v2 arguments at byte %zu", at);
    d.storage = (int)it[0]->i;
    d.offset = it[1]->i;
    d.ndim = (int)it[2]->n;
    if (GROW(u->descs, u->capdescs, u->ndescs + 1)) return nomem(u);
    u->descs[u->ndescs] = d;
    pval *v = nv(u, V_TENSOR);
    if (v) v->i = (int64_t)u->ndescs++;
    return push(u, v);
}

static attn_status op_reduce(up *u, size_t at) {
    pval *args = NULL, *f = NULL;
    attn_status s = pop(u, &args, at);
    if (!s) s = pop(u, &f, at);
    if (s) return s;
    if (f->kind != V_GLOBAL || args->kind != V_TUPLE || f->i == G_STORAGE)
        return bad(u, "REDUCE of something not callable at byte %zu", at);
    if (f->i == G_REBUILD_TENSOR) return rebuild_tensor(u, args, at);
    if (f->i == G_ODICT) {
        if (args->n) return bad(u, "OrderedDict with arguments at byte %zu", at);
        return push(u, nv(u, V_DICT));
    }
    /* _rebuild_parameter(data, requires_grad, hooks): the tensor itself. */
    if (args->n != 3 || args->items[0]->kind != V_TENSOR || args->items[1]->kind != V_BOOL ||
        args->items[2]->kind != V_DICT)
        return bad(u, "_rebuild_parameter arguments at byte %zu", at);
    return push(u, args->items[0]);
}

/* BUILD on the state_dict: its _metadata attribute (a dict), accepted and dropped. */
static attn_status op_build(up *u, size_t at) {
    pval *state = NULL, *obj = NULL;
    attn_status s = pop(u, &state, at);
    if (!s) s = peek(u, &obj, at);
    if (s) return s;
    if (obj->kind != V_DICT || state->kind != V_DICT)
        return bad(u, "BUILD of something other than a dict's attributes at byte %zu", at);
    return ATTN_OK;
}

/* ---- the interpreter --------------------------------------------------- */

static attn_status step(up *u, int op, size_t at) {
    switch (op) {
    case 'J':
    case 'K':
    case 'M':
    case 0x8a: return op_int(u, op, at);
    case 'X':
    case 0x8c: return op_str(u, op, at);
    case 'N':
    case 0x88:
    case 0x89: return op_const(u, op);
    case '(': return op_mark(u, at);
    case ')':
    case 't':
    case 0x85:
    case 0x86:
    case 0x87: return op_tuple(u, op, at);
    case '}': return push(u, nv(u, V_DICT));
    case ']': return push(u, nv(u, V_LIST));
    case 's':
    case 'u':
    case 'a':
    case 'e': return op_fill(u, op, at);
    case 'q':
    case 'r':
    case 'h':
    case 'j': return op_memo(u, op, at);
    case 'c': return op_global(u, at);
    case 'Q': return op_persid(u, at);
    case 'R': return op_reduce(u, at);
    case 'b': return op_build(u, at);
    case 0x80: {
        attn_status s = need(u, 1, at);
        if (s) return s;
        int proto = u->p[u->pos++];
        if (at != 0 || proto < 2 || proto > 5) return bad(u, "PROTO %d at byte %zu", proto, at);
        return ATTN_OK;
    }
    default: return bad(u, "opcode 0x%02x at byte %zu is not supported", (unsigned)op, at);
    }
}

static int cmp_tensor_name(const void *a, const void *b) {
    return strcmp(((const pth_tensor *)a)->name, ((const pth_tensor *)b)->name);
}

/* The result: a dict of unique, valid UTF-8 string keys to tensors. */
static attn_status take_result(up *u, const pval *d, pth_pickle *out) {
    if (d->kind != V_DICT) return bad(u, "the pickle holds no dict");
    size_t n = d->n / 2;
    if (n > (size_t)INT32_MAX) return bad(u, "too many entries");
    if (n && !(out->tensors = calloc(n, sizeof *out->tensors))) return nomem(u);
    for (size_t i = 0; i < n; i++) {
        const pval *k = d->items[2 * i], *v = d->items[2 * i + 1];
        if (k->kind != V_STR || !k->len || memchr(k->s, 0, k->len) ||
            !attn_utf8_valid(k->s, k->len))
            return bad(u, "entry %zu's key is not a name", i);
        if (v->kind != V_TENSOR) return bad(u, "entry '%.*s' is not a tensor", (int)k->len, k->s);
        pth_tensor *t = &out->tensors[out->count];
        *t = u->descs[v->i];
        if (!(t->name = malloc(k->len + 1))) return nomem(u);
        memcpy(t->name, k->s, k->len);
        t->name[k->len] = '\0';
        out->count++;
    }
    pth_tensor *sorted = n ? malloc(n * sizeof *sorted) : NULL;
    if (n && !sorted) return nomem(u);
    if (n) memcpy(sorted, out->tensors, n * sizeof *sorted);
    if (n) qsort(sorted, n, sizeof *sorted, cmp_tensor_name);
    attn_status s = ATTN_OK;
    for (size_t i = 1; i < n && !s; i++)
        if (strcmp(sorted[i - 1].name, sorted[i].name) == 0)
            s = bad(u, "entry '%s' appears twice", sorted[i].name);
    free(sorted);
    return s;
}

static attn_status run(up *u, pth_pickle *out) {
    while (u->pos < u->n) {
        size_t at = u->pos;
        int op = u->p[u->pos++];
        if (op != '.') {
            attn_status s = step(u, op, at);
            if (s) return s;
            continue;
        }
        if (u->nmarks || u->sp != 1) return bad(u, "STOP with %zu values left", u->sp);
        if (u->pos != u->n) return bad(u, "%zu bytes after STOP", u->n - u->pos);
        return take_result(u, u->stack[0], out);
    }
    return bad(u, "no STOP (truncated)");
}

void pth_pickle_free(pth_pickle *p) {
    if (!p) return;
    for (int i = 0; i < p->count; i++)
        free(p->tensors[i].name);
    free(p->tensors);
    for (int i = 0; i < p->nstorages; i++)
        free(p->storages[i].key);
    free(p->storages);
    memset(p, 0, sizeof *p);
}

attn_status pth_unpickle(const unsigned char *pkl, size_t n, const char *name, pth_pickle *out,
                         attn_error *err) {
    memset(out, 0, sizeof *out);
    up u = {.p = pkl, .n = n, .name = name, .err = err};
    attn_status s = run(&u, out);
    if (!s && u.nstorages > (size_t)INT32_MAX) s = bad(&u, "too many storages");
    out->storages = u.storages; /* owned by out from here, freed with it */
    out->nstorages = (int)u.nstorages;
    for (size_t i = 0; i < u.nall; i++) {
        free(u.all[i]->items);
        free(u.all[i]);
    }
    free(u.all);
    free(u.stack);
    free(u.memo);
    free(u.descs);
    if (s) pth_pickle_free(out);
    return s;
}
