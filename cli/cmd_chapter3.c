/* attn chapter3 — walk chapter 3 of "Build a Large Language Model (From
 * Scratch)" in order and print every step's tensor exactly as PyTorch 1.13
 * prints it, each under a one-line caption, so a reader can hold it beside the
 * book. The default dropout stream (torch-mkl) gives the book's printed
 * tables; --rng torch-cpu gives what Debian's non-MKL PyTorch prints (seed
 * 003's notebook), including that notebook's own SelfAttention_v2 variant,
 * whose weights feed its causal and dropout tables. */
#define _POSIX_C_SOURCE 200809L /* mkdir */

#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sys/stat.h>

#include "attn/attention_weights.h"
#include "attn/causal_attention.h"
#include "attn/checkpoint.h"
#include "attn/dropout.h"
#include "attn/linear.h"
#include "attn/multi_head_attention.h"
#include "attn/ops.h"
#include "attn/print.h"
#include "attn/rng.h"
#include "attn/self_attention.h"
#include "attn/softmax.h"
#include "attn/viz.h"
#include "commands.h"
#include "options.h"
#include "threads.h"

#define T_TOK 6 /* tokens in "Your journey starts with one step" */
#define D_IN 3
#define D_OUT 2

/* The chapter's six 3-d token embeddings. */
static const float inputs[T_TOK * D_IN] = {
    0.43f, 0.15f, 0.89f, /* Your    (x^1) */
    0.55f, 0.87f, 0.66f, /* journey (x^2) */
    0.57f, 0.85f, 0.64f, /* starts  (x^3) */
    0.22f, 0.58f, 0.33f, /* with    (x^4) */
    0.77f, 0.25f, 0.10f, /* one     (x^5) */
    0.05f, 0.80f, 0.55f, /* step    (x^6) */
};

/* The (b, num_heads, num_tokens, head_dim) = (1, 2, 3, 4) tensor of the
 * batched-matmul illustration in 3.6.2. */
static const float batched_a[2 * 3 * 4] = {
    0.2745f, 0.6584f, 0.2775f, 0.8573f, 0.8993f, 0.0390f, 0.9268f, 0.7388f,
    0.7179f, 0.7058f, 0.9156f, 0.4340f, 0.0772f, 0.3565f, 0.1479f, 0.5331f,
    0.4066f, 0.2318f, 0.4545f, 0.9737f, 0.4606f, 0.5159f, 0.4220f, 0.5786f,
};

typedef struct walk {
    FILE *out;
    attn_dropout_stream stream;
    attn_error err;
    int failed;         /* a library call failed; err says why */
    const char *figdir; /* --figures DIR: SVG heatmaps of the matrices, or NULL */
    int n_figures;
} walk;

/* The sentence's words, the figures' axis labels. */
static const char *const words[T_TOK] = {"Your", "journey", "starts", "with", "one", "step"};

/* --figures: the matrix just printed as DIR/NN-name.svg (the same floats). */
static void figure(walk *w, const char *name, const char *title, const char *code,
                   const float *data, int rows, int cols, const char *const *labels) {
    if (w->failed || !w->figdir) return;
    char path[4096];
    int n = snprintf(path, sizeof path, "%s/%02d-%s.svg", w->figdir, ++w->n_figures, name);
    if (n < 0 || (size_t)n >= sizeof path) {
        attn_fail(&w->err, ATTN_ERR_INVALID_ARG, "--figures path '%s' is too long", w->figdir);
        w->failed = 1;
        return;
    }
    /* A file of the folder may be a link into a run folder. */
    if (attn_output_check(path, NULL, 0, NULL, 0, &w->err) != ATTN_OK) {
        w->failed = 1;
        return;
    }
    attn_viz_heatmap h = {.rows = rows,
                          .cols = cols,
                          .values = data,
                          .row_labels = labels,
                          .col_labels = labels,
                          .title = title,
                          .subtitle = code,
                          .show_values = 1,
                          .decimals = 4};
    if (attn_viz_write_heatmap_svg(&h, path, &w->err) != ATTN_OK) w->failed = 1;
}

static void section(walk *w, const char *title) {
    fprintf(w->out, "\n== %s ==\n", title);
}

static void caption(walk *w, const char *text) {
    fprintf(w->out, "\n-- %s\n", text);
}

/* Print label + the tensor's repr (+ suffix such as "grad_fn=<MmBackward0>"). */
static void show(walk *w, const char *label, const float *data, int ndim, const int64_t *shape,
                 const char *suffix) {
    if (w->failed) return;
    attn_print_options o;
    attn_print_options_default(&o);
    o.suffixes[0] = suffix;
    char *text = NULL;
    if (attn_tensor_repr(data, ndim, shape, &o, &text, &w->err) != ATTN_OK) {
        w->failed = 1;
        return;
    }
    fprintf(w->out, "%s%s\n", label ? label : "", text);
    free(text);
}

static void show_shape(walk *w, const char *label, int ndim, const int64_t *shape) {
    fprintf(w->out, "%storch.Size([", label);
    for (int d = 0; d < ndim; d++)
        fprintf(w->out, "%s%lld", d ? ", " : "", (long long)shape[d]);
    fprintf(w->out, "])\n");
}

#define SHAPE(...) ((const int64_t[]){__VA_ARGS__})
#define NDIM(...) ((int)(sizeof((const int64_t[]){__VA_ARGS__}) / sizeof(int64_t)))
/* show(w, label, data, suffix, dims...) with the shape written inline. */
#define SHOW(w, label, data, suffix, ...)                                                          \
    show((w), (label), (data), NDIM(__VA_ARGS__), SHAPE(__VA_ARGS__), (suffix))

/* Tensor.sum() over n < 8 contiguous floats, in PyTorch 1.13's CPU order
 * (scalar_inner_sum -> row_sum with 4 partial sums; the vectorised path only
 * starts at 8 elements, more than the chapter ever sums). The order decides
 * whether a sum of weights prints as "1." or "1.0000". */
static float torch_sum(const float *x, size_t n) {
    float p[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    size_t full = n / 4 * 4;
    for (size_t i = 0; i < full; i++)
        p[i % 4] += x[i];
    for (size_t i = full; i < n; i++)
        p[0] += x[i];
    return ((p[0] + p[1]) + p[2]) + p[3];
}

/* x / sqrt(d_k), as PyTorch divides a float32 tensor by a Python float. */
static void scale_by_sqrt(const float *x, float *y, size_t n, int d_k) {
    const float s = (float)sqrt((double)d_k);
    for (size_t i = 0; i < n; i++)
        y[i] = x[i] / s;
}

/* ---- 3.3 without trainable weights ------------------------------------ */
static void simple_attention(walk *w) {
    const float *x2 = inputs + 1 * D_IN;
    float scores2[T_TOK], tmp[T_TOK], naive[T_TOK], weights2[T_TOK], e[T_TOK];
    section(w, "3.3.1 A simple self-attention mechanism without trainable weights");
    caption(w, "inputs: the embeddings x^1..x^6 of \"Your journey starts with one step\"");
    SHOW(w, NULL, inputs, NULL, T_TOK, D_IN);

    caption(w, "attention scores of query x^2: attn_scores_2[i] = torch.dot(x^i, x^2)");
    for (int i = 0; i < T_TOK; i++)
        scores2[i] = attn_dot(inputs + i * D_IN, x2, D_IN);
    SHOW(w, NULL, scores2, NULL, T_TOK);

    caption(w, "their sum: attn_scores_2.sum()");
    float sum = torch_sum(scores2, T_TOK);
    show(w, NULL, &sum, 0, NULL, NULL);

    caption(w, "simple normalisation: attn_scores_2 / attn_scores_2.sum()");
    for (int i = 0; i < T_TOK; i++)
        tmp[i] = scores2[i] / sum;
    SHOW(w, "Attention weights: ", tmp, NULL, T_TOK);
    float s = torch_sum(tmp, T_TOK);
    show(w, "Sum: ", &s, 0, NULL, NULL);

    caption(w, "naive softmax: torch.exp(x) / torch.exp(x).sum(dim=0)");
    for (int i = 0; i < T_TOK; i++)
        e[i] = expf(scores2[i]);
    float esum = torch_sum(e, T_TOK);
    for (int i = 0; i < T_TOK; i++)
        naive[i] = e[i] / esum;
    SHOW(w, "Attention weights: ", naive, NULL, T_TOK);
    s = torch_sum(naive, T_TOK);
    show(w, "Sum: ", &s, 0, NULL, NULL);

    caption(w, "softmax (max-subtracted, stable): torch.softmax(attn_scores_2, dim=0)");
    attn_softmax_forward(scores2, weights2, 1, T_TOK);
    SHOW(w, "Attention weights: ", weights2, NULL, T_TOK);
    s = torch_sum(weights2, T_TOK);
    show(w, "Sum: ", &s, 0, NULL, NULL);

    caption(w, "context vector z^2 = sum_i attn_weights_2[i] * x^i, from torch.zeros(3)");
    float z2[D_IN] = {0.0f, 0.0f, 0.0f};
    SHOW(w, NULL, z2, NULL, D_IN);
    for (int i = 0; i < T_TOK; i++)
        for (int j = 0; j < D_IN; j++)
            z2[j] += weights2[i] * inputs[i * D_IN + j];
    SHOW(w, NULL, z2, NULL, D_IN);

    float scores[T_TOK * T_TOK], weights[T_TOK * T_TOK], sums[T_TOK], ctx[T_TOK * D_IN];
    section(w, "3.3.2 Computing attention weights for all input tokens");
    caption(w, "attention scores, two for-loops: attn_scores[i, j] = torch.dot(x^i, x^j)");
    for (int i = 0; i < T_TOK; i++)
        for (int j = 0; j < T_TOK; j++)
            scores[i * T_TOK + j] = attn_dot(inputs + i * D_IN, inputs + j * D_IN, D_IN);
    SHOW(w, NULL, scores, NULL, T_TOK, T_TOK);

    caption(w, "the same by matrix multiplication: inputs @ inputs.T");
    attn_matmul_bt(inputs, inputs, scores, T_TOK, D_IN, T_TOK);
    SHOW(w, NULL, scores, NULL, T_TOK, T_TOK);
    figure(w, "attn-scores", "3.3.2 Attention scores (dot products of the embeddings)",
           "attn_scores = inputs @ inputs.T", scores, T_TOK, T_TOK, words);

    caption(w, "attention weights: torch.softmax(attn_scores, dim=-1)");
    attn_softmax_forward(scores, weights, T_TOK, T_TOK);
    SHOW(w, NULL, weights, NULL, T_TOK, T_TOK);
    figure(w, "attn-weights", "3.3.2 Attention weights (each row sums to 1)",
           "attn_weights = torch.softmax(attn_scores, dim=-1)", weights, T_TOK, T_TOK, words);
    for (int i = 0; i < T_TOK; i++)
        sums[i] = torch_sum(weights + i * T_TOK, T_TOK);
    SHOW(w, "All row sums: ", sums, NULL, T_TOK);

    caption(w, "all context vectors: attn_weights @ inputs");
    attn_matmul(weights, inputs, ctx, T_TOK, T_TOK, D_IN);
    SHOW(w, NULL, ctx, NULL, T_TOK, D_IN);
}

/* ---- 3.4.1 trainable weights, step by step ----------------------------- */
typedef struct stepwise {
    float W_query[D_IN * D_OUT], W_key[D_IN * D_OUT], W_value[D_IN * D_OUT];
    float values[T_TOK * D_OUT]; /* reused by seed 001's causal context vectors */
} stepwise;

static void trainable_step_by_step(walk *w, stepwise *sw) {
    const float *x2 = inputs + 1 * D_IN;
    section(w, "3.4.1 Computing the attention weights step by step");
    caption(w, "torch.manual_seed(123); W_query, W_key, W_value = torch.rand(d_in=3, d_out=2) "
               "each");
    attn_rng rng;
    attn_rng_seed(&rng, 123);
    attn_rng_rand(&rng, sw->W_query, D_IN * D_OUT);
    attn_rng_rand(&rng, sw->W_key, D_IN * D_OUT);
    attn_rng_rand(&rng, sw->W_value, D_IN * D_OUT);
    fprintf(w->out, "Parameter containing:\n");
    SHOW(w, NULL, sw->W_query, NULL, D_IN, D_OUT);
    fprintf(w->out, "Parameter containing:\n");
    SHOW(w, NULL, sw->W_key, NULL, D_IN, D_OUT);
    fprintf(w->out, "Parameter containing:\n");
    SHOW(w, NULL, sw->W_value, NULL, D_IN, D_OUT);

    float q2[D_OUT], k2[D_OUT], v2[D_OUT];
    caption(w, "query_2 = x^2 @ W_query, key_2 = x^2 @ W_key, value_2 = x^2 @ W_value");
    attn_matmul(x2, sw->W_query, q2, 1, D_IN, D_OUT);
    attn_matmul(x2, sw->W_key, k2, 1, D_IN, D_OUT);
    attn_matmul(x2, sw->W_value, v2, 1, D_IN, D_OUT);
    SHOW(w, NULL, q2, NULL, D_OUT);
    SHOW(w, NULL, k2, NULL, D_OUT);
    SHOW(w, NULL, v2, NULL, D_OUT);

    float queries[T_TOK * D_OUT], keys[T_TOK * D_OUT];
    caption(w, "keys = inputs @ W_key, values = inputs @ W_value");
    attn_matmul(inputs, sw->W_key, keys, T_TOK, D_IN, D_OUT);
    attn_matmul(inputs, sw->W_value, sw->values, T_TOK, D_IN, D_OUT);
    attn_matmul(inputs, sw->W_query, queries, T_TOK, D_IN, D_OUT);
    show_shape(w, "keys.shape: ", 2, SHAPE(T_TOK, D_OUT));
    show_shape(w, "values.shape: ", 2, SHAPE(T_TOK, D_OUT));
    SHOW(w, NULL, keys, NULL, T_TOK, D_OUT);
    SHOW(w, NULL, sw->values, NULL, T_TOK, D_OUT);

    caption(w, "attention score omega_22 = query_2 . keys[1]");
    float omega22 = attn_dot(q2, keys + 1 * D_OUT, D_OUT);
    show(w, NULL, &omega22, 0, NULL, NULL);

    float scores2[T_TOK], weights2[T_TOK], scaled2[T_TOK];
    caption(w, "all attention scores of query 2: query_2 @ keys.T");
    attn_matmul_bt(q2, keys, scores2, 1, D_OUT, T_TOK);
    SHOW(w, NULL, scores2, NULL, T_TOK);

    float scores[T_TOK * T_TOK], soft[T_TOK * T_TOK];
    caption(w, "all attention scores: queries @ keys.T");
    attn_matmul_bt(queries, keys, scores, T_TOK, D_OUT, T_TOK);
    SHOW(w, NULL, scores, NULL, T_TOK, T_TOK);
    caption(w, "their softmax without scaling: torch.softmax(queries @ keys.T, dim=1)");
    attn_softmax_forward(scores, soft, T_TOK, T_TOK);
    SHOW(w, NULL, soft, NULL, T_TOK, T_TOK);

    caption(w, "scaled attention weights of query 2: torch.softmax(attn_scores_2 / d_k**0.5, "
               "dim=-1)");
    scale_by_sqrt(scores2, scaled2, T_TOK, D_OUT);
    attn_softmax_forward(scaled2, weights2, 1, T_TOK);
    SHOW(w, NULL, weights2, NULL, T_TOK);

    float z2[D_OUT];
    caption(w, "context vector z^2 = attn_weights_2 @ values");
    attn_matmul(weights2, sw->values, z2, 1, T_TOK, D_OUT);
    SHOW(w, NULL, z2, NULL, D_OUT);
}

/* ---- 3.4.2 SelfAttention_v1 / v2 --------------------------------------- */
static int run_v1(walk *w, const attn_sa_v1 *m, float *out) {
    attn_sa_cache cache;
    if (attn_sa_cache_init(&cache, T_TOK, m->d_out, &w->err) != ATTN_OK) return w->failed = 1;
    if (attn_sa_v1_forward(m, inputs, T_TOK, out, &cache, &w->err) != ATTN_OK) w->failed = 1;
    attn_sa_cache_free(&cache);
    return w->failed;
}

static int run_v2(walk *w, const attn_sa_v2 *m, float *out) {
    attn_sa_cache cache;
    if (attn_sa_cache_init(&cache, T_TOK, m->d_out, &w->err) != ATTN_OK) return w->failed = 1;
    if (attn_sa_v2_forward(m, inputs, T_TOK, out, &cache, &w->err) != ATTN_OK) w->failed = 1;
    attn_sa_cache_free(&cache);
    return w->failed;
}

/* Builds sa_v2 (seed 789), which the book's causal section reuses. */
static void self_attention_classes(walk *w, attn_sa_v2 *sa_v2) {
    float out[T_TOK * D_OUT];
    attn_rng rng;
    attn_sa_v1 v1, v1t;
    section(w, "3.4.2 Implementing a compact self-attention Python class");
    caption(w, "torch.manual_seed(123); sa_v1 = SelfAttention_v1(3, 2); sa_v1(inputs)");
    attn_rng_seed(&rng, 123);
    if (attn_sa_v1_init(&v1, D_IN, D_OUT, &rng, &w->err) != ATTN_OK) {
        w->failed = 1;
        return;
    }
    if (!run_v1(w, &v1, out)) SHOW(w, NULL, out, "grad_fn=<MmBackward0>", T_TOK, D_OUT);
    attn_sa_v1_free(&v1);

    caption(w, "torch.manual_seed(789); sa_v2 = SelfAttention_v2(3, 2); sa_v2(inputs)");
    attn_rng_seed(&rng, 789);
    if (attn_sa_v2_init(sa_v2, D_IN, D_OUT, 0, &rng, &w->err) != ATTN_OK) {
        w->failed = 1;
        return;
    }
    if (!run_v2(w, sa_v2, out)) SHOW(w, NULL, out, "grad_fn=<MmBackward0>", T_TOK, D_OUT);

    caption(w, "SelfAttention_v1 given sa_v2's weights transposed (W = Linear.weight.T): same "
               "output");
    if (attn_sa_v1_init(&v1t, D_IN, D_OUT, NULL, &w->err) != ATTN_OK) {
        w->failed = 1;
        return;
    }
    if (attn_sa_v1_from_v2(&v1t, sa_v2, &w->err) != ATTN_OK)
        w->failed = 1;
    else if (!run_v1(w, &v1t, out))
        SHOW(w, NULL, out, "grad_fn=<MmBackward0>", T_TOK, D_OUT);
    attn_sa_v1_free(&v1t);
}

/* Seed 003's notebook seeds 123 before each weight, so W_query = W_key =
 * W_value = torch.rand(3, 2); its SelfAttention_v2 copies them (transposed)
 * into the Linear layers, and its causal tables come from that v2. */
static void seed003_variant(walk *w, attn_sa_v2 *variant) {
    float W[D_IN * D_OUT], out[T_TOK * D_OUT];
    attn_rng rng;
    attn_sa_v1 v1;
    section(w, "3.4.2 (seed 003's variant) torch.manual_seed(123) before each of W_query, W_key, "
               "W_value");
    attn_rng_seed(&rng, 123);
    attn_rng_rand(&rng, W, D_IN * D_OUT);
    caption(w, "SelfAttention_v1 with W_query = W_key = W_value = torch.rand(3, 2) after "
               "torch.manual_seed(123)");
    if (attn_sa_v1_init(&v1, D_IN, D_OUT, NULL, &w->err) != ATTN_OK) {
        w->failed = 1;
        return;
    }
    memcpy(v1.W_query, W, sizeof W);
    memcpy(v1.W_key, W, sizeof W);
    memcpy(v1.W_value, W, sizeof W);
    if (!run_v1(w, &v1, out)) SHOW(w, NULL, out, "grad_fn=<MmBackward0>", T_TOK, D_OUT);
    attn_sa_v1_free(&v1);

    caption(w, "its SelfAttention_v2: each Linear.weight = that torch.rand(3, 2).T");
    if (attn_sa_v2_init(variant, D_IN, D_OUT, 0, NULL, &w->err) != ATTN_OK) {
        w->failed = 1;
        return;
    }
    attn_linear *layers[3] = {&variant->W_query, &variant->W_key, &variant->W_value};
    for (int l = 0; l < 3; l++)
        for (int i = 0; i < D_IN; i++)
            for (int o = 0; o < D_OUT; o++)
                layers[l]->weight[o * D_IN + i] = W[i * D_OUT + o];
    if (!run_v2(w, variant, out)) SHOW(w, NULL, out, "grad_fn=<MmBackward0>", T_TOK, D_OUT);
}

/* ---- 3.5 causal attention ---------------------------------------------- */
static void causal_tables(walk *w, const attn_sa_v2 *sa, const char *which, const stepwise *sw,
                          float *causal_weights) {
    float Q[T_TOK * D_OUT], K[T_TOK * D_OUT], scores[T_TOK * T_TOK], scaled[T_TOK * T_TOK];
    float weights[T_TOK * T_TOK], mask[T_TOK * T_TOK], masked[T_TOK * T_TOK];
    float norm[T_TOK * T_TOK], ctx[T_TOK * D_OUT];
    char text[200];
    section(w, "3.5.1 Applying a causal attention mask");
    snprintf(text, sizeof text,
             "attention weights of %s: softmax(queries @ keys.T / d_k**0.5, dim=-1)", which);
    caption(w, text);
    attn_linear_forward(&sa->W_query, inputs, Q, T_TOK);
    attn_linear_forward(&sa->W_key, inputs, K, T_TOK);
    attn_matmul_bt(Q, K, scores, T_TOK, D_OUT, T_TOK);
    scale_by_sqrt(scores, scaled, T_TOK * T_TOK, D_OUT);
    attn_softmax_forward(scaled, weights, T_TOK, T_TOK);
    SHOW(w, NULL, weights, "grad_fn=<SoftmaxBackward0>", T_TOK, T_TOK);
    figure(w, "trainable-weights", "3.5.1 Attention weights with trainable W_query, W_key",
           "torch.softmax(queries @ keys.T / d_k**0.5, dim=-1)", weights, T_TOK, T_TOK, words);

    caption(w, "mask_simple = torch.tril(torch.ones(6, 6))");
    attn_tril_ones(mask, T_TOK);
    SHOW(w, NULL, mask, NULL, T_TOK, T_TOK);
    figure(w, "causal-mask", "3.5.1 The causal mask: a word sees itself and earlier words",
           "mask_simple = torch.tril(torch.ones(6, 6))", mask, T_TOK, T_TOK, words);

    caption(w, "masked_simple = attn_weights * mask_simple");
    for (int i = 0; i < T_TOK * T_TOK; i++)
        masked[i] = weights[i] * mask[i];
    SHOW(w, NULL, masked, "grad_fn=<MulBackward0>", T_TOK, T_TOK);
    figure(w, "masked-weights", "3.5.1 Weights above the diagonal zeroed",
           "masked_simple = attn_weights * mask_simple", masked, T_TOK, T_TOK, words);

    caption(w, "renormalised: masked_simple / masked_simple.sum(dim=-1, keepdim=True)");
    for (int i = 0; i < T_TOK; i++) {
        float rs = torch_sum(masked + i * T_TOK, T_TOK);
        for (int j = 0; j < T_TOK; j++)
            norm[i * T_TOK + j] = masked[i * T_TOK + j] / rs;
    }
    SHOW(w, NULL, norm, "grad_fn=<DivBackward0>", T_TOK, T_TOK);
    figure(w, "renormalised-weights", "3.5.1 Masked weights renormalised (rows sum to 1 again)",
           "masked_simple / masked_simple.sum(dim=-1, keepdim=True)", norm, T_TOK, T_TOK, words);

    caption(w, "scores masked with -inf above the diagonal: attn_scores.masked_fill(torch.triu("
               "ones, diagonal=1).bool(), -torch.inf)");
    attn_causal_fill(scores, masked, 1, T_TOK, -INFINITY);
    SHOW(w, NULL, masked, "grad_fn=<MaskedFillBackward0>", T_TOK, T_TOK);
    figure(w, "masked-scores", "3.5.1 Scores masked with -inf above the diagonal",
           "attn_scores.masked_fill(torch.triu(ones, diagonal=1).bool(), -torch.inf)", masked,
           T_TOK, T_TOK, words);

    caption(w, "causal attention weights: torch.softmax(masked / d_k**0.5, dim=1)");
    scale_by_sqrt(masked, scaled, T_TOK * T_TOK, D_OUT);
    attn_softmax_forward(scaled, causal_weights, T_TOK, T_TOK);
    SHOW(w, NULL, causal_weights, "grad_fn=<SoftmaxBackward0>", T_TOK, T_TOK);
    figure(w, "causal-weights", "3.5.1 Causal attention weights (softmax of the -inf scores)",
           "torch.softmax(masked / d_k**0.5, dim=1)", causal_weights, T_TOK, T_TOK, words);

    caption(w, "their context vectors with 3.4.1's values (inputs @ W_value, seed 123): "
               "attn_weights @ values");
    attn_matmul(causal_weights, sw->values, ctx, T_TOK, T_TOK, D_OUT);
    SHOW(w, NULL, ctx, "grad_fn=<MmBackward0>", T_TOK, D_OUT);
}

static void dropout_tables(walk *w, const float *causal_weights) {
    float ones[T_TOK * T_TOK], y[T_TOK * T_TOK];
    uint8_t keep[T_TOK * T_TOK];
    attn_rng rng;
    char text[200];
    section(w, "3.5.2 Masking additional attention weights with dropout");
    snprintf(text, sizeof text,
             "torch.manual_seed(123); torch.nn.Dropout(0.5)(torch.ones(6, 6))  [%s stream]",
             attn_dropout_stream_name(w->stream));
    caption(w, text);
    for (int i = 0; i < T_TOK * T_TOK; i++)
        ones[i] = 1.0f;
    attn_rng_seed(&rng, 123);
    attn_dropout_mask(&rng, w->stream, 0.5, keep, T_TOK * T_TOK);
    attn_dropout_apply(ones, keep, 0.5, y, T_TOK * T_TOK);
    SHOW(w, NULL, y, NULL, T_TOK, T_TOK);
    figure(w, "dropout-mask", "3.5.2 Dropout mask: half the entries zeroed, the rest scaled by 2",
           "torch.manual_seed(123); torch.nn.Dropout(0.5)(torch.ones(6, 6))", y, T_TOK, T_TOK,
           words);

    caption(w, "torch.manual_seed(123); dropout(attn_weights) on the causal weights above");
    attn_rng_seed(&rng, 123);
    attn_dropout_mask(&rng, w->stream, 0.5, keep, T_TOK * T_TOK);
    attn_dropout_apply(causal_weights, keep, 0.5, y, T_TOK * T_TOK);
    SHOW(w, NULL, y, "grad_fn=<MulBackward0>", T_TOK, T_TOK);
    figure(w, "dropout-weights", "3.5.2 Dropout on the causal attention weights",
           "torch.manual_seed(123); dropout(attn_weights)", y, T_TOK, T_TOK, words);
}

static void causal_class(walk *w, const float *batch) {
    section(w, "3.5.3 Implementing a compact causal attention class");
    caption(w, "batch = torch.stack((inputs, inputs), dim=0)");
    SHOW(w, NULL, batch, NULL, 2, T_TOK, D_IN);
    show_shape(w, "", 3, SHAPE(2, T_TOK, D_IN));

    caption(w, "torch.manual_seed(123); ca = CausalAttention(3, 2, context_length=6, 0.0); "
               "ca(batch)");
    attn_rng rng;
    attn_rng_seed(&rng, 123);
    attn_causal_attention ca;
    attn_attention_cache cache;
    float out[2 * T_TOK * D_OUT];
    attn_forward_mode eval = {0, NULL, w->stream};
    if (attn_causal_attention_init(&ca, D_IN, D_OUT, T_TOK, 0.0, 0, &rng, &w->err) != ATTN_OK) {
        w->failed = 1;
        return;
    }
    if (attn_attention_cache_init(&cache, 2, T_TOK, 1, D_OUT, &w->err) != ATTN_OK) {
        w->failed = 1;
    } else {
        if (attn_causal_attention_forward(&ca, batch, 2, T_TOK, out, &eval, &cache, &w->err) !=
            ATTN_OK)
            w->failed = 1;
        attn_attention_cache_free(&cache);
    }
    attn_causal_attention_free(&ca);
    if (w->failed) return;
    show_shape(w, "context_vecs.shape: ", 3, SHAPE(2, T_TOK, D_OUT));
    SHOW(w, NULL, out, "grad_fn=<UnsafeViewBackward0>", 2, T_TOK, D_OUT);
}

/* ---- 3.6 multi-head attention ------------------------------------------ */
static void mha_wrapper(walk *w, const float *batch) {
    section(w, "3.6.1 Stacking multiple single-head attention layers");
    caption(w, "torch.manual_seed(123); MultiHeadAttentionWrapper(3, 2, 6, 0.0, num_heads=2)"
               "(batch)");
    attn_rng rng;
    attn_rng_seed(&rng, 123);
    attn_mha_wrapper m;
    attn_mha_wrapper_cache cache;
    float out[2 * T_TOK * 2 * D_OUT];
    attn_forward_mode eval = {0, NULL, w->stream};
    if (attn_mha_wrapper_init(&m, D_IN, D_OUT, T_TOK, 0.0, 2, 0, &rng, &w->err) != ATTN_OK) {
        w->failed = 1;
        return;
    }
    if (attn_mha_wrapper_cache_init(&cache, &m, 2, T_TOK, &w->err) != ATTN_OK) {
        w->failed = 1;
    } else {
        if (attn_mha_wrapper_forward(&m, batch, 2, T_TOK, out, &eval, &cache, &w->err) != ATTN_OK)
            w->failed = 1;
        attn_mha_wrapper_cache_free(&cache);
    }
    attn_mha_wrapper_free(&m);
    if (w->failed) return;
    SHOW(w, NULL, out, "grad_fn=<CatBackward0>", 2, T_TOK, 2 * D_OUT);
    show_shape(w, "context_vecs.shape: ", 3, SHAPE(2, T_TOK, 2 * D_OUT));
}

/* --figures: the weights each head of MultiHeadAttention(3, 2, 6, 0.0,
 * num_heads=2) computed for the sentence (batch row 0), from its cache. */
static void heads_figures(walk *w, const attn_mha *m, const attn_attention_cache *cache) {
    float hw[2 * T_TOK * T_TOK];
    if (attn_mha_attention_weights(m, cache, 0, hw, &w->err) != ATTN_OK) {
        w->failed = 1;
        return;
    }
    figure(w, "mha-head0-weights", "3.6.2 MultiHeadAttention, head 0 of 2 (head_dim 1)",
           "torch.manual_seed(123); MultiHeadAttention(3, 2, 6, 0.0, num_heads=2)", hw, T_TOK,
           T_TOK, words);
    figure(w, "mha-head1-weights", "3.6.2 MultiHeadAttention, head 1 of 2 (head_dim 1)",
           "torch.manual_seed(123); MultiHeadAttention(3, 2, 6, 0.0, num_heads=2)",
           hw + T_TOK * T_TOK, T_TOK, T_TOK, words);
}

static void run_mha(walk *w, const float *batch, int d_out, int num_heads) {
    attn_rng rng;
    attn_rng_seed(&rng, 123);
    attn_mha m;
    attn_attention_cache cache;
    attn_forward_mode eval = {0, NULL, w->stream};
    float *out = malloc(sizeof(float) * 2 * T_TOK * (size_t)d_out);
    if (!out) {
        attn_fail(&w->err, ATTN_ERR_NOMEM, "out of memory");
        w->failed = 1;
        return;
    }
    if (attn_mha_init(&m, D_IN, d_out, T_TOK, 0.0, num_heads, 0, &rng, &w->err) != ATTN_OK) {
        w->failed = 1;
        free(out);
        return;
    }
    m.path = ATTN_MHA_REFERENCE; /* the chapter's step-by-step computation */
    if (attn_attention_cache_init(&cache, 2, T_TOK, num_heads, d_out, &w->err) != ATTN_OK) {
        w->failed = 1;
    } else {
        if (attn_mha_forward(&m, batch, 2, T_TOK, out, &eval, &cache, &w->err) != ATTN_OK)
            w->failed = 1;
        if (!w->failed && w->figdir && num_heads == 2) heads_figures(w, &m, &cache);
        attn_attention_cache_free(&cache);
    }
    attn_mha_free(&m);
    if (!w->failed) {
        SHOW(w, NULL, out, "grad_fn=<ViewBackward0>", 2, T_TOK, d_out);
        show_shape(w, "context_vecs.shape: ", 3, SHAPE(2, T_TOK, d_out));
    }
    free(out);
}

static void mha_weight_splits(walk *w, const float *batch) {
    section(w, "3.6.2 Implementing multi-head attention with weight splits");
    caption(w, "batched matmul over (b, num_heads) = (1, 2): a @ a.transpose(2, 3)");
    float res[2 * 3 * 3];
    attn_bmm_bt(batched_a, batched_a, res, 2, 3, 4, 3);
    SHOW(w, NULL, res, NULL, 1, 2, 3, 3);
    caption(w, "each head on its own: a[0, h] @ a[0, h].T");
    SHOW(w, "First head:\n ", res, NULL, 3, 3);
    SHOW(w, "\nSecond head:\n ", res + 9, NULL, 3, 3);
    figure(w, "batched-head0", "3.6.2 Multi-head split: the first head's products",
           "a[0, 0] @ a[0, 0].T  (a: (b, num_heads, num_tokens, head_dim) = (1, 2, 3, 4))", res, 3,
           3, NULL);
    figure(w, "batched-head1", "3.6.2 Multi-head split: the second head's products",
           "a[0, 1] @ a[0, 1].T", res + 9, 3, 3, NULL);

    caption(w, "torch.manual_seed(123); MultiHeadAttention(3, d_out=2, 6, 0.0, num_heads=2)"
               "(batch)");
    run_mha(w, batch, D_OUT, 2);
    if (w->failed) return;
    caption(w, "torch.manual_seed(123); MultiHeadAttention(3, d_out=768, 6, 0.0, num_heads=12)"
               "(batch) (summarised: first and last three columns)");
    run_mha(w, batch, 768, 12);
}

typedef struct ch3_opts {
    const char *rng, *figures;
    long long threads;
} ch3_opts;

enum { CH3_RNG, CH3_FIGURES, CH3_THREADS, CH3_OPT_COUNT };

static const char *const streams[] = {"torch-mkl", "torch-cpu", NULL};

static const cli_option ch3_opts_table[] = {
    [CH3_RNG] = {"rng", CLI_CHOICE, NULL, offsetof(ch3_opts, rng), .choices = streams,
                 .def = "torch-mkl",
                 .help = "dropout masks: torch-mkl = MKL builds, the book's\n"
                         "tables (the default: this command reproduces the\n"
                         "book); torch-cpu = non-MKL builds (Debian's\n"
                         "python3-torch): the causal and dropout tables then\n"
                         "follow seed 003's notebook and its SelfAttention_v2\n"
                         "variant"},
    [CH3_FIGURES] = {"figures", CLI_STRING, "DIR", offsetof(ch3_opts, figures),
                     .help = "also write the chapter's matrices as SVG heatmaps, in\n"
                             "the book's order (DIR/01-attn-scores.svg ...), labelled\n"
                             "with the words, the printed values in the cells"},
    [CH3_THREADS] = CLI_THREADS_OPTION(offsetof(ch3_opts, threads)),
};
CLI_TABLE_CHECK(ch3_opts_table, CH3_OPT_COUNT);

const cli_command chapter3_cli = {
    "chapter3",
    "attn chapter3 [--rng torch-mkl|torch-cpu] [--figures DIR] [--threads N]",
    "  Walks chapter 3 of \"Build a Large Language Model (From Scratch)\" and prints\n"
    "  each step's tensor as PyTorch 1.13 prints it, under a one-line caption.\n",
    ch3_opts_table,
    CH3_OPT_COUNT,
    0};

int cmd_chapter3(int argc, char **argv) {
    walk w;
    memset(&w, 0, sizeof w);
    w.out = stdout;
    ch3_opts o;
    cli_parsed parsed;
    int rc = cli_parse(&chapter3_cli, argc, argv, &o, &parsed);
    if (rc) return rc == CLI_HELP ? 0 : rc;
    attn_dropout_stream_parse(o.rng, &w.stream); /* the table allows only valid names */
    w.figdir = o.figures;
    cli_use_threads((int)o.threads, 1); /* the tables are the same for any count */

    attn_error err;
    if (w.figdir && attn_output_check(w.figdir, NULL, 0, NULL, 0, &err) != ATTN_OK) {
        fprintf(stderr, "attn chapter3: --figures: %s\n", err.msg);
        return err.code == ATTN_ERR_INVALID_ARG ? 2 : 1;
    }
    if (w.figdir && mkdir(w.figdir, 0777) != 0 && errno != EEXIST) {
        fprintf(stderr, "attn chapter3: cannot create --figures directory '%s': %s\n", w.figdir,
                strerror(errno));
        return 1;
    }
    fprintf(w.out,
            "Chapter 3, \"Coding attention mechanisms\", step by step (dropout stream: %s%s)\n",
            attn_dropout_stream_name(w.stream),
            w.stream == ATTN_STREAM_TORCH_MKL ? ", the book's tables"
                                              : ", Debian's PyTorch, seed 003's notebook");
    float batch[2 * T_TOK * D_IN];
    memcpy(batch, inputs, sizeof inputs);
    memcpy(batch + T_TOK * D_IN, inputs, sizeof inputs);

    stepwise sw;
    attn_sa_v2 sa_v2, variant;
    int have_v2 = 0, have_variant = 0;
    float causal_weights[T_TOK * T_TOK];
    simple_attention(&w);
    if (!w.failed) trainable_step_by_step(&w, &sw);
    if (!w.failed) {
        self_attention_classes(&w, &sa_v2);
        have_v2 = !w.failed;
    }
    if (!w.failed && w.stream == ATTN_STREAM_TORCH_CPU) {
        seed003_variant(&w, &variant);
        have_variant = !w.failed;
    }
    if (!w.failed) {
        if (w.stream == ATTN_STREAM_TORCH_CPU)
            causal_tables(&w, &variant, "seed 003's sa_v2 variant", &sw, causal_weights);
        else
            causal_tables(&w, &sa_v2, "sa_v2 (seed 789)", &sw, causal_weights);
    }
    if (!w.failed) dropout_tables(&w, causal_weights);
    if (!w.failed) causal_class(&w, batch);
    if (!w.failed) mha_wrapper(&w, batch);
    if (!w.failed) mha_weight_splits(&w, batch);
    if (have_v2) attn_sa_v2_free(&sa_v2);
    if (have_variant) attn_sa_v2_free(&variant);

    if (w.failed) {
        fflush(w.out);
        fprintf(stderr, "attn chapter3: %s\n", w.err.msg);
        return w.err.code == ATTN_ERR_INVALID_ARG ? 2 : 1;
    }
    return 0; /* main.c checks that stdout took it all */
}
