/* Chapter 7's generation (attn/finetune.h): the book's generate (greedy,
 * eos_id) on attn_generator, the per-epoch sample and the test split's
 * responses as gpt_instruction_finetuning.py makes them. The program and
 * the bindings both take them from here (attn/finetune_run.h). */
#define _POSIX_C_SOURCE 200809L /* open_memstream */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn/finetune.h"
#include "attn/generate.h"

/* --------------------------------------------------- the book's generate */

/* The new ids of a greedy generator over the book's cropped window. */
static attn_status greedy_ids(const attn_gpt *m, const attn_tokenizer *tok, const char *prompt,
                              int max_new, int eos, int32_t *ids, size_t *n, attn_error *err) {
    attn_generate_options o;
    attn_generate_options_default(&o);
    o.temperature = 0;
    o.top_k = 0;
    /* the book crops idx[:, -context_size:] every token: the window slides by one */
    o.window_keep = m->cfg.context_length;
    attn_generator g;
    *n = 0;
    attn_status s = attn_generator_init(&g, m, tok, &o, err);
    if (s) return s;
    s = attn_generator_prompt(&g, prompt, strlen(prompt), err);
    for (int i = 0; !s && i < max_new; i++) {
        int32_t id;
        s = attn_generator_next_token(&g, &id, NULL, NULL, err);
        if (s || id == eos) break;
        ids[(*n)++] = id;
    }
    attn_generator_free(&g);
    return s;
}

attn_status attn_instruct_generate(const attn_gpt *m, float lora_scale, const attn_tokenizer *tok,
                                   const char *prompt, int max_new, int eos, int32_t *ids,
                                   size_t *n, attn_error *err) {
    if (!(lora_scale > 0)) return greedy_ids(m, tok, prompt, max_new, eos, ids, n, err);
    attn_gpt merged; /* the KV step runs plain Linears: W + scale (A B)^T */
    attn_status s = attn_gpt_merge_lora(&merged, m, lora_scale, err);
    if (s) return s;
    s = greedy_ids(&merged, tok, prompt, max_new, eos, ids, n, err);
    attn_gpt_free(&merged);
    return s;
}

/* n ids decoded, shown as Python's decode(errors="replace") gives them. */
static attn_status decode_text(const attn_tokenizer *tok, const int32_t *ids, size_t n, char **text,
                               attn_error *err) {
    size_t len = 0;
    *text = NULL;
    attn_status s = attn_tokenizer_decoded_len(tok, ids, n, &len, err);
    if (s) return s;
    char *raw = malloc(len + 1), *shown = malloc(ATTN_UTF8_DISPLAY_CAP(len));
    s = raw && shown ? attn_tokenizer_decode(tok, ids, n, raw, err)
                     : attn_fail(err, ATTN_ERR_NOMEM, "out of memory for the generated text");
    if (!s) {
        attn_utf8_display d = {{0}, 0};
        size_t k = attn_utf8_display_put(&d, raw, len, shown);
        k += attn_utf8_display_end(&d, shown + k);
        shown[k] = '\0';
        *text = shown;
        shown = NULL;
    }
    free(raw);
    free(shown);
    return s;
}

attn_status attn_instruct_response(const attn_tokenizer *tok, const int32_t *ids, size_t n,
                                   char **text, attn_error *err) {
    attn_status s = decode_text(tok, ids, n, text, err);
    if (s) return s;
    char *t = *text, *w = t;
    static const char tag[] = "### Response:";
    for (const char *r = t; *r;) { /* .replace("### Response:", "") */
        if (strncmp(r, tag, sizeof tag - 1) == 0)
            r += sizeof tag - 1;
        else
            *w++ = *r++;
    }
    *w = '\0';
    const char *ws = " \t\n\r\v\f\x1c\x1d\x1e\x1f"; /* str.strip()'s ASCII white space */
    size_t a = strspn(t, ws), e = strlen(t);
    while (e > a && strchr(ws, t[e - 1]))
        e--;
    memmove(t, t + a, e - a);
    t[e - a] = '\0';
    return ATTN_OK;
}

/* ------------------------------------------------ the script's outputs */

attn_status attn_instruct_sample(const attn_gpt *m, float lora_scale, const attn_tokenizer *tok,
                                 const char *start, char **line, attn_error *err) {
    enum { SAMPLE_TOKENS = 50 }; /* generate_and_print_sample's max_new_tokens */
    int32_t ids[SAMPLE_TOKENS];
    size_t n = 0;
    char *text = NULL;
    *line = NULL;
    attn_status s =
        attn_instruct_generate(m, lora_scale, tok, start, SAMPLE_TOKENS, -1, ids, &n, err);
    if (!s) s = decode_text(tok, ids, n, &text, err);
    char *l = s ? NULL : malloc(strlen(start) + strlen(text) + 1);
    if (!s && !l) s = attn_fail(err, ATTN_ERR_NOMEM, "out of memory for the sample");
    if (!s) {
        strcpy(l, start);
        strcat(l, text);
        for (char *p = l; *p; p++) /* print(decoded_text.replace("\n", " ")) */
            *p = *p == '\n' ? ' ' : *p;
        *line = l;
    }
    free(text);
    return s;
}

/* s as a JSON string (UTF-8 kept) appended to f. */
static void json_string(FILE *f, const char *s) {
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(f, "\\%c", *p);
        else if (*p == '\n')
            fputs("\\n", f);
        else if (*p == '\t')
            fputs("\\t", f);
        else if (*p < 0x20)
            fprintf(f, "\\u%04x", *p);
        else
            fputc(*p, f);
    }
    fputc('"', f);
}

/* Entry i of test with its response, as json.dump(indent=4) lays it out. */
static void json_entry(FILE *f, const attn_instruct_data *test, size_t i, const char *resp) {
    const char *k[4] = {"instruction", "input", "output", "model_response"};
    const char *v[4] = {test->instruction[i], test->input[i], test->output[i], resp};
    fputs(i ? ",\n    {" : "\n    {", f);
    for (int j = 0; j < 4; j++) {
        fputs(j ? ",\n        " : "\n        ", f);
        json_string(f, k[j]);
        fputs(": ", f);
        json_string(f, v[j]);
    }
    fputs("\n    }", f);
}

/* Entry i's model_response (malloc'd into *resp). */
static attn_status entry_response(const attn_gpt *m, const attn_tokenizer *tok,
                                  const attn_instruct_data *test, size_t i, int32_t *ids,
                                  char **resp, attn_error *err) {
    char *prompt = attn_instruct_prompt(test->instruction[i], test->input[i]);
    size_t n = 0;
    attn_status s = prompt
                        ? attn_instruct_generate(m, 0, tok, prompt, ATTN_INSTRUCT_RESPONSE_TOKENS,
                                                 ATTN_PAD_ID, ids, &n, err)
                        : attn_fail(err, ATTN_ERR_NOMEM, "out of memory for the prompt");
    if (!s) s = attn_instruct_response(tok, ids, n, resp, err);
    free(prompt);
    return s;
}

attn_status attn_instruct_responses(const attn_gpt *m, float lora_scale, const attn_tokenizer *tok,
                                    const attn_instruct_data *test, char **json, size_t *len,
                                    attn_error *err) {
    *json = NULL;
    *len = 0;
    attn_gpt merged; /* merged once for every entry (the same bits as each time) */
    const attn_gpt *g = m;
    attn_status s = lora_scale > 0 ? attn_gpt_merge_lora(&merged, m, lora_scale, err) : ATTN_OK;
    if (s) return s;
    if (lora_scale > 0) g = &merged;
    char *buf = NULL;
    size_t blen = 0;
    FILE *f = open_memstream(&buf, &blen);
    int32_t *ids = malloc(ATTN_INSTRUCT_RESPONSE_TOKENS * sizeof *ids);
    if (!f || !ids) s = attn_fail(err, ATTN_ERR_NOMEM, "out of memory for the responses");
    if (f) fputs("[", f);
    for (size_t i = 0; !s && i < test->n; i++) {
        char *resp = NULL;
        s = entry_response(g, tok, test, i, ids, &resp, err);
        if (!s) json_entry(f, test, i, resp);
        free(resp);
    }
    if (f) fputs("\n]\n", f);
    if (f && fclose(f) && !s) s = attn_fail(err, ATTN_ERR_NOMEM, "out of memory for the responses");
    free(ids);
    if (g != m) attn_gpt_free(&merged);
    if (s) {
        free(buf);
        return s;
    }
    *json = buf;
    *len = blen;
    return ATTN_OK;
}
