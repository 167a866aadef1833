/* attn/finetune.h without PyTorch or data files: a classifier made from a
 * language model learns a toy task (does the text hold token 7?), its
 * frozen tensors stay as they were, its adapters merged into plain weights
 * give its logits, its checkpoint gives the same bits back and names its
 * task, what runs a language model refuses it, and the dry run's memory
 * plan of each trainable set is what a step really writes. The book's numbers are
 * tests/finetune_classify.sh's. */
#define _DEFAULT_SOURCE /* mkdtemp */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "attn/checkpoint.h"
#include "attn/cost.h"
#include "attn/cross_entropy.h"
#include "attn/finetune.h"
#include "attn/gpt_family.h"
#include "attn/memory_plan.h"
#include "attn/optim.h"

#define V 64
#define ROWS 96
#define LEN 10

static attn_gpt base_model(void) {
    const attn_gpt_config cfg = {.vocab_size = V,
                                 .context_length = 16,
                                 .emb_dim = 16,
                                 .n_heads = 2,
                                 .n_layers = 2,
                                 .qkv_bias = 1};
    attn_rng rng;
    attn_rng_seed(&rng, 123);
    attn_gpt m;
    attn_error err;
    cr_assert_eq(attn_gpt_init(&m, &cfg, &rng, &err), ATTN_OK, "%s", err.msg);
    return m;
}

/* Row r: LEN ids, label 1 when token 7 is among them. */
static attn_class_data toy_set(uint32_t seed) {
    attn_class_data d = {.n = ROWS, .max_len = LEN};
    d.ids = malloc(ROWS * LEN * sizeof *d.ids);
    d.labels = malloc(ROWS * sizeof *d.labels);
    uint32_t x = seed;
    for (int r = 0; r < ROWS; r++) {
        d.labels[r] = r % 2;
        for (int t = 0; t < LEN; t++) {
            x = x * 1664525u + 1013904223u;
            int id = (int)((x >> 8) % (V - 1));
            d.ids[r * LEN + t] = id == 7 ? 8 : id;
        }
        if (r % 2) d.ids[r * LEN + (r / 2) % LEN] = 7;
    }
    d.max_label = 1;
    return d;
}

static void losses(void *user, int64_t step, float loss) {
    float *l = user;
    if (step == 0) l[0] = loss;
    l[1] = loss;
}

Test(classify, a_classifier_learns_and_keeps_its_frozen_tensors) {
    attn_gpt base = base_model(), m;
    attn_classify_config c = attn_classify_defaults();
    c.epochs = 40;
    c.lr = 3e-3;
    c.eval_freq = 1000;
    c.trainable = ATTN_TRAIN_ALL;
    attn_error err;
    cr_assert_eq(attn_classifier_from(&m, &base, 2, &c, &err), ATTN_OK, "%s", err.msg);
    cr_expect_eq(attn_gpt_head_width(&m), 2);
    attn_class_data tr = toy_set(1), va = toy_set(2);
    float l[2] = {0};
    const attn_classify_events ev = {l, NULL, NULL, losses, NULL, NULL, NULL};
    attn_classify_result res;
    cr_assert_eq(attn_classify_train(&m, &tr, &va, &c, &ev, &res, &err), ATTN_OK, "%s", err.msg);
    cr_expect_eq(res.steps, 40 * (ROWS / 8));
    cr_expect(l[1] < 0.5f * l[0], "loss %g -> %g", l[0], l[1]);
    cr_expect(res.final_train_acc > 0.9, "train accuracy %g", res.final_train_acc);
    double acc;
    cr_assert_eq(attn_classify_accuracy(&m, &va, 8, 0, &acc, &err), ATTN_OK, "%s", err.msg);
    cr_expect(fabs(acc - res.final_val_acc) < 1e-12, "val accuracy %g vs %g", acc,
              res.final_val_acc);
    attn_gpt_free(&m);
    /* The book's set: block 0 and the embeddings frozen, unchanged. */
    c = attn_classify_defaults();
    c.epochs = 1;
    cr_assert_eq(attn_classifier_from(&m, &base, 2, &c, &err), ATTN_OK, "%s", err.msg);
    const attn_param_list *L = attn_gpt_params(&m);
    float *before = malloc(L->values_numel * sizeof(float));
    memcpy(before, L->values, L->values_numel * sizeof(float));
    cr_assert_eq(attn_classify_train(&m, &tr, &va, &c, NULL, &res, &err), ATTN_OK, "%s", err.msg);
    for (int i = 0; i < L->count; i++) {
        const attn_param *p = &L->items[i];
        const int same = memcmp(before + p->offset, p->data, p->numel * sizeof(float)) == 0;
        const int top = strncmp(p->name, "trf_blocks.1.", 13) == 0 ||
                        strncmp(p->name, "final_norm.", 11) == 0 ||
                        strncmp(p->name, "out_head.", 9) == 0;
        cr_expect(top == p->trainable && (top ? !same : same), "%s", p->name);
    }
    free(before);
    attn_gpt_free(&m);
    attn_class_data_free(&tr);
    attn_class_data_free(&va);
    attn_gpt_free(&base);
}

Test(classify, merged_adapters_and_the_checkpoint_give_the_logits_back) {
    attn_gpt base = base_model(), m, merged, loaded;
    attn_classify_config c = attn_classify_defaults();
    c.lora_rank = 4;
    c.lora_alpha = 8;
    c.lr = 1e-2;
    c.epochs = 3;
    attn_error err;
    cr_assert_eq(attn_classifier_from(&m, &base, 3, &c, &err), ATTN_OK, "%s", err.msg);
    attn_class_data tr = toy_set(3), va = {0};
    attn_classify_result res;
    cr_assert_eq(attn_classify_train(&m, &tr, &va, &c, NULL, &res, &err), ATTN_OK, "%s", err.msg);
    cr_expect(isnan(res.val_acc), "no val set: NaN");
    float a[8 * 3], b[8 * 3], d[8 * 3];
    cr_assert_eq(attn_classify_logits(&m, &tr, 0, 8, a, &err), ATTN_OK, "%s", err.msg);
    cr_assert_eq(attn_gpt_merge_lora(&merged, &m, c.lora_alpha / (float)c.lora_rank, &err), ATTN_OK,
                 "%s", err.msg);
    cr_assert_eq(attn_classify_logits(&merged, &tr, 0, 8, b, &err), ATTN_OK, "%s", err.msg);
    for (int i = 0; i < 24; i++)
        cr_expect(fabsf(a[i] - b[i]) <= 1e-5f, "[%d] LoRA %g, merged %g", i, a[i], b[i]);
    /* the adapters did train: the merged weights are not the base's */
    cr_expect(
        memcmp(
            attn_param_list_find(attn_gpt_params(&merged), "trf_blocks.0.ff.layers.0.weight")->data,
            attn_param_list_find(attn_gpt_params(&base), "trf_blocks.0.ff.layers.0.weight")->data,
            16 * 64 * sizeof(float)) != 0);
    char dir[] = "/tmp/attn-classify-XXXXXX";
    cr_assert(mkdtemp(dir));
    char vocab[V + 1];
    for (int i = 0; i < V; i++)
        vocab[i] = (char)('0' + i);
    attn_tokenizer tok, tok2;
    cr_assert_eq(attn_tokenizer_from_vocab(&tok, vocab, V, &err), ATTN_OK, "%s", err.msg);
    const attn_classifier_info info = {3, LEN, 4, 8.0f, "classify", NULL};
    cr_assert_eq(attn_classifier_save(dir, &m, &tok, &info, &err), ATTN_OK, "%s", err.msg);
    attn_classifier_info got;
    cr_assert_eq(attn_classifier_load(dir, &loaded, &tok2, &got, &err), ATTN_OK, "%s", err.msg);
    cr_expect(got.n_classes == 3 && got.max_len == LEN && got.lora_rank == 4 &&
              got.lora_alpha == 8.0f);
    cr_assert_eq(attn_classify_logits(&loaded, &tr, 0, 8, d, &err), ATTN_OK, "%s", err.msg);
    cr_expect(memcmp(a, d, sizeof a) == 0, "the checkpoint's logits: the same bits");
    char task[16];
    cr_assert_eq(attn_model_task(dir, task, &err), ATTN_OK);
    cr_expect_str_eq(task, "classify");
    attn_gpt lm;
    attn_tokenizer t3;
    cr_expect_eq(attn_gpt_load_checkpoint(dir, &lm, &t3, NULL, &err), ATTN_ERR_INVALID_ARG);
    cr_expect(strstr(err.msg, "task classify") != NULL, "%s", err.msg);
    char path[300];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    remove(path);
    rmdir(dir);
    attn_tokenizer_free(&tok);
    attn_tokenizer_free(&tok2);
    attn_gpt_free(&loaded);
    attn_gpt_free(&merged);
    attn_gpt_free(&m);
    attn_class_data_free(&tr);
    attn_gpt_free(&base);
}

/* AdamW's moment values one step of m really writes (m's moments set to a
 * value no update leaves them at first). */
static double moments_written(attn_gpt *m, const attn_class_data *d) {
    attn_error err;
    attn_adamw opt;
    const attn_adamw_config oc = {0.9, 0.999, 1e-8, 0.1};
    cr_assert_eq(attn_adamw_init(&opt, attn_gpt_params(m), &oc, &err), ATTN_OK, "%s", err.msg);
    const float mark = 12345.0f;
    for (size_t k = 0; k < opt.total; k++)
        opt.m[k] = mark;
    attn_gpt_acts a;
    cr_assert_eq(attn_gpt_acts_init(&a, m, 8, LEN, &err), ATTN_OK, "%s", err.msg);
    int32_t y[8 * LEN];
    for (int i = 0; i < 8 * LEN; i++) /* the last token's label, as the classifier's loss */
        y[i] = i % LEN == LEN - 1 ? d->labels[i / LEN] : ATTN_IGNORE_INDEX;
    float loss;
    attn_gpt_zero_grad(m);
    cr_assert_eq(attn_gpt_forward_backward(m, d->ids, y, 8, LEN, NULL, &a, 1.0f, &loss, &err),
                 ATTN_OK, "%s", err.msg);
    cr_assert_eq(attn_adamw_step(&opt, attn_gpt_params(m), 1e-3, &err), ATTN_OK, "%s", err.msg);
    double n = 0;
    for (size_t k = 0; k < opt.total; k++)
        n += opt.m[k] != mark;
    attn_gpt_acts_free(&a);
    attn_adamw_free(&opt);
    return n;
}

Test(classify, the_dry_runs_memory_is_what_each_trainable_set_writes) {
    attn_gpt base = base_model(), m;
    attn_class_data d = toy_set(5);
    attn_error err;
    /* head, last-block, all, then LoRA: blocks frozen below the backward */
    const attn_trainable_set sets[4] = {ATTN_TRAIN_HEAD, ATTN_TRAIN_LAST_BLOCK, ATTN_TRAIN_ALL,
                                        ATTN_TRAIN_LAST_BLOCK};
    const int frozen[4] = {2, 1, 0, 0};
    attn_mem_plan plan[4];
    double flops[4];
    for (int k = 0; k < 4; k++) {
        attn_classify_config c = attn_classify_defaults();
        c.trainable = sets[k];
        c.lora_rank = k == 3 ? 4 : 0;
        c.lora_alpha = 8;
        cr_assert_eq(attn_classifier_from(&m, &base, 2, &c, &err), ATTN_OK, "%s", err.msg);
        attn_mem_run run = {.mode = ATTN_MEM_TRAIN, .batch = 8, .tokens = LEN};
        attn_mem_run_of_model(&m, &run);
        attn_memory_plan(&m.cfg, &run, &plan[k]);
        flops[k] = attn_gpt_flops_step_frozen(&m.cfg, run.head_width, 8, LEN, run.frozen_blocks);
        const attn_param_list *L = attn_gpt_params(&m);
        cr_expect_eq(run.frozen_blocks, frozen[k], "set %d: %d blocks frozen", k,
                     run.frozen_blocks);
        /* the gradient arena the model holds, and the moments a step writes */
        cr_expect_eq(plan[k].grads, 4.0 * (double)L->grads_numel, "set %d", k);
        const double wrote = moments_written(&m, &d);
        cr_expect_eq(plan[k].optimizer, 8.0 * wrote, "set %d: plan %g B, a step wrote %g values", k,
                     plan[k].optimizer, wrote);
        cr_expect_eq(plan[k].weights, 4.0 * (double)L->values_numel, "set %d", k);
        attn_gpt_free(&m);
    }
    for (int k = 0; k < 2; k++) { /* head < last-block < all */
        cr_expect(plan[k].grads < plan[k + 1].grads && plan[k].optimizer < plan[k + 1].optimizer,
                  "set %d", k);
        cr_expect(plan[k].total < plan[k + 1].total && flops[k] < flops[k + 1], "set %d", k);
    }
    cr_expect(plan[3].optimizer < plan[2].optimizer && plan[3].total < plan[2].total);
    const double full = attn_gpt_flops_step_head(&base.cfg, 2, 8, LEN);
    cr_expect(flops[2] == full && flops[3] == full, "nothing frozen: every block's backward");
    attn_class_data_free(&d);
    attn_gpt_free(&base);
}
