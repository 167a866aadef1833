/* attn_generator (attn/generate.h, issue 9): the library's generation gives
 * exactly the text `attn generate` prints for the same checkpoint, prompt and
 * options — including across sliding-window re-primes and a prompt longer
 * than the context — and the stop string ends generation where the same
 * draws first complete it. The model is a random-initialised small GPT
 * (torch.manual_seed(7) + GPTModel) saved as a checkpoint here. */
#include "io_util.h"

#include <criterion/criterion.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "attn/generate.h"
#include "attn/safetensors.h"
#include "attn/weights_format.h"

static const char VOCAB[] = "\n !,.:;?ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

typedef struct fixture {
    attn_gpt model;
    attn_tokenizer tok;
    const char *dir;
    char path[4200];
} fixture;

/* A char model over VOCAB (4 heads, 2 layers, no dropout), seeded. */
static attn_gpt_config char_config(int ctx, int emb_dim, int qkv_bias, int tied) {
    attn_gpt_config cfg = {.vocab_size = (int)strlen(VOCAB),
                           .context_length = ctx,
                           .emb_dim = emb_dim,
                           .n_heads = 4,
                           .n_layers = 2,
                           .drop_rate = 0.0,
                           .qkv_bias = qkv_bias,
                           .tie_weights = tied};
    return cfg;
}

static void init_char_model(attn_gpt *m, const attn_gpt_config *cfg, uint64_t seed) {
    attn_error err;
    attn_rng rng;
    attn_rng_seed(&rng, seed);
    cr_assert_eq(attn_gpt_init(m, cfg, &rng, &err), ATTN_OK, "%s", err.msg);
}

static void make_model(fixture *f, int ctx) {
    attn_error err;
    const attn_gpt_config cfg = char_config(ctx, 32, 0, 0);
    init_char_model(&f->model, &cfg, 7);
    cr_assert_eq(attn_tokenizer_from_vocab(&f->tok, VOCAB, strlen(VOCAB), &err), ATTN_OK, "%s",
                 err.msg);
    char *cj = NULL;
    cr_assert_eq(attn_gpt_config_to_json(&cfg, &cj, &err), ATTN_OK);
    attn_st_kv meta[] = {
        {"format", "attn-gpt"}, {"config", cj}, {"vocabulary", VOCAB}, {"step", "0"}};
    f->dir = tio_mkdtemp();
    snprintf(f->path, sizeof f->path, "%s/model.safetensors", f->dir);
    cr_assert_eq(attn_safetensors_write_params(f->path, attn_gpt_params(&f->model), meta, 4, &err),
                 ATTN_OK, "%s", err.msg);
    free(cj);
}

static void free_model(fixture *f) {
    attn_gpt_free(&f->model);
    attn_tokenizer_free(&f->tok);
    tio_rmtree(f->dir);
}

/* stdout of `attn generate --checkpoint PATH args`. */
static char *run_generate(const fixture *f, const char *args) {
    char cmd[9000];
    snprintf(cmd, sizeof cmd, "'%s' generate --checkpoint '%s' %s 2>/dev/null", ATTN_BINARY,
             f->path, args);
    FILE *p = popen(cmd, "r");
    cr_assert(p);
    size_t cap = 1 << 16, len = 0, n;
    char *buf = malloc(cap);
    while ((n = fread(buf + len, 1, cap - len - 1, p)) > 0)
        len += n;
    buf[len] = '\0';
    int st = pclose(p);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s failed", cmd);
    return buf;
}

/* The library's text: prompt + max_new characters (or until the stop string) + "\n". */
static char *run_library(const fixture *f, const char *prompt, int max_new,
                         const attn_generate_options *o, int *stopped_at) {
    attn_generator g;
    attn_error err;
    cr_assert_eq(attn_generator_init(&g, &f->model, &f->tok, o, &err), ATTN_OK, "%s", err.msg);
    cr_assert_eq(attn_generator_prompt(&g, prompt, strlen(prompt), &err), ATTN_OK, "%s", err.msg);
    size_t cap = strlen(prompt) + (size_t)max_new * 4 + 2, len = strlen(prompt);
    char *out = malloc(cap);
    memcpy(out, prompt, len);
    *stopped_at = -1;
    for (int i = 0; i < max_new && !g.stopped; i++) {
        char u8[8];
        int k;
        cr_assert_eq(attn_generator_next(&g, NULL, u8, &k, &err), ATTN_OK, "%s", err.msg);
        memcpy(out + len, u8, (size_t)k);
        len += (size_t)k;
        if (g.stopped) *stopped_at = i + 1;
    }
    if (g.stopped) /* asking past the stop string is an error */
        cr_assert_eq(attn_generator_next(&g, NULL, NULL, NULL, &err), ATTN_ERR_STATE);
    out[len++] = '\n';
    out[len] = '\0';
    attn_generator_free(&g);
    return out;
}

Test(generate, library_equals_attn_generate) {
    fixture f;
    make_model(&f, 16); /* 150 tokens: many window slides */
    struct {
        const char *args;
        double temperature;
        int top_k;
        double top_p;
        uint64_t seed;
        const char *prompt;
    } cases[] = {
        {"--temperature 0.8 --top-k 200 --seed 1337", 0.8, 200, 1.0, 1337, "\n"},
        {"--temperature 1.3 --top-k 5 --top-p 0.9 --seed 42", 1.3, 5, 0.9, 42, "ROMEO:"},
        {"--temperature 0 --seed 1", 0.0, 200, 1.0, 1, "To be, or not"},
        /* longer than the context (16): its last 16 characters are read */
        {"--temperature 1 --top-k 0 --seed 9", 1.0, 0, 1.0, 9,
         "First Citizen: Before we proceed any further, hear me speak."},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        char args[512];
        snprintf(args, sizeof args, "%s --max-new-tokens 150 --prompt '%s'", cases[c].args,
                 cases[c].prompt);
        char *want = run_generate(&f, args);
        attn_generate_options o;
        attn_generate_options_default(&o);
        o.temperature = cases[c].temperature;
        o.top_k = cases[c].top_k;
        o.top_p = cases[c].top_p;
        o.seed = cases[c].seed;
        int stopped_at;
        char *got = run_library(&f, cases[c].prompt, 150, &o, &stopped_at);
        cr_assert_str_eq(got, want, "case %zu (%s)", c, cases[c].args);
        cr_assert_eq(stopped_at, -1);
        free(want);
        free(got);
    }
    free_model(&f);
}

Test(generate, stop_string_ends_at_its_first_completion) {
    fixture f;
    make_model(&f, 24);
    attn_generate_options o;
    attn_generate_options_default(&o);
    o.temperature = 1.0;
    o.top_k = 0;
    o.seed = 3;
    int stopped_at;
    char *full = run_library(&f, "A", 400, &o, &stopped_at);
    cr_assert_eq(stopped_at, -1);
    /* Stop at a two-character string the unstopped text contains. */
    char stop[3] = {0};
    const char *gen = full + 1, *hit = NULL;
    for (size_t i = 0; gen[i + 1] && gen[i + 1] != '\n' && !hit; i++)
        if (gen[i] != '\n' && gen[i + 1] != '\n' && i >= 20) {
            stop[0] = gen[i];
            stop[1] = gen[i + 1];
            hit = strstr(gen, stop);
        }
    cr_assert(hit, "no stop candidate in %s", full);
    o.stop = stop;
    char *cut = run_library(&f, "A", 400, &o, &stopped_at);
    const size_t upto = (size_t)(hit - gen) + 2; /* generated characters through the stop */
    cr_assert_eq(stopped_at, (int)upto, "stop '%s' at %d, want %zu", stop, stopped_at, upto);
    cr_assert_eq(strncmp(cut, full, 1 + upto), 0, "the same draws up to the stop");
    cr_assert_eq(cut[1 + upto], '\n');
    free(full);
    free(cut);
    free_model(&f);
}

Test(generate, options_and_order_are_checked) {
    fixture f;
    make_model(&f, 16);
    attn_generator g;
    attn_error err;
    attn_generate_options o;
    attn_generate_options_default(&o);
    o.top_p = 0;
    cr_assert_eq(attn_generator_init(&g, &f.model, &f.tok, &o, &err), ATTN_ERR_INVALID_ARG);
    cr_assert(strstr(err.msg, "top_p must be in (0, 1]"), "%s", err.msg);
    attn_generate_options_default(&o);
    o.window_keep = 17; /* 16, the context: the book's crop */
    cr_assert_eq(attn_generator_init(&g, &f.model, &f.tok, &o, &err), ATTN_ERR_INVALID_ARG);
    cr_assert(strstr(err.msg, "window_keep must be in [0, 16]"), "%s", err.msg);
    attn_generate_options_default(&o);
    cr_assert_eq(attn_generator_init(&g, &f.model, &f.tok, &o, &err), ATTN_OK);
    cr_assert_eq(attn_generator_next(&g, NULL, NULL, NULL, &err), ATTN_ERR_STATE);
    cr_assert_eq(attn_generator_prompt(&g, "", 0, &err), ATTN_ERR_INVALID_ARG);
    cr_assert_eq(attn_generator_prompt(&g, "A#", 2, &err), ATTN_ERR_INVALID_ARG);
    /* A restart replays the same text (reseeded). */
    int32_t a[40], b[40];
    cr_assert_eq(attn_generator_prompt(&g, "AB", 2, &err), ATTN_OK);
    for (int i = 0; i < 40; i++)
        cr_assert_eq(attn_generator_next(&g, &a[i], NULL, NULL, &err), ATTN_OK);
    cr_assert_eq(attn_generator_prompt(&g, "AB", 2, &err), ATTN_OK);
    for (int i = 0; i < 40; i++)
        cr_assert_eq(attn_generator_next(&g, &b[i], NULL, NULL, &err), ATTN_OK);
    cr_assert_eq(memcmp(a, b, sizeof a), 0);
    cr_assert_eq(g.produced, 40);
    /* Peeking at the logits (twice) draws nothing: the same ids again, and
     * each draw is the arg-max of what was peeked at temperature 0. */
    cr_assert_eq(attn_generator_prompt(&g, "AB", 2, &err), ATTN_OK);
    for (int i = 0; i < 40; i++) {
        const float *l1, *l2;
        cr_assert_eq(attn_generator_logits(&g, &l1, &err), ATTN_OK);
        cr_assert_eq(attn_generator_logits(&g, &l2, &err), ATTN_OK);
        cr_assert_eq(l1, l2);
        cr_assert_eq(attn_generator_next(&g, &b[i], NULL, NULL, &err), ATTN_OK);
    }
    cr_assert_eq(memcmp(a, b, sizeof a), 0);
    attn_generator_free(&g);
    o.temperature = 0;
    cr_assert_eq(attn_generator_init(&g, &f.model, &f.tok, &o, &err), ATTN_OK);
    cr_assert_eq(attn_generator_prompt(&g, "AB", 2, &err), ATTN_OK);
    for (int i = 0; i < 40; i++) { /* past the 16-token window: re-primes too */
        const float *l;
        int32_t id;
        cr_assert_eq(attn_generator_logits(&g, &l, &err), ATTN_OK);
        int best = 0;
        for (int v = 1; v < f.model.cfg.vocab_size; v++)
            if (l[v] > l[best]) best = v;
        cr_assert_eq(attn_generator_next(&g, &id, NULL, NULL, &err), ATTN_OK);
        cr_assert_eq(id, best);
    }
    attn_generator_free(&g);
    free_model(&f);
}

/* device CUDA: on a machine with a GPU, greedy text through several window
 * slides equals the CPU's (the GPU reruns the window the CPU's cache holds;
 * logits agree up to rounding, so greedy picks agree); elsewhere init fails
 * saying why, and leaves nothing allocated. */
Test(generate, cuda_device_equals_cpu_or_says_why) {
    fixture f;
    make_model(&f, 16);
    attn_generate_options o;
    attn_generate_options_default(&o);
    o.temperature = 0.0;
    o.device = ATTN_DEVICE_CUDA;
    attn_generator g;
    attn_error err;
    attn_error_clear(&err);
    if (attn_generator_init(&g, &f.model, &f.tok, &o, &err) != ATTN_OK) {
        cr_expect(strstr(err.msg, "without CUDA") || strstr(err.msg, "no CUDA device"),
                  "init failed for another reason: %s", err.msg);
        cr_expect_null(g.gpu);
        cr_expect_null(g.gpu_logits);
        free_model(&f);
        return;
    }
    attn_generator_free(&g);
    int stopped_at;
    char *gpu = run_library(&f, "ROMEO:", 60, &o, &stopped_at);
    o.device = ATTN_DEVICE_CPU;
    char *cpu = run_library(&f, "ROMEO:", 60, &o, &stopped_at);
    cr_expect_str_eq(gpu, cpu);
    free(gpu);
    free(cpu);
    free_model(&f);
}

/* Issue 50: bf16 generation without the fp32 Linear weights. A model big
 * enough that the released weights span whole pages (read as zero once
 * gone: a step that still read them would change the logits). */
static void init_wide(attn_gpt *m, int tied) {
    const attn_gpt_config cfg = char_config(24, 128, 1, tied);
    init_char_model(m, &cfg, 11);
}

/* Every step's logits: a BF16 cache on the fp32 model (its own copy)
 * against one on the model that keeps only bf16 weights, bit for bit,
 * through prefill, steps and a re-prime; then greedy generators alike. */
Test(generate, bf16_only_weights_equal_bf16_copy) {
    for (int tied = 0; tied < 2; tied++) {
        attn_gpt a, b;
        attn_tokenizer tok;
        attn_error err;
        init_wide(&a, tied);
        init_wide(&b, tied);
        cr_assert_eq(attn_tokenizer_from_vocab(&tok, VOCAB, strlen(VOCAB), &err), ATTN_OK);
        attn_generate_options o;
        attn_generate_options_default(&o);
        o.precision = ATTN_PRECISION_BF16;
        cr_assert_eq(attn_generate_prepare(&b, &o, &err), ATTN_OK, "%s", err.msg);
        cr_assert(b.w_bf16 != NULL);
        cr_assert_eq(attn_generate_prepare(&b, &o, &err), ATTN_OK); /* again: a no-op */
        /* the released pages read zero: the fp32 weights are gone */
        const float *wq = b.blocks[0].att.W_query.weight;
        float zero = 0;
        for (int i = 1024; i < 2048; i++)
            zero += wq[i] * wq[i];
        cr_assert_eq(zero, 0.0f, "tied %d: fp32 W_query still held", tied);
        if (tied) cr_assert(b.tok_emb.weight[5] != 0.0f, "the tied embedding is kept");
        attn_gpt_kv_cache ca, cb;
        cr_assert_eq(attn_gpt_kv_init(&ca, &a, &err), ATTN_OK, "%s", err.msg);
        cr_assert_eq(attn_gpt_kv_init(&cb, &b, &err), ATTN_OK, "%s", err.msg);
        cr_assert_eq(attn_gpt_kv_set_precision(&ca, &a, ATTN_PRECISION_BF16, &err), ATTN_OK);
        cr_assert_eq(attn_gpt_kv_set_precision(&cb, &b, ATTN_PRECISION_BF16, &err), ATTN_OK);
        cr_assert(cb.w_bf16 == NULL, "the model's copy is used, none made");
        const size_t V = strlen(VOCAB);
        float *la = malloc(V * sizeof *la), *lb = malloc(V * sizeof *lb);
        const int32_t ids[] = {3, 17, 40, 2, 9};
        cr_assert_eq(attn_gpt_kv_prefill(&a, &ca, ids, 5, la, &err), ATTN_OK, "%s", err.msg);
        cr_assert_eq(attn_gpt_kv_prefill(&b, &cb, ids, 5, lb, &err), ATTN_OK, "%s", err.msg);
        cr_assert_eq(memcmp(la, lb, V * sizeof *la), 0, "tied %d: prefill logits", tied);
        for (int t = 0; t < 15; t++) {
            cr_assert_eq(attn_gpt_kv_step(&a, &ca, (t * 7) % (int)V, la, &err), ATTN_OK);
            cr_assert_eq(attn_gpt_kv_step(&b, &cb, (t * 7) % (int)V, lb, &err), ATTN_OK);
            cr_assert_eq(memcmp(la, lb, V * sizeof *la), 0, "tied %d: step %d logits", tied, t);
        }
        attn_gpt_kv_free(&ca);
        attn_gpt_kv_free(&cb);
        free(la);
        free(lb);
        o.temperature = 0;
        char *ga = NULL, *gb = NULL;
        int stop;
        fixture fa = {.model = a, .tok = tok}, fb = {.model = b, .tok = tok};
        ga = run_library(&fa, "To be", 60, &o, &stop); /* past the context: re-primes */
        gb = run_library(&fb, "To be", 60, &o, &stop);
        cr_assert_str_eq(ga, gb, "tied %d", tied);
        free(ga);
        free(gb);
        attn_gpt_free(&a);
        attn_gpt_free(&b);
        attn_tokenizer_free(&tok);
    }
}

/* Weights bound to the caller's storage are never released: the keep
 * refuses (ATTN_ERR_STATE) and the caller's values stay as they were. */
Test(generate, bf16_only_weights_refuse_bound_storage) {
    attn_gpt m;
    attn_error err;
    init_wide(&m, 0);
    attn_param_list *list = &m.params;
    size_t total = 0;
    for (int i = 0; i < list->count; i++)
        total += list->items[i].numel;
    float *mine = malloc(total * sizeof *mine), *before = malloc(total * sizeof *before);
    float **data = malloc((size_t)list->count * sizeof *data);
    cr_assert(mine && before && data);
    for (size_t i = 0, at = 0; i < (size_t)list->count; at += list->items[i].numel, i++) {
        data[i] = mine + at;
        memcpy(data[i], list->items[i].data, list->items[i].numel * sizeof(float));
    }
    memcpy(before, mine, total * sizeof *mine);
    attn_param_list_bind(list, data, NULL);
    cr_assert_eq(attn_gpt_keep_bf16_weights(&m, &err), ATTN_ERR_STATE);
    cr_assert(strstr(err.msg, "bound storage"), "%s", err.msg);
    cr_assert(m.w_bf16 == NULL);
    cr_assert(memcmp(mine, before, total * sizeof *mine) == 0, "the caller's weights unchanged");
    attn_param_list_bind(list, NULL, NULL);
    free(data);
    free(before);
    free(mine);
    attn_gpt_free(&m);
}

/* Whatever would read the released fp32 weights says so: ATTN_ERR_STATE. */
Test(generate, bf16_only_weights_refuse_fp32_readers) {
    attn_gpt m;
    attn_error err;
    init_wide(&m, 0);
    attn_generate_options o;
    attn_generate_options_default(&o);
    cr_assert_eq(attn_generate_prepare(&m, &o, &err), ATTN_OK); /* fp32: nothing */
    cr_assert(m.w_bf16 == NULL);
    o.precision = ATTN_PRECISION_BF16;
    cr_assert_eq(attn_generate_prepare(&m, &o, &err), ATTN_OK, "%s", err.msg);
    attn_gpt_acts acts;
    cr_assert_eq(attn_gpt_acts_init(&acts, &m, 1, 4, &err), ATTN_OK, "%s", err.msg);
    const int32_t ids[] = {1, 2, 3, 4};
    float loss;
    cr_assert_eq(attn_gpt_forward(&m, ids, ids, 1, 4, NULL, &acts, &loss, &err), ATTN_ERR_STATE);
    cr_assert(strstr(err.msg, "forward") && strstr(err.msg, "bf16"), "%s", err.msg);
    cr_assert_eq(attn_gpt_backward(&m, &acts, 1.0f, &err), ATTN_ERR_STATE);
    float w[16];
    cr_assert_eq(attn_gpt_attention_weights(&m, &acts, 0, 0, w, &err), ATTN_ERR_STATE);
    attn_gpt_acts_free(&acts);
    const char *dir = tio_mkdtemp();
    char out[4200];
    snprintf(out, sizeof out, "%s/x.safetensors", dir);
    cr_assert_eq(attn_gpt_export(&m, out, ATTN_WEIGHTS_BOOK, &err), ATTN_ERR_STATE, "%s", err.msg);
    cr_assert(access(out, F_OK) != 0, "nothing written");
    tio_rmtree(dir);
    attn_gpt_kv_cache c;
    cr_assert_eq(attn_gpt_kv_init(&c, &m, &err), ATTN_OK, "%s", err.msg);
    float *logits = malloc(strlen(VOCAB) * sizeof *logits);
    cr_assert_eq(attn_gpt_kv_step(&m, &c, 1, logits, &err), ATTN_ERR_STATE); /* fp32 cache */
    cr_assert_eq(attn_gpt_kv_set_precision(&c, &m, ATTN_PRECISION_FP32, &err), ATTN_ERR_STATE);
    cr_assert_eq(attn_gpt_kv_set_precision(&c, &m, ATTN_PRECISION_BF16, &err), ATTN_OK);
    cr_assert_eq(attn_gpt_kv_step(&m, &c, 1, logits, &err), ATTN_OK, "%s", err.msg);
    attn_gpt_kv_free(&c);
    free(logits);
    o.device = ATTN_DEVICE_CUDA; /* no GPU needed: refused before the engine */
    attn_tokenizer tok;
    cr_assert_eq(attn_tokenizer_from_vocab(&tok, VOCAB, strlen(VOCAB), &err), ATTN_OK);
    attn_generator g;
    cr_assert_eq(attn_generator_init(&g, &m, &tok, &o, &err), ATTN_ERR_STATE, "%s", err.msg);
    attn_tokenizer_free(&tok);
    attn_gpt_free(&m);
}
