/* attn/param.h — a model's parameter table, and the arena its tensors live in.
 *
 * A parameter list is the table of a module's (or a model's) tensors, each
 * named exactly as PyTorch's state_dict names it ("W_query.weight",
 * "trf_blocks.0.att.out_proj.bias", ...), shaped in PyTorch's layouts (a
 * Linear weight is (out_features, in_features)), with its role and whether
 * it trains. Safetensors/.npy I/O, the weight formats, optimizers, gradient
 * checks and the Python bindings all walk it.
 *
 * Two kinds of list:
 *   - over a module's own memory: a standalone module (the chapter-3 classes
 *     used alone) allocates its buffers and its *_params function lists them;
 *   - an arena: a model's modules are made without memory (*_init_view), its
 *     build function lists their tensors (the same *_params functions: each
 *     entry records the module fields that view it), then
 *     attn_param_list_alloc makes one aligned block for every value and one
 *     for every gradient, lays the tensors out in them and points the fields
 *     there. The model's passes, zeroing, AdamW, gradient accumulation and
 *     the all-reduce then work on the flat blocks; binding other storage
 *     (attn_param_list_bind: a caller's tensors, another gradient block) is
 *     a loop over the table.
 *
 * A frozen tensor (trainable 0) has no gradient storage: its grad is NULL,
 * and every backward skips the products that would compute it. */
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
#define ATTN_PARAM_VIEWS 2  /* module fields that may view one tensor (a tied head: 2) */
#define ATTN_ARENA_ALIGN 16 /* floats: each tensor (or group) of an arena starts on 64 bytes */

/* What a tensor is to its module: its starting value (attn_param_list_alloc:
 * SCALE 1, the rest 0) and the draw of its default init read it. */
typedef enum attn_param_role {
    ATTN_ROLE_MATRIX = 0, /* a Linear's weight (out_features, in_features) */
    ATTN_ROLE_BIAS,       /* a Linear's bias (out_features) */
    ATTN_ROLE_EMBEDDING,  /* an embedding table (rows, dim) */
    ATTN_ROLE_SCALE,      /* a norm's scale (C) */
    ATTN_ROLE_SHIFT,      /* a norm's shift (C) */
    ATTN_ROLE_LORA_A,     /* an adapter's A (in_features, rank) (attn/lora.h) */
    ATTN_ROLE_LORA_B,     /* an adapter's B (rank, out_features): starts at zero */
} attn_param_role;

typedef struct attn_param {
    char name[ATTN_PARAM_NAME_MAX];
    float *data; /* numel floats, row-major */
    float *grad; /* numel floats, same layout; NULL if frozen or not kept */
    int ndim;
    int64_t shape[ATTN_PARAM_MAX_DIMS];
    size_t numel;
    /* Non-NULL: the owner's mark that grad holds no value yet, set by
     * attn_param_list_zero_grad_deferred; the owner's next backward writes
     * the gradient whole (instead of adding) and clears it. */
    int *grad_unset;
    attn_param_role role;
    int fan_in; /* MATRIX and BIAS: the Linear's in_features; LORA_A: the rank (its draw's bound) */
    int trainable; /* 1 when listed; 0: frozen (attn_param_list_set_trainable) */
    int group;     /* nonzero: an arena keeps it adjacent to the entries of the same group
                      (attention's W_query, W_key, W_value weights: one product) */
    /* The module fields that hold data and grad (NULL: unused), kept equal
     * to them by attn_param_list_alloc and the binds. */
    float **data_at[ATTN_PARAM_VIEWS];
    float **grad_at[ATTN_PARAM_VIEWS];
    size_t offset;      /* an arena's: data = values + offset */
    size_t grad_offset; /* an arena's, trainable: grad = grads + grad_offset */
} attn_param;

struct attn_linear;
/* Called by attn_linear_params for each Linear it lists, before it lists
 * the Linear's names: a model's build sets one to attach adapters by name
 * (attn/lora.h; set layer->lora). prefix is the Linear's ("trf_blocks.0.att.W_query."). */
typedef attn_status (*attn_param_linear_hook)(void *user, const char *prefix,
                                              struct attn_linear *layer, attn_error *err);

typedef struct attn_param_list {
    attn_param *items;
    int count;
    int capacity;
    int groups; /* group ids handed out (attn_param_list_new_group) */
    /* The arena (attn_param_list_alloc; NULL over module-owned memory):
     * values_numel / grads_numel floats, ATTN_ARENA_ALIGN-aligned tensors. */
    float *values, *grads;
    size_t values_numel, grads_numel;
    /* The gradient block the grads view now (the arena's, another of its
     * layout, or NULL: per-tensor storage bound by a caller). */
    float *grads_bound;
    attn_param_linear_hook on_linear; /* NULL: none (a build sets it while it lists) */
    void *on_linear_user;
} attn_param_list;

void attn_param_list_init(attn_param_list *list);
/* Frees the table, and the arena when the list has one. */
void attn_param_list_free(attn_param_list *list);

/* Append one parameter named prefix + name (prefix may be "" or NULL),
 * viewed by the module fields *data_at and *grad_at (grad_at may be NULL:
 * no gradient); data and grad are read from them (NULL until an arena's
 * alloc). Trainable, no group. */
attn_status attn_param_list_add_view(attn_param_list *list, const char *prefix, const char *name,
                                     float **data_at, float **grad_at, int ndim,
                                     const int64_t *shape, attn_param_role role, int fan_in,
                                     attn_error *err);

/* The same for storage that no field holds (the list is its only index). */
attn_status attn_param_list_add(attn_param_list *list, const char *prefix, const char *name,
                                float *data, float *grad, int ndim, const int64_t *shape,
                                attn_error *err);

/* Another module field viewing parameter `name` (a tied head viewing
 * tok_emb.weight): set now, and kept with the rest. NOT_FOUND if absent. */
attn_status attn_param_list_alias(attn_param_list *list, const char *name, float **data_at,
                                  float **grad_at, attn_error *err);

/* A fresh group id (nonzero) for entries an arena keeps adjacent. */
int attn_param_list_new_group(attn_param_list *list);

/* Find a parameter by full name; NULL if absent. */
attn_param *attn_param_list_find(const attn_param_list *list, const char *name);

/* Total number of floats over all parameters. */
size_t attn_param_list_numel(const attn_param_list *list);

/* ------------------------------------------------------------ the arena */

/* Lay the table's tensors out and make the arena: values (each tensor, or
 * each group as one run, from a 64-byte boundary, in the table's order)
 * and gradients (the trainable tensors' alone, laid out alike), zeroed but
 * SCALE values 1; every data_at / grad_at field then points into them.
 * Sizes are checked before anything is allocated (INVALID_ARG on
 * overflow, NOMEM). Called once, on a list without an arena. */
attn_status attn_param_list_alloc(attn_param_list *list, attn_error *err);

/* Zeroed memory for n floats of an arena's layout (grads_numel: another
 * gradient block), aligned as the arena's; NULL when out of memory. Free it
 * with attn_param_block_free(p, n). */
float *attn_param_block_alloc(size_t n);
void attn_param_block_free(float *p, size_t n);

/* Point every parameter at data[i] (NULL or data NULL: the arena's own)
 * and its gradient at grad[i] (NULL or grad NULL: the arena's own; frozen
 * tensors stay NULL), fields included. */
void attn_param_list_bind(attn_param_list *list, float *const *data, float *const *grad);

/* Point the gradients at block, a gradient block of the arena's layout
 * (grads_numel floats; NULL: the arena's own): gradient accumulation's
 * micro-steps each write their own without copying. */
void attn_param_list_bind_grads(attn_param_list *list, float *block);

/* Mark every parameter whose name starts with prefix ("" : all)
 * trainable or frozen, and make the arena's gradient block again for the
 * trainable tensors (their gradients zeroed; a frozen one's grad NULL,
 * its fields too). NOT_FOUND when no name starts with prefix; STATE on a
 * list without an arena. Call it before making an optimizer over the
 * list; the arena's own gradients are bound after it. */
attn_status attn_param_list_set_trainable(attn_param_list *list, const char *prefix, int trainable,
                                          attn_error *err);

/* The same for every tensor at once: trainable[i] (count bytes, nonzero:
 * trainable) for the table's entry i; the gradient block made again only
 * when a flag changed. */
attn_status attn_param_list_set_trainable_each(attn_param_list *list, const uint8_t *trainable,
                                               attn_error *err);

/* ------------------------------------------------------------ gradients */

/* Set every gradient in the list to zero (a bound gradient block: one
 * pass over it). */
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
