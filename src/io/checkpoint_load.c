/* Loading a model and its tokenizer from a checkpoint (attn_gpt_load_checkpoint,
 * attn/checkpoint.h). */
#define _POSIX_C_SOURCE 200809L /* stat */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "attn/checkpoint.h"
#include "attn/fileio.h"
#include "attn/gpt.h"
#include "attn/safetensors.h"
#include "attn/tokenizer.h"
#include "checkpoint_fit.h"

/* The config and the tokenizer a model file's metadata hold (tok freed by
 * the caller on failure). */
static attn_status read_meta(const attn_safetensors *st, const char *file, attn_gpt_config *cfg,
                             attn_tokenizer *tok, attn_error *err) {
    const char *cfg_text = attn_safetensors_meta(st, "config");
    if (!cfg_text || (!attn_safetensors_meta(st, ATTN_CKPT_META_VOCABULARY) &&
                      !attn_safetensors_meta(st, ATTN_CKPT_META_TOKENIZER)))
        return attn_fail(err, ATTN_ERR_FORMAT,
                         "%s is not an attn GPT checkpoint (no config/vocabulary metadata)", file);
    const char *task = attn_safetensors_meta(st, "task");
    /* an instruct run's model is a language model (its adapters, if any,
     * then fail the shapes: attn_finetuned_load reads them) */
    if (task && strcmp(task, "lm") != 0 && strcmp(task, "instruct") != 0)
        return attn_fail(err, ATTN_ERR_INVALID_ARG,
                         "%s is a model of task %s, not a language model (attn classify runs a "
                         "classifier)",
                         file, task);
    memset(cfg, 0, sizeof *cfg);
    attn_status s = attn_gpt_config_set_json(cfg, cfg_text, err);
    if (s) {
        char msg[ATTN_ERROR_MSG_MAX];
        snprintf(msg, sizeof msg, "%s", err ? err->msg : "");
        return attn_fail(err, ATTN_ERR_FORMAT, "%s: bad config metadata: %s", file, msg);
    }
    if ((s = attn_ckpt_read_tokenizer(st, file, tok, err))) return s;
    if (tok->vocab_size != cfg->vocab_size)
        return attn_fail(err, ATTN_ERR_FORMAT,
                         "%s: the %s tokenizer has %d tokens but the config says vocab_size %d "
                         "(the embedding's rows)",
                         file, attn_tokenizer_kind_name(tok->kind), tok->vocab_size,
                         cfg->vocab_size);
    return ATTN_OK;
}

/* The model file of path (a checkpoint folder's model.safetensors, or the
 * file itself) into file; its header (header_only) or whole contents into st,
 * config, tokenizer and step checked against its tensors' shapes. On failure
 * nothing is left allocated. */
static attn_status open_checkpoint(const char *path, int header_only, char *file,
                                   attn_safetensors *st, attn_gpt_config *cfg, attn_tokenizer *tok,
                                   int64_t *step, attn_error *err) {
    struct stat sb;
    memset(tok, 0, sizeof *tok);
    if (stat(path, &sb) != 0)
        return attn_fail(err, ATTN_ERR_IO, "checkpoint %s: %s", path, strerror(errno));
    if (S_ISDIR(sb.st_mode)) {
        if (attn_path_join(file, ATTN_CKPT_PATH_MAX, path, ATTN_CKPT_MODEL))
            return attn_fail(err, ATTN_ERR_IO, "checkpoint path is too long");
    } else {
        snprintf(file, ATTN_CKPT_PATH_MAX, "%s", path);
    }
    attn_status s = header_only ? attn_safetensors_read_header(file, st, err)
                                : attn_safetensors_read(file, st, err);
    if (s) return s;
    if ((s = read_meta(st, file, cfg, tok, err))) goto fail;
    const int has_step = attn_safetensors_meta(st, "step") != NULL; /* files from elsewhere: none */
    uint64_t stp = 0;
    if (has_step && (s = attn_safetensors_meta_u64(st, file, "step", INT64_MAX, &stp, err)))
        goto fail;
    if (step) *step = has_step ? (int64_t)stp : -1;
    /* Shapes before allocating: the model then fits in the file's size. */
    if ((s = attn_ckpt_fit_config(cfg, st, "", file, err))) {
        char msg[ATTN_ERROR_MSG_MAX];
        snprintf(msg, sizeof msg, "%s", err ? err->msg : "");
        s = attn_fail(err, s, "checkpoint tensors do not fit its config: %s", msg);
        goto fail;
    }
    return ATTN_OK;
fail:
    attn_safetensors_free(st);
    attn_tokenizer_free(tok);
    return s;
}

attn_status attn_gpt_checkpoint_config(const char *path, attn_gpt_config *cfg, attn_tokenizer *tok,
                                       int64_t *step, attn_error *err) {
    char file[ATTN_CKPT_PATH_MAX];
    attn_safetensors st;
    attn_status s = open_checkpoint(path, 1, file, &st, cfg, tok, step, err);
    if (!s) attn_safetensors_free(&st);
    return s;
}

/* The model's tensors: from a regular file read one by one straight into
 * the arena (no image of the file beside it: the load's peak is the
 * model's size); a stream's image (st, read whole) copied. */
static attn_status read_tensors(const attn_safetensors *st, int whole, const char *file,
                                attn_gpt *m, attn_error *err) {
    const attn_param_list *list = attn_gpt_params(m);
    attn_status s = whole ? attn_safetensors_to_params(st, file, list, err)
                          : attn_safetensors_read_params(file, st, list, err);
    if (s && s != ATTN_ERR_IO) {
        char msg[ATTN_ERROR_MSG_MAX];
        snprintf(msg, sizeof msg, "%s", err ? err->msg : "");
        s = attn_fail(err, s, "checkpoint tensors do not fit its config: %s", msg);
    }
    if (!s && !whole) s = attn_ckpt_check_finite_params(list, file, err);
    return s;
}

attn_status attn_gpt_load_checkpoint(const char *path, attn_gpt *m, attn_tokenizer *tok,
                                     int64_t *step, attn_error *err) {
    char file[ATTN_CKPT_PATH_MAX];
    attn_safetensors st;
    attn_gpt_config cfg;
    memset(m, 0, sizeof *m);
    struct stat sb; /* a file or a folder: the header first; a stream: read whole */
    const int whole = stat(path, &sb) != 0 || !(S_ISREG(sb.st_mode) || S_ISDIR(sb.st_mode));
    attn_status s = open_checkpoint(path, !whole, file, &st, &cfg, tok, step, err);
    if (s) return s;
    if (!(whole && (s = attn_ckpt_check_finite(&st, "", file, err))) &&
        !(s = attn_gpt_init(m, &cfg, NULL, err)))
        s = read_tensors(&st, whole, file, m, err);
    attn_safetensors_free(&st);
    if (s) {
        attn_gpt_free(m);
        attn_tokenizer_free(tok);
    }
    return s;
}
