/* attn forward — run one module on a .npy input (and optionally backward), so
 * anyone can hold attn's numbers beside PyTorch's.
 *
 * Weights are what `torch.manual_seed(seed); Class(...)` gives (or a strict
 * safetensors load on top of that, as load_state_dict would); in --train mode
 * dropout then draws from the same generator, in the chosen stream. The
 * default stream is torch-cpu because that is what Debian's (non-MKL) PyTorch
 * draws, and what scripts/gen_parity_fixtures.py checks against; torch-mkl
 * gives the masks of MKL builds (the book's printed tables).
 *
 * Two ways to add a module: a row of fwd_modules[] (write its adapter —
 * create/destroy/out_dim/params/forward/backward over an opaque state — and
 * share everything else: flags, .npy/safetensors I/O, checks, atomic writes,
 * the summary), or, for a module with its own options and inputs, a row of
 * fwd_delegates[] whose function gets `MODULE args...` (argv[0] = MODULE). */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include "attn/dropout.h"
#include "attn/fileio.h"
#include "attn/module.h"
#include "attn/npy.h"
#include "attn/param.h"
#include "attn/rng.h"
#include "attn/safetensors.h"
#include "attn/status.h"
#include "commands.h"

#define CMD "attn forward"

/* Which flags a module understands (anything else is rejected for it). */
enum {
    OPT_HEADS = 1u << 0,
    OPT_CONTEXT = 1u << 1,
    OPT_DROPOUT = 1u << 2,
    OPT_QKV_BIAS = 1u << 3,
};

/* The parsed command line. Dims are -1 when not given. */
typedef struct fwd_opts {
    const char *module;
    long d_in, d_out, heads, context_length;
    double dropout;
    int dropout_given;
    int qkv_bias, train;
    uint64_t seed;
    attn_dropout_stream stream;
    const char *input, *output, *grad_output, *grad_dir, *weights, *save_weights;
} fwd_opts;

/* One runnable module family; state is whatever the adapter allocates. */
typedef struct fwd_module {
    const char *name;
    const char *summary;
    int input_rank; /* 2: x is (T, d_in); 3: x is (B, T, d_in) */
    unsigned options;
    /* d_in is the input's last dim (== --d-in when given). */
    attn_status (*create)(const fwd_opts *o, int d_in, attn_rng *rng, void **state,
                          attn_error *err);
    void (*destroy)(void *state);
    int (*out_dim)(const void *state);
    const attn_param_list *(*params)(const void *state);
    attn_status (*forward)(void *state, const float *x, int B, int T, float *y,
                           const attn_forward_mode *mode, attn_error *err);
    /* dx (B, T, d_in) is overwritten; parameter grads accumulate. */
    attn_status (*backward)(void *state, const float *x, const float *dy, float *dx,
                            attn_error *err);
} fwd_module;

/* --- Adapter: the chapter-3 modules through attn/module.h ---------------- */

static attn_status ch3_create(const fwd_opts *o, attn_module_kind kind, int d_in, attn_rng *rng,
                              void **state, attn_error *err) {
    attn_module_config cfg = {0};
    cfg.kind = kind;
    cfg.d_in = d_in;
    cfg.d_out = (int)o->d_out;
    cfg.num_heads = (int)o->heads;
    cfg.context_length = (int)o->context_length;
    cfg.dropout = o->dropout;
    cfg.qkv_bias = o->qkv_bias;
    attn_module *m = NULL;
    attn_status s = attn_module_create(&cfg, rng, &m, err);
    *state = m;
    return s;
}
#define CH3_CREATE(fn, kind)                                                                       \
    static attn_status fn(const fwd_opts *o, int d_in, attn_rng *rng, void **state,                \
                          attn_error *err) {                                                       \
        return ch3_create(o, kind, d_in, rng, state, err);                                         \
    }
CH3_CREATE(create_sa_v1, ATTN_MODULE_SELF_ATTENTION_V1)
CH3_CREATE(create_sa_v2, ATTN_MODULE_SELF_ATTENTION_V2)
CH3_CREATE(create_causal, ATTN_MODULE_CAUSAL_ATTENTION)
CH3_CREATE(create_wrapper, ATTN_MODULE_MHA_WRAPPER)
CH3_CREATE(create_mha, ATTN_MODULE_MHA)
CH3_CREATE(create_head004, ATTN_MODULE_ATTENTION_HEAD)
CH3_CREATE(create_mha004, ATTN_MODULE_SEED004_MHA)

static void ch3_destroy(void *state) {
    attn_module_destroy(state);
}
static int ch3_out_dim(const void *state) {
    return attn_module_out_dim(state);
}
static const attn_param_list *ch3_params(const void *state) {
    return attn_module_params(state);
}
static attn_status ch3_forward(void *state, const float *x, int B, int T, float *y,
                               const attn_forward_mode *mode, attn_error *err) {
    return attn_module_forward(state, x, B, T, y, mode, err);
}
static attn_status ch3_backward(void *state, const float *x, const float *dy, float *dx,
                                attn_error *err) {
    return attn_module_backward(state, x, dy, dx, err);
}

#define CH3_OPS ch3_destroy, ch3_out_dim, ch3_params, ch3_forward, ch3_backward

static const fwd_module fwd_modules[] = {
    {"self-attention-v1", "SelfAttention_v1 (raw W_query/W_key/W_value)", 2, 0, create_sa_v1,
     CH3_OPS},
    {"self-attention-v2", "SelfAttention_v2 (nn.Linear projections)", 2, OPT_QKV_BIAS, create_sa_v2,
     CH3_OPS},
    {"causal-attention", "CausalAttention", 3, OPT_CONTEXT | OPT_DROPOUT | OPT_QKV_BIAS,
     create_causal, CH3_OPS},
    {"mha-wrapper", "MultiHeadAttentionWrapper (--heads heads of d_out)", 3,
     OPT_HEADS | OPT_CONTEXT | OPT_DROPOUT | OPT_QKV_BIAS, create_wrapper, CH3_OPS},
    {"mha", "MultiHeadAttention (weight splits + out_proj)", 3,
     OPT_HEADS | OPT_CONTEXT | OPT_DROPOUT | OPT_QKV_BIAS, create_mha, CH3_OPS},
    {"attention-head", "seed 004's AttentionHead (--d-out = head_size)", 3,
     OPT_CONTEXT | OPT_DROPOUT | OPT_QKV_BIAS, create_head004, CH3_OPS},
    {"seed004-mha", "seed 004's MultiHeadAttention (heads.i + linear; --d-out = d_in)", 3,
     OPT_HEADS | OPT_CONTEXT | OPT_DROPOUT | OPT_QKV_BIAS, create_mha004, CH3_OPS},
};
#define N_MODULES (sizeof fwd_modules / sizeof fwd_modules[0])

/* Modules with their own command line: `attn forward NAME ...`. */
static const struct {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
} fwd_delegates[] = {
    {"gpt", cmd_forward_gpt, "a trained char-GPT checkpoint on token ids (own options)"},
};
#define N_DELEGATES (sizeof fwd_delegates / sizeof fwd_delegates[0])

static void list_modules(FILE *out) {
    for (size_t i = 0; i < N_MODULES; i++)
        fprintf(out, " %s", fwd_modules[i].name);
    for (size_t i = 0; i < N_DELEGATES; i++)
        fprintf(out, " %s", fwd_delegates[i].name);
    fprintf(out, "\n");
}

static const fwd_module *find_module(const char *name) {
    for (size_t i = 0; i < N_MODULES; i++)
        if (strcmp(fwd_modules[i].name, name) == 0) return &fwd_modules[i];
    return NULL;
}

/* --- Command line ---------------------------------------------------------- */

static void forward_usage(FILE *out) {
    fprintf(out, "usage: attn forward MODULE --d-out N --input X.npy [options]\n"
                 "\n"
                 "Runs MODULE on X (float32 .npy) with the weights torch.manual_seed(SEED) + the\n"
                 "book's constructor gives, writes Y, and with --grad-output runs backward.\n"
                 "\n"
                 "modules:\n");
    for (size_t i = 0; i < N_MODULES; i++)
        fprintf(out, "  %-18s x %-13s %s\n", fwd_modules[i].name,
                fwd_modules[i].input_rank == 2 ? "(T, d_in)" : "(B, T, d_in)",
                fwd_modules[i].summary);
    for (size_t i = 0; i < N_DELEGATES; i++)
        fprintf(out, "  %-18s %s; see 'attn forward %s --help'\n", fwd_delegates[i].name,
                fwd_delegates[i].summary, fwd_delegates[i].name);
    fprintf(out,
            "\n"
            "options:\n"
            "  --input X.npy          input, float32 (required; float64, int32 and int64\n"
            "                         arrays are converted to float32 as numpy's astype)\n"
            "  --output Y.npy         write the output here (atomically)\n"
            "  --d-in N               input size; defaults to X's last dim, checked if given\n"
            "  --d-out N              output size per module (per head for mha-wrapper)\n"
            "  --heads N              num_heads (mha-wrapper, mha; default 1)\n"
            "  --context-length N     causal mask size (default: X's T); T must be <= it\n"
            "  --dropout P            dropout on attention weights, 0 <= P < 1 (default 0)\n"
            "  --qkv-bias             give W_query/W_key/W_value a bias\n"
            "  --seed N               torch.manual_seed before construction (default 123)\n"
            "  --rng STREAM           dropout masks: torch-cpu (default; non-MKL PyTorch such\n"
            "                         as Debian's) or torch-mkl (MKL builds, the book's tables)\n"
            "  --train                training mode: dropout on (default: eval mode)\n"
            "  --weights W.st         load parameters from safetensors (strict: every\n"
            "                         state_dict name, nothing extra, PyTorch shapes)\n"
            "  --save-weights W.st    write the parameters used as safetensors\n"
            "  --grad-output DY.npy   upstream gradient, shaped as Y; runs backward\n"
            "  --grad-dir DIR         with --grad-output: writes DIR/input.npy (dX) and\n"
            "                         DIR/<state_dict name>.npy per parameter gradient\n");
}

static int fail_usage(const char *fmt, const char *a, const char *b) {
    fprintf(stderr, CMD ": ");
    fprintf(stderr, fmt, a, b);
    fprintf(stderr, "\n(see 'attn forward --help')\n");
    return 2;
}

/* A positive int flag value ("--d-out 4"). */
static int parse_dim(const char *flag, const char *v, long *out) {
    char *end = NULL;
    errno = 0;
    long n = strtol(v, &end, 10);
    if (end == v || *end || errno) {
        fprintf(stderr, CMD ": %s must be a positive integer, got '%s'\n", flag, v);
        return -1;
    }
    if (n <= 0) {
        fprintf(stderr, CMD ": %s must be a positive integer, got %ld\n", flag, n);
        return -1;
    }
    if (n > INT_MAX / 16) {
        fprintf(stderr, CMD ": %s is too large (%ld > %d)\n", flag, n, INT_MAX / 16);
        return -1;
    }
    *out = n;
    return 0;
}

static int parse_args(int argc, char **argv, fwd_opts *o, int *want_help) {
    memset(o, 0, sizeof *o);
    o->d_in = o->d_out = o->heads = o->context_length = -1;
    o->seed = 123;
    o->stream = ATTN_STREAM_TORCH_CPU;
    *want_help = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            *want_help = 1;
            return 0;
        }
        if (a[0] != '-') {
            if (o->module) return fail_usage("unexpected argument '%s'%s", a, "");
            o->module = a;
            continue;
        }
        /* Boolean flags. */
        if (strcmp(a, "--qkv-bias") == 0) {
            o->qkv_bias = 1;
            continue;
        }
        if (strcmp(a, "--train") == 0) {
            o->train = 1;
            continue;
        }
        /* Flags with a value: "--flag value" or "--flag=value". */
        char name[64];
        const char *v;
        const char *eq = strchr(a, '=');
        if (eq) {
            size_t n = (size_t)(eq - a);
            if (n >= sizeof name) return fail_usage("unknown option '%s'%s", a, "");
            memcpy(name, a, n);
            name[n] = '\0';
            v = eq + 1;
        } else {
            if (strlen(a) >= sizeof name) return fail_usage("unknown option '%s'%s", a, "");
            strcpy(name, a);
            v = NULL;
        }
        static const char *const valued[] = {
            "--d-in",     "--d-out",   "--heads",       "--context-length", "--dropout",
            "--seed",     "--rng",     "--input",       "--output",         "--grad-output",
            "--grad-dir", "--weights", "--save-weights"};
        int known = 0;
        for (size_t k = 0; k < sizeof valued / sizeof valued[0]; k++)
            if (strcmp(name, valued[k]) == 0) known = 1;
        if (!known) return fail_usage("unknown option '%s'%s", a, "");
        if (!v) {
            if (i + 1 >= argc) return fail_usage("option %s needs a value%s", name, "");
            v = argv[++i];
        }
        if (strcmp(name, "--d-in") == 0) {
            if (parse_dim(name, v, &o->d_in)) return 2;
        } else if (strcmp(name, "--d-out") == 0) {
            if (parse_dim(name, v, &o->d_out)) return 2;
        } else if (strcmp(name, "--heads") == 0) {
            if (parse_dim(name, v, &o->heads)) return 2;
        } else if (strcmp(name, "--context-length") == 0) {
            if (parse_dim(name, v, &o->context_length)) return 2;
        } else if (strcmp(name, "--dropout") == 0) {
            char *end = NULL;
            double p = strtod(v, &end);
            if (end == v || *end || !(p >= 0.0 && p < 1.0)) {
                fprintf(stderr, CMD ": --dropout must be a rate in [0, 1), got '%s'\n", v);
                return 2;
            }
            o->dropout = p;
            o->dropout_given = 1;
        } else if (strcmp(name, "--seed") == 0) {
            char *end = NULL;
            errno = 0;
            unsigned long long s = strtoull(v, &end, 10);
            if (v[0] < '0' || v[0] > '9' || *end || errno) {
                fprintf(stderr, CMD ": --seed must be a non-negative integer, got '%s'\n", v);
                return 2;
            }
            o->seed = (uint64_t)s;
        } else if (strcmp(name, "--rng") == 0) {
            if (attn_dropout_stream_parse(v, &o->stream) != 0) {
                fprintf(stderr, CMD ": --rng must be torch-cpu or torch-mkl, got '%s'\n", v);
                return 2;
            }
        } else if (strcmp(name, "--input") == 0) {
            o->input = v;
        } else if (strcmp(name, "--output") == 0) {
            o->output = v;
        } else if (strcmp(name, "--grad-output") == 0) {
            o->grad_output = v;
        } else if (strcmp(name, "--grad-dir") == 0) {
            o->grad_dir = v;
        } else if (strcmp(name, "--weights") == 0) {
            o->weights = v;
        } else if (strcmp(name, "--save-weights") == 0) {
            o->save_weights = v;
        }
    }
    return 0;
}

/* Flags that do not apply to the module, and required ones missing. */
static int check_opts(const fwd_module *mod, fwd_opts *o) {
    static const struct {
        unsigned bit;
        const char *flag;
    } applies[] = {{OPT_HEADS, "--heads"},
                   {OPT_CONTEXT, "--context-length"},
                   {OPT_DROPOUT, "--dropout"},
                   {OPT_QKV_BIAS, "--qkv-bias"}};
    int given[] = {o->heads != -1, o->context_length != -1, o->dropout_given, o->qkv_bias};
    for (size_t k = 0; k < sizeof given / sizeof given[0]; k++)
        if (given[k] && !(mod->options & applies[k].bit)) {
            fprintf(stderr, CMD ": %s does not apply to %s\n", applies[k].flag, mod->name);
            return 2;
        }
    if (o->d_out == -1) {
        fprintf(stderr, CMD ": --d-out is required\n");
        return 2;
    }
    if (!o->input) {
        fprintf(stderr, CMD ": --input X.npy is required\n");
        return 2;
    }
    if (!o->grad_output != !o->grad_dir) {
        fprintf(stderr, CMD ": --grad-output and --grad-dir go together\n");
        return 2;
    }
    if (o->heads == -1) o->heads = 1;
    if ((mod->options & OPT_HEADS) && strcmp(mod->name, "mha") == 0 && o->d_out % o->heads != 0) {
        fprintf(stderr, CMD ": --d-out (%ld) must be divisible by --heads (%ld)\n", o->d_out,
                o->heads);
        return 2;
    }
    return 0;
}

/* --- Files ------------------------------------------------------------------ */

static int report(const attn_error *err) {
    fprintf(stderr, CMD ": %s\n", err->msg[0] ? err->msg : attn_status_str(err->code));
    return 1;
}

/* Fail before any work when a destination cannot be written (the target is
 * never touched, a FIFO never opened). */
static attn_status probe_writable(const char *path, attn_error *err) {
    return attn_file_check_writable(path, err);
}

/* "-", /dev/stdout, /proc/self/fd/1 or any other name of what stdout is. */
static int is_stdout(const char *path) {
    struct stat a, b;
    if (strcmp(path, "-") == 0) return 1;
    return stat(path, &a) == 0 && fstat(STDOUT_FILENO, &b) == 0 && a.st_dev == b.st_dev &&
           a.st_ino == b.st_ino;
}

static attn_status ensure_dir(const char *dir, attn_error *err) {
    struct stat st;
    if (stat(dir, &st) == 0) {
        if (S_ISDIR(st.st_mode)) return ATTN_OK;
        return attn_fail(err, ATTN_ERR_IO, "--grad-dir %s exists and is not a directory", dir);
    }
    if (mkdir(dir, 0777) != 0)
        return attn_fail(err, ATTN_ERR_IO, "cannot create --grad-dir %s: %s", dir, strerror(errno));
    return ATTN_OK;
}

static char *join_path(const char *dir, const char *name) {
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = malloc(n);
    if (p) snprintf(p, n, "%s/%s", dir, name);
    return p;
}

/* --- Summary ------------------------------------------------------------------ */

static void shape_str(char *buf, size_t cap, int ndim, const int64_t *shape) {
    size_t n = (size_t)snprintf(buf, cap, "(");
    for (int i = 0; i < ndim && n < cap; i++)
        n += (size_t)snprintf(buf + n, cap - n, i ? ", %" PRId64 : "%" PRId64, shape[i]);
    if (n < cap) snprintf(buf + n, cap - n, ndim == 1 ? ",)" : ")");
}

/* sum and max |.| in double: a checksum to compare runs at a glance. */
static void stats(const float *a, size_t n, double *sum, double *maxabs) {
    double s = 0, m = 0;
    for (size_t i = 0; i < n; i++) {
        s += a[i];
        if (fabs(a[i]) > m) m = fabs(a[i]);
    }
    *sum = s;
    *maxabs = m;
}

/* --- The command ------------------------------------------------------------- */

int cmd_forward(int argc, char **argv) {
    if (argc > 1)
        for (size_t i = 0; i < N_DELEGATES; i++)
            if (strcmp(argv[1], fwd_delegates[i].name) == 0)
                return fwd_delegates[i].run(argc - 1, argv + 1);
    fwd_opts o;
    int want_help;
    int rc = parse_args(argc, argv, &o, &want_help);
    if (rc) return rc;
    if (want_help) {
        forward_usage(stdout);
        return 0;
    }
    if (!o.module) {
        fprintf(stderr, CMD ": which module? one of:");
        list_modules(stderr);
        return 2;
    }
    const fwd_module *mod = find_module(o.module);
    if (!mod) {
        for (size_t i = 0; i < N_DELEGATES; i++)
            if (strcmp(o.module, fwd_delegates[i].name) == 0) {
                fprintf(stderr, CMD ": write '%s' first: attn forward %s [its options]\n", o.module,
                        o.module);
                return 2;
            }
        fprintf(stderr, CMD ": unknown module '%s'; one of:", o.module);
        list_modules(stderr);
        return 2;
    }
    if ((rc = check_opts(mod, &o))) return rc;

    attn_error err;
    attn_error_clear(&err);
    attn_npy x = {0}, dy = {0};
    void *state = NULL;
    float *y = NULL, *dx = NULL;
    char *path = NULL;
    rc = 1;

    /* Input: float32, rank and d_in as the module expects, nothing empty. */
    if (attn_npy_load_as_f32(o.input, &x, NULL, &err)) goto fail;
    int64_t want[3] = {-1, -1, o.d_in};
    if (mod->input_rank == 2) want[1] = o.d_in;
    const char *dims_name = mod->input_rank == 2 ? "(T, d_in)" : "(B, T, d_in)";
    if (attn_npy_expect_shape(&x, o.input, mod->input_rank, want, dims_name, &err)) goto fail;
    int64_t B64 = mod->input_rank == 2 ? 1 : x.shape[0];
    int64_t T64 = x.shape[mod->input_rank - 2], d_in64 = x.shape[mod->input_rank - 1];
    if (B64 <= 0 || T64 <= 0 || d_in64 <= 0) {
        attn_fail(&err, ATTN_ERR_SHAPE, "%s: empty input, every dim of %s must be positive",
                  o.input, dims_name);
        goto fail;
    }
    if (B64 > INT_MAX / 16 || T64 > INT_MAX / 16 || d_in64 > INT_MAX / 16) {
        attn_fail(&err, ATTN_ERR_SHAPE, "%s: input too large", o.input);
        goto fail;
    }
    int B = (int)B64, T = (int)T64, d_in = (int)d_in64;
    if (o.context_length == -1) o.context_length = T;
    if ((mod->options & OPT_CONTEXT) && T > o.context_length) {
        attn_fail(&err, ATTN_ERR_SHAPE,
                  "%s has T = %d tokens, more than --context-length %ld (the causal mask size)",
                  o.input, T, o.context_length);
        goto fail;
    }

    /* Destinations: fail now rather than after the work. */
    if (o.output && probe_writable(o.output, &err)) goto fail;
    if (o.save_weights && probe_writable(o.save_weights, &err)) goto fail;

    /* torch.manual_seed(seed); Class(...) [; load_state_dict(file)]. */
    attn_rng rng;
    attn_rng_seed(&rng, o.seed);
    if (mod->create(&o, d_in, &rng, &state, &err)) goto fail;
    const attn_param_list *params = mod->params(state);
    if (o.weights && attn_safetensors_load_params(o.weights, params, &err)) goto fail;

    int out_dim = mod->out_dim(state);
    int64_t yshape[3];
    int yrank = mod->input_rank;
    if (yrank == 2) {
        yshape[0] = T;
        yshape[1] = out_dim;
    } else {
        yshape[0] = B;
        yshape[1] = T;
        yshape[2] = out_dim;
    }
    size_t ny = (size_t)B * (size_t)T * (size_t)out_dim;
    if (o.grad_output) {
        if (attn_npy_load_as_f32(o.grad_output, &dy, NULL, &err)) goto fail;
        if (attn_npy_expect_shape(&dy, o.grad_output, yrank, yshape,
                                  yrank == 2 ? "(T, d_out)" : "(B, T, out)", &err))
            goto fail;
        if (ensure_dir(o.grad_dir, &err)) goto fail;
        if (!(path = join_path(o.grad_dir, "input.npy"))) goto nomem;
        if (probe_writable(path, &err)) goto fail;
        free(path);
        path = NULL;
    }

    y = malloc(ny * sizeof *y);
    if (!y) goto nomem;
    attn_forward_mode mode = {o.train, &rng, o.stream};
    if (mod->forward(state, x.data, B, T, y, &mode, &err)) goto fail;
    if (o.grad_output) {
        attn_param_list_zero_grad(params);
        if (!(dx = malloc(x.numel * sizeof *dx))) goto nomem;
        if (mod->backward(state, x.data, dy.data, dx, &err)) goto fail;
    }

    /* Write everything (each file atomically). */
    if (o.output && attn_npy_save_f32(o.output, y, yrank, yshape, &err)) goto fail;
    if (o.grad_output) {
        if (!(path = join_path(o.grad_dir, "input.npy"))) goto nomem;
        if (attn_npy_save_f32(path, dx, x.ndim, x.shape, &err)) goto fail;
        for (int i = 0; i < params->count; i++) {
            const attn_param *p = &params->items[i];
            char file[ATTN_PARAM_NAME_MAX + 8];
            snprintf(file, sizeof file, "%s.npy", p->name);
            free(path);
            if (!(path = join_path(o.grad_dir, file))) goto nomem;
            if (attn_npy_save_f32(path, p->grad, p->ndim, p->shape, &err)) goto fail;
        }
    }
    if (o.save_weights) {
        char seed_s[32];
        snprintf(seed_s, sizeof seed_s, "%" PRIu64, o.seed);
        attn_st_kv meta[] = {{"module", mod->name}, {"seed", seed_s}};
        if (attn_safetensors_write_params(o.save_weights, params, meta, 2, &err)) goto fail;
    }

    /* Summary on stdout, or stderr when stdout carries Y (--output -). */
    FILE *so = o.output && is_stdout(o.output) ? stderr : stdout;
    char xs[96], ys[96];
    double sum, maxabs;
    shape_str(xs, sizeof xs, x.ndim, x.shape);
    shape_str(ys, sizeof ys, yrank, yshape);
    stats(y, ny, &sum, &maxabs);
    fprintf(so, "%s: x %s -> y %s, seed %" PRIu64 ", %s", mod->name, xs, ys, o.seed,
            o.train ? "train" : "eval");
    if (o.train && o.dropout > 0)
        fprintf(so, " (dropout %g, %s)", o.dropout, attn_dropout_stream_name(o.stream));
    fprintf(so, "\n  y %s: sum %.9g, max|.| %.9g%s%s\n", ys, sum, maxabs, o.output ? " -> " : "",
            o.output ? o.output : "");
    if (o.grad_output) {
        stats(dx, x.numel, &sum, &maxabs);
        fprintf(so, "  grad input %s: sum %.9g, max|.| %.9g\n", xs, sum, maxabs);
        for (int i = 0; i < params->count; i++) {
            const attn_param *p = &params->items[i];
            char ps[96];
            shape_str(ps, sizeof ps, p->ndim, p->shape);
            stats(p->grad, p->numel, &sum, &maxabs);
            fprintf(so, "  grad %s %s: sum %.9g, max|.| %.9g\n", p->name, ps, sum, maxabs);
        }
        fprintf(so, "  gradients -> %s/\n", o.grad_dir);
    }
    rc = 0;
    goto done;

nomem:
    attn_fail(&err, ATTN_ERR_NOMEM, "out of memory");
fail:
    report(&err);
    rc = 1;
done:
    free(path);
    free(y);
    free(dx);
    if (state) mod->destroy(state);
    attn_npy_free(&x);
    attn_npy_free(&dy);
    return rc;
}
