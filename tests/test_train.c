/* Trainer library: config JSON (book's and seed 004's keys plus training
 * keys), and save/resume giving the same next steps bit for bit. */
#define _POSIX_C_SOURCE 200809L /* sigaction, clock_gettime, mkdtemp */

#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "attn/checkpoint.h"
#include "attn/cost.h"
#include "attn/fileio.h"
#include "attn/train.h"
#include "attn/train_setup.h"
#include "support/trainer_check.h"
#include "train/trainer.h"

Test(train, config_json_mixes_model_and_training_keys) {
    attn_gpt_config m;
    attn_train_config t;
    cr_assert_eq(attn_train_preset("nanogpt-cpu", &m, &t, NULL), ATTN_OK);
    cr_expect_eq(t.batch_size, 12);
    cr_expect_eq(t.max_steps, 2000);
    cr_expect_eq(t.warmup_steps, 100);
    cr_expect(t.learning_rate == 1e-3 && t.min_lr == 1e-4 && t.beta2 == 0.99 &&
              t.weight_decay == 0.1 && t.grad_clip == 1.0);
    cr_expect(t.eval_interval == 250 && t.eval_iters == 20);
    int vocab_given = 0;
    const char *js = "{\"embedding_dim\": 64, \"heads_num\": 4, \"layers_num\": 2, "
                     "\"context_size\": 32, \"dropout_rate\": 0.1, \"use_bias\": true, "
                     "\"head_size\": 16, \"batch_size\": 3, \"max_iters\": 7, \"lr\": 0.01}";
    cr_assert_eq(attn_train_config_apply_json(&m, &t, js, "cfg", &vocab_given, NULL), ATTN_OK);
    cr_expect(m.emb_dim == 64 && m.n_heads == 4 && m.n_layers == 2 && m.context_length == 32 &&
              m.qkv_bias == 1 && fabs(m.drop_rate - 0.1) < 1e-12);
    cr_expect(t.batch_size == 3 && t.max_steps == 7 && t.learning_rate == 0.01);
    cr_expect_eq(vocab_given, 0);
    cr_expect_eq(
        attn_train_config_apply_json(&m, &t, "{\"vocab_size\": 65}", "cfg", &vocab_given, NULL),
        ATTN_OK);
    cr_expect_eq(vocab_given, 1);
}

/* The training recipes are a table beside the model presets: every model
 * preset must have one, and an unknown name is refused by both. */
Test(train, every_model_preset_has_a_training_recipe) {
    const char *const *names = attn_gpt_preset_names();
    int count = 0;
    for (; names[count]; count++) {
        attn_gpt_config m;
        attn_train_config t;
        attn_error err;
        cr_assert_eq(attn_train_preset(names[count], &m, &t, &err), ATTN_OK, "%s: %s", names[count],
                     err.msg);
        /* book-ch05 holds its rate (min_lr = learning_rate, as the book's AdamW) */
        cr_expect(t.batch_size > 0 && t.max_steps > 0 && t.learning_rate >= t.min_lr &&
                      t.learning_rate > 0,
                  "%s: recipe looks unset", names[count]);
    }
    cr_expect_eq(count, 10);
    /* The GPT-2 presets: GPT-2 (q/k/v biases, tied, GPT-2's init) at the
     * book's sizes; book-ch05 the book's GPT_CONFIG_124M. GPT-2's tokenizer. */
    static const struct {
        const char *name;
        int ctx, emb, heads, layers, gpt2;
    } gpt2[] = {{"gpt2-124m", 1024, 768, 12, 12, 1},
                {"gpt2-medium", 1024, 1024, 16, 24, 1},
                {"gpt2-large", 1024, 1280, 20, 36, 1},
                {"gpt2-xl", 1024, 1600, 25, 48, 1},
                {"book-ch05", 256, 768, 12, 12, 0}};
    for (size_t i = 0; i < sizeof gpt2 / sizeof gpt2[0]; i++) {
        attn_gpt_config g;
        attn_train_config r;
        cr_assert_eq(attn_train_preset(gpt2[i].name, &g, &r, NULL), ATTN_OK);
        const int is_gpt2 = g.qkv_bias && g.tie_weights && g.init == ATTN_GPT_INIT_GPT2;
        const int is_book = !g.qkv_bias && !g.tie_weights && g.init == ATTN_GPT_INIT_BOOK;
        cr_expect(g.vocab_size == 50257 && g.context_length == gpt2[i].ctx &&
                      g.emb_dim == gpt2[i].emb && g.n_heads == gpt2[i].heads &&
                      g.n_layers == gpt2[i].layers && g.drop_rate == 0.1 &&
                      (gpt2[i].gpt2 ? is_gpt2 : is_book) && r.tokenizer == ATTN_TOKENIZER_GPT2,
                  "%s", gpt2[i].name);
    }
    attn_gpt_config g;
    attn_train_config r;
    attn_train_preset("book-ch05", &g, &r, NULL); /* gpt_train.py's recipe */
    cr_expect(r.learning_rate == 5e-4 && r.min_lr == 5e-4 && r.weight_decay == 0.1 &&
              r.batch_size == 2 && r.max_steps == 90 && r.grad_clip == 0 && r.beta2 == 0.999);
    attn_train_preset("tiny", &g, &r, NULL);
    cr_expect_eq(r.tokenizer, ATTN_TOKENIZER_CHAR);
    attn_gpt_config m;
    attn_train_config t;
    cr_expect_neq(attn_train_preset("no-such-preset", &m, &t, NULL), ATTN_OK);
    /* speedrun: a time-budgeted WSD recipe on a variant model (issue 21). */
    cr_assert_eq(attn_train_preset("speedrun", &m, &t, NULL), ATTN_OK);
    cr_expect(t.time_budget == 600 && t.lr_schedule == ATTN_LR_WSD);
    cr_expect(m.norm == ATTN_NORM_RMSNORM && m.act == ATTN_ACT_SWIGLU);
    cr_expect_eq(attn_train_config_validate(&t, NULL), ATTN_OK);
    /* Its figures are bf16's, so it asks for bf16; the others are fp32. */
    cr_expect_eq(attn_train_preset_precision("speedrun"), ATTN_PRECISION_BF16);
    cr_expect_eq(attn_train_preset_precision("tiny"), ATTN_PRECISION_FP32);
    cr_expect_eq(attn_train_preset_precision("nanogpt-cpu"), ATTN_PRECISION_FP32);
    cr_expect_eq(attn_train_preset_precision("no-such-preset"), ATTN_PRECISION_FP32);
}

Test(train, config_json_errors_name_the_key) {
    attn_gpt_config m;
    attn_train_config t;
    attn_train_preset("tiny", &m, &t, NULL);
    attn_error err;
    cr_expect_eq(attn_train_config_apply_json(&m, &t, "{\"n_head\": 4}", "c.json", NULL, &err),
                 ATTN_ERR_NOT_FOUND);
    cr_expect(strstr(err.msg, "c.json: unknown config key 'n_head'") != NULL, "%s", err.msg);
    cr_expect_eq(attn_train_config_apply_json(&m, &t, "{\"batch_size\": 2.5}", "c", NULL, &err),
                 ATTN_ERR_INVALID_ARG);
    cr_expect(strstr(err.msg, "batch_size") != NULL, "%s", err.msg);
    cr_expect_eq(attn_train_config_apply_json(&m, &t, "{\"head_size\": 10}", "c", NULL, &err),
                 ATTN_ERR_INVALID_ARG);
    cr_expect_eq(attn_train_config_apply_json(&m, &t, "[1]", "c", NULL, &err), ATTN_ERR_FORMAT);
    t.batch_size = 0;
    cr_expect_eq(attn_train_config_validate(&t, &err), ATTN_ERR_INVALID_ARG);
}

static char *corpus(size_t *n) {
    const char *line = "To be, or not to be: that is the question.\n";
    size_t L = strlen(line), reps = 40;
    char *s = malloc(L * reps + 1);
    for (size_t i = 0; i < reps; i++)
        memcpy(s + i * L, line, L);
    s[L * reps] = '\0';
    *n = L * reps;
    return s;
}

static void small_cfg(attn_gpt_config *m, attn_train_config *t) {
    attn_train_preset("tiny", m, t, NULL);
    m->context_length = 8;
    m->emb_dim = 16;
    m->n_heads = 2;
    m->n_layers = 1;
    m->drop_rate = 0.1;
    t->batch_size = 3;
    t->max_steps = 12;
    t->warmup_steps = 2;
    t->eval_iters = 2;
}

/* Train 4 steps, save, train 4 more; a second trainer resumed from the save
 * must take the very same 4 steps (losses and weights bit-identical). */
Test(train, save_and_resume_continue_bit_for_bit) {
    size_t n;
    char *text = corpus(&n);
    attn_gpt_config m;
    attn_train_config t;
    small_cfg(&m, &t);
    char dir[] = "/tmp/attn-test-train-XXXXXX";
    cr_assert(mkdtemp(dir) != NULL);
    attn_error err;
    attn_trainer a, b;
    cr_assert_eq(attn_trainer_init(&a, &m, &t, 0, text, n, &err), ATTN_OK, "%s", err.msg);
    cr_expect_eq(a.mcfg.vocab_size, 18); /* len(set(line)) */
    for (int i = 0; i < 4; i++)
        cr_assert_eq(attn_trainer_step(&a, NULL, &err), ATTN_OK, "%s", err.msg);
    cr_assert_eq(attn_trainer_evaluate(&a, NULL, &err), ATTN_OK);
    cr_assert_eq(attn_trainer_save(&a, dir, &err), ATTN_OK, "%s", err.msg);
    cr_assert_eq(attn_trainer_init(&b, &m, &t, 0, text, n, &err), ATTN_OK);
    cr_assert_eq(attn_trainer_resume(&b, dir, &err), ATTN_OK, "%s", err.msg);
    cr_expect_eq(b.step, 4);
    cr_expect_eq(b.n_hist, 4);
    cr_expect_eq(b.n_evals, 1);
    expect_same_steps(&a, &b, 4);
    expect_same_params(&a.model, &b.model, "differs");
    /* A different config is refused, naming the key. */
    attn_trainer c;
    t.weight_decay = 0.2;
    cr_assert_eq(attn_trainer_init(&c, &m, &t, 0, text, n, &err), ATTN_OK);
    cr_expect_eq(attn_trainer_resume(&c, dir, &err), ATTN_ERR_INVALID_ARG);
    cr_expect(strstr(err.msg, "weight_decay") != NULL, "%s", err.msg);
    attn_trainer_release(&c);
    /* The model file loads on its own, with its vocabulary and step. */
    attn_gpt g;
    attn_tokenizer tok;
    int64_t step = 0;
    cr_assert_eq(attn_gpt_load_checkpoint(dir, &g, &tok, &step, &err), ATTN_OK, "%s", err.msg);
    cr_expect_eq(step, 4);
    cr_expect_eq(tok.vocab_size, 18);
    attn_gpt_free(&g);
    attn_tokenizer_free(&tok);
    cr_assert_eq(attn_trainer_write_loss_files(&a, dir, &err), ATTN_OK);
    attn_trainer_release(&a);
    attn_trainer_release(&b);
    free(text);
    const char *files[] = {ATTN_CKPT_MODEL, ATTN_CKPT_STATE, "loss.csv", "loss.svg"};
    char p[512];
    for (int i = 0; i < 4; i++) {
        snprintf(p, sizeof p, "%s/%s", dir, files[i]);
        cr_expect_eq(access(p, R_OK), 0, "%s missing", files[i]);
    }
    remove_tree(dir);
}

/* Without --checkpoint-interval, the whole state is saved at step 0 and the
 * end, and at an evaluation only when the last whole save is
 * ckpt_auto_s old: 0 here (every evaluation), then the default (none
 * between: this run takes far less than 10 minutes). The weights do not
 * depend on it. */
Test(train, whole_saves_between_the_ends_follow_the_clock) {
    size_t n;
    char *text = corpus(&n);
    attn_gpt_config m;
    attn_train_config t;
    small_cfg(&m, &t);
    t.max_steps = 6;
    t.eval_interval = 2;
    attn_error err;
    attn_train_result res[2];
    attn_trainer tr[2];
    for (int i = 0; i < 2; i++) {
        char dir[] = "/tmp/attn-test-auto-XXXXXX";
        cr_assert(mkdtemp(dir) != NULL);
        cr_assert_eq(attn_trainer_init(&tr[i], &m, &t, 0, text, n, &err), ATTN_OK, "%s", err.msg);
        cr_expect_eq(tr[i].ckpt_auto_s, ATTN_TRAIN_CKPT_AUTO_S);
        if (i == 0) tr[i].ckpt_auto_s = 0.0;
        cr_assert_eq(attn_trainer_run(&tr[i], dir, 0, NULL, &res[i], &err), ATTN_OK, "%s", err.msg);
        int64_t saved = -1;
        cr_expect(attn_ckpt_exists(dir, &saved) && saved == 6);
        remove_tree(dir);
    }
    cr_expect_eq(res[0].checkpoints, 4, "steps 0, 2, 4 and 6: %d", res[0].checkpoints);
    cr_expect_eq(res[1].checkpoints, 2, "steps 0 and 6: %d", res[1].checkpoints);
    expect_same_params(&tr[0].model, &tr[1].model, "the saves changed the weights");
    attn_trainer_release(&tr[0]);
    attn_trainer_release(&tr[1]);
    free(text);
}

/* attn_trainer_run owns the rhythm: a stop request after step 7 saves and
 * returns; a resumed run finishes the schedule; both end bit for bit where
 * one uninterrupted run does, with evaluations at 0, 5, 10 and 12. */
typedef struct {
    int64_t stop_at;
    int n_steps, n_evals;
    int64_t eval_steps[8];
} run_probe;

static int probe_stop(void *u, const attn_trainer *tr) {
    const run_probe *p = u;
    return p->stop_at > 0 && tr->step >= p->stop_at;
}
static void probe_step(void *u, const attn_trainer *tr, const attn_train_progress *pr) {
    run_probe *p = u;
    p->n_steps++;
    cr_expect_eq(pr->rec.step, tr->step);
    cr_expect(pr->train_s >= 0 && pr->eta_s >= 0);
}
static void probe_eval(void *u, const attn_trainer *tr, const attn_eval_record *ev) {
    run_probe *p = u;
    (void)tr;
    if (p->n_evals < 8) p->eval_steps[p->n_evals] = ev->step;
    p->n_evals++;
}

Test(train, run_stops_on_request_saves_and_resumes_bit_for_bit) {
    size_t n;
    char *text = corpus(&n);
    attn_gpt_config m;
    attn_train_config t;
    small_cfg(&m, &t);
    t.eval_interval = 5;
    char dir[] = "/tmp/attn-test-run-XXXXXX";
    cr_assert(mkdtemp(dir) != NULL);
    attn_error err;
    attn_trainer a, b, whole;
    run_probe pa = {.stop_at = 7}, pb = {0}, pw = {0};
    attn_trainer_events ea = {&pa, probe_stop, probe_step, probe_eval, NULL, NULL};
    attn_trainer_events eb = {&pb, probe_stop, probe_step, probe_eval, NULL, NULL};
    attn_trainer_events ew = {&pw, probe_stop, probe_step, probe_eval, NULL, NULL};
    attn_train_result res;
    cr_assert_eq(attn_trainer_init(&a, &m, &t, 0, text, n, &err), ATTN_OK, "%s", err.msg);
    cr_assert_eq(attn_trainer_run(&a, dir, 0, &ea, &res, &err), ATTN_OK, "%s", err.msg);
    cr_expect_eq(res.stopped, 1);
    cr_expect_eq(a.step, 7);
    cr_expect_eq(pa.n_steps, 7);
    cr_expect_eq(pa.n_evals, 2);
    cr_expect(pa.eval_steps[0] == 0 && pa.eval_steps[1] == 5);
    int64_t saved = -1;
    cr_assert(attn_ckpt_exists(dir, &saved));
    cr_expect_eq(saved, 7, "the stop saved step %lld", (long long)saved);
    cr_assert_eq(attn_trainer_init(&b, &m, &t, 0, text, n, &err), ATTN_OK);
    cr_assert_eq(attn_trainer_resume(&b, dir, &err), ATTN_OK, "%s", err.msg);
    cr_assert_eq(attn_trainer_run(&b, dir, 1, &eb, &res, &err), ATTN_OK, "%s", err.msg);
    cr_expect_eq(res.stopped, 0);
    cr_expect_eq(res.start_step, 7);
    cr_expect_eq(b.step, 12);
    cr_expect_eq(pb.n_steps, 5);
    cr_expect(pb.n_evals == 2 && pb.eval_steps[0] == 10 && pb.eval_steps[1] == 12);
    cr_expect(attn_ckpt_exists(dir, &saved) && saved == 12);
    cr_assert_eq(attn_trainer_init(&whole, &m, &t, 0, text, n, &err), ATTN_OK);
    cr_assert_eq(attn_trainer_run(&whole, NULL, 0, &ew, &res, &err), ATTN_OK, "%s", err.msg);
    cr_expect(pw.n_steps == 12 && pw.n_evals == 4);
    const attn_param_list *pb_ = attn_gpt_params(&b.model), *pw_ = attn_gpt_params(&whole.model);
    for (int i = 0; i < pb_->count; i++)
        cr_expect(memcmp(pb_->items[i].data, pw_->items[i].data,
                         pb_->items[i].numel * sizeof(float)) == 0,
                  "%s differs", pb_->items[i].name);
    /* loss.svg: the 4 evaluations as 8 points (train, val) and the final
     * one's exact val loss as a ninth, no line joining them, and the lr
     * curve. */
    cr_assert_eq(attn_trainer_write_loss_files(&whole, dir, &err), ATTN_OK, "%s", err.msg);
    char svgp[512], *svg = NULL;
    size_t svgn = 0;
    snprintf(svgp, sizeof svgp, "%s/loss.svg", dir);
    cr_assert_eq(attn_file_read_all(svgp, 0, (void **)&svg, &svgn, &err), ATTN_OK);
    int points = 0, lr_lines = 0;
    for (const char *q = svg; (q = strstr(q, "<circle class=\"eval\"")); q++)
        points++;
    for (const char *q = svg; (q = strstr(q, "<polyline class=\"lr\"")); q++)
        lr_lines++;
    cr_expect_eq(points, 9);
    cr_expect_eq(lr_lines, 1);
    cr_expect(strstr(svg, "stroke-width=\"2\" points") == NULL, "eval points joined by a line");
    free(svg);
    attn_trainer_release(&a);
    attn_trainer_release(&b);
    attn_trainer_release(&whole);
    free(text);
    remove_tree(dir);
}

/* An evaluation watched through on_eval_progress: stop_at_done > 0 asks
 * the run to stop once that many of its forwards are done (polled between
 * layers, so inside a forward). */
typedef struct {
    double stop_at_done;
    int64_t stop_step;
    int calls, went_back;
    double last_done;
} eval_probe;

static int eval_probe_stop(void *u, const attn_trainer *tr) {
    const eval_probe *p = u;
    (void)tr;
    return p->stop_at_done > 0 && p->last_done >= p->stop_at_done;
}
static void eval_probe_progress(void *u, const attn_trainer *tr, const attn_eval_progress *e) {
    eval_probe *p = u;
    (void)tr;
    if (e->step != p->stop_step) return;
    if (p->calls++ && e->done < p->last_done) p->went_back = 1;
    cr_expect(e->done >= 0 && e->done <= e->total && e->batch <= e->batches);
    p->last_done = e->done;
}

/* A stop during an evaluation lands between two layers of a forward: the
 * evaluation is abandoned (no record, its generator's draws undone), the
 * run saves and reports where it stood; a resume runs it again, and the
 * stopped and resumed run equals the unbroken one. */
Test(train, a_stop_inside_an_evaluation_abandons_it_and_a_resume_redoes_it) {
    size_t n;
    char *text = corpus(&n);
    attn_gpt_config m;
    attn_train_config t;
    small_cfg(&m, &t);
    m.n_layers = 3;
    t.max_steps = 4;
    t.eval_interval = 2;
    char dir[] = "/tmp/attn-test-evalstop-XXXXXX";
    cr_assert(mkdtemp(dir) != NULL);
    attn_error err;
    attn_trainer a, b, whole;
    eval_probe pa = {.stop_at_done = 1.5, .stop_step = 2}, pw = {.stop_step = 2};
    attn_trainer_events ea = {
        .user = &pa, .should_stop = eval_probe_stop, .on_eval_progress = eval_probe_progress};
    attn_trainer_events ew = {.user = &pw, .on_eval_progress = eval_probe_progress};
    attn_train_result res;
    cr_assert_eq(attn_trainer_init(&a, &m, &t, 0, text, n, &err), ATTN_OK, "%s", err.msg);
    cr_assert_eq(attn_trainer_run(&a, dir, 0, &ea, &res, &err), ATTN_OK, "%s", err.msg);
    cr_expect(res.stopped && res.eval_stopped);
    cr_expect_eq(a.step, 2);
    cr_expect_eq(a.n_evals, 1, "the abandoned evaluation is not recorded");
    cr_expect_eq(res.eval_at.step, 2);
    cr_expect_eq(res.eval_at.part, ATTN_EVAL_PART_TRAIN);
    cr_expect_eq(res.eval_at.batch, 1, "stopped in the second forward");
    cr_expect(res.eval_at.done >= 1.5 && res.eval_at.done < 2, "between layers: %g",
              res.eval_at.done);
    cr_expect(!pa.went_back);
    int64_t saved = -1;
    cr_expect(attn_ckpt_exists(dir, &saved) && saved == 2);
    cr_assert_eq(attn_trainer_init(&b, &m, &t, 0, text, n, &err), ATTN_OK);
    cr_assert_eq(attn_trainer_resume(&b, dir, &err), ATTN_OK, "%s", err.msg);
    cr_assert_eq(attn_trainer_run(&b, dir, 1, NULL, &res, &err), ATTN_OK, "%s", err.msg);
    cr_expect(!res.stopped && !res.eval_stopped);
    cr_assert_eq(attn_trainer_init(&whole, &m, &t, 0, text, n, &err), ATTN_OK);
    cr_assert_eq(attn_trainer_run(&whole, NULL, 0, &ew, &res, &err), ATTN_OK, "%s", err.msg);
    cr_expect(pw.calls > 0 && !pw.went_back && pw.last_done == 4, "the step-2 evaluation: %g",
              pw.last_done);
    cr_assert_eq(b.n_evals, whole.n_evals);
    for (size_t i = 0; i < b.n_evals; i++) {
        const attn_eval_record *x = &b.evals[i], *y = &whole.evals[i];
        cr_expect(x->step == y->step && memcmp(&x->train_loss, &y->train_loss, 4) == 0 &&
                      memcmp(&x->val_loss, &y->val_loss, 4) == 0 &&
                      memcmp(&x->val_exact, &y->val_exact, 4) == 0,
                  "evaluation %zu differs", i);
    }
    const attn_param_list *pb = attn_gpt_params(&b.model), *pw_ = attn_gpt_params(&whole.model);
    for (int i = 0; i < pb->count; i++)
        cr_expect(
            memcmp(pb->items[i].data, pw_->items[i].data, pb->items[i].numel * sizeof(float)) == 0,
            "%s differs", pb->items[i].name);
    attn_trainer_release(&a);
    attn_trainer_release(&b);
    attn_trainer_release(&whole);
    free(text);
    remove_tree(dir);
}

/* The plan's parameter count is the model's own, from the config alone. */
Test(train, plan_counts_the_parameters_of_the_model) {
    size_t n;
    char *text = corpus(&n);
    attn_gpt_config m;
    attn_train_config t;
    small_cfg(&m, &t);
    for (int bias = 0; bias < 2; bias++) {
        m.qkv_bias = bias;
        attn_trainer a;
        attn_error err;
        cr_assert_eq(attn_trainer_init(&a, &m, &t, 0, text, n, &err), ATTN_OK, "%s", err.msg);
        attn_train_plan p;
        attn_train_plan_of(&a.mcfg, &a.tcfg, &p);
        cr_expect_eq(p.n_params, attn_gpt_num_params(&a.model), "qkv_bias %d", bias);
        cr_expect(p.ckpt_bytes == 12.0 * (double)p.n_params);
        /* attn/cost.h's count (test_cost checks the rule itself) */
        cr_expect(p.tokens_per_step == 3.0 * 8 &&
                  p.flops_per_step == attn_gpt_flops_step(&a.mcfg, t.batch_size, 8));
        attn_trainer_release(&a);
    }
    free(text);
}

/* Fine-tuning: a fresh trainer takes a saved model's weights exactly; a
 * model of another shape is refused, naming both. */
Test(train, init_from_copies_the_weights_and_checks_the_shape) {
    size_t n;
    char *text = corpus(&n);
    attn_gpt_config m;
    attn_train_config t;
    small_cfg(&m, &t);
    char dir[] = "/tmp/attn-test-initfrom-XXXXXX";
    cr_assert(mkdtemp(dir) != NULL);
    attn_error err;
    attn_trainer a, b, c;
    cr_assert_eq(attn_trainer_init(&a, &m, &t, 0, text, n, &err), ATTN_OK, "%s", err.msg);
    for (int i = 0; i < 3; i++)
        cr_assert_eq(attn_trainer_step(&a, NULL, &err), ATTN_OK, "%s", err.msg);
    cr_assert_eq(attn_trainer_save(&a, dir, &err), ATTN_OK, "%s", err.msg);
    t.seed = 99; /* other initial weights, same shape */
    cr_assert_eq(attn_trainer_init(&b, &m, &t, 0, text, n, &err), ATTN_OK);
    cr_assert_eq(attn_trainer_init_from(&b, dir, &err), ATTN_OK, "%s", err.msg);
    cr_expect_eq(b.step, 0);
    expect_same_params(&a.model, &b.model, "not copied");
    m.n_layers = 2;
    cr_assert_eq(attn_trainer_init(&c, &m, &t, 0, text, n, &err), ATTN_OK);
    cr_expect_eq(attn_trainer_init_from(&c, dir, &err), ATTN_ERR_INVALID_ARG);
    cr_expect(strstr(err.msg, "1 layers") && strstr(err.msg, "2 layers"), "%s", err.msg);
    attn_trainer_release(&a);
    attn_trainer_release(&b);
    attn_trainer_release(&c);
    free(text);
    remove_tree(dir);
}

/* A fixed vocabulary (fine-tuning on part of a corpus): the trainer keeps
 * it whole, ids and all, though the text uses only some of its characters;
 * a character it lacks is refused naming it, its line and its column. */
Test(train, init_vocab_keeps_a_larger_vocabulary) {
    size_t n;
    char *text = corpus(&n); /* 18 characters: "\n ,.:?T" and lower case */
    attn_gpt_config m;
    attn_train_config t;
    small_cfg(&m, &t);
    const char *vocab = "\n !,.:?ATZabehinoqrstuz"; /* sorted, 5 characters more */
    attn_tokenizer want;
    cr_assert_eq(attn_tokenizer_from_vocab(&want, vocab, strlen(vocab), NULL), ATTN_OK);
    attn_error err;
    attn_trainer a;
    cr_assert_eq(attn_trainer_init_vocab(&a, &m, &t, 0, vocab, text, n, &err), ATTN_OK, "%s",
                 err.msg);
    cr_expect_eq(a.mcfg.vocab_size, 23);
    cr_expect_eq(a.tok.vocab_size, 23);
    for (size_t i = 0; i < 20; i++) {
        const uint32_t c = (unsigned char)text[i];
        cr_expect_eq(a.ids[i], attn_tokenizer_id(&want, c), "id of '%c'", (char)c);
    }
    attn_trainer_release(&a);
    m.vocab_size = 18; /* stated, and not the vocabulary's */
    cr_expect_eq(attn_trainer_init_vocab(&a, &m, &t, 1, vocab, text, n, &err),
                 ATTN_ERR_INVALID_ARG);
    cr_expect(strstr(err.msg, "vocab_size 18") != NULL, "%s", err.msg);
    char *bad = malloc(n + 1);
    memcpy(bad, text, n + 1);
    bad[43 + 3] = 'W'; /* 43 characters a line: line 2, column 4 */
    cr_expect_eq(attn_trainer_init_vocab(&a, &m, &t, 0, vocab, bad, n, &err), ATTN_ERR_INVALID_ARG);
    cr_expect(strstr(err.msg, "'W' (U+0057) at position 46 (line 2, column 4, byte 46)") != NULL,
              "%s", err.msg);
    cr_expect_eq(a.ids, NULL, "nothing left allocated");
    attn_tokenizer_free(&want);
    free(bad);
    free(text);
}

/* The training keys are one table (attn_train_key_at): every row's JSON
 * name, alias and flag are unique and found, its range is enforced by the
 * setter, the JSON reader and validate alike, and the JSON writer writes
 * every key so that reading it back gives the same config. */
Test(train, key_table_drives_json_ranges_and_flags) {
    attn_gpt_config m;
    attn_train_config t, back;
    cr_assert_eq(attn_train_preset("nanogpt-cpu", &m, &t, NULL), ATTN_OK);
    t.grad_accum = 3; /* written only when > 1 */
    /* The later keys are written only when not at their defaults. */
    t.eval_mode = ATTN_EVAL_EXACT;
    t.time_budget = 600;
    t.lr_schedule = ATTN_LR_WSD;
    t.tokenizer = ATTN_TOKENIZER_GPT2;
    t.loader = ATTN_LOADER_BOOK;
    t.final_eval = ATTN_FINAL_EXACT;
    char *js = attn_train_config_to_json(&t);
    cr_assert(js);
    memset(&back, 0, sizeof back);
    cr_assert_eq(attn_train_config_apply_json(&m, &back, js, "rt", NULL, NULL), ATTN_OK, "%s", js);
    cr_expect_eq(memcmp(&t, &back, sizeof t), 0, "JSON round trip: %s", js);
    for (int i = 0; i < ATTN_TRAIN_KEY_COUNT; i++) {
        const attn_train_key *k = attn_train_key_at(i);
        cr_assert(k && k->name && k->flag && k->help, "row %d", i);
        cr_expect_eq(attn_train_key_find(k->name), i, "%s", k->name);
        if (k->alias) cr_expect_eq(attn_train_key_find(k->alias), i, "%s", k->alias);
        cr_expect(strstr(js, k->name) != NULL, "%s missing from %s", k->name, js);
        for (int j = 0; j < i; j++)
            cr_expect(strcmp(k->flag, attn_train_key_at(j)->flag) != 0, "flag %s twice", k->flag);
        if (k->type == ATTN_TKEY_CHOICE) continue;
        /* Just below the range is refused everywhere, with the range named. */
        char what[160], text[200];
        attn_train_key_describe(k, what, sizeof what);
        attn_train_value below = {(int64_t)k->lo - 1, k->lo_open ? k->lo : k->lo - 0.5, NULL};
        attn_train_config c = t;
        attn_error err;
        cr_expect_eq(attn_train_config_set(&c, i, below, &err), ATTN_ERR_INVALID_ARG, "%s",
                     k->name);
        cr_expect(strstr(err.msg, what) != NULL, "%s: '%s' lacks '%s'", k->name, err.msg, what);
        snprintf(text, sizeof text, "{\"%s\": %.17g}", k->name,
                 k->type == ATTN_TKEY_INT ? (double)below.i : below.d);
        cr_expect_eq(attn_train_config_apply_json(&m, &c, text, "c", NULL, &err),
                     ATTN_ERR_INVALID_ARG, "%s", text);
        cr_expect(strstr(err.msg, what) != NULL, "%s: '%s'", text, err.msg);
        attn_train_value at = {(int64_t)k->lo, k->lo, NULL};
        if (!k->lo_open && strcmp(k->name, "min_lr") != 0) {
            c = t;
            cr_expect_eq(attn_train_config_set(&c, i, at, &err), ATTN_OK, "%s: %s", k->name,
                         err.msg);
            cr_expect_eq(attn_train_config_validate(&c, &err), ATTN_OK, "%s: %s", k->name, err.msg);
        }
    }
    free(js);
    attn_train_value inf = {0, INFINITY, NULL};
    cr_expect_eq(attn_train_config_set(&t, attn_train_key_find("lr"), inf, NULL),
                 ATTN_ERR_INVALID_ARG);
}

/* attn_train_resolve: preset, then the keys; --lr's tenth for min_lr; the
 * rank count as the default accumulation; bad requests flagged as such. */
Test(train, resolve_applies_preset_then_keys) {
    attn_train_request rq;
    attn_train_setup su;
    attn_error err;
    attn_train_request_init(&rq);
    rq.preset = "nanogpt-cpu";
    rq.ranks = 2;
    attn_train_request_set(&rq, attn_train_key_find("learning_rate"),
                           (attn_train_value){0, 0.02, NULL});
    attn_train_request_set(&rq, attn_train_key_find("batch_size"), (attn_train_value){5, 5, NULL});
    cr_assert_eq(attn_train_resolve(&rq, &su, &err), ATTN_OK, "%s", err.msg);
    cr_expect(su.train.learning_rate == 0.02 && su.train.min_lr == 0.002);
    cr_expect(su.train.batch_size == 5 && su.train.max_steps == 2000 && su.train.grad_accum == 2);
    cr_expect(su.model.emb_dim == 128 && su.model.vocab_size == 1, "the corpus sets vocab_size");
    cr_expect_str_eq(su.out, "runs/nanogpt-cpu");
    attn_train_request_set(&rq, attn_train_key_find("min_lr"), (attn_train_value){0, 0.01, NULL});
    cr_assert_eq(attn_train_resolve(&rq, &su, &err), ATTN_OK, "%s", err.msg);
    cr_expect(su.train.min_lr == 0.01, "an explicit min_lr stays");
    attn_train_request_set(&rq, attn_train_key_find("min_lr"), (attn_train_value){0, 0.05, NULL});
    cr_expect_eq(attn_train_resolve(&rq, &su, &err), ATTN_ERR_INVALID_ARG);
    cr_expect(su.request_error && strstr(err.msg, "min_lr") != NULL, "%s", err.msg);
    rq.preset = "nope";
    cr_expect_eq(attn_train_resolve(&rq, &su, &err), ATTN_ERR_NOT_FOUND);
    cr_expect(su.request_error && strstr(err.msg, "tiny") != NULL, "%s", err.msg);
    attn_train_request_init(&rq);
    rq.resume = 1;
    rq.out = "/nonexistent/run";
    cr_expect_neq(attn_train_resolve(&rq, &su, &err), ATTN_OK);
    cr_expect(!su.request_error && strstr(err.msg, "cannot resume") != NULL, "%s", err.msg);
    rq.force = 1;
    cr_expect_eq(attn_train_resolve(&rq, &su, &err), ATTN_ERR_INVALID_ARG);
    cr_expect(su.request_error);
}

/* attn_gpt_loss_windows is its definition: the mean over every prediction
 * of the sequence once, each window of context_length (the last shorter)
 * run on its own. The reference runs each window alone at its own length
 * ((1, len) workspaces); the function, B windows at a time with padding,
 * must agree whatever B, for n - 1 a multiple of T and not. */
Test(train, loss_windows_is_every_token_once_in_context_windows) {
    attn_gpt_config c = {.vocab_size = 11,
                         .context_length = 8,
                         .emb_dim = 12,
                         .n_heads = 3,
                         .n_layers = 2,
                         .drop_rate = 0.0,
                         .qkv_bias = 1};
    attn_rng rng;
    attn_rng_seed(&rng, 5);
    attn_gpt m;
    attn_error err;
    cr_assert_eq(attn_gpt_init(&m, &c, &rng, &err), ATTN_OK, "%s", err.msg);
    int32_t ids[60];
    for (int i = 0; i < 60; i++)
        ids[i] = (int32_t)((i * 7 + i / 5) % 11);
    const size_t lens[3] = {33, 41, 2}; /* n - 1 = 32 (4 windows), 40 (5), 1 (one short) */
    for (int li = 0; li < 3; li++) {
        const size_t n = lens[li], T = 8;
        double ref = 0;
        for (size_t s = 0; s < n - 1; s += T) {
            const int len = (int)(n - 1 - s < T ? n - 1 - s : T);
            attn_gpt_acts a1;
            float l = 0;
            cr_assert_eq(attn_gpt_acts_init(&a1, &m, 1, len, &err), ATTN_OK, "%s", err.msg);
            cr_assert_eq(attn_gpt_forward(&m, ids + s, ids + s + 1, 1, len, NULL, &a1, &l, &err),
                         ATTN_OK, "%s", err.msg);
            ref += (double)l * len;
            attn_gpt_acts_free(&a1);
        }
        ref /= (double)(n - 1);
        for (int B = 1; B <= 6; B += 2) {
            attn_gpt_acts a;
            cr_assert_eq(attn_gpt_acts_init(&a, &m, B, (int)T, &err), ATTN_OK, "%s", err.msg);
            double got = 0;
            size_t count = 0;
            cr_assert_eq(attn_gpt_loss_windows(&m, &a, ids, n, &got, &count, &err), ATTN_OK, "%s",
                         err.msg);
            cr_expect_eq(count, n - 1);
            cr_expect(fabs(got - ref) <= 1e-6 * ref, "n %zu B %d: %.9g vs %.9g", n, B, got, ref);
            attn_gpt_acts_free(&a);
        }
    }
    attn_gpt_acts a;
    double l;
    cr_assert_eq(attn_gpt_acts_init(&a, &m, 2, 8, &err), ATTN_OK);
    cr_expect_eq(attn_gpt_loss_windows(&m, &a, ids, 1, &l, NULL, &err), ATTN_ERR_INVALID_ARG);
    attn_gpt_acts_free(&a);
    attn_gpt_free(&m);
}

/* attn_train_lr: cosine without a budget is attn_lr_cosine's; WSD is flat
 * until 60% of the horizon, then linear to min_lr; with a time budget both
 * follow the progress given, not the step (after the warm-up, in steps). */
Test(train, lr_schedules_by_steps_and_by_the_clock) {
    attn_gpt_config m;
    attn_train_config t;
    cr_assert_eq(attn_train_preset("nanogpt-cpu", &m, &t, NULL), ATTN_OK);
    t.max_steps = 1000;
    t.warmup_steps = 100;
    for (int64_t s = 0; s < 1100; s += 37)
        cr_expect(attn_train_lr(&t, s, 0.9) == attn_lr_cosine(s, 100, 1000, 1e-3, 1e-4));
    t.lr_schedule = ATTN_LR_WSD;
    cr_expect(attn_train_lr(&t, 50, 0) == attn_lr_cosine(50, 100, 1000, 1e-3, 1e-4)); /* warm-up */
    cr_expect(attn_train_lr(&t, 600, 0) == 1e-3);
    cr_expect(fabs(attn_train_lr(&t, 800, 0) - 5.5e-4) < 1e-12);
    cr_expect(fabs(attn_train_lr(&t, 1000, 0) - 1e-4) < 1e-15 &&
              attn_train_lr(&t, 5000, 0) == attn_train_lr(&t, 1000, 0));
    t.time_budget = 60;
    cr_expect(attn_train_lr(&t, 900, 0.5) == 1e-3, "the clock, not the step");
    cr_expect(fabs(attn_train_lr(&t, 150, 0.8) - 5.5e-4) < 1e-12);
    cr_expect(fabs(attn_train_lr(&t, 150, 1.0) - 1e-4) < 1e-15);
    t.lr_schedule = ATTN_LR_COSINE;
    cr_expect(fabs(attn_train_lr(&t, 200, 0.5) - 5.5e-4) < 1e-12);
    cr_expect(attn_train_lr(&t, 50, 0.9) == attn_lr_cosine(50, 100, 1000, 1e-3, 1e-4));
}

/* A time budget runs in one process: two ranks would each follow their own
 * clock to their own learning rates. */
Test(train, time_budget_refuses_ranks) {
    attn_gpt_config m;
    attn_train_config t;
    attn_trainer tr;
    attn_error err;
    char *text = NULL;
    size_t n = 0;
    small_cfg(&m, &t);
    t.time_budget = 5;
    text = malloc(4000);
    cr_assert(text);
    for (size_t i = 0; i < 4000; i++)
        text[i] = "ROMEO: a rose\n"[i % 14];
    n = 4000;
    cr_assert_eq(attn_trainer_init(&tr, &m, &t, 0, text, n, &err), ATTN_OK, "%s", err.msg);
    attn_dist two = {.rank = 0, .size = 2};
    cr_expect_eq(attn_trainer_set_dist(&tr, &two, &err), ATTN_ERR_INVALID_ARG);
    cr_expect(strstr(err.msg, "one process") != NULL, "%s", err.msg);
    cr_expect(tr.dist == NULL);
    attn_trainer_release(&tr);
    free(text);
}
