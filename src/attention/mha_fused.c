/* MultiHeadAttention, fused path: one sgemm for Q, K and V against the
 * three weights as one block (the module keeps them adjacent; a model on
 * borrowed tensors gets a packed copy), the tiled attention kernel
 * (attn/flash_attention.h) straight on the packed projections, then out_proj.
 * The public weights stay W_query / W_key / W_value; their gradients are
 * accumulated in place, straight from the packed gradient.
 * The variants: the window, soft-cap and ALiBi inside the kernel (its score
 * tile, attn_flash_problem.window and .scores); the rest around it with the
 * attention core's functions (attn/attention.h): QK-norm and RoPE on the
 * packed q and k, grouped-query K and V repeated per query head (their
 * gradients summed back over each group). */
#include "mha_fused.h"

#include <stdlib.h>
#include <string.h>

#include "attn/engine_ops.h"
#include "attn/gemm.h"
#include "base/buffers.h"
#include "base/parallel.h"
#include "nn/linear_on.h"

static int grouped(const attn_mha *m) {
    return m->kv_dim != m->d_out;
}

/* W_query, W_key and W_value's weights (grad: their gradients) as one
 * (d3, d_in) block, when the three lie adjacent (the module's own storage,
 * a model's arena), else NULL (attn.torch's model points them at torch
 * tensors; a frozen one has no gradient). */
static float *qkv_block(const attn_mha *m, int grad) {
    float *const b = grad ? m->W_query.grad_weight : m->W_query.weight;
    if (!b) return NULL;
    const size_t q = (size_t)m->d_out * (size_t)m->d_in, kv = (size_t)m->kv_dim * (size_t)m->d_in;
    const attn_linear *l[3] = {&m->W_query, &m->W_key, &m->W_value};
    const float *at[3] = {b, b + q, b + q + kv};
    for (int i = 0; i < 3; i++)
        if ((grad ? l[i]->grad_weight : l[i]->weight) != at[i]) return NULL;
    return b;
}

/* Element counts of the state's buffers (0: none). */
typedef struct state_sizes {
    size_t b, qkv, lse, raw, rstd, kv_x;
} state_sizes;

static state_sizes sizes_for(const attn_mha *m, int B, int T) {
    const size_t N = (size_t)B * (size_t)T, d = (size_t)m->d_out, kv = (size_t)m->kv_dim;
    const size_t d3 = d + 2 * kv, H = (size_t)m->num_heads;
    state_sizes s = {m->qkv_bias ? d3 : 0, N * d3, (size_t)B * H * (size_t)T, 0, 0, 0};
    if (m->spec.qk_norm) {
        s.raw = N * (d + kv);
        s.rstd = N * (H + (size_t)m->spec.kv_heads);
    }
    if (grouped(m)) s.kv_x = N * 2 * d;
    return s;
}

/* The state's buffers, listed once. w_qkv is made when the weights are not
 * adjacent (qkv_block); dw_qkv, x16 and ctx16 are the bf16 engine's; each
 * on its first use. */
static int state_buffers(attn_mha_fused_state *st, const state_sizes *s, attn_bufs_op op) {
    const attn_buf t[] = {
        ATTN_BUF(st->w_qkv, 0),
        ATTN_BUF(st->b_qkv, s->b),
        ATTN_BUF_KIND(st->qkv, s->qkv, ATTN_BUF_HUGE),
        ATTN_BUF_KIND(st->d_qkv, s->qkv, ATTN_BUF_HUGE),
        ATTN_BUF(st->lse, s->lse),
        ATTN_BUF(st->dw_qkv, 0),
        ATTN_BUF(st->x16, 0),
        ATTN_BUF(st->ctx16, 0),
        ATTN_BUF(st->raw, s->raw),
        ATTN_BUF(st->rstd, s->rstd),
        ATTN_BUF(st->d_raw, s->raw),
        ATTN_BUF_KIND(st->kv_x, s->kv_x, ATTN_BUF_HUGE),
        ATTN_BUF_KIND(st->d_kv_x, s->kv_x, ATTN_BUF_HUGE),
    };
    return ATTN_BUFS(t, op);
}

void attn_mha_fused_state_free(attn_mha_fused_state *st) {
    if (!st) return;
    const state_sizes none = {0};
    state_buffers(st, &none, ATTN_BUFS_FREE);
    attn_flash_dropout_free(&st->drop);
    attn_flash_workspace_free(&st->ws);
    free(st);
}

/* The fused state for (m, B, T), made on first use at the cache's
 * (B_max, T_max) (a cache from either init function works), then reused for
 * every (B, T) within them. */
static attn_status ensure_state(const attn_mha *m, int B, int T, attn_attention_cache *cache,
                                attn_error *err) {
    attn_mha_fused_state *st = cache->fused;
    if (st && B <= st->B_max && T <= st->T_max && st->d_in == m->d_in && st->d_out == m->d_out &&
        st->heads == m->num_heads && st->qkv_bias == m->qkv_bias && st->kv_dim == m->kv_dim &&
        (!m->spec.qk_norm || st->raw)) {
        st->B = B;
        st->T = T;
        return ATTN_OK;
    }
    attn_mha_fused_state_free(st);
    cache->fused = NULL;
    st = calloc(1, sizeof *st);
    if (!st) return attn_fail(err, ATTN_ERR_NOMEM, "MultiHeadAttention: out of memory");
    st->B = B;
    st->T = T;
    st->B_max = B > cache->B_max ? B : cache->B_max;
    st->T_max = T > cache->T_max ? T : cache->T_max;
    st->d_in = m->d_in;
    st->d_out = m->d_out;
    st->heads = m->num_heads;
    st->qkv_bias = m->qkv_bias;
    st->kv_dim = m->kv_dim;
    const state_sizes s = sizes_for(m, st->B_max, st->T_max);
    if (state_buffers(st, &s, ATTN_BUFS_ALLOC) != 0) {
        attn_mha_fused_state_free(st);
        return attn_fail(err, ATTN_ERR_NOMEM,
                         "MultiHeadAttention: out of memory for the fused state (B = %d, T = %d)",
                         st->B_max, st->T_max);
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

attn_flash_problem attn_mha_fused_problem(const attn_mha *m, attn_mha_fused_state *st,
                                          attn_attention_cache *cache, int B, int T) {
    const size_t d = (size_t)m->d_out, d3 = d + 2 * (size_t)m->kv_dim;
    /* Grouped-query: the kernel reads K | V repeated per query head. */
    const float *k = st->kv_x ? st->kv_x : st->qkv + d;
    const float *v = st->kv_x ? st->kv_x + d : st->qkv + d + (size_t)m->kv_dim;
    const size_t ldkv = st->kv_x ? 2 * d : d3;
    attn_flash_problem pb = {B,       T,         m->num_heads,   m->head_dim, st->qkv,        k,
                             v,       d3,        ldkv,           ldkv,        cache->context, d,
                             st->lse, &st->drop, m->spec.window, &m->spec};
    return pb;
}

/* QK-norm (per token: the packed rows are strided) and RoPE on the packed q
 * and k; then K and V repeated per query head when grouped. */
static void prepare(const attn_mha *m, attn_mha_fused_state *st, size_t N, int T) {
    const attn_attention_spec *sp = &m->spec;
    const size_t d = (size_t)m->d_out, kv = (size_t)m->kv_dim, d3 = d + 2 * kv;
    const size_t H = (size_t)m->num_heads, KV = (size_t)sp->kv_heads, hd = (size_t)m->head_dim;
    if (sp->qk_norm) {
        for (size_t n = 0; n < N; n++) {
            float *q = st->qkv + n * d3, *raw = st->raw + n * (d + kv);
            float *r = st->rstd + n * (H + KV);
            memcpy(raw, q, (d + kv) * sizeof(float));
            attn_layernorm_forward(&m->q_norm, raw, q, NULL, r, H);
            attn_layernorm_forward(&m->k_norm, raw + d, q + d, NULL, r + H, KV);
        }
    }
    attn_rope_apply(sp, st->qkv, N, T, d3, (int)H, 0, 0);
    attn_rope_apply(sp, st->qkv + d, N, T, d3, (int)KV, 0, 0);
    if (!st->kv_x) return;
    for (size_t n = 0; n < N; n++)
        for (size_t h = 0; h < H; h++) {
            const size_t kvh = (size_t)attn_attention_kv_head(sp, (int)h);
            const float *src = st->qkv + n * d3 + d + kvh * hd;
            memcpy(st->kv_x + n * 2 * d + h * hd, src, hd * sizeof(float));
            memcpy(st->kv_x + n * 2 * d + d + h * hd, src + kv, hd * sizeof(float));
        }
}

/* prepare's backward on d_qkv: the group sums of dK, dV (in head order),
 * RoPE's inverse rotation, then QK-norm's backward. */
static void unprepare(attn_mha *m, attn_mha_fused_state *st, size_t N, int T) {
    const attn_attention_spec *sp = &m->spec;
    const size_t d = (size_t)m->d_out, kv = (size_t)m->kv_dim, d3 = d + 2 * kv;
    const size_t H = (size_t)m->num_heads, KV = (size_t)sp->kv_heads, hd = (size_t)m->head_dim;
    if (st->kv_x) {
        for (size_t n = 0; n < N; n++)
            for (size_t h = 0; h < H; h++) {
                const size_t kvh = (size_t)attn_attention_kv_head(sp, (int)h);
                const float *dk = st->d_kv_x + n * 2 * d + h * hd, *dv = dk + d;
                float *tk = st->d_qkv + n * d3 + d + kvh * hd, *tv = tk + kv;
                for (size_t i = 0; i < hd; i++) {
                    tk[i] += dk[i];
                    tv[i] += dv[i];
                }
            }
    }
    attn_rope_apply(sp, st->d_qkv, N, T, d3, (int)H, 0, 1);
    attn_rope_apply(sp, st->d_qkv + d, N, T, d3, (int)KV, 0, 1);
    if (!sp->qk_norm) return;
    memset(st->d_raw, 0, N * (d + kv) * sizeof(float));
    for (size_t n = 0; n < N; n++) {
        float *g = st->d_qkv + n * d3, *dr = st->d_raw + n * (d + kv);
        const float *raw = st->raw + n * (d + kv), *r = st->rstd + n * (H + KV);
        attn_layernorm_backward(&m->q_norm, raw, NULL, r, g, dr, H);
        attn_layernorm_backward(&m->k_norm, raw + d, NULL, r + H, g + d, dr + d, KV);
        memcpy(g, dr, (d + kv) * sizeof(float));
    }
}

/* The QKV product: st->qkv (N, d3) = x W_qkv^T (+ b_qkv) in one product
 * over the three adjacent (else packed) weights, the adapters added into
 * their columns; on the bf16 engine x rounded once and kept (st->x16), as
 * the context will be for out_proj (st->kept16). */
static attn_status qkv_forward(const attn_mha *m, attn_mha_fused_state *st, const float *x,
                               size_t N, attn_error *err) {
    const size_t d = (size_t)m->d_out, din = (size_t)m->d_in;
    const size_t kv = (size_t)m->kv_dim, d3 = d + 2 * kv;
    /* The three (rows, d_in) weights one after the other: in place, or packed. */
    const attn_linear *lin[3] = {&m->W_query, &m->W_key, &m->W_value};
    const size_t row0[3] = {0, d, d + kv}, rows[3] = {d, kv, kv};
    const float *w_qkv = qkv_block(m, 0);
    if (!w_qkv && !st->w_qkv && !(st->w_qkv = malloc(d3 * din * sizeof(float))))
        return attn_fail(err, ATTN_ERR_NOMEM, "MultiHeadAttention: out of memory");
    for (int i = 0; i < 3; i++) {
        if (!w_qkv)
            memcpy(st->w_qkv + row0[i] * din, lin[i]->weight, rows[i] * din * sizeof(float));
        if (st->b_qkv) memcpy(st->b_qkv + row0[i], lin[i]->bias, rows[i] * sizeof(float));
    }
    if (!w_qkv) w_qkv = st->w_qkv;
    if (st->b_qkv) attn_par_fill_rows(st->qkv, N, d3, st->b_qkv);
    /* bf16: x and the context rounded once, here, and kept for the backward
     * (room for the state's largest shape). */
    const size_t cap = (size_t)st->B_max * (size_t)st->T_max;
    if (m->bf16 && !st->x16) st->x16 = malloc(cap * din * sizeof(uint16_t));
    if (m->bf16 && !st->ctx16) st->ctx16 = malloc(cap * d * sizeof(uint16_t));
    st->kept16 = m->bf16 && st->x16 && st->ctx16 && !m->out_proj.lora; /* an adapter: fp32 x */
    if (st->kept16)
        attn_gemm_weight_keep(m->bf16, m->flash.threads, (int)N, (int)d3, (int)din, x, w_qkv,
                              st->b_qkv ? 1.0f : 0.0f, st->qkv, st->x16);
    else
        attn_gemm_weight(m->bf16, m->flash.threads, (int)N, (int)d3, (int)din, x, w_qkv,
                         st->b_qkv ? 1.0f : 0.0f, st->qkv);
    for (int i = 0; i < 3; i++) /* adapters (attn/lora.h) add into their columns */
        if (lin[i]->lora) attn_lora_forward(lin[i]->lora, x, din, st->qkv + row0[i], d3, N);
    return ATTN_OK;
}

/* The one attention core on the packed st->qkv: QK-norm, RoPE and the
 * grouped K/V repeat in place, the dropout draw, the flash kernel ->
 * cache->context (B T, d_out). */
static attn_status core_forward(const attn_mha *m, attn_mha_fused_state *st, int B, int T,
                                const attn_forward_mode *mode, attn_attention_cache *cache,
                                attn_error *err) {
    prepare(m, st, (size_t)B * (size_t)T, T);
    /* Dropout only in training with p > 0, drawn as PyTorch draws it. */
    const double p = mode && mode->training ? m->dropout : 0.0;
    attn_status s = attn_flash_dropout_draw(&st->drop, mode ? mode->rng : NULL,
                                            mode ? mode->stream : ATTN_STREAM_TORCH_CPU, p, B,
                                            m->num_heads, T, err);
    if (s != ATTN_OK) return s;
    cache->dropout_applied = p > 0.0;
    attn_flash_problem pb = attn_mha_fused_problem(m, st, cache, B, T);
    const attn_flash_options fo = flash_options(m);
    return attn_flash_forward(&pb, &fo, &st->ws, err);
}

attn_status attn_mha_qkv_forward(const attn_mha *m, const float *x, int B, int T,
                                 attn_attention_cache *cache, attn_error *err) {
    attn_status s = ensure_state(m, B, T, cache, err);
    return s == ATTN_OK ? qkv_forward(m, cache->fused, x, (size_t)B * (size_t)T, err) : s;
}

/* The state of a fused forward for (B, T) on cache, else NULL and the error. */
static attn_mha_fused_state *made_state(const attn_attention_cache *cache, int B, int T,
                                        attn_error *err) {
    attn_mha_fused_state *st = cache->fused;
    if (st && st->B == B && st->T == T) return st;
    attn_fail(err, ATTN_ERR_STATE,
              "MultiHeadAttention: backward needs a fused forward on the same cache");
    return NULL;
}

attn_status attn_mha_core_forward(const attn_mha *m, int B, int T, const attn_forward_mode *mode,
                                  attn_attention_cache *cache, attn_error *err) {
    attn_mha_fused_state *st = made_state(cache, B, T, err);
    return st ? core_forward(m, st, B, T, mode, cache, err) : ATTN_ERR_STATE;
}

/* The three calls on engine e's ops, or (e NULL) on the kernels: the
 * sequence below is written once for both. */
static attn_status qkv_fwd(const attn_engine *e, const attn_mha *m, const float *x, int B, int T,
                           attn_attention_cache *cache, attn_error *err) {
    return e ? e->ops->linear_qkv_forward(e, m, x, B, T, cache, err)
             : attn_mha_qkv_forward(m, x, B, T, cache, err);
}

static attn_status core_fwd(const attn_engine *e, const attn_mha *m, int B, int T,
                            const attn_forward_mode *mode, attn_attention_cache *cache,
                            attn_error *err) {
    return e ? e->ops->attention_core_forward(e, m, B, T, mode, cache, err)
             : attn_mha_core_forward(m, B, T, mode, cache, err);
}

attn_status attn_mha_fused_forward(const attn_engine *e, const attn_mha *m, const float *x, int B,
                                   int T, float *out, const attn_forward_mode *mode,
                                   attn_attention_cache *cache, attn_error *err) {
    attn_status s = qkv_fwd(e, m, x, B, T, cache, err);
    if (s == ATTN_OK) s = core_fwd(e, m, B, T, mode, cache, err);
    if (s != ATTN_OK) return s;
    const attn_mha_fused_state *st = cache->fused;
    /* bf16: the context rounded once, kept for out_proj's backward */
    attn_linear_forward_on(e, &m->out_proj, cache->context, st->kept16 ? st->ctx16 : NULL, out,
                           (size_t)B * (size_t)T);
    return ATTN_OK;
}

/* The QKV product's backward from st->d_qkv: the three weight gradients
 * (and biases') added in place, a frozen one's (NULL) skipped, and dx
 * (N, d_in) += dQKV W_qkv. */
static attn_status qkv_backward(attn_mha *m, attn_mha_fused_state *st, const float *x, float *dx,
                                size_t N, attn_error *err) {
    const size_t d = (size_t)m->d_out, din = (size_t)m->d_in;
    const size_t kv = (size_t)m->kv_dim, d3 = d + 2 * kv;
    attn_linear *lin[3] = {&m->W_query, &m->W_key, &m->W_value};
    const size_t row0[3] = {0, d, d + kv}, rows[3] = {d, kv, kv};
    const float *w_qkv = qkv_block(m, 0);
    if (!w_qkv) w_qkv = st->w_qkv; /* as the forward's */
    const int any = lin[0]->grad_weight || lin[1]->grad_weight || lin[2]->grad_weight;
    if (m->bf16) {
        /* bf16: one product for the three weight gradients (x and dQKV
         * converted once, one large GEMM), added straight into the adjacent
         * gradients (else into dw_qkv, then each); and dx (N, d_in) += dQKV
         * (N, d3) W_qkv (d3, d_in). */
        float *dw = qkv_block(m, 1);
        /* The block is written whole only when all three are unset. */
        const int write = dw && lin[0]->grad_unset && lin[1]->grad_unset && lin[2]->grad_unset;
        for (int i = 0; i < 3; i++) {
            if (write)
                lin[i]->grad_unset = 0; /* written below */
            else
                attn_linear_grad_settle(lin[i]);
        }
        const float beta_w = dw && !write ? 1.0f : 0.0f;
        if (any && !dw && !st->dw_qkv && !(st->dw_qkv = malloc(d3 * din * sizeof(float))))
            return attn_fail(err, ATTN_ERR_NOMEM, "MultiHeadAttention: out of memory");
        if (any && !dw) dw = st->dw_qkv;
        if (st->kept16)
            attn_gemm_linear_grads_x16(m->bf16, m->flash.threads, (int)N, (int)din, (int)d3,
                                       st->x16, st->d_qkv, w_qkv, beta_w, dw, 1.0f, dx);
        else
            attn_gemm_linear_grads(m->bf16, m->flash.threads, (int)N, (int)din, (int)d3, x,
                                   st->d_qkv, w_qkv, beta_w, dw, dx);
        for (int i = 0; dw && dw == st->dw_qkv && i < 3; i++)
            if (lin[i]->grad_weight)
                attn_par_add(lin[i]->grad_weight, st->dw_qkv + row0[i] * din, rows[i] * din);
    } else {
        /* W.grad (rows, d_in) (+)= dQKV_block^T x, straight into each public grad. */
        for (int i = 0; i < 3; i++)
            if (lin[i]->grad_weight)
                attn_gemm(NULL, m->flash.threads, 1, 0, (int)rows[i], (int)din, (int)N, 1.0f,
                          st->d_qkv + row0[i], (int)d3, x, (int)din, attn_linear_grad_beta(lin[i]),
                          lin[i]->grad_weight, (int)din);
        /* dx (N, d_in) += dQKV (N, d3) W_qkv (d3, d_in) in one sgemm */
        if (dx)
            attn_gemm(NULL, m->flash.threads, 0, 0, (int)N, (int)din, (int)d3, 1.0f, st->d_qkv,
                      (int)d3, w_qkv, (int)din, 1.0f, dx, (int)din);
    }
    for (int i = 0; m->qkv_bias && i < 3; i++)
        if (lin[i]->grad_bias)
            attn_par_col_sums(st->d_qkv + row0[i], N, rows[i], d3, lin[i]->grad_bias);
    for (int i = 0; i < 3; i++)
        if (lin[i]->lora)
            attn_lora_backward(lin[i]->lora, x, din, st->d_qkv + row0[i], d3, dx, din, N);
    return ATTN_OK;
}

/* The core's backward from cache->d_context: st->d_qkv (zeroed first) from
 * the flash kernel's backward, then the group sums, RoPE's and QK-norm's
 * backward (unprepare). */
static attn_status core_backward(attn_mha *m, attn_mha_fused_state *st, int B, int T,
                                 const attn_attention_cache *cache, attn_error *err) {
    const size_t N = (size_t)B * (size_t)T, d = (size_t)m->d_out;
    const size_t kv = (size_t)m->kv_dim, d3 = d + 2 * kv;
    attn_par_zero(st->d_qkv, N * d3);
    attn_flash_problem pb = attn_mha_fused_problem(m, st, (attn_attention_cache *)cache, B, T);
    attn_flash_grads g = {cache->d_context,   d,  st->d_qkv, st->d_qkv + d,
                          st->d_qkv + d + kv, d3, d3,        d3};
    if (st->d_kv_x) { /* grouped: per query head, summed over each group after */
        attn_par_zero(st->d_kv_x, N * 2 * d);
        g.dk = st->d_kv_x;
        g.dv = st->d_kv_x + d;
        g.ld_dk = g.ld_dv = 2 * d;
    }
    const attn_flash_options fo = flash_options(m);
    attn_status s = attn_flash_backward(&pb, &g, &fo, &st->ws, err);
    if (s != ATTN_OK) return s;
    unprepare(m, st, N, T);
    return ATTN_OK;
}

attn_status attn_mha_qkv_backward(attn_mha *m, const float *x, float *dx, int B, int T,
                                  const attn_attention_cache *cache, attn_error *err) {
    attn_mha_fused_state *st = made_state(cache, B, T, err);
    return st ? qkv_backward(m, st, x, dx, (size_t)B * (size_t)T, err) : ATTN_ERR_STATE;
}

attn_status attn_mha_core_backward(attn_mha *m, int B, int T, const attn_attention_cache *cache,
                                   attn_error *err) {
    attn_mha_fused_state *st = made_state(cache, B, T, err);
    return st ? core_backward(m, st, B, T, cache, err) : ATTN_ERR_STATE;
}

attn_status attn_mha_fused_backward(const attn_engine *e, attn_mha *m, const float *x, int B, int T,
                                    const float *d_out, float *dx,
                                    const attn_attention_cache *cache, attn_error *err) {
    const attn_mha_fused_state *st = made_state(cache, B, T, err);
    if (!st) return ATTN_ERR_STATE;
    const size_t N = (size_t)B * (size_t)T;
    /* kept: d_context written (beta 0), not added to: no clearing */
    if (!st->kept16) attn_par_zero(cache->d_context, N * (size_t)m->d_out);
    attn_linear_backward_on(e, &m->out_proj, cache->context, st->kept16 ? st->ctx16 : NULL, d_out,
                            cache->d_context, 0.0f, N);
    attn_status s = e ? e->ops->attention_core_backward(e, m, B, T, cache, err)
                      : attn_mha_core_backward(m, B, T, cache, err);
    if (s != ATTN_OK) return s;
    return e ? e->ops->linear_qkv_backward(e, m, x, dx, B, T, cache, err)
             : attn_mha_qkv_backward(m, x, dx, B, T, cache, err);
}
