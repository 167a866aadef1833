/* attn forward gpt — run a trained checkpoint on token ids from .npy and
 * write the logits, printing the loss when targets are given (for checks
 * against the book's PyTorch GPTModel). Dispatched from cmd_forward.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn/npy.h"
#include "attn/train.h"
#include "commands.h"

static void forward_gpt_usage(FILE *out) {
    fprintf(out, "usage: attn forward gpt --checkpoint DIR --input IDS.npy --output LOGITS.npy\n"
                 "                        [--targets Y.npy] [--precision fp32|bf16]\n"
                 "  IDS and Y are int64 or int32 (B, T) token ids, T <= context_length; writes\n"
                 "  float32 logits (B, T, vocab_size) and, with targets, prints\n"
                 "  \"loss: X\" (mean cross-entropy over B*T). Eval mode (no dropout).\n"
                 "  --precision bf16: bf16 products with fp32 sums (AVX512-BF16 CPUs).\n");
}

int cmd_forward_gpt(int argc, char **argv) {
    const char *ckpt = NULL, *in = NULL, *outp = NULL, *tg = NULL;
    attn_precision precision = ATTN_PRECISION_FP32;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            forward_gpt_usage(stdout);
            return 0;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "attn forward gpt: unknown or incomplete option '%s'\n", a);
            return 2;
        }
        const char *v = argv[++i];
        if (strcmp(a, "--checkpoint") == 0)
            ckpt = v;
        else if (strcmp(a, "--input") == 0)
            in = v;
        else if (strcmp(a, "--output") == 0)
            outp = v;
        else if (strcmp(a, "--targets") == 0)
            tg = v;
        else if (strcmp(a, "--precision") == 0) {
            attn_error perr;
            if (attn_precision_parse(v, &precision, &perr) ||
                attn_precision_check(precision, &perr)) {
                fprintf(stderr, "attn forward gpt: %s\n", perr.msg);
                return 2;
            }
        } else {
            fprintf(stderr, "attn forward gpt: unknown option '%s'\n", a);
            forward_gpt_usage(stderr);
            return 2;
        }
    }
    if (!ckpt || !in || !outp) {
        fprintf(stderr, "attn forward gpt: --checkpoint, --input and --output are required\n");
        forward_gpt_usage(stderr);
        return 2;
    }
    attn_error err;
    attn_error_clear(&err);
    attn_gpt model;
    attn_tokenizer tok;
    attn_npy x, y;
    attn_gpt_acts acts;
    memset(&x, 0, sizeof x);
    memset(&y, 0, sizeof y);
    memset(&acts, 0, sizeof acts);
    if (attn_gpt_load_checkpoint(ckpt, &model, &tok, NULL, &err)) {
        fprintf(stderr, "attn forward gpt: %s\n", err.msg);
        return 1;
    }
    int rc = 1;
    const int64_t any2[2] = {-1, -1};
    if (attn_gpt_set_precision(&model, precision, &err)) goto fail;
    if (attn_npy_load_ids(in, &x, &err) || attn_npy_expect_shape(&x, in, 2, any2, "(B, T)", &err) ||
        attn_npy_convert_ids(&x, ATTN_NPY_I64, in, &err))
        goto fail;
    if (tg) {
        if (attn_npy_load_ids(tg, &y, &err) ||
            attn_npy_expect_shape(&y, tg, 2, x.shape, "(B, T) as the input", &err) ||
            attn_npy_convert_ids(&y, ATTN_NPY_I64, tg, &err))
            goto fail;
    }
    const int64_t B = x.shape[0], T = x.shape[1];
    if (B < 1 || T < 1 || T > model.cfg.context_length || B > (1 << 20)) {
        attn_fail(&err, ATTN_ERR_SHAPE,
                  "%s: shape (%lld, %lld) needs B >= 1 and 1 <= T <= context_length %d", in,
                  (long long)B, (long long)T, model.cfg.context_length);
        goto fail;
    }
    float loss = 0;
    if (attn_gpt_acts_init(&acts, &model, (int)B, (int)T, &err) ||
        attn_gpt_forward_i64(&model, x.data, tg ? y.data : NULL, (int)B, (int)T, NULL, &acts, &loss,
                             &err))
        goto fail;
    const int64_t shape[3] = {B, T, model.cfg.vocab_size};
    if (attn_npy_save_f32(outp, acts.logits, 3, shape, &err)) goto fail;
    if (tg) printf("loss: %.8f\n", (double)loss);
    rc = 0;
    goto done;
fail:
    fprintf(stderr, "attn forward gpt: %s\n", err.msg);
done:
    attn_gpt_acts_free(&acts);
    attn_npy_free(&x);
    attn_npy_free(&y);
    attn_gpt_free(&model);
    attn_tokenizer_free(&tok);
    return rc;
}
