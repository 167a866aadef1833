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

#include "attn/generate.h"
#include "attn/safetensors.h"

static const char VOCAB[] = "\n !,.:;?ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

typedef struct fixture {
    attn_gpt model;
    attn_tokenizer tok;
    const char *dir;
    char path[4200];
} fixture;

static void make_model(fixture *f, int ctx) {
    attn_error err;
    attn_gpt_config cfg = {.vocab_size = (int)strlen(VOCAB),
                           .context_length = ctx,
                           .emb_dim = 32,
                           .n_heads = 4,
                           .n_layers = 2,
                           .drop_rate = 0.0,
                           .qkv_bias = 0};
    attn_rng rng;
    attn_rng_seed(&rng, 7);
    cr_assert_eq(attn_gpt_init(&f->model, &cfg, &rng, &err), ATTN_OK, "%s", err.msg);
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
