/* Parameter tables and their arenas (see attn/param.h). */
#include "attn/param.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc_huge.h"
#include "base/parallel.h"

void attn_param_list_init(attn_param_list *list) {
    memset(list, 0, sizeof *list);
}

void attn_param_list_free(attn_param_list *list) {
    attn_param_block_free(list->values, list->values_numel);
    attn_param_block_free(list->grads, list->grads_numel);
    free(list->items);
    attn_param_list_init(list);
}

/* Room for one more entry. */
static attn_status grow(attn_param_list *list, attn_error *err) {
    if (list->count < list->capacity) return ATTN_OK;
    int cap = list->capacity ? list->capacity * 2 : 16;
    attn_param *items = realloc(list->items, (size_t)cap * sizeof *items);
    if (!items) return attn_fail(err, ATTN_ERR_NOMEM, "out of memory growing parameter list");
    list->items = items;
    list->capacity = cap;
    return ATTN_OK;
}

attn_status attn_param_list_add_view(attn_param_list *list, const char *prefix, const char *name,
                                     float **data_at, float **grad_at, int ndim,
                                     const int64_t *shape, attn_param_role role, int fan_in,
                                     attn_error *err) {
    if (ndim < 1 || ndim > ATTN_PARAM_MAX_DIMS)
        return attn_fail(err, ATTN_ERR_INVALID_ARG, "parameter '%s' has %d dims (1..%d allowed)",
                         name, ndim, ATTN_PARAM_MAX_DIMS);
    attn_status s = grow(list, err);
    if (s != ATTN_OK) return s;
    attn_param *p = &list->items[list->count];
    memset(p, 0, sizeof *p);
    int n = snprintf(p->name, sizeof p->name, "%s%s", prefix ? prefix : "", name);
    if (n < 0 || (size_t)n >= sizeof p->name)
        return attn_fail(err, ATTN_ERR_INVALID_ARG, "parameter name '%s%s' is too long",
                         prefix ? prefix : "", name);
    p->data_at[0] = data_at;
    p->grad_at[0] = grad_at;
    p->data = data_at ? *data_at : NULL;
    p->grad = grad_at ? *grad_at : NULL;
    p->ndim = ndim;
    p->numel = 1;
    for (int i = 0; i < ndim; i++) {
        p->shape[i] = shape[i];
        p->numel *= (size_t)shape[i];
    }
    p->role = role;
    p->fan_in = fan_in;
    p->trainable = 1;
    list->count++;
    return ATTN_OK;
}

attn_status attn_param_list_add(attn_param_list *list, const char *prefix, const char *name,
                                float *data, float *grad, int ndim, const int64_t *shape,
                                attn_error *err) {
    const attn_param_role role = ndim >= 2 ? ATTN_ROLE_MATRIX : ATTN_ROLE_BIAS;
    attn_status s =
        attn_param_list_add_view(list, prefix, name, NULL, NULL, ndim, shape, role, 0, err);
    if (s != ATTN_OK) return s;
    list->items[list->count - 1].data = data;
    list->items[list->count - 1].grad = grad;
    return ATTN_OK;
}

attn_status attn_param_list_alias(attn_param_list *list, const char *name, float **data_at,
                                  float **grad_at, attn_error *err) {
    attn_param *p = attn_param_list_find(list, name);
    if (!p) return attn_fail(err, ATTN_ERR_NOT_FOUND, "no parameter '%s' to alias", name);
    int k = 1;
    while (k < ATTN_PARAM_VIEWS && p->data_at[k])
        k++;
    if (k == ATTN_PARAM_VIEWS)
        return attn_fail(err, ATTN_ERR_INVALID_ARG, "parameter '%s' has %d views already", name,
                         ATTN_PARAM_VIEWS);
    p->data_at[k] = data_at;
    p->grad_at[k] = grad_at;
    *data_at = p->data;
    if (grad_at) *grad_at = p->grad;
    return ATTN_OK;
}

int attn_param_list_new_group(attn_param_list *list) {
    return ++list->groups;
}

attn_param *attn_param_list_find(const attn_param_list *list, const char *name) {
    for (int i = 0; i < list->count; i++)
        if (strcmp(list->items[i].name, name) == 0) return &list->items[i];
    return NULL;
}

size_t attn_param_list_numel(const attn_param_list *list) {
    size_t n = 0;
    for (int i = 0; i < list->count; i++)
        n += list->items[i].numel;
    return n;
}

/* ------------------------------------------------------------ the arena */

float *attn_param_block_alloc(size_t n) {
    if (n > SIZE_MAX / sizeof(float)) return NULL;
    return attn_calloc_aligned(n * sizeof(float));
}

void attn_param_block_free(float *p, size_t n) {
    attn_free_aligned(p, n * sizeof(float));
}

/* p's fields hold its data and grad. */
static void set_views(attn_param *p) {
    for (int k = 0; k < ATTN_PARAM_VIEWS; k++) {
        if (p->data_at[k]) *p->data_at[k] = p->data;
        if (p->grad_at[k]) *p->grad_at[k] = p->grad;
    }
}

static size_t round_up(size_t n) {
    return (n + ATTN_ARENA_ALIGN - 1) / ATTN_ARENA_ALIGN * ATTN_ARENA_ALIGN;
}

/* Lay out the entries that `take` admits (grads: the trainable ones) in
 * the table's order, a group's as one run from its first entry: each
 * offset into *off (offsets[i], or grad_offset), the block's floats into
 * *total. INVALID_ARG when the sum overflows. */
static attn_status lay_out(attn_param_list *list, int grads, size_t *total, attn_error *err) {
    size_t end = 0;
    unsigned char *placed = calloc((size_t)list->count + 1, 1);
    if (!placed) return attn_fail(err, ATTN_ERR_NOMEM, "out of memory laying out parameters");
    for (int i = 0; i < list->count; i++) {
        if (placed[i] || (grads && !list->items[i].trainable)) continue;
        end = round_up(end);
        for (int j = i; j < list->count; j++) {
            attn_param *p = &list->items[j];
            if (j > i && (!p->group || p->group != list->items[i].group || placed[j])) continue;
            if (grads && !p->trainable) continue;
            if (p->numel > SIZE_MAX / 8 - end) {
                free(placed);
                return attn_fail(err, ATTN_ERR_INVALID_ARG,
                                 "the parameters' sizes overflow (at '%s')", p->name);
            }
            *(grads ? &p->grad_offset : &p->offset) = end;
            end += p->numel;
            placed[j] = 1;
        }
    }
    free(placed);
    *total = round_up(end);
    return ATTN_OK;
}

/* A gradient block for the trainable entries, laid out and bound. */
static attn_status make_grads(attn_param_list *list, attn_error *err) {
    size_t n = 0;
    attn_status s = lay_out(list, 1, &n, err);
    if (s != ATTN_OK) return s;
    float *g = attn_param_block_alloc(n);
    if (!g) return attn_fail(err, ATTN_ERR_NOMEM, "out of memory for %zu gradient values", n);
    list->grads = g;
    list->grads_numel = n;
    attn_param_list_bind_grads(list, NULL);
    return ATTN_OK;
}

attn_status attn_param_list_alloc(attn_param_list *list, attn_error *err) {
    if (list->values)
        return attn_fail(err, ATTN_ERR_STATE, "the parameter list has its arena already");
    size_t n = 0;
    attn_status s = lay_out(list, 0, &n, err);
    if (s != ATTN_OK) return s;
    list->values = attn_param_block_alloc(n);
    if (!list->values)
        return attn_fail(err, ATTN_ERR_NOMEM, "out of memory for %zu parameter values", n);
    list->values_numel = n;
    if ((s = make_grads(list, err)) != ATTN_OK) {
        attn_param_block_free(list->values, n);
        list->values = NULL;
        list->values_numel = 0;
        return s;
    }
    for (int i = 0; i < list->count; i++) {
        attn_param *p = &list->items[i];
        p->data = list->values + p->offset;
        set_views(p);
        for (size_t k = 0; p->role == ATTN_ROLE_SCALE && k < p->numel; k++)
            p->data[k] = 1.0f;
    }
    return ATTN_OK;
}

/* Where p's gradient lives in block (an arena layout's); NULL: frozen. */
static float *grad_in(const attn_param *p, float *block) {
    return p->trainable && block ? block + p->grad_offset : NULL;
}

void attn_param_list_bind(attn_param_list *list, float *const *data, float *const *grad) {
    int own_grads = 1;
    for (int i = 0; i < list->count; i++) {
        attn_param *p = &list->items[i];
        const int given = grad && grad[i];
        own_grads &= !given;
        p->data = data && data[i] ? data[i] : list->values ? list->values + p->offset : p->data;
        p->grad = given ? grad[i] : list->grads ? grad_in(p, list->grads) : p->grad;
        set_views(p);
    }
    list->grads_bound = own_grads ? list->grads : NULL;
}

void attn_param_list_bind_grads(attn_param_list *list, float *block) {
    float *b = block ? block : list->grads;
    for (int i = 0; i < list->count; i++) {
        attn_param *p = &list->items[i];
        p->grad = grad_in(p, b);
        set_views(p);
    }
    list->grads_bound = b;
}

/* The gradient block again, for the trainable tensors as they are now. */
static attn_status remake_grads(attn_param_list *list, attn_error *err) {
    attn_param_block_free(list->grads, list->grads_numel);
    list->grads = NULL;
    list->grads_numel = 0;
    return make_grads(list, err);
}

attn_status attn_param_list_set_trainable(attn_param_list *list, const char *prefix, int trainable,
                                          attn_error *err) {
    if (!list->values)
        return attn_fail(err, ATTN_ERR_STATE,
                         "freezing needs a model's arena (a module's own gradients stay)");
    const size_t len = strlen(prefix);
    int matched = 0, changed = 0;
    for (int i = 0; i < list->count; i++) {
        attn_param *p = &list->items[i];
        if (strncmp(p->name, prefix, len) != 0) continue;
        matched++;
        changed |= p->trainable != (trainable != 0);
        p->trainable = trainable != 0;
    }
    if (!matched)
        return attn_fail(err, ATTN_ERR_NOT_FOUND, "no parameter name starts with '%s'", prefix);
    return changed ? remake_grads(list, err) : ATTN_OK;
}

attn_status attn_param_list_set_trainable_each(attn_param_list *list, const uint8_t *trainable,
                                               attn_error *err) {
    if (!list->values)
        return attn_fail(err, ATTN_ERR_STATE,
                         "freezing needs a model's arena (a module's own gradients stay)");
    int changed = 0;
    for (int i = 0; i < list->count; i++) {
        attn_param *p = &list->items[i];
        changed |= p->trainable != (trainable[i] != 0);
        p->trainable = trainable[i] != 0;
    }
    return changed ? remake_grads(list, err) : ATTN_OK;
}

/* ------------------------------------------------------------ gradients */

enum { ZERO_ALL, ZERO_DEFER, ZERO_SETTLE };

/* Whether gradient p is cleared now under mode. */
static int clears(const attn_param *p, int mode) {
    if (!p->grad) return 0;
    if (mode == ZERO_SETTLE) return p->grad_unset && *p->grad_unset;
    return mode == ZERO_ALL || !p->grad_unset;
}

/* Zeroed in ATTN_PAR_CHUNK pieces over the threads: one core's stores do
 * not reach the machine's write bandwidth (GPT-2's 500 MB of gradients a
 * step). A bound gradient block is cleared whole, in one pass. */
static void zero_grads(const attn_param_list *list, int mode) {
    if (mode == ZERO_ALL && list->grads_bound) {
        attn_par_zero(list->grads_bound, list->grads_numel);
    } else {
        size_t total = 0;
        for (int i = 0; i < list->count; i++)
            if (clears(&list->items[i], mode)) total += list->items[i].numel;
#pragma omp parallel if (total >= ATTN_PAR_MIN)
        for (int i = 0; i < list->count; i++) {
            float *g = list->items[i].grad;
            const size_t n = clears(&list->items[i], mode) ? list->items[i].numel : 0;
            const long pieces = (long)((n + ATTN_PAR_CHUNK - 1) / ATTN_PAR_CHUNK);
#pragma omp for schedule(static) nowait
            for (long p = 0; p < pieces; p++)
                memset(g + (size_t)p * ATTN_PAR_CHUNK, 0, attn_par_piece(n, p) * sizeof(float));
        }
    }
    for (int i = 0; i < list->count; i++)
        if (list->items[i].grad_unset)
            *list->items[i].grad_unset = mode == ZERO_DEFER && list->items[i].grad;
}

void attn_param_list_zero_grad(const attn_param_list *list) {
    zero_grads(list, ZERO_ALL);
}

void attn_param_list_zero_grad_deferred(const attn_param_list *list) {
    zero_grads(list, ZERO_DEFER);
}

void attn_param_list_settle_grad(const attn_param_list *list) {
    zero_grads(list, ZERO_SETTLE);
}
