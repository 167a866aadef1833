/* attn/generate.h — text generation from a GPT (gpt.h) as a library object:
 * the KV cache, the sampler (attn/sample.h: temperature, top-k, top-p), its
 * seeded generator, the sliding context window and a stop string, so any
 * program that links libattn generates what `attn generate` prints.
 *
 *     attn_generate_options o;
 *     attn_generate_options_default(&o);          // 0.8, top-k 200, seed 1337
 *     attn_generator g;
 *     attn_generator_init(&g, &model, &tok, &o, &err);
 *     attn_generator_prompt(&g, "ROMEO:", 6, &err);
 *     while (!g.stopped && n++ < 500) {
 *         char text[8]; int len;
 *         attn_generator_next(&g, NULL, text, &len, &err);   // one character
 *         fwrite(text, 1, len, stdout);
 *     }
 *     attn_generator_free(&g);
 *
 * Sliding window: the cache holds at most context_length tokens. When it is
 * full, the next token re-primes it with the last window_keep tokens, that
 * token included (default context_length / 2: O(T) per token amortised;
 * context_length re-reads the whole window each token, as the book's
 * generate() crops idx[:, -context_length:], at O(T^2) per token). A prompt
 * longer than the context keeps its last context_length tokens.
 *
 * Several samples (num_samples N > 1, CPU): N sequences of the same prompt
 * decoded together through one batched KV cache (attn_gpt_kv_step_batch),
 * so each weight read serves N tokens. Sample i draws from its own
 * generator seeded seed + i: it is exactly (bit for bit in fp32) what a
 * single-sample generator with seed + i produces, so N samples at seed S
 * are the runs at seeds S, S+1, ..., S+N-1 (greedy: N equal texts). Step
 * them with attn_generator_next_tokens. */
#ifndef ATTN_GENERATE_H
#define ATTN_GENERATE_H

#include <stddef.h>
#include <stdint.h>

#include "attn/engine.h"
#include "attn/gpt.h"
#include "attn/rng.h"
#include "attn/sample.h"
#include "attn/status.h"
#include "attn/tokenizer.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct attn_generate_options {
    double temperature;       /* 0.8; 0 = greedy (arg-max, no draw) */
    int top_k;                /* 200; 0 = all */
    double top_p;             /* 1 = off; else in (0, 1] */
    uint64_t seed;            /* 1337: attn_rng_seed, as torch.manual_seed */
    int window_keep;          /* tokens kept when the window slides; 0 = context_length / 2 */
    const char *stop;         /* NULL or "": none; else generation stops once the
                                 generated text ends with it (it is included) */
    attn_precision precision; /* FP32 (default); BF16: the steps stream bf16
                                 copies of the weights (attn_gpt_kv_set_precision) */
    int allow_special;        /* gpt2: <|endoftext|> in the prompt is the end-of-text
                                 token; 0 (default): plain text, as tiktoken's
                                 encode(disallowed_special=()) */
    attn_device device;       /* CPU (default); CUDA: the GPU engine (attn/cuda.h),
                                 which has no KV cache: each token reruns the
                                 window the CPU's cache would hold (same positions,
                                 same logits up to rounding); sampling, window and
                                 stop string stay on the host, as on the CPU */
    int num_samples;          /* 0 or 1: one sequence; N: N decoded together
                                 (CPU only), sample i drawn with seed + i */
} attn_generate_options;

void attn_generate_options_default(attn_generate_options *o);

/* One sample's own state. */
typedef struct attn_generator_sample {
    attn_rng rng;    /* seeded opt.seed + the sample's index */
    int32_t pending; /* sampled, not yet fed to the cache; -1 none */
    char *tail;      /* the last stop_len bytes generated */
    size_t tail_len;
    int stopped;   /* the stop string was generated */
    char piece[8]; /* a char token's bytes (attn_generator_next_token) */
} attn_generator_sample;

typedef struct attn_generator {
    const attn_gpt *model;          /* borrowed */
    const attn_tokenizer *tok;      /* borrowed */
    attn_generate_options opt;      /* opt.stop points at the generator's own copy */
    attn_gpt_kv_cache cache;        /* CPU */
    struct attn_cuda_gpt *gpu;      /* CUDA: the engine, */
    float *gpu_logits;              /* the last position's logits (V), */
    int gpu_len;                    /* the tokens its window holds */
    int num_samples;                /* N: 1 unless opt.num_samples > 1 */
    attn_generator_sample *samples; /* N */
    attn_sample_candidate *cand;    /* V */
    int32_t *hist;                  /* (N, cap_hist): each sample's last context_length tokens */
    int n_hist, cap_hist;
    int32_t *ids;    /* (N, context_length): a window to re-prime with; N tokens to step */
    int has_pending; /* the samples' pending tokens are yet to be fed */
    int primed;      /* a prompt was given */
    char *stop;      /* owned copy of opt.stop */
    size_t stop_len;
    int stopped;      /* every sample generated the stop string */
    int64_t produced; /* tokens generated (per sample) */
} attn_generator;

/* The model as generation with o wants it, before attn_generator_init:
 * on the CPU at BF16, attn_gpt_keep_bf16_weights (the fp32 Linear weights
 * released: m then generates only, the same tokens and logits, bit for
 * bit, as a BF16 generator on the fp32 model); otherwise nothing. The one
 * policy `attn generate` applies; a program that goes on using the fp32
 * model (Python's attn.GPT) skips it, and its BF16 generator makes its own
 * bf16 copy. */
attn_status attn_generate_prepare(attn_gpt *m, const attn_generate_options *o, attn_error *err);

/* Check the options (temperature >= 0 and finite, top_k >= 0, top_p in
 * (0, 1], 0 <= window_keep <= context_length, num_samples >= 0 and 1 on
 * CUDA) and allocate (device CUDA:
 * upload the model; fails without a GPU, saying why). model and tok must
 * outlive the generator. */
attn_status attn_generator_init(attn_generator *g, const attn_gpt *model, const attn_tokenizer *tok,
                                const attn_generate_options *o, attn_error *err);

/* Start (or restart) from text (n bytes, at least one token; char: UTF-8
 * whose every character is in the vocabulary; gpt2: any bytes): resets the
 * cache, the stop state and the count, and reseeds the generator. */
attn_status attn_generator_prompt(attn_generator *g, const char *text, size_t n, attn_error *err);

/* The same from n token ids (each in [0, vocab_size)). */
attn_status attn_generator_prompt_ids(attn_generator *g, const int32_t *ids, size_t n,
                                      attn_error *err);

/* Sample the next token: *id (may be NULL) gets it, *bytes (may be NULL)
 * its bytes (borrowed until the next call; not NUL-terminated), *len (may
 * be NULL) their count. A gpt2 token's bytes may be part of a character:
 * show them through attn_utf8_display (attn/tokenizer.h). Sets g->stopped
 * when the generated bytes now end with the stop string; a call after
 * that is ATTN_ERR_STATE, as is one before a prompt, and with several
 * samples (use attn_generator_next_tokens). */
attn_status attn_generator_next_token(attn_generator *g, int32_t *id, const char **bytes,
                                      size_t *len, attn_error *err);

/* attn_generator_next_token with the bytes copied into utf8 (8 bytes,
 * NUL-terminated): a char token always fits; a gpt2 token of more than 7
 * bytes is ATTN_ERR_INVALID_ARG (use attn_generator_next_token). */
attn_status attn_generator_next(attn_generator *g, int32_t *id, char *utf8, int *len,
                                attn_error *err);

/* One token for every sample: ids[i] (num_samples of them) gets sample
 * i's, or -1 once it has generated the stop string (its text ends there;
 * the bytes of a token: attn_tokenizer_token). Sets g->stopped once every
 * sample has stopped; errors as attn_generator_next_token. */
attn_status attn_generator_next_tokens(attn_generator *g, int32_t *ids, attn_error *err);

/* The logits (V; with several samples (num_samples, V), a row each,
 * borrowed until the next call) the next attn_generator_next
 * draws from, e.g. to show its distribution (attn_sample_probs). Same errors
 * as attn_generator_next; draws nothing. */
attn_status attn_generator_logits(attn_generator *g, const float **logits, attn_error *err);

void attn_generator_free(attn_generator *g);

#ifdef __cplusplus
}
#endif
#endif
