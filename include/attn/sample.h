/* attn/sample.h — picking the next token from a GPT's logits (V of them),
 * as nanoGPT's sample.py does; shared by `attn generate` and `attn viz`. */
#ifndef ATTN_SAMPLE_H
#define ATTN_SAMPLE_H

#include "attn/rng.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Scratch for attn_sample_next: V entries. */
typedef struct attn_sample_candidate {
    float p;
    int id;
} attn_sample_candidate;

/* temperature below FLT_MIN (0, subnormal), or so small that a scaled logit
 * overflows: the arg-max (greedy, no draw), the limit of the distribution.
 * Otherwise scale the
 * logits by 1/temperature, keep the top_k (0 or >= V: all), softmax, keep
 * the smallest prefix with mass >= top_p (1: all) and draw one 53-bit
 * uniform from rng. buf holds V candidates (scratch). Returns the id. */
int attn_sample_next(const float *logits, int V, double temperature, int top_k, double top_p,
                     attn_rng *rng, attn_sample_candidate *buf);

/* probs (V) = softmax(logits / temperature), the distribution the draw above
 * starts from before any top-k / top-p cut; temperature <= 0 uses 1, one too
 * small to scale by gives the arg-max's one-hot. */
void attn_sample_probs(const float *logits, int V, double temperature, float *probs);

#ifdef __cplusplus
}
#endif
#endif
