/* A fine-tuning run in its run folder (attn/finetune_run.h): the one
 * place the program and the bindings check, claim, log and checkpoint it. */
#define _POSIX_C_SOURCE 200809L /* stat, opendir */
#include "attn/finetune_run.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "attn/checkpoint.h"
#include "attn/fileio.h"

/* Absent, or an empty folder. */
static int out_is_free(const char *out) {
    struct stat sb;
    if (stat(out, &sb) != 0) return errno == ENOENT;
    if (!S_ISDIR(sb.st_mode)) return 0;
    DIR *d = opendir(out);
    if (!d) return 0;
    int empty = 1;
    for (struct dirent *e; empty && (e = readdir(d));)
        empty = strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0;
    closedir(d);
    return empty;
}

attn_status attn_finetune_check_out(const char *out, const char *task, int resume, const char *dash,
                                    attn_error *err) {
    if (!resume)
        return out_is_free(out)
                   ? ATTN_OK
                   : attn_fail(err, ATTN_ERR_STATE,
                               "%sout %s exists and is not an empty folder: give a new one (attn "
                               "deletes nothing it did not make)",
                               dash, out);
    if (!attn_ckpt_exists(out, NULL))
        return attn_fail(err, ATTN_ERR_INVALID_ARG, "%sresume: %s holds no checkpoint to continue",
                         dash, out);
    char have[16];
    attn_error e2;
    if (attn_model_task(out, have, &e2) == ATTN_OK && strcmp(have, task) != 0)
        return attn_fail(err, ATTN_ERR_INVALID_ARG,
                         "%sresume: %s is a %stask %s run; %sresume continues it with the "
                         "command that started it, not %stask %s",
                         dash, out, dash, have, dash, dash, task);
    return ATTN_OK;
}

attn_status attn_finetune_folder_open(attn_finetune_folder *f, const char *out, const char *who,
                                      int resume, const char *init_from, const attn_tokenizer *tok,
                                      const attn_classifier_info *info, attn_error *err) {
    memset(f, 0, sizeof *f);
    attn_status s = attn_train_claim_dir(out, who, resume, 0, init_from, &f->lock, &f->claim, err);
    if (s) return s;
    f->info = *info;
    f->ckpt = (attn_finetune_ckpt){out, tok, &f->info, resume, 0};
    return ATTN_OK;
}

/* ------------------------------------------------------------- the log */

static const char log_head[] = "kind,epoch,step,train,val\n";

/* The log's text, log.csv's head first. */
static attn_text *log_of(attn_finetune_folder *f) {
    if (!f->log.len) attn_text_puts(&f->log, log_head);
    return &f->log;
}

static void on_eval(void *user, int epoch, int64_t step, double tl, double vl) {
    attn_finetune_folder *f = user;
    attn_text_printf(log_of(f), "loss,%d,%lld,%.17g,%.17g\n", epoch, (long long)step, tl, vl);
    if (f->ev.on_eval) f->ev.on_eval(f->ev.user, epoch, step, tl, vl);
}

static void on_epoch(void *user, int epoch, double ta, double va) {
    attn_finetune_folder *f = user;
    attn_text_printf(log_of(f), "accuracy,%d,,%.17g,%.17g\n", epoch, ta, va);
    if (f->ev.on_epoch) f->ev.on_epoch(f->ev.user, epoch, ta, va);
}

static void on_initial(void *user, double tl, double vl) {
    attn_finetune_folder *f = user;
    attn_text_printf(log_of(f), "initial_loss,,0,%.17g,%.17g\n", tl, vl);
    if (f->ev.on_initial) f->ev.on_initial(f->ev.user, tl, vl);
}

static void on_step(void *user, int64_t step, float loss) {
    attn_finetune_folder *f = user;
    if (f->ev.on_step) f->ev.on_step(f->ev.user, step, loss);
}

/* adapters' scale: the book's alpha / rank (0: none) */
static float lora_scale(const attn_classifier_info *info) {
    return info->lora_rank ? info->lora_alpha / (float)info->lora_rank : 0;
}

static int on_sample(void *user, int epoch, attn_gpt *m) {
    attn_finetune_folder *f = user;
    return f->ev.on_sample(f->ev.user, epoch, m);
}

static void on_sample_line(void *user, int epoch, const char *line) {
    attn_finetune_folder *f = user;
    f->ev.on_sample_line(f->ev.user, epoch, line);
}

attn_status attn_finetune_folder_train(attn_finetune_folder *f, attn_gpt *m,
                                       const attn_finetune_sets *sets,
                                       const attn_classify_config *cfg,
                                       const attn_classify_events *ev, attn_classify_result *res,
                                       attn_error *err) {
    static const attn_classify_events none = {0};
    f->ev = ev ? *ev : none;
    attn_classify_config c = *cfg;
    c.ckpt = &f->ckpt;
    /* the step and sample hooks only where the caller has them */
    const attn_classify_events wrap = {f,
                                       on_eval,
                                       on_epoch,
                                       f->ev.on_step ? on_step : NULL,
                                       on_initial,
                                       f->ev.on_sample ? on_sample : NULL,
                                       f->ev.on_sample_line ? on_sample_line : NULL};
    if (f->info.task && strcmp(f->info.task, "instruct") == 0)
        return attn_instruct_train(m, sets->itrain, sets->ival, &c, &wrap, res, err);
    attn_status s = attn_classify_train(m, sets->train, sets->val, &c, &wrap, res, err);
    if (!s)
        attn_text_printf(log_of(f), "final_accuracy,,%lld,%.17g,%.17g\n", (long long)res->steps,
                         res->final_train_acc, res->final_val_acc);
    return s;
}

/* RUN/log.csv's first line: a log.csv without it is not attn's (kept). */

/* RUN/responses.json: the test split's responses. */
static attn_status write_responses(attn_finetune_folder *f, const attn_gpt *m,
                                   const attn_instruct_data *test, attn_error *err) {
    char path[ATTN_CKPT_PATH_MAX];
    if (attn_path_join(path, sizeof path, f->ckpt.dir, "responses.json"))
        return attn_fail(err, ATTN_ERR_IO, "the run folder's path is too long");
    char *json = NULL;
    size_t len = 0;
    attn_status s =
        attn_instruct_responses(m, lora_scale(&f->info), f->ckpt.tok, test, &json, &len, err);
    if (!s) s = attn_file_write_atomic(path, json, len, err);
    free(json);
    return s;
}

/* RUN/log.csv: its head and the rows. */
static attn_status write_log(attn_finetune_folder *f, attn_error *err) {
    char path[ATTN_CKPT_PATH_MAX];
    if (attn_path_join(path, sizeof path, f->ckpt.dir, "log.csv"))
        return attn_fail(err, ATTN_ERR_IO, "the run folder's path is too long");
    const attn_text *log = log_of(f);
    if (log->oom) return attn_fail(err, ATTN_ERR_NOMEM, "out of memory");
    FILE *fp = fopen(path, "rb");
    if (fp) { /* a resumed run's: rewritten only when attn wrote it */
        char head[sizeof log_head] = {0};
        const size_t n = fread(head, 1, sizeof head - 1, fp);
        fclose(fp);
        if (n != sizeof head - 1 || strcmp(head, log_head) != 0)
            return attn_fail(err, ATTN_ERR_FORMAT,
                             "%s is not attn's: left as it is, the log not written", path);
    }
    return attn_file_write_atomic(path, log->s, log->len, err);
}

attn_status attn_finetune_folder_finish(attn_finetune_folder *f, const attn_gpt *m,
                                        const attn_finetune_sets *sets, attn_error *err) {
    const int instruct = f->info.task && strcmp(f->info.task, "instruct") == 0;
    if (instruct && (!sets || !sets->itest))
        return attn_fail(err, ATTN_ERR_INVALID_ARG,
                         "an instruct run's finish needs its test split");
    attn_status s = write_log(f, err);
    return !s && instruct ? write_responses(f, m, sets->itest, err) : s;
}

void attn_finetune_folder_close(attn_finetune_folder *f, int failed) {
    attn_train_claim_release(&f->claim, &f->lock, failed);
    attn_text_free(&f->log);
}
