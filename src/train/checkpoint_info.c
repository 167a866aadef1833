/* A checkpoint's summary (see attn/checkpoint_info.h). */
#define _POSIX_C_SOURCE 200809L /* stat */
#include "attn/checkpoint_info.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "attn/safetensors.h"
#include "attn/tokenizer.h"
#include "attn/weights_format.h"
#include "train_history.h"

/* The last step and the last / best evaluation of a training state. */
static void read_history(const attn_safetensors *st, attn_checkpoint_info *info) {
    train_history h;
    train_history_find(st, &h);
    if (h.n_steps > 0) {
        train_history_step(&h, h.n_steps - 1, &info->last);
        info->n_history = h.n_steps;
    }
    /* Best as best/ is chosen: by the sampled val losses when the run took
     * any (its final exact one aside), else by the exact ones. */
    int sampled = 0;
    for (size_t i = 0; i < h.n_evals; i++) {
        attn_eval_record r;
        train_history_eval(&h, i, &r);
        sampled |= !isnan(r.val_loss);
    }
    for (size_t i = 0; i < h.n_evals; i++) {
        attn_eval_record r;
        train_history_eval(&h, i, &r);
        const float v = sampled ? r.val_loss : r.val_exact;
        const float b = sampled ? info->best_eval.val_loss : info->best_eval.val_exact;
        if (i == 0 || v < b) info->best_eval = r;
        info->last_eval = r;
    }
    if (h.n_evals > 0) info->n_evals = h.n_evals;
}

static uint64_t file_size(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0 ? (uint64_t)sb.st_size : 0;
}

attn_status attn_checkpoint_info_read(const char *path, attn_checkpoint_info *info,
                                      attn_error *err) {
    memset(info, 0, sizeof *info);
    struct stat sb;
    if (stat(path, &sb) != 0)
        return attn_fail(err, ATTN_ERR_IO, "checkpoint %s: %s", path, strerror(errno));
    const int is_dir = S_ISDIR(sb.st_mode);
    char file[4096];
    if (snprintf(file, sizeof file, "%s%s%s", path, is_dir ? "/" : "",
                 is_dir ? ATTN_CKPT_MODEL : "") >= (int)sizeof file)
        return attn_fail(err, ATTN_ERR_IO, "checkpoint path is too long");

    attn_gpt m;
    attn_tokenizer tok;
    /* Any weights file: attn's own (its step too), or HF / llm.c / book
     * GPT-2 weights (no step: -1). */
    attn_weights_format fmt;
    attn_status s = attn_gpt_open(path, NULL, &m, &tok, &fmt, &info->step, err);
    if (s) return s;
    info->format = fmt;
    info->model = m.cfg;
    info->n_params = attn_gpt_num_params(&m);
    info->vocab_size = tok.vocab_size;
    info->tokenizer = tok.kind;
    info->vocabulary = attn_tokenizer_vocab_string(&tok); /* char only */
    attn_gpt_free(&m);
    attn_tokenizer_free(&tok);
    if (!info->vocabulary && info->tokenizer == ATTN_TOKENIZER_CHAR)
        return attn_fail(err, ATTN_ERR_NOMEM, "out of memory");
    info->model_bytes = file_size(file);
    if (!is_dir) return ATTN_OK;

    snprintf(file, sizeof file, "%s/%s", path, ATTN_CKPT_STATE);
    if (stat(file, &sb) != 0) return ATTN_OK; /* weights only (e.g. exported) */
    attn_gpt_config mcfg;
    if ((s = attn_trainer_read_config(path, &mcfg, &info->train, &info->corpus_path, err)))
        goto fail;
    attn_safetensors st;
    if ((s = attn_safetensors_read(file, &st, err))) goto fail;
    uint64_t stp = 0;
    if ((s = attn_safetensors_meta_u64(&st, file, "step", INT64_MAX, &stp, err))) {
        attn_safetensors_free(&st);
        goto fail;
    }
    info->state_step = (int64_t)stp;
    read_history(&st, info);
    attn_safetensors_free(&st);
    info->state_bytes = file_size(file);
    info->has_train_state = 1;
    return ATTN_OK;
fail:
    attn_checkpoint_info_free(info);
    return s;
}

void attn_checkpoint_info_free(attn_checkpoint_info *info) {
    free(info->vocabulary);
    free(info->corpus_path);
    memset(info, 0, sizeof *info);
}
