/* attn viz — a GPT checkpoint's attention on a prompt: a self-contained HTML
 * page (head view, model view, generated characters) and/or one head's
 * heatmap as SVG. Everything is computed and written by the library
 * (attn/viz.h); this file only parses. */
#define _POSIX_C_SOURCE 200809L /* unlink */

#include <cblas.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "attn/fileio.h"
#include "attn/train.h"
#include "attn/viz.h"
#include "commands.h"

static void viz_usage(FILE *out) {
    fprintf(out,
            "usage: attn viz --checkpoint DIR --prompt TEXT [--generate N] [--seed 1337]\n"
            "                [--temperature 0.8] [--top-k 200] --out FILE.html\n"
            "       attn viz --checkpoint DIR --prompt TEXT --layer L --head H --svg FILE.svg\n"
            "  --out   one self-contained HTML page (no network): the prompt's characters\n"
            "          shaded by the attention of the one under the mouse (choose layer and\n"
            "          heads), every layer x head as a small heatmap (click: large, with the\n"
            "          characters on the axes) and, with --generate, each sampled character\n"
            "          with its probability and the five most likely ones. The weights are\n"
            "          also in the page as JSON (<script id=\"attn-data\">, see README).\n"
            "  --svg   the heatmap of layer L, head H (0-based) as a standalone SVG.\n"
            "  --generate N samples N characters after the prompt exactly as `attn\n"
            "  generate` does with the same seed/temperature/top-k; prompt + N must fit in\n"
            "  the model's context_length. Both outputs may be asked for at once.\n");
}

static int parse_int(const char *v, long lo, long hi, long *out) {
    char *end = NULL;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (errno || end == v || *end || x < lo || x > hi) return -1;
    *out = x;
    return 0;
}

int cmd_viz(int argc, char **argv) {
    const char *ckpt = NULL, *prompt = NULL, *html = NULL, *svg = NULL;
    long layer = -1, head = -1, generate = 0, top_k = 200;
    double temperature = 0.8;
    unsigned long long seed = 1337;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            viz_usage(stdout);
            return 0;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "attn viz: unknown or incomplete option '%s'\n", a);
            viz_usage(stderr);
            return 2;
        }
        const char *v = argv[++i];
        int bad = 0;
        if (strcmp(a, "--checkpoint") == 0)
            ckpt = v;
        else if (strcmp(a, "--prompt") == 0)
            prompt = v;
        else if (strcmp(a, "--out") == 0)
            html = v;
        else if (strcmp(a, "--svg") == 0)
            svg = v;
        else if (strcmp(a, "--layer") == 0)
            bad = parse_int(v, 0, 1000000, &layer);
        else if (strcmp(a, "--head") == 0)
            bad = parse_int(v, 0, 1000000, &head);
        else if (strcmp(a, "--generate") == 0)
            bad = parse_int(v, 0, 1000000, &generate);
        else if (strcmp(a, "--top-k") == 0)
            bad = parse_int(v, 0, 1000000, &top_k);
        else if (strcmp(a, "--temperature") == 0) {
            char *end = NULL;
            errno = 0;
            temperature = strtod(v, &end);
            bad = errno || end == v || *end || !(temperature >= 0) || !isfinite(temperature);
        } else if (strcmp(a, "--seed") == 0) {
            char *end = NULL;
            errno = 0;
            seed = strtoull(v, &end, 10);
            bad = errno || end == v || *end || v[0] == '-';
        } else {
            fprintf(stderr, "attn viz: unknown option '%s'\n", a);
            viz_usage(stderr);
            return 2;
        }
        if (bad) {
            fprintf(stderr, "attn viz: bad value '%s' for %s (%s)\n", v, a,
                    strcmp(a, "--temperature") == 0 ? "a number >= 0" : "an integer >= 0");
            return 2;
        }
    }
    if (!ckpt || !prompt) {
        fprintf(stderr, "attn viz: --checkpoint DIR and --prompt TEXT are required\n");
        viz_usage(stderr);
        return 2;
    }
    if (!html && !svg) {
        fprintf(stderr, "attn viz: nothing to write: give --out FILE.html and/or --svg FILE.svg\n");
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
    openblas_set_num_threads(1); /* one short sequence: tiny products */
    attn_error err;
    attn_error_clear(&err);
    attn_gpt model;
    attn_tokenizer tok;
    if (attn_gpt_load_checkpoint(ckpt, &model, &tok, NULL, &err)) {
        fprintf(stderr, "attn viz: %s\n", err.msg);
        return 1;
    }
    int rc = 1;
    char *svg_text = NULL, *page = NULL;
    size_t page_len = 0;
    attn_viz_data d;
    memset(&d, 0, sizeof d);
    if (svg && (layer >= model.cfg.n_layers || head >= model.cfg.n_heads)) {
        fprintf(stderr, "attn viz: %s %ld is outside 0..%d (the model has %d layers x %d heads)\n",
                layer >= model.cfg.n_layers ? "--layer" : "--head",
                layer >= model.cfg.n_layers ? layer : head,
                (layer >= model.cfg.n_layers ? model.cfg.n_layers : model.cfg.n_heads) - 1,
                model.cfg.n_layers, model.cfg.n_heads);
        goto out;
    }
    attn_viz_options opt;
    attn_viz_options_default(&opt);
    opt.generate = (int)generate;
    opt.temperature = temperature;
    opt.top_k = (int)top_k;
    opt.seed = seed;
    if (attn_viz_compute(&model, &tok, prompt, strlen(prompt), &opt, ckpt, &d, &err) ||
        (svg && attn_viz_head_svg(&d, (int)layer, (int)head, &svg_text, &err)) ||
        (html && attn_viz_html(&d, &page, &page_len, &err))) {
        fprintf(stderr, "attn viz: %s\n", err.msg);
        goto out;
    }
    /* Both documents exist in memory; a failed second write takes the first back. */
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
        fprintf(stderr, "attn viz: wrote %s (%zu bytes, %d characters, %d layers x %d heads)\n",
                html, page_len, d.T, d.n_layers, d.n_heads);
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
