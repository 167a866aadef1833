/* attn/activation.h — the feed-forward's activations besides the book's GELU
 * (attn/gelu.h), chosen by the config key "act":
 *   gelu    the book's (tanh approximation), attn/gelu.h
 *   relu2   relu2(x) = max(x, 0)^2                        (So et al. 2021, Primer)
 *   swiglu  swiglu(a, b) = silu(a) * b, silu(a) = a / (1 + exp(-a))
 *           (Shazeer 2020): the gate a and the value b are the two halves
 *           of one Linear(C, 2H)'s output row, [a | b] (attn/feedforward.h).
 * Element-wise: the result of each element does not depend on how a call
 * is split over threads. */
#ifndef ATTN_ACTIVATION_H
#define ATTN_ACTIVATION_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The config's "act" values (0 is the book's). */
typedef enum attn_act { ATTN_ACT_GELU = 0, ATTN_ACT_RELU2, ATTN_ACT_SWIGLU } attn_act;

/* The feed-forward's activation act over N rows (the engine's activation
 * op, attn/engine_ops.h): x (N, attn_act_width(act, hidden)) -> y
 * (N, hidden); y may be x for the element-wise ones. _bf16: y rounded to
 * bf16 (nearest even) in the same pass, gelu only (the bf16 engine's input
 * to the next product). The backward adds: dx (N, width) += act'(x) dy;
 * for the element-wise ones dx may be dy: then dx = act'(x) dy, in place. */
int attn_act_width(attn_act act, int hidden);
void attn_act_forward(attn_act act, const float *x, float *y, size_t N, size_t hidden);
void attn_act_forward_bf16(attn_act act, const float *x, uint16_t *y16, size_t N, size_t hidden);
void attn_act_backward(attn_act act, const float *x, float *dy, float *dx, size_t N, size_t hidden);

/* y = relu2(x) for n elements (in place allowed); split over OpenMP
 * threads above a size. */
void attn_relu2_forward(const float *x, float *y, size_t n);
/* The backward rule (every attn backward; docs/library.md#conventions):
 * it adds (+=) into dx and into the parameter gradients, never overwrites;
 * the caller zeroes them first. Exception: the _inplace form, whose
 * one buffer holds dy on entry and dx on return. */

/* d = relu2'(x) * d = 2 max(x, 0) * d in place (d holds dy on entry). */
void attn_relu2_backward_inplace(const float *x, float *d, size_t n);
/* dx += relu2'(x) * dy. */
void attn_relu2_backward(const float *x, const float *dy, float *dx, size_t n);

/* Rows of h (N, 2H) = [a | b] -> y (N, H) = silu(a) * b; split over OpenMP
 * threads above a size. y may not alias h. */
void attn_swiglu_forward(const float *h, float *y, size_t N, size_t H);
/* dh (N, 2H) += [dy * b * silu'(a) | dy * silu(a)] for dy (N, H). */
void attn_swiglu_backward(const float *h, const float *dy, float *dh, size_t N, size_t H);
/* One thread: y[i] = silu(a[i]) * b[i] for i < n (y may alias a or b), for
 * a slice of one row (the KV-cached step). */
void attn_swiglu_pair(const float *a, const float *b, float *y, size_t n);

#ifdef __cplusplus
}
#endif
#endif
