/* Batched generation (issue 34): a KV cache of N sequences
 * (attn_gpt_kv_init_batch) reads each weight once per step for N tokens, and
 * each sequence's logits equal a one-sequence cache fed the same tokens bit
 * for bit (fp32 and bf16 weights, 1 and 2 threads, the book's model and a
 * variant one: RoPE, grouped-query, SwiGLU, QK-norm, a sliding window). The
 * generator's N samples are the one-sample runs at seeds seed + i, stop
 * strings and window slides included; the option checks fail before
 * anything is allocated; the bandwidth measurement (attn_membw_read) runs
 * and checks its arguments. attn_gpt_kv_feed_batch's chunks equal the steps. */
#include <criterion/criterion.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "attn/generate.h"
#include "attn/membw.h"

static const char VOCAB[] = "\n !,.:;?ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
#define NSEQ 3

static void make_model(attn_gpt *m, int variant) {
    attn_gpt_config cfg = {.vocab_size = (int)strlen(VOCAB),
                           .context_length = 16,
                           .emb_dim = 32,
                           .n_heads = 4,
                           .n_layers = 2};
    if (variant) {
        cfg.pos_emb = ATTN_POS_ROPE;
        cfg.n_kv_heads = 2;
        cfg.act = ATTN_ACT_SWIGLU;
        cfg.qk_norm = 1;
        cfg.window = 6;
        cfg.norm = ATTN_NORM_RMSNORM;
    }
    attn_rng rng;
    attn_rng_seed(&rng, 7);
    attn_error err;
    cr_assert_eq(attn_gpt_init(m, &cfg, &rng, &err), ATTN_OK, "%s", err.msg);
}

static int32_t token_of(int t, int s, int V) {
    return (int32_t)((t * 7 + s * 13 + 1) % V);
}

/* NSEQ sequences of `steps` tokens: batched against one cache each. */
static void check_batch(const attn_gpt *m, attn_precision p, int threads, int steps) {
    attn_error err;
    const int V = m->cfg.vocab_size;
    attn_gpt_kv_cache b, one[NSEQ];
    cr_assert_eq(attn_gpt_kv_init_batch(&b, m, NSEQ, &err), ATTN_OK, "%s", err.msg);
    cr_assert_eq(attn_gpt_kv_set_precision(&b, m, p, &err), ATTN_OK, "%s", err.msg);
    b.threads = threads;
    for (int s = 0; s < NSEQ; s++) {
        cr_assert_eq(attn_gpt_kv_init(&one[s], m, &err), ATTN_OK, "%s", err.msg);
        cr_assert_eq(attn_gpt_kv_set_precision(&one[s], m, p, &err), ATTN_OK, "%s", err.msg);
    }
    /* A prefill of 3 tokens each, then single steps. */
    int32_t pre[NSEQ * 3], tok[NSEQ];
    for (int s = 0; s < NSEQ; s++)
        for (int t = 0; t < 3; t++)
            pre[s * 3 + t] = token_of(t, s, V);
    cr_assert_eq(attn_gpt_kv_prefill_batch(m, &b, pre, 3, NULL, &err), ATTN_OK, "%s", err.msg);
    for (int s = 0; s < NSEQ; s++) {
        cr_assert_eq(attn_gpt_kv_prefill(m, &one[s], pre + s * 3, 3, NULL, &err), ATTN_OK);
        cr_assert(memcmp(b.logits + (size_t)s * V, one[s].logits, (size_t)V * 4) == 0,
                  "prefill: sequence %d differs (precision %d, threads %d)", s, (int)p, threads);
    }
    for (int t = 3; t < steps; t++) {
        for (int s = 0; s < NSEQ; s++)
            tok[s] = token_of(t, s, V);
        cr_assert_eq(attn_gpt_kv_step_batch(m, &b, tok, NULL, &err), ATTN_OK, "%s", err.msg);
        for (int s = 0; s < NSEQ; s++) {
            cr_assert_eq(attn_gpt_kv_step(m, &one[s], tok[s], NULL, &err), ATTN_OK, "%s", err.msg);
            cr_assert(memcmp(b.logits + (size_t)s * V, one[s].logits, (size_t)V * 4) == 0,
                      "step %d: sequence %d differs (precision %d, threads %d)", t, s, (int)p,
                      threads);
        }
    }
    attn_gpt_kv_free(&b);
    for (int s = 0; s < NSEQ; s++)
        attn_gpt_kv_free(&one[s]);
}

Test(generate_batch, kv_batch_equals_one_at_a_time) {
    for (int variant = 0; variant < 2; variant++) {
        attn_gpt m;
        make_model(&m, variant);
        /* The variant's window (6) is a ring: 14 steps wrap it twice. */
        const int steps = variant ? 14 : 16;
        for (int threads = 1; threads <= 2; threads++) {
            check_batch(&m, ATTN_PRECISION_FP32, threads, steps);
            check_batch(&m, ATTN_PRECISION_BF16, threads, steps);
        }
        attn_gpt_free(&m);
    }
}

Test(generate_batch, kv_batch_refusals) {
    attn_gpt m;
    make_model(&m, 0);
    attn_error err;
    attn_gpt_kv_cache c;
    cr_assert_eq(attn_gpt_kv_init_batch(&c, &m, 0, &err), ATTN_ERR_INVALID_ARG);
    cr_assert_eq(attn_gpt_kv_init_batch(&c, &m, INT_MAX, &err), ATTN_ERR_NOMEM);
    cr_assert_eq(attn_gpt_kv_init_batch(&c, &m, 2, &err), ATTN_OK, "%s", err.msg);
    const int32_t ids[2] = {1, 2};
    cr_assert_eq(attn_gpt_kv_step(&m, &c, 1, NULL, &err), ATTN_ERR_STATE);
    cr_assert(strstr(err.msg, "attn_gpt_kv_step_batch"), "%s", err.msg);
    cr_assert_eq(attn_gpt_kv_prefill(&m, &c, ids, 2, NULL, &err), ATTN_ERR_STATE);
    const int32_t bad[2] = {1, 999};
    cr_assert_eq(attn_gpt_kv_step_batch(&m, &c, bad, NULL, &err), ATTN_ERR_INVALID_ARG);
    attn_gpt_kv_free(&c);
    attn_gpt_free(&m);
}

/* attn_gpt_kv_feed_batch (the book's forward(idx, use_cache=True)): chunks
 * of 4, 1 and 3 tokens continue at the cache's position and give every
 * position's logits, each equal bit for bit to the batched step's at that
 * position (the book's model and the variant, whose window ring wraps). */
static void check_feed(const attn_gpt *m) {
    attn_error err;
    const int V = m->cfg.vocab_size, chunks[] = {4, 1, 3, 5};
    attn_gpt_kv_cache a, b;
    cr_assert_eq(attn_gpt_kv_init_batch(&a, m, NSEQ, &err), ATTN_OK, "%s", err.msg);
    cr_assert_eq(attn_gpt_kv_init_batch(&b, m, NSEQ, &err), ATTN_OK, "%s", err.msg);
    float *got = malloc((size_t)NSEQ * 5 * (size_t)V * sizeof *got);
    int32_t ids[NSEQ * 5], tok[NSEQ];
    cr_assert(got);
    for (int c = 0, at = 0; c < 4; at += chunks[c++]) {
        const int n = chunks[c];
        for (int s = 0; s < NSEQ; s++)
            for (int t = 0; t < n; t++)
                ids[s * n + t] = token_of(at + t, s, V);
        cr_assert_eq(attn_gpt_kv_feed_batch(m, &a, ids, n, got, &err), ATTN_OK, "%s", err.msg);
        cr_assert_eq(a.len, at + n);
        for (int t = 0; t < n; t++) {
            for (int s = 0; s < NSEQ; s++)
                tok[s] = ids[s * n + t];
            cr_assert_eq(attn_gpt_kv_step_batch(m, &b, tok, NULL, &err), ATTN_OK, "%s", err.msg);
            for (int s = 0; s < NSEQ; s++)
                cr_assert(memcmp(got + ((size_t)s * n + t) * V, b.logits + (size_t)s * V,
                                 (size_t)V * sizeof *got) == 0,
                          "position %d of sequence %d differs from the step's", at + t, s);
        }
    }
    cr_assert_eq(attn_gpt_kv_feed_batch(m, &a, ids, 1, NULL, &err), ATTN_OK, "%s", err.msg);
    attn_gpt_kv_free(&a);
    attn_gpt_kv_free(&b);
    free(got);
}

Test(generate_batch, kv_feed_continues_at_the_position) {
    for (int variant = 0; variant < 2; variant++) {
        attn_gpt m;
        make_model(&m, variant);
        check_feed(&m);
        attn_gpt_free(&m);
    }
}

/* What does not fit, or an id outside the vocabulary, fails before any
 * token is fed: the cache is unchanged. */
Test(generate_batch, kv_feed_refusals) {
    attn_gpt m;
    make_model(&m, 0);
    attn_error err;
    attn_gpt_kv_cache c;
    cr_assert_eq(attn_gpt_kv_init_batch(&c, &m, 2, &err), ATTN_OK, "%s", err.msg);
    int32_t ids[2 * 17] = {0};
    cr_assert_eq(attn_gpt_kv_feed_batch(&m, &c, ids, 10, NULL, &err), ATTN_OK, "%s", err.msg);
    cr_assert_eq(attn_gpt_kv_feed_batch(&m, &c, ids, 7, NULL, &err), ATTN_ERR_STATE);
    cr_assert(strstr(err.msg, "holds 10 of its 16 tokens"), "%s", err.msg);
    cr_assert_eq(attn_gpt_kv_feed_batch(&m, &c, ids, 0, NULL, &err), ATTN_ERR_SHAPE);
    ids[5] = m.cfg.vocab_size;
    cr_assert_eq(attn_gpt_kv_feed_batch(&m, &c, ids, 3, NULL, &err), ATTN_ERR_INVALID_ARG);
    cr_assert(strstr(err.msg, "index 5"), "%s", err.msg);
    cr_assert_eq(c.len, 10);
    ids[5] = 0;
    cr_assert_eq(attn_gpt_kv_feed_batch(&m, &c, ids, 6, NULL, &err), ATTN_OK, "%s", err.msg);
    cr_assert_eq(c.len, 16);
    attn_gpt_kv_free(&c);
    attn_gpt_free(&m);
}

/* Every sample's tokens (max_new each; -1 after a stop) from one generator. */
static void run_samples(const attn_gpt *m, const attn_tokenizer *tok,
                        const attn_generate_options *o, const char *prompt, int max_new,
                        int32_t *out) {
    attn_generator g;
    attn_error err;
    cr_assert_eq(attn_generator_init(&g, m, tok, o, &err), ATTN_OK, "%s", err.msg);
    cr_assert_eq(attn_generator_prompt(&g, prompt, strlen(prompt), &err), ATTN_OK);
    const int N = g.num_samples;
    for (int i = 0; i < N * max_new; i++)
        out[i] = -1;
    int32_t ids[NSEQ];
    for (int t = 0; t < max_new && !g.stopped; t++) {
        if (N == 1) {
            cr_assert_eq(attn_generator_next_token(&g, &ids[0], NULL, NULL, &err), ATTN_OK);
        } else {
            cr_assert_eq(attn_generator_next_tokens(&g, ids, &err), ATTN_OK, "%s", err.msg);
        }
        for (int s = 0; s < N; s++)
            out[s * max_new + t] = ids[s];
    }
    attn_generator_free(&g);
}

Test(generate_batch, samples_equal_single_runs_at_seed_plus_i) {
    attn_gpt m;
    attn_tokenizer tok;
    attn_error err;
    cr_assert_eq(attn_tokenizer_from_vocab(&tok, VOCAB, strlen(VOCAB), &err), ATTN_OK);
    enum { MAX_NEW = 60 }; /* context 16: the window slides several times */
    for (int variant = 0; variant < 2; variant++) {
        make_model(&m, variant);
        for (int c = 0; c < 3; c++) {
            attn_generate_options o;
            attn_generate_options_default(&o);
            o.seed = 41;
            o.temperature = c == 2 ? 0.0 : 1.2;
            o.stop = c == 1 ? "e" : NULL; /* each sample stops at its own step */
            o.window_keep = 5;
            o.num_samples = NSEQ;
            int32_t batch[NSEQ * MAX_NEW], alone[MAX_NEW];
            run_samples(&m, &tok, &o, "ROMEO:", MAX_NEW, batch);
            for (int s = 0; s < NSEQ; s++) {
                o.num_samples = 1;
                o.seed = 41 + (uint64_t)s;
                run_samples(&m, &tok, &o, "ROMEO:", MAX_NEW, alone);
                cr_assert(memcmp(batch + s * MAX_NEW, alone, sizeof alone) == 0,
                          "variant %d case %d: sample %d differs from seed %d alone", variant, c, s,
                          41 + s);
                if (c == 2) /* greedy: every sample the same */
                    cr_assert(memcmp(batch + s * MAX_NEW, batch, sizeof alone) == 0);
                o.seed = 41;
            }
        }
        attn_gpt_free(&m);
    }
    attn_tokenizer_free(&tok);
}

Test(generate_batch, generator_refusals) {
    attn_gpt m;
    attn_tokenizer tok;
    attn_error err;
    make_model(&m, 0);
    cr_assert_eq(attn_tokenizer_from_vocab(&tok, VOCAB, strlen(VOCAB), &err), ATTN_OK);
    attn_generate_options o;
    attn_generate_options_default(&o);
    attn_generator g;
    o.num_samples = -1;
    cr_assert_eq(attn_generator_init(&g, &m, &tok, &o, &err), ATTN_ERR_INVALID_ARG);
    o.num_samples = 2;
    o.device = ATTN_DEVICE_CUDA;
    cr_assert_eq(attn_generator_init(&g, &m, &tok, &o, &err), ATTN_ERR_INVALID_ARG);
    cr_assert(strstr(err.msg, "one sample"), "%s", err.msg);
    o.device = ATTN_DEVICE_CPU;
    cr_assert_eq(attn_generator_init(&g, &m, &tok, &o, &err), ATTN_OK, "%s", err.msg);
    cr_assert_eq(attn_generator_prompt(&g, "A", 1, &err), ATTN_OK);
    cr_assert_eq(attn_generator_next_token(&g, NULL, NULL, NULL, &err), ATTN_ERR_STATE);
    cr_assert(strstr(err.msg, "attn_generator_next_tokens"), "%s", err.msg);
    attn_generator_free(&g);
    attn_tokenizer_free(&tok);
    attn_gpt_free(&m);
}

/* The floor's measurement: a rate from a small buffer; bad arguments are
 * refused before anything is allocated. */
Test(generate_batch, membw_read) {
    attn_error err;
    double bps = 0;
    cr_assert_eq(attn_membw_read(1, (size_t)8 << 20, 2, &bps, &err), ATTN_OK, "%s", err.msg);
    cr_assert(bps > 1e8 && bps < 1e13, "%g bytes/s", bps);
    cr_assert_eq(attn_membw_read(-1, 0, 0, &bps, &err), ATTN_ERR_INVALID_ARG);
    cr_assert_eq(attn_membw_read(1, 0, -1, &bps, &err), ATTN_ERR_INVALID_ARG);
    cr_assert_eq(attn_membw_read(2, 100, 1, &bps, &err), ATTN_ERR_INVALID_ARG);
    cr_assert(strstr(err.msg, "too few"), "%s", err.msg);
}
