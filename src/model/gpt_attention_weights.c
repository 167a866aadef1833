/* A GPT layer's attention weights of the last forward (attn/gpt.h): the
 * layer's MultiHeadAttention read-out (attn/attention_weights.h). */
#include "attn/attention_weights.h"
#include "attn/gpt.h"

attn_status attn_gpt_attention_weights(const attn_gpt *m, const attn_gpt_acts *acts, int layer,
                                       int b, float *weights, attn_error *err) {
    attn_status s = attn_gpt_check_fp32(m, "attention weights", err);
    if (s) return s;
    if (!acts || !acts->blocks || acts->n_layers != m->cfg.n_layers)
        return attn_fail(err, ATTN_ERR_STATE,
                         "attention weights: no activations of this model's forward");
    if (layer < 0 || layer >= m->cfg.n_layers)
        return attn_fail(err, ATTN_ERR_INVALID_ARG,
                         "attention weights: layer %d is outside [0, %d)", layer, m->cfg.n_layers);
    return attn_mha_attention_weights(&m->blocks[layer].att, &acts->blocks[layer].att, b, weights,
                                      err);
}
