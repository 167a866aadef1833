/* attn export RUN OUT --format hf|llmc|book — write a model's weights as
 * another program's GPT-2 file. RUN is anything the library's importer reads
 * (attn/weights_format.h): an attn run folder or model.safetensors, an HF,
 * llm.c or book file, so export also converts between the formats. */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "attn/checkpoint.h"
#include "attn/finetune.h"
#include "attn/weights_format.h"
#include "commands.h"
#include "options.h"

#define CMD "attn export"

typedef struct export_opts {
    const char *format;
    long long n_heads;
    int hf_config;
    double max_memory;
} export_opts;

enum { EXP_FORMAT, EXP_N_HEADS, EXP_HF_CONFIG, EXP_MAX_MEMORY, EXP_OPT_COUNT };

static const char *const export_formats[] = {"hf", "llmc", "book", NULL};

#define OFF(f) offsetof(export_opts, f)
static const cli_option export_opts_table[] = {
    [EXP_FORMAT] = {"format", CLI_CHOICE, NULL, OFF(format), .choices = export_formats,
                    .required = 1,
                    .help = "hf: HF GPT2LMHeadModel safetensors; llmc: llm.c's\n"
                            ".bin; book: the book's torch.save model.pth (or\n"
                            "safetensors when OUT ends in .safetensors)"},
    [EXP_N_HEADS] = CLI_N_HEADS_OPTION(OFF(n_heads)),
    [EXP_HF_CONFIG] = {"hf-config", CLI_FLAG, .offset = OFF(hf_config),
                       .help = "with --format hf: also write config.json beside OUT"},
    [EXP_MAX_MEMORY] = CLI_MAX_MEMORY_OPTION(OFF(max_memory)),
};
CLI_TABLE_CHECK(export_opts_table, EXP_OPT_COUNT);

const cli_command export_cli = {
    "export",
    "attn export RUN OUT --format hf|llmc|book [--n-heads N] [--hf-config]\n"
    "                   [--max-memory SIZE]",
    "  Writes the GPT in RUN (a run folder of `attn train` or its\n"
    "  model.safetensors, or an HF, llm.c or book weights file: the format is\n"
    "  read from the content) to OUT in the format asked, atomically. OUT may\n"
    "  not lie in a run folder nor be an input. hf and llmc are GPT-2: they take\n"
    "  the book's model with qkv_bias (llmc: tied too).\n",
    export_opts_table,
    EXP_OPT_COUNT,
    2};

/* dir of path + name into out. */
static void beside(char *out, size_t cap, const char *path, const char *name) {
    const char *slash = strrchr(path, '/');
    snprintf(out, cap, "%.*s%s", slash ? (int)(slash - path + 1) : 0, path, name);
}

/* Every output: not in a run folder, not an input (RUN's files, its
 * config.json), not the other output. */
static int check_outputs(const char *run, const char *out, const char *cfg_out) {
    char run_cfg[ATTN_CKPT_PATH_MAX];
    beside(run_cfg, sizeof run_cfg, run, "config.json");
    const char *inputs[1] = {run_cfg};
    attn_error err;
    attn_status s = attn_ckpt_output_check(run, out, inputs, 1, &cfg_out, cfg_out ? 1 : 0, &err);
    if (!s && cfg_out) s = attn_ckpt_output_check(run, cfg_out, inputs, 1, &out, 1, &err);
    if (!s) return 0;
    fprintf(stderr, CMD ": %s\n", err.msg);
    return s == ATTN_ERR_INVALID_ARG ? 2 : 1;
}

static int write_out(const attn_gpt *m, attn_weights_format from, attn_weights_format fmt,
                     const char *out, const char *cfg_out) {
    attn_error err;
    if (attn_weights_can_export(&m->cfg, fmt, &err)) { /* the request, not a failure */
        fprintf(stderr, CMD ": %s\n", err.msg);
        return 2;
    }
    if (attn_gpt_export(m, out, fmt, &err) ||
        (cfg_out && attn_gpt_export_hf_config(m, cfg_out, &err))) {
        fprintf(stderr, CMD ": %s\n", err.msg);
        return 1;
    }
    const attn_gpt_config *c = &m->cfg;
    printf("%s: %s from %s: vocab_size %d, context_length %d, emb_dim %d, n_heads %d, "
           "n_layers %d, qkv_bias %s, tie_weights %s\n",
           out, attn_weights_format_name(fmt), attn_weights_format_name(from), c->vocab_size,
           c->context_length, c->emb_dim, c->n_heads, c->n_layers, c->qkv_bias ? "true" : "false",
           c->tie_weights ? "true" : "false");
    return 0;
}

/* A fine-tuned run (attn train --task classify|instruct), its adapters
 * merged (W + alpha/r (A B)^T, LinearWithLoRA's output as one matrix): a
 * classifier as the book's chapter-6 model only (hf and llmc hold GPT-2's
 * language head); an instruct run in every format its config allows. */
static int export_finetuned(const char *run, const char *task, const char *out,
                            attn_weights_format fmt, const char *cfg_out) {
    if (strcmp(task, "classify") == 0 && fmt != ATTN_WEIGHTS_BOOK) {
        fprintf(stderr,
                CMD ": %s is a classifier: --format book writes it (the book's chapter-6 "
                    "model); hf and llmc hold GPT-2's language-model head\n",
                run);
        return 2;
    }
    attn_gpt m, merged;
    memset(&merged, 0, sizeof merged); /* freeing it is a no-op until the merge */
    attn_tokenizer tok;
    attn_classifier_info info;
    attn_error err;
    if (attn_finetuned_load(run, &m, &tok, &info, &err)) {
        fprintf(stderr, CMD ": %s\n", err.msg);
        return 1;
    }
    attn_tokenizer_free(&tok);
    int rc = 0;
    if (fmt == ATTN_WEIGHTS_LLMC && !m.cfg.tie_weights) {
        fprintf(stderr,
                CMD ": %s is a fine-tuned run: its head is its own (the book loads GPT-2 with "
                    "out_head apart from tok_emb), and llm.c's GPT-2 file ties the head to "
                    "wte; --format hf or book write it\n",
                run);
        rc = 2;
    }
    if (!rc && info.lora_rank &&
        attn_gpt_merge_lora(&merged, &m, info.lora_alpha / (float)info.lora_rank, &err)) {
        fprintf(stderr, CMD ": %s\n", err.msg);
        rc = 1;
    }
    if (!rc) rc = write_out(info.lora_rank ? &merged : &m, ATTN_WEIGHTS_ATTN, fmt, out, cfg_out);
    attn_gpt_free(&merged); /* zeroed unless merged */
    attn_gpt_free(&m);
    return rc;
}

int cmd_export(int argc, char **argv) {
    export_opts o;
    cli_parsed parsed;
    int rc = cli_parse(&export_cli, argc, argv, &o, &parsed);
    if (rc) return rc == CLI_HELP ? 0 : rc;
    if (parsed.n_positional != 2) {
        fprintf(stderr, CMD ": needs RUN and OUT; usage: %s\n", export_cli.synopsis);
        return 2;
    }
    const char *run = parsed.positional[0], *out = parsed.positional[1];
    attn_weights_format fmt, from;
    attn_error err;
    attn_weights_format_parse(o.format, &fmt, &err); /* the table allows only valid names */
    if (o.hf_config && fmt != ATTN_WEIGHTS_HF) {
        fprintf(stderr, CMD ": --hf-config goes with --format hf\n");
        return 2;
    }
    char cfg_out[ATTN_CKPT_PATH_MAX];
    beside(cfg_out, sizeof cfg_out, out, "config.json");
    if ((rc = check_outputs(run, out, o.hf_config ? cfg_out : NULL))) return rc;
    char task[16];
    if (attn_model_task(run, task, &err) == ATTN_OK && strcmp(task, "lm") != 0)
        return export_finetuned(run, task, out, fmt, o.hf_config ? cfg_out : NULL);
    attn_gpt_config hint;
    memset(&hint, 0, sizeof hint);
    hint.n_heads = (int)o.n_heads;
    attn_gpt m;
    if (attn_gpt_import_budget(run, &hint, o.max_memory, &m, &from, &err)) {
        fprintf(stderr, CMD ": %s\n", err.msg);
        return err.code == ATTN_ERR_INVALID_ARG ? 2 : 1;
    }
    rc = write_out(&m, from, fmt, out, o.hf_config ? cfg_out : NULL);
    attn_gpt_free(&m);
    return rc;
}
