/* The trainer's loss history (see train_history.h). */
#include "train_history.h"
#include "trainer.h"

#include <stdlib.h>

attn_status train_history_push(attn_trainer *tr, const attn_train_record *r, attn_error *err) {
    if (tr->n_hist == tr->cap_hist) {
        size_t cap = tr->cap_hist ? tr->cap_hist * 2 : 1024;
        attn_train_record *h = realloc(tr->hist, cap * sizeof *h);
        if (!h) return attn_fail(err, ATTN_ERR_NOMEM, "out of memory for the loss history");
        tr->hist = h;
        tr->cap_hist = cap;
    }
    tr->hist[tr->n_hist++] = *r;
    return ATTN_OK;
}

attn_status train_history_push_eval(attn_trainer *tr, const attn_eval_record *r, attn_error *err) {
    if (tr->n_evals && tr->evals[tr->n_evals - 1].step == r->step) {
        tr->evals[tr->n_evals - 1] = *r;
        return ATTN_OK;
    }
    if (tr->n_evals == tr->cap_evals) {
        size_t cap = tr->cap_evals ? tr->cap_evals * 2 : 64;
        attn_eval_record *e = realloc(tr->evals, cap * sizeof *e);
        if (!e) return attn_fail(err, ATTN_ERR_NOMEM, "out of memory for the loss history");
        tr->evals = e;
        tr->cap_evals = cap;
    }
    tr->evals[tr->n_evals++] = *r;
    return ATTN_OK;
}
