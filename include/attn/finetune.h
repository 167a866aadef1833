/* attn/finetune.h — the book's chapter 6 (a GPT fine-tuned as a text
 * classifier, gpt_class_finetune.py) and appendix E (LoRA), as a library.
 *
 * Data: the book's CSV (header "Label,Text", pandas' quoting: a field in
 * double quotes may hold commas, newlines and "" for a quote; integer
 * labels >= 0), or a TSV of "label<TAB>text" lines (no header; a file
 * ending in .tsv, or whose first line holds a TAB and no comma before it).
 * Each text is GPT-2-encoded (plain text, as tiktoken's encode) and padded
 * with <|endoftext|> (50256) to max_len: the longest text of the training
 * set (the book's SpamDataset(max_length=None)), the other sets padded or
 * cut to the training set's. A text longer than the model's context is cut
 * to it (SpamDataset with max_length given: encoded_text[:max_length]).
 *
 * The model: the loaded GPT with its head replaced by torch.nn.Linear(emb,
 * n_classes) (a bias; drawn as torch.manual_seed(seed) then the Linear's
 * constructor), the loss F.cross_entropy(model(x)[:, -1, :], labels): the
 * targets are ATTN_IGNORE_INDEX but at each row's last position (the padded
 * length's last, as the book takes it). Trainable: the last block, the
 * final norm and the head (the book's), everything, or the head alone; with
 * LoRA (lora_rank > 0) every Linear, the head included, carries an adapter
 * and only the adapters train (appendix E: freeze all, then
 * replace_linear_with_lora).
 *
 * Training is train_classifier_simple's: epochs of the shuffled training
 * loader (drop_last; its iterators' draws from the one generator seeded
 * `seed` as the script's torch.manual_seed(123) before training, as in
 * src/train/train_book.h), AdamW (weight decay on every tensor, as torch's
 * one group), after every eval_freq-th step (from step 0) the loss of
 * eval_iter batches of a fresh train iterator and of the val loader, after
 * every epoch the accuracy (argmax of the last position's logits,
 * calc_accuracy_loader) of eval_iter batches of each. */
#ifndef ATTN_FINETUNE_H
#define ATTN_FINETUNE_H

#include <stddef.h>
#include <stdint.h>

#include "attn/gpt.h"
#include "attn/status.h"
#include "attn/tokenizer.h"

#ifdef __cplusplus
extern "C" {
#endif

/* GPT-2's <|endoftext|>: the book's pad_token_id. */
#define ATTN_PAD_ID 50256

/* A classification set, encoded and padded. */
typedef struct attn_class_data {
    size_t n;         /* examples, in file order */
    int max_len;      /* every row's length (padded) */
    int32_t *ids;     /* n * max_len */
    int32_t *labels;  /* n */
    int max_label;    /* the largest label */
    size_t truncated; /* texts cut to max_len */
    size_t longest;   /* the longest text's tokens, before any cut */
} attn_class_data;

/* Read and encode a CSV or TSV (above) with tok (GPT-2's). max_len 0: the
 * longest text's length (at most context); else every text padded or cut to
 * max_len. Errors name the file and line: a missing or non-integer label,
 * an empty text, a missing header, a row with no text (ATTN_ERR_FORMAT);
 * no rows at all (ATTN_ERR_FORMAT). On failure d is left zeroed. */
attn_status attn_class_data_read(const char *path, const attn_tokenizer *tok, int max_len,
                                 int context, attn_class_data *d, attn_error *err);
void attn_class_data_free(attn_class_data *d);

/* What trains (without LoRA). */
typedef enum attn_trainable_set {
    ATTN_TRAIN_LAST_BLOCK = 0, /* the last block, the final norm, the head (the book's) */
    ATTN_TRAIN_ALL = 1,
    ATTN_TRAIN_HEAD = 2
} attn_trainable_set;

/* "last-block", "all", "head" (NULL-terminated, in the enum's order). */
const char *const *attn_trainable_set_names(void);

/* A fine-tuning run's settings, both tasks (the defaults: the book's
 * chapter 6, attn_classify_defaults, or chapter 7, attn_instruct_defaults). */
typedef struct attn_classify_config {
    int batch_size;           /* 8 */
    int epochs;               /* 5 */
    int eval_freq;            /* 50 (steps) */
    int eval_iter;            /* 5 (batches) */
    double lr;                /* 5e-5 (appendix E: 8e-4) */
    double weight_decay;      /* 0.1 */
    double beta1, beta2, eps; /* torch's 0.9, 0.999, 1e-8 */
    uint64_t seed;            /* 123 */
    attn_trainable_set trainable;
    int lora_rank;    /* 0: none */
    float lora_alpha; /* the book's LoRALayer: y += (alpha / rank) (x A) B */
    int mask_prompt;  /* instruct: the prompt's targets -100 too (exercise 7.2) */
    const struct attn_finetune_ckpt *ckpt; /* where the run checkpoints (NULL: nowhere) */
} attn_classify_config;

/* The book's settings (above). */
attn_classify_config attn_classify_defaults(void);

/* *out (not initialised) = base with a classifier head of n_classes
 * (n_classes >= 1; 0: base's language head, untied, for --task instruct,
 * the adapters' A then drawn right after the seed), its trainable set and adapters as cfg says;
 * base's weights copied (a tied base: out_head dropped, the book's untied load), the head drawn
 * from cfg->seed, the adapters' A from the same generator after the four iterator draws appendix
 * E's notebook makes before replace_linear_with_lora (its three loaders' accuracies). base is left
 * as it was. */
attn_status attn_classifier_from(attn_gpt *out, const attn_gpt *base, int n_classes,
                                 const attn_classify_config *cfg, attn_error *err);

/* Chapter 7's settings (gpt_instruction_finetuning.py): batch 8, 2 epochs,
 * eval_freq 5, eval_iter 5, lr 5e-5, weight decay 0.1, seed 123,
 * everything trainable. */
attn_classify_config attn_instruct_defaults(void);

/* m's trainable set as cfg says (cfg->trainable; with cfg->lora_rank only
 * the adapters): every other tensor frozen. */
attn_status attn_finetune_set_trainable(attn_gpt *m, const attn_classify_config *cfg,
                                        attn_error *err);

/* A run's checkpoints (attn/checkpoint.h's DIR/ckpt-<step> folders and
 * DIR/latest, each committed atomically): after every evaluation, after
 * every epoch's end and at the end. Each holds the model (as
 * attn_finetuned_write writes it) and the training state: AdamW's moments
 * and step, the generator, the epoch's order, where the loop stands
 * (epoch, batch, step, examples or tokens seen) and every evaluation so far
 * (the losses, accuracies and samples the events reported), with the task,
 * a digest of the data and the settings. Resuming reads the live
 * checkpoint: a run of another task, other data or other settings is
 * ATTN_ERR_INVALID_ARG (naming which) before anything changes; else the
 * recorded events are reported again (on_initial, on_eval, on_epoch,
 * on_sample_line; a checkpoint from before attn kept samples replays none)
 * and the run goes on from where the checkpoint stands, bit for bit as if
 * never stopped. A finished run (its end checkpoint) trains no more. */
typedef struct attn_finetune_ckpt {
    const char *dir;                         /* the run folder: exists, the caller holds its lock */
    const attn_tokenizer *tok;               /* written with the model */
    struct attn_classifier_info const *info; /* the model's metadata */
    int resume;                              /* continue from dir's live checkpoint */
    int check_only; /* resume's checks alone (task, data, settings): the train
                       call reads the checkpoint's header, changes nothing and
                       trains nothing (a caller's check before it locks dir) */
} attn_finetune_ckpt;

/* What a training run reports as it goes (each may be NULL). */
typedef struct attn_classify_events {
    void *user;
    /* after step (0-based) of epoch (1-based): evaluate_model's losses */
    void (*on_eval)(void *user, int epoch, int64_t step, double train_loss, double val_loss);
    /* after an epoch: calc_accuracy_loader's of eval_iter batches */
    void (*on_epoch)(void *user, int epoch, double train_acc, double val_acc);
    /* after every step: its training loss */
    void (*on_step)(void *user, int64_t step, float loss);
    /* instruct, before training: the "Initial losses" (5 batches each) */
    void (*on_initial)(void *user, double train_loss, double val_loss);
    /* instruct, after an epoch: the model as it is (the book's
     * generate_and_print_sample); nonzero stops the run (ATTN_ERR_STATE) */
    int (*on_sample)(void *user, int epoch, attn_gpt *m);
    /* instruct with checkpoints (cfg->ckpt: its tokenizer and info's
     * adapters make it; a run folder's always has them), after an epoch:
     * the script's printed sample (attn_instruct_sample); made only when
     * this is given, kept in the checkpoints and reported again by a
     * resume, after its epoch's evaluations */
    void (*on_sample_line)(void *user, int epoch, const char *line);
} attn_classify_events;

typedef struct attn_classify_result {
    int64_t steps;
    int64_t examples_seen;     /* instruct: tokens seen (train_model_simple's count) */
    double train_acc, val_acc; /* the last epoch's */
    /* then, as ch06.ipynb after training: calc_accuracy_loader over the
     * whole train loader (a fresh shuffled iterator) and val loader */
    double final_train_acc, final_val_acc;
    int64_t resumed_step; /* the checkpoint's step a resume began at (-1: a fresh run) */
    int resumed_epoch;    /* and its epoch (1-based) */
    int finished;         /* resumed a finished run: nothing trained */
} attn_classify_result;

/* train_classifier_simple (above) on m (a classifier of
 * attn_classifier_from). train needs at least batch_size rows; val may
 * have none (its losses and accuracies are then NaN). */
attn_status attn_classify_train(attn_gpt *m, const attn_class_data *train,
                                const attn_class_data *val, const attn_classify_config *cfg,
                                const attn_classify_events *ev, attn_classify_result *res,
                                attn_error *err);

/* The last position's logits (n, width) of rows[0..n) of d (n <= batch),
 * in eval mode, batch rows a forward. */
attn_status attn_classify_logits(attn_gpt *m, const attn_class_data *d, size_t first, size_t n,
                                 float *logits, attn_error *err);

/* One text as the book's classify_review feeds it to a classifier of
 * max_len: GPT-2-encoded, cut to max_len, padded with ATTN_PAD_ID, into
 * row (max_len ids). */
attn_status attn_class_text_row(const attn_tokenizer *tok, const char *text, size_t n, int max_len,
                                int32_t *row, attn_error *err);

/* probs = softmax(logits) (n of each, summed in double) and the label,
 * the argmax (torch.argmax: the first of equal maxima). */
int attn_class_softmax(const float *logits, int n, double *probs);

/* calc_accuracy_loader over the first num_batches (0: all) batches of
 * batch_size rows of d in file order (the val and test loaders). */
attn_status attn_classify_accuracy(attn_gpt *m, const attn_class_data *d, int batch_size,
                                   int num_batches, double *acc, attn_error *err);

/* ------------------------------------------------ chapter 7: instructions */

/* An instruction set (the book's Alpaca-style instruction-data.json: an
 * array of objects with string fields "instruction", "input", "output"),
 * each entry encoded as InstructionDataset does: format_input(entry) +
 * "\n\n### Response:\n" + output, GPT-2-encoded as plain text. */
typedef struct attn_instruct_data {
    size_t n;    /* entries, in file order */
    size_t *off; /* n + 1: entry i's tokens are ids[off[i] .. off[i + 1]) */
    int32_t *ids;
    int32_t *prompt_len; /* n: tokens of encode(format_input(entry)) (exercise 7.2) */
    char **instruction, **input, **output; /* n each: the entry's fields */
    size_t longest;                        /* the longest entry's tokens */
    int view; /* 1: rows of another set's arrays (attn_instruct_view) */
} attn_instruct_data;

/* Read and encode path. Errors (ATTN_ERR_FORMAT, naming the file): not
 * JSON, not an array, an empty array, an entry that is not an object or
 * lacks one of the three fields or has one that is not a string (naming
 * the entry's 0-based index and the field). On failure d is left zeroed. */
attn_status attn_instruct_data_read(const char *path, const attn_tokenizer *tok,
                                    attn_instruct_data *d, attn_error *err);
void attn_instruct_data_free(attn_instruct_data *d);

/* view = entries [first, first + n) of d, sharing its arrays (free it too:
 * a no-op). */
attn_status attn_instruct_view(const attn_instruct_data *d, size_t first, size_t n,
                               attn_instruct_data *view, attn_error *err);

/* The book's split of n entries: train the first int(0.85 n), test the
 * next int(0.1 n), val the rest; limit > 0 cuts each to its first limit
 * (the script's --test_mode: 10). first[k], count[k] for k = 0 train,
 * 1 test, 2 val. */
void attn_instruct_split(size_t n, size_t limit, size_t first[3], size_t count[3]);

/* format_input(entry): the Alpaca prompt ("Below is an instruction ...
 * \n\n### Instruction:\n" instruction, then "\n\n### Input:\n" input when
 * input is not empty), malloc'd (NULL: out of memory). */
char *attn_instruct_prompt(const char *instruction, const char *input);

/* train_model_simple on m (attn_classifier_from with n_classes 0) as
 * gpt_instruction_finetuning.py runs it: first the "Initial losses" (5
 * batches of a fresh train and val iterator) under the generator as the
 * script leaves it, torch.manual_seed(cfg->seed) then the GPTModel(cfg)
 * constructor's draws (whatever file m came from: the script builds that
 * model either way); then, reseeded, the epochs: custom_collate_fn's
 * batches (each padded with 50256 to its longest entry + 1 and cut to
 * the context; targets -100 after the first pad, and over the prompt with
 * cfg->mask_prompt), evaluate_model every eval_freq steps, on_sample
 * after each epoch. train needs batch_size entries; val may have none. */
attn_status attn_instruct_train(attn_gpt *m, const attn_instruct_data *train,
                                const attn_instruct_data *val, const attn_classify_config *cfg,
                                const attn_classify_events *ev, attn_classify_result *res,
                                attn_error *err);

/* The book's generate(model, encode(prompt), max_new, context_size, eos)
 * (chapter 7's): greedy, the context cropped to its last context_length
 * tokens every token (idx[:, -context_size:]), stopped before eos (eos < 0:
 * none, as generate_text_simple). lora_scale > 0 (alpha / rank): m's
 * adapters merged first. The new ids into ids (room for max_new), *n of
 * them, eos not included. */
attn_status attn_instruct_generate(const attn_gpt *m, float lora_scale, const attn_tokenizer *tok,
                                   const char *prompt, int max_new, int eos, int32_t *ids,
                                   size_t *n, attn_error *err);

/* The script's model_response of n new ids: decoded (invalid UTF-8 shown as
 * Python's errors="replace"), "### Response:" removed, white space stripped;
 * malloc'd into *text. */
attn_status attn_instruct_response(const attn_tokenizer *tok, const int32_t *ids, size_t n,
                                   char **text, attn_error *err);

/* generate_and_print_sample's line after an epoch: start (the prompt of the
 * first validation entry) and 50 greedy tokens after it, newlines as
 * spaces; malloc'd into *line. */
attn_status attn_instruct_sample(const attn_gpt *m, float lora_scale, const attn_tokenizer *tok,
                                 const char *start, char **line, attn_error *err);

/* The tokens of each test response (the script's max_new_tokens). */
#define ATTN_INSTRUCT_RESPONSE_TOKENS 256

/* The script's "Generating responses": each entry of test's generate(...,
 * ATTN_INSTRUCT_RESPONSE_TOKENS, eos ATTN_PAD_ID) response as the JSON the
 * script saves (json.dump(indent=4): the entries with "model_response"
 * added; UTF-8 kept rather than \u escapes), malloc'd into *json, *len
 * bytes. What RUN/responses.json holds (attn/finetune_run.h). */
attn_status attn_instruct_responses(const attn_gpt *m, float lora_scale, const attn_tokenizer *tok,
                                    const attn_instruct_data *test, char **json, size_t *len,
                                    attn_error *err);

/* What a fine-tuned model's checkpoint says beyond its config (metadata
 * "task" "classify" or "instruct"). */
typedef struct attn_classifier_info {
    int n_classes; /* classify: the head's width; instruct: 0 (the language head) */
    int max_len;   /* classify: the training set's padded length (classify pads to
                      it); instruct: the context */
    int lora_rank;
    float lora_alpha;
    const char *task; /* "classify" (NULL) or "instruct"; loaded: a static string */
    /* what trains: an attn_trainable_set_names() name, or "adapters" (LoRA);
     * NULL: not recorded (a classifier saved before it was: "last-block") */
    const char *trainable;
} attn_classifier_info;

/* Write m (attn_classifier_from's) to dir/model.safetensors atomically: its
 * tensors by the book's names (a classifier's out_head with its bias;
 * adapters as LinearWithLoRA's), metadata format "attn-gpt", the task,
 * config, the info and the tokenizer. dir must exist. */
attn_status attn_classifier_save(const char *dir, const attn_gpt *m, const attn_tokenizer *tok,
                                 const attn_classifier_info *info, attn_error *err);

/* The same into the file path (a checkpoint's, attn_ckpt_file). */
attn_status attn_finetuned_write(const char *path, const attn_gpt *m, const attn_tokenizer *tok,
                                 const attn_classifier_info *info, attn_error *err);

/* Load a fine-tuned model saved so (a run folder or its model file), of
 * either task, its trainable set as recorded. A model of another task (a language model's
 * checkpoint, any other weights file) is ATTN_ERR_INVALID_ARG. */
attn_status attn_finetuned_load(const char *path, attn_gpt *m, attn_tokenizer *tok,
                                attn_classifier_info *info, attn_error *err);

/* attn_finetuned_load of a classifier: another task is
 * ATTN_ERR_INVALID_ARG: "... is not a classifier (task lm) ...". */
attn_status attn_classifier_load(const char *path, attn_gpt *m, attn_tokenizer *tok,
                                 attn_classifier_info *info, attn_error *err);

/* The task a model file's metadata names ("classify", "instruct"; "lm"
 * for attn's language-model checkpoints and other programs' files), into
 * task (16). */
attn_status attn_model_task(const char *path, char *task, attn_error *err);

/* m's adapters merged into its Linears' weights in *out (not
 * initialised), a model of the same config and head without adapters:
 * W + scale (A B)^T, LinearWithLoRA's output as one matrix (scale = the
 * book's alpha / rank; the product summed in double). What export writes. */
attn_status attn_gpt_merge_lora(attn_gpt *out, const attn_gpt *m, float scale, attn_error *err);

#ifdef __cplusplus
}
#endif
#endif
