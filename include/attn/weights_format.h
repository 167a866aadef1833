/* attn/weights_format.h — GPT-2 weight files in and out: Hugging Face
 * safetensors, llm.c's .bin and the book's state_dict names.
 *
 * Formats (name for the CLI and the messages):
 *   attn  attn's own checkpoint (attn/checkpoint.h): a run folder or its
 *         model.safetensors, metadata format "attn-gpt" (config, vocabulary).
 *   hf    safetensors with GPT2LMHeadModel's names: "transformer.wte.weight",
 *         "transformer.h.<i>.attn.c_attn.weight", ... (GPT2Model's, without the
 *         "transformer." prefix, is read too). Conv1D weights are stored
 *         [in, out]: read transposed into Linear's [out, in]. c_attn's fused
 *         weight [C, 3C] and bias [3C] hold query, key, value in that order.
 *         A tied model has no "lm_head.weight" (as save_pretrained writes it).
 *         The buffers "attn.bias" and "attn.masked_bias" are ignored.
 *   llmc  llm.c's gpt2_124M.bin: 256 int32 header (magic 20240326, version 3,
 *         max_seq_len, vocab_size, num_layers, num_heads, channels,
 *         padded_vocab_size), then fp32 wte (Vp, C) with padded rows zero, wpe
 *         (maxT, C), ln1w (L, C), ln1b, qkvw (L, 3C, C), qkvb (L, 3C),
 *         attprojw (L, C, C), attprojb (L, C), ln2w, ln2b, fcw (L, 4C, C), fcb
 *         (L, 4C), fcprojw (L, C, 4C), fcprojb (L, C), lnfw (C), lnfb (C).
 *         The head is always wte (tied).
 *   book  the book's GPTModel.state_dict() names (attn/gpt.h's list): in a
 *         safetensors file, or a torch.save .pth (detected; read once
 *         attn/pth.h lands). Its "trf_blocks.<i>.att.mask" buffers are
 *         ignored. The book's model has its own out_head, so a tied model is
 *         written with out_head.weight = tok_emb.weight, and a file whose
 *         out_head.weight equals tok_emb.weight bit for bit reads as tied.
 *
 * What a file does not say comes from elsewhere. n_heads: llm.c's header; an
 * HF "config.json" beside the file (its n_head); a safetensors metadata entry
 * "n_heads" (attn's exports write it); else hint->n_heads; else GPT-2's by
 * emb_dim (768: 12, 1024: 16, 1280: 20, 1600: 25); else an error saying to
 * give it. A hint that disagrees with the file is an error. GELU is the tanh
 * form in GPT-2, llm.c and the book alike; LayerNorm eps 1e-5.
 *
 * An HF config.json beside the file, when there is one, must be one JSON
 * object (json_strict's rules: nothing after it, no NUL, no byte order
 * mark) that agrees with the tensors: n_layer, n_embd, vocab_size,
 * n_positions, n_ctx, n_inner (null: 4 n_embd) are the tensors' sizes where
 * given, tie_word_embeddings true means no distinct lm_head, and
 * activation_function, layer_norm_epsilon, scale_attn_by_inverse_layer_idx
 * are GPT-2's. Anything else is ATTN_ERR_FORMAT naming the file, the key
 * and both values ("n_layer says 100, but the tensors of F say 12"): a
 * config.json left beside other weights must not pass for theirs. */
#ifndef ATTN_WEIGHTS_FORMAT_H
#define ATTN_WEIGHTS_FORMAT_H

#include "attn/gpt.h"
#include "attn/status.h"
#include "attn/tokenizer.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum attn_weights_format {
    ATTN_WEIGHTS_ATTN,
    ATTN_WEIGHTS_HF,
    ATTN_WEIGHTS_LLMC,
    ATTN_WEIGHTS_BOOK
} attn_weights_format;

#define ATTN_LLMC_MAGIC 20240326
#define ATTN_LLMC_VERSION 3 /* fp32 parameters */

/* "attn", "hf", "llmc", "book"; NULL outside the enum. */
const char *attn_weights_format_name(attn_weights_format fmt);

/* NULL-terminated list of the names, in the enum's order. */
const char *const *attn_weights_format_names(void);

/* The format named name; ATTN_ERR_INVALID_ARG naming the choices otherwise. */
attn_status attn_weights_format_parse(const char *name, attn_weights_format *fmt, attn_error *err);

/* Which format the file (or checkpoint folder) at path holds, by content,
 * never by extension: llm.c's magic; a zip (torch.save) -> book; safetensors
 * with metadata format "attn-gpt" -> attn, with HF names -> hf, with the
 * book's names -> book. A folder is read as FOLDER/model.safetensors.
 * ATTN_ERR_IO when it cannot be read, ATTN_ERR_FORMAT when it is none of
 * them (the message says what was found). Reads only the header. */
attn_status attn_weights_detect(const char *path, attn_weights_format *fmt, attn_error *err);

/* Build m (not initialised: this initialises it) from the weights at path in
 * any of the formats, the config taken from the tensors' shapes: vocab_size
 * from wte/tok_emb rows (llm.c's padded rows dropped: its header's vocab),
 * context_length from wpe/pos_emb rows, emb_dim, n_layers by counting
 * blocks, qkv_bias from the query/key/value biases, tie_weights as the
 * format says (above); n_heads as above. hint (may be NULL) gives n_heads
 * and drop_rate. Every tensor's name, shape and dtype (F32; F16 and BF16 in
 * safetensors files are widened) is checked before anything is allocated,
 * and the model's size against the memory available (attn/membudget.h).
 * Errors: a missing tensor ATTN_ERR_NOT_FOUND, an unexpected one
 * ATTN_ERR_FORMAT, a shape ATTN_ERR_SHAPE, each naming the tensor; a
 * non-finite weight ATTN_ERR_FORMAT. *fmt (may be NULL) gets the format
 * read. An attn checkpoint is attn_gpt_load_checkpoint's model (its
 * vocabulary is dropped). On failure nothing is left allocated. */
attn_status attn_gpt_import(const char *path, const attn_gpt_config *hint, attn_gpt *m,
                            attn_weights_format *fmt, attn_error *err);

/* attn_gpt_import with a memory budget in bytes (<= 0: the memory available
 * now), for the file image and the model together. */
attn_status attn_gpt_import_budget(const char *path, const attn_gpt_config *hint, double budget,
                                   attn_gpt *m, attn_weights_format *fmt, attn_error *err);

/* A model and its tokenizer from any weights file, for the commands that
 * run one (generate, viz, info, forward, train --init-from): an attn
 * checkpoint as attn_gpt_load_checkpoint loads it (its own tokenizer); HF,
 * llm.c and book files through attn_gpt_import_budget, paired with GPT-2's
 * tokenizer (attn_tokenizer_gpt2's files), which their vocabulary of 50,257
 * must be (ATTN_ERR_INVALID_ARG otherwise). *fmt (may be NULL) gets the
 * format. On failure nothing is left allocated. */
attn_status attn_gpt_load_weights(const char *path, const attn_gpt_config *hint, double budget,
                                  attn_gpt *m, attn_tokenizer *tok, attn_weights_format *fmt,
                                  attn_error *err);

/* How attn_gpt_open reads what a file does not say. */
typedef struct attn_gpt_open_options {
    int n_heads;   /* 0: as the file says (the rule above) */
    double budget; /* bytes for other programs' files and their model; <= 0: the memory
                      available now (attn/membudget.h) */
} attn_gpt_open_options;

/* The one way a model is opened, by every command (generate, viz, info,
 * forward gpt, train --init-from) and by Python's attn.GPT.load: path is a
 * run folder, a model file in any of the formats above (told by its
 * content), or a stream (a pipe: attn's own checkpoint, read once). o may
 * be NULL (the defaults). tok: the model's tokenizer, attn's own from its
 * checkpoint or GPT-2's for other programs' files (whose vocabulary must
 * then be GPT-2's 50,257); NULL: none wanted, and other programs' files of
 * any vocabulary are read. *fmt and *step (each may be NULL): the format,
 * and the training step (-1 for other programs' weights: no history). On
 * failure nothing is left allocated. */
attn_status attn_gpt_open(const char *path, const attn_gpt_open_options *o, attn_gpt *m,
                          attn_tokenizer *tok, attn_weights_format *fmt, int64_t *step,
                          attn_error *err);

/* ATTN_OK when a model of cfg can be written as fmt, else
 * ATTN_ERR_INVALID_ARG saying why: hf and llmc are GPT-2 and take only the
 * book's model with qkv_bias (llmc: tied too; hf: tied or not); book takes
 * the book's model (qkv_bias either way); attn is not written here (a
 * checkpoint needs its vocabulary: attn train writes them). The refusal
 * names the keys the model has and the --config that would make one the
 * format takes: "it has qkv_bias false, tie_weights false; a model trained
 * with --config '{"qkv_bias":true,"tie_weights":true}' can be". Variants
 * (rmsnorm, relu2/swiglu, rope/alibi/no positions, grouped-query, window,
 * qk_norm, softcap) are named so too ("norm rmsnorm"). */
attn_status attn_weights_can_export(const attn_gpt_config *cfg, attn_weights_format fmt,
                                    attn_error *err);

/* Write m's weights to path as fmt, atomically (attn/fileio.h): hf and book
 * as safetensors (metadata format "pt" and n_heads), llmc as its .bin. A
 * classifier (a head of another width, attn/finetune.h) is written as book
 * only: the book's chapter-6 state_dict (out_head with its bias), its
 * adapters merged first (attn_gpt_merge_lora). The
 * caller checks a user's path with attn_output_check first. Only the weights
 * file: an HF config.json is attn_gpt_export_hf_config's. */
attn_status attn_gpt_export(const attn_gpt *m, const char *path, attn_weights_format fmt,
                            attn_error *err);

/* Write the HF config.json of m (GPT2LMHeadModel, activation gelu_new,
 * layer_norm_epsilon 1e-5, tie_word_embeddings) to path, atomically. */
attn_status attn_gpt_export_hf_config(const attn_gpt *m, const char *path, attn_error *err);

#ifdef __cplusplus
}
#endif
#endif
