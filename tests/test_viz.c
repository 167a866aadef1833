/* Attention-weight read-out and attn viz's library side: the fused path's
 * weights (recomputed from its saved Q, K and LSE) equal the step-by-step
 * reference path's stored weights; reading them changes neither logits nor
 * gradients (bit for bit); viz data, SVG and page on a small random GPT; and
 * the bad inputs (empty prompt, unknown character, too long, bad layer/head,
 * unwritable path) fail with a clear message and write nothing. PyTorch
 * parity of the weights and the browser checks are in tests/viz_cli.sh. */
#define _POSIX_C_SOURCE 200809L
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "attn/attention_weights.h"
#include "attn/gpt.h"
#include "attn/sample.h"
#include "attn/viz.h"

static void fill(float *x, size_t n, uint64_t seed) {
    attn_rng rng;
    attn_rng_seed(&rng, seed);
    attn_rng_rand(&rng, x, n);
    for (size_t i = 0; i < n; i++)
        x[i] = 2.0f * x[i] - 1.0f;
}

/* B 2, T 70 (two 64-row tiles), 3 heads of 8: fused read-out == reference. */
static void mha_paths_agree(int training) {
    const int B = 2, T = 70, d_in = 20, d_out = 24, H = 3;
    attn_rng rng;
    attn_rng_seed(&rng, 5);
    attn_mha m;
    attn_error err;
    cr_assert_eq(attn_mha_init(&m, d_in, d_out, T, 0.25, H, 1, &rng, &err), ATTN_OK, "%s", err.msg);
    float *x = malloc(sizeof(float) * B * T * d_in), *out = malloc(sizeof(float) * B * T * d_out);
    fill(x, (size_t)B * T * d_in, 9);
    const size_t TT = (size_t)T * T;
    float *wf = malloc(sizeof(float) * H * TT), *wr = malloc(sizeof(float) * H * TT);
    attn_attention_cache cf, cr;
    cr_assert_eq(attn_mha_cache_init(&cf, &m, B, T, &err), ATTN_OK, "%s", err.msg);
    cr_assert_eq(attn_attention_cache_init(&cr, B, T, H, d_out, &err), ATTN_OK, "%s", err.msg);
    attn_rng drop;
    attn_rng_seed(&drop, 77);
    attn_forward_mode mode = {training, &drop, ATTN_STREAM_TORCH_MKL};
    /* Before any forward there is nothing to read. */
    cr_assert_eq(attn_mha_attention_weights(&m, &cf, 0, wf, &err), ATTN_ERR_STATE);
    cr_assert_eq(attn_mha_forward(&m, x, B, T, out, &mode, &cf, &err), ATTN_OK, "%s", err.msg);
    m.path = ATTN_MHA_REFERENCE;
    attn_forward_mode eval = {0, NULL, ATTN_STREAM_TORCH_MKL};
    cr_assert_eq(attn_mha_forward(&m, x, B, T, out, &eval, &cr, &err), ATTN_OK, "%s", err.msg);
    for (int b = 0; b < B; b++) {
        m.path = ATTN_MHA_FUSED;
        cr_assert_eq(attn_mha_attention_weights(&m, &cf, b, wf, &err), ATTN_OK, "%s", err.msg);
        m.path = ATTN_MHA_REFERENCE;
        cr_assert_eq(attn_mha_attention_weights(&m, &cr, b, wr, &err), ATTN_OK, "%s", err.msg);
        for (int h = 0; h < H; h++)
            for (int i = 0; i < T; i++) {
                double sum = 0;
                for (int j = 0; j < T; j++) {
                    const size_t k = (size_t)h * TT + (size_t)i * T + j;
                    if (j > i)
                        cr_assert_eq(wf[k], 0.0f, "(%d,%d,%d,%d) above the diagonal", b, h, i, j);
                    cr_assert(fabsf(wf[k] - wr[k]) <= 2e-6f, "(%d,%d,%d,%d): fused %.9g ref %.9g",
                              b, h, i, j, wf[k], wr[k]);
                    sum += wf[k];
                }
                cr_assert(fabs(sum - 1.0) < 1e-5, "row (%d,%d,%d) sums to %.9g", b, h, i, sum);
            }
    }
    cr_assert_eq(attn_mha_attention_weights(&m, &cr, B, wr, &err), ATTN_ERR_INVALID_ARG);
    cr_assert(strstr(err.msg, "outside [0, 2)"), "%s", err.msg);
    attn_attention_cache_free(&cf);
    attn_attention_cache_free(&cr);
    attn_mha_free(&m);
    free(x);
    free(out);
    free(wf);
    free(wr);
}

Test(viz, fused_weights_equal_reference_eval) {
    mha_paths_agree(0);
}

/* Training mode (dropout drawn): the weights read are those before dropout. */
Test(viz, fused_weights_before_dropout_in_training) {
    mha_paths_agree(1);
}

static attn_gpt_config small_cfg(void) {
    attn_gpt_config c = {.vocab_size = 12,
                         .context_length = 40,
                         .emb_dim = 24,
                         .n_heads = 3,
                         .n_layers = 2,
                         .drop_rate = 0.1,
                         .qkv_bias = 0};
    return c;
}

static void make_gpt(attn_gpt *m) {
    attn_gpt_config cfg = small_cfg();
    attn_rng rng;
    attn_rng_seed(&rng, 3);
    attn_error err;
    cr_assert_eq(attn_gpt_init(m, &cfg, &rng, &err), ATTN_OK, "%s", err.msg);
}

/* forward -> read every layer -> backward, against forward -> backward on
 * fresh activations: logits, loss and every gradient bit-identical. */
Test(viz, readout_changes_nothing) {
    attn_gpt m;
    make_gpt(&m);
    const int B = 2, T = 33;
    int32_t ids[2 * 33], tg[2 * 33];
    for (int i = 0; i < B * T; i++) {
        ids[i] = (i * 7 + 3) % 12;
        tg[i] = (i * 5 + 1) % 12;
    }
    attn_error err;
    const attn_param_list *L = attn_gpt_params(&m);
    size_t total = attn_gpt_num_params(&m);
    float *g_off = malloc(total * sizeof(float)), *w = malloc(sizeof(float) * 3 * T * T);
    float *logits_off = malloc(sizeof(float) * B * T * 12);
    float loss_off = 0, loss_on = 0;
    for (int capture = 0; capture < 2; capture++) {
        attn_gpt_acts acts;
        cr_assert_eq(attn_gpt_acts_init(&acts, &m, B, T, &err), ATTN_OK, "%s", err.msg);
        attn_gpt_zero_grad(&m);
        attn_rng drop;
        attn_rng_seed(&drop, 11);
        attn_forward_mode mode = {1, &drop, ATTN_STREAM_TORCH_CPU};
        float *loss = capture ? &loss_on : &loss_off;
        cr_assert_eq(attn_gpt_forward(&m, ids, tg, B, T, &mode, &acts, loss, &err), ATTN_OK, "%s",
                     err.msg);
        if (capture) {
            for (int l = 0; l < 2; l++)
                for (int b = 0; b < B; b++)
                    cr_assert_eq(attn_gpt_attention_weights(&m, &acts, l, b, w, &err), ATTN_OK,
                                 "%s", err.msg);
            cr_assert_eq(attn_gpt_attention_weights(&m, &acts, 2, 0, w, &err),
                         ATTN_ERR_INVALID_ARG);
            cr_assert(strstr(err.msg, "layer 2 is outside [0, 2)"), "%s", err.msg);
            cr_assert_eq(memcmp(acts.logits, logits_off, sizeof(float) * B * T * 12), 0,
                         "logits differ with the read-out");
        } else {
            memcpy(logits_off, acts.logits, sizeof(float) * B * T * 12);
        }
        cr_assert_eq(attn_gpt_backward(&m, &acts, 1.0f, &err), ATTN_OK, "%s", err.msg);
        size_t k = 0;
        for (int p = 0; p < L->count; p++)
            for (size_t j = 0; j < L->items[p].numel; j++, k++) {
                if (!capture)
                    g_off[k] = L->items[p].grad[j];
                else
                    cr_assert_eq(memcmp(&g_off[k], &L->items[p].grad[j], sizeof(float)), 0,
                                 "grad of %s[%zu] differs with the read-out", L->items[p].name, j);
            }
        attn_gpt_acts_free(&acts);
    }
    cr_assert_eq(memcmp(&loss_on, &loss_off, sizeof(float)), 0);
    free(g_off);
    free(w);
    free(logits_off);
    attn_gpt_free(&m);
}

static const char vocab[] = "\n !,.:?abcde"; /* 12 characters */

static void make_tok(attn_tokenizer *tok) {
    attn_error err;
    cr_assert_eq(attn_tokenizer_from_vocab(tok, vocab, strlen(vocab), &err), ATTN_OK, "%s",
                 err.msg);
}

Test(viz, data_matches_forward_and_sampler) {
    attn_gpt m;
    attn_tokenizer tok;
    make_gpt(&m);
    make_tok(&tok);
    attn_viz_options o;
    attn_viz_options_default(&o);
    o.generate = 6;
    o.seed = 42;
    const char *prompt = "abc, dab!\nea";
    attn_viz_data d;
    attn_error err;
    cr_assert_eq(attn_viz_compute(&m, &tok, prompt, strlen(prompt), &o, "model", &d, &err), ATTN_OK,
                 "%s", err.msg);
    cr_assert_eq(d.T, 18);
    cr_assert_eq(d.n_prompt, 12);
    /* Same text as sampling by hand from the KV cache with the same seed. */
    attn_gpt_kv_cache kv;
    cr_assert_eq(attn_gpt_kv_init(&kv, &m, &err), ATTN_OK);
    cr_assert_eq(attn_gpt_kv_prefill(&m, &kv, d.ids, 12, NULL, &err), ATTN_OK);
    attn_rng rng;
    attn_rng_seed(&rng, 42);
    attn_sample_candidate buf[12];
    for (int k = 0; k < 6; k++) {
        int id = attn_sample_next(kv.logits, 12, 0.8, 200, 1.0, &rng, buf);
        cr_assert_eq(id, d.ids[12 + k], "step %d: %d vs %d", k, id, d.ids[12 + k]);
        cr_assert_eq(d.steps[k].id, id);
        cr_assert(d.steps[k].top_p[0] >= d.steps[k].p);
        cr_assert(d.steps[k].top_p[0] >= d.steps[k].top_p[4]);
        if (k < 5) cr_assert_eq(attn_gpt_kv_step(&m, &kv, id, NULL, &err), ATTN_OK);
    }
    attn_gpt_kv_free(&kv);
    /* Weights == a direct read-out after the same forward. */
    attn_gpt_acts acts;
    cr_assert_eq(attn_gpt_acts_init(&acts, &m, 1, 18, &err), ATTN_OK);
    cr_assert_eq(attn_gpt_forward(&m, d.ids, NULL, 1, 18, NULL, &acts, NULL, &err), ATTN_OK);
    float w[3 * 18 * 18];
    for (int l = 0; l < 2; l++) {
        cr_assert_eq(attn_gpt_attention_weights(&m, &acts, l, 0, w, &err), ATTN_OK);
        cr_assert_eq(memcmp(w, d.attention + (size_t)l * 3 * 18 * 18, sizeof w), 0);
    }
    attn_gpt_acts_free(&acts);
    /* The page and the SVG. */
    char *page = NULL, *svg = NULL;
    size_t len = 0;
    cr_assert_eq(attn_viz_html(&d, &page, &len, &err), ATTN_OK, "%s", err.msg);
    cr_assert_eq(strlen(page), len);
    cr_assert(strstr(page, "<script type=\"application/json\" id=\"attn-data\">"));
    cr_assert(strstr(page, "\"tokens\":[\"a\",\"b\",\"c\",\",\",\" \",\"d\",\"a\",\"b\",\"!\","
                           "\"\\n\",\"e\",\"a\""));
    cr_assert_null(strstr(page, "http://"), "the page refers to the network");
    cr_assert_null(strstr(page, "https://"), "the page refers to the network");
    cr_assert_eq(attn_viz_head_svg(&d, 1, 2, &svg, &err), ATTN_OK, "%s", err.msg);
    size_t rects = 0;
    for (const char *p = svg; (p = strstr(p, "data-value=")); p++)
        rects++;
    cr_assert_eq(rects, 18 * 19 / 2, "%zu cells: the lower triangle only", rects);
    cr_assert_eq(attn_viz_head_svg(&d, 2, 0, &svg, &err), ATTN_ERR_INVALID_ARG);
    cr_assert(strstr(err.msg, "layer 2 is outside 0..1"), "%s", err.msg);
    cr_assert_eq(attn_viz_head_svg(&d, 0, 3, &svg, &err), ATTN_ERR_INVALID_ARG);
    cr_assert(strstr(err.msg, "head 3 is outside 0..2"), "%s", err.msg);
    free(page);
    attn_viz_data_free(&d);
    attn_tokenizer_free(&tok);
    attn_gpt_free(&m);
}

Test(viz, bad_inputs) {
    attn_gpt m;
    attn_tokenizer tok;
    make_gpt(&m);
    make_tok(&tok);
    attn_viz_data d;
    attn_error err;
    cr_assert_eq(attn_viz_compute(&m, &tok, "", 0, NULL, NULL, &d, &err), ATTN_ERR_INVALID_ARG);
    cr_assert(strstr(err.msg, "empty"), "%s", err.msg);
    cr_assert_eq(attn_viz_compute(&m, &tok, "abz", 3, NULL, NULL, &d, &err), ATTN_ERR_INVALID_ARG);
    cr_assert(strstr(err.msg, "'z'") && strstr(err.msg, "2"), "%s", err.msg);
    attn_viz_options o;
    attn_viz_options_default(&o);
    o.generate = 40; /* no room left for a prompt character */
    cr_assert_eq(attn_viz_compute(&m, &tok, "ab", 2, &o, NULL, &d, &err), ATTN_ERR_INVALID_ARG);
    cr_assert(strstr(err.msg, "generate asks for 40") && strstr(err.msg, "at most 39"), "%s",
              err.msg);
    /* An unknown character in the part a long prompt drops is still named. */
    char longp[50];
    memset(longp, 'a', 49);
    longp[49] = '\0';
    longp[2] = 'z';
    cr_assert_eq(attn_viz_compute(&m, &tok, longp, 49, NULL, NULL, &d, &err), ATTN_ERR_INVALID_ARG);
    cr_assert(strstr(err.msg, "'z'"), "%s", err.msg);
    /* An unwritable path: an error, no file. */
    cr_assert_eq(attn_viz_compute(&m, &tok, "abc", 3, NULL, NULL, &d, &err), ATTN_OK);
    cr_assert_eq(attn_viz_write_html(&d, "/nonexistent-dir/x.html", &err), ATTN_ERR_IO);
    cr_assert(strstr(err.msg, "/nonexistent-dir"), "%s", err.msg);
    cr_assert_eq(access("/nonexistent-dir/x.html", F_OK), -1);
    attn_viz_data_free(&d);
    attn_tokenizer_free(&tok);
    attn_gpt_free(&m);
}

/* Issue 17: a prompt longer than the context keeps its last characters (as
 * attn_generator), leaving room for the generated ones; the page says so
 * and explains where each generated character came from. */
Test(viz, long_prompt_keeps_its_end) {
    attn_gpt m;
    attn_tokenizer tok;
    make_gpt(&m);
    attn_viz_data d;
    attn_error err;
    /* 12 characters, two of them 2 and 3 bytes long: the cut is by character. */
    static const char v2[] = "\n !,.:?abc\xc3\xa9\xe2\x82\xac"; /* ... c, e-acute, euro */
    cr_assert_eq(attn_tokenizer_from_vocab(&tok, v2, strlen(v2), &err), ATTN_OK, "%s", err.msg);
    static const char *const unit[] = {"a", "\xc3\xa9", "b", "\xe2\x82\xac", " "};
    char p[256] = "";
    size_t at[46] = {0}; /* byte offset of each character */
    for (int i = 0; i < 45; i++) {
        at[i] = strlen(p);
        strcat(p, unit[i % 5]);
    }
    const size_t n = strlen(p);
    cr_assert_eq(attn_viz_compute(&m, &tok, p, n, NULL, "model", &d, &err), ATTN_OK, "%s", err.msg);
    cr_assert_eq(d.T, 40);
    cr_assert_eq(d.n_prompt, 40);
    cr_assert_eq(d.prompt_dropped, 5);
    int32_t want[45];
    size_t got = 0;
    cr_assert_eq(attn_tokenizer_encode(&tok, p, n, want, &got, &err), ATTN_OK);
    cr_assert_eq(got, 45);
    cr_assert_eq(memcmp(d.ids, want + 5, 40 * sizeof *want), 0, "the last 40 characters");
    char *page = NULL;
    cr_assert_eq(attn_viz_html(&d, &page, NULL, &err), ATTN_OK, "%s", err.msg);
    cr_assert(strstr(page, "\"n_prompt\":40,\"prompt_dropped\":5"));
    cr_assert(
        strstr(page, "the character at position i+1 was chosen from the output at position i"));
    free(page);
    attn_viz_data_free(&d);
    /* With generate N: the last context_length - N, then generate's sampling
     * from those (the same ids as a run on the kept prompt alone). */
    attn_viz_options o;
    attn_viz_options_default(&o);
    o.generate = 6;
    o.seed = 9;
    attn_viz_data kept;
    cr_assert_eq(attn_viz_compute(&m, &tok, p, n, &o, NULL, &d, &err), ATTN_OK, "%s", err.msg);
    cr_assert_eq(attn_viz_compute(&m, &tok, p + at[11], n - at[11], &o, NULL, &kept, &err), ATTN_OK,
                 "%s", err.msg);
    cr_assert(d.T == 40 && d.n_prompt == 34 && d.prompt_dropped == 11 && kept.prompt_dropped == 0);
    cr_assert_eq(memcmp(d.ids, kept.ids, 40 * sizeof *d.ids), 0);
    cr_assert_eq(memcmp(d.attention, kept.attention, sizeof(float) * 2 * 3 * 40 * 40), 0);
    attn_viz_data_free(&d);
    attn_viz_data_free(&kept);
    attn_tokenizer_free(&tok);
    attn_gpt_free(&m);
}

Test(viz, heatmap_svg_cells_and_masked_scores) {
    const float v[4] = {0.5f, -INFINITY, 0.25f, 1.0f};
    const char *labels[2] = {"a<b", "c&d"};
    attn_viz_heatmap h = {.rows = 2,
                          .cols = 2,
                          .values = v,
                          .row_labels = labels,
                          .col_labels = labels,
                          .title = "t \"q\"",
                          .show_values = 1,
                          .decimals = 4};
    char *svg = NULL;
    attn_error err;
    cr_assert_eq(attn_viz_heatmap_svg(&h, &svg, &err), ATTN_OK, "%s", err.msg);
    cr_assert(strstr(svg, "data-row=\"0\" data-col=\"1\" data-value=\"-inf\""), "%s", svg);
    cr_assert(strstr(svg, "data-value=\"0.25\""));
    cr_assert(strstr(svg, ">0.2500</text>"));
    cr_assert(strstr(svg, "a&lt;b") && strstr(svg, "c&amp;d") && strstr(svg, "t &quot;q&quot;"));
    cr_assert_null(strstr(svg, "a<b"));
    free(svg);
    h.rows = 0;
    cr_assert_eq(attn_viz_heatmap_svg(&h, &svg, &err), ATTN_ERR_INVALID_ARG);
}
