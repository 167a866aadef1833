/* What a checkpoint file must hold before a model is built from it: the
 * tensors its config implies, with those shapes, and finite weights.
 *
 * A config is metadata, and metadata can say anything ("emb_dim 65536,
 * n_layers 4096" in a 100 KB file): checking it against the tensors first
 * keeps the model that is then allocated within the file's own size, and a
 * lying header fails at once with a message naming the key. Every reader of
 * checkpoints goes through here (attn_gpt_load_checkpoint, and
 * attn_trainer_read_config for --resume and attn info). */
#ifndef ATTN_CHECKPOINT_FIT_H
#define ATTN_CHECKPOINT_FIT_H

#include "attn/gpt.h"
#include "attn/safetensors.h"
#include "attn/status.h"

/* Every parameter of a model of cfg (state_dict names, book's GPTModel) is in
 * st as prefix + name, F32, with exactly its shape (ATTN_ERR_SHAPE /
 * ATTN_ERR_NOT_FOUND, naming file, tensor and the config key that disagrees).
 * Extra tensors are left to attn_safetensors_to_params. prefix: "" for a
 * model file, "exp_avg." for a training state. No allocation. */
attn_status attn_ckpt_fit_config(const attn_gpt_config *cfg, const attn_safetensors *st,
                                 const char *prefix, const char *file, attn_error *err);

/* Every F32 tensor of st whose name starts with prefix holds only finite
 * values, else ATTN_ERR_FORMAT "checkpoint FILE holds non-finite values
 * (tensor NAME)". */
attn_status attn_ckpt_check_finite(const attn_safetensors *st, const char *prefix, const char *file,
                                   attn_error *err);
/* The same over a model's parameters once read (list: attn_gpt_params). */
attn_status attn_ckpt_check_finite_params(const attn_param_list *list, const char *file,
                                          attn_error *err);

#endif
