/* attn forward gpt — run a trained checkpoint (or GPT-2 weights in another
 * format, attn/weights_format.h) on token ids from .npy and write the logits,
 * printing the loss when targets are given (for checks against the book's
 * PyTorch GPTModel and GPT-2's). Dispatched from cmd_forward.c. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn/checkpoint.h"
#include "attn/fileio.h"
#include "attn/npy.h"
#include "attn/train.h"
#include "attn/weights_format.h"
#include "commands.h"
#include "options.h"
#include "threads.h"

typedef struct gpt_opts {
    const char *checkpoint, *input, *output, *targets, *precision;
    long long threads, n_heads;
} gpt_opts;

enum {
    GPT_CHECKPOINT,
    GPT_INPUT,
    GPT_OUTPUT,
    GPT_TARGETS,
    GPT_PRECISION,
    GPT_THREADS,
    GPT_N_HEADS,
    GPT_OPT_COUNT
};

#define OFF(f) offsetof(gpt_opts, f)
static const cli_option gpt_opts_table[] = {
    [GPT_CHECKPOINT] = {"checkpoint", CLI_STRING, "DIR", OFF(checkpoint), .required = 1,
                        .positional = 1,
                        .help = "a run folder of `attn train`; the flag may be left out\n"
                                "(or its model.safetensors), or HF, llm.c or book\n"
                                "GPT-2 weights"},
    [GPT_INPUT] = {"input", CLI_STRING, "IDS.npy", OFF(input), .required = 1,
                   .help = "int64 or int32 (B, T) token ids, T <= context_length"},
    [GPT_OUTPUT] = {"output", CLI_STRING, "LOGITS.npy", OFF(output), .required = 1,
                    .help = "float32 logits (B, T, vocab_size), written atomically"},
    [GPT_TARGETS] = {"targets", CLI_STRING, "Y.npy", OFF(targets),
                     .help = "(B, T) ids as the input: prints \"loss: X\" (mean\n"
                             "cross-entropy over B*T)"},
    [GPT_PRECISION] = {"precision", CLI_CHOICE, NULL, OFF(precision),
                       .choices = cli_precision_choices, .def = "fp32",
                       .help = "bf16: bf16 products with fp32 sums (AVX512-BF16 CPUs)"},
    [GPT_THREADS] = CLI_THREADS_OPTION(OFF(threads)),
    [GPT_N_HEADS] = CLI_N_HEADS_OPTION(OFF(n_heads)),
};
CLI_TABLE_CHECK(gpt_opts_table, GPT_OPT_COUNT);

const cli_command forward_gpt_cli = {
    "forward gpt",
    "attn forward gpt [--checkpoint] DIR --input IDS.npy --output LOGITS.npy\n"
    "                        [--targets Y.npy] [--precision fp32|bf16] [--threads N]\n"
    "                        [--n-heads N]",
    "  Runs the checkpoint's GPT on the ids in eval mode (no dropout) and writes\n"
    "  the logits; with --targets also prints the loss, for checks against the\n"
    "  book's PyTorch GPTModel.\n",
    gpt_opts_table,
    GPT_OPT_COUNT,
    0};

/* IDS (and Y) as int64 (B, T) within the model's context. */
static attn_status load_ids(const gpt_opts *o, const attn_gpt *model, attn_npy *x, attn_npy *y,
                            attn_error *err) {
    const int64_t any2[2] = {-1, -1};
    if (attn_npy_load_ids(o->input, x, err) ||
        attn_npy_expect_shape(x, o->input, 2, any2, "(B, T)", err) ||
        attn_npy_convert_ids(x, ATTN_NPY_I64, o->input, err))
        return err->code;
    if (o->targets &&
        (attn_npy_load_ids(o->targets, y, err) ||
         attn_npy_expect_shape(y, o->targets, 2, x->shape, "(B, T) as the input", err) ||
         attn_npy_convert_ids(y, ATTN_NPY_I64, o->targets, err)))
        return err->code;
    const int64_t B = x->shape[0], T = x->shape[1];
    if (B < 1 || T < 1 || T > model->cfg.context_length || B > (1 << 20))
        return attn_fail(err, ATTN_ERR_SHAPE,
                         "%s: shape (%lld, %lld) needs B >= 1 and 1 <= T <= context_length %d",
                         o->input, (long long)B, (long long)T, model->cfg.context_length);
    return ATTN_OK;
}

static attn_status run_gpt(const gpt_opts *o, attn_gpt *model, attn_precision precision,
                           attn_error *err) {
    attn_npy x, y;
    attn_gpt_acts acts;
    memset(&x, 0, sizeof x);
    memset(&y, 0, sizeof y);
    memset(&acts, 0, sizeof acts);
    float loss = 0;
    attn_status s = attn_gpt_set_precision(model, precision, err);
    if (!s) s = load_ids(o, model, &x, &y, err);
    const int B = s ? 0 : (int)x.shape[0], T = s ? 0 : (int)x.shape[1];
    if (!s) s = attn_gpt_acts_init(&acts, model, B, T, err);
    if (!s)
        s = attn_gpt_forward_i64(model, x.data, o->targets ? y.data : NULL, B, T, NULL, &acts,
                                 &loss, err);
    const int64_t shape[3] = {B, T, model->cfg.vocab_size};
    if (!s) s = attn_npy_save_f32(o->output, acts.logits, 3, shape, err);
    if (!s && o->targets) printf("loss: %.8f\n", (double)loss);
    attn_gpt_acts_free(&acts);
    attn_npy_free(&x);
    attn_npy_free(&y);
    return s;
}

int cmd_forward_gpt(int argc, char **argv) {
    gpt_opts o;
    cli_parsed parsed;
    int rc = cli_parse(&forward_gpt_cli, argc, argv, &o, &parsed);
    if (rc) return rc == CLI_HELP ? 0 : rc;
    attn_error err;
    attn_precision precision;
    attn_precision_parse(o.precision, &precision, &err); /* the table allows only valid names */
    if (attn_precision_check(precision, &err)) {
        fprintf(stderr, "attn forward gpt: %s\n", err.msg);
        return 2;
    }
    cli_use_threads((int)o.threads, 1);
    const char *inputs[2] = {o.input, o.targets};
    if (attn_ckpt_output_check(o.checkpoint, o.output, inputs, 2, NULL, 0, &err)) {
        fprintf(stderr, "attn forward gpt: %s\n", err.msg);
        return err.code == ATTN_ERR_INVALID_ARG ? 2 : 1;
    }
    attn_gpt model; /* ids in, logits out: no tokenizer, any vocabulary */
    const attn_gpt_open_options open = {.n_heads = (int)o.n_heads};
    if (attn_gpt_open(o.checkpoint, &open, &model, NULL, NULL, NULL, &err)) {
        fprintf(stderr, "attn forward gpt: %s\n", err.msg);
        return 1;
    }
    rc = run_gpt(&o, &model, precision, &err) ? 1 : 0;
    if (rc) fprintf(stderr, "attn forward gpt: %s\n", err.msg);
    attn_gpt_free(&model);
    return rc;
}
