/* nn.Linear forward/backward on row-major arrays (see attn/linear.h). */
#include "attn/linear.h"

#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn/gemm.h"
#include "base/buffers.h"
#include "base/parallel.h"

/* The layer's buffers, listed once: nw weights, nb biases (0: none; a
 * weight in its owner's storage counts 0). The weight is streamed once per
 * token when generating: on huge pages. */
static int linear_buffers(attn_linear *layer, size_t nw, size_t nb, attn_bufs_op op) {
    const attn_buf t[] = {
        ATTN_BUF_KIND(layer->weight, nw, ATTN_BUF_STREAMED),
        ATTN_BUF(layer->grad_weight, nw),
        ATTN_BUF(layer->bias, nb),
        ATTN_BUF(layer->grad_bias, nb),
    };
    return ATTN_BUFS(t, op);
}

attn_status attn_linear_init(attn_linear *layer, int in_features, int out_features, int has_bias,
                             attn_rng *rng, attn_error *err) {
    return attn_linear_init_into(layer, in_features, out_features, has_bias, rng, NULL, NULL, err);
}

attn_status attn_linear_init_view(attn_linear *layer, int in_features, int out_features,
                                  int has_bias, attn_error *err) {
    memset(layer, 0, sizeof *layer);
    if (in_features <= 0 || out_features <= 0)
        return attn_fail(err, ATTN_ERR_INVALID_ARG,
                         "Linear needs positive in_features and out_features (got %d, %d)",
                         in_features, out_features);
    layer->in_features = in_features;
    layer->out_features = out_features;
    layer->has_bias = has_bias ? 1 : 0;
    layer->views = 1;
    return ATTN_OK;
}

void attn_linear_draw(attn_rng *rng, float *values, size_t n, int in_features, int is_bias) {
    if (!is_bias) { /* kaiming_uniform_(a=sqrt(5)) */
        attn_rng_kaiming_uniform(rng, values, n, in_features);
        return;
    }
    const double bound = 1.0 / sqrt((double)in_features);
    attn_rng_uniform(rng, values, n, (float)-bound, (float)bound);
}

attn_status attn_linear_init_into(attn_linear *layer, int in_features, int out_features,
                                  int has_bias, attn_rng *rng, float *weight, float *grad_weight,
                                  attn_error *err) {
    attn_status s = attn_linear_init_view(layer, in_features, out_features, has_bias, err);
    if (s != ATTN_OK) return s;
    layer->views = 0;
    if (!weight != !grad_weight)
        return attn_fail(err, ATTN_ERR_INVALID_ARG,
                         "Linear: the weight and its gradient come from the caller together");
    const size_t nw = (size_t)in_features * (size_t)out_features;
    const size_t nb = has_bias ? (size_t)out_features : 0;
    layer->weight = weight;
    layer->grad_weight = grad_weight;
    layer->weight_given = weight != NULL;
    if (linear_buffers(layer, layer->weight_given ? 0 : nw, nb, ATTN_BUFS_ALLOC) != 0)
        return attn_fail(err, ATTN_ERR_NOMEM, "out of memory allocating Linear(%d, %d)",
                         in_features, out_features);
    if (rng) {
        attn_linear_draw(rng, layer->weight, nw, in_features, 0);
        if (has_bias) attn_linear_draw(rng, layer->bias, nb, in_features, 1);
    }
    return ATTN_OK;
}

void attn_linear_free(attn_linear *layer) {
    if (layer->views) { /* the arena's */
        memset(layer, 0, sizeof *layer);
        return;
    }
    if (layer->weight_given) layer->weight = layer->grad_weight = NULL; /* the owner's */
    linear_buffers(layer, 0, 0, ATTN_BUFS_FREE);
}

attn_status attn_linear_params(attn_linear *layer, const char *prefix, attn_param_list *list,
                               attn_error *err) {
    const int64_t wshape[2] = {layer->out_features, layer->in_features};
    const int64_t bshape[1] = {layer->out_features};
    const int in = layer->in_features;
    char p[ATTN_PARAM_NAME_MAX]; /* LinearWithLoRA's "<prefix>linear." */
    const char *base = prefix;
    if (list->on_linear) {
        attn_status s = list->on_linear(list->on_linear_user, prefix ? prefix : "", layer, err);
        if (s != ATTN_OK) return s;
    }
    if (layer->lora) {
        int n = snprintf(p, sizeof p, "%slinear.", prefix ? prefix : "");
        if (n < 0 || (size_t)n >= sizeof p)
            return attn_fail(err, ATTN_ERR_INVALID_ARG, "parameter prefix '%s' is too long",
                             prefix);
        base = p;
    }
    attn_status s =
        attn_param_list_add_view(list, base, "weight", &layer->weight, &layer->grad_weight, 2,
                                 wshape, ATTN_ROLE_MATRIX, in, err);
    if (s != ATTN_OK) return s;
    list->items[list->count - 1].grad_unset = &layer->grad_unset;
    if (layer->has_bias)
        s = attn_param_list_add_view(list, base, "bias", &layer->bias, &layer->grad_bias, 1, bshape,
                                     ATTN_ROLE_BIAS, in, err);
    if (s != ATTN_OK || !layer->lora) return s;
    snprintf(p, sizeof p, "%slora.", prefix ? prefix : "");
    return attn_lora_params(layer->lora, p, list, err);
}

/* y = bias (or zero) rows, then y += x W^T from x (fp32), x16 (its bf16
 * rounding, given) or x with its rounding left in keep. Without a bias the
 * bf16 engine writes y (beta 0) instead: no clearing pass, no read of the
 * zeros (GPT-2's head: 26 MB a chunk); OpenBLAS would clear y itself,
 * block by block, so fp32 keeps the one pass. */
static void forward_from(const attn_linear *layer, const float *x, const uint16_t *x16,
                         uint16_t *keep, float *y, size_t N) {
    const int in = layer->in_features, out = layer->out_features;
    if (N == 0) return;
    const float beta = layer->has_bias || !layer->bf16 ? 1.0f : 0.0f;
    if (beta != 0.0f) attn_par_fill_rows(y, N, (size_t)out, layer->has_bias ? layer->bias : NULL);
    if (x16)
        attn_gemm_weight_a16(layer->bf16, 0, (int)N, out, in, x16, layer->weight, beta, y);
    else if (keep)
        attn_gemm_weight_keep(layer->bf16, 0, (int)N, out, in, x, layer->weight, beta, y, keep);
    else
        attn_gemm_weight(layer->bf16, 0, (int)N, out, in, x, layer->weight, beta, y);
    if (layer->lora && x) attn_lora_forward(layer->lora, x, (size_t)in, y, (size_t)out, N);
}

void attn_linear_forward(const attn_linear *layer, const float *x, float *y, size_t N) {
    forward_from(layer, x, NULL, NULL, y, N);
}

void attn_linear_forward_keep(const attn_linear *layer, const float *x, float *y, size_t N,
                              uint16_t *x16) {
    forward_from(layer, x, NULL, x16, y, N);
}

void attn_linear_forward_x16(const attn_linear *layer, const uint16_t *x16, float *y, size_t N) {
    forward_from(layer, NULL, x16, NULL, y, N);
}

float attn_linear_grad_beta(attn_linear *layer) {
    const float beta = layer->grad_unset ? 0.0f : 1.0f;
    layer->grad_unset = 0;
    return beta;
}

void attn_linear_grad_settle(attn_linear *layer) {
    if (!layer->grad_unset) return;
    layer->grad_unset = 0;
    if (!layer->grad_weight) return;
    attn_par_zero(layer->grad_weight, (size_t)layer->in_features * (size_t)layer->out_features);
}

/* grad_weight (+)= dy^T x, grad_bias += sum_n dy and dx = beta_x dx + dy W,
 * from x (fp32) or x16 (its bf16 rounding, kept from the forward). */
static void backward_from(attn_linear *layer, const float *x, const uint16_t *x16, const float *dy,
                          float *dx, float beta_x, size_t N) {
    const int in = layer->in_features, out = layer->out_features;
    if (N == 0) return;
    const float beta_w = attn_linear_grad_beta(layer);
    if (x16)
        attn_gemm_linear_grads_x16(layer->bf16, 0, (int)N, in, out, x16, dy, layer->weight, beta_w,
                                   layer->grad_weight, beta_x, dx);
    else /* the public backward: always added into dx */
        attn_gemm_linear_grads(layer->bf16, 0, (int)N, in, out, x, dy, layer->weight, beta_w,
                               layer->grad_weight, dx);
    if (layer->has_bias && layer->grad_bias)
        attn_par_col_sums(dy, N, (size_t)out, (size_t)out, layer->grad_bias);
    if (layer->lora && x)
        attn_lora_backward(layer->lora, x, (size_t)in, dy, (size_t)out, dx, (size_t)in, N);
}

void attn_linear_backward_x16(attn_linear *layer, const uint16_t *x16, const float *dy, float *dx,
                              float beta_x, size_t N) {
    backward_from(layer, NULL, x16, dy, dx, beta_x, N);
}

void attn_linear_backward(attn_linear *layer, const float *x, const float *dy, float *dx,
                          size_t N) {
    backward_from(layer, x, NULL, dy, dx, 1.0f, N);
}
