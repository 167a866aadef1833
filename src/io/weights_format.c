/* GPT-2 weight files in and out (attn/weights_format.h): the format names,
 * detection by content, and import/export by format. */
#include "attn/weights_format.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "attn/checkpoint.h"
#include "attn/fileio.h"
#include "attn/membudget.h"
#include "attn/pth.h"
#include "attn/safetensors.h"
#include "attn/tokenizer.h"
#include "weights_plan.h"

static const char *const NAMES[] = {"attn", "hf", "llmc", "book", NULL};

const char *attn_weights_format_name(attn_weights_format fmt) {
    return (unsigned)fmt < 4 ? NAMES[fmt] : NULL;
}

const char *const *attn_weights_format_names(void) {
    return NAMES;
}

attn_status attn_weights_format_parse(const char *name, attn_weights_format *fmt, attn_error *err) {
    for (int i = 0; name && NAMES[i]; i++)
        if (strcmp(name, NAMES[i]) == 0) {
            *fmt = (attn_weights_format)i;
            return ATTN_OK;
        }
    return attn_fail(err, ATTN_ERR_INVALID_ARG,
                     "unknown weights format '%.40s' (one of attn, hf, llmc, book)",
                     name ? name : "");
}

/* The file a path names: a folder's live model.safetensors (an attn run
 * folder through its latest checkpoint, else FOLDER/model.safetensors). */
static attn_status resolve_file(const char *path, char *file, attn_error *err) {
    struct stat sb;
    if (stat(path, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
        snprintf(file, ATTN_CKPT_PATH_MAX, "%s", path);
        return ATTN_OK;
    }
    char dir[ATTN_CKPT_PATH_MAX];
    if (attn_ckpt_resolve(path, dir, NULL) != ATTN_OK) snprintf(dir, sizeof dir, "%s", path);
    if (attn_path_join(file, ATTN_CKPT_PATH_MAX, dir, ATTN_CKPT_MODEL))
        return attn_fail(err, ATTN_ERR_IO, "path is too long: %.200s", path);
    return ATTN_OK;
}

/* A safetensors header's names (root: its JSON object) -> the format. */
static attn_status detect_names(const cJSON *root, const char *file, attn_weights_format *fmt,
                                attn_error *err) {
    static const char *const hf[] = {"transformer.wte.weight", "wte.weight",
                                     "transformer.h.0.attn.c_attn.weight", "h.0.attn.c_attn.weight",
                                     NULL};
    static const char *const book[] = {"tok_emb.weight", "trf_blocks.0.att.W_query.weight", NULL};
    const cJSON *meta = cJSON_GetObjectItemCaseSensitive(root, "__metadata__");
    const cJSON *format = cJSON_GetObjectItemCaseSensitive(meta, "format");
    if (cJSON_IsString(format) && strcmp(format->valuestring, "attn-gpt") == 0) {
        *fmt = ATTN_WEIGHTS_ATTN;
        return ATTN_OK;
    }
    for (int i = 0; hf[i]; i++)
        if (cJSON_GetObjectItemCaseSensitive(root, hf[i])) {
            *fmt = ATTN_WEIGHTS_HF;
            return ATTN_OK;
        }
    for (int i = 0; book[i]; i++)
        if (cJSON_GetObjectItemCaseSensitive(root, book[i])) {
            *fmt = ATTN_WEIGHTS_BOOK;
            return ATTN_OK;
        }
    return attn_fail(err, ATTN_ERR_FORMAT,
                     "%s: a safetensors file with neither GPT-2's (HF: 'transformer.wte.weight') "
                     "nor the book's tensor names ('tok_emb.weight')",
                     file);
}

/* Read and parse a safetensors header of n bytes after its length. */
static attn_status detect_safetensors(attn_file_in *in, uint64_t n, const char *file,
                                      attn_weights_format *fmt, attn_error *err) {
    char *hdr = malloc((size_t)n + 1);
    size_t got = 0;
    if (!hdr) return attn_fail(err, ATTN_ERR_NOMEM, "%s: out of memory for its header", file);
    attn_status s = attn_file_in_read(in, file, hdr, (size_t)n, &got, err);
    cJSON *root = NULL;
    if (!s && got != n)
        s = attn_fail(err, ATTN_ERR_FORMAT, "%s: truncated safetensors header", file);
    if (!s) root = cJSON_ParseWithLength(hdr, (size_t)n);
    if (!s && !cJSON_IsObject(root))
        s = attn_fail(err, ATTN_ERR_FORMAT, "%s: safetensors header is not a JSON object", file);
    if (!s) s = detect_names(root, file, fmt, err);
    cJSON_Delete(root);
    free(hdr);
    return s;
}

/* The first 8 bytes (got of them) say which format the open file is. */
static attn_status classify(attn_file_in *in, const unsigned char *b, size_t got, const char *file,
                            attn_weights_format *fmt, int *zip, attn_error *err) {
    uint64_t n = 0;
    for (int i = 7; i >= 0 && got == 8; i--)
        n = n << 8 | b[i];
    const uint32_t magic = got >= 4 ? (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 |
                                          (uint32_t)b[3] << 24
                                    : 0;
    if (magic == ATTN_LLMC_MAGIC) {
        *fmt = ATTN_WEIGHTS_LLMC;
        return ATTN_OK;
    }
    if (got >= 4 && memcmp(b, "PK\3\4", 4) == 0) {
        *fmt = ATTN_WEIGHTS_BOOK; /* torch.save's zip: the book's state_dict */
        *zip = 1;
        return ATTN_OK;
    }
    if (got == 8 && n >= 2 && n <= ATTN_ST_MAX_HEADER && n + 8 <= in->size)
        return detect_safetensors(in, n, file, fmt, err);
    return attn_fail(err, ATTN_ERR_FORMAT,
                     "%s is not a weights file attn reads (safetensors, llm.c .bin, torch .pth)",
                     file);
}

/* The format of one file; *zip: it is a torch.save zip. */
static attn_status detect_file(const char *file, attn_weights_format *fmt, int *zip,
                               attn_error *err) {
    attn_file_in in;
    unsigned char b[8];
    size_t got = 0;
    *zip = 0;
    attn_status s = attn_file_in_open(&in, file, err);
    if (s) return s;
    s = attn_file_in_read(&in, file, b, sizeof b, &got, err);
    if (!s) s = classify(&in, b, got, file, fmt, zip, err);
    attn_file_in_close(&in);
    return s;
}

attn_status attn_weights_detect(const char *path, attn_weights_format *fmt, attn_error *err) {
    char file[ATTN_CKPT_PATH_MAX];
    int zip;
    attn_status s = resolve_file(path, file, err);
    return s ? s : detect_file(file, fmt, &zip, err);
}

/* attn's own checkpoint, through its loader (the vocabulary is dropped). */
static attn_status import_attn(const char *path, const attn_gpt_config *hint, attn_gpt *m,
                               attn_error *err) {
    attn_tokenizer tok;
    attn_status s = attn_gpt_load_checkpoint(path, m, &tok, NULL, err);
    if (s) return s;
    attn_tokenizer_free(&tok);
    if (hint && hint->n_heads > 0 && hint->n_heads != m->cfg.n_heads) {
        s = attn_fail(err, ATTN_ERR_INVALID_ARG, "%s: n_heads %d was given but its config says %d",
                      path, hint->n_heads, m->cfg.n_heads);
        attn_gpt_free(m);
    }
    return s;
}

/* hf or book from a safetensors file; HF's config.json beside it. */
static attn_status import_st(const char *file, attn_weights_format fmt, int zip,
                             const attn_gpt_config *hint, double budget, attn_gpt *m,
                             attn_error *err) {
    struct stat sb;
    if (stat(file, &sb) == 0 && attn_mem_check((double)sb.st_size, budget, file, err))
        return ATTN_ERR_NOMEM;
    attn_safetensors st; /* a torch.save zip: the book's state_dict */
    attn_status s = zip ? attn_pth_read(file, &st, err) : attn_safetensors_read(file, &st, err);
    if (s) return s;
    char cfg_json[ATTN_CKPT_PATH_MAX];
    const char *slash = strrchr(file, '/');
    snprintf(cfg_json, sizeof cfg_json, "%.*sconfig.json", slash ? (int)(slash - file + 1) : 0,
             file);
    if (fmt == ATTN_WEIGHTS_HF)
        s = wf_import_hf(&st, file, cfg_json, hint, budget, m, err);
    else
        s = wf_import_book(&st, file, hint, budget, m, err);
    attn_safetensors_free(&st);
    return s;
}

attn_status attn_gpt_import_budget(const char *path, const attn_gpt_config *hint, double budget,
                                   attn_gpt *m, attn_weights_format *fmt, attn_error *err) {
    char file[ATTN_CKPT_PATH_MAX];
    attn_weights_format f = ATTN_WEIGHTS_ATTN;
    int zip = 0;
    memset(m, 0, sizeof *m);
    attn_status s = resolve_file(path, file, err);
    if (!s) s = detect_file(file, &f, &zip, err);
    if (s) return s;
    if (fmt) *fmt = f;
    switch (f) {
    case ATTN_WEIGHTS_ATTN: return import_attn(path, hint, m, err);
    case ATTN_WEIGHTS_LLMC: return wf_import_llmc(file, hint, budget, m, err);
    default: break;
    }
    return import_st(file, f, zip, hint, budget, m, err);
}

attn_status attn_gpt_import(const char *path, const attn_gpt_config *hint, attn_gpt *m,
                            attn_weights_format *fmt, attn_error *err) {
    return attn_gpt_import_budget(path, hint, 0, m, fmt, err);
}

attn_status attn_gpt_open(const char *path, const attn_gpt_open_options *o, attn_gpt *m,
                          attn_tokenizer *tok, attn_weights_format *fmt, int64_t *step,
                          attn_error *err) {
    const attn_gpt_open_options none = {0};
    if (!o) o = &none;
    if (tok) memset(tok, 0, sizeof *tok);
    if (step) *step = -1;
    if (!path) return attn_fail(err, ATTN_ERR_INVALID_ARG, "no model path given");
    if (o->n_heads < 0) return attn_fail(err, ATTN_ERR_INVALID_ARG, "n_heads must be >= 1");
    struct stat sb; /* not a file or folder: a stream of attn's own format, read once */
    const int file = stat(path, &sb) == 0 && (S_ISREG(sb.st_mode) || S_ISDIR(sb.st_mode));
    attn_weights_format f = ATTN_WEIGHTS_ATTN;
    attn_status s = file ? attn_weights_detect(path, &f, err) : ATTN_OK;
    if (s) return s;
    if (fmt) *fmt = f;
    if (f == ATTN_WEIGHTS_ATTN) {
        attn_tokenizer own;
        s = attn_gpt_load_checkpoint(path, m, tok ? tok : &own, step, err);
        if (!s && !tok) attn_tokenizer_free(&own);
        return s;
    }
    const attn_gpt_config hint = {.n_heads = o->n_heads};
    if (!tok) return attn_gpt_import_budget(path, &hint, o->budget, m, NULL, err);
    return attn_gpt_load_weights(path, &hint, o->budget, m, tok, NULL, err);
}

attn_status attn_gpt_load_weights(const char *path, const attn_gpt_config *hint, double budget,
                                  attn_gpt *m, attn_tokenizer *tok, attn_weights_format *fmt,
                                  attn_error *err) {
    attn_weights_format f;
    memset(tok, 0, sizeof *tok);
    attn_status s = attn_weights_detect(path, &f, err);
    if (s) return s;
    if (fmt) *fmt = f;
    if (f == ATTN_WEIGHTS_ATTN) return attn_gpt_load_checkpoint(path, m, tok, NULL, err);
    /* The others carry no tokenizer: GPT-2's vocabulary is GPT-2's. */
    if ((s = attn_gpt_import_budget(path, hint, budget, m, NULL, err))) return s;
    if (m->cfg.vocab_size != ATTN_GPT2_N_VOCAB)
        s = attn_fail(err, ATTN_ERR_INVALID_ARG,
                      "%s: %s weights with a vocabulary of %d tokens: attn pairs such files with "
                      "GPT-2's tokenizer (%d tokens) only",
                      path, attn_weights_format_name(f), m->cfg.vocab_size, ATTN_GPT2_N_VOCAB);
    if (!s) s = attn_tokenizer_gpt2(tok, NULL, err);
    if (s) attn_gpt_free(m);
    return s;
}
