/* attn train --task instruct (chapter 7's gpt_instruction_finetuning.py):
 * the library's attn_instruct_train, its lines printed as the script
 * prints them, the test split's responses as the script makes them. The
 * book's generate (greedy, eos_id) is here, on attn_generator, for the
 * training's samples and for attn generate --instruction. */
#define _POSIX_C_SOURCE 200809L /* open_memstream */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn/fileio.h"
#include "attn/generate.h"
#include "attn/gpt_family.h"
#include "clock.h"
#include "finetune.h"

/* --------------------------------------------------- the book's generate */

/* The new ids of a greedy generator over the book's cropped window. */
static int greedy_ids(const char *cmd, const attn_gpt *m, const attn_tokenizer *tok,
                      const char *prompt, int max_new, int eos, int32_t *ids, size_t *n) {
    attn_generate_options o;
    attn_generate_options_default(&o);
    o.temperature = 0;
    o.top_k = 0;
    /* the book crops idx[:, -context_size:] every token: the window slides by one */
    o.window_keep = m->cfg.context_length;
    attn_generator g;
    attn_error err;
    if (attn_generator_init(&g, m, tok, &o, &err)) {
        fprintf(stderr, "%s: %s\n", cmd, err.msg);
        return 1;
    }
    int rc = 0;
    *n = 0;
    if (attn_generator_prompt(&g, prompt, strlen(prompt), &err)) rc = 1;
    for (int i = 0; !rc && i < max_new; i++) {
        int32_t id;
        if (attn_generator_next_token(&g, &id, NULL, NULL, &err)) rc = 1;
        if (rc || id == eos) break;
        ids[(*n)++] = id;
    }
    if (rc) fprintf(stderr, "%s: %s\n", cmd, err.msg);
    attn_generator_free(&g);
    return rc;
}

int book_generate(const char *cmd, const attn_gpt *m, float lora_scale, const attn_tokenizer *tok,
                  const char *prompt, int max_new, int eos, int32_t **out, size_t *n) {
    *out = malloc(((size_t)(max_new > 0 ? max_new : 0) + 1) * sizeof **out);
    if (!*out) return fprintf(stderr, "%s: out of memory\n", cmd), 1;
    if (!(lora_scale > 0)) return greedy_ids(cmd, m, tok, prompt, max_new, eos, *out, n);
    attn_gpt merged; /* the KV step runs plain Linears: W + scale (A B)^T */
    attn_error err;
    if (attn_gpt_merge_lora(&merged, m, lora_scale, &err)) {
        fprintf(stderr, "%s: %s\n", cmd, err.msg);
        return 1;
    }
    const int rc = greedy_ids(cmd, &merged, tok, prompt, max_new, eos, *out, n);
    attn_gpt_free(&merged);
    return rc;
}

/* n ids decoded, shown as Python's decode(errors="replace") gives them. */
static char *decode_text(const attn_tokenizer *tok, const int32_t *ids, size_t n) {
    attn_error err;
    size_t len = 0;
    if (attn_tokenizer_decoded_len(tok, ids, n, &len, &err)) return NULL;
    char *raw = malloc(len + 1), *shown = malloc(ATTN_UTF8_DISPLAY_CAP(len));
    if (!raw || !shown || attn_tokenizer_decode(tok, ids, n, raw, &err)) {
        free(raw);
        free(shown);
        return NULL;
    }
    attn_utf8_display d = {{0}, 0};
    size_t k = attn_utf8_display_put(&d, raw, len, shown);
    k += attn_utf8_display_end(&d, shown + k);
    shown[k] = '\0';
    free(raw);
    return shown;
}

char *book_response(const attn_tokenizer *tok, const int32_t *ids, size_t n) {
    char *t = decode_text(tok, ids, n);
    if (!t) return NULL;
    static const char tag[] = "### Response:";
    char *w = t;
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
    return t;
}

/* ------------------------------------------------------------ the run */

typedef struct instruct_cli {
    const attn_tokenizer *tok;
    const char *start; /* format_input(val_data[0]) */
    float lora_scale;
} instruct_cli;

/* Python's repr of a float: the shortest text that reads back the same. */
static void py_repr(double v, char *buf, size_t cap) {
    for (int p = 1; p <= 17; p++) {
        snprintf(buf, cap, "%.*g", p, v);
        if (strtod(buf, NULL) == v) break;
    }
    if (isfinite(v) && !strpbrk(buf, ".e")) strncat(buf, ".0", cap - strlen(buf) - 1);
}

static void on_initial(void *user, double tl, double vl) {
    char a[40], b[40];
    py_repr(tl, a, sizeof a);
    py_repr(vl, b, sizeof b);
    printf("Initial losses\n   Training loss: %s\n   Validation loss: %s\n", a, b);
    fflush(stdout);
    (void)user;
}

/* generate_and_print_sample: 50 greedy tokens after the start context, the
 * whole text on one line. */
static int on_sample(void *user, int epoch, attn_gpt *m) {
    (void)epoch;
    instruct_cli *c = user;
    int32_t *ids = NULL;
    size_t n = 0;
    if (book_generate("attn train", m, c->lora_scale, c->tok, c->start, 50, -1, &ids, &n))
        return free(ids), 1;
    char *text = decode_text(c->tok, ids, n);
    free(ids);
    if (!text) return fprintf(stderr, "attn train: out of memory\n"), 1;
    char *line = malloc(strlen(c->start) + strlen(text) + 1);
    if (!line) return free(text), 1;
    strcpy(line, c->start);
    strcat(line, text);
    for (char *p = line; *p; p++)
        *p = *p == '\n' ? ' ' : *p;
    printf("%s\n", line);
    fflush(stdout);
    free(line);
    free(text);
    return 0;
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

/* The test split's responses (the script's "Generating responses"), as
 * RUN/responses.json: its entries with "model_response" added. */
static int write_responses(const finetune_request *rq, const attn_gpt *m, const instruct_cli *c,
                           const attn_instruct_data *test) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f) return fprintf(stderr, "attn train: out of memory\n"), 1;
    int rc = 0;
    fputs("[", f);
    for (size_t i = 0; !rc && i < test->n; i++) {
        char *prompt = attn_instruct_prompt(test->instruction[i], test->input[i]), *resp = NULL;
        int32_t *ids = NULL;
        size_t n = 0;
        rc = !prompt || book_generate("attn train", m, c->lora_scale, c->tok, prompt, 256,
                                      ATTN_PAD_ID, &ids, &n);
        if (!rc && !(resp = book_response(c->tok, ids, n))) rc = 1;
        if (!rc) {
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
        free(prompt);
        free(ids);
        free(resp);
    }
    fputs("\n]\n", f);
    fclose(f);
    char path[4096];
    attn_error err;
    if (!rc && (attn_path_join(path, sizeof path, rq->out, "responses.json") ||
                attn_file_write_atomic(path, buf, len, &err))) {
        fprintf(stderr, "attn train: cannot write %s/responses.json\n", rq->out);
        rc = 1;
    }
    free(buf);
    if (!rc) printf("Responses saved as %s/responses.json\n", rq->out);
    return rc;
}

/* The sets of the book's split of d (--limit cuts each). */
static int split_sets(const finetune_request *rq, const attn_instruct_data *d,
                      attn_instruct_data set[3]) {
    size_t first[3], count[3];
    attn_instruct_split(d->n, (size_t)rq->limit, first, count);
    attn_error err;
    for (int k = 0; k < 3; k++)
        if (attn_instruct_view(d, first[k], count[k], &set[k], &err)) {
            fprintf(stderr, "attn train: %s\n", err.msg);
            return 1;
        }
    printf("Training set length: %zu\nValidation set length: %zu\nTest set length: %zu\n", count[0],
           count[2], count[1]);
    printf("--------------------------------------------------\n");
    if (count[0] < (size_t)rq->cfg.batch_size) {
        fprintf(stderr,
                "attn train: %s: the training split has %zu entries, fewer than one batch of %d "
                "(the book's loader drops the last partial batch)\n",
                rq->data, count[0], rq->cfg.batch_size);
        return 1;
    }
    return 0;
}

static void print_plan(const finetune_request *rq, const attn_gpt *m, const attn_instruct_data *s) {
    size_t trainable = 0;
    const attn_param_list *L = attn_gpt_params(m);
    for (int i = 0; i < L->count; i++)
        trainable += L->items[i].trainable ? L->items[i].numel : 0;
    printf("instruct: train %zu entries (longest %zu tokens), val %zu, test %zu; %zu trainable "
           "parameters of %zu; %d epochs of %zu steps%s\n",
           s[0].n, s[0].longest, s[2].n, s[1].n, trainable, L->values_numel, rq->cfg.epochs,
           s[0].n / (size_t)rq->cfg.batch_size, rq->cfg.mask_prompt ? "; prompts masked" : "");
}

/* Training, the responses and the run's files. */
static int run_instruct(const finetune_request *rq, attn_gpt *m, const attn_tokenizer *tok,
                        const attn_instruct_data *set) {
    instruct_cli c = {tok, NULL,
                      rq->cfg.lora_rank ? rq->cfg.lora_alpha / (float)rq->cfg.lora_rank : 0};
    const attn_instruct_data *val = set[2].n ? &set[2] : &set[0];
    char *start = attn_instruct_prompt(val->instruction[0], val->input[0]);
    if (!start) return fprintf(stderr, "attn train: out of memory\n"), 1;
    c.start = start;
    const attn_classifier_info info = {
        0,          m->cfg.context_length,   rq->cfg.lora_rank, rq->cfg.lora_alpha,
        "instruct", trainable_name(&rq->cfg)};
    finetune_folder folder;
    int rc = finetune_claim(rq, tok, &info, &folder);
    if (rc >= 0) return free(start), rc;
    const attn_classify_events evu = {&c, finetune_on_eval, NULL, NULL, on_initial, on_sample};
    const attn_finetune_sets sets = {NULL, NULL, &set[0], &set[2]};
    attn_classify_result res;
    attn_error err;
    const double t0 = attn_now_s();
    rc = attn_finetune_folder_train(&folder, m, &sets, &rq->cfg, &evu, &res, &err)
             ? finetune_train_failed(rq, &err)
             : 0;
    if (!rc) {
        finetune_say_resumed(rq, &res);
        printf("Training completed in %.2f minutes.\n", (attn_now_s() - t0) / 60);
        printf("--------------------------------------------------\nGenerating responses\n");
        rc = finetune_save_run(&folder);
        if (!rc) rc = write_responses(rq, m, &c, &set[1]);
    }
    if (!rc)
        printf("instruction model in %s (attn generate %s --instruction TEXT)\n", rq->out, rq->out);
    finetune_release(&folder, rc);
    free(start);
    return rc;
}

/* --resume: the run in rq->out is this one (its task, data, settings), read
 * only, before the folder is locked: 0, else the exit code. */
static int resume_check(const finetune_request *rq, attn_gpt *m, const attn_tokenizer *tok,
                        const attn_instruct_data *set) {
    const attn_classifier_info info = {
        0,          m->cfg.context_length,   rq->cfg.lora_rank, rq->cfg.lora_alpha,
        "instruct", trainable_name(&rq->cfg)};
    attn_finetune_ckpt check = {rq->out, tok, &info, 1, 1};
    attn_classify_config c = rq->cfg;
    c.ckpt = &check;
    attn_classify_result res;
    attn_error err;
    return attn_instruct_train(m, &set[0], &set[2], &c, NULL, &res, &err)
               ? finetune_train_failed(rq, &err)
               : 0;
}

int finetune_instruct(const finetune_request *rq, const attn_gpt *base, const attn_tokenizer *tok) {
    attn_error err;
    attn_instruct_data all, set[3];
    if (attn_instruct_data_read(rq->data, tok, &all, &err)) {
        fprintf(stderr, "attn train: %s\n", err.msg);
        return 1;
    }
    int rc = split_sets(rq, &all, set);
    attn_gpt m;
    attn_precision prec = ATTN_PRECISION_FP32;
    attn_precision_parse(rq->precision, &prec, &err);
    if (!rc && (attn_classifier_from(&m, base, 0, &rq->cfg, &err) ||
                (prec != ATTN_PRECISION_FP32 && attn_gpt_set_precision(&m, prec, &err)))) {
        fprintf(stderr, "attn train: %s\n", err.msg);
        rc = 1;
    } else if (!rc) {
        print_plan(rq, &m, set);
        if (rq->resume) rc = resume_check(rq, &m, tok, set);
        if (rc) {
        } else if (rq->dry_run) {
            const size_t L = set[0].longest > set[2].longest ? set[0].longest : set[2].longest;
            const int T =
                L < (size_t)m.cfg.context_length ? (int)(L ? L : 1) : m.cfg.context_length;
            const int64_t steps =
                (int64_t)rq->cfg.epochs * (int64_t)(set[0].n / (size_t)rq->cfg.batch_size);
            finetune_print_dry_run(rq, &m, T, steps, (double)(all.off[all.n] * 4 + all.n * 16));
        } else {
            rc = run_instruct(rq, &m, tok, set);
        }
        attn_gpt_free(&m);
    }
    attn_instruct_data_free(&all);
    return rc;
}
