/* A fine-tuned model's checkpoint read (attn_finetuned_load, attn/finetune.h;
 * finetune_ckpt.c writes it),
 * the task a model file names, and adapters merged for export. */
#define _POSIX_C_SOURCE 200809L /* stat */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "attn/checkpoint.h"
#include "attn/fileio.h"
#include "attn/finetune.h"
#include "attn/gpt_family.h"
#include "attn/safetensors.h"

/* The model file of path: dir/model.safetensors through the live
 * checkpoint, or path itself. */
static attn_status model_file(const char *path, char *file, attn_error *err) {
    struct stat sb;
    if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode)) {
        char live[ATTN_CKPT_PATH_MAX];
        if (attn_ckpt_resolve(path, live, NULL) != ATTN_OK) snprintf(live, sizeof live, "%s", path);
        if (attn_path_join(file, ATTN_CKPT_PATH_MAX, live, ATTN_CKPT_MODEL))
            return attn_fail(err, ATTN_ERR_IO, "%s: the path is too long", path);
        return ATTN_OK;
    }
    snprintf(file, ATTN_CKPT_PATH_MAX, "%s", path);
    return ATTN_OK;
}

attn_status attn_model_task(const char *path, char *task, attn_error *err) {
    char file[ATTN_CKPT_PATH_MAX];
    attn_status s = model_file(path, file, err);
    if (s) return s;
    snprintf(task, 16, "lm");
    attn_safetensors st;
    if (attn_safetensors_read_header(file, &st, NULL) != ATTN_OK) return ATTN_OK; /* not ours */
    const char *t = attn_safetensors_meta(&st, "task");
    if (t) snprintf(task, 16, "%s", t);
    attn_safetensors_free(&st);
    return ATTN_OK;
}

static attn_status meta_int(const attn_safetensors *st, const char *file, const char *key, int lo,
                            int hi, int *out, attn_error *err) {
    uint64_t v;
    attn_status s = attn_safetensors_meta_u64(st, file, key, (uint64_t)hi, &v, err);
    if (s) return s;
    if ((int)v < lo)
        return attn_fail(err, ATTN_ERR_FORMAT, "%s: %s %d is below %d", file, key, (int)v, lo);
    *out = (int)v;
    return ATTN_OK;
}

static attn_status read_info(const attn_safetensors *st, const char *file,
                             attn_classifier_info *info, attn_error *err) {
    const char *task = attn_safetensors_meta(st, "task");
    if (!task || (strcmp(task, "classify") != 0 && strcmp(task, "instruct") != 0))
        return attn_fail(err, ATTN_ERR_INVALID_ARG,
                         "%s is not a fine-tuned model (task %s): attn train --task classify or "
                         "--task instruct makes one",
                         file, task ? task : "lm");
    info->task = strcmp(task, "classify") == 0 ? "classify" : "instruct";
    const int lo = info->task[0] == 'c';
    attn_status s = meta_int(st, file, "n_classes", lo, lo ? 1 << 20 : 0, &info->n_classes, err);
    if (!s) s = meta_int(st, file, "max_len", 1, 1 << 24, &info->max_len, err);
    if (!s) s = meta_int(st, file, "lora_rank", 0, 4096, &info->lora_rank, err);
    const char *tr = attn_safetensors_meta(st, "trainable");
    info->trainable = info->lora_rank ? "adapters" : "last-block";
    for (int i = 0; tr && attn_trainable_set_names()[i]; i++)
        if (strcmp(tr, attn_trainable_set_names()[i]) == 0)
            info->trainable = attn_trainable_set_names()[i];
    const char *a = attn_safetensors_meta(st, "lora_alpha");
    info->lora_alpha = a ? strtof(a, NULL) : 0.0f;
    if (!s && info->lora_rank && !(isfinite(info->lora_alpha) && info->lora_alpha > 0))
        s = attn_fail(err, ATTN_ERR_FORMAT, "%s: bad lora_alpha", file);
    return s;
}

static attn_status build_loaded(const attn_safetensors *st, const char *file, attn_gpt *m,
                                attn_tokenizer *tok, const attn_classifier_info *info,
                                attn_error *err) {
    attn_gpt_config cfg;
    memset(&cfg, 0, sizeof cfg);
    const char *cfg_text = attn_safetensors_meta(st, "config");
    if (!cfg_text) return attn_fail(err, ATTN_ERR_FORMAT, "%s: no config metadata", file);
    attn_status s = attn_gpt_config_set_json(&cfg, cfg_text, err);
    if (!s) s = attn_ckpt_read_tokenizer(st, file, tok, err);
    if (s) return s;
    const attn_gpt_build o = {.head_width = info->n_classes,
                              .head_bias = info->n_classes > 0,
                              .lora_rank = info->lora_rank,
                              .lora_alpha =
                                  info->lora_rank ? info->lora_alpha / (float)info->lora_rank : 0};
    if (info->max_len > cfg.context_length)
        return attn_fail(err, ATTN_ERR_FORMAT, "%s: max_len %d exceeds the context %d", file,
                         info->max_len, cfg.context_length);
    if ((s = attn_gpt_init_family(m, &cfg, NULL, &o, NULL, err))) return s;
    s = attn_safetensors_to_params(st, file, attn_gpt_params(m), err);
    attn_classify_config c = attn_classify_defaults();
    c.lora_rank = info->lora_rank;
    for (int i = 0; attn_trainable_set_names()[i]; i++)
        if (strcmp(info->trainable, attn_trainable_set_names()[i]) == 0)
            c.trainable = (attn_trainable_set)i;
    if (!s) s = attn_finetune_set_trainable(m, &c, err);
    if (s) attn_gpt_free(m);
    return s;
}

attn_status attn_classifier_load(const char *path, attn_gpt *m, attn_tokenizer *tok,
                                 attn_classifier_info *info, attn_error *err) {
    char task[16];
    attn_status s = attn_model_task(path, task, err);
    if (s) return s;
    if (strcmp(task, "classify") != 0 && strcmp(task, "lm") != 0)
        return attn_fail(err, ATTN_ERR_INVALID_ARG,
                         "%s is not a classifier (task %s): attn train --task classify makes one",
                         path, task);
    s = attn_finetuned_load(path, m, tok, info, err);
    if (s == ATTN_ERR_INVALID_ARG && err && strstr(err->msg, "not a fine-tuned model"))
        s = attn_fail(err, ATTN_ERR_INVALID_ARG,
                      "%s is not a classifier (task lm): attn train --task classify makes one",
                      path);
    return s;
}

attn_status attn_finetuned_load(const char *path, attn_gpt *m, attn_tokenizer *tok,
                                attn_classifier_info *info, attn_error *err) {
    char file[ATTN_CKPT_PATH_MAX];
    memset(m, 0, sizeof *m);
    memset(tok, 0, sizeof *tok);
    memset(info, 0, sizeof *info);
    attn_status s = model_file(path, file, err);
    if (s) return s;
    attn_safetensors st;
    if ((s = attn_safetensors_read(file, &st, err))) {
        if (s == ATTN_ERR_FORMAT)
            s = attn_fail(err, ATTN_ERR_INVALID_ARG,
                          "%s is not a fine-tuned model (not attn's checkpoint): attn train "
                          "--task classify or --task instruct makes one",
                          path);
        return s;
    }
    s = read_info(&st, file, info, err);
    if (!s) s = build_loaded(&st, file, m, tok, info, err);
    attn_safetensors_free(&st);
    if (s) attn_tokenizer_free(tok);
    return s;
}

/* W (out, in) += alpha (A B)^T: A (in, r), B (r, out). */
static void merge_one(float *W, const float *A, const float *Bm, int in, int out, int r,
                      float alpha) {
    for (int o = 0; o < out; o++)
        for (int i = 0; i < in; i++) {
            double acc = 0;
            for (int k = 0; k < r; k++)
                acc += (double)A[(size_t)i * (size_t)r + (size_t)k] *
                       (double)Bm[(size_t)k * (size_t)out + (size_t)o];
            W[(size_t)o * (size_t)in + (size_t)i] += alpha * (float)acc;
        }
}

attn_status attn_gpt_merge_lora(attn_gpt *out, const attn_gpt *m, float scale, attn_error *err) {
    memset(out, 0, sizeof *out);
    attn_status st = attn_gpt_check_fp32(m, "merging adapters", err);
    if (st) return st;
    const int width = attn_gpt_head_width(m);
    const attn_gpt_build o = {.head_width = width == m->cfg.vocab_size ? 0 : width,
                              .head_bias = m->out_head.has_bias};
    attn_status s = attn_gpt_init_family(out, &m->cfg, NULL, &o, NULL, err);
    if (s) return s;
    const attn_param_list *L = attn_gpt_params(out), *S = attn_gpt_params(m);
    for (int i = 0; !s && i < L->count; i++) {
        attn_param *p = &L->items[i];
        const char *dot = strrchr(p->name, '.');
        char name[ATTN_PARAM_NAME_MAX + 16], pre[ATTN_PARAM_NAME_MAX];
        snprintf(pre, sizeof pre, "%.*s", (int)(dot - p->name), p->name);
        snprintf(name, sizeof name, "%s.linear%s", pre, dot);
        const attn_param *q = attn_param_list_find(S, name);
        if (!q) q = attn_param_list_find(S, p->name);
        if (!q || q->numel != p->numel) {
            s = attn_fail(err, ATTN_ERR_STATE, "no %s to merge", p->name);
            break;
        }
        memcpy(p->data, q->data, p->numel * sizeof(float));
        snprintf(name, sizeof name, "%s.lora.A", pre);
        const attn_param *A = strcmp(dot, ".weight") == 0 ? attn_param_list_find(S, name) : NULL;
        snprintf(name, sizeof name, "%s.lora.B", pre);
        const attn_param *Bm = A ? attn_param_list_find(S, name) : NULL;
        if (A && Bm) {
            const int in = (int)A->shape[0], r = (int)A->shape[1], outf = (int)Bm->shape[1];
            merge_one(p->data, A->data, Bm->data, in, outf, r, scale);
        }
    }
    if (s) {
        attn_gpt_free(out);
        memset(out, 0, sizeof *out); /* freeing it again is a no-op */
    }
    return s;
}
