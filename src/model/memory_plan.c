/* The memory a run will hold (see attn/memory_plan.h): each buffer sized as
 * the code that allocates it sizes it, and counted only on the paths that
 * write it (calloc'd pages never written take no memory). The comments
 * name that code. */
#include "attn/memory_plan.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "attn/feedforward.h"
#include "attn/gpt_family.h"
#include "attn/membudget.h"

#define F32 4.0
#define B16 2.0
#define MIB 1048576.0

/* The process before any of the run's buffers: libraries' pages, the
 * heap's start, OpenMP's and OpenBLAS's threads (the peak RSS of attn
 * generate on a 100 K-parameter model is 12.1 MiB, of a tiny train run
 * less its buffers 11.5); per thread its stack and BLAS packing buffer; the
 * bf16 engine's oneDNN primitives, JIT code and scratchpad (train, bench
 * mha; generation's bf16 step does not use it). */
#define PROCESS_BYTES (12.0 * MIB)
#define THREAD_BYTES (0.25 * MIB)
#define ONEDNN_BYTES (4.5 * MIB)

/* GPT-2's BPE in memory: the encoder's and merges' tables and the files'
 * text: 6.5 MiB measured in a dry run, ~9 while a checkpoint's copy (in its
 * JSON header) is parsed. */
#define GPT2_TOKENIZER_BYTES (10.0 * MIB)

/* attn bench's own buffers are 2 MiB aligned and advised onto huge pages
 * (cmd_bench.c alloc_floats): each takes whole 2 MiB pages. */
#define BENCH_PAGE (2.0 * MIB)

/* The lean head's chunk and its bf16 product rows (attn/gpt.h). */
#define HEAD_ROWS ((double)ATTN_GPT_HEAD_ROWS)
#define HEAD_DW_ROWS ((double)ATTN_GPT_HEAD_DW_ROWS)

static double max2(double a, double b) {
    return a > b ? a : b;
}

static double min2(double a, double b) {
    return a < b ? a : b;
}

/* The config and run as doubles. */
typedef struct dims {
    double B, T, N, C, H, L, V, Vh, hd, kv, KVH, d3, F, F1, ctx;
    int bf16, masks, grouped;
    attn_dropout_stream stream;
} dims;

static dims dims_of(const attn_gpt_config *c, const attn_mem_run *r) {
    dims d;
    memset(&d, 0, sizeof d);
    d.ctx = c->context_length > 0 ? c->context_length : 0;
    d.B = r->batch > 0 ? r->batch : 1;
    d.T = r->tokens > 0 ? r->tokens : d.ctx;
    d.N = d.B * d.T;
    d.C = c->emb_dim > 0 ? c->emb_dim : 0;
    d.H = c->n_heads > 0 ? c->n_heads : 1;
    d.L = c->n_layers > 0 ? c->n_layers : 0;
    d.V = c->vocab_size > 0 ? c->vocab_size : 0;
    d.Vh = r->head_width > 0 ? r->head_width : d.V; /* the output layer's width */
    d.hd = d.C / d.H;
    d.KVH = c->n_kv_heads > 0 ? c->n_kv_heads : d.H;
    d.kv = d.KVH * d.hd;
    d.d3 = d.C + 2 * d.kv; /* the packed q | k | v width */
    d.grouped = d.kv != d.C;
    d.F = d.C > 0 ? attn_feedforward_hidden(c->emb_dim, c->act) : 0;
    d.F1 = c->act == ATTN_ACT_SWIGLU ? 2 * d.F : d.F; /* fc1's rows */
    d.bf16 = r->precision == ATTN_PRECISION_BF16;
    /* Dropout masks are drawn in training only: the trainer's steps, and
     * bench mha, which trains when given a rate. */
    d.masks = c->drop_rate > 0 && r->mode != ATTN_MEM_GENERATE;
    d.stream = r->stream;
    return d;
}

/* One block's linear weights (the matrices a bf16 engine copies):
 * W_query | W_key | W_value, out_proj, fc1, fc2. */
static double block_matrices(const dims *d) {
    return d->d3 * d->C + d->C * d->C + d->F1 * d->C + d->F * d->C;
}

/* The attention's dropout bits (attn_flash_dropout_draw): one per
 * (B, heads, T, T) element for the torch-cpu and given streams; torch-mkl
 * regenerates its masks from a seed. */
static double mask_bits(const dims *d) {
    if (!d->masks || d->stream == ATTN_STREAM_TORCH_MKL) return 0;
    return d->B * d->H * d->T * d->T / 8.0;
}

/* One MultiHeadAttention's fused path (mha_fused.c): the cache's context
 * (and d_context), the packed q | k | v (and its gradient), the LSE, the
 * kernel's workspace (its backward's (B, heads, T) row sums and per-thread
 * tiles), the variants' buffers, bf16's kept operands and the dropout
 * bits. No (T, T) matrix. */
static double fused_attention(const dims *d, int backward, double threads) {
    const double N = d->N, C = d->C, rows = d->B * d->H * d->T;
    double f = N * C + N * d->d3 + rows + threads * 64 * 1024 / F32;
    if (backward) f += N * C + N * d->d3 + rows;
    if (d->grouped) f += N * 2 * C * (backward ? 2 : 1);
    double b = f * F32 + mask_bits(d);
    if (d->bf16) b += 2 * N * C * B16; /* x16, ctx16 */
    return b;
}

/* The step-by-step path (attn_mha_cache_init_any): q, k, v, the (B, heads,
 * T, T) weights and the context; dropout's weights and byte mask; the
 * backward's gradients and its (T, T) scratch. */
static double reference_attention(const dims *d, int backward) {
    const double N = d->N, C = d->C, tt = d->B * d->H * d->T * d->T;
    double f = 4 * N * C + 2 * tt; /* the weights, and after dropout (a copy without) */
    if (d->masks) f += tt / F32;   /* keep (bytes) */
    if (backward) f += 4 * N * C + 2 * d->T * d->T;
    return f * F32;
}

/* QK-norm's inputs, 1/rms and (backward) gradient, on either path. */
static double qk_norm_bytes(const attn_gpt_config *c, const dims *d, int backward) {
    if (!c->qk_norm) return 0;
    const double raw = d->N * (d->C + d->kv);
    return (raw * (backward ? 2 : 1) + d->N * (d->H + d->KVH)) * F32;
}

/* One block's own activations (gpt_block.c acts_buffers, and the
 * feed-forward's cache): x_in, ln1, att_out, x_mid, ln2, ff_out, the two
 * norms' statistics, the residual dropout masks when drawn; fc1's output
 * and the activation's (bf16 GELU: the activation in bf16 and fc1's input
 * rounded, the fp32 activation never written). */
static double block_acts(const attn_gpt_config *c, const dims *d) {
    const double N = d->N, C = d->C;
    double b = (6 * N * C + 4 * N) * F32 + (d->masks ? 2 * N * C : 0);
    if (d->bf16 && c->act == ATTN_ACT_GELU)
        b += N * d->F1 * F32 + N * C * B16 + N * d->F * B16;
    else
        b += (N * d->F1 + N * d->F) * F32;
    return b;
}

/* The model's own activations (gpt.c acts_buffers) but the head's: ids and
 * targets, the embedding's mask, the final norm, the backward's three
 * (N, C) rows and the feed-forward's gradient scratch; the batch buffers. */
static double model_acts(const attn_gpt_config *c, const dims *d) {
    const double N = d->N, C = d->C;
    const double scratch = c->act == ATTN_ACT_SWIGLU ? 3 * d->F : d->F;
    return 4 * N * 4.0 + (d->masks ? N * C : 0) +
           (2 * N * C + 2 * N + 2 * N + 3 * N * C + N * scratch) * F32;
}

/* The head: B T V logits and their gradient, or the lean head's chunk (and
 * with bf16 its rows of dlogits for one product). */
static double head_bytes(const dims *d, int lean) {
    if (!lean) return 2 * d->N * d->Vh * F32;
    return min2(d->N, HEAD_ROWS) * d->Vh * F32 +
           (d->bf16 ? min2(d->N, HEAD_DW_ROWS) * d->Vh * B16 : 0);
}

/* The bf16 engine's scratch in training (gemm_bf16.c reserve): a16 holds
 * the largest dy (N, out) of a backward product (or the plain head's
 * logits' gradient), b16 the largest input (N, in) or weight. */
static double engine_scratch(const dims *d, int lean) {
    const double a16 = d->N * max2(max2(d->F1, d->d3), lean ? 0 : d->Vh);
    double b16 = max2(d->N * d->F, max2(d->F1, d->d3) * d->C);
    b16 = max2(b16, lean ? min2(d->N, HEAD_DW_ROWS) * d->C : d->Vh * d->C);
    return (a16 + b16) * B16;
}

static void plan_train(const attn_gpt_config *c, const attn_mem_run *r, const dims *d,
                       double threads, attn_mem_plan *p) {
    const double P = r->params > 0 ? r->params : attn_gpt_config_params(c);
    const double G = r->grads > 0 ? r->grads : P, M = r->moments > 0 ? r->moments : P;
    const double frozen = min2(r->frozen_blocks > 0 ? r->frozen_blocks : 0, d->L);
    p->weights = P * F32;
    p->grads = G * F32;
    p->optimizer = 2 * M * F32;
    p->accum =
        r->grad_accum > 1 ? G * F32 : 0; /* train_accum.c: rank 0's one more gradient block */
    p->attention = (d->L - frozen) * (fused_attention(d, 1, threads) + qk_norm_bytes(c, d, 1)) +
                   frozen * (fused_attention(d, 0, threads) + qk_norm_bytes(c, d, 0));
    p->activations = p->attention + d->L * block_acts(c, d) + model_acts(c, d);
    p->head = head_bytes(d, r->lean_head);
    if (d->bf16) /* every weight matrix's copy, the head's too (tied: tok_emb's) */
        p->bf16 = (d->L * block_matrices(d) + d->Vh * d->C) * B16 + engine_scratch(d, r->lean_head);
    /* Resuming (train_checkpoint.c), before any gradient or activation is
     * written: train_state's image (m and v, 2P) is held while model's (P)
     * fills the weights and is freed, then while it fills the moments (2P):
     * 4P beyond the weights at most. */
    const double steady = p->grads + p->optimizer + p->accum + p->activations + p->head + p->bf16;
    if (r->resume) p->transient = max2(0, 4 * P * F32 - steady);
}

/* gpt_kv.c: K and V rows of every layer per sample (a window's ring, else
 * the context), zeroed up front; the step's scratch and logits; the
 * generator's ids. bf16: the blocks' and head's weights copied. */
static void plan_generate(const attn_gpt_config *c, const attn_mem_run *r, const dims *d,
                          attn_mem_plan *p) {
    const double P = attn_gpt_config_params(c), S = d->B;
    const double rows = c->window > 0 && c->window < c->context_length ? c->window : d->ctx;
    p->weights = P * F32;
    p->kv_cache =
        (2 * d->L * S * rows * d->kv + 5 * S * d->C + S * d->F1 + S * d->H * d->ctx + S * d->V) *
            F32 +
        S * d->ctx * 4.0 + d->V * 8.0;
    const double streamed = d->L * block_matrices(d) + d->V * d->C; /* attn_gpt_kv_weight_numel */
    if (d->bf16) p->bf16 = streamed * B16;
    /* bf16_only: the fp32 matrices go as their copy grows (a tied head's
     * stays: it is the embedding), all of them held once while loading. */
    const double released =
        d->bf16 && r->bf16_only ? (streamed - (c->tie_weights ? d->V * d->C : 0)) * F32 : 0;
    p->weights -= released;
    /* Beside the cache: attn bench generate's read-bandwidth buffer of as
     * many bytes as a step streams; before it, a checkpoint read whole (its
     * weights' bytes), copied into the model and freed. */
    const double membw = r->membw ? streamed * (d->bf16 ? B16 : F32) : 0;
    const double image = r->load_file ? P * F32 : 0;
    p->transient = max2(membw, max2(image, released) - p->kv_cache - p->bf16);
}

/* A buffer of attn bench's own: whole 2 MiB pages. */
static double bench_buf(double bytes) {
    return bytes > 0 ? BENCH_PAGE * ceil(bytes / BENCH_PAGE) : 0;
}

/* attn bench mha: the module (weights; gradients with backward), x, dy, y
 * and dx, the module's path; then (kernel_cases) with the cache freed, the
 * kernel alone on its own q | k | v, output, LSE and gradient, and an
 * sgemm of the projection's size. */
static void plan_mha(const attn_gpt_config *c, const attn_mem_run *r, const dims *d, double threads,
                     attn_mem_plan *p) {
    const double N = d->N, C = d->C;
    const double W = d->d3 * C + C * C + C + (c->qkv_bias ? d->d3 : 0);
    p->weights = W * F32;
    p->grads = r->backward ? W * F32 : 0;
    p->activations = 4 * bench_buf(N * C * F32); /* x, dy, y, dx */
    p->attention = (r->reference ? reference_attention(d, r->backward)
                                 : fused_attention(d, r->backward, threads)) +
                   qk_norm_bytes(c, d, r->backward);
    p->activations += p->attention;
    if (d->bf16) /* the engine's operands: dy (N, d3) and x or the packed weights */
        p->bf16 = (N * d->d3 + max2(N * C, d->d3 * C)) * B16;
    if (!r->kernel_cases || r->reference) return;
    const double core =
        2 * bench_buf(N * 3 * C * F32) + bench_buf(N * C * F32) + d->B * d->H * d->T * F32;
    const double sgemm = bench_buf(N * C * F32) + bench_buf(3 * C * C * F32) + 3 * N * C * F32;
    p->transient = max2(0, max2(core, sgemm) - p->attention);
}

void attn_memory_plan(const attn_gpt_config *c, const attn_mem_run *r, attn_mem_plan *p) {
    memset(p, 0, sizeof *p);
    const dims d = dims_of(c, r);
    const double threads = r->threads > 0 ? r->threads : 1;
    p->process = PROCESS_BYTES + threads * THREAD_BYTES +
                 (d.bf16 && r->mode != ATTN_MEM_GENERATE ? ONEDNN_BYTES : 0);
    if (r->mode == ATTN_MEM_TRAIN)
        plan_train(c, r, &d, threads, p);
    else if (r->mode == ATTN_MEM_GENERATE)
        plan_generate(c, r, &d, p);
    else
        plan_mha(c, r, &d, threads, p);
    p->data =
        (r->data_bytes > 0 ? r->data_bytes : 0) + (r->gpt2_tokenizer ? GPT2_TOKENIZER_BYTES : 0);
    p->total = p->weights + p->grads + p->optimizer + p->accum + p->bf16 + p->activations +
               p->head + p->kv_cache + p->transient + p->data + p->process;
}

void attn_mem_run_of_model(const attn_gpt *m, attn_mem_run *r) {
    const attn_param_list *L = attn_gpt_params(m);
    double moments = 0;
    for (int i = 0; i < L->count; i++)
        moments += L->items[i].trainable ? (double)L->items[i].numel : 0;
    const int stop = attn_gpt_backward_stop(m);
    int frozen = 0;
    for (int i = 0; i < stop; i++)
        frozen += m->layers[i].kind == ATTN_GPT_LAYER_BLOCK;
    r->params = (double)L->values_numel;
    r->head_width = attn_gpt_head_width(m);
    r->grads = (double)L->grads_numel; /* the arena's block, as attn_param_list_alloc makes it */
    r->moments = moments;
    r->frozen_blocks = frozen;
}

const char *attn_memory_plan_text(const attn_mem_plan *p, char *buf, size_t cap) {
    const struct {
        const char *name;
        double bytes;
    } part[] = {
        {"weights", p->weights},
        {"gradients", p->grads},
        {"AdamW moments", p->optimizer},
        {"accumulated gradient", p->accum},
        {"bf16 copies", p->bf16},
        {"activations", p->activations - p->attention},
        {"attention", p->attention},
        {"head", p->head},
        {"KV cache", p->kv_cache},
        {"transient", p->transient},
        {"data", p->data},
        {"process", p->process},
    };
    size_t at = 0;
    if (cap) buf[0] = '\0';
    for (size_t i = 0; i < sizeof part / sizeof *part; i++) {
        if (part[i].bytes <= 0 || at >= cap) continue;
        char size[32];
        const int n = snprintf(buf + at, cap - at, "%s%s %s", at ? ", " : "", part[i].name,
                               attn_size_text(part[i].bytes, size, sizeof size));
        if (n > 0) at += (size_t)n;
    }
    return buf;
}

double attn_gpt_config_memory(const attn_gpt_config *cfg, double tokens, int train) {
    if (!(tokens > 0)) return attn_gpt_config_params(cfg) * F32;
    /* tokens as whole sequences of the context (the last one full). */
    const double ctx = cfg->context_length > 0 ? cfg->context_length : 1;
    const double seqs = tokens / ctx + 0.999999;
    const attn_mem_run run = {.mode = train ? ATTN_MEM_TRAIN : ATTN_MEM_GENERATE,
                              .batch = seqs < 2e9 ? (int)seqs : 2000000000,
                              .lean_head = cfg->vocab_size >= ATTN_GPT_LEAN_VOCAB};
    attn_mem_plan p;
    attn_memory_plan(cfg, &run, &p);
    return p.total - p.process;
}
