/* attn info DIR — what a checkpoint holds: configs, step, losses, vocabulary,
 * parameter count and size on disk. The reading is the library's
 * (attn/checkpoint_info.h); this file only draws. */
#include <cjson/cJSON.h>
#include <inttypes.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn/checkpoint_info.h"
#include "attn/cpu_report.h"
#include "attn/finetune.h"
#include "attn/gpt_family.h"
#include "commands.h"

typedef struct info_opts {
    int json;
    int cpu;
} info_opts;

enum { INFO_JSON, INFO_CPU, INFO_OPT_COUNT };

static const cli_option info_opts_table[] = {
    [INFO_JSON] = {"json", CLI_FLAG, .offset = offsetof(info_opts, json),
                   .help = "print one JSON object instead of text"},
    [INFO_CPU] = {"cpu", CLI_FLAG, .offset = offsetof(info_opts, cpu),
                  .help = "describe this CPU instead (no DIR): its level, the\n"
                          "ATTN_SIMD cap, and which kernels attn runs"},
};
CLI_TABLE_CHECK(info_opts_table, INFO_OPT_COUNT);

const cli_command info_cli = {
    "info",
    "attn info [--json] DIR\n"
    "       attn info --cpu [--json]",
    "  Describes the checkpoint in DIR (a run folder of `attn train`, or a model\n"
    "  .safetensors file): model and training config, step, the last training loss\n"
    "  and evaluations, the vocabulary, the parameter count and the size on disk.\n"
    "  A GPT-2 weights file of HF, llm.c or the book: its format and model (such a\n"
    "  file carries no training history).\n"
    "  With --cpu: this CPU's level (generic, avx2, avx512, avx512-bf16, amx), the\n"
    "  cap ATTN_SIMD sets, and the kernels attn runs under it.\n",
    info_opts_table,
    INFO_OPT_COUNT,
    1};

/* The vocabulary as a C-like string: control characters escaped. */
static void put_escaped(const char *s) {
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '\n')
            fputs("\\n", stdout);
        else if (c == '\t')
            fputs("\\t", stdout);
        else if (c == '\\' || c == '"')
            printf("\\%c", c);
        else if (c < 0x20 || c == 0x7f)
            printf("\\x%02x", c);
        else
            putchar(c);
    }
}

static void mib(char *buf, size_t cap, uint64_t bytes) {
    snprintf(buf, cap, "%" PRIu64 " bytes (%.2f MiB)", bytes, (double)bytes / 1048576.0);
}

/* "val 1.5012", "val 1.5012, exact 1.4893" or "val 1.4893 exact". */
static void eval_val_text(const attn_eval_record *r, char *buf, size_t cap) {
    if (isnan(r->val_exact))
        snprintf(buf, cap, "val %.4f", (double)r->val_loss);
    else if (isnan(r->val_loss))
        snprintf(buf, cap, "val %.4f exact", (double)r->val_exact);
    else
        snprintf(buf, cap, "val %.4f, exact %.4f", (double)r->val_loss, (double)r->val_exact);
}

/* What a weights file of another program is. */
static const char *foreign_what(attn_weights_format f) {
    return f == ATTN_WEIGHTS_HF     ? "Hugging Face's GPT2LMHeadModel safetensors"
           : f == ATTN_WEIGHTS_LLMC ? "llm.c's GPT-2 checkpoint"
                                    : "the book's GPTModel state_dict";
}

static void print_text(const char *dir, const attn_checkpoint_info *in) {
    const attn_gpt_config *m = &in->model;
    const int foreign = in->format != ATTN_WEIGHTS_ATTN;
    char size[64], init[16];
    printf("checkpoint     %s\n", dir);
    if (foreign) {
        printf("format         %s: %s, GPT-2's tokenizer\n", attn_weights_format_name(in->format),
               foreign_what(in->format));
        printf("step           none: another program's weights carry no training history\n");
    } else {
        printf("step           %" PRId64 "\n", in->step);
    }
    printf("model          vocab_size %d, context_length %d, emb_dim %d, n_heads %d, n_layers %d, "
           "drop_rate %g, qkv_bias %s\n",
           m->vocab_size, m->context_length, m->emb_dim, m->n_heads, m->n_layers, m->drop_rate,
           m->qkv_bias ? "true" : "false");
    char variant[512];
    attn_gpt_config_describe_variants(m, 0, variant, sizeof variant);
    printf("variant        %s\n", variant);
    attn_gpt_key_value(m, ATTN_GPT_KEY_INIT, init, sizeof init);
    if (!foreign) /* how attn drew the run's first weights */
        printf("init           %s\n", init);
    printf("parameters     %zu (%.2f M, %.1f MiB as float32)\n", in->n_params,
           (double)in->n_params / 1e6, (double)in->n_params * 4.0 / 1048576.0);
    printf("tokenizer      %s\n", attn_tokenizer_kind_name(in->tokenizer));
    if (in->vocabulary) {
        printf("vocabulary     %d characters: \"", in->vocab_size);
        put_escaped(in->vocabulary);
        printf("\"\n");
    } else {
        printf("vocabulary     %d tokens (GPT-2's BPE, %s)\n", in->vocab_size,
               in->format == ATTN_WEIGHTS_ATTN ? "carried in the model file"
                                               : "from GPT-2's vocabulary files");
    }
    mib(size, sizeof size, in->model_bytes);
    printf("model file     %s\n", size);
    if (!in->has_train_state) {
        printf("training state none (weights only: cannot be resumed)\n");
        return;
    }
    const attn_train_config *t = &in->train;
    mib(size, sizeof size, in->state_bytes);
    printf("training state %s, step %" PRId64 "%s\n", size, in->state_step,
           in->state_step == in->step ? "" : " (differs from the model's step!)");
    mib(size, sizeof size, in->model_bytes + in->state_bytes);
    printf("on disk        %s\n", size);
    printf("training       batch_size %d, max_steps %" PRId64 ", lr %g -> %g (warmup %" PRId64
           "), weight_decay %g, grad_clip %g, seed %" PRIu64 "\n",
           t->batch_size, t->max_steps, t->learning_rate, t->min_lr, t->warmup_steps,
           t->weight_decay, t->grad_clip, t->seed);
    printf("corpus         %s\n", in->corpus_path && in->corpus_path[0] ? in->corpus_path : "-");
    if (in->n_history)
        printf("last step      %" PRId64 ": loss %.4f, lr %.3g, grad_norm %.3f\n", in->last.step,
               (double)in->last.loss, (double)in->last.lr, (double)in->last.grad_norm);
    if (in->n_evals) {
        const attn_eval_record *l = &in->last_eval, *b = &in->best_eval;
        char lv[64], bv[64];
        eval_val_text(l, lv, sizeof lv);
        eval_val_text(b, bv, sizeof bv);
        printf("last eval      step %" PRId64 ": train %.4f, %s (%zu evaluations)\n", l->step,
               (double)l->train_loss, lv, in->n_evals);
        printf("best val       step %" PRId64 ": %s\n", b->step, bv);
    }
}

static cJSON *eval_json(const attn_eval_record *r) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "step", (double)r->step);
    cJSON_AddNumberToObject(o, "train_loss", (double)r->train_loss);
    cJSON_AddNumberToObject(o, "val_loss", (double)r->val_loss);
    if (!isnan(r->val_exact)) cJSON_AddNumberToObject(o, "val_loss_exact", (double)r->val_exact);
    return o;
}

/* Print o as JSON and free it: 0, or 1 when out of memory. */
static int print_object(cJSON *o) {
    char *text = cJSON_Print(o);
    cJSON_Delete(o);
    if (!text) {
        fprintf(stderr, "attn info: out of memory\n");
        return 1;
    }
    printf("%s\n", text);
    free(text);
    return 0;
}

static int print_json(const char *dir, const attn_checkpoint_info *in) {
    const attn_gpt_config *m = &in->model;
    cJSON *o = cJSON_CreateObject(), *c = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "checkpoint", dir);
    cJSON_AddStringToObject(o, "format", attn_weights_format_name(in->format));
    /* Another program's weights: no step, no history (null, not -1). */
    const int foreign = in->format != ATTN_WEIGHTS_ATTN;
    cJSON_AddBoolToObject(o, "training_history", !foreign);
    if (foreign) {
        cJSON_AddStringToObject(o, "what", foreign_what(in->format));
        cJSON_AddNullToObject(o, "step");
    } else {
        cJSON_AddNumberToObject(o, "step", (double)in->step);
    }
    cJSON_AddNumberToObject(c, "vocab_size", m->vocab_size);
    cJSON_AddNumberToObject(c, "context_length", m->context_length);
    cJSON_AddNumberToObject(c, "emb_dim", m->emb_dim);
    cJSON_AddNumberToObject(c, "n_heads", m->n_heads);
    cJSON_AddNumberToObject(c, "n_layers", m->n_layers);
    cJSON_AddNumberToObject(c, "drop_rate", m->drop_rate);
    cJSON_AddBoolToObject(c, "qkv_bias", m->qkv_bias);
    for (int i = ATTN_GPT_KEY_VARIANT0; i < ATTN_GPT_KEY_VARIANT0 + ATTN_GPT_KEY_VARIANTS; i++) {
        const attn_gpt_key *k = attn_gpt_key_at(i);
        char v[64];
        attn_gpt_key_value(m, i, v, sizeof v);
        if (k->type == ATTN_GPT_KEY_CHOICE)
            cJSON_AddStringToObject(c, k->name, v);
        else if (k->type == ATTN_GPT_KEY_BOOL)
            cJSON_AddBoolToObject(c, k->name, strcmp(v, "true") == 0);
        else
            cJSON_AddNumberToObject(c, k->name, strtod(v, NULL));
    }
    if (!foreign) {
        char v[16];
        attn_gpt_key_value(m, ATTN_GPT_KEY_INIT, v, sizeof v);
        cJSON_AddStringToObject(c, "init", v);
    }
    cJSON_AddItemToObject(o, "model", c);
    cJSON_AddNumberToObject(o, "parameters", (double)in->n_params);
    cJSON_AddStringToObject(o, "tokenizer", attn_tokenizer_kind_name(in->tokenizer));
    if (in->vocabulary) cJSON_AddStringToObject(o, "vocabulary", in->vocabulary);
    cJSON_AddNumberToObject(o, "vocab_size", in->vocab_size);
    cJSON_AddNumberToObject(o, "model_bytes", (double)in->model_bytes);
    if (in->has_train_state) {
        char *tj = attn_train_config_to_json(&in->train);
        cJSON *t = tj ? cJSON_Parse(tj) : NULL;
        free(tj);
        if (t) cJSON_AddItemToObject(o, "training", t);
        cJSON_AddNumberToObject(o, "state_step", (double)in->state_step);
        cJSON_AddNumberToObject(o, "state_bytes", (double)in->state_bytes);
        if (in->corpus_path) cJSON_AddStringToObject(o, "corpus", in->corpus_path);
        cJSON_AddNumberToObject(o, "steps_recorded", (double)in->n_history);
        if (in->n_history) {
            cJSON *l = cJSON_CreateObject();
            cJSON_AddNumberToObject(l, "step", (double)in->last.step);
            cJSON_AddNumberToObject(l, "loss", (double)in->last.loss);
            cJSON_AddNumberToObject(l, "lr", (double)in->last.lr);
            cJSON_AddNumberToObject(l, "grad_norm", (double)in->last.grad_norm);
            cJSON_AddItemToObject(o, "last_step", l);
        }
        cJSON_AddNumberToObject(o, "evaluations", (double)in->n_evals);
        if (in->n_evals) {
            cJSON_AddItemToObject(o, "last_eval", eval_json(&in->last_eval));
            cJSON_AddItemToObject(o, "best_eval", eval_json(&in->best_eval));
        }
    }
    return print_object(o);
}

/* attn info --cpu: the library's own answers (attn_cpu_report_get). */
static int print_cpu(int json) {
    attn_cpu_report r;
    attn_cpu_report_get(&r);
    const char *bf16 = r.bf16_engine ? "yes (oneDNN, AVX512-BF16)" : "no (fp32 only)";
    const char *blas = r.openblas_core ? r.openblas_core : "?";
    if (!json) {
        printf("cpu            %s\n", attn_cpu_level_name(r.native));
        printf("ATTN_SIMD      %s\n", r.cap_set ? attn_cpu_level_name(r.cap) : "(no cap)");
        printf("used           %s\n", attn_cpu_level_name(r.used));
        printf("fp32 kernels   %s (attention, activations, loss, dropout)\n",
               attn_simd_name(r.fp32_path));
        printf("gemv           %s (fp32 and bf16 weights, fp32 sums)\n",
               r.gemv_path == ATTN_SIMD_GENERIC ? "portable C" : attn_simd_name(r.gemv_path));
        printf("bf16 engine    %s\n", bf16);
        printf("amx            %s\n", r.amx ? "yes (fused attention's bf16 products)" : "no");
        printf("openblas       %s\n", blas);
        return 0;
    }
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "cpu", attn_cpu_level_name(r.native));
    if (r.cap_set)
        cJSON_AddStringToObject(o, "cap", attn_cpu_level_name(r.cap));
    else
        cJSON_AddNullToObject(o, "cap");
    cJSON_AddStringToObject(o, "used", attn_cpu_level_name(r.used));
    cJSON_AddStringToObject(o, "fp32_kernels", attn_simd_name(r.fp32_path));
    cJSON_AddStringToObject(o, "gemv", attn_simd_name(r.gemv_path));
    cJSON_AddBoolToObject(o, "bf16_engine", r.bf16_engine);
    cJSON_AddBoolToObject(o, "amx", r.amx);
    cJSON_AddStringToObject(o, "openblas", blas);
    return print_object(o);
}

/* A fine-tuned run (attn train --task classify or instruct): its task,
 * head, classes, trainable set and adapters, then the model. */
static int print_finetuned(const char *dir, int json) {
    attn_gpt m;
    attn_tokenizer tok;
    attn_classifier_info fi;
    attn_error err;
    if (attn_finetuned_load(dir, &m, &tok, &fi, &err)) {
        fprintf(stderr, "attn info: %s\n", err.msg);
        return 1;
    }
    size_t trainable = 0;
    const attn_param_list *L = attn_gpt_params(&m);
    for (int i = 0; i < L->count; i++)
        trainable += L->items[i].trainable ? L->items[i].numel : 0;
    const int width = attn_gpt_head_width(&m), classify = strcmp(fi.task, "classify") == 0;
    char *cfg = NULL;
    attn_gpt_config_to_json(&m.cfg, &cfg, &err);
    int rc = 0;
    if (json) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "checkpoint", dir);
        cJSON_AddStringToObject(o, "task", fi.task);
        cJSON_AddItemToObject(o, "model", cfg ? cJSON_Parse(cfg) : cJSON_CreateNull());
        cJSON_AddNumberToObject(o, "head_width", width);
        if (classify) cJSON_AddNumberToObject(o, "classes", fi.n_classes);
        if (classify) cJSON_AddNumberToObject(o, "padded_length", fi.max_len);
        cJSON_AddStringToObject(o, "trainable", fi.trainable);
        cJSON_AddNumberToObject(o, "trainable_parameters", (double)trainable);
        cJSON_AddNumberToObject(o, "parameters", (double)L->values_numel);
        cJSON_AddNumberToObject(o, "lora_rank", fi.lora_rank);
        if (fi.lora_rank) cJSON_AddNumberToObject(o, "lora_alpha", fi.lora_alpha);
        cJSON_AddStringToObject(o, "tokenizer", attn_tokenizer_kind_name(tok.kind));
        rc = print_object(o);
    } else {
        printf("checkpoint     %s\ntask           %s (%s)\n", dir, fi.task,
               classify ? "chapter 6's classifier" : "chapter 7's instruction model");
        printf("model          %s\n", cfg ? cfg : "?");
        if (classify)
            printf("head           %d classes (labels 0..%d), out_head %d -> %d with a bias\n"
                   "padded length  %d tokens (the training set's longest)\n",
                   fi.n_classes, fi.n_classes - 1, m.cfg.emb_dim, width, fi.max_len);
        else
            printf("head           the language head, %d wide\n", width);
        printf("trainable      %s: %zu of %zu parameters\n", fi.trainable, trainable,
               L->values_numel);
        if (fi.lora_rank)
            printf("lora           rank %d, alpha %g (scale alpha / rank = %g), on every Linear\n",
                   fi.lora_rank, (double)fi.lora_alpha,
                   (double)(fi.lora_alpha / (float)fi.lora_rank));
        else
            printf("lora           none\n");
        printf("tokenizer      %s\n", attn_tokenizer_kind_name(tok.kind));
    }
    free(cfg);
    attn_gpt_free(&m);
    attn_tokenizer_free(&tok);
    return rc;
}

int cmd_info(int argc, char **argv) {
    info_opts o;
    cli_parsed parsed;
    int rc = cli_parse(&info_cli, argc, argv, &o, &parsed);
    if (rc) return rc == CLI_HELP ? 0 : rc;
    if (o.cpu) {
        if (parsed.n_positional) {
            fprintf(stderr, "attn info: --cpu takes no DIR; usage: %s\n", info_cli.synopsis);
            return 2;
        }
        return print_cpu(o.json);
    }
    if (parsed.n_positional != 1) {
        fprintf(stderr, "attn info: which checkpoint? usage: %s\n", info_cli.synopsis);
        return 2;
    }
    const char *dir = parsed.positional[0];
    attn_checkpoint_info in;
    attn_error err;
    attn_error_clear(&err);
    char task[16];
    if (attn_model_task(dir, task, &err) == ATTN_OK && strcmp(task, "lm") != 0)
        return print_finetuned(dir, o.json);
    if (attn_checkpoint_info_read(dir, &in, &err)) {
        fprintf(stderr, "attn info: %s\n", err.msg);
        return 1;
    }
    if (o.json)
        rc = print_json(dir, &in);
    else
        print_text(dir, &in);
    attn_checkpoint_info_free(&in);
    return rc; /* main.c checks that stdout took it all */
}
