/* attn/train.h — training a GPT (gpt.h) on a text corpus, with
 * checkpoints that resume bit for bit.
 *
 * A trainer owns everything a run needs: tokenizer (char: trained on the
 * whole corpus, seed 004; gpt2: GPT-2's BPE, attn/tokenizer.h), token ids,
 * the 90/10 train/val split (attn_train_tokenize; dataset.h), the
 * model and its (B, context_length) workspace, AdamW (optim.h), and three
 * generators, all derived from the run's seed:
 *   - model: torch.manual_seed(seed) + GPTModel(cfg) draws the weights; the
 *     same generator then draws every dropout mask during training (as one
 *     PyTorch global generator would);
 *   - sampler: the shuffled order of training windows (attn_sampler, seed+1);
 *   - eval: the random batches of loss estimates (seed+2).
 *
 * One step: lr = attn_train_lr(step), next shuffled batch, forward in
 * training mode, backward, clip to grad_clip, AdamW. An evaluation averages
 * the eval-mode loss of eval_iters random batches of each split; an exact
 * one takes the val loss over the whole split (attn_gpt_loss_windows), as
 * a run's final evaluation does when that is a small part of the run
 * (attn_trainer_final_is_exact).
 *
 * Gradient accumulation (grad_accum = M > 1): a step takes the next M
 * batches of batch_size windows (micro-batches j = 0..M-1), runs forward +
 * backward on each with loss scale 1/M, and sums those gradients in the
 * fixed order (((g_0 + g_1) + g_2) + ...) — so the gradient is the mean over
 * the M micro-batches, AdamW and clipping see it once per step, and the
 * recorded loss is the mean of the M micro-batch losses (summed in order in
 * double). Micro-batch j of step s draws its dropout masks from its own
 * generator, seeded from (seed, s, j), so any rank can draw it without
 * replaying the others' (M = 1 keeps the single model generator). It costs
 * one gradient-sized buffer (a rank > 0 keeps one per micro-batch it runs).
 * With an attn_dist of N ranks (dist.h) the M micro-batches are split over
 * the ranks and the result is bit for bit that of one process, as is the
 * evaluation, whose batches are split over the ranks too.
 *
 * Checkpoint directory (attn_trainer_save): the two files below are committed
 * together as one unit (attn/checkpoint.h: DIR/ckpt-<step>/ made live by one
 * atomic pointer swap, DIR/<file> links to the live one), so a kill or a
 * failed write at any instant leaves the previous or the new checkpoint:
 *   model.safetensors   the parameters under the book's state_dict names,
 *                       metadata: format "attn-gpt", config (the book's keys,
 *                       JSON), its tokenizer (attn_ckpt_tokenizer_meta:
 *                       char's characters in id order, or gpt2's files), step;
 *   train_state.safetensors
 *                       exp_avg.<name> / exp_avg_sq.<name> (F32), the three
 *                       generators (U32), the loss history; metadata: format
 *                       "attn-train-state", step, config (model + training
 *                       JSON), sampler epoch/cursor, corpus path, size and
 *                       hash (a resume without --data reads that path again).
 * Resuming restores all of it, so the run continues exactly as if it had
 * never stopped (whatever the thread count). */
#ifndef ATTN_TRAIN_H
#define ATTN_TRAIN_H

#include <stddef.h>
#include <stdint.h>

#include "attn/checkpoint.h" /* ATTN_CKPT_MODEL, ATTN_CKPT_STATE, attn_gpt_load_checkpoint */
#include "attn/dataset.h"
#include "attn/dist.h"
#include "attn/engine.h"
#include "attn/gpt.h"
#include "attn/memory_plan.h"
#include "attn/optim.h"
#include "attn/rng.h"
#include "attn/status.h"
#include "attn/token_file.h"
#include "attn/tokenizer.h"

#ifdef __cplusplus
extern "C" {
#endif

struct cJSON;

/* What an evaluation measures (attn_trainer_evaluate). */
typedef enum attn_eval_mode {
    ATTN_EVAL_SAMPLED = 0, /* eval_iters random batches of each split (nanoGPT's estimate) */
    ATTN_EVAL_EXACT = 1    /* val: the whole split, every token once (attn_gpt_loss_windows);
                              train: still eval_iters random batches */
} attn_eval_mode;

/* Where the training batches and evaluation batches come from. */
typedef enum attn_train_loader {
    ATTN_LOADER_SAMPLER = 0, /* shuffled windows at every offset (attn_sampler), eval_iters
                                random batches from the eval generator */
    ATTN_LOADER_BOOK = 1     /* the book's chapter-5 DataLoaders: windows of context_length
                                with stride context_length, RandomSampler epochs and the
                                evaluations' iterators drawn from the model generator,
                                evaluations after global step 0, eval_interval, ...; every
                                parameter decays in AdamW (src/train/train_book.h) */
} attn_train_loader;

/* What a run's final evaluation adds to the sampled estimates (eval_mode
 * sampled; under eval_mode exact every evaluation is exact). */
typedef enum attn_final_eval {
    ATTN_FINAL_AUTO = 0,   /* the exact val loss when it is cheap (attn_trainer_final_is_exact) */
    ATTN_FINAL_EXACT = 1,  /* the exact val loss, whatever it costs */
    ATTN_FINAL_SAMPLED = 2 /* no exact pass */
} attn_final_eval;

/* With checkpoint_interval 0, an evaluation also saves the whole state when
 * the last whole save started this many seconds ago: a kill -9 loses at most
 * about this much work, and a short run writes AdamW's state only at its
 * ends (the book's chapter-5 run: 3 of its 1.9 GB states, not 18). */
#define ATTN_TRAIN_CKPT_AUTO_S 600.0

typedef struct attn_train_config {
    int batch_size;
    int64_t max_steps;
    double learning_rate, min_lr;
    int64_t warmup_steps;
    int64_t lr_decay_steps; /* 0 = max_steps */
    double beta1, beta2, eps, weight_decay;
    double grad_clip; /* 0 = no clipping */
    int64_t eval_interval;
    int eval_iters;
    int64_t log_interval;
    int64_t checkpoint_interval; /* 0 = at step 0, the end, a stop, and at an evaluation
                                    ATTN_TRAIN_CKPT_AUTO_S after the last */
    uint64_t seed;
    attn_dropout_stream dropout_stream;
    int grad_accum; /* micro-batches per step over all ranks; 0 or 1 = none */
    attn_eval_mode eval_mode;
    double time_budget; /* seconds of wall time for the whole run; 0 = none */
    attn_lr_schedule lr_schedule;
    attn_tokenizer_kind tokenizer; /* char (default) or gpt2 (attn/tokenizer.h) */
    attn_train_loader loader;
    attn_final_eval final_eval;
} attn_train_config;

/* The training config's keys, one row each: the JSON key (as written by
 * attn_train_config_to_json and read by attn_train_config_set_key), nanoGPT's
 * name for it, the option of `attn train` that sets it, its type, its valid
 * range and its help. Programs (and the CLI's option table) take the ranges
 * from here, so a key, its flag, its range and its help cannot disagree. */
typedef enum attn_train_key_type {
    ATTN_TKEY_INT,    /* an integer in [lo, hi] */
    ATTN_TKEY_NUMBER, /* a finite number in [lo, hi]: (lo, .. with lo_open, .., hi) with hi_open */
    ATTN_TKEY_CHOICE  /* a string, one of choices */
} attn_train_key_type;

typedef struct attn_train_key {
    const char *name;  /* "batch_size" */
    const char *alias; /* nanoGPT's name ("max_iters"), or NULL */
    const char *flag;  /* attn train's option without "--" ("steps") */
    attn_train_key_type type;
    double lo, hi; /* hi >= 9e18: no upper bound */
    int lo_open, hi_open;
    const char *const *choices; /* ATTN_TKEY_CHOICE: NULL-terminated */
    const char *help;
} attn_train_key;

/* A key's value: .i for ATTN_TKEY_INT, .d for NUMBER, .s for CHOICE. */
typedef struct attn_train_value {
    int64_t i;
    double d;
    const char *s;
} attn_train_value;

#define ATTN_TRAIN_KEY_COUNT 24

/* Row i (0 <= i < ATTN_TRAIN_KEY_COUNT, in attn_train_config's field order);
 * NULL outside. */
const attn_train_key *attn_train_key_at(int i);

/* The row index of a JSON key or its alias; -1 when unknown. */
int attn_train_key_find(const char *name);

/* "an integer >= 1", "a number in [0, 1)", "one of torch-cpu, torch-mkl". */
void attn_train_key_describe(const attn_train_key *k, char *buf, size_t cap);

/* Set key i of cfg to v (the field of v that its type reads), range-checked:
 * ATTN_ERR_INVALID_ARG "batch_size must be an integer >= 1 (got 0)". */
attn_status attn_train_config_set(attn_train_config *cfg, int i, attn_train_value v,
                                  attn_error *err);

/* Key i of cfg. */
attn_train_value attn_train_config_get(const attn_train_config *cfg, int i);

/* Model + training hyper-parameters of a preset (attn_gpt_config_preset's
 * names): nanogpt-cpu is nanoGPT's shakespeare-char CPU recipe (batch 12,
 * lr 1e-3 -> 1e-4 cosine over 2000 steps, 100 warmup, betas (0.9, 0.99),
 * weight decay 0.1, clip 1.0, eval every 250 steps on 20 batches). Each
 * preset is one row, model and recipe, in src/model/presets.c. */
attn_status attn_train_preset(const char *name, attn_gpt_config *model, attn_train_config *train,
                              attn_error *err);

/* The precision a preset's recipe was measured in: BF16 for speedrun (its
 * 600-s figures, docs/benchmarks.md), FP32 for the others and for unknown
 * names. attn train uses it when --precision is not given, on the CPU, if
 * attn_precision_check allows it, else fp32. */
attn_precision attn_train_preset_precision(const char *name);

/* Set one training key from JSON: a key of attn_train_key_at or its alias
 * (nanoGPT's max_iters, lr, warmup_iters, lr_decay_iters,
 * gradient_accumulation_steps), range-checked as attn_train_config_set
 * ("config key 'beta2' must be a number in [0, 1) (got 1)"). Unknown key ->
 * ATTN_ERR_NOT_FOUND. */
attn_status attn_train_config_set_key(attn_train_config *cfg, const char *key,
                                      const struct cJSON *value, attn_error *err);

/* Apply a JSON object holding model keys (gpt.h, book's or seed 004's names)
 * and training keys, in any mix. Strict, every error starting with name
 * (the file): the whole text must be one object (ATTN_ERR_FORMAT for text
 * after it or a \u0000 in a string, naming line and column); an unknown
 * key is ATTN_ERR_NOT_FOUND naming it and the closest known key; a key
 * given twice, or a key and its alias with different values, a value of the
 * wrong type or outside the key's range (checked before any conversion) is
 * ATTN_ERR_INVALID_ARG: "c.json: config key 'beta2' must be a number in
 * [0, 1) (got 1)". *vocab_given is set when the text sets vocab_size (or
 * vocabulary_size). */
attn_status attn_train_config_apply_json(attn_gpt_config *model, attn_train_config *train,
                                         const char *json_text, const char *name, int *vocab_given,
                                         attn_error *err);

/* Every key in its range (attn_train_key_at), min_lr <= learning_rate, no
 * final_eval sampled under eval_mode exact; grad_accum 0 is read as 1. */
attn_status attn_train_config_validate(const attn_train_config *cfg, attn_error *err);

/* A resumed run trained to a new max_steps (longer or shorter): *c, the
 * config to resume with, gets max_steps, and the LR schedule keeps the
 * horizon of the run as *saved had it — lr_decay_steps 0 (= max_steps) is
 * pinned to saved's max_steps — so the steps already taken keep their rates
 * and steps past the old horizon run at min_lr (attn_lr_cosine is flat
 * there). attn_trainer_resume accepts a config that differs only so. */
void attn_train_config_extend(attn_train_config *c, const attn_train_config *saved,
                              int64_t max_steps);

/* The training config as compact JSON (malloc'd). */
char *attn_train_config_to_json(const attn_train_config *cfg);

typedef struct attn_train_record {
    int64_t step; /* steps completed after this update (1-based) */
    float loss;   /* training batch loss of that step */
    float lr;
    float grad_norm; /* before clipping */
} attn_train_record;

typedef struct attn_eval_record {
    int64_t step;     /* steps completed when evaluated */
    float train_loss; /* mean of eval_iters random batches of the training split */
    float val_loss;   /* the same estimate on the val split; NAN when not taken (eval exact) */
    float val_exact;  /* the whole val split (attn_gpt_loss_windows); NAN when not taken */
} attn_eval_record;

/* The val loss an evaluation is judged by (best/, the report): the exact one
 * when taken, else the sampled estimate. */
float attn_eval_val(const attn_eval_record *r);

/* ------------------------------------------------------ exact evaluation */

/* The mean cross-entropy of the model over every token of ids[0..n) once:
 * the n - 1 predictions split into consecutive windows of acts->T tokens
 * (inputs ids[kT .. kT+T), targets ids[kT+1 .. kT+T+1)), the last window
 * shorter when T does not divide n - 1, run acts->B windows per eval-mode
 * forward (rows past the end repeat window 0 and are not counted; a short
 * window's missing positions come after it, which a causal model never
 * sees). The per-token losses are summed in double in token order, so the
 * result is deterministic and the same at every thread count (the fp32
 * forward is). *count (may be NULL) gets n - 1. n must be >= 2. acts is
 * scratch: B windows of T tokens at a time, its (B_max, T_max); ids must be
 * valid tokens. */
attn_status attn_gpt_loss_windows(attn_gpt *m, attn_gpt_acts *acts, const int32_t *ids, size_t n,
                                  double *loss, size_t *count, attn_error *err);
/* The same over every token of a dataset view (int32 or a uint16 token
 * file, read window by window; its block_size is not used). */
attn_status attn_gpt_loss_dataset(attn_gpt *m, attn_gpt_acts *acts, const attn_token_dataset *ds,
                                  double *loss, size_t *count, attn_error *err);

/* The trainer: a model, its AdamW state, the corpus's token splits, the
 * generators and the loss history of one run. Opaque: the accessors below
 * read what a front end shows. */
typedef struct attn_trainer attn_trainer;

/* A fresh run on text (n bytes of UTF-8). The tokenizer is tcfg->tokenizer's
 * kind: char trains one on the corpus, gpt2 loads GPT-2's files
 * (attn_tokenizer_gpt2's rule). mcfg->vocab_size is replaced by the
 * tokenizer's size unless vocab_given, in which case they must agree. Fails (clear message) on an
 * empty corpus, a split shorter than context_length + 1 tokens, or a bad config; *out is NULL then.
 */
attn_status attn_trainer_create(attn_trainer **out, const attn_gpt_config *mcfg,
                                const attn_train_config *tcfg, int vocab_given, const char *text,
                                size_t n, attn_error *err);

/* attn_trainer_create with a fixed vocabulary instead of the corpus's: vocab
 * is a UTF-8 string of its characters in id order (a checkpoint's
 * "vocabulary" metadata, attn_tokenizer_vocab_string), and mcfg->vocab_size
 * becomes its size (vocab_given: must be). The corpus may use only some of
 * them (the ids stay the vocabulary's); a character it lacks is
 * ATTN_ERR_INVALID_ARG naming the character and its position, line and
 * column. Fine-tuning and resuming start so (attn_train_start in
 * train_setup.h). */
attn_status attn_trainer_create_vocab(attn_trainer **out, const attn_gpt_config *mcfg,
                                      const attn_train_config *tcfg, int vocab_given,
                                      const char *vocab, const char *text, size_t n,
                                      attn_error *err);
/* attn_trainer_create with the tokenizer tok (copied; a checkpoint's,
 * either kind): its kind must be tcfg->tokenizer, and mcfg->vocab_size its
 * size (vocab_given: must be). Resuming and fine-tuning start so. */
attn_status attn_trainer_create_tok(attn_trainer **out, const attn_gpt_config *mcfg,
                                    const attn_train_config *tcfg, int vocab_given,
                                    const attn_tokenizer *tok, const char *text, size_t n,
                                    attn_error *err);

/* The corpus as token ids, the one tokenize step of a run (*ids malloc'd,
 * *n_ids of them; the training split is ids[0, *split), validation the
 * rest). char: the whole text encoded, split at floor(0.9 * n_ids)
 * (seed 004). gpt2: the book's chapter-5 split: the first int(0.9 *
 * len(text)) characters train, the rest validate, each part encoded on its
 * own with <|endoftext|> as the special token (GPTDatasetV1's
 * allowed_special), so the text must be UTF-8. */
attn_status attn_train_tokenize(const attn_tokenizer *tok, const char *text, size_t n,
                                int32_t **ids, size_t *n_ids, size_t *split, attn_error *err);

/* The trainer's tokenizer (borrowed). */
const attn_tokenizer *attn_trainer_tokenizer(const attn_trainer *tr);

/* Frees everything the trainer holds, and the trainer (NULL: nothing). */
void attn_trainer_free(attn_trainer *tr);

/* ---- what a front end reads ---------------------------------------------- */
int64_t attn_trainer_steps(const attn_trainer *tr); /* optimizer steps taken */
const attn_gpt_config *attn_trainer_model_config(const attn_trainer *tr);
const attn_train_config *attn_trainer_train_config(const attn_trainer *tr);
/* The model being trained (its weights live while the trainer does). */
const attn_gpt *attn_trainer_model(const attn_trainer *tr);
/* The evaluations and step records so far (*n of them, oldest first). */
const attn_eval_record *attn_trainer_evals(const attn_trainer *tr, size_t *n);
const attn_train_record *attn_trainer_history(const attn_trainer *tr, size_t *n);
/* The ranks it runs on (attn_trainer_set_dist), NULL for one process. */
const attn_dist *attn_trainer_dist(const attn_trainer *tr);
/* The corpus: its size in bytes, and its tokens in the train / val splits. */
size_t attn_trainer_corpus_bytes(const attn_trainer *tr);
void attn_trainer_split_tokens(const attn_trainer *tr, size_t *train, size_t *val);
/* The token file of split 0 (train) or 1 (val) of a gpt2 run on a
 * corpus file (attn_train_start with no text; attn/token_file.h: its path,
 * and whether this start built it), or NULL when the ids are in memory. */
const attn_token_file *attn_trainer_token_file(const attn_trainer *tr, int split);
/* Where the corpus is (recorded in the training state so --resume finds it;
 * borrowed, NULL: none), and time spent outside the trainer that a time
 * budget counts (a command's set-up). */
void attn_trainer_set_corpus_path(attn_trainer *tr, const char *path);
void attn_trainer_add_elapsed(attn_trainer *tr, double seconds);

/* Read the configs a checkpoint directory was trained with (from its
 * training state), e.g. to resume without restating them. */
/* *corpus_path (may be NULL) gets the corpus path the run recorded, malloc'd,
 * or NULL when none was recorded. */
attn_status attn_trainer_read_config(const char *dir, attn_gpt_config *mcfg,
                                     attn_train_config *tcfg, char **corpus_path, attn_error *err);

/* Continue the run saved in dir (its live checkpoint): tr must have been initialised with the same
 * configs and corpus (checked: a different config or corpus is an error
 * naming what differs) and the run's vocabulary (attn_trainer_create_vocab
 * with the checkpoint's; a run fine-tuned on part of its vocabulary needs
 * it; attn_train_start does both); restores weights, optimizer,
 * generators, sampler position and history. */
attn_status attn_trainer_resume(attn_trainer *tr, const char *dir, attn_error *err);

/* Fine-tuning: replace a fresh trainer's initial weights (step 0, before
 * attn_trainer_set_device) with those of the model checkpoint in dir
 * (attn_gpt_load_checkpoint). Its model must have this run's shape
 * (vocab_size, context_length, emb_dim, n_heads, n_layers, qkv_bias;
 * drop_rate may differ) and its vocabulary must be the trainer's, character
 * for character (start it with attn_trainer_init_vocab and the checkpoint's
 * vocabulary, so a corpus using a subset of it fits); otherwise an error
 * naming the difference. AdamW, the generators and the step start fresh. */
attn_status attn_trainer_init_from(attn_trainer *tr, const char *dir, attn_error *err);

/* Run the steps and evaluations on device (attn/engine.h): CUDA copies the
 * weights and AdamW moments to the GPU (attn/cuda.h) and keeps them there;
 * attn_trainer_save copies them back first, so checkpoints are the same
 * files whatever the device. Call after init (and resume). On the CPU,
 * BF16 is attn_gpt_set_precision (bf16 products with fp32 sums; fails on a
 * CPU without AVX512-BF16). GPU dropout draws from Philox (attn/cuda.h), not from the
 * model generator, so a GPU run differs from a CPU run with the same seed
 * when drop_rate > 0 (it is reproducible for its seed). */
attn_status attn_trainer_set_device(attn_trainer *tr, attn_device device, attn_precision precision,
                                    attn_error *err);
/* Train as one of dist's ranks (dist.h): grad_accum must be a multiple of
 * the rank count (each rank takes grad_accum / size micro-batches); a
 * time_budget runs in one process only. */
attn_status attn_trainer_set_dist(attn_trainer *tr, attn_dist *dist, attn_error *err);

/* Fingerprints for the ranks' start-up check: *config of the model and
 * training configs and the corpus, *state of the weights, optimizer
 * moments, generators and step. */
void attn_trainer_fingerprint(const attn_trainer *tr, uint64_t *config, uint64_t *state);

/* The learning rate of step (0-based): warmup_steps of linear warm-up to
 * learning_rate, then lr_schedule down to min_lr over the run's horizon,
 * which is lr_decay_steps (0 = max_steps) or, with a time_budget, the
 * budget: progress is then the share of it spent (tr->progress, from the
 * run's clock). A cosine run without a budget is attn_lr_cosine's. */
double attn_train_lr(const attn_train_config *c, int64_t step, double progress);

/* One optimisation step at attn_train_lr(tcfg, step, tr->progress); *rec
 * (may be NULL) gets its record. */
attn_status attn_trainer_step(attn_trainer *tr, attn_train_record *rec, attn_error *err);

/* An evaluation at the current step (recorded in history) as tcfg.eval_mode
 * says: the sampled estimate of both splits (ATTN_EVAL_SAMPLED), or the
 * train estimate and the exact val loss (ATTN_EVAL_EXACT). */
attn_status attn_trainer_evaluate(attn_trainer *tr, attn_eval_record *rec, attn_error *err);
/* The final evaluation of a run: the sampled estimates (eval_mode sampled,
 * so best/ compares like with like) and, when attn_trainer_final_is_exact,
 * the exact val loss (val_exact NaN otherwise). On the GPU the exact loss
 * runs the forward on the CPU copy of the weights. */
attn_status attn_trainer_evaluate_final(attn_trainer *tr, attn_eval_record *rec, attn_error *err);

/* Whether attn_trainer_evaluate_final computes the exact val loss: always
 * under eval_mode exact or final_eval exact, never under final_eval
 * sampled; final_eval auto runs it when it is a small part of the run: the
 * val split holds at most ATTN_TRAIN_EXACT_FINAL_MAX tokens (a 1 GB
 * corpus's holds 30 M: hours of forward passes) and the pass costs at most
 * ATTN_TRAIN_EXACT_FINAL_SHARE of the planned steps' floating-point
 * operations (all max_steps of them; attn_train_plan_of), or under
 * ATTN_TRAIN_EXACT_FINAL_FLOP (a second or two on a CPU). A rule of the
 * configs and the corpus only, so a run and its resumes decide alike on
 * every machine. A 3-step gpt2-124m run on Tiny Shakespeare: the pass over
 * its 36,059 val tokens costs 4.0x the steps: no exact pass (1000 steps:
 * 1.2%). */
#define ATTN_TRAIN_EXACT_FINAL_MAX ((size_t)1 << 20)
#define ATTN_TRAIN_EXACT_FINAL_SHARE 0.10
#define ATTN_TRAIN_EXACT_FINAL_FLOP 1e11
int attn_trainer_final_is_exact(const attn_trainer *tr);
/* The exact pass's planned cost: its floating-point operations (a forward
 * over every val window, batch_size windows at a time: a third of a training
 * token's each) into *flop (may be NULL), and their share of the planned
 * steps' as the result. Any trainer, a dry run's too. */
double attn_trainer_final_exact_share(const attn_trainer *tr, double *flop);

/* Write the checkpoint (both files, as one atomic unit) into dir, which must
 * exist; the caller holds dir's run lock (attn/runlock.h). */
attn_status attn_trainer_save(const attn_trainer *tr, const char *dir, attn_error *err);

/* dir/loss.csv (step,loss,lr,grad_norm,train_loss,val_loss; eval columns
 * empty where no evaluation happened) and dir/loss.svg (the batch loss as a
 * line, the evaluations as points, the learning rate on a right-hand axis), both atomically. */
attn_status attn_trainer_write_loss_files(const attn_trainer *tr, const char *dir, attn_error *err);

/* ------------------------------------------------------ the training loop */

/* What a step's progress report holds (attn_trainer_events.on_step). */
typedef struct attn_train_progress {
    attn_train_record rec; /* the step just taken */
    int64_t start_step;    /* tr->step when attn_trainer_run began */
    double step_s;         /* seconds of this step */
    double step_comm_s;    /* seconds of it inside MPI */
    double train_s;        /* seconds in steps since the run began */
    double tokens_per_s;   /* over the steps since the run began */
    double eta_s;          /* to max_steps at that rate */
} attn_train_progress;

/* Which part of an evaluation runs (attn_eval_progress). */
typedef enum attn_eval_part {
    ATTN_EVAL_PART_TRAIN = 0, /* the train loss estimate: eval_iters batches */
    ATTN_EVAL_PART_VAL = 1,   /* the val loss estimate: eval_iters batches */
    ATTN_EVAL_PART_EXACT = 2  /* the exact val loss: every val window once */
} attn_eval_part;

/* Where an evaluation stands (attn_trainer_events.on_eval_progress). Its
 * unit is a forward pass of one batch (this rank's share of them). */
typedef struct attn_eval_progress {
    int64_t step;          /* steps taken when it began */
    int final;             /* 1: the run's final evaluation */
    attn_eval_part part;   /* what runs now */
    size_t batch, batches; /* this part's forwards done, of batches */
    double done, total;    /* the evaluation's forwards: done (with the running
                              one's share of its layers), of total */
    double elapsed_s;      /* since it began */
    double eta_s;          /* to its end at its pace so far; NAN before any */
} attn_eval_progress;

/* Callbacks of attn_trainer_run, each may be NULL; called on every rank
 * (attn_dist): a program prints on rank 0 only. */
/* The book's data order (loader "book"): the 1-based epoch of the last
 * step taken (1 before any); 0 in attn's own order. */
int64_t attn_trainer_epoch(const attn_trainer *tr);

#define ATTN_GREEDY_MAX_NEW 100000
/* The book's generate_and_print_sample: prompt encoded with the run's
 * tokenizer (<|endoftext|> the token), then max_new greedy tokens, each the
 * arg-max over the last context_length tokens (eval mode); *text (malloc'd,
 * the caller frees) the decoded ids, prompt included. gpt2 decodes bytes:
 * show them through attn_utf8_display. */
attn_status attn_trainer_greedy_text(const attn_trainer *tr, const char *prompt, int max_new,
                                     char **text, attn_error *err);

typedef struct attn_trainer_events {
    void *user;
    /* Polled before each step and, during an evaluation, between the
     * layers of its forwards (under attn_dist: before each of its batches):
     * nonzero asks the run to save and stop. The ranks agree
     * (attn_dist_any), so all stop at the same point. An evaluation so
     * stopped is abandoned (its draws undone) and a resume runs it again. */
    int (*should_stop)(void *user, const attn_trainer *tr);
    void (*on_step)(void *user, const attn_trainer *tr, const attn_train_progress *p);
    void (*on_eval)(void *user, const attn_trainer *tr, const attn_eval_record *ev);
    /* The book's data order only: after the last step of epoch (1-based). */
    void (*on_epoch)(void *user, const attn_trainer *tr, int64_t epoch);
    /* During an evaluation: as each part begins, after each layer of its
     * forwards and after each forward. */
    void (*on_eval_progress)(void *user, const attn_trainer *tr, const attn_eval_progress *p);
} attn_trainer_events;

/* How a run ended (attn_trainer_run's *result). */
typedef struct attn_train_result {
    int stopped;                /* 1: a stop request ended it before max_steps */
    int budget_spent;           /* 1: time_budget ended it (with a final evaluation) */
    int64_t start_step;         /* tr->step when the run began */
    double wall_s;              /* the whole run, evaluations and saves included */
    double train_s;             /* in steps */
    double comm_s;              /* in MPI during steps (rank's own) */
    uint64_t comm_bytes;        /* sent + received during steps */
    double tokens_per_s;        /* over train_s */
    double eval_s;              /* in evaluations */
    double save_s;              /* in checkpoints and loss files */
    int checkpoints;            /* whole states this run started writing (rank 0) */
    int eval_stopped;           /* 1: the stop came during an evaluation (abandoned) */
    attn_eval_progress eval_at; /* where that evaluation stood */
} attn_train_result;

/* The loop's rhythm, from tr->step to tcfg.max_steps: an evaluation first
 * at step 0 (not in the book's order); then steps; an evaluation every
 * eval_interval steps and the final one (attn_trainer_evaluate_final) at
 * max_steps; a resume first runs the evaluation of its step when a stop
 * abandoned it (so a stopped and resumed run is the unbroken one); with a
 * time_budget the run also ends
 * when the next step, the final evaluation and a checkpoint would no longer
 * fit in it (estimated from the last ones), with that final evaluation and
 * checkpoint (result->budget_spent). The budget's clock is tr->elapsed_s:
 * checkpointed, so a resumed run counts on from where it stopped (a run
 * the budget ended saves at least the whole budget: resuming it takes no
 * further step, only the final evaluation again); the
 * steps' LR follows it (attn_train_lr), so the steps and rates a budgeted
 * run takes depend on the machine's speed, and a resumed one continues the
 * schedule but is not bit for bit an unbroken run. A checkpoint (the bytes
 * of attn_trainer_save, and the loss files) into out at step 0 (a fresh
 * run's, written during its first evaluation), every checkpoint_interval
 * steps (without one: at an evaluation ATTN_TRAIN_CKPT_AUTO_S after the
 * last), and when the run ends or is stopped unless the state on disk is
 * already current (resumed = the checkpoint in out is tr's state); a
 * checkpoint of an evaluation's step is written during it and committed
 * with its record. Every evaluation writes the loss files; one after step 0
 * whose val loss is below every earlier one's also saves the model alone
 * into out/best (ATTN_CKPT_BEST, the same crash-safe layout, no training
 * state; attn_gpt_load_checkpoint reads it). These are written by a thread
 * of the run's while it goes on (an optimizer update waits for the write in
 * progress: it reads the weights and moments in place); a failed write is
 * the run's failure, returned at its next step or at the end. Under
 * attn_dist only rank 0 writes; out NULL = no files. A stop request leaves ATTN_OK with
 * result->stopped = 1 (and eval_stopped = 1 when it came during an evaluation). */
attn_status attn_trainer_run(attn_trainer *tr, const char *out, int resumed,
                             const attn_trainer_events *events, attn_train_result *result,
                             attn_error *err);

/* ------------------------------------------------------ planning a run */

/* What a run costs, from its configs alone (nothing allocated). */
typedef struct attn_train_plan {
    size_t n_params;        /* exact: the book's GPTModel for this config */
    double state_bytes;     /* weights, gradients, AdamW moments, the accumulated
                               gradient (fp32) */
    double act_bytes;       /* activations kept for backward, the head and the bf16
                               copies: one micro-batch */
    double mem_bytes;       /* the run's peak: mem.total (the above, the corpus, the
                               process) */
    attn_mem_plan mem;      /* by part (attn/memory_plan.h) */
    double ckpt_bytes;      /* one checkpoint on disk (weights + moments) */
    double tokens_per_step; /* batch_size * context_length * grad_accum */
    double flops_per_step;  /* forward + backward of every micro-batch (attn/cost.h) */
} attn_train_plan;

/* How the run is made, beyond its configs: zeros are fp32, one thread and
 * no corpus counted. */
typedef struct attn_train_plan_env {
    attn_precision precision;
    int threads;
    double corpus_bytes; /* the corpus file's size (a char run holds it, its ids and
                            its order; a gpt2 run maps its token files) */
    int resume;          /* the run resumes from its checkpoint */
} attn_train_plan_env;

/* The plan on env (NULL: zeros). */
void attn_train_plan_env_of(const attn_gpt_config *m, const attn_train_config *t,
                            const attn_train_plan_env *env, attn_train_plan *p);
/* attn_train_plan_env_of(m, t, NULL, p). */
void attn_train_plan_of(const attn_gpt_config *m, const attn_train_config *t, attn_train_plan *p);

/* GFLOP/s of attn_sgemm (384^3, threads as attn_sgemm takes them): the
 * median of nine ~30 ms rounds. flops_per_step / this estimates a step's
 * seconds (roughly: the rest of a step is not matrix products, and a busy
 * machine measures slower). 0 when out of memory. */
double attn_train_probe_gflops(int threads);

#ifdef __cplusplus
}
#endif
#endif
