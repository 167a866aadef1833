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

attn_status attn_gpt_load_checkpoint(const char *path, attn_gpt *m, attn_tokenizer *tok,
                                     int64_t *step, attn_error *err) {
    char file[ATTN_CKPT_PATH_MAX];
    struct stat sb;
    memset(m, 0, sizeof *m);
    memset(tok, 0, sizeof *tok);
    if (stat(path, &sb) != 0)
        return attn_fail(err, ATTN_ERR_IO, "checkpoint %s: %s", path, strerror(errno));
    if (S_ISDIR(sb.st_mode)) {
        if (attn_path_join(file, ATTN_CKPT_PATH_MAX, path, ATTN_CKPT_MODEL))
            return attn_fail(err, ATTN_ERR_IO, "checkpoint path is too long");
    } else {
        snprintf(file, sizeof file, "%s", path);
    }
    attn_safetensors st;
    attn_status s = attn_safetensors_read(file, &st, err);
    if (s) return s;
    attn_gpt_config cfg;
    if ((s = read_meta(&st, file, &cfg, tok, err))) goto out;
    const int has_step =
        attn_safetensors_meta(&st, "step") != NULL; /* files from elsewhere: none */
    uint64_t stp = 0;
    if (has_step && (s = attn_safetensors_meta_u64(&st, file, "step", INT64_MAX, &stp, err)))
        goto out;
    /* Shapes before allocating: the model then fits in the file's size. */
    if ((s = attn_ckpt_fit_config(&cfg, &st, "", file, err))) goto misfit;
    if ((s = attn_ckpt_check_finite(&st, "", file, err))) goto out;
    if ((s = attn_gpt_init(m, &cfg, NULL, err))) goto out;
    if ((s = attn_safetensors_to_params(&st, file, attn_gpt_params(m), err))) goto misfit;
    if (step) *step = has_step ? (int64_t)stp : -1;
    goto out;
misfit : {
    char msg[ATTN_ERROR_MSG_MAX];
    snprintf(msg, sizeof msg, "%s", err ? err->msg : "");
    s = attn_fail(err, s, "checkpoint tensors do not fit its config: %s", msg);
}
out:
    attn_safetensors_free(&st);
    if (s) {
        attn_gpt_free(m);
        attn_tokenizer_free(tok);
    }
    return s;
}
