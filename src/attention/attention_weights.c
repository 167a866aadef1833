/* Read-out of the attention weights of the last forward (see
 * attn/attention_weights.h). */
#include "attn/attention_weights.h"

#include <string.h>

#include "mha_fused.h"

attn_status attn_mha_attention_weights(const attn_mha *m, const attn_attention_cache *cache, int b,
                                       float *weights, attn_error *err) {
    if (!cache || cache->heads != m->num_heads || cache->d_out != m->d_out)
        return attn_fail(err, ATTN_ERR_STATE,
                         "attention weights: the cache was not made for this MultiHeadAttention");
    const int T = cache->T;
    if (b < 0 || b >= cache->B)
        return attn_fail(err, ATTN_ERR_INVALID_ARG,
                         "attention weights: batch row %d is outside [0, %d)", b, cache->B);
    const size_t TT = (size_t)T * (size_t)T, H = (size_t)m->num_heads;
    if (m->path == ATTN_MHA_REFERENCE) {
        if (!cache->attn_weights)
            return attn_fail(err, ATTN_ERR_STATE,
                             "attention weights: the cache keeps no weights (a fused-path cache)");
        memcpy(weights, cache->attn_weights + (size_t)b * H * TT, H * TT * sizeof(float));
        return ATTN_OK;
    }
    const attn_mha_fused_state *st = cache->fused;
    if (!st || st->B != cache->B || st->T != T || st->heads != m->num_heads ||
        st->d_out != m->d_out || st->kv_dim != m->kv_dim)
        return attn_fail(err, ATTN_ERR_STATE,
                         "attention weights: no fused forward has run on this cache");
    /* The problem the forward solved: Q | K | V interleaved in the packed qkv. */
    attn_flash_problem pb = attn_mha_fused_problem(m, (attn_mha_fused_state *)st,
                                                   (attn_attention_cache *)cache, cache->B, T);
    pb.dropout = NULL;
    for (int h = 0; h < m->num_heads; h++) {
        attn_status s =
            attn_flash_weights(&pb, &m->flash, b, h, weights + (size_t)h * TT, (size_t)T, err);
        if (s != ATTN_OK) return s;
    }
    return ATTN_OK;
}
