/* attn/param.h — named views of a module's parameters and gradients.
 *
 * Modules own their parameter and gradient buffers; a parameter list is a
 * borrowed index over them, named exactly as PyTorch's state_dict names them
 * ("W_query.weight", "heads.0.W_key.weight", "out_proj.bias", ...) and shaped
 * in PyTorch's layouts (a Linear weight is (out_features, in_features)).
 * Safetensors/.npy I/O, optimizers and gradient checks all walk this list. */
#ifndef ATTN_PARAM_H
#define ATTN_PARAM_H

#include <stddef.h>
#include <stdint.h>

#include "attn/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define ATTN_PARAM_NAME_MAX 128
#define ATTN_PARAM_MAX_DIMS 4

typedef struct attn_param {
    char name[ATTN_PARAM_NAME_MAX];
    float *data; /* numel floats, row-major, owned by the module */
    float *grad; /* numel floats, same layout; NULL if not trainable */
    int ndim;
    int64_t shape[ATTN_PARAM_MAX_DIMS];
    size_t numel;
    /* Non-NULL: the owner's mark that grad holds no value yet, set by
     * attn_param_list_zero_grad_deferred; the owner's next backward writes
     * the gradient whole (instead of adding) and clears it. */
    int *grad_unset;
} attn_param;

typedef struct attn_param_list {
    attn_param *items;
    int count;
    int capacity;
} attn_param_list;

void attn_param_list_init(attn_param_list *list);
void attn_param_list_free(attn_param_list *list);

/* Append one parameter named prefix + name (prefix may be "" or NULL). */
attn_status attn_param_list_add(attn_param_list *list, const char *prefix, const char *name,
                                float *data, float *grad, int ndim, const int64_t *shape,
                                attn_error *err);

/* Find a parameter by full name; NULL if absent. */
attn_param *attn_param_list_find(const attn_param_list *list, const char *name);

/* Total number of floats over all parameters. */
size_t attn_param_list_numel(const attn_param_list *list);

/* Set every gradient in the list to zero. */
void attn_param_list_zero_grad(const attn_param_list *list);

/* The same, except that a gradient whose owner can write it whole (its
 * grad_unset not NULL) is marked unset instead of cleared: its next
 * backward writes it, skipping the pass that clears it and the product's
 * read of those zeros. Until that backward it holds stale values, so only
 * a caller that runs the backward next uses this (the trainer), and calls
 * attn_param_list_settle_grad after it. */
void attn_param_list_zero_grad_deferred(const attn_param_list *list);

/* Zero each gradient still marked unset (its owner's backward did not run)
 * and clear the mark: every gradient then holds its value. */
void attn_param_list_settle_grad(const attn_param_list *list);

#ifdef __cplusplus
}
#endif
#endif
