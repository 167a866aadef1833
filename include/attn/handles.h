/* attn/handles.h — the library through opaque handles and flat calls, for
 * bindings (attn's Python package calls it through ctypes).
 *
 * Every argument is a number, a C string, a pointer to a plain array
 * (float32, int64, bytes), a callback of numbers, or a handle whose layout
 * the caller never sees, so a binding mirrors no struct but attn_error
 * (status.h: an int code, then a NUL-terminated message of
 * ATTN_ERROR_MSG_MAX bytes). Every fallible call returns an attn_status and
 * fills err. Handles are released by the matching *_free, which accepts
 * NULL; strings the calls return are released with attn_h_free.
 *
 * Arrays are row-major and contiguous; shapes are given at each call:
 *   modules   x (B, T, d_in) -> y (B, T, attn_module_out_dim)  (module.h)
 *   attention q, k, v, o (B, H, T, D) as PyTorch's scaled_dot_product_attention,
 *             lse (B, H, T), dropout bits (B, H, T, T) packed LSB first
 *   GPT       ids, targets (B, T) int64 -> logits (B, T, V); attention weights
 *             (n_layers, n_heads, T, T) of one sequence (gpt.h, attention_weights.h)
 *
 * Nothing here computes anything new: each call runs the typed API it names.
 * Calls that multiply matrices run them as the attn program does, on attn's
 * OpenMP threads with OpenBLAS at one thread (attn/gemm.h); OpenBLAS's own
 * setting (which numpy and torch may share) is restored when they return. */
#ifndef ATTN_HANDLES_H
#define ATTN_HANDLES_H

#include <stddef.h>
#include <stdint.h>

#include "attn/generate.h"
#include "attn/module.h"
#include "attn/param.h"
#include "attn/rng.h"
#include "attn/safetensors.h"
#include "attn/status.h"
#include "attn/version.h" /* ATTN_DEPRECATED */

#ifdef __cplusplus
extern "C" {
#endif

/* Release a string or buffer returned by a call below (NULL is fine). */
void attn_h_free(void *p);

/* bytes of uninitialised memory for a binding's large arrays, on 2 MiB
 * pages where the kernel allows (a 100 MB array then costs 50 page faults,
 * not 25,000); released with attn_h_free. NULL when out of memory. */
void *attn_h_alloc_huge(size_t bytes);

/* Ask the kernel to back the whole 2 MiB pages inside the caller's [p, p +
 * bytes) with huge pages now (Linux's MADV_COLLAPSE; contents and
 * addresses unchanged; a hint whose failure only costs speed): weights a
 * KV-cached step streams read ~25% faster. */
void attn_h_collapse_huge(void *p, size_t bytes);

/* ------------------------------------------------------------ generators */

/* A generator as torch.manual_seed(seed) leaves PyTorch's (attn/rng.h);
 * NULL when out of memory. */
attn_rng *attn_h_rng_create(uint64_t seed);
void attn_h_rng_free(attn_rng *rng);
/* deprecated: use attn_h_rng_create; removed after 0.2 */
ATTN_DEPRECATED("use attn_h_rng_create")
static inline attn_rng *attn_h_rng_new(uint64_t seed) {
    return attn_h_rng_create(seed);
}

/* ------------------------------------------------------------ parameters */

/* Parameter i of a list (attn/param.h), in state_dict order: its name, its
 * data and gradient (numel floats each; grad NULL when not trainable), and
 * its shape (returns ndim and fills shape[ATTN_PARAM_MAX_DIMS]). Out of range:
 * NULL, or -1 for the shape. */
int attn_h_param_count(const attn_param_list *l);
const char *attn_h_param_name(const attn_param_list *l, int i);
float *attn_h_param_data(const attn_param_list *l, int i);
float *attn_h_param_grad(const attn_param_list *l, int i);
int attn_h_param_shape(const attn_param_list *l, int i, int64_t *shape);

/* --------------------------------------------------------------- modules */

/* attn_module_create for the kind named as attn_module_kind_parse takes it
 * ("mha", "causal-attention", ...; unknown: ATTN_ERR_INVALID_ARG listing the
 * names). rng draws the weights as torch.manual_seed + the constructor (NULL:
 * zeros). Free with attn_module_free. */
attn_status attn_h_module_create(const char *kind, int d_in, int d_out, int num_heads,
                                 int context_length, double dropout, int qkv_bias, attn_rng *rng,
                                 attn_module **out, attn_error *err);
/* deprecated: use attn_h_module_create; removed after 0.2 */
ATTN_DEPRECATED("use attn_h_module_create")
static inline attn_status attn_h_module_new(const char *kind, int d_in, int d_out, int num_heads,
                                            int context_length, double dropout, int qkv_bias,
                                            attn_rng *rng, attn_module **out, attn_error *err) {
    return attn_h_module_create(kind, d_in, d_out, num_heads, context_length, dropout, qkv_bias,
                                rng, out, err);
}

/* attn_module_forward in one of three modes:
 *   training == 0: eval (no dropout);
 *   training, keep == NULL: dropout drawn from rng in stream (attn/rng.h);
 *   training, keep != NULL: the masks given, n_keep bytes (1 = kept) in the
 *     order the forward applies its dropouts (attn_dropout_given; attn.torch
 *     draws them with PyTorch's generator); they must be exactly what the
 *     forward takes (attn_h_module_mask_numel), else ATTN_ERR_SHAPE. */
attn_status attn_h_module_forward(attn_module *m, const float *x, int B, int T, float *y,
                                  int training, attn_rng *rng, int stream, const uint8_t *keep,
                                  size_t n_keep, attn_error *err);

/* The mask elements a training forward of m on (B, T) takes (0 without
 * dropout): the sum over its dropouts, in the order it applies them —
 *   causal-attention, attention-head: (B, T, T)
 *   mha-wrapper: num_heads x (B, T, T), head by head
 *   mha: (B, num_heads, T, T)
 *   seed004-mha: num_heads x (B, T, T), then the output (B, T, d_in). */
size_t attn_h_module_mask_numel(const attn_module *m, int B, int T);

/* The backward rule (every attn backward; docs/library.md#conventions):
 * it adds (+=) into dx and into the parameter gradients, never overwrites;
 * the caller zeroes them first. */

/* attn_module_backward for the last forward, whose (B, T) these are: adds
 * (+=) into every parameter gradient and into dx (B, T, d_in; NULL: not
 * wanted), as every backward does; the caller zeroes them first. */
attn_status attn_h_module_backward(attn_module *m, const float *x, int B, int T, const float *dy,
                                   float *dx, attn_error *err);

/* ------------------------------------------- fused causal attention (SDPA) */

/* The fused kernel (attn/flash_attention.h) on PyTorch's layout: q, k, v
 * (B, H, T, D) contiguous -> o (B, H, T, D) and lse (B, H, T) for the
 * backward. Causal, softmax(q k^T * scale) with scale <= 0 meaning
 * 1 / sqrt(D) (another scale costs a scaled copy of q). p > 0 applies
 * dropout with keep_bits, the (B, H, T, T) mask packed LSB first in flat
 * order. precision: ATTN_PRECISION_FP32 or _BF16 (attn/engine.h; fails on a
 * CPU without AVX512-BF16). threads <= 0: attn_default_threads(). */
attn_status attn_h_sdpa_forward(int B, int H, int T, int D, const float *q, const float *k,
                                const float *v, float scale, double p, const uint8_t *keep_bits,
                                int precision, int threads, float *o, float *lse, attn_error *err);

/* Gradients of the forward above (same q, k, v, o, lse, scale, p, mask):
 * d_o (B, H, T, D) -> dq, dk, dv (B, H, T, D), accumulated (+=) as by every
 * backward: the caller zeroes them first. */
attn_status attn_h_sdpa_backward(int B, int H, int T, int D, const float *q, const float *k,
                                 const float *v, const float *o, const float *lse, float scale,
                                 double p, const uint8_t *keep_bits, int precision, int threads,
                                 const float *d_o, float *dq, float *dk, float *dv,
                                 attn_error *err);

/* ------------------------------------------------------------------- GPT */

typedef struct attn_h_gpt attn_h_gpt;

/* attn_gpt_load_checkpoint (a run folder or a model .safetensors file). */
attn_status attn_h_gpt_load(const char *path, attn_h_gpt **out, attn_error *err);
/* Any weights file attn reads (attn/weights_format.h: HF, llm.c, the book's
 * .pth, with GPT-2's tokenizer); n_heads 0: as the file says or GPT-2's by
 * width. */
attn_status attn_h_gpt_load_weights(const char *path, int n_heads, attn_h_gpt **out,
                                    attn_error *err);
void attn_h_gpt_free(attn_h_gpt *g);

/* {"config": {the book's keys}, "tokenizer": "char" or "gpt2", "vocabulary":
 *  "chars in id order" (char only), "step": N, "n_params": N} (malloc'd;
 *  attn_h_free), NULL when out of memory. */
char *attn_h_gpt_info_json(const attn_h_gpt *g);

/* The model's tokenizer (either kind) on n bytes of text: ids (room for
 * cap; n + 1 always suffices) and *n_ids; allow_special as
 * attn_tokenizer_encode_ex. */
attn_status attn_h_gpt_encode(const attn_h_gpt *g, const char *text, size_t n, int allow_special,
                              int64_t *ids, size_t cap, size_t *n_ids, attn_error *err);

/* The bytes of n ids into out (room for cap bytes; out NULL: only the
 * length) and *len. gpt2 bytes may be invalid UTF-8 (a cut character). */
attn_status attn_h_gpt_decode(const attn_h_gpt *g, const int64_t *ids, size_t n, char *out,
                              size_t cap, size_t *len, attn_error *err);

/* The parameters (state_dict names, the book's order); borrowed. */
const attn_param_list *attn_h_gpt_params(const attn_h_gpt *g);

/* Write g's weights to path (the caller checked it) with the n_meta
 * metadata entries given (format, config, step) and its tokenizer's
 * (attn_ckpt_tokenizer_meta: the characters, or GPT-2's two files). */
attn_status attn_h_gpt_write(const attn_h_gpt *g, const char *path, const attn_st_kv *meta,
                             int n_meta, attn_error *err);

/* Eval-mode forward of ids (B, T): logits (B, T, V) when logits != NULL;
 * with targets (may be NULL) the mean cross-entropy into *loss. */
attn_status attn_h_gpt_forward(attn_h_gpt *g, const int64_t *ids, const int64_t *targets, int B,
                               int T, float *logits, float *loss, attn_error *err);

/* The attention weights of one sequence ids (T): weights (n_layers, n_heads,
 * T, T), the causal softmax of each head before dropout
 * (attn_gpt_attention_weights after an eval-mode forward). */
attn_status attn_h_gpt_attention(attn_h_gpt *g, const int64_t *ids, int T, float *weights,
                                 attn_error *err);

/* A classifier run's (attn train --task classify) label and probabilities
 * of one text (n bytes), as `attn classify RUN TEXT` computes them: the
 * text encoded, cut and padded to the run's length (attn_class_text_row),
 * the last position's logits, their softmax (attn_class_softmax) into
 * probs (n_probs: the run's classes). A model that is not a classifier:
 * ATTN_ERR_INVALID_ARG saying so. A classifier's forward with logits or
 * targets and its generator are refused the same way (no language head). */
attn_status attn_h_gpt_classify(attn_h_gpt *g, const char *text, size_t n, int *label,
                                double *probs, int n_probs, attn_error *err);

/* A text generator over g as `attn generate` runs it (attn/generate.h): the
 * sampler's options, stop (NULL or "": none) and window (0: context_length /
 * 2). g must outlive it. Then attn_generator_prompt and attn_generator_next
 * (generate.h) drive it; attn_h_generator_stopped says when the stop text
 * came. */
attn_status attn_h_generator_create(const attn_h_gpt *g, double temperature, int top_k,
                                    double top_p, uint64_t seed, const char *stop, int window,
                                    attn_generator **out, attn_error *err);
/* The same with a precision (attn_precision): ATTN_PRECISION_BF16 steps on
 * bf16 copies of g's weight matrices with fp32 sums, on any CPU (`attn
 * generate --precision bf16`); the copies are the generator's, g keeps its
 * fp32 weights. */
attn_status attn_h_generator_create_precision(const attn_h_gpt *g, double temperature, int top_k,
                                              double top_p, uint64_t seed, const char *stop,
                                              int window, int precision, attn_generator **out,
                                              attn_error *err);
int attn_h_generator_stopped(const attn_generator *gen);
/* attn_generator_next_token for a caller without C pointers to pointers:
 * the token's bytes are copied into out (room for cap; a token has at
 * most a few hundred) and their count into *len. */
attn_status attn_h_generator_next(attn_generator *gen, int32_t *id, char *out, size_t cap,
                                  size_t *len, attn_error *err);
void attn_h_generator_free(attn_generator *gen);
/* deprecated: use attn_h_generator_create; removed after 0.2 */
ATTN_DEPRECATED("use attn_h_generator_create")
static inline attn_status attn_h_generator_new(const attn_h_gpt *g, double temperature, int top_k,
                                               double top_p, uint64_t seed, const char *stop,
                                               int window, attn_generator **out, attn_error *err) {
    return attn_h_generator_create(g, temperature, top_k, top_p, seed, stop, window, out, err);
}

/* `attn viz`'s page (attn/viz.h) of prompt (n bytes of UTF-8) plus generate
 * sampled characters: *html (malloc'd, attn_h_free) and its length. source
 * names the model in the page (may be NULL). */
attn_status attn_h_viz_html(attn_h_gpt *g, const char *prompt, size_t n, int generate,
                            double temperature, int top_k, uint64_t seed, const char *source,
                            char **html, size_t *len, attn_error *err);

/* ------------------------------------------- GPT on the caller's weights */

/* The book's GPTModel whose parameters and gradients live in the caller's
 * arrays (attn.torch.GPTModel: the torch tensors' storage), so nothing is
 * copied per call. */
typedef struct attn_h_bgpt attn_h_bgpt;

/* A model of config_json (the book's keys, as attn_gpt_config_set_json
 * reads them; every key given) with zeroed weights of its own until
 * attn_h_bgpt_bind. attn_h_bgpt_params lists its parameters (state_dict
 * names and shapes, the book's order, no mask buffers). */
attn_status attn_h_bgpt_create(const char *config_json, attn_h_bgpt **out, attn_error *err);
/* The same model with a head of its own and adapters (attn/gpt_family.h's
 * attn_gpt_build): head_width 0 the language model's head, else
 * Linear(emb_dim, head_width, bias=head_bias) (chapter 6's classifier);
 * n_lora adapters, Linear lora_linear[i] ("trf_blocks.0.att.W_query.",
 * "out_head.") carrying one of rank lora_rank[i] and alpha lora_alpha[i]
 * (attn/lora.h: y += alpha (x A) B). */
attn_status attn_h_bgpt_create_built(const char *config_json, int head_width, int head_bias,
                                     int n_lora, const char *const *lora_linear,
                                     const int *lora_rank, const float *lora_alpha,
                                     attn_h_bgpt **out, attn_error *err);
void attn_h_bgpt_free(attn_h_bgpt *g);
/* Which parameters train: trainable[i] (n bytes, the parameter count) for
 * parameter i. A frozen one gets no gradient (its bound grad is not
 * written) and the backward stops below the lowest trainable one
 * (attn_gpt_backward_stop). Every parameter trains until this is called. */
attn_status attn_h_bgpt_set_trainable(attn_h_bgpt *g, const uint8_t *trainable, int n,
                                      attn_error *err);
const attn_param_list *attn_h_bgpt_params(const attn_h_bgpt *g);

/* ATTN_PRECISION_FP32 (0) or _BF16 (1) products (attn_gpt_set_precision:
 * fails with a message on a CPU without AVX512-BF16). */
attn_status attn_h_bgpt_set_precision(attn_h_bgpt *g, int precision, attn_error *err);

/* Parameter i's data is data[i] (n = the parameter count; float32,
 * contiguous, its shape), its gradient grad[i] (grad NULL or grad[i] NULL:
 * the model's own buffer). The arrays must outlive every call that uses
 * them; call it again when they move. */
attn_status attn_h_bgpt_bind(attn_h_bgpt *g, float *const *data, float *const *grad, int n,
                             attn_error *err);

/* Mask bytes a training forward of (B, T) takes: drop_emb (B, T, C), then
 * per block the attention weights' (B, n_heads, T, T) and drop_shortcut's
 * two (B, T, C), in the order the book's forward draws them (0 when
 * drop_rate is 0). */
size_t attn_h_bgpt_mask_numel(const attn_h_bgpt *g, int B, int T);

/* One forward of ids (B, T) int64; training != 0 applies dropout with the
 * masks keep (n_keep bytes, 1 = kept: attn_h_bgpt_mask_numel of them).
 *   logits != NULL: logits (B, T, V) written there (plain activations, kept
 *     for attn_h_bgpt_backward_logits); with targets also the loss.
 *   logits == NULL: the head + cross-entropy in C, the mean loss into
 *     *loss; grads != 0 also runs the backward, adding (+=) d(loss)/d(param)
 *     into the bound gradients. The (B, T, V) logits and their gradient
 *     stay in C up to 512 MiB for the two; past that the lean activations
 *     run the head in 128-row chunks and hold no (B, T, V) tensor. */
attn_status attn_h_bgpt_forward(attn_h_bgpt *g, const int64_t *ids, const int64_t *targets, int B,
                                int T, int training, const uint8_t *keep, size_t n_keep, int grads,
                                float *logits, float *loss, attn_error *err);

/* attn_h_bgpt_forward in training mode with the dropout masks drawn in C
 * from PyTorch's CPU generator: torch_state is torch.get_rng_state()'s
 * bytes (ATTN_TORCH_RNG_STATE_BYTES), advanced in place as the book's
 * forward would advance it (nn.Dropout's bernoulli_ on a non-MKL build,
 * attn_rng.h's torch-cpu stream): the same masks as the keep bytes a
 * caller would draw with torch, without drawing them. */
attn_status attn_h_bgpt_forward_drawn(attn_h_bgpt *g, const int64_t *ids, const int64_t *targets,
                                      int B, int T, uint8_t *torch_state, size_t state_len,
                                      int grads, float *logits, float *loss, attn_error *err);

/* Tensor.bernoulli_(keep) on n bytes from that state (advanced in place),
 * out[i] = 1 kept: the draw attn_h_bgpt_forward_drawn makes, for a caller
 * to check against torch's own on its build. */
attn_status attn_h_torch_bernoulli(uint8_t *torch_state, size_t state_len, double keep,
                                   uint8_t *out, size_t n, attn_error *err);

/* The loss path's activations: lean 1 always lean, 0 always plain, -1
 * (the default) by the 512 MiB rule above. */
void attn_h_bgpt_set_lean(attn_h_bgpt *g, int lean);

/* d_logits (B, T, V) of the last logits forward of (B, T) -> adds (+=)
 * into the bound gradients. */
attn_status attn_h_bgpt_backward_logits(attn_h_bgpt *g, const float *d_logits, int B, int T,
                                        attn_error *err);

/* The book's forward(ids, use_cache=True) (ch04/03) on a KV cache of the
 * model's own (attn_gpt_kv_feed_batch, eval mode, fp32 products at any
 * precision): ids (B, T) int64 at positions attn_h_bgpt_kv_len(g)..,
 * logits (B, T, V) of each. The cache is made at the first call and for
 * another B while empty; a B other than a filled cache's (ATTN_ERR_SHAPE)
 * or tokens past context_length (ATTN_ERR_STATE) fail before anything is
 * fed. Each token reads the bound weights as they are then (bind first). */
attn_status attn_h_bgpt_kv_forward(attn_h_bgpt *g, const int64_t *ids, int B, int T, float *logits,
                                   attn_error *err);
/* Empty the cache (the book's reset_kv_cache); its memory is kept. */
void attn_h_bgpt_kv_reset(attn_h_bgpt *g);
/* Tokens the cache holds per sequence (the book's current_pos). */
int attn_h_bgpt_kv_len(const attn_h_bgpt *g);

/* -------------------------------------------------------------- training */

/* Called on every step (event 0: a = the step's loss, b = its learning rate,
 * c = tokens/s so far) and evaluation (event 1: a = train loss, b = val
 * loss) with the steps done and max_steps. A nonzero return stops the run
 * after this step; it then saves as Ctrl-C saves `attn train`. */
typedef int (*attn_h_train_callback)(void *user, int event, int64_t step, int64_t max_steps,
                                     double a, double b, double c);

/* `attn train` in one process: preset, config (a JSON file path), data, out,
 * init_from: as the options of the same names (NULL: not given); keys_json
 * (NULL or a JSON object) sets training keys as their options do
 * ({"max_steps": 20, "learning_rate": 1e-3}; attn_train_key_find's names);
 * resume / force as --resume / --force. The folder is locked for the run
 * (attn/runlock.h) and checkpoints are written as attn train writes them.
 * On return *step is the step reached, *stopped 1 when the callback stopped
 * it, out_abs (ATTN_TRAIN_PATH_MAX bytes, may be NULL) the run folder's
 * absolute path. *request_error (may be NULL) tells a bad request (1) from a
 * failure of a file or the run (0). */
attn_status attn_h_train(const char *preset, const char *config, const char *data, const char *out,
                         const char *init_from, const char *keys_json, int resume, int force,
                         attn_h_train_callback cb, void *user, int64_t *step, int *stopped,
                         char *out_abs, int *request_error, attn_error *err);

/* What a fine-tuning run reports (attn/finetune.h's events), with its
 * epoch (1-based), step (0-based), two numbers a, b and a text (NULL but
 * for SAMPLE):
 *   STEP       after every step: a = its training loss, b = the learning
 *              rate (epoch 0: not told)
 *   EVAL       every eval_interval steps: a, b = train and val loss
 *   ACCURACY   classify, after an epoch: a, b = train and val accuracy
 *   INITIAL    instruct, before training: a, b = the "Initial losses"
 *   FINAL      classify, at the end: a, b = the whole sets' accuracies
 *   TRUNCATED  classify, before training: a, b = train and val texts cut
 *              (step = the padded length)
 *   SAMPLE     instruct, after an epoch trained: text = the script's printed
 *              sample (attn_instruct_sample; a, b NaN). */
enum {
    ATTN_H_FT_STEP = 0,
    ATTN_H_FT_EVAL = 1,
    ATTN_H_FT_ACCURACY = 2,
    ATTN_H_FT_INITIAL = 3,
    ATTN_H_FT_FINAL = 4,
    ATTN_H_FT_TRUNCATED = 5,
    ATTN_H_FT_SAMPLE = 6
};
typedef void (*attn_h_finetune_callback)(void *user, int event, int epoch, int64_t step, double a,
                                         double b, const char *text);

/* `attn train --task classify|instruct` in one process (docs/finetuning.md):
 * task "classify" or "instruct"; init_from, data, val (classify only; may
 * be NULL), out (a new or empty folder; with the key resume 1, a run's
 * folder to continue) as the options of the same names;
 * keys_json (NULL or a JSON object) sets what the options set: attn
 * train's batch_size, learning_rate, beta1, beta2, eps, weight_decay,
 * eval_interval, eval_iters, seed, and epochs, trainable ("all",
 * "last-block", "head"), lora_rank, lora_alpha, n_heads, precision
 * ("fp32", "bf16"), instruct's limit and mask_prompt; the same defaults.
 * The run folder is the program's (attn/finetune_run.h): its checkpoints,
 * RUN/model.safetensors, RUN/log.csv and instruct's RUN/responses.json,
 * byte for byte. *steps: the steps run; *request_error (may be NULL) tells
 * a bad request (1) from a failure of a file or the run (0). */
attn_status attn_h_finetune(const char *task, const char *init_from, const char *data,
                            const char *val, const char *out, const char *keys_json,
                            attn_h_finetune_callback cb, void *user, int64_t *steps,
                            int *request_error, attn_error *err);

/* ------------------------------------------------------------------ misc */

/* The threads attn's calls use: OMP_NUM_THREADS (which the kernels read,
 * attn_default_threads) and omp_set_num_threads when threads > 0, as the attn
 * program sets them; and OpenBLAS's own thread
 * count when blas_threads > 0: 1 makes attn's products run as the attn
 * program runs them, split over the OpenMP threads (attn/gemm.h).
 * Process-wide (on Debian numpy and torch share this OpenBLAS). */
void attn_h_set_threads(int threads, int blas_threads);
/* The OpenMP threads a parallel region gets now. */
int attn_h_get_threads(void);

#ifdef __cplusplus
}
#endif
#endif
