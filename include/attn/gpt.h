/* attn/gpt.h — the book's chapter-4 GPTModel (char-level GPT, seed 004), and
 * its variants (config keys norm, act, tie_weights, pos_emb; below).
 *
 * Shapes: ids/targets (B, T) token ids, T <= context_length; C = emb_dim,
 * V = vocab_size, H = n_heads, head_dim = C / H.
 *
 *   x = tok_emb[ids] + pos_emb[0..T-1]            (B, T, C)
 *   x = dropout(x)                                (drop_emb)
 *   n_layers x TransformerBlock (pre-LayerNorm):
 *     x = x + dropout(att(norm1(x)))              att = attn_mha (multi_head_attention.h)
 *     x = x + dropout(ff(norm2(x)))               ff = Linear(C,4C), GELU(tanh), Linear(4C,C)
 *   logits = out_head(final_norm(x))              (B, T, V), out_head has no bias
 * (V here and below is the head's width, vocab_size for the book's model; a
 * family may build another, attn/gpt_family.h: targets are then in [0, width).)
 * The block is written once (src/model/gpt_block.c): the training forward, its
 * backward and the KV-cached step (attn_gpt_kv_step) all run it.
 *   loss = mean over B*T of cross_entropy(logits, targets), positions whose
 *          target is ATTN_IGNORE_INDEX (-100) left out (attn/cross_entropy.h)
 *
 * LayerNorm: eps 1e-5, biased variance, parameters "scale" and "shift".
 * Dropout (training only) is drawn from mode->rng in the order PyTorch's
 * forward draws it: drop_emb, then per block: the attention-weight dropout
 * inside att, drop_shortcut after att, drop_shortcut after ff. So a model in
 * training mode with the same seed and stream drops what the book's model
 * drops.
 *
 * Parameters are named exactly as the book's GPTModel.state_dict() (minus the
 * non-trainable "trf_blocks.<i>.att.mask" buffers) and listed in its order:
 *   tok_emb.weight (V, C), pos_emb.weight (context_length, C),
 *   trf_blocks.<i>.att.W_query.weight (C, C), .W_key.weight, .W_value.weight
 *     (+ .bias each when qkv_bias), .att.out_proj.weight (C, C), .out_proj.bias (C),
 *   trf_blocks.<i>.ff.layers.0.weight (4C, C), .ff.layers.0.bias (4C),
 *   trf_blocks.<i>.ff.layers.2.weight (C, 4C), .ff.layers.2.bias (C),
 *   trf_blocks.<i>.norm1.scale (C), .norm1.shift, .norm2.scale, .norm2.shift,
 *   final_norm.scale (C), final_norm.shift (C), out_head.weight (V, C).
 *
 * Initialisation with rng != NULL (config key "init"):
 *   book  reproduces torch.manual_seed(S) followed by the book's
 *         GPTModel(cfg) constructor: tok_emb and pos_emb ~ normal_(0, 1)
 *         (attn_rng_normal), then per block att (W_query, W_key, W_value,
 *         out_proj), ff.layers.0, ff.layers.2 as nn.Linear, LayerNorms
 *         ones/zeros, then out_head. (normal_ may differ from PyTorch's by
 *         an ulp: PyTorch uses SIMD log/sin.)
 *   gpt2  GPT-2's, as llm.c (gpt2_build_from_random), nanoGPT and Hugging
 *         Face (GPT2PreTrainedModel._init_weights) draw it: every matrix
 *         ~ normal_(0, 0.02) (tok_emb, pos_emb, W_query, W_key, W_value,
 *         ff.layers.0, an untied out_head), the two projections back into
 *         the residual stream (att.out_proj, ff.layers.2) ~ normal_(0,
 *         0.02 / sqrt(2 n_layers)); biases and shifts 0, scales 1. One
 *         normal_ per matrix, in the parameter list's order (a tied head
 *         is tok_emb's draw). python/attn/variants.py's gpt_model draws
 *         the same numbers after torch.manual_seed(S).
 *   A tied model (tie_weights) is always drawn gpt2: the book's N(0, 1)
 *   token embedding as the output head starts a 768-wide model at a loss
 *   near 520 instead of ln(vocab_size) (attn_gpt_config_init_kind).
 *
 * Variants (config keys after qkv_bias; every default is the book's model,
 * and python/attn/variants.py is the PyTorch model of each, same names and
 * draw order):
 *   norm rmsnorm   norm1, norm2, final_norm are RMSNorm (layernorm.h): only
 *                  ".scale" each, no ".shift".
 *   act relu2      ff is Linear(C,4C), ReLU^2, Linear(4C,C).
 *   act swiglu     ff is Linear(C,2H), SwiGLU, Linear(H,C), H = 8 ceil(C/3)
 *                  (feedforward.h): ff.layers.0.weight (2H, C), rows [gate | value].
 *   tie_weights    out_head.weight is tok_emb.weight (one matrix; both
 *                  backward passes accumulate into its gradient); the list
 *                  and the checkpoint hold it once, as tok_emb.weight (as
 *                  PyTorch's named_parameters() of a tied model); out_head
 *                  is still drawn at init, then dropped, as PyTorch's
 *                  `out_head.weight = tok_emb.weight` after the constructor.
 *   pos_emb none   no pos_emb table: x = tok_emb[ids]; the causal mask is
 *                  the only position signal.
 *   The attention keys are attn/attention.h's spec (attn_gpt_attention_spec):
 *   pos_emb rope   no pos_emb table; q and k rotated (theta 10000, all of
 *                  head_dim) in each block.
 *   pos_emb alibi  no pos_emb table; ALiBi slopes bias the scores.
 *   n_kv_heads K   W_key, W_value are (K head_dim, C); query head h reads
 *                  kv head h / (n_heads / K); the KV cache is K head_dim wide.
 *   window W       a query sees its last W keys; the KV cache keeps
 *                  min(W, context_length) rows as a ring, so generation
 *                  without learned positions runs past context_length.
 *   qk_norm        RMSNorm(head_dim) on each head's q and k:
 *                  trf_blocks.<i>.att.q_norm.scale, .att.k_norm.scale
 *                  (after out_proj's).
 *   softcap c      scores c tanh(s / c) before the mask.
 *   Every key runs on MultiHeadAttention's fused path (fp32 and bf16), the
 *   reference path and the KV step; the CUDA engine refuses them by name.
 *
 * Threading: the large products go through CBLAS (OpenBLAS threads); the
 * element-wise layers use OpenMP. Nothing allocates inside forward/backward. */
#ifndef ATTN_GPT_H
#define ATTN_GPT_H

#include <stddef.h>
#include <stdint.h>

#include "attn/attention.h"
#include "attn/causal_attention.h"
#include "attn/dropout.h"
#include "attn/embedding.h"
#include "attn/engine.h"
#include "attn/engine_ops.h"
#include "attn/feedforward.h"
#include "attn/layernorm.h"
#include "attn/linear.h"
#include "attn/multi_head_attention.h"
#include "attn/param.h"
#include "attn/rng.h"
#include "attn/status.h"

#ifdef __cplusplus
extern "C" {
#endif

struct cJSON; /* <cjson/cJSON.h>; only needed by attn_gpt_config_set_json */

/* ---------------------------------------------------------------- config */

/* Where positions come from (config key "pos_emb"). */
typedef enum attn_pos_emb {
    ATTN_POS_LEARNED = 0, /* the book's pos_emb table, added to tok_emb */
    ATTN_POS_ROPE,        /* rotary q/k (attn/attention.h) */
    ATTN_POS_ALIBI,       /* linear score biases (attn/attention.h) */
    ATTN_POS_NONE         /* no position input at all (the causal mask alone) */
} attn_pos_emb;

/* How fresh weights are drawn (config key "init"; "Initialisation" above). */
typedef enum attn_gpt_init_kind {
    ATTN_GPT_INIT_BOOK = 0, /* the book's GPTModel constructor (torch.manual_seed's numbers) */
    ATTN_GPT_INIT_GPT2      /* GPT-2's: N(0, 0.02), residual projections / sqrt(2 n_layers) */
} attn_gpt_init_kind;

/* The book's GPT_CONFIG keys, then the variant keys. Every variant field is
 * 0 for the book's GPTModel, so a zeroed struct, a preset and a checkpoint
 * written before the keys existed are all the book's model. */
typedef struct attn_gpt_config {
    int vocab_size;     /* seed 004: vocabulary_size */
    int context_length; /* seed 004: context_size    */
    int emb_dim;        /* seed 004: embedding_dim   */
    int n_heads;        /* seed 004: heads_num       */
    int n_layers;       /* seed 004: layers_num      */
    double drop_rate;   /* seed 004: dropout_rate    */
    int qkv_bias;       /* seed 004: use_bias (bool) */
    attn_pos_emb pos_emb;
    int n_kv_heads;          /* key/value heads (grouped-query attention); 0: n_heads */
    int window;              /* sliding attention window in tokens; 0: the whole context */
    attn_norm_kind norm;     /* layernorm (the book's) | rmsnorm (layernorm.h) */
    attn_act act;            /* gelu (the book's) | relu2 | swiglu (activation.h) */
    int qk_norm;             /* bool: RMSNorm on each head's queries and keys */
    double softcap;          /* attention scores c tanh(s / c); 0: off */
    int tie_weights;         /* bool: out_head.weight is tok_emb.weight */
    attn_gpt_init_kind init; /* how attn_gpt_init draws fresh weights (above) */
} attn_gpt_config;

/* The draw attn_gpt_init makes: cfg->init, except that a tied model is
 * always ATTN_GPT_INIT_GPT2 (see "Initialisation" above). What attn info,
 * the dry run and the saved config show as "init". */
attn_gpt_init_kind attn_gpt_config_init_kind(const attn_gpt_config *cfg);

/* Presets ("train" owns the training hyper-parameters that go with them):
 *   "seed004"          V 65, ctx 256, C 768, 12 heads, 10 layers, drop 0.1, no bias
 *   "shakespeare-char" V 65, ctx 256, C 384,  6 heads,  6 layers, drop 0.2, no bias
 *   "nanogpt-cpu"      V 65, ctx  64, C 128,  4 heads,  4 layers, drop 0.0, no bias
 *   "tiny"             V 65, ctx  64, C 128,  4 heads,  3 layers, drop 0.0, no bias
 *   "speedrun"         tiny's width, 4 layers, ctx 256, rmsnorm, swiglu
 *   "gpt2-124m", "gpt2-medium", "gpt2-large", "gpt2-xl"  GPT-2: V 50257, ctx
 *                      1024, qkv_bias, tie_weights, init gpt2, drop 0.1
 *   "book-ch05"        the book's GPT_CONFIG_124M at ctx 256 (no bias, untied,
 *                      init book)
 * vocab_size 65 is Tiny Shakespeare's; the caller overrides it with the
 * tokenizer's size. Unknown name -> ATTN_ERR_NOT_FOUND naming the known ones. */
attn_status attn_gpt_config_preset(const char *name, attn_gpt_config *cfg, attn_error *err);

/* NULL-terminated list of preset names, in the order above. */
const char *const *attn_gpt_preset_names(void);

/* Checks every field: dims >= 1, emb_dim % n_heads == 0 ("emb_dim 770 is not
 * divisible by n_heads 12"), drop_rate in [0, 1), qkv_bias 0/1, each variant
 * key in its range (n_kv_heads divides n_heads). */
attn_status attn_gpt_config_validate(const attn_gpt_config *cfg, attn_error *err);

/* The book's GPTModel's parameter count for cfg, from the config alone
 * (nothing allocated; a double: a config past validate's limits may hold
 * more than size_t counts exactly). */
double attn_gpt_config_params(const attn_gpt_config *cfg);

/* Bytes a model of cfg needs, from the config alone: the fp32 weights, and
 * for a run of `tokens` tokens (batch_size * context_length; 0 = none) what
 * it keeps: training (train != 0) gradients, AdamW moments and the
 * activations kept for backward (the head lean from ATTN_GPT_LEAN_VOCAB);
 * else the KV cache and the logits. attn_memory_plan's count
 * (attn/memory_plan.h, defined beside it) less the process's own; that
 * function takes the rest of a run (precision, threads, data). Compare it
 * with a budget (attn/membudget.h) before creating the model. */
double attn_gpt_config_memory(const attn_gpt_config *cfg, double tokens, int train);

/* The attention of each block of cfg (attn/attention.h): causal, n_heads,
 * n_kv_heads, window, pos_emb rope/alibi, qk_norm, softcap, drop_rate. */
attn_attention_spec attn_gpt_attention_spec(const attn_gpt_config *cfg);

/* The model keys of a JSON config, one row each in attn_gpt_config's order,
 * then seed 004's derived head_size: the book's name, seed 004's, the type
 * and the valid range (attn_gpt_config_validate's limits) or choices. Rows
 * from ATTN_GPT_KEY_VARIANT0 on (up to tie_weights) are the variant keys;
 * their defaults are the book's GPTModel. Then "init" (ATTN_GPT_KEY_INIT):
 * how fresh weights are drawn, not a part of the model's computation. */
typedef enum attn_gpt_key_type {
    ATTN_GPT_KEY_INT,
    ATTN_GPT_KEY_NUMBER,
    ATTN_GPT_KEY_BOOL,
    ATTN_GPT_KEY_CHOICE /* a string of choices; the field holds its index */
} attn_gpt_key_type;

typedef struct attn_gpt_key {
    const char *name;  /* "n_layers" */
    const char *alias; /* seed 004's "layers_num", or NULL */
    attn_gpt_key_type type;
    double lo, hi; /* [lo, hi], or [lo, hi) with hi_open; BOOL: 0 or 1 */
    int hi_open;
    const char *const *choices; /* CHOICE: NULL-terminated, index = field value */
    const char *help;           /* one line: what the key changes */
} attn_gpt_key;

#define ATTN_GPT_KEY_COUNT 17
#define ATTN_GPT_KEY_VARIANT0 7 /* pos_emb: the first variant key */
#define ATTN_GPT_KEY_VARIANTS 8 /* pos_emb ... tie_weights */
#define ATTN_GPT_KEY_INIT 15    /* "init": book | gpt2 */

/* Row i (0 <= i < ATTN_GPT_KEY_COUNT); NULL outside. */
const attn_gpt_key *attn_gpt_key_at(int i);

/* The row index of a key by either name; -1 when unknown. */
int attn_gpt_key_find(const char *name);

/* "an integer in [1, 4096]", "a number in [0, 1)", "true or false",
 * "one of learned, rope, alibi, none". */
void attn_gpt_key_describe(const attn_gpt_key *k, char *buf, size_t cap);

/* Key i's value in cfg as text: "128", "0.1", "true", "rmsnorm"
 * (n_kv_heads 0 reads as n_heads; init as attn_gpt_config_init_kind).
 * head_size: emb_dim / n_heads. */
void attn_gpt_key_value(const attn_gpt_config *cfg, int i, char *buf, size_t cap);

/* 1 when variant key i (ATTN_GPT_KEY_VARIANT0 <= i < + ATTN_GPT_KEY_VARIANTS)
 * has the book's value in cfg (n_kv_heads: 0 or n_heads); 1 for other rows. */
int attn_gpt_key_is_book(const attn_gpt_config *cfg, int i);

/* The first variant key whose value is not the book's, as "norm rmsnorm"
 * in buf; its row index, or -1 (buf "") when cfg is the book's GPTModel. A
 * path that computes only the book's model refuses the rest with it
 * ("norm rmsnorm is not on the cuda engine yet"). */
int attn_gpt_config_first_variant(const attn_gpt_config *cfg, char *buf, size_t cap);

/* cfg with every variant key at the book's value: the book's GPTModel of
 * cfg's sizes (qkv_bias and init as cfg's). */
attn_gpt_config attn_gpt_config_as_book(const attn_gpt_config *cfg);

/* Every variant key with its value, "pos_emb learned, n_kv_heads 4, ...",
 * for attn info and attn train --dry-run; changed_only: those that are not
 * the book's ("" for the book's model). */
void attn_gpt_config_describe_variants(const attn_gpt_config *cfg, int changed_only, char *buf,
                                       size_t cap);

/* Set one key from a cJSON value (number, bool/0/1 for qkv_bias, qk_norm,
 * tie_weights, a string for pos_emb, norm, act and init). Accepts
 * the book's keys and seed 004's aliases, plus seed 004's derived
 * "head_size" (checked against emb_dim / n_heads by
 * attn_gpt_config_set_json). Unknown key -> ATTN_ERR_NOT_FOUND
 * ("unknown config key 'foo'") so a caller with its own extra keys (training
 * hyper-parameters) can try its own table next; a value of the wrong type or
 * outside the key's range -> ATTN_ERR_INVALID_ARG naming the key and the
 * range ("config key 'layers_num' must be an integer in [1, 4096] (got 0)"). */
attn_status attn_gpt_config_set_key(attn_gpt_config *cfg, const char *key,
                                    const struct cJSON *value, attn_error *err);

/* Override cfg's fields with every key of a JSON object text (keys absent
 * from the text keep cfg's values, so start from a preset). Any unknown key
 * is an error naming it; a key given twice under its two names with
 * different values is an error; the result is validated. */
attn_status attn_gpt_config_set_json(attn_gpt_config *cfg, const char *json_text, attn_error *err);

/* Same, reading the file at path (errors name the path). */
attn_status attn_gpt_config_load_json(attn_gpt_config *cfg, const char *path, attn_error *err);

/* The config as a compact JSON object with the book's keys, e.g.
 * {"vocab_size":65,"context_length":64,"emb_dim":128,"n_heads":4,
 *  "n_layers":4,"drop_rate":0,"qkv_bias":false}
 * then only the variant keys that are not the book's ("norm":"rmsnorm"),
 * then "init":"gpt2" when cfg->init is, so the book's model writes exactly
 * what it wrote before the keys existed (for checkpoint metadata), and
 * attn_gpt_config_set_json of the text gives cfg back. *out is malloc'd;
 * the caller frees it. */
attn_status attn_gpt_config_to_json(const attn_gpt_config *cfg, char **out, attn_error *err);

/* ----------------------------------------------------------------- model */

typedef struct attn_gpt_block {
    attn_layernorm norm1;
    attn_mha att; /* d_in = d_out = emb_dim, out_proj with bias */
    attn_layernorm norm2;
    attn_feedforward ff; /* layers.0 Linear(C,4C), GELU, layers.2 Linear(4C,C) (or cfg.act's) */
} attn_gpt_block;

/* Owns its parameter table and the arena behind it (attn/param.h): one
 * aligned block of every value, one of every gradient (zeroed at init); the
 * modules' tensors are views into them. Its family's build function
 * (attn/gpt_family.h) made the modules it uses, the table and the layer
 * list that forward and backward walk. */
typedef struct attn_gpt {
    attn_gpt_config cfg;
    attn_embedding tok_emb; /* (V, C) */
    attn_embedding pos_emb; /* (context_length, C); weight NULL unless pos_emb learned */
    attn_gpt_block *blocks; /* n_layers */
    attn_layernorm final_norm;
    attn_linear out_head;          /* Linear(C, V, bias=False) (or the build's width); tied:
                                      tok_emb's matrix */
    attn_param_list params;        /* the table (state_dict names, book's order) and arena */
    attn_precision precision;      /* of the products (attn_gpt_set_precision); FP32 at init */
    struct attn_bf16_gemm *bf16;   /* engine's bf16 GEMM engine (cpu-bf16's), which every
                                      Linear / MHA carries; NULL otherwise */
    struct attn_gpt_layer *layers; /* the layer list (attn/gpt_family.h), n_list entries */
    int n_list, list_cap;
    attn_lora *adapters; /* owned: the adapters the build attached (n_adapters) */
    int n_adapters, adapters_cap;
    const struct attn_gpt_build *opts; /* the build's options, while it runs (else NULL) */
    attn_engine engine; /* the ops every pass and the trainer's update call (attn/engine_ops.h):
                           the CPU engine of precision (owned) or attn_gpt_set_engine's */
    uint16_t *w_bf16;   /* NULL; else attn_gpt_keep_bf16_weights's: the Linear weights a KV
                           step reads, in bf16, their fp32 originals released */
} attn_gpt;

/* Validates cfg, allocates, initialises (rng != NULL: as torch.manual_seed +
 * GPTModel(cfg); rng == NULL: embeddings/linears zero, LayerNorms ones/zeros,
 * for loading a checkpoint). On failure m is left freed. The book's family
 * (attn/gpt_family.h: attn_gpt_init_family with other builds). */
attn_status attn_gpt_init(attn_gpt *m, const attn_gpt_config *cfg, attn_rng *rng, attn_error *err);
void attn_gpt_free(attn_gpt *m);

/* FP32 (the default, the exact reference) or BF16: every Linear and the
 * attention projections multiply bf16-rounded operands with fp32
 * accumulation (attn/gemm.h), as PyTorch's CPU autocast does; weights,
 * gradients, optimizer state, embeddings, LayerNorm, softmax, the attention
 * kernel and the loss stay fp32, so checkpoints are the same either way.
 * BF16 fails with a clear message on a CPU without AVX512-BF16. */
attn_status attn_gpt_set_precision(attn_gpt *m, attn_precision precision, attn_error *err);

/* Runs m's passes on engine e (attn/engine_ops.h; borrowed: it must outlive
 * its use, and m does not free it): first asks e's supports_op for every op
 * m's layer list calls, at e's precision for the products (linear,
 * attention, feedforward) and fp32 for the rest; on the first refusal
 * returns e's status and message, m as it was. The precision becomes e's.
 * attn_gpt_set_precision hands m the CPU engine of that precision
 * (attn/engine_cpu.h) this way. */
attn_status attn_gpt_set_engine(attn_gpt *m, const attn_engine *e, attn_error *err);

/* Freeze (trainable 0) or unfreeze every parameter whose name starts with
 * prefix ("trf_blocks.0.", "out_head.", "" for all; a tied head is
 * tok_emb.weight). A frozen tensor has no gradient storage (its grad, and
 * its module's gradient field, NULL): every backward skips the products
 * that would compute its gradient, the gradients of the rest are the same
 * bits, and AdamW leaves it as it is. The gradient block is made again
 * (the gradients zeroed), so call it before making an optimizer over the
 * list. NOT_FOUND when no name starts with prefix. */
attn_status attn_gpt_set_trainable(attn_gpt *m, const char *prefix, int trainable, attn_error *err);

/* The parameter list (borrowed; valid until attn_gpt_free). */
const attn_param_list *attn_gpt_params(const attn_gpt *m);
/* Total number of parameter floats (book's count, without the mask buffers). */
size_t attn_gpt_num_params(const attn_gpt *m);
void attn_gpt_zero_grad(attn_gpt *m);
/* The trainer's: zero the gradients for a backward that runs next. On the
 * bf16 engine the weight gradients that backward writes whole are left
 * unset (attn_param_list_zero_grad_deferred) and written, not added to;
 * every backward below settles the rest, so after it each gradient holds
 * its value as after attn_gpt_zero_grad. */
void attn_gpt_zero_grad_deferred(attn_gpt *m);

/* ------------------------------------------------- training forward/backward */

/* Saved activations of one block for one (B, T) shape. */
typedef struct attn_gpt_block_acts {
    float *x_in;                      /* (B,T,C) residual stream entering the block */
    float *ln1, *ln1_mean, *ln1_rstd; /* (B,T,C), (B*T), (B*T) */
    attn_attention_cache att;         /* attn_mha's cache */
    float *att_out;                   /* (B,T,C) att output before drop_shortcut */
    uint8_t *keep1;                   /* (B,T,C) drop_shortcut mask after att */
    float *x_mid;                     /* (B,T,C) residual after the attention half */
    float *ln2, *ln2_mean, *ln2_rstd;
    attn_feedforward_cache ff; /* hidden pre/post activation */
    float *ff_out;             /* (B,T,C) */
    uint8_t *keep2;            /* (B,T,C) drop_shortcut mask after ff */
} attn_gpt_block_acts;

/* Workspace for forward + backward at up to (B_max, T_max); owned by the
 * caller, allocated once (attn_gpt_acts_init), reused every step. A forward
 * of any (B, T) <= (B_max, T_max) runs on it without allocating (the book's
 * collate pads each batch to its own length): it uses the first B*T rows of
 * every buffer, laid out for its own (B, T), so its results are the bits of
 * activations made for exactly (B, T). */
typedef struct attn_gpt_acts {
    int B, T;         /* the last forward's shape (made: B_max, T_max); its
                         backward and its logits (B, T, V) read it */
    int B_max, T_max; /* what the buffers hold */
    int n_layers;
    int32_t *ids;      /* (B,T) copy of the last forward's ids */
    int32_t *targets;  /* (B,T) copy of its targets */
    int has_targets;   /* last forward had targets (backward needs them) */
    int dropout_used;  /* last forward drew dropout masks */
    uint8_t *keep_emb; /* (B,T,C) drop_emb mask */
    attn_gpt_block_acts *blocks;
    float *x_final; /* (B,T,C) residual stream after the last block */
    float *lnf, *lnf_mean, *lnf_rstd;
    /* Lean (attn_gpt_acts_init_lean): the head runs in chunks of 128 rows
     * and no (B,T,V) tensor is kept: logits holds one chunk (not readable
     * after forward) and d_logits is NULL. */
    int lean;
    float *logits;       /* (B,T,V) — read it after forward */
    float *lse;          /* (B*T) log-sum-exp of each logits row */
    float *target_logit; /* (B*T) logits[n, targets[n]] (forward with targets):
                            row n's loss is lse[n] - target_logit[n] */
    float loss;          /* mean cross-entropy of the last forward (NAN if no targets) */
    /* backward scratch */
    float *d_resid, *d_tmp, *d_ln; /* (B,T,C) */
    float *d_hidden;               /* (B,T,attn_feedforward_scratch) */
    float *d_logits;               /* (B,T,V) */
    /* Lean head on the bf16 engine: up to ATTN_GPT_HEAD_DW_ROWS rows of
     * dlogits in bf16 (made at the first such backward), so that each of
     * the head's two backward products is one over them, not one per chunk. */
    uint16_t *d_logits16;
    /* The caller's watch over a long forward (attn_gpt_acts_init leaves it
     * NULL: none): called with the stages done and the forward's stages
     * (its blocks, then the head: one stage, or the lean head's chunks in a
     * forward without gradients) after each but the last; nonzero abandons
     * the forward (ATTN_ERR_STATE; the acts then hold no result). The
     * trainer shows an evaluation's progress and stops it so. */
    int (*poll)(void *user, int done, int stages);
    void *poll_user;
} attn_gpt_acts;

attn_status attn_gpt_acts_init(attn_gpt_acts *acts, const attn_gpt *m, int B, int T,
                               attn_error *err);
void attn_gpt_acts_free(attn_gpt_acts *acts);

/* acts (zeroed, or made by either init for m) ready for a forward of (B, T)
 * (lean: attn_gpt_acts_init_lean's kind): kept when they hold it; else made
 * again for the shape covering both theirs and (B, T) (for (B, T) alone
 * where that would more than double the larger's rows), so that a caller
 * whose batches vary in length settles on one allocation. A shape no
 * forward takes leaves them as they were; out of memory, zeroed. */
attn_status attn_gpt_acts_reserve(attn_gpt_acts *acts, const attn_gpt *m, int B, int T, int lean,
                                  attn_error *err);

/* Whether a model of config c runs ids of (B, T): ATTN_ERR_SHAPE naming the
 * empty dimension (B < 1: an empty batch; T < 1: empty sequences) or T past
 * context_length. attn_gpt_acts_init checks it; callers that look at the
 * ids first check it before them. */
attn_status attn_gpt_check_shape(const attn_gpt_config *c, int B, int T, attn_error *err);

#define ATTN_GPT_HEAD_ROWS 128    /* rows of the lean head's chunks */
#define ATTN_GPT_LEAN_VOCAB 1024  /* the trainer's activations are lean from this vocabulary */
#define ATTN_GPT_HEAD_DW_ROWS 512 /* bf16: rows per head weight-gradient product */

/* Activations for training at a large vocabulary (GPT-2's 50,257: B·T·V
 * floats are hundreds of MB): the output layer and its cross-entropy run
 * in chunks of 128 rows, each chunk's dlogits written over its logits and fed
 * straight into the head's two backward products (llm.c's fused
 * classifier). A forward needs targets and gives the loss, bit for bit the
 * plain path's; attn_gpt_forward_backward runs the step without computing
 * any logits twice (attn_gpt_backward recomputes each chunk's). Gradients
 * match the plain path's to rounding (the head's weight gradient is summed
 * chunk by chunk); both are deterministic and thread-count independent. */
attn_status attn_gpt_acts_init_lean(attn_gpt_acts *acts, const attn_gpt *m, int B, int T,
                                    attn_error *err);

/* logits = model(ids) into acts->logits; with targets != NULL also the mean
 * cross-entropy into *loss (may be NULL) and acts->loss. B <= acts->B_max,
 * T <= acts->T_max and T <= context_length (ATTN_ERR_SHAPE otherwise, naming
 * both shapes); acts->B, T become (B, T). An id
 * outside [0, vocab_size) or a target outside [0, V) (the head's width) and
 * not ATTN_IGNORE_INDEX is ATTN_ERR_INVALID_ARG naming its (b, t) position. mode NULL = eval. */
attn_status attn_gpt_forward(attn_gpt *m, const int32_t *ids, const int32_t *targets, int B, int T,
                             const attn_forward_mode *mode, attn_gpt_acts *acts, float *loss,
                             attn_error *err);
/* Same with int64 ids/targets (e.g. from .npy files). */
attn_status attn_gpt_forward_i64(attn_gpt *m, const int64_t *ids, const int64_t *targets, int B,
                                 int T, const attn_forward_mode *mode, attn_gpt_acts *acts,
                                 float *loss, attn_error *err);

/* The backward rule (every attn backward; docs/library.md#conventions):
 * it adds (+=) into dx and into the parameter gradients, never overwrites;
 * the caller zeroes them first. */

/* d(loss)/d(params) for the last forward (which must have had targets:
 * ATTN_ERR_STATE otherwise). Accumulates (+=) into the parameter grads,
 * scaled by loss_scale (1 for a plain step; 1/k to average k micro-batches).
 * Leaves acts' forward results (logits, loss) intact. */
attn_status attn_gpt_backward(attn_gpt *m, attn_gpt_acts *acts, float loss_scale, attn_error *err);

/* The same from d_logits (B, T, V), the gradient of any loss of the last
 * forward's logits (plain activations; that forward needs no targets):
 * accumulates (+=) into the parameter grads. For a caller whose framework
 * computes its own loss of the logits (attn.torch.GPTModel). */
attn_status attn_gpt_backward_logits(attn_gpt *m, attn_gpt_acts *acts, const float *d_logits,
                                     attn_error *err);

/* attn_gpt_forward (targets required) then attn_gpt_backward(loss_scale):
 * one training micro-step. With lean activations the head's backward runs
 * inside the forward, chunk by chunk, so no (B,T,V) tensor exists. */
attn_status attn_gpt_forward_backward(attn_gpt *m, const int32_t *ids, const int32_t *targets,
                                      int B, int T, const attn_forward_mode *mode,
                                      attn_gpt_acts *acts, float loss_scale, float *loss,
                                      attn_error *err);

/* ------------------------------------------------- incremental generation */

/* KV cache for one sequence (batch 1): per layer keys/values of the tokens
 * seen so far, at positions 0..len-1. Each step costs O(len * C + C^2 + V*C).
 *
 * With the config's window (and no learned table) the cache is a ring of
 * window rows and never fills: generation runs past context_length at
 * constant memory. Otherwise, sliding the context is the caller's job:
 * positions are absolute within the window, so once len == context_length
 * the cache is full and
 * attn_gpt_kv_step fails with ATTN_ERR_STATE. The caller then re-primes with
 * attn_gpt_kv_prefill on the most recent tokens it wants to keep (e.g. the
 * last context_length/2, which keeps each token O(T) amortised; re-priming
 * with context_length - 1 tokens reproduces the book's generate(), which
 * crops idx[:, -context_length:] every step, at O(T^2) per token). */
typedef struct attn_gpt_kv_cache {
    int capacity; /* tokens it takes: context_length; INT_MAX with a window and no learned table */
    int len;      /* tokens cached */
    int C, H, n_layers;
    int rows;    /* rows kept per layer: context_length, or the window (a ring, len % rows) */
    int kv_dim;  /* n_kv_heads * head_dim */
    int threads; /* OpenMP threads a step uses; attn_default_threads() at init */
    int batch;   /* sequences stepped together: 1 (attn_gpt_kv_init), or attn_gpt_kv_init_batch's */
    float *k, *v; /* (n_layers, batch, rows, kv_dim) each */
    /* one-token scratch, a row per sequence */
    float *x, *ln, *q, *att, *proj, *hidden; /* (batch, C) x5, (batch, ff.fc1.out_features) */
    float *scores;                           /* (batch, H, context_length) */
    float *logits;                           /* (batch, V): the last step's logits */
    attn_precision precision;          /* weights a step reads: FP32 (the model's) or BF16 copies */
    uint16_t *w_bf16;                  /* BF16: every Linear weight rounded to bf16 */
    const struct attn_engine_ops *ops; /* the model's engine's table, asked at init */
} attn_gpt_kv_cache;

/* A model whose Linears carry LoRA adapters (attn/lora.h) is refused
 * (ATTN_ERR_INVALID_ARG): the step does not run them. The step runs on the
 * model's engine (attn/engine_ops.h: its step ops), asked for each op
 * before anything is allocated (its refusal is the status); a step on a
 * model whose engine's table changed since is refused (ATTN_ERR_STATE).
 * The logits are the head's width (attn_gpt_head_width). */
attn_status attn_gpt_kv_init(attn_gpt_kv_cache *cache, const attn_gpt *m, attn_error *err);

/* A cache for `batch` sequences (>= 1) decoded together, all at the same
 * position (attn_gpt_kv_step_batch): each weight row a step streams serves
 * batch tokens. Sizes are checked before allocating (ATTN_ERR_NOMEM). */
attn_status attn_gpt_kv_init_batch(attn_gpt_kv_cache *cache, const attn_gpt *m, int batch,
                                   attn_error *err);
void attn_gpt_kv_free(attn_gpt_kv_cache *cache);
void attn_gpt_kv_reset(attn_gpt_kv_cache *cache);

/* Which weights the steps read. ATTN_PRECISION_BF16 rounds a copy of every
 * Linear weight of m to bf16 (half the bytes a token streams; products
 * still sum in fp32, embeddings, LayerNorm, softmax and the KV cache stay
 * fp32); call it again after m's weights change. FP32 (the default) drops
 * the copy. Runs on any CPU: the GEMV widens the bf16 weights to fp32 in
 * registers (AVX-512 or AVX2, the same bits; portable C elsewhere). On a
 * model that keeps only bf16 weights (attn_gpt_keep_bf16_weights) BF16
 * steps on the model's copy (none made) and FP32 is ATTN_ERR_STATE. */
attn_status attn_gpt_kv_set_precision(attn_gpt_kv_cache *cache, const attn_gpt *m,
                                      attn_precision precision, attn_error *err);

/* Generation on bf16 weights without their fp32 originals: rounds every
 * Linear weight a KV step reads to bf16 (attn_linear_bf16_copy: round to
 * nearest even, the same bits attn_gpt_kv_set_precision's copy holds) into
 * m->w_bf16, each block's fp32 weights handed back to the system right after
 * its copy (attn_release_pages), so memory never holds both in full. A tied
 * head keeps its fp32 matrix: it is the embedding the step reads. About
 * 0.6x the fp32 model's bytes at GPT-2 124M (its embedding stays fp32).
 * From then on m generates only: a KV cache at BF16 steps on m->w_bf16 (no
 * copy of its own); whatever would read the fp32 Linear weights (a forward
 * or backward, attention weights, export, a fine-tuning, a KV cache at
 * FP32, the CUDA engine) is refused with ATTN_ERR_STATE
 * (attn_gpt_check_fp32). Refused (nothing changed): LoRA adapters, an
 * engine without bf16 steps, tensors not in m's own arena (a caller's
 * bound storage is never released). Calling it again is a no-op. */
attn_status attn_gpt_keep_bf16_weights(attn_gpt *m, attn_error *err);

/* ATTN_ERR_STATE, naming what, when m keeps only bf16 Linear weights
 * (attn_gpt_keep_bf16_weights); else ATTN_OK. */
attn_status attn_gpt_check_fp32(const attn_gpt *m, const char *what, attn_error *err);

/* Weight elements a step streams: every Linear weight of the blocks and
 * the output head (the bf16 copy holds exactly these); norms, biases and
 * embedding rows add a few KB. Times 4 (fp32) or 2 (bf16): the bytes of
 * weights per token, the memory-bandwidth floor's numerator. */
size_t attn_gpt_kv_weight_numel(const attn_gpt *m);

/* Feed one token at position cache->len (eval mode, no dropout); its logits
 * (V) land in cache->logits and, when logits != NULL, are copied there.
 * Equals row len of the full forward's logits on the same prefix (to a few
 * ulps in fp32: the matrix-vector products sum in their own order). One
 * OpenMP team per step splits the weight rows and the heads. */
attn_status attn_gpt_kv_step(const attn_gpt *m, attn_gpt_kv_cache *cache, int32_t token,
                             float *logits, attn_error *err);

/* Reset, then feed ids[0..n-1] (1 <= n <= context_length); logits of the
 * last token as attn_gpt_kv_step (the output head runs for it alone). */
attn_status attn_gpt_kv_prefill(const attn_gpt *m, attn_gpt_kv_cache *cache, const int32_t *ids,
                                int n, float *logits, attn_error *err);

/* One token for each of the cache's batch sequences (tokens[batch]); their
 * logits land in cache->logits (batch, V) and, when logits != NULL, are
 * copied there. attn_gpt_kv_step and attn_gpt_kv_prefill take a cache of
 * batch 1 only. Sequence s equals a batch-1 cache fed its tokens alone, bit
 * for bit, at any thread count. */
attn_status attn_gpt_kv_step_batch(const attn_gpt *m, attn_gpt_kv_cache *cache,
                                   const int32_t *tokens, float *logits, attn_error *err);

/* Reset, then feed every sequence its n tokens: ids (batch, n) row-major. */
attn_status attn_gpt_kv_prefill_batch(const attn_gpt *m, attn_gpt_kv_cache *cache,
                                      const int32_t *ids, int n, float *logits, attn_error *err);

/* Feed every sequence n more tokens at positions cache->len.. (no reset):
 * ids (batch, n) row-major; logits != NULL gets every position's logits
 * (batch, n, V), NULL runs no output head. Checked before any token is
 * fed (the cache is unchanged on an error): n >= 1 and len + n <= capacity
 * (ATTN_ERR_STATE), every id in [0, vocab_size). Steps with
 * attn_default_threads() as asked at this call (attn_gpt_kv_init's rule).
 * The book's forward(idx, use_cache=True) (ch04/03) on attn's cache. */
attn_status attn_gpt_kv_feed_batch(const attn_gpt *m, attn_gpt_kv_cache *cache, const int32_t *ids,
                                   int n, float *logits, attn_error *err);

/* After attn_gpt_forward(m, ..., acts): layer's attention weights of batch row b
 * (n_heads * T * T floats, T = acts->T). layer outside [0, n_layers) or b
 * outside [0, B) -> ATTN_ERR_INVALID_ARG naming the valid range. As
 * attn_mha_attention_weights (attn/attention_weights.h) of that layer. */
attn_status attn_gpt_attention_weights(const attn_gpt *m, const attn_gpt_acts *acts, int layer,
                                       int b, float *weights, attn_error *err);

#ifdef __cplusplus
}
#endif
#endif
