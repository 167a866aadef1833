/* attn/memory_plan.h — the memory a run will hold, from its configs alone.
 *
 * One cost model for every command that checks a budget before it
 * allocates (attn train and its --dry-run, attn generate, attn bench mha /
 * train / generate; attn_mem_check in attn/membudget.h compares the total
 * with the limit). It counts what each path allocates and writes, buffer by
 * buffer, as the code does (an allocation never touched takes no memory and
 * is not counted):
 *   - the fp32 weights; training: their gradients, AdamW's m and v, one
 *     flat gradient more when accumulating micro-batches (a frozen set:
 *     the trainable tensors' alone);
 *   - activations as the blocks keep them: per block six (N, C) rows, the
 *     feed-forward's hidden layer, and the attention's own buffers (below
 *     the backward's stop, their gradients' never written). The
 *     fused attention (the default path) keeps q | k | v, their gradients,
 *     the context and (B, heads, T) softmax statistics: O(T), never a
 *     (T, T) matrix. Only the step-by-step path (attn bench mha
 *     --reference) keeps (B, heads, T, T) weights, and dropout drawn as
 *     PyTorch's CPU build draws it (stream torch-cpu, the default) keeps
 *     one bit per (B, heads, T, T) element per block (torch-mkl: none);
 *   - the head: B T V logits and their gradient, or the lean head's one
 *     chunk of 128 rows;
 *   - bf16 (AVX512-BF16 engine): a 2-byte copy of every weight matrix, the
 *     operands rounded once and kept for the backward, and the engine's
 *     scratch for the largest operand;
 *   - generation: the KV cache (2 n_layers rows x kv width per token, a full
 *     context per sample, zeroed up front), the one-token scratch, bf16
 *     weight copies (bf16 generation then drops the fp32 matrices), and
 *     while a file read whole loads, its image (a resumed training run
 *     reads both of its files whole; a model checkpoint is read in place);
 *   - the data the caller says it holds (a corpus, its ids, an order);
 *   - the process itself: its libraries, thread stacks and the BLAS and
 *     oneDNN buffers (measured: tests/memory_estimates.sh compares totals
 *     with the peak RSS of real runs, within -10% / +25%).
 * Sizes are doubles: a config past any machine still gets a number. */
#ifndef ATTN_MEMORY_PLAN_H
#define ATTN_MEMORY_PLAN_H

#include "attn/engine.h"
#include "attn/gpt.h"
#include "attn/rng.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum attn_mem_mode {
    ATTN_MEM_TRAIN,    /* a trainer: steps (forward + backward + AdamW), evaluations */
    ATTN_MEM_GENERATE, /* KV-cached generation of batch samples */
    ATTN_MEM_MHA       /* attn bench mha: one MultiHeadAttention of the config's first block */
} attn_mem_mode;

/* The run. Zeros are the defaults noted. */
typedef struct attn_mem_run {
    attn_mem_mode mode;
    int batch;  /* sequences: the batch size (train, mha) or samples (generate); 0: 1 */
    int tokens; /* train, mha: tokens per sequence; 0: the config's context_length */
    /* train */
    int grad_accum; /* micro-batches per step (> 1: a flat gradient is kept) */
    int lean_head;  /* the output layer in chunks (no B T V logits) */
    int resume;     /* both checkpoint files are read whole while the moments fill */
    int head_width; /* the output layer's width when not vocab_size (a classifier's
                       n_classes); 0: vocab_size */
    double params;  /* the model's parameters when not its config's (a classifier's
                       head, adapters: attn_gpt_params' values_numel); 0: the config's */
    /* a frozen set (attn_mem_run_of_model fills these from the model as built): */
    double grads;      /* the gradient arena's floats (the trainable tensors'); 0: params */
    double moments;    /* AdamW's m (and v) values written, the trainable tensors';
                          0: params (a frozen tensor's moments are allocated for the
                          checkpoints but never written) */
    int frozen_blocks; /* blocks below the backward's stop: forward only, their
                          gradient buffers never written */
    /* mha */
    int backward;     /* forward + backward (train: always) */
    int reference;    /* the step-by-step path: (B, heads, T, T) weights kept */
    int kernel_cases; /* after the module: the kernel alone and an sgemm of its size */
    /* generate */
    int load_file; /* the weights come from a file read whole first (attn's own
                      checkpoints are not: their tensors are read in place) */
    int bf16_only; /* bf16: the fp32 matrices released (attn_generate_prepare) */
    int membw;     /* attn bench generate: a read-bandwidth buffer of the weights' bytes */
    /* every mode */
    attn_dropout_stream stream; /* train, mha with drop_rate > 0: how masks are drawn
                                   (torch-cpu keeps the attention's bits) */
    attn_precision precision;
    int threads;        /* 0: 1 */
    int gpt2_tokenizer; /* GPT-2's BPE is loaded (its tables, a few MB) */
    double data_bytes;  /* what the caller holds besides (corpus text, its ids, an order) */
} attn_mem_run;

/* Bytes, by what holds them; total is their sum. */
typedef struct attn_mem_plan {
    double weights;     /* fp32 parameters */
    double grads;       /* their gradients (training) */
    double optimizer;   /* AdamW m and v */
    double accum;       /* gradient accumulation's flat gradient */
    double bf16;        /* bf16 weight copies, kept operands and the engine's scratch */
    double activations; /* kept for the backward, and the backward's scratch (attention's
                           included) */
    double attention;   /* of activations: the attention's buffers (O(T) on the fused path;
                           the (T, T) weights or dropout bits where a path keeps them) */
    double head;        /* logits and their gradient, or the lean head's chunk */
    double kv_cache;    /* generation's KV cache and one-token scratch */
    double transient;   /* held for a while only (a checkpoint's file images while it
                           loads or resumes, the bench's kernel-alone buffers): the
                           most at once beyond the rest */
    double data;        /* run->data_bytes and the GPT-2 tokenizer's tables */
    double process;     /* libraries, threads, BLAS and oneDNN buffers */
    double total;
} attn_mem_plan;

/* The plan of run on a model of cfg (for ATTN_MEM_MHA: cfg's emb_dim,
 * n_heads, n_kv_heads, window, pos_emb, qk_norm and qkv_bias make the
 * module). Nothing is allocated; cfg is not validated (a size <= 0 counts
 * nothing). */
void attn_memory_plan(const attn_gpt_config *cfg, const attn_mem_run *run, attn_mem_plan *plan);

/* A training run of m as built: run's params, head_width, grads, moments
 * and frozen_blocks from m's parameter table, its trainable set and where
 * its backward stops (attn_gpt_backward_stop); the rest of run kept. */
void attn_mem_run_of_model(const attn_gpt *m, attn_mem_run *run);

/* "weights 22.2 MiB, gradients ..., activations ... (attention ...), process
 * ...": the plan's non-zero parts, for a dry run's memory line. */
const char *attn_memory_plan_text(const attn_mem_plan *plan, char *buf, size_t cap);

#ifdef __cplusplus
}
#endif

#endif
