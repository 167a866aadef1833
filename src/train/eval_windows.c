/* The exact loss of a token sequence: every token once, in windows of the
 * model's context (attn_gpt_loss_windows, attn/train.h), and the trainer's
 * ticked pass (trainer.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attn/train.h"
#include "trainer.h"

float attn_eval_val(const attn_eval_record *r) {
    return isnan(r->val_exact) ? r->val_loss : r->val_exact;
}

attn_status attn_gpt_loss_windows(attn_gpt *m, attn_gpt_acts *acts, const int32_t *ids, size_t n,
                                  double *loss, size_t *count, attn_error *err) {
    const attn_token_dataset ds = {.ids = ids, .n_ids = n, .block_size = 1};
    return attn_gpt_loss_dataset(m, acts, &ds, loss, count, err);
}

attn_status attn_gpt_loss_dataset(attn_gpt *m, attn_gpt_acts *acts, const attn_token_dataset *ds,
                                  double *loss, size_t *count, attn_error *err) {
    return attn_gpt_loss_dataset_ticked(m, acts, ds, loss, count, NULL, NULL, err);
}

attn_status attn_gpt_loss_dataset_ticked(attn_gpt *m, attn_gpt_acts *acts,
                                         const attn_token_dataset *ds, double *loss, size_t *count,
                                         int (*tick)(void *user, size_t batch, size_t batches),
                                         void *user, attn_error *err) {
    const int B = acts->B_max, T = acts->T_max; /* windows of the acts' full shape */
    const size_t n = ds->n_ids;
    const size_t bt = (size_t)B * (size_t)T;
    if (n < 2)
        return attn_fail(err, ATTN_ERR_INVALID_ARG, "the sequence needs 2 tokens, has %zu", n);
    const size_t preds = n - 1, n_win = (preds + (size_t)T - 1) / (size_t)T;
    const size_t batches = (n_win + (size_t)B - 1) / (size_t)B;
    int32_t *x = malloc(bt * sizeof *x), *y = malloc(bt * sizeof *y);
    int32_t *w_ids = malloc(((size_t)T + 1) * sizeof *w_ids);
    if (!x || !y || !w_ids) {
        free(x);
        free(y);
        free(w_ids);
        return attn_fail(err, ATTN_ERR_NOMEM, "out of memory for the evaluation windows");
    }
    double sum = 0;
    attn_status st = ATTN_OK;
    for (size_t w0 = 0; w0 < n_win && !st; w0 += (size_t)B) {
        if (tick && tick(user, w0 / (size_t)B, batches)) {
            st = attn_fail(err, ATTN_ERR_STATE, "the exact evaluation was stopped");
            break;
        }
        /* Row b holds window w0 + b, or window 0 (not counted) past the end;
         * a short window is padded with its first token after its end. */
        for (int b = 0; b < B && !st; b++) {
            const size_t w = w0 + (size_t)b < n_win ? w0 + (size_t)b : 0;
            const size_t s = w * (size_t)T, len = preds - s < (size_t)T ? preds - s : (size_t)T;
            st = attn_dataset_read(ds, s, len + 1, w_ids, err);
            for (size_t t = 0; t < (size_t)T && !st; t++) {
                x[(size_t)b * T + t] = w_ids[t < len ? t : 0];
                y[(size_t)b * T + t] = w_ids[t < len ? t + 1 : 1];
            }
        }
        if (st) break;
        st = attn_gpt_forward(m, x, y, B, T, NULL, acts, NULL, err);
        for (int b = 0; b < B && !st && w0 + (size_t)b < n_win; b++) {
            const size_t s = (w0 + (size_t)b) * (size_t)T;
            const size_t len = preds - s < (size_t)T ? preds - s : (size_t)T;
            for (size_t t = 0; t < len; t++) {
                const size_t r = (size_t)b * T + t;
                /* -log softmax(logits)[target] = lse - logit[target], as the
                 * forward's own mean loss forms it. */
                sum += (double)acts->lse[r] - (double)acts->target_logit[r];
            }
        }
    }
    free(x);
    free(y);
    free(w_ids);
    if (st) return st;
    if (tick) tick(user, batches, batches);
    *loss = sum / (double)preds;
    if (count) *count = preds;
    return ATTN_OK;
}
