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
 * The modules and what each reads (heads, context, dropout, bias) are the
 * library's kind table (attn/module.h): a new kind appears here by itself.
 * A module with its own options and inputs is a row of fwd_delegates[],
 * whose function gets `MODULE args...` (argv[0] = MODULE). */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include "attn/checkpoint.h"
#include "attn/dropout.h"
#include "attn/fileio.h"
#include "attn/membudget.h"
#include "attn/module.h"
#include "attn/npy.h"
#include "attn/param.h"
#include "attn/rng.h"
#include "attn/safetensors.h"
#include "attn/status.h"
#include "commands.h"
#include "threads.h"

#define CMD "attn forward"
#define DIM_MAX (INT_MAX / 16) /* keeps B * T * d products in range */

typedef struct fwd_opts {
    const char *input, *output, *rng, *weights, *save_weights, *grad_output, *grad_dir;
    const char *positions;
    long long d_in, d_out, heads, context_length, threads, kv_heads, window;
    double dropout, rope_theta, rope_fraction, softcap;
    double max_memory; /* bytes; 0: the memory available now */
    int qkv_bias, train, qk_norm;
    unsigned long long seed;
} fwd_opts;

enum {
    FWD_INPUT,
    FWD_OUTPUT,
    FWD_D_IN,
    FWD_D_OUT,
    FWD_HEADS,
    FWD_CONTEXT,
    FWD_DROPOUT,
    FWD_QKV_BIAS,
    FWD_SEED,
    FWD_RNG,
    FWD_TRAIN,
    FWD_WEIGHTS,
    FWD_SAVE_WEIGHTS,
    FWD_GRAD_OUTPUT,
    FWD_GRAD_DIR,
    FWD_THREADS,
    FWD_MAX_MEMORY,
    FWD_KV_HEADS,
    FWD_WINDOW,
    FWD_POSITIONS,
    FWD_ROPE_THETA,
    FWD_ROPE_FRACTION,
    FWD_QK_NORM,
    FWD_SOFTCAP,
    FWD_OPT_COUNT
};

#define OFF(f) offsetof(fwd_opts, f)
static const char *const position_names[] = {"none", "rope", "alibi", NULL};
static const cli_option fwd_opts_table[] = {
    [FWD_INPUT] = {"input", CLI_STRING, "X.npy", OFF(input), .required = 1,
                   .help = "input, float32 (float64, int32 and int64 arrays are\n"
                           "converted to float32 as numpy's astype)"},
    [FWD_OUTPUT] = {"output", CLI_STRING, "Y.npy", OFF(output),
                    .help = "write the output here (atomically; - = stdout)"},
    [FWD_D_IN] = {"d-in", CLI_INT, "N", OFF(d_in), 1, DIM_MAX,
                  .help = "input size; defaults to X's last dim, checked if given"},
    [FWD_D_OUT] = {"d-out", CLI_INT, "N", OFF(d_out), 1, DIM_MAX, .required = 1,
                   .help = "output size per module (per head for mha-wrapper)"},
    [FWD_HEADS] = {"heads", CLI_INT, "N", OFF(heads), 1, DIM_MAX, .def = "1",
                   .help = "num_heads (modules with heads)"},
    [FWD_CONTEXT] = {"context-length", CLI_INT, "N", OFF(context_length), 1, DIM_MAX,
                     .help = "causal mask size (default: X's T); T must be <= it"},
    [FWD_DROPOUT] = {"dropout", CLI_FLOAT, "P", OFF(dropout), 0, 1, .hi_open = 1, .def = "0",
                     .help = "dropout on the attention weights (with --train)"},
    [FWD_QKV_BIAS] = {"qkv-bias", CLI_FLAG, .offset = OFF(qkv_bias),
                      .help = "give W_query/W_key/W_value a bias"},
    [FWD_SEED] = {"seed", CLI_U64, "N", OFF(seed), .def = "123",
                  .help = "torch.manual_seed before construction"},
    [FWD_RNG] = {"rng", CLI_CHOICE, NULL, OFF(rng), .choices = cli_stream_choices,
                 .def = "torch-cpu",
                 .help = "dropout masks: torch-cpu (non-MKL PyTorch such as\n"
                         "Debian's) or torch-mkl (MKL builds, the book's tables)"},
    [FWD_TRAIN] = {"train", CLI_FLAG, .offset = OFF(train),
                   .help = "training mode: dropout on (default: eval mode)"},
    [FWD_WEIGHTS] = {"weights", CLI_STRING, "W.st", OFF(weights),
                     .help = "load parameters from safetensors (strict: every\n"
                             "state_dict name, nothing extra, PyTorch shapes)"},
    [FWD_SAVE_WEIGHTS] = {"save-weights", CLI_STRING, "W.st", OFF(save_weights),
                          .help = "write the parameters used as safetensors"},
    [FWD_GRAD_OUTPUT] = {"grad-output", CLI_STRING, "DY.npy", OFF(grad_output),
                         .help = "upstream gradient, shaped as Y; runs backward"},
    [FWD_GRAD_DIR] = {"grad-dir", CLI_STRING, "DIR", OFF(grad_dir),
                      .help = "with --grad-output: writes DIR/input.npy (dX) and\n"
                              "DIR/<state_dict name>.npy per parameter gradient"},
    [FWD_THREADS] = CLI_THREADS_OPTION(OFF(threads)),
    [FWD_MAX_MEMORY] = CLI_MAX_MEMORY_OPTION(OFF(max_memory)),
    /* mha's attention variants (docs/model-variants.md) */
    [FWD_KV_HEADS] = {"kv-heads", CLI_INT, "K", OFF(kv_heads), 1, DIM_MAX,
                      .help = "mha: key/value heads, dividing --heads (grouped-query)"},
    [FWD_WINDOW] = {"window", CLI_INT, "W", OFF(window), 0, DIM_MAX, .def = "0",
                    .help = "mha: a query sees its last W keys (0: all)"},
    [FWD_POSITIONS] = {"positions", CLI_CHOICE, NULL, OFF(positions), .choices = position_names,
                       .def = "none", .help = "mha: rope (rotary q, k) or alibi (score biases)"},
    [FWD_ROPE_THETA] = {"rope-theta", CLI_FLOAT, "T", OFF(rope_theta), 0, 1e12, .lo_open = 1,
                        .def = "10000", .help = "mha: RoPE's base"},
    [FWD_ROPE_FRACTION] = {"rope-fraction", CLI_FLOAT, "F", OFF(rope_fraction), 0, 1, .lo_open = 1,
                           .def = "1", .help = "mha: the share of head_dim RoPE rotates"},
    [FWD_QK_NORM] = {"qk-norm", CLI_FLAG, .offset = OFF(qk_norm),
                     .help = "mha: RMSNorm on each head's q and k"},
    [FWD_SOFTCAP] = {"softcap", CLI_FLOAT, "C", OFF(softcap), 0, 1e6, .def = "0",
                     .help = "mha: scores C tanh(s / C) (0: off)"},
};
CLI_TABLE_CHECK(fwd_opts_table, FWD_OPT_COUNT);

/* Modules with their own command line: `attn forward NAME ...`. */
static const struct {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
} fwd_delegates[] = {
    {"gpt", cmd_forward_gpt, "a trained char-GPT checkpoint on token ids (own options)"},
};
#define N_DELEGATES (sizeof fwd_delegates / sizeof fwd_delegates[0])

static void list_modules_help(FILE *out) {
    fprintf(out, "\nmodules:\n");
    for (int i = 0; i < ATTN_MODULE_KIND_COUNT; i++) {
        const attn_module_kind_info *k = attn_module_kind_get((attn_module_kind)i);
        fprintf(out, "  %-18s x %s\n  %-18s %s\n", k->name,
                k->input_rank == 2 ? "(T, d_in)" : "(B, T, d_in)", "", k->summary);
    }
    for (size_t i = 0; i < N_DELEGATES; i++)
        fprintf(out, "  %-18s %s;\n  %-18s see 'attn forward %s --help'\n", fwd_delegates[i].name,
                fwd_delegates[i].summary, "", fwd_delegates[i].name);
}

const cli_command forward_cli = {
    "forward",
    "attn forward MODULE --d-out N --input X.npy [options]",
    "\n"
    "Runs MODULE on X with the weights torch.manual_seed(SEED) + the book's\n"
    "constructor gives, writes Y, and with --grad-output runs backward.\n",
    fwd_opts_table,
    FWD_OPT_COUNT,
    1};

static void list_modules(FILE *out) {
    for (int i = 0; i < ATTN_MODULE_KIND_COUNT; i++)
        fprintf(out, " %s", attn_module_kind_name((attn_module_kind)i));
    for (size_t i = 0; i < N_DELEGATES; i++)
        fprintf(out, " %s", fwd_delegates[i].name);
    fprintf(out, "\n");
}

/* The module named on the command line; 2 (printed) when there is none. */
static int find_module(const cli_parsed *p, const attn_module_kind_info **out) {
    if (p->n_positional == 0) {
        fprintf(stderr, CMD ": which module? one of:");
        list_modules(stderr);
        return 2;
    }
    const char *name = p->positional[0];
    attn_module_kind kind;
    if (attn_module_kind_parse(name, &kind) == 0) {
        *out = attn_module_kind_get(kind);
        return 0;
    }
    for (size_t i = 0; i < N_DELEGATES; i++)
        if (strcmp(name, fwd_delegates[i].name) == 0) {
            fprintf(stderr, CMD ": write '%s' first: attn forward %s [its options]\n", name, name);
            return 2;
        }
    cli_near near;
    char hint[96];
    cli_near_init(&near, name, strlen(name));
    for (int i = 0; i < ATTN_MODULE_KIND_COUNT; i++)
        cli_near_add(&near, attn_module_kind_name((attn_module_kind)i));
    for (size_t i = 0; i < N_DELEGATES; i++)
        cli_near_add(&near, fwd_delegates[i].name);
    fprintf(stderr, CMD ": unknown module '%s'%s; one of:", name,
            cli_near_hint(&near, "", hint, sizeof hint));
    list_modules(stderr);
    return 2;
}

/* Flags that do not apply to the module (what its kind row does not use). */
static int check_opts(const attn_module_kind_info *k, const cli_parsed *p, const fwd_opts *o) {
    static const struct {
        int row;
        unsigned uses;
    } applies[] = {{FWD_HEADS, ATTN_MODULE_USES_HEADS},
                   {FWD_CONTEXT, ATTN_MODULE_USES_CONTEXT},
                   {FWD_DROPOUT, ATTN_MODULE_USES_DROPOUT},
                   {FWD_QKV_BIAS, ATTN_MODULE_USES_QKV_BIAS},
                   {FWD_KV_HEADS, ATTN_MODULE_USES_VARIANTS},
                   {FWD_WINDOW, ATTN_MODULE_USES_VARIANTS},
                   {FWD_POSITIONS, ATTN_MODULE_USES_VARIANTS},
                   {FWD_ROPE_THETA, ATTN_MODULE_USES_VARIANTS},
                   {FWD_ROPE_FRACTION, ATTN_MODULE_USES_VARIANTS},
                   {FWD_QK_NORM, ATTN_MODULE_USES_VARIANTS},
                   {FWD_SOFTCAP, ATTN_MODULE_USES_VARIANTS}};
    for (size_t i = 0; i < sizeof applies / sizeof applies[0]; i++)
        if (p->given[applies[i].row] && !(k->uses & applies[i].uses)) {
            fprintf(stderr, CMD ": --%s does not apply to %s\n",
                    fwd_opts_table[applies[i].row].name, k->name);
            return 2;
        }
    if (!o->grad_output != !o->grad_dir) {
        fprintf(stderr, CMD ": --grad-output and --grad-dir go together\n");
        return 2;
    }
    return 0;
}

/* --- Files ------------------------------------------------------------------ */

static int report(const attn_error *err) {
    fprintf(stderr, CMD ": %s\n", err->msg[0] ? err->msg : attn_status_str(err->code));
    return 1;
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

/* dir/name, checked for length. */
static attn_status join_path(char *buf, size_t cap, const char *dir, const char *name,
                             attn_error *err) {
    int n = snprintf(buf, cap, "%s/%s", dir, name);
    if (n < 0 || (size_t)n >= cap)
        return attn_fail(err, ATTN_ERR_INVALID_ARG, "--grad-dir %s: path too long", dir);
    return ATTN_OK;
}

/* --- Summary ------------------------------------------------------------------ */

static void shape_str(char *buf, size_t cap, int ndim, const int64_t *shape) {
    size_t n = (size_t)snprintf(buf, cap, "(");
    for (int i = 0; i < ndim && n < cap; i++)
        n += (size_t)snprintf(buf + n, cap - n, i ? ", %" PRId64 : "%" PRId64, shape[i]);
    if (n < cap) snprintf(buf + n, cap - n, ndim == 1 ? ",)" : ")");
}

/* sum and max |.| in double: a checksum to compare runs at a glance. */
static void print_stats(FILE *so, const char *what, const char *shape, const float *a, size_t n) {
    double s = 0, m = 0;
    for (size_t i = 0; i < n; i++) {
        s += a[i];
        if (fabs(a[i]) > m) m = fabs(a[i]);
    }
    fprintf(so, "  %s %s: sum %.9g, max|.| %.9g", what, shape, s, m);
}

/* --- One run ------------------------------------------------------------------ */

/* Everything one run holds; freed by run_free. */
typedef struct fwd_run {
    const fwd_opts *o;
    const attn_module_kind_info *kind;
    attn_npy x, dy;
    int B, T, d_in;
    attn_module *m;
    const attn_param_list *params;
    int yrank;
    int64_t yshape[3];
    size_t ny;
    float *y, *dx;
    attn_rng rng;
    char path[4096];
    int refused; /* an output path was refused: a usage error */
} fwd_run;

static void run_free(fwd_run *r) {
    free(r->y);
    free(r->dx);
    attn_module_free(r->m);
    attn_npy_free(&r->x);
    attn_npy_free(&r->dy);
}

/* X: float32, the module's rank, d_in as given, nothing empty or too large. */
static attn_status load_input(fwd_run *r, attn_error *err) {
    const fwd_opts *o = r->o;
    const int rank = r->kind->input_rank;
    const char *dims = rank == 2 ? "(T, d_in)" : "(B, T, d_in)";
    int64_t want[3] = {-1, -1, o->d_in ? o->d_in : -1};
    if (rank == 2) want[1] = want[2];
    attn_status s = attn_npy_load_as_f32(o->input, &r->x, NULL, err);
    if (!s) s = attn_npy_expect_shape(&r->x, o->input, rank, want, dims, err);
    if (s) return s;
    const int64_t B = rank == 2 ? 1 : r->x.shape[0], T = r->x.shape[rank - 2],
                  d_in = r->x.shape[rank - 1];
    if (B <= 0 || T <= 0 || d_in <= 0)
        return attn_fail(err, ATTN_ERR_SHAPE, "%s: empty input, every dim of %s must be positive",
                         o->input, dims);
    if (B > DIM_MAX || T > DIM_MAX || d_in > DIM_MAX)
        return attn_fail(err, ATTN_ERR_SHAPE, "%s: input too large", o->input);
    r->B = (int)B, r->T = (int)T, r->d_in = (int)d_in;
    return ATTN_OK;
}

/* The module's config from the options and X; a bad one is a usage error. */
/* mha's attention variants from the options (zeros for the other kinds). */
static attn_attention_spec variants_of(const fwd_run *r) {
    const fwd_opts *o = r->o;
    attn_attention_spec v;
    memset(&v, 0, sizeof v);
    if (r->kind->uses & ATTN_MODULE_USES_VARIANTS) {
        v.kv_heads = (int)o->kv_heads;
        v.window = (int)o->window;
        v.positions = strcmp(o->positions, "rope") == 0    ? ATTN_POSITIONS_ROPE
                      : strcmp(o->positions, "alibi") == 0 ? ATTN_POSITIONS_ALIBI
                                                           : ATTN_POSITIONS_NONE;
        v.rope_theta = o->rope_theta;
        v.rope_fraction = o->rope_fraction;
        v.qk_norm = o->qk_norm;
        v.softcap = o->softcap;
    }
    return v;
}

static int make_config(const fwd_run *r, attn_module_config *cfg) {
    const fwd_opts *o = r->o;
    memset(cfg, 0, sizeof *cfg);
    if ((r->kind->uses & ATTN_MODULE_USES_CONTEXT) && o->context_length &&
        o->context_length < r->T) { /* the causal mask covers X's tokens */
        char why[64];
        snprintf(why, sizeof why, "at least the T = %d tokens of --input", r->T);
        return cli_bad_range(&forward_cli, &fwd_opts_table[FWD_CONTEXT], r->T, DIM_MAX, why,
                             o->context_length);
    }
    cfg->kind = r->kind->kind;
    cfg->d_in = r->d_in;
    cfg->d_out = (int)o->d_out;
    cfg->num_heads = (int)o->heads;
    cfg->context_length = o->context_length ? (int)o->context_length : r->T;
    cfg->dropout = o->dropout;
    cfg->qkv_bias = o->qkv_bias;
    attn_error err;
    const attn_attention_spec v = variants_of(r);
    if (attn_module_variant_validate(cfg, &v, &err) == ATTN_OK) return 0;
    fprintf(stderr, CMD ": %s\n", err.msg);
    return 2;
}

/* torch.manual_seed(seed); Class(...) [; load_state_dict(file)], and Y's shape. */
static attn_status create_module(fwd_run *r, const attn_module_config *cfg, attn_error *err) {
    attn_rng_seed(&r->rng, r->o->seed);
    const attn_attention_spec v = variants_of(r);
    attn_status s = attn_module_create_variant(cfg, &v, &r->rng, &r->m, err);
    if (s) return s;
    r->params = attn_module_params(r->m);
    if (r->o->weights && (s = attn_safetensors_load_params(r->o->weights, r->params, err)))
        return s;
    const int out_dim = attn_module_out_dim(r->m);
    r->yrank = r->kind->input_rank;
    if (r->yrank == 2) {
        r->yshape[0] = r->T, r->yshape[1] = out_dim;
    } else {
        r->yshape[0] = r->B, r->yshape[1] = r->T, r->yshape[2] = out_dim;
    }
    r->ny = (size_t)r->B * (size_t)r->T * (size_t)out_dim;
    return ATTN_OK;
}

/* Fail before any work when a destination cannot be written (the target is
 * never touched, a FIFO never opened). */
/* An output is never an input, another output or in a run folder. */
static attn_status not_input(const fwd_opts *o, const char *path, attn_error *err) {
    const char *inputs[3] = {o->input, o->weights, o->grad_output};
    const char *outputs[3] = {o->output, o->save_weights, o->grad_dir};
    for (int i = 0; i < 3; i++)
        if (outputs[i] == path) outputs[i] = NULL;
    return attn_output_check(path, inputs, 3, outputs, 3, err);
}

static attn_status probe_output(const fwd_opts *o, const char *path, attn_error *err) {
    attn_status s = not_input(o, path, err);
    return s ? s : attn_file_check_writable(path, err);
}

static attn_status probe_outputs(const fwd_opts *o, attn_error *err) {
    attn_status s = o->output ? probe_output(o, o->output, err) : ATTN_OK;
    if (!s && o->save_weights) s = probe_output(o, o->save_weights, err);
    if (!s && o->grad_dir) s = not_input(o, o->grad_dir, err); /* before it is made */
    return s;
}

/* DY, shaped as Y, and the gradients' folder. */
static attn_status load_grad(fwd_run *r, attn_error *err) {
    const fwd_opts *o = r->o;
    if (!o->grad_output) return ATTN_OK;
    attn_status s = attn_npy_load_as_f32(o->grad_output, &r->dy, NULL, err);
    if (!s)
        s = attn_npy_expect_shape(&r->dy, o->grad_output, r->yrank, r->yshape,
                                  r->yrank == 2 ? "(T, d_out)" : "(B, T, out)", err);
    if (!s) s = ensure_dir(o->grad_dir, err);
    if (!s) s = join_path(r->path, sizeof r->path, o->grad_dir, "input.npy", err);
    if (!s) s = r->refused = not_input(o, r->path, err);
    if (!s) s = attn_file_check_writable(r->path, err);
    for (int i = 0; !s && i < r->params->count; i++) { /* DIR/<param>.npy: no input either */
        char file[ATTN_PARAM_NAME_MAX + 8];
        snprintf(file, sizeof file, "%s.npy", r->params->items[i].name);
        s = join_path(r->path, sizeof r->path, o->grad_dir, file, err);
        if (!s) s = r->refused = not_input(o, r->path, err);
    }
    return s;
}

static attn_status compute(fwd_run *r, attn_error *err) {
    attn_dropout_stream stream;
    attn_dropout_stream_parse(r->o->rng, &stream); /* the table allows only valid names */
    if (!(r->y = malloc(r->ny * sizeof *r->y)))
        return attn_fail(err, ATTN_ERR_NOMEM, "out of memory");
    attn_forward_mode mode = {r->o->train, &r->rng, stream};
    attn_status s = attn_module_forward(r->m, r->x.data, r->B, r->T, r->y, &mode, err);
    if (s || !r->o->grad_output) return s;
    attn_param_list_zero_grad(r->params);
    if (!(r->dx = calloc(r->x.numel, sizeof *r->dx))) /* backward accumulates */
        return attn_fail(err, ATTN_ERR_NOMEM, "out of memory");
    return attn_module_backward(r->m, r->x.data, r->dy.data, r->dx, err);
}

/* Y, the gradients and the weights, each file atomically. */
static attn_status write_outputs(fwd_run *r, attn_error *err) {
    const fwd_opts *o = r->o;
    attn_status s = o->output ? attn_npy_save_f32(o->output, r->y, r->yrank, r->yshape, err) : 0;
    if (s) return s;
    if (o->grad_output) {
        s = join_path(r->path, sizeof r->path, o->grad_dir, "input.npy", err);
        if (!s) s = attn_npy_save_f32(r->path, r->dx, r->x.ndim, r->x.shape, err);
        for (int i = 0; !s && i < r->params->count; i++) {
            const attn_param *p = &r->params->items[i];
            char file[ATTN_PARAM_NAME_MAX + 8];
            snprintf(file, sizeof file, "%s.npy", p->name);
            s = join_path(r->path, sizeof r->path, o->grad_dir, file, err);
            if (!s) s = attn_npy_save_f32(r->path, p->grad, p->ndim, p->shape, err);
        }
        if (s) return s;
    }
    if (!o->save_weights) return ATTN_OK;
    char seed_s[32];
    snprintf(seed_s, sizeof seed_s, "%llu", o->seed);
    attn_st_kv meta[] = {{"module", r->kind->name}, {"seed", seed_s}};
    return attn_safetensors_write_params(o->save_weights, r->params, meta, 2, err);
}

/* Summary on stdout, or stderr when stdout carries Y (--output -). */
static void print_summary(const fwd_run *r) {
    const fwd_opts *o = r->o;
    FILE *so = o->output && is_stdout(o->output) ? stderr : stdout;
    char xs[96], ys[96];
    shape_str(xs, sizeof xs, r->x.ndim, r->x.shape);
    shape_str(ys, sizeof ys, r->yrank, r->yshape);
    fprintf(so, "%s: x %s -> y %s, seed %llu, %s", r->kind->name, xs, ys, o->seed,
            o->train ? "train" : "eval");
    if (o->train && o->dropout > 0) fprintf(so, " (dropout %g, %s)", o->dropout, o->rng);
    fprintf(so, "\n");
    print_stats(so, "y", ys, r->y, r->ny);
    fprintf(so, "%s%s\n", o->output ? " -> " : "", o->output ? o->output : "");
    if (!o->grad_output) return;
    print_stats(so, "grad input", xs, r->dx, r->x.numel);
    fprintf(so, "\n");
    for (int i = 0; i < r->params->count; i++) {
        const attn_param *p = &r->params->items[i];
        char ps[96], what[ATTN_PARAM_NAME_MAX + 8];
        shape_str(ps, sizeof ps, p->ndim, p->shape);
        snprintf(what, sizeof what, "grad %s", p->name);
        print_stats(so, what, ps, p->grad, p->numel);
        fprintf(so, "\n");
    }
    fprintf(so, "  gradients -> %s/\n", o->grad_dir);
}

static int run_module(const fwd_opts *o, const attn_module_kind_info *kind) {
    fwd_run r;
    memset(&r, 0, sizeof r);
    r.o = o;
    r.kind = kind;
    attn_error err;
    attn_error_clear(&err);
    attn_module_config cfg;
    int rc = 0;
    const attn_status ls = load_input(&r, &err);
    if (ls) {
        report(&err);
        rc = ls == ATTN_ERR_SHAPE ? 2 : 1; /* X against the options (--d-in): usage */
    } else if (!(rc = make_config(&r, &cfg))) {
        if (probe_outputs(o, &err)) /* a refused output path is a usage error */
            rc = err.code == ATTN_ERR_INVALID_ARG ? (report(&err), 2) : report(&err);
        /* The sizes against the budget before a byte of the module exists. */
        else if (attn_mem_check(attn_module_memory(&cfg, r.B, r.T), o->max_memory,
                                "the module (weights, gradients, masks and buffers)", &err) ||
                 create_module(&r, &cfg, &err) || load_grad(&r, &err) || compute(&r, &err) ||
                 write_outputs(&r, &err))
            rc = report(&err) + (r.refused == ATTN_ERR_INVALID_ARG);
        else
            print_summary(&r);
    }
    run_free(&r);
    return rc;
}

int cmd_forward(int argc, char **argv) {
    if (argc > 1)
        for (size_t i = 0; i < N_DELEGATES; i++)
            if (strcmp(argv[1], fwd_delegates[i].name) == 0)
                return fwd_delegates[i].run(argc - 1, argv + 1);
    fwd_opts o;
    cli_parsed parsed;
    int rc = cli_parse(&forward_cli, argc, argv, &o, &parsed);
    if (rc == CLI_HELP) list_modules_help(stdout); /* the library's kinds */
    if (rc) return rc == CLI_HELP ? 0 : rc;
    const attn_module_kind_info *kind = NULL;
    if ((rc = find_module(&parsed, &kind)) || (rc = check_opts(kind, &parsed, &o))) return rc;
    cli_use_threads((int)o.threads, 1);
    return run_module(&o, kind);
}
