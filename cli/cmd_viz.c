/* attn viz — a GPT checkpoint's attention on a prompt: a self-contained HTML
 * page (head view, model view, generated characters) and/or one head's
 * heatmap as SVG. Everything is computed and written by the library
 * (attn/viz.h); this file only parses. */
#define _XOPEN_SOURCE 700 /* unlink, realpath */

#include <cblas.h>
#include <errno.h>
#include <libgen.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "attn/checkpoint.h"
#include "attn/fileio.h"
#include "attn/membudget.h"
#include "attn/train.h"
#include "attn/viz.h"
#include "attn/weights_format.h"
#include "commands.h"
#include "options.h"
#include "threads.h"

typedef struct viz_opts {
    const char *checkpoint, *prompt, *out, *svg;
    long long layer, head, generate, top_k, threads, n_heads;
    double temperature, max_memory;
    unsigned long long seed;
} viz_opts;

enum {
    VIZ_CHECKPOINT,
    VIZ_PROMPT,
    VIZ_OUT,
    VIZ_SVG,
    VIZ_LAYER,
    VIZ_HEAD,
    VIZ_GENERATE,
    VIZ_SEED,
    VIZ_TEMPERATURE,
    VIZ_TOP_K,
    VIZ_THREADS,
    VIZ_MAX_MEMORY,
    VIZ_N_HEADS,
    VIZ_OPT_COUNT
};

#define OFF(f) offsetof(viz_opts, f)
static const cli_option viz_opts_table[] = {
    [VIZ_CHECKPOINT] = {"checkpoint", CLI_STRING, "DIR", OFF(checkpoint), .required = 1,
                        .positional = 1,
                        .help = "a run folder of `attn train` (or its\n"
                                "model.safetensors); the flag may be left out"},
    [VIZ_PROMPT] = {"prompt", CLI_STRING, "TEXT", OFF(prompt), .required = 1,
                    .help = "the characters whose attention is drawn; a longer\n"
                            "one than the model reads keeps its last characters,\n"
                            "as attn generate does (a note says so)"},
    [VIZ_OUT] = {"out", CLI_STRING, "FILE.html", OFF(out),
                 .help = "one self-contained HTML page (no network): the\n"
                         "prompt's characters shaded by the attention of the one\n"
                         "under the mouse (choose layer and heads), every layer x\n"
                         "head as a small heatmap (click: large, with the\n"
                         "characters on the axes) and, with --generate, each\n"
                         "sampled character with its probability and the five\n"
                         "most likely ones. The weights are also in the page as\n"
                         "JSON (<script id=\"attn-data\">). Always HTML: a name\n"
                         "ending in .svg is refused (that is --svg)"},
    [VIZ_SVG] = {"svg", CLI_STRING, "FILE.svg", OFF(svg),
                 .help = "the heatmap of --layer L, --head H as a standalone\n"
                         "SVG (a name ending in .html is refused)"},
    [VIZ_LAYER] = {"layer", CLI_INT, "L", OFF(layer), 0, 1000000,
                   .help = "layer of --svg (0-based; at most n_layers - 1)"},
    [VIZ_HEAD] = {"head", CLI_INT, "H", OFF(head), 0, 1000000,
                  .help = "head of --svg (0-based; at most n_heads - 1)"},
    [VIZ_GENERATE] = {"generate", CLI_INT, "N", OFF(generate), 0, 1000000, .def = "0",
                      .help = "sample N characters after the prompt exactly as `attn\n"
                              "generate` does with the same seed/temperature/top-k;\n"
                              "prompt + N must fit in the model's context_length\n"
                              "(so N is at most context_length - 1)"},
    [VIZ_SEED] = {"seed", CLI_U64, "N", OFF(seed), .def = "1337",
                  .help = "the sampler's seed (as `attn generate --seed`)"},
    [VIZ_TEMPERATURE] = {"temperature", CLI_FLOAT, "T", OFF(temperature), 0, CLI_NO_MAX,
                         .def = "0.8", .help = "divide the logits by T; 0 = greedy"},
    [VIZ_TOP_K] = {"top-k", CLI_INT, "K", OFF(top_k), 0, 1000000, .def = "200",
                   .help = "sample among the K most likely (0 = all)"},
    [VIZ_THREADS] = CLI_THREADS_OPTION(OFF(threads)),
    [VIZ_MAX_MEMORY] = CLI_MAX_MEMORY_OPTION(OFF(max_memory)),
    [VIZ_N_HEADS] = CLI_N_HEADS_OPTION(OFF(n_heads)),
};
CLI_TABLE_CHECK(viz_opts_table, VIZ_OPT_COUNT);

const cli_command viz_cli = {
    "viz",
    "attn viz [--checkpoint] DIR --prompt TEXT [--generate N] [--seed N]\n"
    "                [--temperature T] [--top-k K] [--threads N] --out FILE.html\n"
    "       attn viz [--checkpoint] DIR --prompt TEXT --layer L --head H\n"
    "                --svg FILE.svg",
    "  A checkpoint's attention on a prompt. Both outputs may be asked for at\n"
    "  once. `attn viz DIR ...` is `attn viz --checkpoint DIR ...`.\n",
    viz_opts_table,
    VIZ_OPT_COUNT,
    0};

/* The model, its KV cache and the page against the budget, from the
 * checkpoint's header, before anything is loaded: each layer and head keeps
 * T x T weights (4 bytes, about 12 more as the page's JSON), T at most the
 * prompt's bytes plus --generate, within context_length. */
static attn_status check_memory(const char *ckpt, const char *prompt, const viz_opts *o,
                                attn_error *err) {
    attn_gpt_config cfg;
    attn_tokenizer tok;
    struct stat sb; /* a stream is read once: its weights are its bytes */
    if (stat(ckpt, &sb) != 0 || !(S_ISREG(sb.st_mode) || S_ISDIR(sb.st_mode))) return ATTN_OK;
    attn_weights_format fmt; /* other programs' GPT-2 files check their size as they load */
    if (attn_weights_detect(ckpt, &fmt, err) == ATTN_OK && fmt != ATTN_WEIGHTS_ATTN) return ATTN_OK;
    attn_status s = attn_gpt_checkpoint_config(ckpt, &cfg, &tok, NULL, err);
    if (s) return s;
    attn_tokenizer_free(&tok);
    double T = (double)strlen(prompt) + (double)o->generate;
    if (T > cfg.context_length) T = cfg.context_length;
    const double need = attn_gpt_config_memory(&cfg, cfg.context_length, 0) +
                        16.0 * cfg.n_layers * cfg.n_heads * T * T;
    return attn_mem_check(need, o->max_memory, "the model and its attention page", err);
}

/* 1 when path's name ends in suffix, ignoring case. */
static int ends_with(const char *path, const char *suffix) {
    const size_t n = strlen(path), k = strlen(suffix);
    return n >= k && strcasecmp(path + n - k, suffix) == 0;
}

/* 1 when a and b name one file: the same text, the same existing file, or
 * the same name in the same folder. */
static int same_output(const char *a, const char *b) {
    if (strcmp(a, b) == 0) return 1;
    struct stat sa, sb;
    if (stat(a, &sa) == 0 && stat(b, &sb) == 0)
        return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
    char *ca = strdup(a), *cb = strdup(b), *da = NULL, *db = NULL;
    int same = 0;
    if (ca && cb && strcmp(basename(ca), basename(cb)) == 0) {
        strcpy(ca, a);
        strcpy(cb, b);
        da = realpath(dirname(ca), NULL);
        db = realpath(dirname(cb), NULL);
        same = da && db && strcmp(da, db) == 0;
    }
    free(ca), free(cb), free(da), free(db);
    return same;
}

/* The prompt's length in tokens: characters (UTF-8 lead bytes) for char,
 * its encoding's for gpt2 (-1 when it cannot be encoded: the library says
 * why later). */
static long long prompt_tokens(const attn_tokenizer *tok, const char *prompt) {
    long long n = 0;
    if (tok->kind == ATTN_TOKENIZER_CHAR) {
        for (const char *p = prompt; *p; p++)
            n += ((unsigned char)*p & 0xC0) != 0x80;
        return n;
    }
    size_t cap = 0, got = 0, len = strlen(prompt);
    attn_error err;
    if (attn_tokenizer_max_ids(tok, prompt, len, &cap, &err)) return -1;
    int32_t *ids = malloc(cap * sizeof *ids);
    n = ids && !attn_tokenizer_encode_ex(tok, prompt, len, 0, ids, cap, &got, &err) ? (long long)got
                                                                                    : -1;
    free(ids);
    return n;
}

/* The checks that need the model: its layers, heads and context. */
static int check_against_model(const viz_opts *o, long layer, long head, const attn_gpt *m,
                               const attn_tokenizer *tok) {
    const attn_gpt_config *c = &m->cfg;
    char why[64];
    if (layer >= c->n_layers) {
        snprintf(why, sizeof why, "the model has %d layers", c->n_layers);
        return cli_bad_range(&viz_cli, &viz_opts_table[VIZ_LAYER], 0, c->n_layers - 1, why, layer);
    }
    if (head >= c->n_heads) {
        snprintf(why, sizeof why, "the model has %d heads", c->n_heads);
        return cli_bad_range(&viz_cli, &viz_opts_table[VIZ_HEAD], 0, c->n_heads - 1, why, head);
    }
    if (o->generate >= c->context_length)
        return cli_bad_range(&viz_cli, &viz_opts_table[VIZ_GENERATE], 0, c->context_length - 1,
                             "below the model's context_length", o->generate);
    /* As --help promises: prompt + N fit, or nothing is drawn (a prompt
     * alone may be longer: it keeps its last characters). */
    const long long chars = prompt_tokens(tok, o->prompt);
    const char *unit = tok->kind == ATTN_TOKENIZER_CHAR ? "characters" : "tokens";
    if (o->generate > 0 && chars >= 0 && chars + o->generate > c->context_length) {
        char fix[96];
        if (chars < c->context_length)
            snprintf(fix, sizeof fix, "give at most --generate %lld or a shorter prompt",
                     c->context_length - chars);
        else
            snprintf(fix, sizeof fix, "give a prompt of at most %lld %s",
                     c->context_length - o->generate, unit);
        fprintf(stderr,
                "attn viz: the prompt (%lld %s) + --generate %lld must fit in the "
                "model's context_length %d: %s\n",
                chars, unit, o->generate, c->context_length, fix);
        return CLI_USAGE;
    }
    return 0;
}

int cmd_viz(int argc, char **argv) {
    viz_opts o;
    cli_parsed parsed;
    int prc = cli_parse(&viz_cli, argc, argv, &o, &parsed);
    if (prc) return prc == CLI_HELP ? 0 : prc;
    const char *ckpt = o.checkpoint, *prompt = o.prompt, *html = o.out, *svg = o.svg;
    const long layer = parsed.given[VIZ_LAYER] ? (long)o.layer : -1;
    const long head = parsed.given[VIZ_HEAD] ? (long)o.head : -1;
    if (!html && !svg) {
        fprintf(stderr, "attn viz: nothing to write: give --out FILE.html and/or --svg FILE.svg\n");
        return 2;
    }
    /* --out writes HTML only: an .svg name would hold a page no SVG viewer opens. */
    if (html && ends_with(html, ".svg")) {
        fprintf(stderr,
                "attn viz: --out writes the HTML page, not SVG: for one head's heatmap as SVG use "
                "--svg %s --layer L --head H (or name the page FILE.html)\n",
                html);
        return 2;
    }
    if (svg && (ends_with(svg, ".html") || ends_with(svg, ".htm"))) {
        fprintf(stderr, "attn viz: --svg writes SVG, not HTML: for the page use --out %s\n", svg);
        return 2;
    }
    if (svg && (layer < 0 || head < 0)) {
        fprintf(stderr, "attn viz: --svg needs --layer L and --head H\n");
        return 2;
    }
    if (!svg && (layer >= 0 || head >= 0)) {
        fprintf(stderr, "attn viz: --layer and --head choose the head of --svg FILE.svg\n");
        return 2;
    }
    if (html && svg && same_output(html, svg)) {
        fprintf(stderr, "attn viz: --out and --svg name one file (%s): give each its own\n", svg);
        return 2;
    }
    cli_use_threads((int)o.threads, 1); /* one short sequence: tiny products */
    attn_error err;
    attn_error_clear(&err);
    /* Not on the weights it shows, the run's corpus, or inside a run folder. */
    if ((html && attn_ckpt_output_check(ckpt, html, NULL, 0, &svg, 1, &err)) ||
        (svg && attn_ckpt_output_check(ckpt, svg, NULL, 0, &html, 1, &err))) {
        fprintf(stderr, "attn viz: %s\n", err.msg);
        return err.code == ATTN_ERR_INVALID_ARG ? 2 : 1;
    }
    if (check_memory(ckpt, prompt, &o, &err)) {
        fprintf(stderr, "attn viz: %s\n", err.msg);
        return 1;
    }
    attn_gpt model;
    attn_tokenizer tok;
    const attn_gpt_open_options open = {.n_heads = (int)o.n_heads, .budget = o.max_memory};
    if (attn_gpt_open(ckpt, &open, &model, &tok, NULL, NULL, &err)) {
        fprintf(stderr, "attn viz: %s\n", err.msg);
        return 1;
    }
    char *svg_text = NULL, *page = NULL;
    size_t page_len = 0;
    attn_viz_data d;
    memset(&d, 0, sizeof d);
    int rc = check_against_model(&o, layer, head, &model, &tok);
    if (rc) goto out;
    rc = 1;
    attn_viz_options opt;
    attn_viz_options_default(&opt);
    opt.generate = (int)o.generate;
    opt.temperature = o.temperature;
    opt.top_k = (int)o.top_k;
    opt.seed = o.seed;
    if (attn_viz_compute(&model, &tok, prompt, strlen(prompt), &opt, ckpt, &d, &err) ||
        (svg && attn_viz_head_svg(&d, (int)layer, (int)head, &svg_text, &err)) ||
        (html && attn_viz_html(&d, &page, &page_len, &err))) {
        fprintf(stderr, "attn viz: %s\n", err.msg);
        goto out;
    }
    /* Both documents exist in memory; a failed second write takes the first back. */
    if (d.prompt_dropped)
        fprintf(stderr,
                "attn viz: note: the prompt has %d %s; the model reads at most %d "
                "(context_length%s), so it keeps the last %d, as attn generate does\n",
                d.prompt_dropped + d.n_prompt, tok.kind ? "tokens" : "characters",
                model.cfg.context_length, d.n_generated ? ", generated ones included" : "",
                d.n_prompt);
    if (html && attn_file_write_atomic(html, page, page_len, &err)) {
        fprintf(stderr, "attn viz: %s\n", err.msg);
        goto out;
    }
    if (svg && attn_file_write_atomic(svg, svg_text, strlen(svg_text), &err)) {
        fprintf(stderr, "attn viz: %s\n", err.msg);
        if (html) unlink(html);
        goto out;
    }
    if (html)
        fprintf(stderr, "attn viz: wrote %s (%zu bytes, %d %s, %d layers x %d heads)\n", html,
                page_len, d.T, tok.kind ? "tokens" : "characters", d.n_layers, d.n_heads);
    if (svg) fprintf(stderr, "attn viz: wrote %s (layer %ld, head %ld)\n", svg, layer, head);
    rc = 0;
out:
    free(svg_text);
    free(page);
    attn_viz_data_free(&d);
    attn_gpt_free(&model);
    attn_tokenizer_free(&tok);
    return rc;
}
