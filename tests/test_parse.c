/* The one number parser, the UTF-8 check and the memory budget (issue 31
 * items 8, 9, 12, 13): attn/parse.h, attn/membudget.h, and the size
 * estimates attn_gpt_config_memory, attn_memory_plan and attn_module_memory
 * (tests/memory_estimates.sh compares the plan with real runs' peak RSS). */
#include <criterion/criterion.h>
#include <limits.h>
#include <string.h>

#include "attn/gpt.h"
#include "attn/membudget.h"
#include "attn/memory_plan.h"
#include "attn/module.h"
#include "attn/parse.h"

Test(parse, integers_are_exact) {
    long long v = 0;
    cr_assert_eq(attn_parse_int("9007199254740992", 0, 9007199254740992LL, &v), ATTN_OK);
    cr_assert_eq(v, 9007199254740992LL);
    /* (double)2^53+1 rounds to 2^53: the parser must not. */
    cr_assert_neq(attn_parse_int("9007199254740993", 0, 9007199254740992LL, &v), ATTN_OK);
    cr_assert_eq(attn_parse_int("-9223372036854775808", LLONG_MIN, 0, &v), ATTN_OK);
    cr_assert_eq(v, LLONG_MIN);
    cr_assert_eq(attn_parse_int("9223372036854775807", 0, LLONG_MAX, &v), ATTN_OK);
    cr_assert_eq(v, LLONG_MAX);
    const char *bad[] = {
        "9223372036854775808", "", "-", " 1", "1 ", "+1", "0x10", "1e3", "1.0", "--1", "1_0"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        cr_assert_neq(attn_parse_int(bad[i], LLONG_MIN, LLONG_MAX, &v), ATTN_OK, "'%s'", bad[i]);
    unsigned long long u = 0;
    cr_assert_eq(attn_parse_uint("18446744073709551615", ULLONG_MAX, &u), ATTN_OK);
    cr_assert_eq(u, ULLONG_MAX);
    cr_assert_neq(attn_parse_uint("18446744073709551616", ULLONG_MAX, &u), ATTN_OK);
    cr_assert_neq(attn_parse_uint("-1", ULLONG_MAX, &u), ATTN_OK);
}

Test(parse, floats_are_decimal) {
    double d = 0;
    const char *good[] = {"1", "-2.5", ".5", "5.", "1e-3", "1E+3", "0"};
    const double want[] = {1, -2.5, 0.5, 5, 1e-3, 1e3, 0};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        cr_assert_eq(attn_parse_float(good[i], &d), ATTN_OK, "'%s'", good[i]);
        cr_assert_eq(d, want[i], "'%s'", good[i]);
    }
    const char *bad[] = {"0x10", " 1", "1 ", "inf",   "nan", "",
                         ".",    "1e", "e3", "1e400", "+1",  "1.2.3"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        cr_assert_neq(attn_parse_float(bad[i], &d), ATTN_OK, "'%s'", bad[i]);
}

Test(parse, utf8) {
    cr_assert(attn_utf8_valid("ab\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80", 11));
    cr_assert(!attn_utf8_valid("\xff", 1));
    cr_assert(!attn_utf8_valid("\xc3", 1));             /* cut short */
    cr_assert(!attn_utf8_valid("\xc0\xaf", 2));         /* overlong '/' */
    cr_assert(!attn_utf8_valid("\xed\xa0\x80", 3));     /* a surrogate */
    cr_assert(!attn_utf8_valid("\xf4\x90\x80\x80", 4)); /* past U+10FFFF */
}

Test(membudget, sizes) {
    double b = 0;
    cr_assert_eq(attn_parse_size("64M", &b), ATTN_OK);
    cr_assert_eq(b, 64.0 * 1024 * 1024);
    cr_assert_eq(attn_parse_size("2GiB", &b), ATTN_OK);
    cr_assert_eq(b, 2.0 * 1024 * 1024 * 1024);
    cr_assert_eq(attn_parse_size("1000", &b), ATTN_OK);
    cr_assert_eq(b, 1000);
    const char *bad[] = {"", "G", "0", "-1M", "1X", "0x10M", " 1M", "1MM"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        cr_assert_neq(attn_parse_size(bad[i], &b), ATTN_OK, "'%s'", bad[i]);
    attn_error err;
    cr_assert_eq(attn_mem_check(1e6, 64.0 * 1024 * 1024, "x", &err), ATTN_OK);
    cr_assert_eq(attn_mem_check(1e9, 64.0 * 1024 * 1024, "the model", &err), ATTN_ERR_NOMEM);
    cr_assert(strstr(err.msg, "the model needs about 953.7 MiB, more than 64.0 MiB"), "%s",
              err.msg);
    cr_assert(attn_mem_available() > 0);
}

Test(membudget, estimates_from_configs) {
    /* The book's GPT-2 124M: 163,009,536 parameters (out_head untied). */
    attn_gpt_config c = {.vocab_size = 50257,
                         .context_length = 1024,
                         .emb_dim = 768,
                         .n_heads = 12,
                         .n_layers = 12,
                         .drop_rate = 0.1,
                         .qkv_bias = 0};
    cr_assert_eq(attn_gpt_config_params(&c), 163009536.0);
    cr_assert(attn_gpt_config_memory(&c, 0, 0) == 163009536.0 * 4);
    cr_assert(attn_gpt_config_memory(&c, 1024, 1) > 163009536.0 * 16);
    /* Issue 31's huge config: ~2e14 parameters, nothing allocated. */
    attn_gpt_config h = c;
    h.n_layers = 4096, h.emb_dim = 65536, h.n_heads = 1;
    cr_assert(attn_gpt_config_params(&h) > 2e14);
    attn_module_config m = {.kind = ATTN_MODULE_MHA,
                            .d_in = 3,
                            .d_out = 134217727,
                            .num_heads = 1,
                            .context_length = 2};
    cr_assert(attn_module_memory(&m, 1, 2) > 4.0 * 134217727.0 * 134217727.0);
}

/* The fused attention keeps O(T): doubling T doubles its bytes; the
 * step-by-step path's (T, T) weights and torch-cpu dropout's bits grow
 * four-fold (issue 46: bench mha T 32768 D 768 was refused at "101.3 GiB"). */
Test(membudget, the_plan_counts_each_attention_path) {
    const attn_gpt_config c = {
        .emb_dim = 768, .n_heads = 12, .context_length = 32768, .n_layers = 1};
    attn_mem_run r = {.mode = ATTN_MEM_MHA, .batch = 1, .tokens = 16384, .backward = 1};
    attn_mem_plan a, b;
    attn_memory_plan(&c, &r, &a);
    r.tokens = 32768;
    attn_memory_plan(&c, &r, &b);
    cr_expect(b.attention > 1.9 * a.attention && b.attention < 2.1 * a.attention, "%g %g",
              a.attention, b.attention);
    cr_expect(b.total < 1.5 * 1073741824.0, "T 32768 fused: %g bytes", b.total);
    cr_expect(b.total == b.weights + b.grads + b.optimizer + b.accum + b.bf16 + b.activations +
                             b.head + b.kv_cache + b.transient + b.data + b.process);
    r.reference = 1;
    attn_memory_plan(&c, &r, &b);
    cr_expect(b.attention > 2 * 12 * 32768.0 * 32768 * 4, "(B, heads, T, T) weights, twice");
    attn_gpt_config d = c;
    d.drop_rate = 0.1;
    r.reference = 0;
    r.stream = ATTN_STREAM_TORCH_CPU;
    attn_memory_plan(&d, &r, &b);
    r.stream = ATTN_STREAM_TORCH_MKL;
    attn_memory_plan(&d, &r, &a);
    cr_expect(b.attention - a.attention == 12 * 32768.0 * 32768 / 8,
              "torch-cpu keeps a bit per element, torch-mkl none: %g", b.attention - a.attention);
}

/* Training: state 16 bytes a parameter (+4 accumulating), activations with
 * the lean head's chunk instead of B T V logits, bf16's copies; generation:
 * the KV cache; the parts add up and the text names them. */
Test(membudget, the_plan_counts_training_and_generation) {
    attn_gpt_config c = {
        .vocab_size = 50257, .context_length = 1024, .emb_dim = 768, .n_heads = 12, .n_layers = 12};
    const double P = attn_gpt_config_params(&c);
    attn_mem_run r = {.mode = ATTN_MEM_TRAIN, .batch = 4, .tokens = 64, .lean_head = 1};
    attn_mem_plan p, q;
    attn_memory_plan(&c, &r, &p);
    cr_expect(p.weights + p.grads + p.optimizer == 16 * P && p.accum == 0);
    cr_expect(p.head < 256 * 50257 * 4.0, "one chunk, not B T V logits: %g", p.head);
    r.lean_head = 0;
    r.grad_accum = 2;
    attn_memory_plan(&c, &r, &q);
    cr_expect(q.head >= 2 * 256 * 50257 * 4.0 && q.accum == 4 * P);
    r.precision = ATTN_PRECISION_BF16;
    attn_memory_plan(&c, &r, &q);
    cr_expect(q.bf16 > 2 * (P - 1024 * 768.0), "a 2-byte copy of every matrix: %g", q.bf16);
    char text[512];
    cr_expect(strstr(attn_memory_plan_text(&q, text, sizeof text), "bf16 copies"), "%s", text);
    /* a classifier: its head n_classes wide, its own parameter count */
    attn_mem_run h = {
        .mode = ATTN_MEM_TRAIN, .batch = 4, .tokens = 64, .head_width = 2, .params = 1000};
    attn_memory_plan(&c, &h, &q);
    cr_expect(q.head == 2 * 256 * 2 * 4.0 && q.weights == 4000 && q.optimizer == 8000,
              "head %g, weights %g", q.head, q.weights);
    h.precision = ATTN_PRECISION_BF16;
    attn_memory_plan(&c, &h, &p);
    r.head_width = 0;
    attn_memory_plan(&c, &r, &q); /* bf16, the vocabulary's head */
    cr_expect(q.bf16 - p.bf16 >= (50257 - 2) * 768 * 2.0, "the head's copy: %g, %g", q.bf16,
              p.bf16);
    const attn_mem_run g = {.mode = ATTN_MEM_GENERATE, .batch = 2, .load_file = 1};
    attn_memory_plan(&c, &g, &q);
    cr_expect(q.grads == 0 && q.optimizer == 0 && q.activations == 0);
    cr_expect(q.kv_cache > 2 * 12 * 2 * 1024 * 768 * 4.0, "K and V of 2 samples");
    cr_expect(q.transient > 0, "the checkpoint's image while it loads");
}
