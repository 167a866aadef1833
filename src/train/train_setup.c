/* From a request to a run's configs and folder (see attn/train_setup.h). */
#define _POSIX_C_SOURCE 200809L /* getcwd */
#define _DEFAULT_SOURCE         /* realpath */

#include "attn/train_setup.h"
#include "trainer.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "attn/checkpoint.h"
#include "attn/checkpoint_info.h"
#include "attn/dist.h"
#include "attn/fileio.h"
#include "attn/tokenizer.h"
#include "attn/weights_format.h"
#include "io/run_dir.h"
#include "train_json.h"

_Static_assert(ATTN_TRAIN_KEY_COUNT <= 32, "attn_train_request.given has a bit per key");

void attn_train_request_init(attn_train_request *rq) {
    memset(rq, 0, sizeof *rq);
}

void attn_train_request_set(attn_train_request *rq, int i, attn_train_value v) {
    if (i < 0 || i >= ATTN_TRAIN_KEY_COUNT) return;
    rq->keys[i] = v;
    rq->given |= 1u << i;
}

static int given(const attn_train_request *rq, const char *key) {
    const int i = attn_train_key_find(key);
    return i >= 0 && (rq->given >> i & 1u);
}

/* A failure the request caused (exit 2 in the CLI) or a file did (1). */
static attn_status fail_request(attn_train_setup *s, attn_status st) {
    s->request_error = 1;
    return st;
}

/* path made absolute against the working folder (symbolic links kept: a
 * link to "the current corpus" stays that link). */
static void absolute(const char *path, char *buf, size_t cap) {
    char cwd[ATTN_TRAIN_PATH_MAX];
    while (path[0] == '.' && path[1] == '/')
        path += 2;
    if (path[0] == '/' || !getcwd(cwd, sizeof cwd))
        snprintf(buf, cap, "%s", path);
    else if (strcmp(path, ".") == 0)
        snprintf(buf, cap, "%s", cwd);
    else if (snprintf(buf, cap, "%s%s%s", cwd, strcmp(cwd, "/") ? "/" : "", path) >= (int)cap)
        snprintf(buf, cap, "%s", path); /* too long: as given */
}

static attn_status read_config_file(const char *path, attn_gpt_config *m, attn_train_config *t,
                                    attn_train_json_set *set, attn_train_setup *s,
                                    attn_error *err) {
    char *text = NULL;
    size_t n = 0;
    attn_status st = attn_file_read_all(path, 1 << 20, (void **)&text, &n, err);
    if (st) return st; /* a file that cannot be read: runtime */
    st = attn_train_json_apply(m, t, text, n, path, set, err);
    free(text);
    return st ? fail_request(s, st) : ATTN_OK;
}

/* What the request states without its keys: the preset (or the default),
 * init_from's model shape, then the JSON file (set: the keys it set). */
static attn_status stated_config(const attn_train_request *rq, attn_gpt_config *m,
                                 attn_train_config *t, attn_train_json_set *set,
                                 attn_train_setup *s, attn_error *err) {
    const char *preset = rq->preset ? rq->preset : ATTN_TRAIN_DEFAULT_PRESET;
    set->count = 0;
    attn_status st = attn_train_preset(preset, m, t, err);
    if (st) return fail_request(s, st);
    if (rq->init_from) { /* the shape is the checkpoint's; the recipe stays */
        attn_checkpoint_info info;
        if ((st = attn_checkpoint_info_read(rq->init_from, &info, err))) return st;
        *m = info.model;
        t->tokenizer = info.tokenizer; /* its token ids */
        attn_checkpoint_info_free(&info);
    }
    if (rq->config && (st = read_config_file(rq->config, m, t, set, s, err))) return st;
    return ATTN_OK;
}

/* The request's keys onto t (max_steps as any other key). */
static attn_status apply_keys(const attn_train_request *rq, attn_train_config *t,
                              attn_train_setup *s, attn_error *err) {
    for (int i = 0; i < ATTN_TRAIN_KEY_COUNT; i++) {
        if (!(rq->given >> i & 1u)) continue;
        attn_status st = attn_train_config_set(t, i, rq->keys[i], err);
        if (st) return fail_request(s, st);
    }
    if (given(rq, "learning_rate") && !given(rq, "min_lr")) t->min_lr = t->learning_rate / 10;
    return ATTN_OK;
}

static void fmt_value(const attn_train_key *k, attn_train_value v, char *buf, size_t cap) {
    if (k->type == ATTN_TKEY_CHOICE)
        snprintf(buf, cap, "%s", v.s);
    else if (k->type == ATTN_TKEY_INT)
        snprintf(buf, cap, "%" PRId64, v.i);
    else
        snprintf(buf, cap, "%g", v.d);
}

/* May differ between a resume's request and its checkpoint. */
static int resume_may_change(const char *key) {
    return !strcmp(key, "max_steps") || !strcmp(key, "log_interval") ||
           !strcmp(key, "checkpoint_interval") || !strcmp(key, "final_eval");
}

/* The first key where what the request resolves to (sm, st) differs from
 * the saved run (m, t): *key gets its name, buf "12, the checkpoint has 4";
 * *key NULL if none. A stated lr_decay_steps of 0 (= max_steps) leaves the
 * saved horizon. */
static void first_conflict(const attn_gpt_config *sm, const attn_train_config *st, int vocab_given,
                           const attn_gpt_config *m, const attn_train_config *t, const char **key,
                           char *buf, size_t cap) {
    const struct {
        const char *name;
        double a, b;
    } model[] = {{"context_length", sm->context_length, m->context_length},
                 {"emb_dim", sm->emb_dim, m->emb_dim},
                 {"n_heads", sm->n_heads, m->n_heads},
                 {"n_layers", sm->n_layers, m->n_layers},
                 {"drop_rate", sm->drop_rate, m->drop_rate},
                 {"qkv_bias", sm->qkv_bias, m->qkv_bias},
                 {"vocab_size", vocab_given ? sm->vocab_size : m->vocab_size, m->vocab_size}};
    *key = NULL;
    for (size_t i = 0; i < sizeof model / sizeof model[0]; i++)
        if (model[i].a != model[i].b) {
            *key = model[i].name;
            snprintf(buf, cap, "%g, the checkpoint has %g", model[i].a, model[i].b);
            return;
        }
    for (int i = ATTN_GPT_KEY_VARIANT0; i < ATTN_GPT_KEY_VARIANT0 + ATTN_GPT_KEY_VARIANTS; i++) {
        char va[64], vb[64];
        attn_gpt_key_value(sm, i, va, sizeof va);
        attn_gpt_key_value(m, i, vb, sizeof vb);
        if (strcmp(va, vb) == 0) continue;
        *key = attn_gpt_key_at(i)->name;
        snprintf(buf, cap, "%s, the checkpoint has %s", va, vb);
        return;
    }
    for (int i = 0; i < ATTN_TRAIN_KEY_COUNT; i++) {
        const attn_train_key *k = attn_train_key_at(i);
        if (resume_may_change(k->name)) continue;
        attn_train_value a = attn_train_config_get(st, i), b = attn_train_config_get(t, i);
        if (!strcmp(k->name, "lr_decay_steps")) {
            if (a.i == 0) continue;
            if (b.i == 0) b.i = t->max_steps; /* the saved horizon */
            b.d = (double)b.i;
        }
        if (k->type == ATTN_TKEY_CHOICE ? strcmp(a.s, b.s) == 0 : a.d == b.d) continue;
        char va[64], vb[64];
        fmt_value(k, a, va, sizeof va);
        fmt_value(k, b, vb, sizeof vb);
        *key = k->name;
        snprintf(buf, cap, "%s, the checkpoint has %s", va, vb);
        return;
    }
}

/* Resuming: the request resolved as a fresh start of the same command line
 * would (preset, file, keys; without a preset or file, the saved config
 * and the keys) must be the saved run, but for what a resume may change. */
static attn_status resolve_resume(const attn_train_request *rq, attn_train_setup *s,
                                  char **recorded, attn_error *err) {
    if (!rq->out)
        return fail_request(
            s, attn_fail(err, ATTN_ERR_INVALID_ARG, "resuming needs the run folder (out)"));
    attn_status st = attn_trainer_read_config(rq->out, &s->model, &s->train, recorded, err);
    if (st) {
        char msg[ATTN_ERROR_MSG_MAX];
        snprintf(msg, sizeof msg, "%s", err ? err->msg : "");
        return attn_fail(err, st, "cannot resume: %.480s", msg);
    }
    const attn_train_config saved = s->train;
    attn_gpt_config sm = s->model;
    attn_train_config stc = saved;
    attn_train_json_set set = {.count = 0};
    if (rq->preset || rq->config) {
        if ((st = stated_config(rq, &sm, &stc, &set, s, err))) return st;
        /* The accumulation (a fresh start's default: the rank count) is the
         * run's unless stated: the same N may be split another way. */
        if (!attn_train_json_has(&set, "grad_accum")) stc.grad_accum = saved.grad_accum;
    }
    if ((st = apply_keys(rq, &stc, s, err))) return st;
    const char *key;
    char what[160];
    first_conflict(&sm, &stc, attn_train_json_has(&set, "vocab_size"), &s->model, &saved, &key,
                   what, sizeof what);
    if (key) {
        const int i = attn_train_key_find(key);
        char from[ATTN_TRAIN_PATH_MAX + 64];
        if (i >= 0 && (rq->given >> i & 1u))
            snprintf(from, sizeof from, "--%s", attn_train_key_at(i)->flag);
        else if (attn_train_json_has(&set, key))
            snprintf(from, sizeof from, "config %s", rq->config);
        else if (rq->preset)
            snprintf(from, sizeof from, "preset '%s'", rq->preset);
        else
            snprintf(from, sizeof from, "preset '%s' (the default)", ATTN_TRAIN_DEFAULT_PRESET);
        return fail_request(
            s, attn_fail(err, ATTN_ERR_INVALID_ARG,
                         "cannot resume %.400s with a different config: %s gives %s %s (a "
                         "resume may change only max_steps, log_interval, "
                         "checkpoint_interval and final_eval%s)",
                         rq->out, from, key, what,
                         from[0] == '-' ? ""
                                        : "; without --preset and --config it continues "
                                          "as saved"));
    }
    /* The run goes on as saved; only the keys set move its end and rhythm
     * (not the preset's or the file's: a run extended with --steps resumes
     * with the command line that started it). */
    if (given(rq, "log_interval")) s->train.log_interval = stc.log_interval;
    if (given(rq, "checkpoint_interval")) s->train.checkpoint_interval = stc.checkpoint_interval;
    if (given(rq, "final_eval")) s->train.final_eval = stc.final_eval;
    if (given(rq, "max_steps")) attn_train_config_extend(&s->train, &saved, stc.max_steps);
    s->vocab_given = 0; /* the saved vocabulary (attn_train_start) */
    return ATTN_OK;
}

attn_status attn_train_resolve(const attn_train_request *rq, attn_train_setup *s, attn_error *err) {
    memset(s, 0, sizeof *s);
    if (rq->resume && rq->init_from)
        return fail_request(s, attn_fail(err, ATTN_ERR_INVALID_ARG,
                                         "init_from starts a new run from trained weights and "
                                         "resume continues one: give one of them"));
    if (rq->resume && rq->force)
        return fail_request(s, attn_fail(err, ATTN_ERR_INVALID_ARG,
                                         "resume continues a run and force replaces it: give "
                                         "one of them"));
    char *recorded = NULL;
    attn_status st;
    if (rq->resume) {
        st = resolve_resume(rq, s, &recorded, err);
        s->preset = rq->preset;
    } else {
        attn_train_json_set set;
        s->preset = rq->preset ? rq->preset : ATTN_TRAIN_DEFAULT_PRESET;
        st = stated_config(rq, &s->model, &s->train, &set, s, err);
        s->vocab_given = attn_train_json_has(&set, "vocab_size");
        if (!st && rq->ranks > 1 && !given(rq, "grad_accum") && s->train.grad_accum <= 1)
            s->train.grad_accum = rq->ranks; /* one micro-batch per rank */
        if (!st) st = apply_keys(rq, &s->train, s, err);
    }
    if (!st && s->train.tokenizer == ATTN_TOKENIZER_GPT2) {
        /* GPT-2's files fix it (the trainer checks them against it);
         * resuming, the saved size stands */
        if (!s->vocab_given && !rq->resume) s->model.vocab_size = ATTN_GPT2_N_VOCAB;
        s->vocab_given = 1;
    } else if (!st && !s->vocab_given) {
        s->model.vocab_size = 1; /* the corpus decides */
    }
    if (!st &&
        (attn_gpt_config_validate(&s->model, err) || attn_train_config_validate(&s->train, err)))
        st = fail_request(s, ATTN_ERR_INVALID_ARG);
    if (!st) {
        if (rq->out)
            snprintf(s->out, sizeof s->out, "%s", rq->out);
        else
            snprintf(s->out, sizeof s->out, "runs/%s", s->preset);
        /* Absolute, so that a resume from another folder reads it too. */
        const char *data = rq->data                ? rq->data
                           : recorded && *recorded ? recorded
                                                   : ATTN_TRAIN_DEFAULT_DATA;
        absolute(data, s->data, sizeof s->data);
    }
    free(recorded);
    return st;
}

/* The tokenizer of the model checkpoint at path, from its header; GPT-2
 * weights of other programs (HF, llm.c, the book's) get GPT-2's. */
static attn_status checkpoint_tokenizer(const char *path, attn_tokenizer *tok, attn_error *err) {
    attn_gpt_config cfg;
    attn_weights_format fmt;
    attn_status st = attn_weights_detect(path, &fmt, err);
    if (st) return st;
    if (fmt != ATTN_WEIGHTS_ATTN) return attn_tokenizer_gpt2(tok, NULL, err);
    return attn_gpt_checkpoint_config(path, &cfg, tok, NULL, err);
}

attn_status attn_train_start(attn_trainer **out, const attn_train_request *rq,
                             const attn_train_setup *su, const char *text, size_t n,
                             attn_error *err) {
    *out = NULL;
    /* Resuming, the live checkpoint's (DIR/model.safetensors, a link made
     * after the first commit, may not be there yet: attn_trainer_resume
     * reads the live one too). */
    char live[ATTN_CKPT_PATH_MAX];
    attn_status st = rq->resume ? attn_ckpt_resolve(su->out, live, err) : ATTN_OK;
    if (st) return st;
    const char *ckpt = rq->resume ? live : rq->init_from;
    attn_tokenizer tok;
    memset(&tok, 0, sizeof tok);
    /* The checkpoint's, or GPT-2's files (their errors name the files, not the corpus). */
    const int have = ckpt || su->train.tokenizer == ATTN_TOKENIZER_GPT2;
    if (ckpt && (st = checkpoint_tokenizer(ckpt, &tok, err))) return st;
    if (!ckpt && have && (st = attn_tokenizer_gpt2(&tok, NULL, err))) return st;
    attn_trainer *tr = NULL;
    st = attn_trainer_create_ex(&tr, &su->model, &su->train, su->vocab_given, have ? &tok : NULL,
                                NULL, text, n, su->data, rq->dry_run, err);
    attn_tokenizer_free(&tok);
    if (st) {
        char msg[ATTN_ERROR_MSG_MAX];
        snprintf(msg, sizeof msg, "%s", err ? err->msg : "");
        if (rq->resume)
            return attn_fail(err, st, "cannot resume %.300s on the corpus %.300s: %s", su->out,
                             su->data, msg);
        if (rq->init_from)
            return attn_fail(err, st, "cannot fine-tune %.300s on the corpus %.300s: %s",
                             rq->init_from, su->data, msg);
        return attn_fail(err, st, "%.400s: %s", su->data, msg);
    }
    tr->corpus_path = su->data; /* absolute: a resume from anywhere finds it */
    if (rq->resume) st = attn_trainer_resume(tr, su->out, err);
    if (!st && rq->init_from) st = attn_trainer_init_from(tr, rq->init_from, err);
    if (st)
        attn_trainer_free(tr);
    else
        *out = tr;
    return st;
}

/* mkdir -p; made (cap bytes) gets the topmost folder it created, "" if none. */
static int make_dirs(const char *path, char *made, size_t cap) {
    char buf[ATTN_TRAIN_PATH_MAX];
    made[0] = '\0';
    if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf) return -1;
    for (char *p = buf + 1;; p++) {
        if (*p && *p != '/') continue;
        const char c = *p;
        *p = '\0';
        if (mkdir(buf, 0777) == 0) {
            if (!made[0]) snprintf(made, cap, "%s", buf);
        } else if (errno != EEXIST) {
            return -1;
        }
        *p = c;
        if (!c) break;
    }
    struct stat sb;
    if (stat(buf, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
        errno = ENOTDIR;
        return -1;
    }
    return 0;
}

/* path lies inside dir (both resolved). */
static int lies_inside(const char *path, const char *dir) {
    char *rp = realpath(path, NULL), *rd = realpath(dir, NULL);
    size_t n = rd ? strlen(rd) : 0;
    int in = rp && rd && strncmp(rp, rd, n) == 0 && (rp[n] == '/' || rp[n] == '\0');
    free(rp);
    free(rd);
    return in;
}

/* Refuse out when it lies inside another run's folder (best/, ckpt-*, a
 * folder of the user's): that run's files are its trainer's alone. */
static attn_status check_not_in_run(const char *out, attn_train_claim *c, attn_error *err) {
    char run[ATTN_CKPT_PATH_MAX];
    if (!attn_path_in_run(out, 0, run, sizeof run)) return ATTN_OK;
    c->request_error = 2;
    return attn_fail(err, ATTN_ERR_INVALID_ARG,
                     "%s lies inside the run folder %s, whose files only its own run writes: "
                     "choose an output directory outside it",
                     out, run);
}

/* What claim_checked refuses, read only: the folder may be used. */
static attn_status check_claim(const char *out, int resume, int force, const char *init_from,
                               run_dir_info *info, attn_train_claim *c, attn_error *err) {
    attn_status st = run_dir_inspect(out, info, err);
    if (st) return st;
    run_dir_info i = *info;
    c->kept = i.user_entries;
    if (i.foreign[0])
        return attn_fail(err, ATTN_ERR_INVALID_ARG,
                         "%s/%s was not written by attn and a run would replace it: move it out "
                         "of the folder or choose another output directory",
                         out, i.foreign);
    if (!i.marked && i.user_entries > 0 && !i.has_checkpoint)
        return attn_fail(err, ATTN_ERR_INVALID_ARG,
                         "%s is not empty and was not made by attn train (no %s marker, no "
                         "checkpoint of attn's): attn trains only in a new or empty folder or "
                         "one it made, and deletes nothing it did not make; choose another "
                         "output directory",
                         out, RUN_DIR_MARKER);
    if (!resume && i.has_checkpoint) {
        char at[64] = "";
        if (i.step >= 0) snprintf(at, sizeof at, " (step %" PRId64 ")", i.step);
        if (!force) {
            c->request_error = 1;
            return attn_fail(err, ATTN_ERR_INVALID_ARG, "%s already holds a checkpoint%s", out, at);
        }
        if (init_from && lies_inside(init_from, out)) {
            c->request_error = 2;
            return attn_fail(err, ATTN_ERR_INVALID_ARG,
                             "init_from %s lies inside %s, whose old run force removes first: "
                             "copy it elsewhere, or choose another output directory",
                             init_from, out);
        }
        c->replaced_step = i.step >= 0 ? i.step : 0;
    }
    return ATTN_OK;
}

attn_status attn_train_check_dir(const char *out, int resume, int force, const char *init_from,
                                 attn_train_claim *c, attn_error *err) {
    memset(c, 0, sizeof *c);
    c->replaced_step = -1;
    run_dir_info info;
    attn_status st = check_not_in_run(out, c, err);
    struct stat sb;
    if (!st && stat(out, &sb) == 0) st = check_claim(out, resume, force, init_from, &info, c, err);
    return st;
}

/* The folder is attn's to write in (see attn_train_claim_dir); makes it so. */
static attn_status claim_checked(const char *out, int resume, int force, const char *init_from,
                                 attn_train_claim *c, attn_error *err) {
    run_dir_info info;
    attn_status st = check_claim(out, resume, force, init_from, &info, c, err);
    if (st) return st;
    if (!info.marked) {
        c->marked = 1;
        if ((st = run_dir_mark(out, err))) return st;
    }
    if (force && !resume && (st = run_dir_clear(out, &c->removed, err))) return st;
    /* Debris first: while latest names no folder no checkpoint is taken for
     * stale, and the repair then deletes nothing. */
    attn_error e;
    if (run_dir_clean(out, &c->stale_removed, &e)) /* the run can go on */
        snprintf(c->warning, sizeof c->warning, "%s", e.msg);
    if (resume && (st = run_dir_repair(out, c->repaired, sizeof c->repaired, err))) return st;
    return ATTN_OK;
}

attn_status attn_train_claim_dir(const char *out, const char *who, int resume, int force,
                                 const char *init_from, attn_run_lock *lock, attn_train_claim *c,
                                 attn_error *err) {
    memset(c, 0, sizeof *c);
    c->replaced_step = -1;
    lock->fd = -1;
    const size_t len = strlen(out), room = ATTN_CKPT_DIR_MAX - (sizeof ATTN_CKPT_BEST);
    if (len > room) {
        c->request_error = 2;
        return attn_fail(err, ATTN_ERR_INVALID_ARG,
                         "the output directory path is %zu characters long, more than the %zu "
                         "a checkpoint's files leave room for: choose a shorter one",
                         len, room);
    }
    attn_status in_run = check_not_in_run(out, c, err);
    if (in_run) return in_run;
    snprintf(c->dir, sizeof c->dir, "%s", out);
    if (make_dirs(out, c->made, sizeof c->made) != 0 || access(out, W_OK | X_OK) != 0) {
        int e = errno;
        attn_train_claim_release(c, lock, 1);
        return attn_fail(err, ATTN_ERR_IO, "cannot write to the output directory %s: %s", out,
                         strerror(e));
    }
    absolute(out, c->out_abs, sizeof c->out_abs);
    attn_status st = attn_run_lock_acquire(lock, out, who, err);
    if (!st) st = claim_checked(out, resume, force, init_from, c, err);
    if (st) attn_train_claim_release(c, lock, 1);
    return st;
}

void attn_train_claim_release(attn_train_claim *c, attn_run_lock *lock, int failed) {
    if (lock) attn_run_lock_release(lock);
    if (!c || !failed || !c->dir[0]) return;
    char p[ATTN_TRAIN_PATH_MAX + 16];
    if (c->marked && run_dir_only_marker(c->dir) &&
        snprintf(p, sizeof p, "%s/%s", c->dir, RUN_DIR_MARKER) < (int)sizeof p)
        unlink(p);
    c->marked = 0;
    /* The folders it made, innermost first, while they are empty. */
    snprintf(p, sizeof p, "%s", c->dir);
    for (size_t n = strlen(p); c->made[0] && n > 0;) {
        while (n > 1 && p[n - 1] == '/')
            p[--n] = '\0';
        if (rmdir(p) != 0 || !strcmp(p, c->made)) break;
        char *slash = strrchr(p, '/');
        if (!slash || slash == p) break;
        *slash = '\0';
        n = strlen(p);
    }
    c->made[0] = '\0';
}

/* FNV-1a of this executable: ranks running different binaries are refused. */
static uint64_t exe_hash(void) {
    void *buf = NULL;
    size_t n = 0;
    uint64_t h = 0xcbf29ce484222325ull;
    if (attn_file_read_all("/proc/self/exe", 0, &buf, &n, NULL) == ATTN_OK)
        for (size_t i = 0; i < n; i++)
            h = (h ^ ((unsigned char *)buf)[i]) * 0x100000001b3ull;
    free(buf);
    return h;
}

attn_status attn_trainer_check_ranks(const attn_trainer *tr, attn_error *err) {
    uint64_t cfg = 0, state = 0;
    attn_status s = attn_dist_check_same(tr->dist, exe_hash(), "attn executable", err);
    if (s) return s;
    attn_trainer_fingerprint(tr, &cfg, &state);
    if ((s = attn_dist_check_same(tr->dist, cfg, "configuration or corpus", err))) return s;
    return attn_dist_check_same(tr->dist, state, "initial weights or training state", err);
}
