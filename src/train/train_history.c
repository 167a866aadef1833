/* The loss history of a training state (see train_history.h). */
#include "train_history.h"

#include <math.h>
#include <string.h>

void train_history_find(const attn_safetensors *st, train_history *h) {
    memset(h, 0, sizeof *h);
    const attn_st_tensor *hs = attn_safetensors_find(st, "history.step");
    const attn_st_tensor *hv = attn_safetensors_find(st, "history.loss_lr_norm");
    if (hs && hv && hs->numel * 3 == hv->numel && !strcmp(hs->dtype, "I64") &&
        !strcmp(hv->dtype, "F32")) {
        h->step = hs;
        h->loss_lr_norm = hv;
        h->n_steps = hs->numel;
    }
    const attn_st_tensor *es = attn_safetensors_find(st, "evals.step");
    const attn_st_tensor *ev = attn_safetensors_find(st, "evals.train_val");
    if (es && ev && es->numel * 2 == ev->numel && !strcmp(es->dtype, "I64") &&
        !strcmp(ev->dtype, "F32")) {
        h->eval_step = es;
        h->train_val = ev;
        h->n_evals = es->numel;
        const attn_st_tensor *ex = attn_safetensors_find(st, "evals.val_exact");
        if (ex && ex->numel == es->numel && !strcmp(ex->dtype, "F32")) h->val_exact = ex;
    }
}

/* memcpy: safetensors data carries no alignment promise. */
void train_history_step(const train_history *h, size_t i, attn_train_record *r) {
    float v[3];
    memcpy(&r->step, (const char *)h->step->data + 8 * i, 8);
    memcpy(v, (const char *)h->loss_lr_norm->data + 12 * i, 12);
    r->loss = v[0];
    r->lr = v[1];
    r->grad_norm = v[2];
}

void train_history_eval(const train_history *h, size_t i, attn_eval_record *r) {
    float v[2];
    memcpy(&r->step, (const char *)h->eval_step->data + 8 * i, 8);
    memcpy(v, (const char *)h->train_val->data + 8 * i, 8);
    r->train_loss = v[0];
    r->val_loss = v[1];
    r->val_exact = NAN;
    if (h->val_exact) memcpy(&r->val_exact, (const char *)h->val_exact->data + 4 * i, 4);
}
