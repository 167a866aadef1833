/* Training configs: the presets' recipes, JSON keys, range checks (see
 * attn/train.h). */
#include <cjson/cJSON.h>
#include <inttypes.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn/train.h"
#include "base/json_strict.h"
#include "model/presets.h"
#include "train_json.h"

/* ------------------------------------------------------------ the keys */

enum storage { S_INT, S_I64, S_U64, S_F64, S_STREAM, S_ENUM /* int: index in choices */ };

typedef struct key_row {
    attn_train_key key;
    size_t offset; /* in attn_train_config */
    enum storage storage;
} key_row;

#define OFF(f) offsetof(attn_train_config, f)
#define NO_HI 9.3e18 /* no upper bound (an int64_t field) */
#define INT_HI 2147483647.0
#define JSON_INT 9007199254740992.0 /* 2^53: what a JSON number holds exactly */
static const char *const STREAMS[] = {"torch-cpu", "torch-mkl", NULL};
static const char *const EVAL_MODES[] = {"sampled", "exact", NULL}; /* attn_eval_mode */
static const char *const LR_SCHEDULES[] = {"cosine", "wsd", NULL};  /* attn_lr_schedule */
static const char *const TOKENIZERS[] = {"char", "gpt2", NULL};     /* attn_tokenizer_kind */
static const char *const LOADERS[] = {"sampler", "book", NULL};     /* attn_train_loader */
static const char *const FINAL_EVALS[] = {"auto", "exact", "sampled", NULL}; /* attn_final_eval */

/* One row per key: JSON name, nanoGPT's alias, the `attn train` option,
 * type, range, help; in attn_train_config's order. */
static const key_row ROWS[] = {
    {{"batch_size", NULL, "batch-size", ATTN_TKEY_INT, 1, INT_HI,
      .help = "windows per micro-batch"},
     OFF(batch_size),
     S_INT},
    {{"max_steps", "max_iters", "steps", ATTN_TKEY_INT, 1, NO_HI,
      .help = "optimisation steps (resuming: to step N)"},
     OFF(max_steps),
     S_I64},
    {{"learning_rate", "lr", "lr", ATTN_TKEY_NUMBER, 0, 1e300, .lo_open = 1,
      .help = "the peak (this option also sets min_lr\nto a tenth unless --min-lr is given)"},
     OFF(learning_rate),
     S_F64},
    {{"min_lr", NULL, "min-lr", ATTN_TKEY_NUMBER, 0, 1e300,
      .help = "the rate at the end of the cosine"},
     OFF(min_lr),
     S_F64},
    {{"warmup_steps", "warmup_iters", "warmup-steps", ATTN_TKEY_INT, 0, NO_HI,
      .help = "steps of linear warm-up"},
     OFF(warmup_steps),
     S_I64},
    {{"lr_decay_steps", "lr_decay_iters", "lr-decay-steps", ATTN_TKEY_INT, 0, NO_HI,
      .help = "where the cosine ends (0 = max_steps)"},
     OFF(lr_decay_steps),
     S_I64},
    {{"beta1", NULL, "beta1", ATTN_TKEY_NUMBER, 0, 1, .hi_open = 1, .help = "AdamW beta1"},
     OFF(beta1),
     S_F64},
    {{"beta2", NULL, "beta2", ATTN_TKEY_NUMBER, 0, 1, .hi_open = 1, .help = "AdamW beta2"},
     OFF(beta2),
     S_F64},
    {{"eps", NULL, "eps", ATTN_TKEY_NUMBER, 0, 1e300, .lo_open = 1, .help = "AdamW epsilon"},
     OFF(eps),
     S_F64},
    {{"weight_decay", NULL, "weight-decay", ATTN_TKEY_NUMBER, 0, 1e300,
      .help = "AdamW decay (2-D weights only)"},
     OFF(weight_decay),
     S_F64},
    {{"grad_clip", NULL, "grad-clip", ATTN_TKEY_NUMBER, 0, 1e300,
      .help = "clip the global gradient norm (0 = never)"},
     OFF(grad_clip),
     S_F64},
    {{"eval_interval", NULL, "eval-interval", ATTN_TKEY_INT, 1, NO_HI,
      .help = "evaluate and save every N steps"},
     OFF(eval_interval),
     S_I64},
    {{"eval_iters", NULL, "eval-iters", ATTN_TKEY_INT, 1, INT_HI,
      .help = "batches per split in an evaluation"},
     OFF(eval_iters),
     S_INT},
    {{"log_interval", NULL, "log-interval", ATTN_TKEY_INT, 1, NO_HI,
      .help = "a log line every N steps (no terminal)"},
     OFF(log_interval),
     S_I64},
    {{"checkpoint_interval", NULL, "checkpoint-interval", ATTN_TKEY_INT, 0, NO_HI,
      .help = "every N steps (0: auto, 10 min)"},
     OFF(checkpoint_interval),
     S_I64},
    {{"seed", NULL, "seed", ATTN_TKEY_INT, 0, JSON_INT,
      .help = "weights, dropout, batches, evaluations"},
     OFF(seed),
     S_U64},
    {{"dropout_stream", NULL, "dropout-stream", ATTN_TKEY_CHOICE, .choices = STREAMS,
      .help = "PyTorch's dropout masks to match"},
     OFF(dropout_stream),
     S_STREAM},
    {{"grad_accum", "gradient_accumulation_steps", "grad-accum", ATTN_TKEY_INT, 1, INT_HI,
      .help = "micro-batches per step (default 1; under\nmpirun the rank count)"},
     OFF(grad_accum),
     S_INT},
    {{"eval_mode", NULL, "eval", ATTN_TKEY_CHOICE, .choices = EVAL_MODES,
      .help =
          "sampled: eval_iters batches per split;\nexact: val over the whole split (every\ntoken "
          "once; the final eval: --final-eval)"},
     OFF(eval_mode),
     S_ENUM},
    {{"time_budget", NULL, "time-budget", ATTN_TKEY_NUMBER, 0, 1e300,
      .help = "end the run after SECONDS of wall time\n(evals included) with its final eval and\n"
              "a checkpoint; the LR schedule follows\nthe clock (0 = none)"},
     OFF(time_budget),
     S_F64},
    {{"lr_schedule", NULL, "lr-schedule", ATTN_TKEY_CHOICE, .choices = LR_SCHEDULES,
      .help = "after warm-up: cosine to min_lr, or wsd\n(flat, then linear to min_lr over "
              "the\nlast 40%)"},
     OFF(lr_schedule),
     S_ENUM},
    {{"tokenizer", NULL, "tokenizer", ATTN_TKEY_CHOICE, .choices = TOKENIZERS,
      .help = "char: the corpus's characters; gpt2:\nGPT-2's BPE (files: $ATTN_GPT2_DIR, else\n"
              "the installed copy, else data/gpt2)"},
     OFF(tokenizer),
     S_ENUM},
    {{"loader", NULL, "loader", ATTN_TKEY_CHOICE, .choices = LOADERS,
      .help = "sampler (random windows) or book (the\nbook's chapter-5 DataLoader: stride\n"
              "context_length, epochs, evals after\nstep 0, eval_interval, ...)"},
     OFF(loader),
     S_ENUM},
    {{"final_eval", NULL, "final-eval", ATTN_TKEY_CHOICE, .choices = FINAL_EVALS,
      .help = "the final eval's exact val loss: auto\n(when it costs at most a tenth of the\n"
              "steps), exact, or sampled (none)"},
     OFF(final_eval),
     S_ENUM},
};
_Static_assert(sizeof ROWS / sizeof ROWS[0] == ATTN_TRAIN_KEY_COUNT,
               "ROWS has a row for every training key");

const attn_train_key *attn_train_key_at(int i) {
    return i >= 0 && i < ATTN_TRAIN_KEY_COUNT ? &ROWS[i].key : NULL;
}

int attn_train_key_find(const char *name) {
    for (int i = 0; name && i < ATTN_TRAIN_KEY_COUNT; i++)
        if (strcmp(name, ROWS[i].key.name) == 0 ||
            (ROWS[i].key.alias && strcmp(name, ROWS[i].key.alias) == 0))
            return i;
    return -1;
}

void attn_train_key_describe(const attn_train_key *k, char *buf, size_t cap) {
    if (k->type == ATTN_TKEY_CHOICE) {
        size_t used = (size_t)snprintf(buf, cap, "one of ");
        for (int i = 0; k->choices[i] && used < cap; i++)
            used += (size_t)snprintf(buf + used, cap - used, "%s%s", i ? ", " : "", k->choices[i]);
        return;
    }
    const char *what = k->type == ATTN_TKEY_INT ? "an integer" : "a number";
    if (k->hi >= 1e18) /* no upper bound worth stating */
        snprintf(buf, cap, "%s %s %.17g", what, k->lo_open ? ">" : ">=", k->lo);
    else
        snprintf(buf, cap, "%s in %c%.17g, %.17g%c", what, k->lo_open ? '(' : '[', k->lo, k->hi,
                 k->hi_open ? ')' : ']');
}

static int in_range(const attn_train_key *k, double x) {
    return isfinite(x) && (k->lo_open ? x > k->lo : x >= k->lo) &&
           (k->hi_open ? x < k->hi : x <= k->hi);
}

/* lo and hi are whole numbers; hi of NO_HI (past int64_t) bounds nothing. */
static int int_in_range(const attn_train_key *k, int64_t x) {
    return (k->lo_open ? x > (int64_t)k->lo : x >= (int64_t)k->lo) &&
           (k->hi >= 9223372036854775808.0 ||
            (k->hi_open ? x < (int64_t)k->hi : x <= (int64_t)k->hi));
}

#define FIELD(c, r, T) ((T *)(void *)((char *)(c) + (r)->offset))

attn_status attn_train_config_set(attn_train_config *c, int i, attn_train_value v,
                                  attn_error *err) {
    if (i < 0 || i >= ATTN_TRAIN_KEY_COUNT)
        return attn_fail(err, ATTN_ERR_NOT_FOUND, "no training key %d", i);
    const key_row *r = &ROWS[i];
    char what[160], got[64];
    attn_train_key_describe(&r->key, what, sizeof what);
    if (r->storage == S_ENUM) {
        for (int j = 0; v.s && r->key.choices[j]; j++)
            if (strcmp(v.s, r->key.choices[j]) == 0) {
                *FIELD(c, r, int) = j;
                return ATTN_OK;
            }
        return attn_fail(err, ATTN_ERR_INVALID_ARG, "%s must be %s (got '%s')", r->key.name, what,
                         v.s ? v.s : "");
    }
    if (r->storage == S_STREAM) {
        if (!v.s || attn_dropout_stream_parse(v.s, FIELD(c, r, attn_dropout_stream)))
            return attn_fail(err, ATTN_ERR_INVALID_ARG, "%s must be %s (got '%s')", r->key.name,
                             what, v.s ? v.s : "");
        return ATTN_OK;
    }
    const double x = r->key.type == ATTN_TKEY_INT ? (double)v.i : v.d;
    /* An integer is compared as one: (double)v.i would round 2^53 + 1 into
     * range. */
    const int ok = r->key.type == ATTN_TKEY_INT ? int_in_range(&r->key, v.i) : in_range(&r->key, x);
    if (!ok) {
        if (r->key.type == ATTN_TKEY_INT)
            snprintf(got, sizeof got, "%" PRId64, v.i); /* as given, not rounded */
        else
            snprintf(got, sizeof got, "%g", x);
        return attn_fail(err, ATTN_ERR_INVALID_ARG, "%s must be %s (got %s)", r->key.name, what,
                         got);
    }
    switch (r->storage) {
    case S_INT: *FIELD(c, r, int) = (int)v.i; break;
    case S_I64: *FIELD(c, r, int64_t) = v.i; break;
    case S_U64: *FIELD(c, r, uint64_t) = (uint64_t)v.i; break;
    case S_F64: *FIELD(c, r, double) = v.d; break;
    case S_STREAM:
    case S_ENUM: break;
    }
    return ATTN_OK;
}

attn_train_value attn_train_config_get(const attn_train_config *c, int i) {
    attn_train_value v = {0, 0, NULL};
    if (i < 0 || i >= ATTN_TRAIN_KEY_COUNT) return v;
    const key_row *r = &ROWS[i];
    attn_train_config *m = (attn_train_config *)c; /* FIELD casts; read only */
    switch (r->storage) {
    case S_INT: v.i = *FIELD(m, r, int); break;
    case S_I64: v.i = *FIELD(m, r, int64_t); break;
    case S_U64: v.i = (int64_t)*FIELD(m, r, uint64_t); break;
    case S_F64: v.d = *FIELD(m, r, double); break;
    case S_STREAM: v.s = attn_dropout_stream_name(*FIELD(m, r, attn_dropout_stream)); break;
    case S_ENUM: {
        const int j = *FIELD(m, r, int);
        int n = 0;
        while (r->key.choices[n])
            n++;
        v.s = r->key.choices[j >= 0 && j < n ? j : 0];
        break;
    }
    }
    v.d = r->key.type == ATTN_TKEY_INT ? (double)v.i : v.d;
    return v;
}

/* ------------------------------------------------------------ presets */

attn_precision attn_train_preset_precision(const char *name) {
    const attn_preset *p = attn_preset_find(name);
    return p ? p->precision : ATTN_PRECISION_FP32;
}

attn_status attn_train_preset(const char *name, attn_gpt_config *model, attn_train_config *t,
                              attn_error *err) {
    attn_status st = attn_gpt_config_preset(name, model, err);
    if (st) return st;
    const attn_preset_recipe *r = &attn_preset_find(name)->recipe;
    memset(t, 0, sizeof *t);
    t->beta1 = 0.9;
    t->beta2 = r->beta2;
    t->eps = 1e-8;
    t->weight_decay = 0.1;
    t->grad_clip = r->no_grad_clip ? 0.0 : 1.0;
    t->seed = r->seed ? r->seed : 1337;
    t->dropout_stream = ATTN_STREAM_TORCH_CPU;
    t->grad_accum = 1;
    t->batch_size = r->batch_size;
    t->max_steps = r->max_steps;
    t->learning_rate = r->learning_rate;
    t->min_lr = r->min_lr;
    t->warmup_steps = r->warmup_steps;
    t->eval_interval = r->eval_interval;
    t->eval_iters = r->eval_iters;
    t->log_interval = r->log_interval;
    t->lr_schedule = r->lr_schedule;
    t->time_budget = r->time_budget;
    t->tokenizer = r->tokenizer;
    if (r->book_loader) t->loader = ATTN_LOADER_BOOK;
    return ATTN_OK;
}

/* ------------------------------------------------------------ JSON */

attn_status attn_train_config_set_key(attn_train_config *c, const char *key, const cJSON *v,
                                      attn_error *err) {
    const int i = attn_train_key_find(key);
    if (i < 0) return attn_fail(err, ATTN_ERR_NOT_FOUND, "unknown config key '%s'", key);
    const attn_train_key *k = &ROWS[i].key;
    attn_train_value val = {0, 0, NULL};
    char what[160], got[80];
    attn_train_key_describe(k, what, sizeof what);
    attn_json_value_text(v, got, sizeof got);
    if (k->type == ATTN_TKEY_CHOICE) {
        if (!cJSON_IsString(v)) goto bad;
        val.s = v->valuestring;
    } else if (!cJSON_IsNumber(v)) {
        goto bad;
    } else {
        val.d = v->valuedouble;
        /* Checked before the cast: a double outside int64_t's range (1e300,
         * -inf, NaN) is undefined behaviour to convert. */
        if (k->type == ATTN_TKEY_INT) {
            if (!isfinite(val.d) || val.d != floor(val.d) || fabs(val.d) > JSON_INT) goto bad;
            val.i = (int64_t)val.d;
        }
    }
    if (attn_train_config_set(c, i, val, NULL) == ATTN_OK) return ATTN_OK;
bad:
    return attn_fail(err, ATTN_ERR_INVALID_ARG, "config key '%s' must be %s (got %s)", key, what,
                     got);
}

/* Edit distance of a and b (insert, delete, substitute, swap two
 * neighbours), capped at 9: key names are short. */
static int edit_distance(const char *a, const char *b) {
    enum { W = 40 };
    const size_t la = strlen(a), lb = strlen(b);
    if (la >= W || lb >= W) return 9;
    int d[W][W];
    for (size_t i = 0; i <= la; i++)
        d[i][0] = (int)i;
    for (size_t j = 0; j <= lb; j++)
        d[0][j] = (int)j;
    for (size_t i = 1; i <= la; i++)
        for (size_t j = 1; j <= lb; j++) {
            int best = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
            if (d[i - 1][j] + 1 < best) best = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < best) best = d[i][j - 1] + 1;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
                d[i - 2][j - 2] + 1 < best)
                best = d[i - 2][j - 2] + 1;
            d[i][j] = best;
        }
    return d[la][lb] < 9 ? d[la][lb] : 9;
}

/* The known key (model or training, any of its names) closest to key, if
 * it is close (a typo), else NULL. */
static const char *closest_key(const char *key) {
    const char *best = NULL;
    int best_d = strlen(key) <= 4 ? 1 : 2;
    for (int i = 0; i < ATTN_GPT_KEY_COUNT + ATTN_TRAIN_KEY_COUNT; i++) {
        const char *names[2];
        if (i < ATTN_GPT_KEY_COUNT) {
            names[0] = attn_gpt_key_at(i)->name;
            names[1] = attn_gpt_key_at(i)->alias;
        } else {
            names[0] = ROWS[i - ATTN_GPT_KEY_COUNT].key.name;
            names[1] = ROWS[i - ATTN_GPT_KEY_COUNT].key.alias;
        }
        for (int j = 0; j < 2; j++) {
            if (!names[j]) continue;
            const int d = edit_distance(key, names[j]);
            if (d <= best_d && (!best || d < best_d)) {
                best = names[j];
                best_d = d;
            }
        }
    }
    return best;
}

/* The key's name as attn writes it: the book's for a model key,
 * attn_train_key_at's for a training key; NULL when unknown. */
static const char *canonical_key(const char *key) {
    const int m = attn_gpt_key_find(key);
    if (m >= 0) return attn_gpt_key_at(m)->name;
    const int t = attn_train_key_find(key);
    return t >= 0 ? ROWS[t].key.name : NULL;
}

int attn_train_json_has(const attn_train_json_set *set, const char *name) {
    for (int i = 0; set && i < set->count; i++)
        if (strcmp(set->names[i], name) == 0) return 1;
    return 0;
}

attn_status attn_train_json_apply(attn_gpt_config *model, attn_train_config *train,
                                  const char *text, size_t n, const char *name,
                                  attn_train_json_set *set, attn_error *err) {
    attn_train_json_set local;
    if (!set) set = &local;
    set->count = 0;
    cJSON *root = NULL;
    attn_status st = attn_json_parse_strict(text, n, name, &root, err);
    if (st) return st;
    if (!cJSON_IsObject(root))
        st = attn_fail(err, ATTN_ERR_FORMAT, "%s: not a JSON object ({\"key\": value, ...})", name);
    const cJSON *head_size = NULL;
    for (const cJSON *it = root->child; it && !st; it = it->next) {
        const char *canon = canonical_key(it->string);
        if (!canon) {
            const char *near = closest_key(it->string);
            st = attn_fail(err, ATTN_ERR_NOT_FOUND, "%s: unknown config key '%s'%s%s%s", name,
                           it->string, near ? " (did you mean '" : "", near ? near : "",
                           near ? "'?)" : "");
            break;
        }
        for (const cJSON *prev = root->child; prev != it && !st; prev = prev->next) {
            if (strcmp(prev->string, it->string) == 0)
                st = attn_fail(err, ATTN_ERR_INVALID_ARG, "%s: config key '%s' is given twice",
                               name, it->string);
            else if (strcmp(canonical_key(prev->string), canon) == 0 && !cJSON_Compare(prev, it, 1))
                st = attn_fail(err, ATTN_ERR_INVALID_ARG,
                               "%s: config keys '%s' and '%s' give different values", name,
                               prev->string, it->string);
        }
        if (st) break;
        attn_error e;
        if (strcmp(canon, "head_size") == 0) {
            attn_gpt_config scratch = *model; /* range check only */
            st = attn_gpt_config_set_key(&scratch, it->string, it, &e);
            head_size = it;
        } else if (attn_gpt_key_find(canon) >= 0) {
            st = attn_gpt_config_set_key(model, it->string, it, &e);
        } else {
            st = attn_train_config_set_key(train, it->string, it, &e);
        }
        if (st) {
            attn_fail(err, st, "%s: %s", name, e.msg);
            break;
        }
        if (!attn_train_json_has(set, canon)) set->names[set->count++] = canon;
    }
    if (!st && head_size &&
        (model->n_heads < 1 || model->emb_dim % model->n_heads != 0 ||
         head_size->valuedouble != model->emb_dim / model->n_heads))
        st = attn_fail(err, ATTN_ERR_INVALID_ARG,
                       "%s: head_size %g does not equal emb_dim %d / n_heads %d", name,
                       head_size->valuedouble, model->emb_dim, model->n_heads);
    cJSON_Delete(root);
    return st;
}

attn_status attn_train_config_apply_json(attn_gpt_config *model, attn_train_config *train,
                                         const char *json_text, const char *name, int *vocab_given,
                                         attn_error *err) {
    attn_train_json_set set;
    attn_status st =
        attn_train_json_apply(model, train, json_text, strlen(json_text), name, &set, err);
    if (!st && vocab_given && attn_train_json_has(&set, "vocab_size")) *vocab_given = 1;
    return st;
}

attn_status attn_train_config_validate(const attn_train_config *c, attn_error *err) {
    attn_train_config v = *c;
    if (v.grad_accum == 0) v.grad_accum = 1; /* 0 = none, as 1 */
    for (int i = 0; i < ATTN_TRAIN_KEY_COUNT; i++) {
        attn_train_config scratch = v;
        attn_status st = attn_train_config_set(&scratch, i, attn_train_config_get(&v, i), err);
        if (st) return st;
    }
    if (c->min_lr > c->learning_rate)
        return attn_fail(err, ATTN_ERR_INVALID_ARG, "min_lr %g is above the learning rate %g",
                         c->min_lr, c->learning_rate);
    if (c->eval_mode == ATTN_EVAL_EXACT && c->final_eval == ATTN_FINAL_SAMPLED)
        return attn_fail(err, ATTN_ERR_INVALID_ARG,
                         "final_eval sampled contradicts eval_mode exact (every evaluation "
                         "takes the exact val loss)");
    return ATTN_OK;
}

char *attn_train_config_to_json(const attn_train_config *c) {
    cJSON *o = cJSON_CreateObject();
    if (!o) return NULL;
    for (int i = 0; i < ATTN_TRAIN_KEY_COUNT; i++) {
        const attn_train_key *k = &ROWS[i].key;
        const attn_train_value v = attn_train_config_get(c, i);
        /* grad_accum only when used, so earlier checkpoints keep their text. */
        if (ROWS[i].offset == OFF(grad_accum) && c->grad_accum <= 1) continue;
        /* The keys added later, likewise only when not at their default. */
        if ((ROWS[i].offset == OFF(eval_mode) && c->eval_mode == ATTN_EVAL_SAMPLED) ||
            (ROWS[i].offset == OFF(time_budget) && c->time_budget == 0) ||
            (ROWS[i].offset == OFF(lr_schedule) && c->lr_schedule == ATTN_LR_COSINE) ||
            (ROWS[i].offset == OFF(tokenizer) && c->tokenizer == ATTN_TOKENIZER_CHAR) ||
            (ROWS[i].offset == OFF(loader) && c->loader == ATTN_LOADER_SAMPLER) ||
            (ROWS[i].offset == OFF(final_eval) && c->final_eval == ATTN_FINAL_AUTO))
            continue;
        if (k->type == ATTN_TKEY_CHOICE)
            cJSON_AddStringToObject(o, k->name, v.s);
        else
            cJSON_AddNumberToObject(o, k->name, v.d);
    }
    char *s = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return s;
}

void attn_train_config_extend(attn_train_config *c, const attn_train_config *saved,
                              int64_t max_steps) {
    if (max_steps != saved->max_steps && c->lr_decay_steps == 0)
        c->lr_decay_steps = saved->lr_decay_steps ? saved->lr_decay_steps : saved->max_steps;
    c->max_steps = max_steps;
}
