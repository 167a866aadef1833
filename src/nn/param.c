/* Named parameter lists (see attn/param.h). */
#include "attn/param.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/parallel.h"

void attn_param_list_init(attn_param_list *list) {
    list->items = NULL;
    list->count = 0;
    list->capacity = 0;
}

void attn_param_list_free(attn_param_list *list) {
    free(list->items);
    attn_param_list_init(list);
}

attn_status attn_param_list_add(attn_param_list *list, const char *prefix, const char *name,
                                float *data, float *grad, int ndim, const int64_t *shape,
                                attn_error *err) {
    if (ndim < 1 || ndim > ATTN_PARAM_MAX_DIMS)
        return attn_fail(err, ATTN_ERR_INVALID_ARG, "parameter '%s' has %d dims (1..%d allowed)",
                         name, ndim, ATTN_PARAM_MAX_DIMS);
    if (list->count == list->capacity) {
        int cap = list->capacity ? list->capacity * 2 : 16;
        attn_param *items = realloc(list->items, (size_t)cap * sizeof *items);
        if (!items) return attn_fail(err, ATTN_ERR_NOMEM, "out of memory growing parameter list");
        list->items = items;
        list->capacity = cap;
    }
    attn_param *p = &list->items[list->count];
    memset(p, 0, sizeof *p);
    int n = snprintf(p->name, sizeof p->name, "%s%s", prefix ? prefix : "", name);
    if (n < 0 || (size_t)n >= sizeof p->name)
        return attn_fail(err, ATTN_ERR_INVALID_ARG, "parameter name '%s%s' is too long",
                         prefix ? prefix : "", name);
    p->data = data;
    p->grad = grad;
    p->ndim = ndim;
    p->numel = 1;
    for (int i = 0; i < ndim; i++) {
        p->shape[i] = shape[i];
        p->numel *= (size_t)shape[i];
    }
    list->count++;
    return ATTN_OK;
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

enum { ZERO_ALL, ZERO_DEFER, ZERO_SETTLE };

/* Whether gradient p is cleared now under mode. */
static int clears(const attn_param *p, int mode) {
    if (!p->grad) return 0;
    if (mode == ZERO_SETTLE) return p->grad_unset && *p->grad_unset;
    return mode == ZERO_ALL || !p->grad_unset;
}

/* Zeroed in ATTN_PAR_CHUNK pieces over the threads: one core's stores do
 * not reach the machine's write bandwidth (GPT-2's 500 MB of gradients a
 * step). */
static void zero_grads(const attn_param_list *list, int mode) {
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
    for (int i = 0; i < list->count; i++)
        if (list->items[i].grad_unset) *list->items[i].grad_unset = mode == ZERO_DEFER;
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
