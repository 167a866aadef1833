/* attn/checkpoint_info.h — what a checkpoint holds, without training: the
 * model and training configs, step, loss history summary, vocabulary,
 * parameter count and size on disk (`attn info DIR` prints it).
 *
 * Reads DIR/model.safetensors (through attn_gpt_load_checkpoint) and, when
 * present, DIR/train_state.safetensors (attn_trainer_read_config and the loss
 * history tensors); the two files' own steps are reported separately so a
 * mismatch is visible. path may also be a model .safetensors file (then only
 * the model part is filled). */
#ifndef ATTN_CHECKPOINT_INFO_H
#define ATTN_CHECKPOINT_INFO_H

#include <stddef.h>
#include <stdint.h>

#include "attn/gpt.h"
#include "attn/status.h"
#include "attn/train.h"
#include "attn/weights_format.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct attn_checkpoint_info {
    attn_gpt_config model;
    attn_weights_format format; /* attn's checkpoint, or HF / llm.c / book GPT-2 weights */
    int64_t step;               /* the model file's step; -1 if it names none */
    char *vocabulary;           /* char: the characters in id order (UTF-8, malloc'd); gpt2: NULL */
    attn_tokenizer_kind tokenizer;
    int vocab_size;
    size_t n_params; /* scalar parameters */
    uint64_t model_bytes;

    int has_train_state; /* the rest is zero when there is no training state */
    attn_train_config train;
    int64_t state_step;
    char *corpus_path; /* the corpus the run recorded (malloc'd) or NULL */
    uint64_t state_bytes;
    size_t n_history;       /* training steps recorded */
    attn_train_record last; /* the last of them (when n_history > 0) */
    size_t n_evals;
    attn_eval_record last_eval; /* the latest evaluation (when n_evals > 0) */
    attn_eval_record best_eval; /* the one with the lowest val_loss */
} attn_checkpoint_info;

/* Fill *info (zeroed first; release with attn_checkpoint_info_free). Errors
 * as attn_gpt_load_checkpoint / attn_trainer_read_config; on failure nothing
 * is left allocated. */
attn_status attn_checkpoint_info_read(const char *path, attn_checkpoint_info *info,
                                      attn_error *err);
void attn_checkpoint_info_free(attn_checkpoint_info *info);

#ifdef __cplusplus
}
#endif
#endif
