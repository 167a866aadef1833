/* attn/gpt_family.h — a model as a description: a family's build function
 * turns the config into the model's parameter table (attn/param.h) and an
 * ordered list of layers, and forward and backward walk that list.
 *
 * The list is
 *
 *   embedding, n_layers blocks, [final norm], head
 *
 * each layer one of the GPT's kinds below, built from the modules attn_gpt
 * holds (as llama.cpp's model holds every family's tensors and each build
 * function uses its own). The forward runs the list in order; the backward
 * runs it from the head down to the lowest layer that holds a trainable
 * tensor, and no further (attn_gpt_set_trainable: a model whose lower
 * blocks are frozen skips their backward entirely).
 *
 * attn_gpt_init builds the book's family (attn_gpt_build_book) from the
 * config alone: the book's GPTModel and GPT-2 with every variant key. A
 * family of one's own is a build function calling the attn_gpt_add_*
 * functions in the list's order, given to attn_gpt_init_family:
 *
 *   static attn_status build(attn_gpt *m, const attn_gpt_build *opts,
 *                            attn_error *err) {
 *       attn_status s = attn_gpt_add_embedding(m, err);
 *       for (int i = 0; s == ATTN_OK && i < m->cfg.n_layers; i++)
 *           s = attn_gpt_add_block(m, err);
 *       if (s == ATTN_OK) s = attn_gpt_add_final_norm(m, err);
 *       return s == ATTN_OK ? attn_gpt_add_head(m, 3, 1, err) : s;
 *   }
 *
 * (a 3-way classifier with a biased head: the book's chapter 6,
 * docs/architecture.md). */
#ifndef ATTN_GPT_FAMILY_H
#define ATTN_GPT_FAMILY_H

#include "attn/gpt.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum attn_gpt_layer_kind {
    ATTN_GPT_LAYER_EMBEDDING, /* ids -> x: tok_emb[ids] (+ pos_emb), drop_emb */
    ATTN_GPT_LAYER_BLOCK,     /* x -> x: a TransformerBlock (m->blocks[index]) */
    ATTN_GPT_LAYER_NORM,      /* x -> final_norm(x) */
    ATTN_GPT_LAYER_HEAD       /* x -> logits (B, T, head width) = out_head(x); the loss */
} attn_gpt_layer_kind;

typedef struct attn_gpt_layer {
    attn_gpt_layer_kind kind;
    int index;           /* BLOCK: which of m->blocks */
    int param0, nparams; /* its tensors: the table's entries [param0, param0 + nparams) */
} attn_gpt_layer;

/* What a build makes beyond the config. A zeroed struct (or NULL) is the
 * config's own model. */
typedef struct attn_gpt_build {
    int head_width; /* 0: vocab_size (a language model); N: a head of N outputs (a classifier) */
    int head_bias;  /* with head_width: the head has a bias (chapter 6's nn.Linear(768, 2)) */
    /* LoRA (attn/lora.h): rank 0, none; else an adapter of this rank and
     * alpha on every Linear whose name starts with lora_prefix (NULL or "":
     * every Linear, as the book's replace_linear_with_lora). */
    int lora_rank;
    float lora_alpha;
    const char *lora_prefix;
    /* Or (n_lora_sites > 0, lora_rank 0) an adapter on exactly these
     * Linears, each of its own rank and alpha: a module tree's adapters as
     * they are (attn.torch reads them from LinearWithLoRA modules). */
    int n_lora_sites;
    const struct attn_gpt_lora_site *lora_sites;
} attn_gpt_build;

/* One adapted Linear: its name with the trailing dot
 * ("trf_blocks.0.att.W_query.", "out_head."), its adapter's rank and alpha. */
typedef struct attn_gpt_lora_site {
    const char *linear;
    int rank;
    float alpha;
} attn_gpt_lora_site;

/* A family: lists m's layers with attn_gpt_add_* (m->cfg set, m's modules
 * zeroed, m->blocks allocated for cfg.n_layers). */
typedef attn_status (*attn_gpt_build_fn)(attn_gpt *m, const attn_gpt_build *opts, attn_error *err);

/* attn_gpt_init with a family (build NULL: the book's) and its options
 * (NULL: none): validates cfg, builds, checks the list's shape (above;
 * INVALID_ARG naming what is out of place), makes the arena and, with rng,
 * draws the weights as attn_gpt_init does (cfg's init kind, over the
 * table), then each adapter's A (in the table's order, as
 * replace_linear_with_lora after the constructor). On failure m is freed. */
attn_status attn_gpt_init_family(attn_gpt *m, const attn_gpt_config *cfg, attn_gpt_build_fn build,
                                 const attn_gpt_build *opts, attn_rng *rng, attn_error *err);

/* The book's family: embedding (pos_emb as cfg says), the n_layers blocks,
 * final_norm, and the head: Linear(C, vocab_size, bias=False), tied when
 * cfg says so, or opts' head_width and head_bias (a width and tie_weights
 * together: INVALID_ARG). */
attn_status attn_gpt_build_book(attn_gpt *m, const attn_gpt_build *opts, attn_error *err);

/* ---- the layers a build lists, in the list's order. Each makes its
 * modules without memory and lists their tensors in the table with the
 * book's names (the adapters the build's options ask for attached). */

/* tok_emb (vocab_size, C) and, with pos_emb learned, pos_emb (context_length, C). */
attn_status attn_gpt_add_embedding(attn_gpt *m, attn_error *err);
/* The next TransformerBlock, "trf_blocks.<i>.": cfg's norm, attention and act. */
attn_status attn_gpt_add_block(attn_gpt *m, attn_error *err);
/* final_norm (C): cfg's norm. */
attn_status attn_gpt_add_final_norm(attn_gpt *m, attn_error *err);
/* out_head: Linear(C, width, bias) (width >= 1). */
attn_status attn_gpt_add_head(attn_gpt *m, int width, int bias, attn_error *err);
/* out_head as tok_emb's matrix (tie_weights: width vocab_size, no bias). */
attn_status attn_gpt_add_tied_head(attn_gpt *m, attn_error *err);

/* The list (borrowed; m->n_list entries). */
const attn_gpt_layer *attn_gpt_layers(const attn_gpt *m, int *count);

/* The logits' width: out_head's outputs (vocab_size for a language model). */
int attn_gpt_head_width(const attn_gpt *m);

/* Whether m is a language model of its config that `what` can run: its
 * head vocab_size wide and no adapter (INVALID_ARG naming what differs,
 * "attn_gpt_export: the model's head is 3 wide, not vocab_size 50257").
 * Generation, the weight formats' export and the CUDA engine ask it. */
attn_status attn_gpt_check_language_model(const attn_gpt *m, const char *what, attn_error *err);

/* The list entry from which a backward now stops (the lowest holding a
 * trainable tensor; m->n_list when none does). */
int attn_gpt_backward_stop(const attn_gpt *m);

#ifdef __cplusplus
}
#endif
#endif
