/* Gradient accumulation (--grad-accum, attn/train.h): the step's gradient
 * is the mean over the micro-batches summed in the documented fixed order,
 * it matches one batch of all their windows, the config key round-trips, and
 * an accumulating run resumes bit for bit. References are the library's own
 * single-micro-batch forward/backward (the mean of equal-size batch means is
 * the mean over their union), not stored numbers. The multi-rank side is
 * tests/mpi_train.sh. */
#define _POSIX_C_SOURCE 200809L /* mkdtemp */

#include "io_util.h" /* first: it sets _XOPEN_SOURCE */

#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "attn/train.h"
#include "support/trainer_check.h"
#include "train/trainer.h"

static char *corpus(size_t *n) {
    const char *line = "Now is the winter of our discontent, made glorious summer.\n";
    size_t L = strlen(line), reps = 40;
    char *s = malloc(L * reps + 1);
    for (size_t i = 0; i < reps; i++)
        memcpy(s + i * L, line, L);
    s[L * reps] = '\0';
    *n = L * reps;
    return s;
}

static void small_cfg(attn_gpt_config *m, attn_train_config *t, double drop) {
    attn_train_preset("tiny", m, t, NULL);
    m->context_length = 8;
    m->emb_dim = 16;
    m->n_heads = 2;
    m->n_layers = 1;
    m->drop_rate = drop;
    t->batch_size = 3;
    t->max_steps = 12;
    t->warmup_steps = 2;
    t->eval_iters = 2;
    t->grad_clip = 0; /* leave the gradients as accumulated */
}

/* grad_accum 3: the gradient is ((g0 + g1) + g2) of the three micro-batches'
 * backward passes at loss scale 1/3, exactly (bit for bit). */
Test(train_accum, gradient_is_the_ordered_fold_of_micro_batches) {
    size_t n;
    char *text = corpus(&n);
    attn_gpt_config m;
    attn_train_config t;
    small_cfg(&m, &t, 0.0);
    attn_error err;
    attn_trainer ref, acc;
    cr_assert_eq(attn_trainer_init(&ref, &m, &t, 0, text, n, &err), ATTN_OK, "%s", err.msg);
    t.grad_accum = 3;
    cr_assert_eq(attn_trainer_init(&acc, &m, &t, 0, text, n, &err), ATTN_OK, "%s", err.msg);
    const attn_param_list *pr = attn_gpt_params(&ref.model), *pa = attn_gpt_params(&acc.model);
    const size_t total = attn_param_list_numel(pr);
    float *fold = calloc(total, sizeof *fold);
    float losses[3];
    for (int j = 0; j < 3; j++) {
        cr_assert_eq(attn_sampler_next_batch(&ref.sampler, &ref.train, 3, ref.xb, ref.yb, NULL),
                     ATTN_OK);
        attn_gpt_zero_grad(&ref.model);
        attn_forward_mode mode = {1, &ref.model_rng, t.dropout_stream};
        cr_assert_eq(
            attn_gpt_forward(&ref.model, ref.xb, ref.yb, 3, 8, &mode, &ref.acts, &losses[j], &err),
            ATTN_OK);
        cr_assert_eq(attn_gpt_backward(&ref.model, &ref.acts, 1.0f / 3.0f, &err), ATTN_OK);
        size_t off = 0;
        for (int i = 0; i < pr->count; i++)
            for (size_t k = 0; k < pr->items[i].numel; k++, off++)
                fold[off] = j == 0 ? pr->items[i].grad[k] : fold[off] + pr->items[i].grad[k];
    }
    attn_train_record rec;
    cr_assert_eq(attn_trainer_step(&acc, &rec, &err), ATTN_OK, "%s", err.msg);
    size_t off = 0, differ = 0;
    for (int i = 0; i < pa->count; i++)
        for (size_t k = 0; k < pa->items[i].numel; k++, off++)
            differ += memcmp(&fold[off], &pa->items[i].grad[k], sizeof(float)) != 0;
    cr_expect_eq(differ, 0, "%zu of %zu gradient values differ from the ordered fold", differ,
                 total);
    float mean = (float)(((double)losses[0] + losses[1] + losses[2]) / 3);
    cr_expect(memcmp(&mean, &rec.loss, sizeof mean) == 0, "loss %.9g, expected mean %.9g",
              (double)rec.loss, (double)mean);
    cr_expect_eq(acc.step, 1);
    cr_expect_eq(acc.sampler.cursor, ref.sampler.cursor, "the step took 3 batches of windows");
    free(fold);
    free(text);
    attn_trainer_release(&ref);
    attn_trainer_release(&acc);
}

/* Without dropout, 2 micro-batches of 3 equal one batch of 6 up to rounding. */
Test(train_accum, mean_over_micro_batches_matches_the_whole_batch) {
    size_t n;
    char *text = corpus(&n);
    attn_gpt_config m;
    attn_train_config t;
    small_cfg(&m, &t, 0.0);
    attn_error err;
    attn_trainer whole, acc;
    t.batch_size = 6;
    cr_assert_eq(attn_trainer_init(&whole, &m, &t, 0, text, n, &err), ATTN_OK, "%s", err.msg);
    t.batch_size = 3;
    t.grad_accum = 2;
    cr_assert_eq(attn_trainer_init(&acc, &m, &t, 0, text, n, &err), ATTN_OK, "%s", err.msg);
    attn_train_record rw, ra;
    cr_assert_eq(attn_trainer_step(&whole, &rw, &err), ATTN_OK, "%s", err.msg);
    cr_assert_eq(attn_trainer_step(&acc, &ra, &err), ATTN_OK, "%s", err.msg);
    cr_expect(fabsf(rw.loss - ra.loss) <= 1e-5f * fabsf(rw.loss), "loss %.9g vs %.9g",
              (double)rw.loss, (double)ra.loss);
    cr_expect(fabsf(rw.grad_norm - ra.grad_norm) <= 1e-4f * rw.grad_norm, "norm %.9g vs %.9g",
              (double)rw.grad_norm, (double)ra.grad_norm);
    const attn_param_list *pw = attn_gpt_params(&whole.model), *pa = attn_gpt_params(&acc.model);
    double worst = 0, scale = 0;
    for (int i = 0; i < pw->count; i++)
        for (size_t k = 0; k < pw->items[i].numel; k++) {
            worst = fmax(worst, fabs((double)pw->items[i].grad[k] - pa->items[i].grad[k]));
            scale = fmax(scale, fabs((double)pw->items[i].grad[k]));
        }
    cr_expect(scale > 0 && worst <= 1e-5 * scale, "max |grad diff| %g (max |grad| %g)", worst,
              scale);
    free(text);
    attn_trainer_release(&whole);
    attn_trainer_release(&acc);
}

Test(train_accum, config_key_round_trips_and_is_checked) {
    attn_gpt_config m;
    attn_train_config t;
    attn_error err;
    small_cfg(&m, &t, 0.1);
    cr_expect_eq(t.grad_accum, 1);
    char *js = attn_train_config_to_json(&t);
    cr_expect(strstr(js, "grad_accum") == NULL, "absent when 1 (older checkpoints): %s", js);
    free(js);
    cr_assert_eq(attn_train_config_apply_json(&m, &t, "{\"gradient_accumulation_steps\": 4}", "x",
                                              NULL, &err),
                 ATTN_OK, "%s", err.msg);
    cr_expect_eq(t.grad_accum, 4);
    js = attn_train_config_to_json(&t);
    cr_expect(strstr(js, "\"grad_accum\":4") != NULL, "%s", js);
    free(js);
    cr_expect_neq(attn_train_config_apply_json(&m, &t, "{\"grad_accum\": 0}", "x", NULL, &err),
                  ATTN_OK);
    cr_expect(strstr(err.msg, "grad_accum") != NULL, "%s", err.msg);

    /* Ranks: grad_accum must split evenly. */
    size_t n;
    char *text = corpus(&n);
    attn_trainer tr;
    t.grad_accum = 2;
    cr_assert_eq(attn_trainer_init(&tr, &m, &t, 0, text, n, &err), ATTN_OK, "%s", err.msg);
    attn_dist three;
    memset(&three, 0, sizeof three);
    three.size = 3;
    cr_expect_neq(attn_trainer_set_dist(&tr, &three, &err), ATTN_OK);
    cr_expect(strstr(err.msg, "not a multiple of the 3 ranks") != NULL, "%s", err.msg);
    cr_expect(tr.dist == NULL);
    cr_expect_eq(attn_trainer_step(&tr, NULL, &err), ATTN_OK, "still usable: %s", err.msg);
    free(text);
    attn_trainer_release(&tr);
}

/* With dropout: save after 3 accumulated steps, resume, same next 3 steps. */
Test(train_accum, accumulating_run_resumes_bit_for_bit) {
    size_t n;
    char *text = corpus(&n);
    attn_gpt_config m;
    attn_train_config t;
    small_cfg(&m, &t, 0.1);
    t.grad_accum = 2;
    t.grad_clip = 1.0;
    char dir[] = "/tmp/attn-test-accum-XXXXXX";
    cr_assert(mkdtemp(dir) != NULL);
    attn_error err;
    attn_trainer a, b;
    cr_assert_eq(attn_trainer_init(&a, &m, &t, 0, text, n, &err), ATTN_OK, "%s", err.msg);
    for (int i = 0; i < 3; i++)
        cr_assert_eq(attn_trainer_step(&a, NULL, &err), ATTN_OK, "%s", err.msg);
    cr_assert_eq(attn_trainer_save(&a, dir, &err), ATTN_OK, "%s", err.msg);
    attn_gpt_config m2;
    attn_train_config t2;
    cr_assert_eq(attn_trainer_read_config(dir, &m2, &t2, NULL, &err), ATTN_OK, "%s", err.msg);
    cr_expect_eq(t2.grad_accum, 2, "grad_accum is part of the saved config");
    cr_assert_eq(attn_trainer_init(&b, &m, &t, 0, text, n, &err), ATTN_OK);
    cr_assert_eq(attn_trainer_resume(&b, dir, &err), ATTN_OK, "%s", err.msg);
    expect_same_steps(&a, &b, 3);
    expect_same_params(&a.model, &b.model, "differs");
    /* A different grad_accum is a different run: refused. */
    attn_trainer c;
    t.grad_accum = 4;
    cr_assert_eq(attn_trainer_init(&c, &m, &t, 0, text, n, &err), ATTN_OK);
    cr_expect_neq(attn_trainer_resume(&c, dir, &err), ATTN_OK);
    cr_expect(strstr(err.msg, "grad_accum") != NULL, "%s", err.msg);
    attn_trainer_release(&c);
    tio_rmtree(dir); /* the save is a ckpt-N folder and a latest link */
    free(text);
    attn_trainer_release(&a);
    attn_trainer_release(&b);
}
