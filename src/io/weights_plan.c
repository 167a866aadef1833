/* Layouts of weight files: binding, gathering, scattering (weights_plan.h). */
#include "weights_plan.h"

#include "attn/membudget.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void wf_layout_init(wf_layout *l) {
    memset(l, 0, sizeof *l);
}

void wf_layout_free(wf_layout *l) {
    for (int i = 0; i < l->nt; i++)
        free(l->t[i].buf);
    free(l->t);
    free(l->c);
    wf_layout_init(l);
}

/* Room for one more of n (cap doubling); 0, or -1 out of memory. */
static int grow(void **p, int n, int *cap, size_t size) {
    if (n < *cap) return 0;
    const int want = *cap ? 2 * *cap : 64;
    void *q = realloc(*p, (size_t)want * size);
    if (!q) return -1;
    *p = q;
    *cap = want;
    return 0;
}

int wf_add_tensor(wf_layout *l, const char *name, int ndim, int64_t d0, int64_t d1, int64_t d2) {
    if (grow((void **)&l->t, l->nt, &l->cap_t, sizeof *l->t)) return -1;
    wf_tensor *t = &l->t[l->nt];
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", name);
    const int64_t d[3] = {d0, d1, d2};
    t->ndim = ndim;
    t->numel = 1;
    for (int i = 0; i < ndim; i++) {
        t->shape[i] = d[i];
        t->numel *= (size_t)d[i];
    }
    return l->nt++;
}

int wf_add_copy(wf_layout *l, int tensor, const char *param, size_t off, size_t stride,
                int64_t rows, int64_t cols) {
    if (tensor < 0 || grow((void **)&l->c, l->nc, &l->cap_c, sizeof *l->c)) return -1;
    wf_copy *c = &l->c[l->nc++];
    snprintf(c->param, sizeof c->param, "%s", param);
    c->tensor = tensor;
    c->off = off;
    c->stride = stride;
    c->rows = rows;
    c->cols = cols;
    return 0;
}

/* IEEE half to float, subnormals, infinities and NaN included. */
static float half_to_float(uint16_t h) {
    const uint32_t sign = (uint32_t)(h >> 15) << 31;
    uint32_t exp = (h >> 10) & 0x1f, man = h & 0x3ffu, bits;
    if (exp == 0x1f) {
        bits = sign | 0x7f800000u | (man << 13);
    } else if (exp == 0) {
        if (!man) {
            bits = sign;
        } else { /* subnormal: normalise */
            int e = -1;
            do {
                man <<= 1;
                e++;
            } while (!(man & 0x400u));
            bits = sign | ((uint32_t)(127 - 15 - e) << 23) | ((man & 0x3ffu) << 13);
        }
    } else {
        bits = sign | ((exp + 127 - 15) << 23) | (man << 13);
    }
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

float wf_load(const void *src, wf_dtype dtype, size_t i) {
    const unsigned char *b = src;
    if (dtype == WF_F32) {
        float f;
        memcpy(&f, b + 4 * i, sizeof f);
        return f;
    }
    uint16_t h;
    memcpy(&h, b + 2 * i, sizeof h);
    if (dtype == WF_F16) return half_to_float(h);
    const uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

static void shape_text(char *buf, size_t cap, int ndim, const int64_t *shape) {
    size_t u = (size_t)snprintf(buf, cap, "[");
    for (int d = 0; d < ndim && u < cap; d++)
        u += (size_t)snprintf(buf + u, cap - u, "%s%lld", d ? ", " : "", (long long)shape[d]);
    if (u < cap) snprintf(buf + u, cap - u, "]");
}

/* One layout tensor against the file's tensor of its name. */
static attn_status bind_one(wf_tensor *t, const attn_st_tensor *f, const char *file,
                            attn_error *err) {
    int same = f->ndim == t->ndim;
    for (int d = 0; same && d < t->ndim; d++)
        same = f->shape[d] == t->shape[d];
    if (!same) {
        char got[96], want[96];
        shape_text(got, sizeof got, f->ndim, f->shape);
        shape_text(want, sizeof want, t->ndim, t->shape);
        return attn_fail(err, ATTN_ERR_SHAPE, "%s: tensor '%s' has shape %s, expected %s", file,
                         t->name, got, want);
    }
    if (strcmp(f->dtype, "F32") == 0)
        t->dtype = WF_F32;
    else if (strcmp(f->dtype, "F16") == 0)
        t->dtype = WF_F16;
    else if (strcmp(f->dtype, "BF16") == 0)
        t->dtype = WF_BF16;
    else
        return attn_fail(err, ATTN_ERR_FORMAT,
                         "%s: tensor '%s' has dtype %s, expected F32 (or F16, BF16)", file, t->name,
                         f->dtype);
    t->src = f->data;
    return ATTN_OK;
}

static int layout_has(const wf_layout *l, const char *name) {
    for (int i = 0; i < l->nt; i++)
        if (strcmp(l->t[i].name, name) == 0) return 1;
    return 0;
}

attn_status wf_bind(wf_layout *l, const attn_safetensors *st, wf_ignore_fn ignore, const void *ctx,
                    const char *file, attn_error *err) {
    int missing = 0, extra = 0;
    const char *first_missing = NULL, *first_extra = NULL;
    for (int i = 0; i < l->nt; i++)
        if (!attn_safetensors_find(st, l->t[i].name) && !missing++) first_missing = l->t[i].name;
    for (int i = 0; i < st->count; i++) {
        const char *name = st->tensors[i].name;
        if (!layout_has(l, name) && !(ignore && ignore(name, ctx)) && !extra++) first_extra = name;
    }
    if (missing)
        return attn_fail(err, ATTN_ERR_NOT_FOUND, "%s: missing tensor '%s'%s (%d missing)", file,
                         first_missing, missing > 1 ? " and more" : "", missing);
    if (extra)
        return attn_fail(err, ATTN_ERR_FORMAT, "%s: unexpected tensor '%s'%s (%d unexpected)", file,
                         first_extra, extra > 1 ? " and more" : "", extra);
    for (int i = 0; i < l->nt; i++) {
        attn_status s = bind_one(&l->t[i], attn_safetensors_find(st, l->t[i].name), file, err);
        if (s) return s;
    }
    return ATTN_OK;
}

/* The copy stays inside its tensor, and fits the parameter it names. */
static attn_status copy_fits(const wf_copy *c, const wf_tensor *t, const attn_param *p,
                             attn_error *err) {
    if (!p) return attn_fail(err, ATTN_ERR_STATE, "no parameter '%s' in the model", c->param);
    const size_t n = (size_t)c->rows * (size_t)c->cols;
    const size_t last = c->stride ? c->off + (size_t)(c->cols - 1) * c->stride + (size_t)c->rows - 1
                                  : c->off + n - 1;
    if (n != p->numel || n == 0 || last >= t->numel)
        return attn_fail(err, ATTN_ERR_STATE, "tensor '%s' does not fit parameter '%s'", t->name,
                         c->param);
    return ATTN_OK;
}

static void gather_one(const wf_copy *c, const wf_tensor *t, float *dst) {
    const size_t R = (size_t)c->rows, K = (size_t)c->cols;
    if (!c->stride && t->dtype == WF_F32) {
        memcpy(dst, (const unsigned char *)t->src + 4 * c->off, R * K * sizeof(float));
        return;
    }
    for (size_t r = 0; r < R; r++)
        for (size_t k = 0; k < K; k++)
            dst[r * K + k] = wf_load(t->src, t->dtype,
                                     c->stride ? c->off + k * c->stride + r : c->off + r * K + k);
}

static attn_status check_finite(const attn_param *p, const char *tensor, const char *file,
                                attn_error *err) {
    for (size_t i = 0; i < p->numel; i++)
        if (!isfinite(p->data[i]))
            return attn_fail(err, ATTN_ERR_FORMAT, "%s holds non-finite values (tensor '%s')", file,
                             tensor);
    return ATTN_OK;
}

attn_status wf_gather(const wf_layout *l, attn_gpt *m, const char *file, attn_error *err) {
    const attn_param_list *list = attn_gpt_params(m);
    unsigned char *done = calloc((size_t)list->count + 1, 1);
    if (!done) return attn_fail(err, ATTN_ERR_NOMEM, "out of memory reading %s", file);
    attn_status s = ATTN_OK;
    for (int i = 0; i < l->nc && !s; i++) {
        const wf_copy *c = &l->c[i];
        const attn_param *p = attn_param_list_find(list, c->param);
        if ((s = copy_fits(c, &l->t[c->tensor], p, err))) break;
        const int k = (int)(p - list->items);
        if (done[k]++) s = attn_fail(err, ATTN_ERR_STATE, "parameter '%s' read twice", p->name);
        if (!s) gather_one(c, &l->t[c->tensor], p->data);
        if (!s) s = check_finite(p, l->t[c->tensor].name, file, err);
    }
    for (int k = 0; k < list->count && !s; k++)
        if (!done[k])
            s = attn_fail(err, ATTN_ERR_NOT_FOUND, "%s: nothing gives parameter '%s'", file,
                          list->items[k].name);
    free(done);
    return s;
}

attn_status wf_scatter(wf_layout *l, const attn_gpt *m, attn_error *err) {
    const attn_param_list *list = attn_gpt_params(m);
    for (int i = 0; i < l->nt; i++)
        if (!(l->t[i].buf = calloc(l->t[i].numel ? l->t[i].numel : 1, sizeof(float))))
            return attn_fail(err, ATTN_ERR_NOMEM, "out of memory for tensor '%s'", l->t[i].name);
    for (int i = 0; i < l->nc; i++) {
        const wf_copy *c = &l->c[i];
        wf_tensor *t = &l->t[c->tensor];
        const attn_param *p = attn_param_list_find(list, c->param);
        attn_status s = copy_fits(c, t, p, err);
        if (s) return s;
        const size_t R = (size_t)c->rows, K = (size_t)c->cols;
        for (size_t r = 0; r < R; r++)
            for (size_t k = 0; k < K; k++)
                t->buf[c->stride ? c->off + k * c->stride + r : c->off + r * K + k] =
                    p->data[r * K + k];
    }
    return ATTN_OK;
}

/* ------------------------------------------------------- reading a config */

attn_status wf_dims2(const attn_safetensors *st, const char *name, const char *file, int64_t *rows,
                     int64_t *cols, attn_error *err) {
    const attn_st_tensor *t = attn_safetensors_find(st, name);
    if (!t) return attn_fail(err, ATTN_ERR_NOT_FOUND, "%s: missing tensor '%s'", file, name);
    if (t->ndim != 2) {
        char got[96];
        shape_text(got, sizeof got, t->ndim, t->shape);
        return attn_fail(err, ATTN_ERR_SHAPE, "%s: tensor '%s' has shape %s, expected 2 dims", file,
                         name, got);
    }
    *rows = t->shape[0];
    *cols = t->shape[1];
    return ATTN_OK;
}

attn_status wf_count_blocks(const attn_safetensors *st, const char *prefix, const char *file,
                            int *n, attn_error *err) {
    const size_t len = strlen(prefix);
    long best = -1;
    for (int i = 0; i < st->count; i++) {
        const char *name = st->tensors[i].name;
        if (strncmp(name, prefix, len) != 0) continue;
        const char *p = name + len;
        long v = 0;
        for (; *p >= '0' && *p <= '9' && v <= 4096; p++)
            v = v * 10 + (*p - '0');
        if (p == name + len || *p != '.') continue; /* not a block: wf_bind names it */
        if (v >= 4096)
            return attn_fail(err, ATTN_ERR_FORMAT, "%s: tensor '%s': block index over 4095", file,
                             name);
        if (v > best) best = v;
    }
    *n = (int)(best + 1);
    return ATTN_OK;
}

int wf_same_tensor(const attn_st_tensor *a, const attn_st_tensor *b) {
    if (a->ndim != b->ndim || strcmp(a->dtype, b->dtype) != 0) return 0;
    for (int d = 0; d < a->ndim; d++)
        if (a->shape[d] != b->shape[d]) return 0;
    return memcmp(a->data, b->data, a->end - a->begin) == 0;
}

/* GPT-2's head counts by width (124M, 355M, 774M, 1558M). */
static int gpt2_heads(int emb_dim) {
    switch (emb_dim) {
    case 768: return 12;
    case 1024: return 16;
    case 1280: return 20;
    case 1600: return 25;
    }
    return 0;
}

attn_status wf_set_heads(attn_gpt_config *cfg, int from_file, const char *source,
                         const attn_gpt_config *hint, const char *file, attn_error *err) {
    const int hinted = hint && hint->n_heads > 0 ? hint->n_heads : 0;
    if (from_file > 0) {
        if (hinted && hinted != from_file)
            return attn_fail(err, ATTN_ERR_INVALID_ARG, "%s: n_heads %d was given but %s says %d",
                             file, hinted, source, from_file);
        cfg->n_heads = from_file;
    } else if (hinted) {
        cfg->n_heads = hinted;
    } else if (gpt2_heads(cfg->emb_dim)) {
        cfg->n_heads = gpt2_heads(cfg->emb_dim);
    } else {
        return attn_fail(err, ATTN_ERR_INVALID_ARG,
                         "%s does not say its number of heads and emb_dim %d is none of GPT-2's "
                         "(768, 1024, 1280, 1600): give n_heads (attn: --n-heads N)",
                         file, cfg->emb_dim);
    }
    return ATTN_OK;
}

attn_status wf_check_config(const attn_gpt_config *cfg, double held, double budget,
                            const char *file, attn_error *err) {
    if (attn_gpt_config_validate(cfg, err)) {
        char msg[ATTN_ERROR_MSG_MAX];
        snprintf(msg, sizeof msg, "%s", err ? err->msg : "");
        return attn_fail(err, ATTN_ERR_FORMAT, "%s: the config its tensors give: %s", file, msg);
    }
    char what[300];
    snprintf(what, sizeof what, "the model of %.200s", file);
    return attn_mem_check(attn_gpt_config_memory(cfg, 0, 0) + held, budget, what, err);
}

attn_status wf_build(attn_gpt *m, const attn_gpt_config *cfg, const wf_layout *l, const char *file,
                     attn_error *err) {
    attn_status s = attn_gpt_init(m, cfg, NULL, err);
    if (s) return s;
    if ((s = wf_gather(l, m, file, err))) attn_gpt_free(m);
    return s;
}
