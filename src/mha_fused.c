/* MultiHeadAttention, fused path: one sgemm for Q, K and V against a packed
 * copy of the three weights, the tiled attention kernel
 * (attn/flash_attention.h) straight on the packed projections, then out_proj.
 * The public weights stay W_query / W_key / W_value; their gradients are
 * accumulated in place, straight from the packed gradient by three sgemms. */
#include "mha_fused.h"

#include <stdlib.h>
#include <string.h>

#include "alloc_huge.h"
#include "attn/gemm.h"

void attn_mha_fused_state_free(attn_mha_fused_state *st) {
    if (!st) return;
    free(st->w_qkv);
    free(st->b_qkv);
    free(st->qkv);
    free(st->d_qkv);
    free(st->lse);
    free(st->dw_qkv);
    attn_flash_dropout_free(&st->drop);
    attn_flash_workspace_free(&st->ws);
    free(st);
}

/* The fused state for (m, B, T), made on first use (a cache from either init
 * function works). */
static attn_status ensure_state(const attn_mha *m, int B, int T, attn_attention_cache *cache,
                                attn_error *err) {
    attn_mha_fused_state *st = cache->fused;
    if (st && st->B == B && st->T == T && st->d_in == m->d_in && st->d_out == m->d_out &&
        st->heads == m->num_heads && st->qkv_bias == m->qkv_bias)
        return ATTN_OK;
    attn_mha_fused_state_free(st);
    cache->fused = NULL;
    st = calloc(1, sizeof *st);
    if (!st) return attn_fail(err, ATTN_ERR_NOMEM, "MultiHeadAttention: out of memory");
    const size_t N = (size_t)B * (size_t)T, d3 = 3 * (size_t)m->d_out;
    st->B = B;
    st->T = T;
    st->d_in = m->d_in;
    st->d_out = m->d_out;
    st->heads = m->num_heads;
    st->qkv_bias = m->qkv_bias;
    st->w_qkv = malloc(d3 * (size_t)m->d_in * sizeof(float));
    st->b_qkv = m->qkv_bias ? malloc(d3 * sizeof(float)) : NULL;
    st->qkv = attn_alloc_huge(N * d3 * sizeof(float));
    st->d_qkv = attn_alloc_huge(N * d3 * sizeof(float));
    st->lse = malloc((size_t)B * (size_t)m->num_heads * (size_t)T * sizeof(float));
    if (!st->w_qkv || (m->qkv_bias && !st->b_qkv) || !st->qkv || !st->d_qkv || !st->lse) {
        attn_mha_fused_state_free(st);
        return attn_fail(err, ATTN_ERR_NOMEM,
                         "MultiHeadAttention: out of memory for the fused state (B = %d, T = %d)",
                         B, T);
    }
    cache->fused = st;
    return ATTN_OK;
}

/* The kernel's options: with the bf16 engine the attention runs in bf16 too
 * (bf16 operands, fp32 accumulation, fp32 softmax), as autocast does. */
static attn_flash_options flash_options(const attn_mha *m) {
    attn_flash_options o = m->flash;
    if (m->bf16) o.precision = ATTN_PRECISION_BF16;
    return o;
}

static attn_flash_problem problem_of(const attn_mha *m, attn_mha_fused_state *st,
                                     attn_attention_cache *cache, int B, int T) {
    const size_t d = (size_t)m->d_out, d3 = 3 * d;
    attn_flash_problem pb = {
        B,  T,  m->num_heads, m->head_dim,    st->qkv, st->qkv + d, st->qkv + 2 * d,
        d3, d3, d3,           cache->context, d,       st->lse,     &st->drop};
    return pb;
}

/* The kernels compute the book's attention; a variant is refused by name. */
static attn_status book_only(const attn_mha *m, attn_error *err) {
    if (attn_attention_is_book(&m->spec)) return ATTN_OK;
    return attn_fail(err, ATTN_ERR_INVALID_ARG,
                     "MultiHeadAttention: the fused attention kernels compute the book's "
                     "attention only (no grouped-query, window, RoPE, ALiBi, qk_norm or softcap "
                     "yet); use the reference path (ATTN_MHA_REFERENCE)");
}

attn_status attn_mha_fused_forward(const attn_mha *m, const float *x, int B, int T, float *out,
                                   const attn_forward_mode *mode, attn_attention_cache *cache,
                                   attn_error *err) {
    attn_status s0 = book_only(m, err);
    if (s0 != ATTN_OK) return s0;
    attn_status s = ensure_state(m, B, T, cache, err);
    if (s != ATTN_OK) return s;
    attn_mha_fused_state *st = cache->fused;
    const size_t N = (size_t)B * (size_t)T, d = (size_t)m->d_out, d3 = 3 * d, din = (size_t)m->d_in;
    /* Packed weights: the three (d_out, d_in) blocks one after the other. */
    const attn_linear *lin[3] = {&m->W_query, &m->W_key, &m->W_value};
    for (int i = 0; i < 3; i++) {
        memcpy(st->w_qkv + (size_t)i * d * din, lin[i]->weight, d * din * sizeof(float));
        if (st->b_qkv) memcpy(st->b_qkv + (size_t)i * d, lin[i]->bias, d * sizeof(float));
    }
    /* qkv (N, 3 d_out) = x W_qkv^T (+ b_qkv) in one sgemm */
    if (st->b_qkv)
        for (size_t n = 0; n < N; n++)
            memcpy(st->qkv + n * d3, st->b_qkv, d3 * sizeof(float));
    attn_gemm(m->bf16, m->flash.threads, 0, 1, (int)N, (int)d3, (int)din, 1.0f, x, (int)din,
              st->w_qkv, (int)din, st->b_qkv ? 1.0f : 0.0f, st->qkv, (int)d3);
    /* Dropout only in training with p > 0, drawn as PyTorch draws it. */
    const double p = mode && mode->training ? m->dropout : 0.0;
    s = attn_flash_dropout_draw(&st->drop, mode ? mode->rng : NULL,
                                mode ? mode->stream : ATTN_STREAM_TORCH_CPU, p, B, m->num_heads, T,
                                err);
    if (s != ATTN_OK) return s;
    cache->dropout_applied = p > 0.0;
    attn_flash_problem pb = problem_of(m, st, cache, B, T);
    const attn_flash_options fo = flash_options(m);
    s = attn_flash_forward(&pb, &fo, &st->ws, err);
    if (s != ATTN_OK) return s;
    attn_linear_forward(&m->out_proj, cache->context, out, N);
    return ATTN_OK;
}

attn_status attn_mha_fused_backward(attn_mha *m, const float *x, int B, int T, const float *d_out,
                                    float *dx, const attn_attention_cache *cache, attn_error *err) {
    attn_mha_fused_state *st = cache->fused;
    if (!st || st->B != B || st->T != T)
        return attn_fail(err, ATTN_ERR_STATE,
                         "MultiHeadAttention: backward needs a fused forward on the same cache");
    const size_t N = (size_t)B * (size_t)T, d = (size_t)m->d_out, d3 = 3 * d, din = (size_t)m->d_in;
    memset(cache->d_context, 0, N * d * sizeof(float));
    attn_linear_backward(&m->out_proj, cache->context, d_out, cache->d_context, N);
    memset(st->d_qkv, 0, N * d3 * sizeof(float));
    attn_flash_problem pb = problem_of(m, st, (attn_attention_cache *)cache, B, T);
    attn_flash_grads g = {cache->d_context,  d,  st->d_qkv, st->d_qkv + d,
                          st->d_qkv + 2 * d, d3, d3,        d3};
    const attn_flash_options fo = flash_options(m);
    attn_status s = attn_flash_backward(&pb, &g, &fo, &st->ws, err);
    if (s != ATTN_OK) return s;
    attn_linear *lin[3] = {&m->W_query, &m->W_key, &m->W_value};
    if (m->bf16) {
        /* bf16: one product for the three weight gradients (x converted once,
         * one large GEMM), then added into each public grad. */
        if (!st->dw_qkv && !(st->dw_qkv = malloc(d3 * din * sizeof(float))))
            return attn_fail(err, ATTN_ERR_NOMEM, "MultiHeadAttention: out of memory");
        attn_gemm(m->bf16, m->flash.threads, 1, 0, (int)d3, (int)din, (int)N, 1.0f, st->d_qkv,
                  (int)d3, x, (int)din, 0.0f, st->dw_qkv, (int)din);
        for (int i = 0; i < 3; i++) {
            const float *src = st->dw_qkv + (size_t)i * d * din;
            float *dst = lin[i]->grad_weight;
            for (size_t k = 0; k < d * din; k++)
                dst[k] += src[k];
        }
    } else {
        /* W.grad (d_out, d_in) += dQKV_block^T x, straight into each public grad. */
        for (int i = 0; i < 3; i++)
            attn_gemm(NULL, m->flash.threads, 1, 0, (int)d, (int)din, (int)N, 1.0f,
                      st->d_qkv + (size_t)i * d, (int)d3, x, (int)din, 1.0f, lin[i]->grad_weight,
                      (int)din);
    }
    if (m->qkv_bias)
        for (int i = 0; i < 3; i++)
            for (size_t n = 0; n < N; n++) {
                const float *row = st->d_qkv + n * d3 + (size_t)i * d;
                for (size_t o = 0; o < d; o++)
                    lin[i]->grad_bias[o] += row[o];
            }
    /* dx (N, d_in) += dQKV (N, 3 d_out) W_qkv (3 d_out, d_in) in one sgemm */
    if (dx)
        attn_gemm(m->bf16, m->flash.threads, 0, 0, (int)N, (int)din, (int)d3, 1.0f, st->d_qkv,
                  (int)d3, st->w_qkv, (int)din, 1.0f, dx, (int)din);
    return ATTN_OK;
}
