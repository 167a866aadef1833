/* Chapter 7's instruction set (attn_instruct_data_read, attn/finetune.h):
 * the JSON entries, the book's prompt template and split. */
#define _POSIX_C_SOURCE 200809L /* strdup */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn/fileio.h"
#include "attn/finetune.h"
#include "base/json_strict.h"

static const char *const FIELDS[3] = {"instruction", "input", "output"};

char *attn_instruct_prompt(const char *instruction, const char *input) {
    static const char head[] = "Below is an instruction that describes a task. Write a response "
                               "that appropriately completes the request.\n\n### Instruction:\n";
    static const char in[] = "\n\n### Input:\n";
    const size_t n = sizeof head + strlen(instruction) + sizeof in + strlen(input);
    char *p = malloc(n);
    if (p) snprintf(p, n, "%s%s%s%s", head, instruction, input[0] ? in : "", input);
    return p;
}

void attn_instruct_split(size_t n, size_t limit, size_t first[3], size_t count[3]) {
    /* int(len(data) * 0.85), int(len(data) * 0.1): in double, as Python */
    const size_t train = (size_t)((double)n * 0.85), test = (size_t)((double)n * 0.1);
    first[0] = 0;
    count[0] = train;
    first[1] = train;
    count[1] = test;
    first[2] = train + test;
    count[2] = n - train - test;
    for (int k = 0; limit && k < 3; k++)
        count[k] = count[k] < limit ? count[k] : limit;
}

void attn_instruct_data_free(attn_instruct_data *d) {
    if (!d->view) {
        for (size_t i = 0; i < d->n; i++) {
            if (d->instruction) free(d->instruction[i]);
            if (d->input) free(d->input[i]);
            if (d->output) free(d->output[i]);
        }
        free(d->instruction);
        free(d->input);
        free(d->output);
        free(d->off);
        free(d->ids);
        free(d->prompt_len);
    }
    memset(d, 0, sizeof *d);
}

attn_status attn_instruct_view(const attn_instruct_data *d, size_t first, size_t n,
                               attn_instruct_data *v, attn_error *err) {
    memset(v, 0, sizeof *v);
    if (first > d->n || n > d->n - first)
        return attn_fail(err, ATTN_ERR_INVALID_ARG, "entries [%zu, %zu) outside the set's %zu",
                         first, first + n, d->n);
    *v = *d;
    v->n = n;
    v->off += first;
    v->prompt_len += first;
    v->instruction += first;
    v->input += first;
    v->output += first;
    v->view = 1;
    v->longest = 0;
    for (size_t i = 0; i < n; i++)
        if (v->off[i + 1] - v->off[i] > v->longest) v->longest = v->off[i + 1] - v->off[i];
    return ATTN_OK;
}

/* The three fields of entry i (borrowed from the JSON). */
static attn_status entry_fields(const cJSON *e, size_t i, const char *path, const char **f,
                                attn_error *err) {
    if (!cJSON_IsObject(e))
        return attn_fail(err, ATTN_ERR_FORMAT, "%s: entry %zu is not an object", path, i);
    for (int k = 0; k < 3; k++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(e, FIELDS[k]);
        if (!v)
            return attn_fail(err, ATTN_ERR_FORMAT, "%s: entry %zu has no \"%s\"", path, i,
                             FIELDS[k]);
        if (!cJSON_IsString(v))
            return attn_fail(err, ATTN_ERR_FORMAT, "%s: entry %zu: \"%s\" is not a string", path, i,
                             FIELDS[k]);
        f[k] = v->valuestring;
    }
    return ATTN_OK;
}

/* text's tokens appended to d->ids (cap grown as needed); *n their count. */
static attn_status encode_append(attn_instruct_data *d, size_t *cap, size_t at,
                                 const attn_tokenizer *tok, const char *text, size_t *n,
                                 attn_error *err) {
    size_t most;
    attn_status s = attn_tokenizer_max_ids(tok, text, strlen(text), &most, err);
    if (s) return s;
    if (at + most > *cap) {
        const size_t c = 2 * (at + most) + 1024;
        int32_t *p = realloc(d->ids, c * sizeof *p);
        if (!p) return attn_fail(err, ATTN_ERR_NOMEM, "out of memory for the tokens");
        d->ids = p;
        *cap = c;
    }
    return attn_tokenizer_encode(tok, text, strlen(text), d->ids + at, n, err);
}

/* Entry i: its fields copied, its full text and prompt encoded. */
static attn_status add_entry(attn_instruct_data *d, size_t i, const char **f,
                             const attn_tokenizer *tok, size_t *cap, attn_error *err) {
    d->instruction[i] = strdup(f[0]);
    d->input[i] = strdup(f[1]);
    d->output[i] = strdup(f[2]);
    char *prompt = attn_instruct_prompt(f[0], f[1]);
    const size_t full_n = (prompt ? strlen(prompt) : 0) + strlen(f[2]) + 32;
    char *full = malloc(full_n);
    attn_status s = ATTN_OK;
    if (!d->instruction[i] || !d->input[i] || !d->output[i] || !prompt || !full)
        s = attn_fail(err, ATTN_ERR_NOMEM, "out of memory for the entries");
    size_t n = 0, np = 0;
    if (!s) {
        snprintf(full, full_n, "%s\n\n### Response:\n%s", prompt, f[2]);
        s = encode_append(d, cap, d->off[i], tok, full, &n, err);
    }
    /* the prompt alone, encoded apart as exercise 7.2 does, past the end */
    if (!s) s = encode_append(d, cap, d->off[i] + n, tok, prompt, &np, err);
    free(prompt);
    free(full);
    if (s) return s;
    d->off[i + 1] = d->off[i] + n;
    d->prompt_len[i] = (int32_t)np;
    if (n > d->longest) d->longest = n;
    return ATTN_OK;
}

static attn_status read_entries(const cJSON *root, const char *path, const attn_tokenizer *tok,
                                attn_instruct_data *d, attn_error *err) {
    if (!cJSON_IsArray(root))
        return attn_fail(err, ATTN_ERR_FORMAT,
                         "%s is not an array of entries (objects with \"instruction\", \"input\" "
                         "and \"output\")",
                         path);
    const size_t n = (size_t)cJSON_GetArraySize(root);
    if (n == 0) return attn_fail(err, ATTN_ERR_FORMAT, "%s holds no entries", path);
    const char *f[3];
    size_t i = 0;
    for (const cJSON *e = root->child; e; e = e->next, i++) {
        attn_status s = entry_fields(e, i, path, f, err);
        if (s) return s;
    }
    d->off = calloc(n + 1, sizeof *d->off);
    d->prompt_len = calloc(n, sizeof *d->prompt_len);
    d->instruction = calloc(n, sizeof(char *));
    d->input = calloc(n, sizeof(char *));
    d->output = calloc(n, sizeof(char *));
    if (!d->off || !d->prompt_len || !d->instruction || !d->input || !d->output)
        return attn_fail(err, ATTN_ERR_NOMEM, "out of memory for %zu entries", n);
    d->n = n;
    size_t cap = 0;
    i = 0;
    for (const cJSON *e = root->child; e; e = e->next, i++) {
        entry_fields(e, i, path, f, err);
        attn_status s = add_entry(d, i, f, tok, &cap, err);
        if (s) return s;
    }
    return ATTN_OK;
}

attn_status attn_instruct_data_read(const char *path, const attn_tokenizer *tok,
                                    attn_instruct_data *d, attn_error *err) {
    memset(d, 0, sizeof *d);
    if (tok->kind != ATTN_TOKENIZER_GPT2)
        return attn_fail(err, ATTN_ERR_INVALID_ARG,
                         "instruction data needs GPT-2's tokenizer (the model's is %s)",
                         attn_tokenizer_kind_name(tok->kind));
    void *buf = NULL;
    size_t len = 0;
    attn_status s = attn_file_read_all(path, 0, &buf, &len, err);
    if (s) return s;
    char *text = buf;
    cJSON *root = NULL;
    s = attn_json_parse_strict(text, len, path, &root, err);
    free(text);
    if (!s) s = read_entries(root, path, tok, d, err);
    cJSON_Delete(root);
    if (s) attn_instruct_data_free(d);
    return s;
}
