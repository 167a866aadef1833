/* Gradient accumulation over micro-batches and ranks, in a fixed order (see
 * attn/train.h, attn/dist.h). */
#include "train_accum.h"
#include "base/parallel.h"
#include "trainer.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static int accum_m(const attn_trainer *tr) {
    return tr->tcfg.grad_accum > 1 ? tr->tcfg.grad_accum : 1;
}

static int world(const attn_trainer *tr) {
    return tr->dist ? tr->dist->size : 1;
}

int attn_train_accum_active(const attn_trainer *tr) {
    return accum_m(tr) > 1 || world(tr) > 1;
}

void attn_train_accum_free(attn_trainer *tr) {
    for (int i = 1; i < tr->n_gblocks; i++) /* [0]: the model's own */
        attn_param_block_free(tr->gblocks[i], tr->gblock_numel);
    free(tr->gblocks);
    free(tr->mb_loss);
    free(tr->eval_loss);
    tr->gblocks = NULL;
    tr->n_gblocks = 0;
    tr->gblock_numel = 0;
    tr->mb_loss = NULL;
    tr->eval_loss = NULL;
}

attn_status attn_train_accum_setup(attn_trainer *tr, attn_error *err) {
    attn_train_accum_free(tr);
    const int m = accum_m(tr), n = world(tr);
    if (m % n != 0)
        return attn_fail(err, ATTN_ERR_INVALID_ARG,
                         "grad_accum %d is not a multiple of the %d ranks (each rank takes "
                         "grad_accum / ranks micro-batches of every step)",
                         m, n);
    const int rank = tr->dist ? tr->dist->rank : 0, per = m / n;
    /* Rank 0 folds as it goes (the model's block, one more for the next
     * micro-batch); the others keep their micro-batches' gradients apart
     * until the partial sum reaches them. */
    const int k = !attn_train_accum_active(tr) ? 1 : rank == 0 ? (per > 1 ? 2 : 1) : per;
    const size_t numel = attn_gpt_params(&tr->model)->grads_numel;
    tr->eval_loss = calloc((size_t)tr->tcfg.eval_iters, sizeof *tr->eval_loss);
    tr->mb_loss = calloc((size_t)m, sizeof *tr->mb_loss);
    tr->gblocks = calloc((size_t)k, sizeof *tr->gblocks);
    if (!tr->eval_loss || !tr->mb_loss || !tr->gblocks) goto nomem;
    tr->gblock_numel = numel;
    tr->n_gblocks = 1;
    for (int i = 1; i < k; i++) {
        if (!(tr->gblocks[i] = attn_param_block_alloc(numel))) goto nomem;
        tr->n_gblocks = i + 1;
    }
    return ATTN_OK;
nomem:
    attn_train_accum_free(tr);
    return attn_fail(err, ATTN_ERR_NOMEM, "out of memory for %d gradient blocks of %zu floats",
                     k - 1, numel);
}

attn_status attn_trainer_set_dist(attn_trainer *tr, attn_dist *dist, attn_error *err) {
    /* Each rank's clock would give its own LR and the replicas would part. */
    if (dist && dist->size > 1 && tr->tcfg.time_budget > 0)
        return attn_fail(err, ATTN_ERR_INVALID_ARG,
                         "time_budget runs in one process (the ranks' clocks differ)");
    attn_dist *old = tr->dist;
    tr->dist = dist;
    attn_status st = attn_train_accum_setup(tr, err);
    if (st) {
        tr->dist = old;
        attn_error keep = err ? *err : (attn_error){0};
        attn_train_accum_setup(tr, NULL);
        if (err) *err = keep;
    }
    return st;
}

static uint64_t splitmix64(uint64_t x) {
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* Micro-batch j of the step (the rank's i-th) into the gradient block it
 * owns: no copy. Rank 0 writes its first into the model's block and each
 * later one into the next, then adds it there (acc + g_j, the fold's
 * order); the other ranks keep each in its own block for the fold. */
static attn_status micro_step(attn_trainer *tr, int j, int i, attn_error *err) {
    const attn_train_config *c = &tr->tcfg;
    const int B = c->batch_size, T = tr->mcfg.context_length, m = accum_m(tr);
    const int rank = tr->dist ? tr->dist->rank : 0;
    attn_param_list *params = &tr->model.params;
    float *own = tr->gblocks[0], *into = rank == 0 ? tr->gblocks[i ? 1 : 0] : tr->gblocks[i];
    attn_param_list_bind_grads(params, into);
    attn_rng rng;
    attn_rng_seed(&rng,
                  splitmix64(c->seed ^ splitmix64((uint64_t)tr->step * 0x10000ull + (uint64_t)j)));
    attn_gpt_zero_grad_deferred(&tr->model);
    attn_forward_mode mode = {1, &rng, c->dropout_stream};
    /* A non-finite loss is reported after the gather, by every rank. */
    attn_status st = attn_gpt_forward_backward(&tr->model, tr->xb, tr->yb, B, T, &mode, &tr->acts,
                                               1.0f / (float)m, &tr->mb_loss[j], err);
    attn_param_list_bind_grads(params, NULL);
    if (!st && into != own && rank == 0) attn_par_add(own, into, tr->gblock_numel);
    return st;
}

attn_status attn_train_accum_grads(attn_trainer *tr, float *loss_out, attn_error *err) {
    const attn_train_config *c = &tr->tcfg;
    const int B = c->batch_size;
    const int m = accum_m(tr), n = world(tr), rank = tr->dist ? tr->dist->rank : 0;
    const int per = m / n, lo = rank * per;
    const attn_param_list *params = attn_gpt_params(&tr->model);
    if (params->grads_numel != tr->gblock_numel)
        return attn_fail(err, ATTN_ERR_STATE,
                         "the gradients changed size after the trainer was set up");
    tr->gblocks[0] = params->grads;
    attn_status st;
    for (int j = 0; j < m; j++) {
        /* Every rank walks the whole shared order and keeps its own share. */
        if ((st = attn_sampler_next_batch(&tr->sampler, &tr->train, B, tr->xb, tr->yb, err)))
            return st;
        if (j >= lo && j < lo + per && (st = micro_step(tr, j, j - lo, err))) return st;
    }
    if ((st = attn_dist_allgather(tr->dist, tr->mb_loss, (size_t)m, err))) return st;
    double sum = 0;
    for (int j = 0; j < m; j++) {
        if (!isfinite(tr->mb_loss[j]))
            return attn_fail(err, ATTN_ERR_STATE,
                             "training loss is %g at step %" PRId64 " (micro-batch %d; diverged)",
                             (double)tr->mb_loss[j], tr->step + 1, j);
        sum += tr->mb_loss[j];
    }
    /* Rank 0's partial sum is whole in its block already. */
    const int k = rank == 0 ? 1 : per;
    if ((st = attn_dist_fold(tr->dist, tr->gblocks, k, tr->gblock_numel, err))) return st;
    *loss_out = (float)(sum / m);
    return ATTN_OK;
}

/* 64-bit FNV-1a over 8-byte words (bytes for the tail). */
static uint64_t hash_bytes(uint64_t h, const void *data, size_t n) {
    const unsigned char *b = data;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, b + i, 8);
        h = (h ^ w) * 0x100000001b3ull;
    }
    for (; i < n; i++)
        h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

void attn_trainer_fingerprint(const attn_trainer *tr, uint64_t *config, uint64_t *state) {
    uint64_t h = 0xcbf29ce484222325ull;
    char *mj = NULL, *tj = attn_train_config_to_json(&tr->tcfg);
    if (attn_gpt_config_to_json(&tr->mcfg, &mj, NULL) == ATTN_OK && mj)
        h = hash_bytes(h, mj, strlen(mj));
    if (tj) h = hash_bytes(h, tj, strlen(tj));
    free(mj);
    free(tj);
    h = hash_bytes(h, &tr->text_hash, sizeof tr->text_hash);
    h = hash_bytes(h, &tr->text_bytes, sizeof tr->text_bytes);
    *config = h;
    h = 0xcbf29ce484222325ull;
    const attn_param_list *params = attn_gpt_params(&tr->model);
    for (int i = 0; i < params->count; i++)
        h = hash_bytes(h, params->items[i].data, params->items[i].numel * sizeof(float));
    h = hash_bytes(h, tr->opt.m, tr->opt.total * sizeof(float));
    h = hash_bytes(h, tr->opt.v, tr->opt.total * sizeof(float));
    h = hash_bytes(h, &tr->opt.step, sizeof tr->opt.step);
    h = hash_bytes(h, &tr->step, sizeof tr->step);
    h = hash_bytes(h, tr->model_rng.mt, sizeof tr->model_rng.mt);
    h = hash_bytes(h, &tr->model_rng.index, sizeof tr->model_rng.index);
    h = hash_bytes(h, tr->eval_rng.mt, sizeof tr->eval_rng.mt);
    h = hash_bytes(h, &tr->eval_rng.index, sizeof tr->eval_rng.index);
    h = hash_bytes(h, &tr->sampler.epoch, sizeof tr->sampler.epoch);
    h = hash_bytes(h, &tr->sampler.cursor, sizeof tr->sampler.cursor);
    *state = h;
}
