/* The book's data order (train_book.h) and the trainer's book mode: its
 * batches, evaluations and greedy samples (see attn_trainer_set_book_data). */
#include "train_book.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attn/train.h"
#include "train_history.h"
#include "trainer.h"

/* ------------------------------------------------------------ the order */

size_t attn_book_windows(size_t n, int T) {
    const size_t t = (size_t)T;
    return n > t ? (n - t + t - 1) / t : 0; /* len(range(0, n - T, T)) */
}

void attn_book_order_free(attn_book_order *o) {
    free(o->owned);
    free(o->perm);
    free(o->scratch);
    memset(o, 0, sizeof *o);
}

attn_status attn_book_order_init(attn_book_order *o, size_t n_train, size_t n_val, int T, int B,
                                 attn_error *err) {
    memset(o, 0, sizeof *o);
    o->T = T;
    o->B = B;
    o->windows = attn_book_windows(n_train, T);
    o->val_windows = attn_book_windows(n_val, T);
    o->batches = o->windows / (size_t)B;
    if (o->batches == 0 || o->val_windows == 0)
        return attn_fail(err, ATTN_ERR_INVALID_ARG,
                         "the book's loaders need at least batch_size = %d training windows and "
                         "one val window of context_length %d (got %zu and %zu from %zu and %zu "
                         "tokens)",
                         B, T, o->windows, o->val_windows, n_train, n_val);
    o->perm = malloc(o->windows * sizeof *o->perm);
    o->scratch = malloc(o->windows * sizeof *o->scratch);
    if (!o->perm || !o->scratch) {
        attn_book_order_free(o);
        return attn_fail(err, ATTN_ERR_NOMEM, "out of memory for the book's loaders");
    }
    o->n_train = n_train;
    o->n_val = n_val;
    return ATTN_OK;
}

void attn_book_iterator(attn_rng *rng, size_t windows, int64_t *base_seed, int64_t *sampler_seed,
                        size_t *perm) {
    *base_seed = attn_rng_int64(rng);
    *sampler_seed = attn_rng_int64(rng);
    attn_randperm((uint64_t)*sampler_seed, perm, windows);
}

attn_status attn_book_fill(const attn_token_dataset *ds, const size_t *win, int B, int T,
                           int32_t *x, int32_t *y, attn_error *err) {
    for (int b = 0; b < B; b++) {
        attn_status s =
            attn_dataset_get(ds, win[b] * (size_t)T, x + (size_t)b * T, y + (size_t)b * T, err);
        if (s) return s;
    }
    return ATTN_OK;
}

attn_status attn_book_next_batch(attn_book_order *o, attn_rng *rng, const attn_token_dataset *train,
                                 int32_t *x, int32_t *y, attn_error *err) {
    if (o->epoch == 0 || o->pos == o->batches) {
        attn_book_iterator(rng, o->windows, &o->base_seed, &o->sampler_seed, o->perm);
        o->epoch++;
        o->pos = 0;
    }
    o->pos++;
    return attn_book_fill(train, o->perm + (o->pos - 1) * (size_t)o->B, o->B, o->T, x, y, err);
}

/* ------------------------------------------------------- the trainer's mode */

attn_status attn_trainer_book_attach(attn_trainer *tr, attn_error *err) {
    if (tr->book) return attn_fail(err, ATTN_ERR_STATE, "the book's data is already set");
    if (tr->tcfg.grad_accum > 1 || tr->dist)
        return attn_fail(err, ATTN_ERR_INVALID_ARG,
                         "the book's data order runs in one process without grad_accum");
    attn_book_order *o = calloc(1, sizeof *o);
    if (!o) return attn_fail(err, ATTN_ERR_NOMEM, "out of memory for the book's loaders");
    attn_status st = attn_book_order_init(o, tr->train.n_ids, tr->val.n_ids,
                                          tr->mcfg.context_length, tr->tcfg.batch_size, err);
    if (st) {
        free(o);
        return st;
    }
    tr->book = o;
    return ATTN_OK;
}

attn_status attn_trainer_book_attach_ids(attn_trainer *tr, const int32_t *train_ids, size_t n_train,
                                         const int32_t *val_ids, size_t n_val, attn_error *err) {
    const int T = tr->mcfg.context_length;
    for (size_t i = 0; i < n_train + n_val; i++) {
        const int32_t id = i < n_train ? train_ids[i] : val_ids[i - n_train];
        if (id < 0 || id >= tr->mcfg.vocab_size)
            return attn_fail(err, ATTN_ERR_INVALID_ARG, "token id %d at %zu is outside [0, %d)", id,
                             i, tr->mcfg.vocab_size);
    }
    int32_t *ids = n_train + n_val ? malloc((n_train + n_val) * sizeof *ids) : NULL;
    if (!ids) return attn_fail(err, ATTN_ERR_NOMEM, "out of memory for the book's token ids");
    memcpy(ids, train_ids, n_train * sizeof *ids);
    memcpy(ids + n_train, val_ids, n_val * sizeof *ids);
    attn_status st = attn_dataset_init(&tr->train, ids, n_train, T, err);
    if (!st) st = attn_dataset_init(&tr->val, ids + n_train, n_val, T, err);
    if (!st) st = attn_trainer_book_attach(tr, err);
    if (st) {
        free(ids);
        return st;
    }
    tr->book->owned = ids;
    return ATTN_OK;
}

/* The book's AdamW gets model.parameters(): every parameter decays. */
void attn_trainer_book_decay_all(attn_trainer *tr) {
    for (int i = 0; tr->book && i < tr->opt.n_params; i++)
        tr->opt.decay[i] = 1;
}

attn_status attn_trainer_set_book_data(attn_trainer *tr, const int32_t *train_ids, size_t n_train,
                                       const int32_t *val_ids, size_t n_val, attn_error *err) {
    if (tr->step != 0)
        return attn_fail(err, ATTN_ERR_STATE, "the book's data is set before the first step");
    /* loader "book" attached the corpus's own splits: these replace them */
    attn_book_order *old = tr->book;
    const attn_token_dataset tn = tr->train, vl = tr->val;
    tr->book = NULL;
    attn_status st = attn_trainer_book_attach_ids(tr, train_ids, n_train, val_ids, n_val, err);
    if (st) {
        tr->book = old;
        tr->train = tn;
        tr->val = vl;
        return st;
    }
    if (old) attn_book_order_free(old);
    free(old);
    tr->tcfg.loader = ATTN_LOADER_BOOK;
    attn_trainer_book_decay_all(tr);
    return ATTN_OK;
}

int64_t attn_trainer_book_batches(const attn_trainer *tr) {
    return tr->book ? (int64_t)tr->book->batches : 0;
}

int64_t attn_trainer_book_epoch(const attn_trainer *tr) {
    if (!tr->book) return 0;
    return tr->step == 0 ? 1 : (tr->step - 1) / (int64_t)tr->book->batches + 1;
}

/* The first maximum of x[0..n) (torch.argmax). */
static int32_t argmax(const float *x, int n) {
    int32_t best = 0;
    for (int v = 1; v < n; v++)
        if (x[v] > x[best]) best = v;
    return best;
}

/* The next greedy token once the sequence (len tokens at seq) is longer than
 * the context: the whole cropped window again, its last row's arg-max. */
static attn_status window_next(const attn_trainer *tr, attn_gpt_acts *acts, const int32_t *seq,
                               size_t len, int32_t *next, attn_error *err) {
    const int T = tr->mcfg.context_length, V = tr->mcfg.vocab_size;
    attn_status st = acts->logits ? ATTN_OK : attn_gpt_acts_init(acts, &tr->model, 1, T, err);
    /* An eval-mode forward writes only acts (the model's pointer is not const). */
    if (!st)
        st = attn_gpt_forward((attn_gpt *)&tr->model, seq + len - (size_t)T, NULL, 1, T, NULL, acts,
                              NULL, err);
    if (!st) *next = argmax(acts->logits + (size_t)(T - 1) * (size_t)V, V);
    return st;
}

attn_status attn_trainer_book_sample(const attn_trainer *tr, const int32_t *prompt, size_t n,
                                     int max_new, int32_t *out, attn_error *err) {
    const int T = tr->mcfg.context_length, V = tr->mcfg.vocab_size;
    if (n == 0 || n > (size_t)T)
        return attn_fail(err, ATTN_ERR_INVALID_ARG,
                         "the sample's prompt must have 1 to context_length = %d tokens", T);
    attn_gpt_kv_cache cache;
    attn_gpt_acts acts = {0};
    attn_status st = attn_gpt_kv_init(&cache, &tr->model, err);
    if (st) return st;
    memcpy(out, prompt, n * sizeof *out);
    attn_gpt_kv_reset(&cache);
    if (n > 1) st = attn_gpt_kv_prefill(&tr->model, &cache, out, (int)(n - 1), NULL, err);
    for (size_t len = n; !st && len < n + (size_t)max_new; len++) {
        /* generate_text_simple: the arg-max of the last position, from the
         * last context_length tokens (the cache holds them while they fit). */
        if (len <= (size_t)T) {
            st = attn_gpt_kv_step(&tr->model, &cache, out[len - 1], NULL, err);
            if (!st) out[len] = argmax(cache.logits, V);
        } else {
            st = window_next(tr, &acts, out, len, &out[len], err);
        }
    }
    attn_gpt_acts_free(&acts);
    attn_gpt_kv_free(&cache);
    return st;
}

int64_t attn_trainer_epoch(const attn_trainer *tr) {
    return tr->tcfg.loader == ATTN_LOADER_BOOK ? attn_trainer_book_epoch(tr) : 0;
}

attn_status attn_trainer_greedy_text(const attn_trainer *tr, const char *prompt, int max_new,
                                     char **text, attn_error *err) {
    *text = NULL;
    const size_t n = strlen(prompt);
    size_t cap = 0, n_ids = 0, len = 0;
    if (max_new < 0 || max_new > ATTN_GREEDY_MAX_NEW)
        return attn_fail(err, ATTN_ERR_INVALID_ARG, "max_new %d is outside [0, %d]", max_new,
                         ATTN_GREEDY_MAX_NEW);
    attn_status st = attn_tokenizer_max_ids(&tr->tok, prompt, n, &cap, err);
    if (st) return st;
    int32_t *ids = malloc((cap + 1) * sizeof *ids);
    int32_t *out = malloc((cap + (size_t)max_new + 1) * sizeof *out);
    if (!ids || !out) st = attn_fail(err, ATTN_ERR_NOMEM, "out of memory for the sample");
    if (!st) st = attn_tokenizer_encode_ex(&tr->tok, prompt, n, 1, ids, cap, &n_ids, err);
    if (!st) st = attn_trainer_book_sample(tr, ids, n_ids, max_new, out, err);
    if (!st) st = attn_tokenizer_decoded_len(&tr->tok, out, n_ids + (size_t)max_new, &len, err);
    if (!st && !(*text = malloc(len + 1)))
        st = attn_fail(err, ATTN_ERR_NOMEM, "out of memory for the sample");
    if (!st) st = attn_tokenizer_decode(&tr->tok, out, n_ids + (size_t)max_new, *text, err);
    if (st) {
        free(*text);
        *text = NULL;
    }
    free(ids);
    free(out);
    return st;
}

/* ------------------------------------------------------------ generators */

void attn_book_rng_pack(const attn_rng *r, uint32_t *w) {
    memcpy(w, r->mt, sizeof r->mt);
    w[ATTN_MT_N] = r->index;
    w[ATTN_MT_N + 1] = (uint32_t)r->seed;
    w[ATTN_MT_N + 2] = (uint32_t)(r->seed >> 32);
    w[ATTN_MT_N + 3] = (uint32_t)r->has_next_double_normal;
    uint64_t bits;
    memcpy(&bits, &r->next_double_normal, sizeof bits);
    w[ATTN_MT_N + 4] = (uint32_t)bits;
    w[ATTN_MT_N + 5] = (uint32_t)(bits >> 32);
}

int attn_book_rng_unpack(attn_rng *r, const uint32_t *w) {
    if (w[ATTN_MT_N] > ATTN_MT_N) return -1;
    memcpy(r->mt, w, sizeof r->mt);
    r->index = w[ATTN_MT_N];
    r->seed = (uint64_t)w[ATTN_MT_N + 1] | (uint64_t)w[ATTN_MT_N + 2] << 32;
    r->has_next_double_normal = (int)w[ATTN_MT_N + 3];
    uint64_t bits = (uint64_t)w[ATTN_MT_N + 4] | (uint64_t)w[ATTN_MT_N + 5] << 32;
    memcpy(&r->next_double_normal, &bits, sizeof bits);
    return 0;
}
