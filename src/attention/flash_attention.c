/* Fused causal attention, forward and backward (see attn/flash_attention.h).
 *
 * Forward task (b, h, query tile): Q^T of the tile is packed once, then for
 * each key tile up to the diagonal the transposed scores S^T = K Q^T are
 * formed (keys as rows, so the online softmax runs down columns and
 * vectorises over queries), masked on the diagonal tile only, exponentiated
 * against the running max, and P V is added into the rescaled accumulator.
 *
 * Backward, per (b, h) and its key tiles in order: K^T and V^T of the tile
 * are packed once; for every query tile from the diagonal down, P is
 * recomputed from the LSE, then dV += P^T dO, dP = dO V^T,
 * dS = P (dP - D) / sqrt(hd), dK += dS^T Q and dQ += dS K (all rows of this
 * (b, h), so no thread shares them and the sums run in one fixed order). */
#define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT */
#include "attn/flash_attention.h"

#include <limits.h>
#include <math.h>
#include <omp.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "base/mcg31.h"
#include "base/vec_clones.h"
#include "kernels/flash_kernels.h"

#define DEFAULT_BLOCK_Q 64
#define DEFAULT_BLOCK_K 64

static const attn_flash_kernels *kernels_for(attn_simd s) {
    switch (s) {
#ifdef ATTN_FLASH_HAVE_X86
    case ATTN_SIMD_AVX2: return &attn_flash_kernels_avx2;
    case ATTN_SIMD_AVX512: return &attn_flash_kernels_avx512;
#endif
    default: return &attn_flash_kernels_generic;
    }
}

/* ---- dropout ------------------------------------------------------------ */

attn_status attn_flash_dropout_draw(attn_flash_dropout *d, attn_rng *rng,
                                    attn_dropout_stream stream, double p, int B, int H, int T,
                                    attn_error *err) {
    if (!d) return attn_fail(err, ATTN_ERR_INVALID_ARG, "flash dropout: no state given");
    if (!(p >= 0.0 && p < 1.0))
        return attn_fail(err, ATTN_ERR_INVALID_ARG, "flash dropout: rate %g is outside [0, 1)", p);
    if (B <= 0 || H <= 0 || T <= 0)
        return attn_fail(err, ATTN_ERR_INVALID_ARG, "flash dropout: B, H and T must be positive");
    d->p = p;
    d->stream = stream;
    d->B = B;
    d->H = H;
    d->T = T;
    if (p == 0.0) return ATTN_OK; /* PyTorch returns the input untouched, no draw */
    if (!rng)
        return attn_fail(err, ATTN_ERR_INVALID_ARG,
                         "training with dropout needs a generator (mode rng)");
    if (stream == ATTN_STREAM_TORCH_MKL) {
        d->x0 = attn_mcg31_seed(attn_rng_u32(rng));
        return ATTN_OK;
    }
    const uint64_t n = (uint64_t)B * (uint64_t)H * (uint64_t)T * (uint64_t)T;
    const size_t bytes = (size_t)((n + 7) / 8);
    if (d->bits_cap < bytes) {
        uint8_t *bits = malloc(bytes);
        if (!bits)
            return attn_fail(err, ATTN_ERR_NOMEM,
                             "flash dropout: cannot allocate %zu bytes of mask", bytes);
        free(d->bits);
        d->bits = bits;
        d->bits_cap = bytes;
    }
    if (stream == ATTN_STREAM_GIVEN) {
        /* The caller's bytes (attn_dropout_given), held as bits like torch-cpu's. */
        attn_dropout_given *g = (attn_dropout_given *)(void *)rng;
        uint8_t chunk[4096];
        memset(d->bits, 0, bytes);
        for (uint64_t k0 = 0; k0 < n; k0 += sizeof chunk) {
            const size_t m = (size_t)(n - k0 < sizeof chunk ? n - k0 : sizeof chunk);
            attn_dropout_given_take(g, chunk, m);
            for (size_t j = 0; j < m; j++)
                d->bits[(k0 + j) >> 3] |= (uint8_t)(chunk[j] << ((k0 + j) & 7));
        }
        return ATTN_OK;
    }
    attn_rng_keep_mask(rng, 1.0 - p, d->bits, (size_t)n, 1);
    return ATTN_OK;
}

void attn_flash_dropout_free(attn_flash_dropout *d) {
    if (!d) return;
    free(d->bits);
    memset(d, 0, sizeof *d);
}

int attn_flash_dropout_keep(const attn_flash_dropout *d, int b, int h, int i, int j) {
    if (!d || d->p == 0.0) return 1;
    const uint64_t k =
        (((uint64_t)b * (uint64_t)d->H + (uint64_t)h) * (uint64_t)d->T + (uint64_t)i) *
            (uint64_t)d->T +
        (uint64_t)j;
    if (d->stream == ATTN_STREAM_TORCH_MKL)
        return attn_mcg31_mul(d->x0, attn_mcg31_pow(k)) < attn_mcg31_threshold(d->p);
    return (d->bits[k >> 3] >> (k & 7)) & 1;
}

void attn_flash_dropout_expand(const attn_flash_dropout *d, uint8_t *keep) {
    const uint64_t n = (uint64_t)d->B * (uint64_t)d->H * (uint64_t)d->T * (uint64_t)d->T;
    if (d->p == 0.0) {
        memset(keep, 1, (size_t)n);
    } else if (d->stream == ATTN_STREAM_TORCH_MKL) {
        attn_mcg31_keep(d->x0, attn_mcg31_threshold(d->p), keep, (size_t)n);
    } else {
        for (uint64_t k = 0; k < n; k++)
            keep[k] = (d->bits[k >> 3] >> (k & 7)) & 1;
    }
}

/* What a task needs to replay the mask. */
typedef struct drop_ctx {
    int on, mkl;
    float scale;
    uint32_t thr, x0;
    uint32_t a_T; /* a^T: one row further */
    const attn_mcg31_rows *rows;
    const uint8_t *bits;
} drop_ctx;

static void drop_ctx_init(drop_ctx *dc, const attn_flash_dropout *d, int T) {
    memset(dc, 0, sizeof *dc);
    if (!d || d->p == 0.0) return;
    dc->on = 1;
    dc->mkl = d->stream == ATTN_STREAM_TORCH_MKL;
    dc->scale = attn_dropout_scale(d->p);
    dc->thr = attn_mcg31_threshold(d->p);
    dc->x0 = d->x0;
    dc->a_T = attn_mcg31_pow((uint64_t)T);
    dc->rows = attn_mcg31_pick();
    dc->bits = d->bits;
}

/* MCG31 state at flat element k. */
static uint32_t drop_state_at(const drop_ctx *dc, uint64_t k) {
    return attn_mcg31_mul(dc->x0, attn_mcg31_pow(k));
}

/* out[t] = bit t of w ? scale : 0, t < m (<= 64): as bit masks on scale's
 * bits over 32-bit halves, so the loops vectorise (32-bit shifts by lane). */
static inline void bits32_to_mult(uint32_t w, int m, uint32_t scale_bits, uint32_t *out) {
    for (int t = 0; t < m; t++)
        out[t] = scale_bits & (0u - ((w >> t) & 1u));
}
ATTN_VEC_PROC(bits_to_mult, (uint64_t w, int m, float scale, float *out), (w, m, scale, out), {
    uint32_t sb, o[64];
    memcpy(&sb, &scale, sizeof sb);
    bits32_to_mult((uint32_t)w, m < 32 ? m : 32, sb, o);
    if (m > 32) bits32_to_mult((uint32_t)(w >> 32), m - 32, sb, o + 32);
    memcpy(out, o, (size_t)m * sizeof *out);
})

/* mult[j] = keep(k0 + j) ? scale : 0 for j < n; xs is the MCG31 state at k0
 * (torch-mkl). */
static void drop_row(const drop_ctx *dc, uint64_t k0, uint32_t xs, int n, float *mult) {
    if (dc->mkl) {
        dc->rows->mult(xs, dc->thr, dc->scale, mult, (size_t)n);
        return;
    }
    /* Up to 57 bits at a time from one little-endian word: no per-element
     * byte addressing. */
    for (int j = 0; j < n;) {
        const uint64_t k = k0 + (uint64_t)j;
        const int sh = (int)(k & 7), m = n - j < 64 - sh ? n - j : 64 - sh;
        const uint8_t *src = dc->bits + (k >> 3);
        const int nb = (sh + m + 7) / 8;
        uint64_t w = 0;
        for (int b = 0; b < nb; b++)
            w |= (uint64_t)src[b] << (8 * b);
        bits_to_mult(w >> sh, m, dc->scale, mult + j);
        j += m;
    }
}

/* ---- workspace ---------------------------------------------------------- */

void attn_flash_workspace_free(attn_flash_workspace *ws) {
    if (!ws) return;
    free(ws->mem);
    ws->mem = NULL;
    ws->bytes = 0;
}

static size_t pad_to(size_t n, size_t m) {
    return (n + m - 1) / m * m;
}

static attn_status ws_reserve(attn_flash_workspace *ws, size_t bytes, attn_error *err) {
    if (ws->bytes >= bytes) return ATTN_OK;
    bytes = pad_to(bytes, 64);
    void *mem = aligned_alloc(64, bytes);
    if (!mem)
        return attn_fail(err, ATTN_ERR_NOMEM,
                         "flash attention: cannot allocate %zu bytes of workspace", bytes);
    /* Touch every page now, not while stepping: a part first written only
     * by some tasks (per-thread dQ slabs, before they went) faulted in over
     * many later training steps. */
    memset(mem, 0, bytes);
    free(ws->mem);
    ws->mem = mem;
    ws->bytes = bytes;
    return ATTN_OK;
}

/* Carve consecutive 64-byte aligned float buffers out of a block. */
static float *carve(char **cursor, size_t nfloats) {
    float *p = (float *)*cursor;
    *cursor += pad_to(nfloats * sizeof(float), 64);
    return p;
}

/* ---- shared setup ------------------------------------------------------- */

typedef struct run_ctx {
    int B, T, H, hd, bq, bk, threads;
    int window; /* 0: causal only; else the sliding window (attn/attention.h) */
    /* Score transform (soft-cap, ALiBi): the tiles hold transformed scores
     * and scale (the softmax's) is 1; qk_scale is 1 / sqrt(head_dim). */
    int xform, alibi;
    float softcap, qk_scale;
    size_t hdp, bqp, bkp;
    float scale;
    const attn_flash_kernels *K;
    const attn_flash_bf16_kernels *KB; /* non-NULL: the bf16 path (&kb) */
    attn_flash_bf16_kernels kb;        /* AVX512-BF16's, with AMX's gemm where usable */
    drop_ctx drop;
} run_ctx;

/* The problem's own checks: sizes, pointers, strides, the mask's shape, the
 * window. */
static attn_status check_problem(const attn_flash_problem *pb, attn_error *err) {
    if (!pb) return attn_fail(err, ATTN_ERR_INVALID_ARG, "flash attention: no problem given");
    if (pb->B <= 0 || pb->T <= 0 || pb->H <= 0 || pb->head_dim <= 0)
        return attn_fail(err, ATTN_ERR_INVALID_ARG,
                         "flash attention: B, T, heads and head_dim must be positive (got %d, %d, "
                         "%d, %d)",
                         pb->B, pb->T, pb->H, pb->head_dim);
    const size_t row = (size_t)pb->H * (size_t)pb->head_dim;
    if (!pb->q || !pb->k || !pb->v || !pb->o || !pb->lse)
        return attn_fail(err, ATTN_ERR_INVALID_ARG, "flash attention: a tensor pointer is NULL");
    if (pb->ld_q < row || pb->ld_k < row || pb->ld_v < row || pb->ld_o < row)
        return attn_fail(err, ATTN_ERR_SHAPE,
                         "flash attention: a row stride is smaller than heads * head_dim = %zu",
                         row);
    const attn_flash_dropout *d = pb->dropout;
    if (d && d->p != 0.0) {
        if (d->B != pb->B || d->H != pb->H || d->T != pb->T)
            return attn_fail(err, ATTN_ERR_SHAPE,
                             "flash attention: dropout mask drawn for (B, H, T) = (%d, %d, %d), "
                             "problem is (%d, %d, %d)",
                             d->B, d->H, d->T, pb->B, pb->H, pb->T);
        if (d->stream != ATTN_STREAM_TORCH_MKL && !d->bits)
            return attn_fail(err, ATTN_ERR_STATE, "flash attention: dropout mask was not drawn");
    }
    if (pb->window < 0)
        return attn_fail(err, ATTN_ERR_INVALID_ARG, "flash attention: window must be >= 0 (got %d)",
                         pb->window);
    return ATTN_OK;
}

/* c's kernels for o's SIMD path and precision. */
static attn_status pick_kernels(run_ctx *c, const attn_flash_options *o, attn_error *err) {
    const attn_simd simd = attn_simd_resolve(o->simd);
    if (!attn_simd_supported(simd))
        return attn_fail(err, ATTN_ERR_INVALID_ARG,
                         "flash attention: this CPU cannot run the %s path", attn_simd_name(simd));
    c->K = kernels_for(simd);
    c->KB = NULL;
    if (o->precision == ATTN_PRECISION_BF16) {
        const attn_status ps = attn_precision_check(ATTN_PRECISION_BF16, err);
        if (ps != ATTN_OK) return ps;
#ifdef ATTN_FLASH_HAVE_X86
        /* Every AVX512-BF16 CPU has these too; checked, not assumed. */
        if (!attn_cpu_has(ATTN_CPU_AVX512_BW))
            return attn_fail(err, ATTN_ERR_INVALID_ARG,
                             "flash attention: bf16 needs AVX512-BW and -VL; use fp32");
        c->kb = attn_flash_kernels_bf16;
        if (attn_flash_amx_usable()) c->kb.gemm = attn_flash_gemm_amx;
        c->KB = &c->kb;
#endif
    } else if (o->precision != ATTN_PRECISION_FP32) {
        return attn_fail(err, ATTN_ERR_INVALID_ARG, "flash attention: unknown precision %d",
                         (int)o->precision);
    }
    return ATTN_OK;
}

const char *attn_flash_kernel_path(const attn_flash_options *opt) {
    run_ctx c;
    memset(&c, 0, sizeof c);
    const attn_flash_options none = {0};
    if (pick_kernels(&c, opt ? opt : &none, NULL) != ATTN_OK) return NULL;
    if (!c.KB) return c.K->name;
#ifdef ATTN_FLASH_HAVE_X86
    if (c.kb.gemm == attn_flash_gemm_amx) return "amx";
#endif
    return "avx512-bf16";
}

static attn_status setup(run_ctx *c, const attn_flash_problem *pb, const attn_flash_options *opt,
                         attn_error *err) {
    attn_status st = check_problem(pb, err);
    if (st != ATTN_OK) return st;
    attn_flash_options o = {0};
    if (opt) o = *opt;
    c->B = pb->B;
    c->T = pb->T;
    c->H = pb->H;
    c->hd = pb->head_dim;
    c->window = pb->window;
    c->bq = o.block_q > 0 ? o.block_q : DEFAULT_BLOCK_Q;
    c->bk = o.block_k > 0 ? o.block_k : DEFAULT_BLOCK_K;
    c->threads = o.threads > 0 ? o.threads : attn_default_threads();
    st = pick_kernels(c, &o, err);
    if (st != ATTN_OK) return st;
    c->hdp = pad_to((size_t)c->hd, ATTN_FLASH_PAD);
    c->bqp = pad_to((size_t)c->bq, ATTN_FLASH_PAD);
    c->bkp = pad_to((size_t)c->bk, ATTN_FLASH_PAD);
    /* The book divides the scores by sqrt(head_dim) in float32. */
    c->qk_scale = 1.0f / sqrtf((float)c->hd);
    c->softcap = pb->scores ? (float)pb->scores->softcap : 0.0f;
    c->alibi = pb->scores && pb->scores->positions == ATTN_POSITIONS_ALIBI;
    c->xform = c->softcap > 0.0f || c->alibi;
    c->scale = c->xform ? 1.0f : c->qk_scale;
    drop_ctx_init(&c->drop, pb->dropout, c->T);
    return ATTN_OK;
}

static int imin(int a, int b) {
    return a < b ? a : b;
}

static int imax(int a, int b) {
    return a > b ? a : b;
}

/* On the diagonal tile the second half of the keys (from ks) is seen only by
 * queries from qs: the products skip what is masked anyway (the forward's
 * diagonal mask covers it; the backward writes P, dS there as exact zeros).
 * on = 0: whole-tile products. */
typedef struct tile_split {
    int ks, qs, rest, on;
} tile_split;

static tile_split diag_split(int i0, int nq, int j0, int nk) {
    tile_split s = {nk, 0, 0, 0};
    if (i0 < j0 + nk - 1 && nk >= 32) {
        s.ks = nk / 2;
        s.qs = imin(nq, imax(0, j0 + s.ks - i0));
    }
    s.rest = nq - s.qs;
    s.on = s.ks < nk && s.qs > 0;
    return s;
}

/* ---- forward ------------------------------------------------------------ */

static size_t fwd_thread_bytes(const run_ctx *c) {
    const size_t f = (size_t)c->hd * c->bqp   /* Q^T */
                     + (size_t)c->bk * c->bqp /* S^T / P^T */
                     + (size_t)c->bq * c->hdp /* accumulator */
                     + (size_t)c->bk * c->hdp /* V tile, contiguous */
                     + 3 * c->bqp             /* m, l, alpha */
                     + c->bkp + c->bqp;       /* mask row, MCG states */
    return f * sizeof(float) + 8 * 64;
}

/* Online-softmax rows start empty (m = -inf, l = 0); with the torch-mkl
 * stream, xst[ii] gets the MCG31 state at (i0 + ii, 0). Returns a^bk, the
 * step of one key tile (1 when unused). */
static uint32_t fwd_rows_init(const run_ctx *c, int nq, int nqp, uint64_t row0, float *m, float *l,
                              uint32_t *xst) {
    for (int ii = 0; ii < nqp; ii++) {
        m[ii] = -INFINITY;
        l[ii] = 0.0f;
    }
    uint32_t a_bk = 1;
    if (c->drop.on && c->drop.mkl) {
        uint32_t xs = drop_state_at(&c->drop, row0);
        for (int ii = 0; ii < nq; ii++) {
            xst[ii] = xs;
            xs = attn_mcg31_mul(xs, c->drop.a_T);
        }
        a_bk = attn_mcg31_pow((uint64_t)c->bk);
    }
    return a_bk;
}

/* Start fetching the next tile's K and V rows (up to key `last`). */
static void prefetch_next_kv(const run_ctx *c, const attn_flash_problem *pb, const float *kb,
                             const float *vb, int j0, int last) {
    if (j0 + c->bk <= last)
        for (int jj = 0; jj < c->bk && j0 + c->bk + jj <= last; jj++)
            for (int d = 0; d < c->hd; d += 16) {
                __builtin_prefetch(kb + ((size_t)c->bk + jj) * pb->ld_k + d, 0, 2);
                __builtin_prefetch(vb + ((size_t)c->bk + jj) * pb->ld_v + d, 0, 2);
            }
}

/* Diagonal tile: key j0+jj is masked for query i0+ii < j0+jj (S^T = -inf). */
static void mask_diag_st(float *St, size_t bqp, int nk, int nq, int j0, int i0) {
    for (int jj = 0; jj < nk; jj++) {
        const int upto = imin(nq, j0 + jj - i0);
        for (int ii = 0; ii < upto; ii++)
            St[(size_t)jj * bqp + ii] = -INFINITY;
    }
}

/* Soft-cap and ALiBi on a tile of raw dot products (before any mask):
 * element (r, c) at S[r * ld + c] is query i0 + (keys_in_rows ? c : r), key
 * j0 + (keys_in_rows ? r : c) of head h. */
static void transform_tile(const run_ctx *c, float *S, size_t ld, int rows, int cols,
                           int keys_in_rows, int i0, int j0, int h) {
    const float slope = c->alibi ? attn_alibi_slope(c->H, h) : 0.0f, cap = c->softcap;
    for (int r = 0; r < rows; r++) {
        float *row = S + (size_t)r * ld;
        for (int k = 0; k < cols; k++) {
            float v = row[k] * c->qk_scale;
            if (cap > 0.0f) v = cap * tanhf(v / cap);
            if (c->alibi)
                v += slope * (float)(keys_in_rows ? (j0 + r) - (i0 + k) : (j0 + k) - (i0 + r));
            row[k] = v;
        }
    }
}

static void visible(const run_ctx *c, int i, int j0, int nk, int *lo, int *hi);

/* dS *= d score / d dot on the visible keys of a (nq, nk) tile (from query
 * i0, key j0), from the raw dot products R (soft-cap). */
static void transform_grad(const run_ctx *c, float *dS, const float *R, size_t ld, int nq, int nk,
                           int i0, int j0) {
    const float cap = c->softcap;
    for (int r = 0; r < nq; r++) {
        int lo, hi;
        visible(c, i0 + r, j0, nk, &lo, &hi);
        for (int k = lo; k < hi; k++) {
            const size_t e = (size_t)r * ld + (size_t)k;
            float g = c->qk_scale;
            if (cap > 0.0f) {
                const float t = tanhf(R[e] * c->qk_scale / cap);
                g *= 1.0f - t * t;
            }
            dS[e] *= g;
        }
    }
}

/* Sliding window: key j0+jj is masked for query i0+ii when (i0+ii) - (j0+jj)
 * >= W (S^T = -inf). Only tiles reaching back past some row's window. */
static void mask_window_st(float *St, size_t bqp, int nk, int nq, int j0, int i0, int W) {
    for (int jj = 0; jj < nk; jj++)
        for (int ii = imax(0, j0 + jj + W - i0); ii < nq; ii++)
            St[(size_t)jj * bqp + ii] = -INFINITY;
}

/* The first key tile a query tile from i0 sees: 0, or with a window the
 * tile holding key i0 - W + 1 (tiles stay aligned to multiples of bk). */
static int first_key_tile(const run_ctx *c, int i0) {
    if (c->window <= 0 || i0 - c->window + 1 <= 0) return 0;
    return (i0 - c->window + 1) / c->bk * c->bk;
}

/* Move each row's MCG31 state from key 0 to key j0 (skipped tiles). */
static void drop_skip_keys(const run_ctx *c, int nq, int j0, uint32_t *xst) {
    if (!(c->drop.on && c->drop.mkl) || j0 == 0) return;
    const uint32_t jump = attn_mcg31_pow((uint64_t)j0);
    for (int ii = 0; ii < nq; ii++)
        xst[ii] = attn_mcg31_mul(xst[ii], jump);
}

/* Dropout on P^T: column ii (query i0+ii) times its keys' multipliers;
 * advances each row's MCG31 state xst[ii] by one key tile. */
static void drop_cols_st(const run_ctx *c, float *St, size_t bqp, int nq, int nk, uint64_t row0,
                         int j0, uint32_t *xst, uint32_t a_bk, float *mult) {
    if (c->drop.on)
        for (int ii = 0; ii < nq; ii++) {
            const uint64_t k0 = row0 + (uint64_t)ii * (uint64_t)c->T + (uint64_t)j0;
            drop_row(&c->drop, k0, c->drop.mkl ? xst[ii] : 0, nk, mult);
            if (c->drop.mkl) xst[ii] = attn_mcg31_mul(xst[ii], a_bk);
            for (int jj = 0; jj < nk; jj++)
                St[(size_t)jj * bqp + ii] *= mult[jj];
        }
}

/* o = acc / l and lse = m * scale + log l for the tile's nq rows. */
static void fwd_write_out(const run_ctx *c, const attn_flash_problem *pb, int b, int h, int i0,
                          int nq, const float *acc, const float *m, const float *l) {
    const int T = c->T, hd = c->hd;
    const size_t bh = (size_t)b * c->H + (size_t)h, hdp = c->hdp;
    float *ob = pb->o + ((size_t)b * T + (size_t)i0) * pb->ld_o + (size_t)h * hd;
    float *lse = pb->lse + bh * (size_t)T + (size_t)i0;
    for (int ii = 0; ii < nq; ii++) {
        const float inv = 1.0f / l[ii];
        const float *src = acc + (size_t)ii * hdp;
        float *dst = ob + (size_t)ii * pb->ld_o;
        for (int d = 0; d < hd; d++)
            dst[d] = src[d] * inv;
        lse[ii] = m[ii] * c->scale + logf(l[ii]);
    }
}

/* A forward task's buffers (fwd_thread_bytes' layout), carved from its
 * thread's scratch. */
typedef struct fwd_tiles {
    float *Qt;            /* (hd, bqp): the query tile's Q^T */
    float *St;            /* (bk, bqp): S^T, then P^T */
    float *acc;           /* (bq, hdp): the output accumulator */
    float *Vp;            /* (bk, hdp): the key tile's V rows, contiguous */
    float *m, *l, *alpha; /* (bqp): online-softmax rows */
    float *mult;          /* (bkp): a mask row */
    uint32_t *xst;        /* (bqp): MCG31 states */
} fwd_tiles;

static fwd_tiles fwd_carve(const run_ctx *c, char *scratch) {
    const size_t bqp = c->bqp, hdp = c->hdp;
    char *cur = scratch;
    fwd_tiles w;
    w.Qt = carve(&cur, (size_t)c->hd * bqp);
    w.St = carve(&cur, (size_t)c->bk * bqp);
    w.acc = carve(&cur, (size_t)c->bq * hdp);
    w.Vp = carve(&cur, (size_t)c->bk * hdp);
    w.m = carve(&cur, bqp);
    w.l = carve(&cur, bqp);
    w.alpha = carve(&cur, bqp);
    w.mult = carve(&cur, c->bkp);
    w.xst = (uint32_t *)carve(&cur, bqp);
    return w;
}

/* What a forward task (one query tile of one (b, h)) holds for its key tiles. */
typedef struct fwd_rows {
    int b, h, i0, nq, nqp;
    int jfirst, last; /* its first key tile and its last query (keys past it are masked) */
    uint64_t row0;    /* flat mask index of (b, h, i0, 0) */
    uint32_t a_bk;    /* the MCG31 step of one key tile */
} fwd_rows;

/* S^T (nk, nq) = K_tile Q_tile^T, Q^T packed (hd, bqp). */
static void fwd_scores_t(const run_ctx *c, const attn_flash_problem *pb, const tile_split *s,
                         int nqp, int nk, const float *kb, const float *Qt, float *St) {
    const ptrdiff_t bqp = (ptrdiff_t)c->bqp, ldk = (ptrdiff_t)pb->ld_k;
    if (!s->on) {
        c->K->gemm(nk, nqp, c->hd, kb, ldk, 1, Qt, bqp, St, bqp, 0, NULL);
        return;
    }
    const int q16 = s->qs / ATTN_FLASH_PAD * ATTN_FLASH_PAD; /* whole vectors */
    c->K->gemm(s->ks, nqp, c->hd, kb, ldk, 1, Qt, bqp, St, bqp, 0, NULL);
    c->K->gemm(nk - s->ks, nqp - q16, c->hd, kb + (size_t)s->ks * pb->ld_k, ldk, 1, Qt + q16, bqp,
               St + (size_t)s->ks * c->bqp + q16, bqp, 0, NULL);
}

/* acc (nq, hd) = alpha * acc + P (nq, nk) V_tile, P read from P^T; acc
 * starts over (no alpha) when first. */
static void fwd_acc_pv(const run_ctx *c, const tile_split *s, int nq, int nk, const float *St,
                       const float *Vp, float *acc, const float *alpha, int first) {
    const ptrdiff_t bqp = (ptrdiff_t)c->bqp, hdp = (ptrdiff_t)c->hdp;
    if (!s->on) {
        c->K->gemm(nq, c->hd, nk, St, 1, bqp, Vp, hdp, acc, hdp, !first, alpha);
        return;
    }
    c->K->gemm(s->qs, c->hd, s->ks, St, 1, bqp, Vp, hdp, acc, hdp, !first, alpha);
    if (s->rest > 0)
        c->K->gemm(s->rest, c->hd, nk, St + s->qs, 1, bqp, Vp, hdp, acc + (size_t)s->qs * c->hdp,
                   hdp, !first, alpha + s->qs);
}

/* Key tile j0 of a forward task: scores, masks, the online softmax, dropout,
 * then P V into the accumulator. */
static void fwd_key_tile(const run_ctx *c, const attn_flash_problem *pb, const fwd_tiles *w,
                         const fwd_rows *r, int j0) {
    const int hd = c->hd, nq = r->nq, i0 = r->i0, last = r->last;
    const int nk = imin(c->bk, last + 1 - j0);
    const size_t bqp = c->bqp, hdp = c->hdp, k0 = (size_t)r->b * c->T + (size_t)j0;
    const float *kb = pb->k + k0 * pb->ld_k + (size_t)r->h * hd;
    const float *vb = pb->v + k0 * pb->ld_v + (size_t)r->h * hd;
    prefetch_next_kv(c, pb, kb, vb, j0, last);
    const tile_split s = diag_split(i0, nq, j0, nk);
    fwd_scores_t(c, pb, &s, r->nqp, nk, kb, w->Qt, w->St);
    if (c->xform) transform_tile(c, w->St, bqp, nk, r->nqp, 1, i0, j0, r->h);
    if (j0 + nk - 1 > i0) /* the diagonal tile: masks every entry a split left out too */
        mask_diag_st(w->St, bqp, nk, nq, j0, i0);
    if (c->window > 0 && last - j0 >= c->window)
        mask_window_st(w->St, bqp, nk, nq, j0, i0, c->window);
    c->K->softmax_cols(w->St, nk, r->nqp, (ptrdiff_t)bqp, w->m, w->l, w->alpha, c->scale);
    drop_cols_st(c, w->St, bqp, nq, nk, r->row0, j0, w->xst, r->a_bk, w->mult);
    /* Contiguous V rows: rows 3 d_out apart alias in L1. */
    for (int jj = 0; jj < nk; jj++)
        memcpy(w->Vp + (size_t)jj * hdp, vb + (size_t)jj * pb->ld_v, (size_t)hd * sizeof(float));
    fwd_acc_pv(c, &s, nq, nk, w->St, w->Vp, w->acc, w->alpha, j0 == r->jfirst);
}

static void fwd_task(const run_ctx *c, const attn_flash_problem *pb, int b, int h, int qt,
                     char *scratch) {
    const int T = c->T, hd = c->hd;
    const fwd_tiles w = fwd_carve(c, scratch);
    fwd_rows r;
    r.b = b;
    r.h = h;
    r.i0 = qt * c->bq;
    r.nq = imin(c->bq, T - r.i0);
    r.nqp = (int)pad_to((size_t)r.nq, ATTN_FLASH_PAD);
    const size_t bqp = c->bqp;
    const float *qb = pb->q + ((size_t)b * T + (size_t)r.i0) * pb->ld_q + (size_t)h * hd;
    for (int ii = 0; ii < r.nq; ii++) /* all the tile's rows in flight at once */
        for (int d = 0; d < hd; d += 16)
            __builtin_prefetch(qb + (size_t)ii * pb->ld_q + d);
    c->K->pack_t(qb, (ptrdiff_t)pb->ld_q, r.nq, hd, w.Qt, (ptrdiff_t)bqp);
    for (int d = 0; d < hd; d++)
        for (int ii = r.nq; ii < r.nqp; ii++)
            w.Qt[(size_t)d * bqp + ii] = 0.0f;
    const size_t bh = (size_t)b * c->H + (size_t)h;
    r.row0 = ((uint64_t)bh * (uint64_t)T + (uint64_t)r.i0) * (uint64_t)T;
    r.a_bk = fwd_rows_init(c, r.nq, r.nqp, r.row0, w.m, w.l, w.xst);
    r.last = r.i0 + r.nq - 1;
    r.jfirst = first_key_tile(c, r.i0);
    drop_skip_keys(c, r.nq, r.jfirst, w.xst);
    for (int j0 = r.jfirst; j0 <= r.last; j0 += c->bk)
        fwd_key_tile(c, pb, &w, &r, j0);
    fwd_write_out(c, pb, b, h, r.i0, r.nq, w.acc, w.m, w.l);
}

/* The bf16 forward: fwd_task's steps with the two products in bf16 pairs.
 * Q^T is packed as (head_dim / 2, queries) pairs, each K tile as bf16 rows,
 * P^T and the V tile with pairs of keys interleaved; the masked half of the
 * diagonal tile is not skipped (its P entries are exact zeros). */
static size_t fwd_thread_bytes_bf16(const run_ctx *c) {
    const size_t hd2 = ((size_t)c->hd + 1) / 2, bk2 = ((size_t)c->bk + 1) / 2;
    const size_t f = hd2 * c->bqp                 /* Q^T pairs */
                     + (size_t)c->bk * c->bqp     /* S^T / P^T */
                     + (size_t)c->bq * c->hdp     /* accumulator */
                     + (size_t)c->bk * c->hdp / 2 /* K tile, bf16 rows */
                     + bk2 * c->hdp               /* V tile, key pairs */
                     + bk2 * c->bqp               /* P^T, key pairs */
                     + 3 * c->bqp + c->bkp + c->bqp;
    return f * sizeof(float) + 12 * 64;
}

static void fwd_task_bf16(const run_ctx *c, const attn_flash_problem *pb, int b, int h, int qt,
                          char *scratch) {
    const attn_flash_bf16_kernels *KB = c->KB;
    const int T = c->T, hd = c->hd, hd2 = (hd + 1) / 2;
    const int i0 = qt * c->bq, nq = imin(c->bq, T - i0);
    const int nqp = (int)pad_to((size_t)nq, ATTN_FLASH_PAD);
    const size_t bqp = c->bqp, hdp = c->hdp, bk2 = ((size_t)c->bk + 1) / 2;
    char *cur = scratch;
    uint32_t *Qt = (uint32_t *)carve(&cur, (size_t)hd2 * bqp);
    float *St = carve(&cur, (size_t)c->bk * bqp);
    float *acc = carve(&cur, (size_t)c->bq * hdp);
    uint16_t *K16 = (uint16_t *)carve(&cur, (size_t)c->bk * hdp / 2);
    uint32_t *V2 = (uint32_t *)carve(&cur, bk2 * hdp);
    uint32_t *P2 = (uint32_t *)carve(&cur, bk2 * bqp);
    float *m = carve(&cur, bqp), *l = carve(&cur, bqp), *alpha = carve(&cur, bqp);
    float *mult = carve(&cur, c->bkp);
    uint32_t *xst = (uint32_t *)carve(&cur, bqp);

    const float *qb = pb->q + ((size_t)b * T + (size_t)i0) * pb->ld_q + (size_t)h * hd;
    KB->pack_pairs_t(qb, (ptrdiff_t)pb->ld_q, nq, hd, Qt, (ptrdiff_t)bqp);
    for (int d = 0; d < hd2; d++)
        for (int ii = nq; ii < nqp; ii++)
            Qt[(size_t)d * bqp + ii] = 0;
    const size_t bh = (size_t)b * c->H + (size_t)h;
    const uint64_t row0 = ((uint64_t)bh * (uint64_t)T + (uint64_t)i0) * (uint64_t)T;
    const uint32_t a_bk = fwd_rows_init(c, nq, nqp, row0, m, l, xst);

    const int last = i0 + nq - 1;
    const int jfirst = first_key_tile(c, i0);
    drop_skip_keys(c, nq, jfirst, xst);
    for (int j0 = jfirst; j0 <= last; j0 += c->bk) {
        const int nk = imin(c->bk, last + 1 - j0), nk2 = (nk + 1) / 2;
        const float *kb = pb->k + ((size_t)b * T + (size_t)j0) * pb->ld_k + (size_t)h * hd;
        const float *vb = pb->v + ((size_t)b * T + (size_t)j0) * pb->ld_v + (size_t)h * hd;
        prefetch_next_kv(c, pb, kb, vb, j0, last);
        /* S^T (nk, nq) = K_tile Q_tile^T */
        KB->cvt_rows(kb, (ptrdiff_t)pb->ld_k, nk, hd, K16, (ptrdiff_t)hdp);
        KB->gemm(nk, nqp, hd2, (const uint32_t *)K16, (ptrdiff_t)(hdp / 2), 1, Qt, (ptrdiff_t)bqp,
                 St, (ptrdiff_t)bqp, 0, NULL);
        if (c->xform) transform_tile(c, St, bqp, nk, nqp, 1, i0, j0, h);
        if (j0 + nk - 1 > i0) /* diagonal tile */
            mask_diag_st(St, bqp, nk, nq, j0, i0);
        if (c->window > 0 && last - j0 >= c->window)
            mask_window_st(St, bqp, nk, nq, j0, i0, c->window);
        c->K->softmax_cols(St, nk, nqp, (ptrdiff_t)bqp, m, l, alpha, c->scale);
        drop_cols_st(c, St, bqp, nq, nk, row0, j0, xst, a_bk, mult);
        /* acc (nq, hd) = alpha * acc + P (nq, nk) V_tile over pairs of keys */
        KB->pack_rows_interleave(St, (ptrdiff_t)bqp, nk, nqp, P2, (ptrdiff_t)bqp);
        KB->pack_rows_interleave(vb, (ptrdiff_t)pb->ld_v, nk, hd, V2, (ptrdiff_t)hdp);
        KB->gemm(nq, hd, nk2, P2, 1, (ptrdiff_t)bqp, V2, (ptrdiff_t)hdp, acc, (ptrdiff_t)hdp,
                 j0 > jfirst, alpha);
    }

    fwd_write_out(c, pb, b, h, i0, nq, acc, m, l);
}

attn_status attn_flash_forward(const attn_flash_problem *pb, const attn_flash_options *opt,
                               attn_flash_workspace *ws, attn_error *err) {
    run_ctx c;
    attn_status st = setup(&c, pb, opt, err);
    if (st != ATTN_OK) return st;
    if (!ws) return attn_fail(err, ATTN_ERR_INVALID_ARG, "flash attention: no workspace given");
    const size_t per = pad_to(c.KB ? fwd_thread_bytes_bf16(&c) : fwd_thread_bytes(&c), 64);
    const int nqt = (c.T + c.bq - 1) / c.bq;
    const long ntasks = (long)c.B * c.H * nqt;
    const int nt = (int)(ntasks < c.threads ? ntasks : c.threads);
    st = ws_reserve(ws, per * (size_t)nt, err);
    if (st != ATTN_OK) return st;
    char *base = ws->mem;
#pragma omp parallel num_threads(nt)
    {
        char *scratch = base + per * (size_t)omp_get_thread_num();
        /* Long (late) query tiles first: causal rows are unequal. */
#pragma omp for schedule(dynamic, 1)
        for (long t = 0; t < ntasks; t++) {
            const int qt = nqt - 1 - (int)(t % nqt);
            const long bh = t / nqt;
            /* Warm the shared cache with the Q rows of a task some thread will
             * take soon: they are read exactly once, from memory. */
            const long t2 = t + nt;
            if (t2 < ntasks) {
                const int qt2 = nqt - 1 - (int)(t2 % nqt);
                const long bh2 = t2 / nqt, b2 = bh2 / c.H, h2 = bh2 % c.H;
                const int i2 = qt2 * c.bq, n2 = imin(c.bq, c.T - i2);
                const float *q2 =
                    pb->q + ((size_t)b2 * c.T + (size_t)i2) * pb->ld_q + (size_t)h2 * c.hd;
                for (int ii = 0; ii < n2; ii++)
                    for (int d = 0; d < c.hd; d += 16)
                        __builtin_prefetch(q2 + (size_t)ii * pb->ld_q + d, 0, 1);
            }
            if (c.KB)
                fwd_task_bf16(&c, pb, (int)(bh / c.H), (int)(bh % c.H), qt, scratch);
            else
                fwd_task(&c, pb, (int)(bh / c.H), (int)(bh % c.H), qt, scratch);
        }
    }
    return ATTN_OK;
}

/* ---- backward ----------------------------------------------------------- */

static size_t bwd_thread_bytes(const run_ctx *c) {
    const size_t f = 2 * (size_t)c->hd * c->bkp    /* K^T, V^T */
                     + 5 * (size_t)c->bq * c->bkp  /* P, dP/dS, mask, dropped P, raw S */
                     + 3 * (size_t)c->bk * c->hdp  /* dK, dV accumulators, K rows */
                     + 2 * (size_t)c->bq * c->hdp; /* Q, dO rows */
    return f * sizeof(float) + 8 * 64;
}

typedef struct bwd_shared {
    const float *D; /* (B*H, T) rowsum(dO * O) */
} bwd_shared;

/* Start fetching the next query tile's Q and dO rows. */
static void prefetch_next_qdo(const run_ctx *c, const attn_flash_problem *pb,
                              const attn_flash_grads *g, const float *qb, const float *dob,
                              int i0) {
    for (int ii = 0; ii < c->bq && i0 + c->bq + ii < c->T; ii++)
        for (int d = 0; d < c->hd; d += 16) {
            __builtin_prefetch(qb + ((size_t)c->bq + ii) * pb->ld_q + d, 0, 2);
            __builtin_prefetch(dob + ((size_t)c->bq + ii) * g->ld_do + d, 0, 2);
        }
}

/* dk, dv rows of the key tile += the task's dK, dV accumulators. */
static void add_dkdv(const run_ctx *c, const attn_flash_grads *g, int nk, const float *dKa,
                     const float *dVa, float *dkb, float *dvb) {
    const size_t hdp = c->hdp;
    for (int jj = 0; jj < nk; jj++) {
        const float *ka = dKa + (size_t)jj * hdp, *va = dVa + (size_t)jj * hdp;
        float *kd = dkb + (size_t)jj * g->ld_dk, *vd = dvb + (size_t)jj * g->ld_dv;
        for (int d = 0; d < c->hd; d++) {
            kd[d] += ka[d];
            vd[d] += va[d];
        }
    }
}

/* Row i's visible keys of the tile from j0: [*lo, *hi) (j <= i, and
 * i - j < W with a window); empty when *lo >= *hi. */
static void visible(const run_ctx *c, int i, int j0, int nk, int *lo, int *hi) {
    *hi = imin(nk, i - j0 + 1);
    *lo = c->window > 0 ? imin(imax(0, i - c->window + 1 - j0), nk) : 0;
    if (*hi < *lo) *hi = *lo;
}

/* P = exp(S * scale - lse) on each row's visible keys, 0 elsewhere. */
static void exp_rows(const run_ctx *c, float *P, size_t bkp, int nq, int nk, int i0, int j0,
                     const float *lse) {
    for (int ii = 0; ii < nq; ii++) {
        const int i = i0 + ii;
        int lo, hi;
        visible(c, i, j0, nk, &lo, &hi);
        float *prow = P + (size_t)ii * bkp;
        for (int jj = 0; jj < lo; jj++)
            prow[jj] = 0.0f;
        c->K->exp_row(prow + lo, prow + lo, hi - lo, c->scale, lse[i]);
        for (int jj = hi; jj < nk; jj++)
            prow[jj] = 0.0f;
    }
}

/* Dropout: M = the rows' multipliers, Pd = P * M; *xs (torch-mkl MCG31
 * state at (i0, j0)) moves on one row each. Returns the P the products use. */
static const float *drop_rows(const run_ctx *c, const float *P, float *M, float *Pd, size_t bkp,
                              int nq, int nk, int i0, int j0, uint64_t bh_base, uint32_t *xs) {
    if (!c->drop.on) return P;
    for (int ii = 0; ii < nq; ii++) {
        const int i = i0 + ii;
        float *mrow = M + (size_t)ii * bkp;
        drop_row(&c->drop, bh_base + (uint64_t)i * (uint64_t)c->T + (uint64_t)j0, *xs, nk, mrow);
        if (c->drop.mkl) *xs = attn_mcg31_mul(*xs, c->drop.a_T);
        const float *prow = P + (size_t)ii * bkp;
        float *pdrow = Pd + (size_t)ii * bkp;
        for (int jj = 0; jj < nk; jj++)
            pdrow[jj] = prow[jj] * mrow[jj];
    }
    return Pd;
}

/* dS = P (dP * mask - D) * scale on the visible keys, 0 elsewhere (dS holds dP). */
static void ds_rows(const run_ctx *c, const float *P, const float *M, float *dS, size_t bkp, int nq,
                    int nk, int i0, int j0, const float *D) {
    for (int ii = 0; ii < nq; ii++) {
        int lo, hi;
        visible(c, i0 + ii, j0, nk, &lo, &hi);
        float *srow = dS + (size_t)ii * bkp;
        const size_t r = (size_t)ii * bkp + (size_t)lo;
        for (int jj = 0; jj < lo; jj++)
            srow[jj] = 0.0f;
        c->K->ds_row(P + r, srow + lo, c->drop.on ? M + r : NULL, hi - lo, D[i0 + ii], c->scale);
        for (int jj = hi; jj < nk; jj++)
            srow[jj] = 0.0f;
    }
}

/* The end of the query rows that see some key of the tile [j0, j0 + nk). */
static int last_query_end(const run_ctx *c, int j0, int nk) {
    return c->window > 0 ? imin(c->T, j0 + nk - 1 + c->window) : c->T;
}

/* A backward task's buffers (bwd_thread_bytes' layout), carved from its
 * thread's scratch. */
typedef struct bwd_tiles {
    float *Kt, *Vt;             /* (hd, bkp): the key tile's K^T, V^T */
    float *P, *dS, *M, *Pd, *R; /* (bq, bkp): P, dP / dS, mask, dropped P, raw S */
    float *dKa, *dVa, *Kp;      /* (bk, hdp): dK, dV accumulators, contiguous K rows */
    float *Qp, *Op;             /* (bq, hdp): contiguous Q and dO rows */
} bwd_tiles;

static bwd_tiles bwd_carve(const run_ctx *c, char *scratch) {
    const size_t bkp = c->bkp, hdp = c->hdp, bq = (size_t)c->bq, bk = (size_t)c->bk;
    char *cur = scratch;
    bwd_tiles w;
    w.Kt = carve(&cur, (size_t)c->hd * bkp);
    w.Vt = carve(&cur, (size_t)c->hd * bkp);
    w.P = carve(&cur, bq * bkp);
    w.dS = carve(&cur, bq * bkp);
    w.M = carve(&cur, bq * bkp);
    w.Pd = carve(&cur, bq * bkp);
    w.R = carve(&cur, bq * bkp);
    w.dKa = carve(&cur, bk * hdp);
    w.dVa = carve(&cur, bk * hdp);
    w.Kp = carve(&cur, bk * hdp);
    w.Qp = carve(&cur, bq * hdp);
    w.Op = carve(&cur, bq * hdp);
    return w;
}

/* What a backward task (one key tile of one (b, h)) holds for its query tiles. */
typedef struct bwd_keys {
    int b, h, j0, nk;
    uint64_t bh_base;     /* flat mask index of (b, h, 0, 0) */
    const float *lse, *D; /* (T) rows of this (b, h) */
    float *dq;            /* dq at (b, row 0, head h) */
} bwd_keys;

static bwd_keys bwd_keys_at(const run_ctx *c, const attn_flash_problem *pb,
                            const attn_flash_grads *g, const bwd_shared *sh, int b, int h, int kt) {
    const size_t T = (size_t)c->T, bh = (size_t)b * c->H + (size_t)h;
    bwd_keys k = {b,
                  h,
                  kt * c->bk,
                  imin(c->bk, c->T - kt * c->bk),
                  (uint64_t)bh * (uint64_t)T * (uint64_t)T,
                  pb->lse + bh * T,
                  sh->D + bh * T,
                  g->dq + (size_t)b * T * g->ld_dq + (size_t)h * c->hd};
    return k;
}

/* The MCG31 state at (j0, j0), the task's first row (torch-mkl; else 0). */
static uint32_t bwd_drop_start(const run_ctx *c, const bwd_keys *k) {
    if (!(c->drop.on && c->drop.mkl)) return 0;
    return drop_state_at(&c->drop, k->bh_base + (uint64_t)k->j0 * (uint64_t)c->T + (uint64_t)k->j0);
}

/* X (nq, nk) = A (nq, hd) B^T, B^T packed (hd, bkp): S = Q K^T, dP = dO V^T. */
static void bwd_rows_keys(const run_ctx *c, const tile_split *s, int nq, int nk, const float *A,
                          const float *Bt, float *X) {
    const ptrdiff_t hdp = (ptrdiff_t)c->hdp, bkp = (ptrdiff_t)c->bkp;
    if (!s->on) {
        c->K->gemm(nq, nk, c->hd, A, hdp, 1, Bt, bkp, X, bkp, 0, NULL);
        return;
    }
    c->K->gemm(s->qs, s->ks, c->hd, A, hdp, 1, Bt, bkp, X, bkp, 0, NULL);
    if (s->rest > 0)
        c->K->gemm(s->rest, nk, c->hd, A + (size_t)s->qs * c->hdp, hdp, 1, Bt, bkp,
                   X + (size_t)s->qs * c->bkp, bkp, 0, NULL);
}

/* acc (nk, hd) += X^T Y, X (nq, nk), Y (nq, hd): dV += P^T dO, dK += dS^T Q. */
static void bwd_keys_acc(const run_ctx *c, const tile_split *s, int nq, int nk, const float *X,
                         const float *Y, float *acc) {
    const ptrdiff_t hdp = (ptrdiff_t)c->hdp, bkp = (ptrdiff_t)c->bkp;
    if (!s->on) {
        c->K->gemm(nk, c->hd, nq, X, 1, bkp, Y, hdp, acc, hdp, 1, NULL);
        return;
    }
    c->K->gemm(s->ks, c->hd, nq, X, 1, bkp, Y, hdp, acc, hdp, 1, NULL);
    if (s->rest > 0)
        c->K->gemm(nk - s->ks, c->hd, s->rest, X + (size_t)s->qs * c->bkp + s->ks, 1, bkp,
                   Y + (size_t)s->qs * c->hdp, hdp, acc + (size_t)s->ks * c->hdp, hdp, 1, NULL);
}

/* dq rows (nq, hd) += dS (nq, nk) K (nk, hd). */
static void bwd_dq_acc(const run_ctx *c, const tile_split *s, int nq, int nk, const float *dS,
                       const float *Kp, float *dq, ptrdiff_t ld_dq) {
    const ptrdiff_t hdp = (ptrdiff_t)c->hdp, bkp = (ptrdiff_t)c->bkp;
    if (!s->on) {
        c->K->gemm(nq, c->hd, nk, dS, bkp, 1, Kp, hdp, dq, ld_dq, 1, NULL);
        return;
    }
    c->K->gemm(s->qs, c->hd, s->ks, dS, bkp, 1, Kp, hdp, dq, ld_dq, 1, NULL);
    if (s->rest > 0)
        c->K->gemm(s->rest, c->hd, nk, dS + (size_t)s->qs * c->bkp, bkp, 1, Kp, hdp,
                   dq + (size_t)s->qs * ld_dq, ld_dq, 1, NULL);
}

/* Query tile i0 of a task: P recomputed from the LSE, then dV, dS, dK, dQ.
 * *xs: the MCG31 state at (i0, j0), moved on one row per query. */
static void bwd_query_tile(const run_ctx *c, const attn_flash_problem *pb,
                           const attn_flash_grads *g, const bwd_tiles *w, const bwd_keys *k, int i0,
                           uint32_t *xs) {
    const int hd = c->hd, nq = imin(c->bq, c->T - i0), j0 = k->j0, nk = k->nk;
    const size_t bkp = c->bkp, hdp = c->hdp, r0 = (size_t)k->b * c->T + (size_t)i0;
    const float *qb = pb->q + r0 * pb->ld_q + (size_t)k->h * hd;
    const float *dob = g->d_o + r0 * g->ld_do + (size_t)k->h * hd;
    prefetch_next_qdo(c, pb, g, qb, dob, i0);
    /* Contiguous Q and dO rows (the strided ones alias in L1). */
    for (int ii = 0; ii < nq; ii++) {
        memcpy(w->Qp + (size_t)ii * hdp, qb + (size_t)ii * pb->ld_q, (size_t)hd * sizeof(float));
        memcpy(w->Op + (size_t)ii * hdp, dob + (size_t)ii * g->ld_do, (size_t)hd * sizeof(float));
    }
    const tile_split s = diag_split(i0, nq, j0, nk);
    /* S (nq, nk) = Q_tile K_tile^T; P = exp(S / sqrt(hd) - lse) */
    bwd_rows_keys(c, &s, nq, nk, w->Qp, w->Kt, w->P);
    if (c->xform) { /* soft-cap / ALiBi: the raw products kept for dS */
        memcpy(w->R, w->P, (size_t)nq * bkp * sizeof(float));
        transform_tile(c, w->P, bkp, nq, nk, 0, i0, j0, k->h);
    }
    exp_rows(c, w->P, bkp, nq, nk, i0, j0, k->lse);
    const float *Pused = drop_rows(c, w->P, w->M, w->Pd, bkp, nq, nk, i0, j0, k->bh_base, xs);
    bwd_keys_acc(c, &s, nq, nk, Pused, w->Op, w->dVa); /* dV (nk, hd) += P^T dO */
    bwd_rows_keys(c, &s, nq, nk, w->Op, w->Vt, w->dS); /* dP (nq, nk) = dO V^T */
    /* dS = P (dP * mask - D) / sqrt(hd) on the visible keys, 0 beyond */
    ds_rows(c, w->P, w->M, w->dS, bkp, nq, nk, i0, j0, k->D);
    if (c->xform) transform_grad(c, w->dS, w->R, bkp, nq, nk, i0, j0);
    /* dK (nk, hd) += dS^T Q;  dQ (nq, hd) += dS K */
    bwd_keys_acc(c, &s, nq, nk, w->dS, w->Qp, w->dKa);
    bwd_dq_acc(c, &s, nq, nk, w->dS, w->Kp, k->dq + (size_t)i0 * g->ld_dq, (ptrdiff_t)g->ld_dq);
}

static void bwd_task(const run_ctx *c, const attn_flash_problem *pb, const attn_flash_grads *g,
                     const bwd_shared *sh, int b, int h, int kt, char *scratch) {
    const bwd_tiles w = bwd_carve(c, scratch);
    const bwd_keys k = bwd_keys_at(c, pb, g, sh, b, h, kt);
    const int hd = c->hd, nk = k.nk;
    const size_t hdp = c->hdp, r0 = (size_t)b * c->T + (size_t)k.j0, col = (size_t)h * hd;
    const float *kb = pb->k + r0 * pb->ld_k + col, *vb = pb->v + r0 * pb->ld_v + col;
    float *dkb = g->dk + r0 * g->ld_dk + col, *dvb = g->dv + r0 * g->ld_dv + col;
    for (int jj = 0; jj < nk; jj++) /* the dK / dV rows this task adds to at the end */
        for (int d = 0; d < hd; d += 16) {
            __builtin_prefetch(dkb + (size_t)jj * g->ld_dk + d, 1, 1);
            __builtin_prefetch(dvb + (size_t)jj * g->ld_dv + d, 1, 1);
        }
    c->K->pack_t(kb, (ptrdiff_t)pb->ld_k, nk, hd, w.Kt, (ptrdiff_t)c->bkp);
    c->K->pack_t(vb, (ptrdiff_t)pb->ld_v, nk, hd, w.Vt, (ptrdiff_t)c->bkp);
    for (int jj = 0; jj < nk; jj++) /* contiguous K rows for dQ += dS K */
        memcpy(w.Kp + (size_t)jj * hdp, kb + (size_t)jj * pb->ld_k, (size_t)hd * sizeof(float));
    memset(w.dKa, 0, (size_t)nk * hdp * sizeof(float));
    memset(w.dVa, 0, (size_t)nk * hdp * sizeof(float));
    uint32_t xs = bwd_drop_start(c, &k); /* MCG31 state at (i, j0) for the next row i */
    /* Query tiles start at the diagonal: rows above it see none of these keys
     * (nor, with a window, rows from qend on). dQ rows go straight into dq:
     * only this (b, h)'s task writes them. */
    const int qend = last_query_end(c, k.j0, nk);
    for (int i0 = k.j0; i0 < qend; i0 += c->bq)
        bwd_query_tile(c, pb, g, &w, &k, i0, &xs);
    add_dkdv(c, g, nk, w.dKa, w.dVa, dkb, dvb);
}

/* The bf16 backward: bwd_task's five products in bf16 pairs (fp32 P, dP,
 * dS and accumulators; no split of the diagonal tile). */
static size_t bwd_thread_bytes_bf16(const run_ctx *c) {
    const size_t hd2 = ((size_t)c->hd + 1) / 2, bk2 = ((size_t)c->bk + 1) / 2,
                 bq2 = ((size_t)c->bq + 1) / 2;
    const size_t f = 2 * hd2 * c->bkp             /* K^T, V^T pairs */
                     + bk2 * c->hdp               /* K, key pairs */
                     + 5 * (size_t)c->bq * c->bkp /* P, dP/dS, mask, dropped P, raw S */
                     + bq2 * c->bkp               /* P^T / dS^T, query pairs */
                     + (size_t)c->bq * c->bkp / 2 /* dS, bf16 rows */
                     + 2 * (size_t)c->bk * c->hdp /* dK, dV accumulators */
                     + (size_t)c->bq * c->hdp     /* Q, dO bf16 rows */
                     + 2 * bq2 * c->hdp;          /* Q, dO query pairs */
    return f * sizeof(float) + 16 * 64;
}

/* A bf16 backward task's buffers (bwd_thread_bytes_bf16's layout). */
typedef struct bwd_tiles_bf16 {
    uint32_t *Kt, *Vt;          /* (hd2, bkp): K^T, V^T pairs */
    uint32_t *K2;               /* (bk2, hdp): K, key pairs */
    float *P, *dS, *M, *Pd, *R; /* (bq, bkp): as bwd_tiles */
    uint32_t *A2;               /* (bq2, bkp): P^T / dS^T, query pairs */
    uint16_t *dS16;             /* (bq, bkp): dS, bf16 rows */
    float *dKa, *dVa;           /* (bk, hdp): dK, dV accumulators */
    uint16_t *Q16, *O16;        /* (bq, hdp): Q, dO bf16 rows */
    uint32_t *Q2, *O2;          /* (bq2, hdp): Q, dO query pairs */
} bwd_tiles_bf16;

static bwd_tiles_bf16 bwd_carve_bf16(const run_ctx *c, char *scratch) {
    const size_t bkp = c->bkp, hdp = c->hdp, bq = (size_t)c->bq, bk = (size_t)c->bk;
    const size_t hd2 = ((size_t)c->hd + 1) / 2, bk2 = (bk + 1) / 2, bq2 = (bq + 1) / 2;
    char *cur = scratch;
    bwd_tiles_bf16 w;
    w.Kt = (uint32_t *)carve(&cur, hd2 * bkp);
    w.Vt = (uint32_t *)carve(&cur, hd2 * bkp);
    w.K2 = (uint32_t *)carve(&cur, bk2 * hdp);
    w.P = carve(&cur, bq * bkp);
    w.dS = carve(&cur, bq * bkp);
    w.M = carve(&cur, bq * bkp);
    w.Pd = carve(&cur, bq * bkp);
    w.R = carve(&cur, bq * bkp);
    w.A2 = (uint32_t *)carve(&cur, bq2 * bkp);
    w.dS16 = (uint16_t *)carve(&cur, bq * bkp / 2);
    w.dKa = carve(&cur, bk * hdp);
    w.dVa = carve(&cur, bk * hdp);
    w.Q16 = (uint16_t *)carve(&cur, bq * hdp / 2);
    w.O16 = (uint16_t *)carve(&cur, bq * hdp / 2);
    w.Q2 = (uint32_t *)carve(&cur, bq2 * hdp);
    w.O2 = (uint32_t *)carve(&cur, bq2 * hdp);
    return w;
}

/* bwd_query_tile in bf16 pairs (no split of the diagonal tile). */
static void bwd_query_tile_bf16(const run_ctx *c, const attn_flash_problem *pb,
                                const attn_flash_grads *g, const bwd_tiles_bf16 *w,
                                const bwd_keys *k, int i0, uint32_t *xs) {
    const attn_flash_bf16_kernels *KB = c->KB;
    const int hd = c->hd, hd2 = (hd + 1) / 2, j0 = k->j0, nk = k->nk, nk2 = (nk + 1) / 2;
    const int nq = imin(c->bq, c->T - i0), nq2 = (nq + 1) / 2;
    const size_t bkp = c->bkp, hdp = c->hdp, r0 = (size_t)k->b * c->T + (size_t)i0;
    const ptrdiff_t hw = (ptrdiff_t)(hdp / 2), ld_dq = (ptrdiff_t)g->ld_dq;
    const float *qb = pb->q + r0 * pb->ld_q + (size_t)k->h * hd;
    const float *dob = g->d_o + r0 * g->ld_do + (size_t)k->h * hd;
    prefetch_next_qdo(c, pb, g, qb, dob, i0);
    KB->cvt_rows(qb, (ptrdiff_t)pb->ld_q, nq, hd, w->Q16, (ptrdiff_t)hdp);
    KB->cvt_rows(dob, (ptrdiff_t)g->ld_do, nq, hd, w->O16, (ptrdiff_t)hdp);
    KB->pack_rows_interleave(qb, (ptrdiff_t)pb->ld_q, nq, hd, w->Q2, (ptrdiff_t)hdp);
    KB->pack_rows_interleave(dob, (ptrdiff_t)g->ld_do, nq, hd, w->O2, (ptrdiff_t)hdp);
    /* S (nq, nk) = Q_tile K_tile^T; P = exp(S / sqrt(hd) - lse) */
    KB->gemm(nq, nk, hd2, (const uint32_t *)w->Q16, hw, 1, w->Kt, (ptrdiff_t)bkp, w->P,
             (ptrdiff_t)bkp, 0, NULL);
    if (c->xform) { /* soft-cap / ALiBi: the raw products kept for dS */
        memcpy(w->R, w->P, (size_t)nq * bkp * sizeof(float));
        transform_tile(c, w->P, bkp, nq, nk, 0, i0, j0, k->h);
    }
    exp_rows(c, w->P, bkp, nq, nk, i0, j0, k->lse);
    const float *Pused = drop_rows(c, w->P, w->M, w->Pd, bkp, nq, nk, i0, j0, k->bh_base, xs);
    /* dV (nk, hd) += P^T dO over pairs of queries */
    KB->pack_rows_interleave(Pused, (ptrdiff_t)bkp, nq, nk, w->A2, (ptrdiff_t)bkp);
    KB->gemm(nk, hd, nq2, w->A2, 1, (ptrdiff_t)bkp, w->O2, (ptrdiff_t)hdp, w->dVa, (ptrdiff_t)hdp,
             1, NULL);
    /* dP (nq, nk) = dO V^T */
    KB->gemm(nq, nk, hd2, (const uint32_t *)w->O16, hw, 1, w->Vt, (ptrdiff_t)bkp, w->dS,
             (ptrdiff_t)bkp, 0, NULL);
    ds_rows(c, w->P, w->M, w->dS, bkp, nq, nk, i0, j0, k->D);
    if (c->xform) transform_grad(c, w->dS, w->R, bkp, nq, nk, i0, j0);
    /* dK (nk, hd) += dS^T Q over pairs of queries; dQ (nq, hd) += dS K
     * over pairs of keys */
    KB->pack_rows_interleave(w->dS, (ptrdiff_t)bkp, nq, nk, w->A2, (ptrdiff_t)bkp);
    KB->gemm(nk, hd, nq2, w->A2, 1, (ptrdiff_t)bkp, w->Q2, (ptrdiff_t)hdp, w->dKa, (ptrdiff_t)hdp,
             1, NULL);
    KB->cvt_rows(w->dS, (ptrdiff_t)bkp, nq, nk, w->dS16, (ptrdiff_t)bkp);
    KB->gemm(nq, hd, nk2, (const uint32_t *)w->dS16, (ptrdiff_t)(bkp / 2), 1, w->K2, (ptrdiff_t)hdp,
             k->dq + (size_t)i0 * ld_dq, ld_dq, 1, NULL);
}

static void bwd_task_bf16(const run_ctx *c, const attn_flash_problem *pb, const attn_flash_grads *g,
                          const bwd_shared *sh, int b, int h, int kt, char *scratch) {
    const attn_flash_bf16_kernels *KB = c->KB;
    const bwd_tiles_bf16 w = bwd_carve_bf16(c, scratch);
    const bwd_keys k = bwd_keys_at(c, pb, g, sh, b, h, kt);
    const int hd = c->hd, nk = k.nk;
    const size_t bkp = c->bkp, hdp = c->hdp;
    const size_t r0 = (size_t)b * c->T + (size_t)k.j0, col = (size_t)h * hd;
    const float *kb = pb->k + r0 * pb->ld_k + col, *vb = pb->v + r0 * pb->ld_v + col;
    float *dkb = g->dk + r0 * g->ld_dk + col, *dvb = g->dv + r0 * g->ld_dv + col;
    KB->pack_pairs_t(kb, (ptrdiff_t)pb->ld_k, nk, hd, w.Kt, (ptrdiff_t)bkp);
    KB->pack_pairs_t(vb, (ptrdiff_t)pb->ld_v, nk, hd, w.Vt, (ptrdiff_t)bkp);
    KB->pack_rows_interleave(kb, (ptrdiff_t)pb->ld_k, nk, hd, w.K2, (ptrdiff_t)hdp);
    memset(w.dKa, 0, (size_t)nk * hdp * sizeof(float));
    memset(w.dVa, 0, (size_t)nk * hdp * sizeof(float));
    uint32_t xs = bwd_drop_start(c, &k);
    const int qend = last_query_end(c, k.j0, nk);
    for (int i0 = k.j0; i0 < qend; i0 += c->bq)
        bwd_query_tile_bf16(c, pb, g, &w, &k, i0, &xs);
    add_dkdv(c, g, nk, w.dKa, w.dVa, dkb, dvb);
}

static attn_status check_grads(const run_ctx *c, const attn_flash_grads *g, attn_error *err) {
    const size_t row = (size_t)c->H * (size_t)c->hd;
    if (!g || !g->d_o || !g->dq || !g->dk || !g->dv)
        return attn_fail(err, ATTN_ERR_INVALID_ARG, "flash attention: a gradient pointer is NULL");
    if (g->ld_do < row || g->ld_dq < row || g->ld_dk < row || g->ld_dv < row)
        return attn_fail(err, ATTN_ERR_SHAPE,
                         "flash attention: a gradient row stride is smaller than heads * head_dim "
                         "= %zu",
                         row);
    return ATTN_OK;
}

/* D's row r = (b, h, t): rowsum(dO * O). */
static float d_row(const run_ctx *c, const attn_flash_problem *pb, const attn_flash_grads *g,
                   long r) {
    const long T = c->T, bh = r / T, t = r % T, b = bh / c->H, h = bh % c->H;
    const float *o = pb->o + ((size_t)b * T + (size_t)t) * pb->ld_o + (size_t)h * c->hd;
    const float *dO = g->d_o + ((size_t)b * T + (size_t)t) * g->ld_do + (size_t)h * c->hd;
    float s = 0.0f;
    for (int d = 0; d < c->hd; d++)
        s += o[d] * dO[d];
    return s;
}

/* Warm the cache with the K / V rows of key tile kt of (b, h) = bh. */
static void prefetch_key_tile(const run_ctx *c, const attn_flash_problem *pb, long bh, int kt) {
    const int j2 = kt * c->bk, n2 = imin(c->bk, c->T - j2);
    const size_t r0 = (size_t)(bh / c->H) * c->T + (size_t)j2, col = (size_t)(bh % c->H) * c->hd;
    for (int jj = 0; jj < n2; jj++)
        for (int d = 0; d < c->hd; d += 16) {
            __builtin_prefetch(pb->k + (r0 + jj) * pb->ld_k + col + d, 0, 1);
            __builtin_prefetch(pb->v + (r0 + jj) * pb->ld_v + col + d, 0, 1);
        }
}

attn_status attn_flash_backward(const attn_flash_problem *pb, const attn_flash_grads *g,
                                const attn_flash_options *opt, attn_flash_workspace *ws,
                                attn_error *err) {
    run_ctx c;
    attn_status st = setup(&c, pb, opt, err);
    if (st != ATTN_OK) return st;
    if (!ws) return attn_fail(err, ATTN_ERR_INVALID_ARG, "flash attention: no workspace given");
    if ((st = check_grads(&c, g, err)) != ATTN_OK) return st;
    /* One task per (b, h), its key tiles in order: the dQ rows of a (b, h)
     * get their tile contributions in the same order whatever the thread
     * count or schedule, so gradients are bit-identical run to run and
     * across --threads (a per-thread dQ slab summed afterwards is not). */
    const int nkt = (c.T + c.bk - 1) / c.bk;
    const size_t BH = (size_t)c.B * (size_t)c.H;
    const int nt = (int)((long)BH < c.threads ? (long)BH : c.threads);
    const size_t per = pad_to(c.KB ? bwd_thread_bytes_bf16(&c) : bwd_thread_bytes(&c), 64);
    const size_t d_bytes = pad_to(BH * (size_t)c.T * sizeof(float), 64);
    st = ws_reserve(ws, per * (size_t)nt + d_bytes, err);
    if (st != ATTN_OK) return st;
    char *base = ws->mem;
    float *D = (float *)(base + per * (size_t)nt);
    const bwd_shared sh = {D};
    const int H = c.H;
#pragma omp parallel num_threads(nt)
    {
        /* D = rowsum(dO * O) for every (b, h, t). */
#pragma omp for schedule(static)
        for (long r = 0; r < (long)BH * c.T; r++)
            D[r] = d_row(&c, pb, g, r);
        char *scratch = base + per * (size_t)omp_get_thread_num();
        /* Its Q and dO rows stay in cache across its key tiles; early key
         * tiles (the most queries) first. */
#pragma omp for schedule(dynamic, 1)
        for (long bh = 0; bh < (long)BH; bh++)
            for (int kt = 0; kt < nkt; kt++) {
                if (kt + 1 < nkt) prefetch_key_tile(&c, pb, bh, kt + 1);
                if (c.KB)
                    bwd_task_bf16(&c, pb, g, &sh, (int)(bh / H), (int)(bh % H), kt, scratch);
                else
                    bwd_task(&c, pb, g, &sh, (int)(bh / H), (int)(bh % H), kt, scratch);
            }
    }
    return ATTN_OK;
}

/* ---- weights read-out (attn viz) ----------------------------------------- */

/* P recomputed as the backward recomputes it: the same score gemm and
 * exp_row kernels against the saved LSE. */
attn_status attn_flash_weights(const attn_flash_problem *pb, const attn_flash_options *opt, int b,
                               int h, float *p, size_t ld_p, attn_error *err) {
    run_ctx c;
    attn_status st = setup(&c, pb, opt, err);
    if (st != ATTN_OK) return st;
    if (b < 0 || b >= c.B || h < 0 || h >= c.H)
        return attn_fail(err, ATTN_ERR_INVALID_ARG,
                         "flash attention: (batch %d, head %d) is outside (%d, %d)", b, h, c.B,
                         c.H);
    if (!p || ld_p < (size_t)c.T)
        return attn_fail(err, ATTN_ERR_INVALID_ARG,
                         "flash attention: weights need a (T, T) buffer with row stride >= %d",
                         c.T);
    const int T = c.T, hd = c.hd;
    const size_t Tp = pad_to((size_t)T, ATTN_FLASH_PAD), hdp = c.hdp;
    float *Kt = aligned_alloc(64, pad_to((size_t)hd * Tp * sizeof(float), 64));
    float *Qp = aligned_alloc(64, pad_to((size_t)T * hdp * sizeof(float), 64));
    float *S = aligned_alloc(64, pad_to((size_t)T * Tp * sizeof(float), 64));
    if (!Kt || !Qp || !S) {
        free(Kt);
        free(Qp);
        free(S);
        return attn_fail(err, ATTN_ERR_NOMEM, "flash attention: out of memory for the weights");
    }
    const float *qb = pb->q + (size_t)b * T * pb->ld_q + (size_t)h * hd;
    const float *kb = pb->k + (size_t)b * T * pb->ld_k + (size_t)h * hd;
    c.K->pack_t(kb, (ptrdiff_t)pb->ld_k, T, hd, Kt, (ptrdiff_t)Tp);
    for (int i = 0; i < T; i++)
        memcpy(Qp + (size_t)i * hdp, qb + (size_t)i * pb->ld_q, (size_t)hd * sizeof(float));
    c.K->gemm(T, T, hd, Qp, (ptrdiff_t)hdp, 1, Kt, (ptrdiff_t)Tp, S, (ptrdiff_t)Tp, 0, NULL);
    if (c.xform) transform_tile(&c, S, Tp, T, T, 0, 0, 0, h);
    const float *lse = pb->lse + ((size_t)b * c.H + (size_t)h) * (size_t)T;
    for (int i = 0; i < T; i++) {
        float *srow = S + (size_t)i * Tp, *prow = p + (size_t)i * ld_p;
        int lo, hi;
        visible(&c, i, 0, T, &lo, &hi);
        c.K->exp_row(srow + lo, srow + lo, hi - lo, c.scale, lse[i]);
        for (int j = 0; j < T; j++)
            prow[j] = j >= lo && j < hi ? srow[j] : 0.0f;
    }
    free(Kt);
    free(Qp);
    free(S);
    return ATTN_OK;
}
