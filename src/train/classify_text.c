/* A classifier on one text (attn classify TEXT, attn.GPT.classify): the
 * book's classify_review's input row and its softmax. */
#include <math.h>
#include <stdlib.h>

#include "attn/finetune.h"

attn_status attn_class_text_row(const attn_tokenizer *tok, const char *text, size_t n, int max_len,
                                int32_t *row, attn_error *err) {
    if (max_len <= 0) return attn_fail(err, ATTN_ERR_INVALID_ARG, "classify: max_len must be >= 1");
    size_t cap, got = 0;
    attn_status s = attn_tokenizer_max_ids(tok, text, n, &cap, err);
    int32_t *ids = s ? NULL : malloc((cap ? cap : 1) * sizeof *ids);
    if (!s && !ids) s = attn_fail(err, ATTN_ERR_NOMEM, "classify: out of memory");
    if (!s) s = attn_tokenizer_encode(tok, text, n, ids, &got, err);
    for (size_t k = 0; !s && k < (size_t)max_len; k++)
        row[k] = k < got ? ids[k] : ATTN_PAD_ID;
    free(ids);
    return s;
}

int attn_class_softmax(const float *logits, int n, double *probs) {
    int best = 0;
    double mx = logits[0], sum = 0;
    for (int v = 1; v < n; v++) {
        best = logits[v] > logits[best] ? v : best;
        mx = logits[v] > mx ? logits[v] : mx;
    }
    for (int v = 0; v < n; v++)
        sum += exp((double)logits[v] - mx);
    for (int v = 0; v < n; v++)
        probs[v] = exp((double)logits[v] - mx) / sum;
    return best;
}
