/* attn/embedding.h — nn.Embedding(num_embeddings, dim): a lookup table.
 *
 * weight (num_embeddings, dim); out[n] = weight[ids[n]]. Init as PyTorch:
 * weight.normal_(0, 1) (attn_rng_normal). */
#ifndef ATTN_EMBEDDING_H
#define ATTN_EMBEDDING_H

#include <stddef.h>
#include <stdint.h>

#include "attn/param.h"
#include "attn/rng.h"
#include "attn/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct attn_embedding {
    int num_embeddings, dim;
    float *weight;      /* (num_embeddings, dim) */
    float *grad_weight; /* same, zeroed at init; NULL: frozen */
    int views;          /* 1: both are views (attn_embedding_init_view) */
} attn_embedding;

/* rng != NULL: normal_(0, 1) as torch.nn.Embedding; NULL: zeros. */
attn_status attn_embedding_init(attn_embedding *e, int num_embeddings, int dim, attn_rng *rng,
                                attn_error *err);
/* The same without memory of its own (a model's, attn/param.h): the table
 * is a view the owner's arena fills (attn_embedding_params, then
 * attn_param_list_alloc); freeing leaves it. */
attn_status attn_embedding_init_view(attn_embedding *e, int num_embeddings, int dim,
                                     attn_error *err);
void attn_embedding_free(attn_embedding *e);
/* torch.nn.Embedding's draw of n values: normal_(0, 1). */
void attn_embedding_draw(attn_rng *rng, float *values, size_t n);
/* Adds "<prefix>weight". */
attn_status attn_embedding_params(attn_embedding *e, const char *prefix, attn_param_list *list,
                                  attn_error *err);

/* Fails (naming the position) when an id is outside [0, num_embeddings). */
attn_status attn_embedding_check_ids(const attn_embedding *e, const int32_t *ids, size_t N,
                                     attn_error *err);
/* out (N, dim) = weight[ids]; ids must be valid (see check_ids). */
void attn_embedding_forward(const attn_embedding *e, const int32_t *ids, float *out, size_t N);
/* out (N, dim) += weight[ids]. */
void attn_embedding_forward_add(const attn_embedding *e, const int32_t *ids, float *out, size_t N);
/* x (N, dim): row r += weight[pos0 + r % T] (a learned position table,
 * GPT-2's wpe: N rows of sequences of T tokens from position pos0);
 * pos0 + T <= num_embeddings. */
void attn_embedding_add_positions(const attn_embedding *e, float *x, size_t N, int T, int pos0);
/* The backward rule (every attn backward; docs/library.md#conventions):
 * it adds (+=) into dx and into the parameter gradients, never overwrites;
 * the caller zeroes them first. */

/* grad_weight[ids[n]] += dout[n] (nothing when grad_weight is NULL). */
void attn_embedding_backward(attn_embedding *e, const int32_t *ids, const float *dout, size_t N);
/* attn_embedding_add_positions' (pos0 0): grad_weight[r % T] += dx's row r,
 * r in order (nothing when grad_weight is NULL). */
void attn_embedding_add_positions_backward(attn_embedding *e, const float *dx, size_t N, int T);

#ifdef __cplusplus
}
#endif
#endif
