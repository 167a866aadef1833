/* The arithmetic of a model, one rule (attn/cost.h). */
#include "attn/cost.h"

#include "attn/feedforward.h"

double attn_causal_pairs(double T, double window) {
    if (window <= 0 || window >= T) return T * (T + 1.0) / 2.0;
    /* rows 0 .. window-1 see i + 1 keys; the rest see window each */
    return window * (window + 1.0) / 2.0 + (T - window) * window;
}

/* Weight elements one token multiplies through, per layer and in the head
 * (head elements: C x its width). */
static double weights_per_token(const attn_gpt_config *c, double head) {
    const double C = c->emb_dim, H = c->n_heads > 0 ? c->n_heads : 1;
    const double KV = (c->n_kv_heads > 0 ? c->n_kv_heads : H) * (C / H);
    const double F = attn_feedforward_hidden(c->emb_dim, c->act);
    const double ff = c->act == ATTN_ACT_SWIGLU ? 3.0 * F * C : 2.0 * F * C;
    const double block = 2.0 * C * C + 2.0 * KV * C + ff; /* Q, out_proj; K, V; the MLP */
    return c->n_layers * block + C * head;                /* the head, tied or not */
}

static attn_gpt_flops flops_forward(const attn_gpt_config *cfg, double head, double B, double T) {
    const attn_gpt_flops f = {.matmul = 2.0 * B * T * weights_per_token(cfg, head),
                              .attention = 4.0 * B * cfg->n_layers * cfg->emb_dim *
                                           attn_causal_pairs(T, cfg->window)};
    return f;
}

attn_gpt_flops attn_gpt_flops_forward(const attn_gpt_config *cfg, double B, double T) {
    return flops_forward(cfg, cfg->vocab_size, B, T);
}

double attn_gpt_flops_step_frozen(const attn_gpt_config *cfg, double head_width, double B, double T,
                                  int frozen_blocks) {
    const attn_gpt_flops f = flops_forward(cfg, head_width, B, T);
    const double L = cfg->n_layers > 0 ? cfg->n_layers : 1;
    const double k = frozen_blocks <= 0 ? 0 : frozen_blocks < L ? frozen_blocks / L : 1;
    /* the frozen blocks' share of the products (the head's is never) and
     * of the attention: forward only */
    const double frozen_mm = 2.0 * B * T * (weights_per_token(cfg, 0) * k);
    return 3.0 * f.matmul - 2.0 * frozen_mm + (3.5 - 2.5 * k) * f.attention;
}

double attn_gpt_flops_step_head(const attn_gpt_config *cfg, double head_width, double B, double T) {
    return attn_gpt_flops_step_frozen(cfg, head_width, B, T, 0);
}

double attn_gpt_flops_step(const attn_gpt_config *cfg, double B, double T) {
    return attn_gpt_flops_step_head(cfg, cfg->vocab_size, B, T);
}

double attn_attention_flops(double B, double T, double D, double window, int backward) {
    return (backward ? 3.5 : 1.0) * 4.0 * B * D * attn_causal_pairs(T, window);
}

double attn_mha_flops(double B, double T, double D, int n_heads, int n_kv_heads, double window,
                      int backward) {
    const double H = n_heads > 0 ? n_heads : 1, KV = (n_kv_heads > 0 ? n_kv_heads : H) * (D / H);
    const double proj = 2.0 * B * T * (2.0 * D * D + 2.0 * KV * D);
    return (backward ? 3.0 : 1.0) * proj + attn_attention_flops(B, T, D, window, backward);
}
