/* The bf16 GEMM engine: operands rounded to bf16 in the engine's scratch,
 * then oneDNN's matmul with fp32 accumulation (see attn/gemm.h). */
#include <dnnl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "attn/engine.h"
#include "attn/gemm.h"
#include "base/alloc_huge.h"
#include "gemv.h"

/* One primitive per product shape; memory objects are re-pointed per call. */
typedef struct prim {
    int M, N, K, ta, tb, accumulate;
    dnnl_primitive_t p;
    dnnl_memory_t a, b, c;
} prim;

#define MAX_PRIMS 128

/* A weight's bf16 copy, made at its first use in a pass (GPT-2 XL has 193
 * weight matrices). */
typedef struct wcopy {
    const float *w;
    size_t n, cap;
    uint16_t *copy;
    unsigned pass;   /* the pass whose copy this is (0: none) */
    unsigned handed; /* the pass in which attn_bf16_gemm_weight_copy handed it out */
    size_t handed_n; /* values of it handed out then (each part once: all of it = n) */
} wcopy;

#define MAX_WCOPIES 512

struct attn_bf16_gemm {
    dnnl_engine_t eng;
    dnnl_stream_t stream;
    prim prims[MAX_PRIMS];
    int n_prims;
    uint16_t *a16, *b16; /* bf16 copies of A and B (compact) */
    size_t a_cap, b_cap;
    wcopy wc[MAX_WCOPIES];
    int n_wc;
    unsigned pass;       /* 0: no pass begun, weights rounded at every use */
    const float *values; /* attn_bf16_gemm_use_block's weights (n_values floats) */
    size_t n_values;
    uint16_t *values16; /* their copies, one block */
};

attn_status attn_bf16_gemm_create(attn_bf16_gemm **out, attn_error *err) {
    *out = NULL;
    attn_status s = attn_precision_check(ATTN_PRECISION_BF16, err);
    if (s != ATTN_OK) return s;
    attn_bf16_gemm *g = calloc(1, sizeof *g);
    if (!g) return attn_fail(err, ATTN_ERR_NOMEM, "out of memory for the bf16 engine");
    if (dnnl_engine_create(&g->eng, dnnl_cpu, 0) != dnnl_success ||
        dnnl_stream_create(&g->stream, g->eng, dnnl_stream_default_flags) != dnnl_success) {
        attn_bf16_gemm_free(g);
        return attn_fail(err, ATTN_ERR_STATE, "oneDNN: cannot create a CPU engine");
    }
    *out = g;
    return ATTN_OK;
}

void attn_bf16_gemm_free(attn_bf16_gemm *g) {
    if (!g) return;
    for (int i = 0; i < g->n_prims; i++) {
        dnnl_primitive_destroy(g->prims[i].p);
        dnnl_memory_destroy(g->prims[i].a);
        dnnl_memory_destroy(g->prims[i].b);
        dnnl_memory_destroy(g->prims[i].c);
    }
    if (g->stream) dnnl_stream_destroy(g->stream);
    if (g->eng) dnnl_engine_destroy(g->eng);
    for (int i = 0; i < g->n_wc; i++)
        if (g->wc[i].cap) free(g->wc[i].copy); /* else the block's */
    attn_free_aligned(g->values16, g->n_values * sizeof(uint16_t));
    free(g->a16);
    free(g->b16);
    free(g);
}

attn_status attn_bf16_gemm_use_block(attn_bf16_gemm *g, const float *values, size_t n,
                                     attn_error *err) {
    uint16_t *b = n && n <= SIZE_MAX / sizeof *b ? attn_calloc_aligned(n * sizeof *b) : NULL;
    if (!b) return attn_fail(err, ATTN_ERR_NOMEM, "out of memory for %zu bf16 weight copies", n);
    for (int i = 0; i < g->n_wc; i++) /* the copies made so far are made again */
        if (g->wc[i].cap) free(g->wc[i].copy);
    g->n_wc = 0;
    attn_free_aligned(g->values16, g->n_values * sizeof(uint16_t));
    g->values = values;
    g->n_values = n;
    g->values16 = b;
    return ATTN_OK;
}

/* The pass after p (never 0, which marks no copy). */
static unsigned next_pass(unsigned p) {
    return p + 1 ? p + 1 : 1;
}

void attn_bf16_gemm_begin_pass(attn_bf16_gemm *g) {
    if (!g) return;
    g->pass = next_pass(g->pass);
    if (g->pass == 1) /* wrapped: no stamp may match by accident */
        for (int i = 0; i < g->n_wc; i++)
            g->wc[i].pass = g->wc[i].handed = 0;
}

uint16_t *attn_bf16_gemm_weight_copy(attn_bf16_gemm *g, const float *W, size_t n) {
    if (!g || !g->pass || !W) return NULL;
    /* W may be part of a weight multiplied as one (MultiHeadAttention's Q,
     * K and V block): its slice of that copy. */
    const uintptr_t lo = (uintptr_t)W, hi = lo + n * sizeof(float);
    for (int i = 0; i < g->n_wc; i++) {
        wcopy *e = &g->wc[i];
        const uintptr_t b = (uintptr_t)e->w, end = b + e->n * sizeof(float);
        if (e->pass != g->pass || lo < b || hi > end) continue;
        if (e->handed != g->pass) e->handed = g->pass, e->handed_n = 0;
        e->handed_n += n;
        return e->copy + (lo - b) / sizeof(float);
    }
    return NULL;
}

void attn_bf16_gemm_carry_copies(attn_bf16_gemm *g) {
    if (!g || !g->pass) return;
    const unsigned next = next_pass(g->pass);
    for (int i = 0; i < g->n_wc; i++) {
        wcopy *e = &g->wc[i];
        if (e->handed == g->pass && e->handed_n == e->n && e->pass == g->pass) e->pass = next;
        e->handed = 0;
    }
}

/* The cached primitive for a shape, made on first use (NULL on failure).
 * A is compact (M, K), or (K, M) when ta; B compact (K, N), or (N, K) when
 * tb; C (M, N) with row stride ldc. */
static prim *get_prim(attn_bf16_gemm *g, int M, int N, int K, int ta, int tb, int acc, int ldc) {
    for (int i = 0; i < g->n_prims; i++) {
        prim *q = &g->prims[i];
        if (q->M == M && q->N == N && q->K == K && q->ta == ta && q->tb == tb &&
            q->accumulate == acc)
            return q->p ? q : NULL;
    }
    if (g->n_prims == MAX_PRIMS) return NULL;
    prim *q = &g->prims[g->n_prims++];
    memset(q, 0, sizeof *q);
    q->M = M, q->N = N, q->K = K, q->ta = ta, q->tb = tb, q->accumulate = acc;
    dnnl_memory_desc_t da, db, dc;
    dnnl_dims_t ma = {M, K}, mb = {K, N}, mc = {M, N};
    dnnl_dims_t sa = {K, 1}, sb = {N, 1}, sc = {ldc, 1};
    if (ta) sa[0] = 1, sa[1] = M;
    if (tb) sb[0] = 1, sb[1] = K;
    dnnl_primitive_attr_t attr = NULL;
    dnnl_post_ops_t po = NULL;
    dnnl_matmul_desc_t md;
    dnnl_primitive_desc_t pd = NULL;
    int ok = dnnl_memory_desc_init_by_strides(&da, 2, ma, dnnl_bf16, sa) == dnnl_success &&
             dnnl_memory_desc_init_by_strides(&db, 2, mb, dnnl_bf16, sb) == dnnl_success &&
             dnnl_memory_desc_init_by_strides(&dc, 2, mc, dnnl_f32, sc) == dnnl_success &&
             dnnl_matmul_desc_init(&md, &da, &db, NULL, &dc) == dnnl_success &&
             dnnl_primitive_attr_create(&attr) == dnnl_success;
    /* C += A B: the sum post-op reads C before writing it. */
    if (ok && acc)
        ok = dnnl_post_ops_create(&po) == dnnl_success &&
             dnnl_post_ops_append_sum(po, 1.0f) == dnnl_success &&
             dnnl_primitive_attr_set_post_ops(attr, po) == dnnl_success;
    ok = ok && dnnl_primitive_desc_create(&pd, &md, attr, g->eng, NULL) == dnnl_success &&
         dnnl_primitive_create(&q->p, pd) == dnnl_success &&
         dnnl_memory_create(&q->a, &da, g->eng, DNNL_MEMORY_NONE) == dnnl_success &&
         dnnl_memory_create(&q->b, &db, g->eng, DNNL_MEMORY_NONE) == dnnl_success &&
         dnnl_memory_create(&q->c, &dc, g->eng, DNNL_MEMORY_NONE) == dnnl_success;
    if (pd) dnnl_primitive_desc_destroy(pd);
    if (po) dnnl_post_ops_destroy(po);
    if (attr) dnnl_primitive_attr_destroy(attr);
    if (!ok) {
        if (q->p) dnnl_primitive_destroy(q->p);
        q->p = NULL; /* remembered as failing: fp32 from now on for this shape */
        return NULL;
    }
    return q;
}

/* rows x cols of src (row stride ld) into compact bf16, split over threads. */
static void to_bf16(const float *src, int rows, int cols, int ld, uint16_t *dst) {
#pragma omp parallel for schedule(static) if ((size_t)rows * (size_t)cols >= 65536)
    for (int r = 0; r < rows; r++)
        attn_f32_to_bf16(src + (size_t)r * (size_t)ld, dst + (size_t)r * (size_t)cols,
                         (size_t)cols);
}

static int reserve(uint16_t **buf, size_t *cap, size_t n) {
    if (*cap >= n) return 0;
    uint16_t *p = attn_alloc_touched(n * sizeof *p); /* no page faults in later steps */
    if (!p) return -1;
    free(*buf);
    *buf = p;
    *cap = n;
    return 0;
}

/* The bf16 copy of weight W (rows x cols, compact) for this pass: rounded
 * on its first use in the pass, then reused. NULL outside a pass or when no
 * copy can be kept (the caller rounds into its scratch as before). */
static const uint16_t *weight_bf16(attn_bf16_gemm *g, const float *W, int rows, int cols) {
    if (!g->pass) return NULL;
    const size_t n = (size_t)rows * (size_t)cols;
    wcopy *e = NULL;
    for (int i = 0; i < g->n_wc && !e; i++)
        if (g->wc[i].w == W && g->wc[i].n == n) e = &g->wc[i];
    if (!e) {
        if (g->n_wc == MAX_WCOPIES) return NULL;
        e = &g->wc[g->n_wc++];
        memset(e, 0, sizeof *e);
        e->w = W, e->n = n;
    }
    if (e->pass == g->pass) return e->copy;
    const uintptr_t at = (uintptr_t)W, lo = (uintptr_t)g->values;
    if (g->values && at >= lo && n <= g->n_values &&
        (at - lo) / sizeof(float) <= g->n_values - n) /* the block's (cap 0: not owned) */
        e->copy = g->values16 + (at - lo) / sizeof(float);
    else if (reserve(&e->copy, &e->cap, n) != 0)
        return NULL;
    to_bf16(W, rows, cols, cols, e->copy);
    e->pass = g->pass;
    return e->copy;
}

/* C = [C +] A B on bf16 operands a16 and b16; 0 on success. */
static int run_prim_on(attn_bf16_gemm *g, prim *q, const uint16_t *a16, const uint16_t *b16,
                       float *C) {
    dnnl_memory_set_data_handle(q->a, (void *)a16);
    dnnl_memory_set_data_handle(q->b, (void *)b16);
    dnnl_memory_set_data_handle(q->c, C);
    dnnl_exec_arg_t args[3] = {
        {DNNL_ARG_SRC, q->a}, {DNNL_ARG_WEIGHTS, q->b}, {DNNL_ARG_DST, q->c}};
    return dnnl_primitive_execute(q->p, g->stream, 3, args) == dnnl_success &&
                   dnnl_stream_wait(g->stream) == dnnl_success
               ? 0
               : -1;
}

void attn_gemm(attn_bf16_gemm *g, int threads, int trans_a, int trans_b, int M, int N, int K,
               float alpha, const float *A, int lda, const float *B, int ldb, float beta, float *C,
               int ldc) {
    if (M <= 0 || N <= 0) return;
    if (!g || alpha != 1.0f || (beta != 0.0f && beta != 1.0f) || K <= 0) {
        attn_sgemm(threads, trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
        return;
    }
    const size_t na = (size_t)M * (size_t)K, nb = (size_t)N * (size_t)K;
    prim *q = NULL;
    if (reserve(&g->a16, &g->a_cap, na) == 0 && reserve(&g->b16, &g->b_cap, nb) == 0)
        q = get_prim(g, M, N, K, trans_a, trans_b, beta != 0.0f, ldc);
    if (!q) {
        attn_sgemm(threads, trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
        return;
    }
    if (trans_a)
        to_bf16(A, K, M, lda, g->a16);
    else
        to_bf16(A, M, K, lda, g->a16);
    if (trans_b)
        to_bf16(B, N, K, ldb, g->b16);
    else
        to_bf16(B, K, N, ldb, g->b16);
    if (run_prim_on(g, q, g->a16, g->b16, C) != 0)
        attn_sgemm(threads, trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

/* A caller's bf16 operand (n values) widened exactly, for a product that
 * must run in fp32 (no engine, or oneDNN refused it): a fallback, so its
 * buffer is the caller's to free. NULL when out of memory. */
static float *widen(const uint16_t *x16, size_t n) {
    float *p = malloc(n * sizeof *p);
    for (size_t i = 0; p && i < n; i++)
        p[i] = attn_bf16_to_f32(x16[i]);
    return p;
}

/* attn_gemm_weight on A in fp32 (A16 NULL) or already in bf16 (A NULL);
 * with keep, A (fp32) is rounded into keep and the product made from it. */
static void gemm_weight(attn_bf16_gemm *g, int threads, int M, int N, int K, const float *A,
                        const uint16_t *A16, uint16_t *keep, const float *W, float beta, float *C) {
    if (M <= 0 || N <= 0) return;
    if (keep) {
        to_bf16(A, M, K, K, keep);
        A16 = keep;
    }
    prim *q = NULL;
    const uint16_t *w16 = NULL;
    if (g && K > 0 && (beta == 0.0f || beta == 1.0f) &&
        (A16 || reserve(&g->a16, &g->a_cap, (size_t)M * (size_t)K) == 0) &&
        (q = get_prim(g, M, N, K, 0, 1, beta != 0.0f, N)) != NULL)
        w16 = weight_bf16(g, W, N, K);
    if (A16) {
        if (w16 && run_prim_on(g, q, A16, w16, C) == 0) return;
        /* Refused: the fp32 product on A, or on A16's exact widening (C
         * left as it was when even that memory cannot be had). */
        float *wide = A ? NULL : widen(A16, (size_t)M * (size_t)K);
        if (A || wide)
            attn_gemm(g, threads, 0, 1, M, N, K, 1.0f, A ? A : wide, K, W, K, beta, C, N);
        free(wide);
        return;
    }
    if (!w16) { /* no pass, no engine or no copy: attn_gemm's way */
        attn_gemm(g, threads, 0, 1, M, N, K, 1.0f, A, K, W, K, beta, C, N);
        return;
    }
    to_bf16(A, M, K, K, g->a16);
    if (run_prim_on(g, q, g->a16, w16, C) != 0)
        attn_sgemm(threads, 0, 1, M, N, K, 1.0f, A, K, W, K, beta, C, N);
}

void attn_gemm_weight(attn_bf16_gemm *g, int threads, int M, int N, int K, const float *A,
                      const float *W, float beta, float *C) {
    gemm_weight(g, threads, M, N, K, A, NULL, NULL, W, beta, C);
}

void attn_gemm_weight_keep(attn_bf16_gemm *g, int threads, int M, int N, int K, const float *A,
                           const float *W, float beta, float *C, uint16_t *A16) {
    gemm_weight(g, threads, M, N, K, A, NULL, A16, W, beta, C);
}

void attn_gemm_weight_a16(attn_bf16_gemm *g, int threads, int M, int N, int K, const uint16_t *A16,
                          const float *W, float beta, float *C) {
    gemm_weight(g, threads, M, N, K, NULL, A16, NULL, W, beta, C);
}

/* The backward pair as attn_gemm's products, all from fp32 x. */
static void linear_grads_fp32(attn_bf16_gemm *g, int threads, int N, int in, int out,
                              const float *x, const float *dy, const float *W, float beta_w,
                              float *dW, float beta_x, float *dx) {
    if (dW) attn_gemm(g, threads, 1, 0, out, in, N, 1.0f, dy, out, x, in, beta_w, dW, in);
    if (dx) attn_gemm(g, threads, 0, 0, N, in, out, 1.0f, dy, out, W, in, beta_x, dx, in);
}

/* dx (N, in) = beta_x dx + dy W on q (whose accumulation is beta_x's),
 * from dy's rounding dy16 and W's copy of the pass (or W rounded into b16).
 * 0 on success; -1 leaves dx to the caller's fp32 product. */
static int dx_product(attn_bf16_gemm *g, prim *q, int in, int out, const uint16_t *dy16,
                      const float *W, float *dx) {
    const uint16_t *w16 = weight_bf16(g, W, out, in);
    if (!w16 && reserve(&g->b16, &g->b_cap, (size_t)out * (size_t)in) == 0) {
        to_bf16(W, out, in, in, g->b16);
        w16 = g->b16;
    }
    return w16 ? run_prim_on(g, q, dy16, w16, dx) : -1;
}

/* attn_gemm_linear_grads on x in fp32 (x16 NULL) or already in bf16 (x NULL). */
static void linear_grads(attn_bf16_gemm *g, int threads, int N, int in, int out, const float *x,
                         const uint16_t *x16, const float *dy, const float *W, float beta_w,
                         float *dW, float beta_x, float *dx) {
    if (N <= 0 || in <= 0 || out <= 0 || (!dW && !dx)) return; /* nothing wanted */
    prim *qw = NULL, *qx = NULL;
    const size_t nx = (size_t)N * (size_t)in, nw = (size_t)out * (size_t)in;
    if (g && (beta_w == 0.0f || beta_w == 1.0f) && (beta_x == 0.0f || beta_x == 1.0f) &&
        reserve(&g->a16, &g->a_cap, (size_t)N * (size_t)out) == 0 &&
        reserve(&g->b16, &g->b_cap, nx > nw ? nx : nw) == 0) {
        if (dW) qw = get_prim(g, out, in, N, 1, 0, beta_w != 0.0f, in);
        if (dx) qx = get_prim(g, N, in, out, 0, 0, beta_x != 0.0f, in);
    }
    if ((dW && !qw) || (dx && !qx)) { /* no engine, or a shape oneDNN refused: fp32 */
        float *wide = x16 ? widen(x16, nx) : NULL;
        if (x || wide)
            linear_grads_fp32(g, threads, N, in, out, x ? x : wide, dy, W, beta_w, dW, beta_x, dx);
        free(wide);
        return;
    }
    /* dy (N, out) compact in a16 serves both: read transposed for dW. */
    to_bf16(dy, N, out, out, g->a16);
    if (dW && !x16) to_bf16(x, N, in, in, g->b16);
    if (dW && run_prim_on(g, qw, g->a16, x16 ? x16 : g->b16, dW) != 0) {
        float *wide = x16 ? widen(x16, nx) : NULL;
        if (x || wide)
            attn_sgemm(threads, 1, 0, out, in, N, 1.0f, dy, out, x ? x : wide, in, beta_w, dW, in);
        free(wide);
    }
    if (dx && dx_product(g, qx, in, out, g->a16, W, dx) != 0)
        attn_sgemm(threads, 0, 0, N, in, out, 1.0f, dy, out, W, in, beta_x, dx, in);
}

void attn_gemm_linear_grads(attn_bf16_gemm *g, int threads, int N, int in, int out, const float *x,
                            const float *dy, const float *W, float beta_w, float *dW, float *dx) {
    linear_grads(g, threads, N, in, out, x, NULL, dy, W, beta_w, dW, 1.0f, dx);
}

void attn_gemm_linear_grads_x16(attn_bf16_gemm *g, int threads, int N, int in, int out,
                                const uint16_t *x16, const float *dy, const float *W, float beta_w,
                                float *dW, float beta_x, float *dx) {
    linear_grads(g, threads, N, in, out, NULL, x16, dy, W, beta_w, dW, beta_x, dx);
}

/* The dy16 products' fp32 fallback (no engine, or oneDNN refused the
 * shape), on dy16's (N, out) exact widening: C (N, in) = beta C + dy B
 * (trans_a 0, B (out, in)) or C (out, in) = beta C + dy^T B (trans_a 1, B
 * (N, in)). C is left as it was when that memory cannot be had. */
static void sgemm_on_dy16(int threads, int trans_a, int N, int in, int out, const uint16_t *dy16,
                          const float *B, float beta, float *C) {
    float *wide = widen(dy16, (size_t)N * (size_t)out);
    if (wide)
        attn_sgemm(threads, trans_a, 0, trans_a ? out : N, in, trans_a ? N : out, 1.0f, wide, out,
                   B, in, beta, C, in);
    free(wide);
}

void attn_gemm_round(int N, int out, const float *dy, uint16_t *dy16) {
    if (N > 0 && out > 0) to_bf16(dy, N, out, out, dy16);
}

void attn_gemm_input_grad_dy16(attn_bf16_gemm *g, int threads, int N, int in, int out,
                               const uint16_t *dy16, const float *W, float beta_x, float *dx) {
    if (N <= 0 || in <= 0 || out <= 0) return;
    prim *q = g && (beta_x == 0.0f || beta_x == 1.0f)
                  ? get_prim(g, N, in, out, 0, 0, beta_x != 0.0f, in)
                  : NULL;
    if (q && dx_product(g, q, in, out, dy16, W, dx) == 0) return;
    sgemm_on_dy16(threads, 0, N, in, out, dy16, W, beta_x, dx);
}

void attn_gemm_weight_grad_dy16(attn_bf16_gemm *g, int threads, int N, int in, int out,
                                const float *x, const uint16_t *dy16, float beta_w, float *dW) {
    if (N <= 0 || in <= 0 || out <= 0) return;
    const size_t nx = (size_t)N * (size_t)in;
    prim *q = g && (beta_w == 0.0f || beta_w == 1.0f) && reserve(&g->b16, &g->b_cap, nx) == 0
                  ? get_prim(g, out, in, N, 1, 0, beta_w != 0.0f, in)
                  : NULL;
    if (q) {
        to_bf16(x, N, in, in, g->b16);
        if (run_prim_on(g, q, dy16, g->b16, dW) == 0) return;
    }
    sgemm_on_dy16(threads, 1, N, in, out, dy16, x, beta_w, dW);
}
