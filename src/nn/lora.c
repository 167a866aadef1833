/* A low-rank adapter on a Linear (see attn/lora.h). */
#include "attn/lora.h"

#include <math.h>
#include <string.h>

#include "attn/gemm.h"
#include "base/buffers.h"

/* The adapter's buffers, listed once: na values of A, nb of B (0: an
 * arena's), and its scratch. */
static int lora_buffers(attn_lora *l, size_t na, size_t nb, size_t scratch, attn_bufs_op op) {
    const attn_buf t[] = {
        ATTN_BUF(l->A, na),      ATTN_BUF(l->grad_A, na),       ATTN_BUF(l->B, nb),
        ATTN_BUF(l->grad_B, nb), ATTN_BUF(l->scratch, scratch),
    };
    return ATTN_BUFS(t, op);
}

static attn_status make(attn_lora *l, int in, int out, int rank, float alpha, int own,
                        attn_error *err) {
    memset(l, 0, sizeof *l);
    if (in < 1 || out < 1 || rank < 1 || rank > ATTN_LORA_MAX_RANK)
        return attn_fail(err, ATTN_ERR_INVALID_ARG,
                         "LoRA needs in_features, out_features >= 1 and rank in [1, %d] "
                         "(got %d, %d, %d)",
                         ATTN_LORA_MAX_RANK, in, out, rank);
    if (!isfinite(alpha)) return attn_fail(err, ATTN_ERR_INVALID_ARG, "LoRA alpha must be finite");
    l->in_features = in;
    l->out_features = out;
    l->rank = rank;
    l->alpha = alpha;
    l->views = !own;
    const size_t na = own ? (size_t)in * (size_t)rank : 0;
    const size_t nb = own ? (size_t)rank * (size_t)out : 0;
    if (lora_buffers(l, na, nb, (size_t)ATTN_LORA_ROWS * 2 * (size_t)rank, ATTN_BUFS_ALLOC) != 0)
        return attn_fail(err, ATTN_ERR_NOMEM, "out of memory for a rank-%d LoRA(%d, %d)", rank, in,
                         out);
    return ATTN_OK;
}

attn_status attn_lora_init(attn_lora *l, int in_features, int out_features, int rank, float alpha,
                           attn_rng *rng, attn_error *err) {
    attn_status s = make(l, in_features, out_features, rank, alpha, 1, err);
    if (s == ATTN_OK && rng) attn_lora_draw(rng, l->A, (size_t)in_features * (size_t)rank, rank);
    return s;
}

attn_status attn_lora_init_view(attn_lora *l, int in_features, int out_features, int rank,
                                float alpha, attn_error *err) {
    return make(l, in_features, out_features, rank, alpha, 0, err);
}

void attn_lora_free(attn_lora *l) {
    if (l->views) l->A = l->B = l->grad_A = l->grad_B = NULL; /* the arena's */
    lora_buffers(l, 0, 0, 0, ATTN_BUFS_FREE);
    memset(l, 0, sizeof *l);
}

void attn_lora_draw(attn_rng *rng, float *A, size_t n, int rank) {
    attn_rng_kaiming_uniform(rng, A, n, rank); /* A's fan_in: its dim 1 */
}

attn_status attn_lora_params(attn_lora *l, const char *prefix, attn_param_list *list,
                             attn_error *err) {
    const int64_t a[2] = {l->in_features, l->rank}, b[2] = {l->rank, l->out_features};
    attn_status s = attn_param_list_add_view(list, prefix, "A", &l->A, &l->grad_A, 2, a,
                                             ATTN_ROLE_LORA_A, l->rank, err);
    if (s != ATTN_OK) return s;
    return attn_param_list_add_view(list, prefix, "B", &l->B, &l->grad_B, 2, b, ATTN_ROLE_LORA_B,
                                    l->rank, err);
}

/* h (n, rank) = x A for n rows of x. */
static void down(const attn_lora *l, const float *x, size_t ldx, size_t n, float *h) {
    attn_sgemm(0, 0, 0, (int)n, l->rank, l->in_features, 1.0f, x, (int)ldx, l->A, l->rank, 0.0f, h,
               l->rank);
}

void attn_lora_forward(const attn_lora *l, const float *x, size_t ldx, float *y, size_t ldy,
                       size_t N) {
    const int r = l->rank, out = l->out_features;
    for (size_t r0 = 0; r0 < N; r0 += ATTN_LORA_ROWS) {
        const size_t n = N - r0 < ATTN_LORA_ROWS ? N - r0 : ATTN_LORA_ROWS;
        down(l, x + r0 * ldx, ldx, n, l->scratch);
        attn_sgemm(0, 0, 0, (int)n, out, r, l->alpha, l->scratch, r, l->B, out, 1.0f, y + r0 * ldy,
                   (int)ldy);
    }
}

void attn_lora_backward(attn_lora *l, const float *x, size_t ldx, const float *dy, size_t ldy,
                        float *dx, size_t lddx, size_t N) {
    const int r = l->rank, in = l->in_features, out = l->out_features;
    float *h = l->scratch, *dh = l->scratch + (size_t)ATTN_LORA_ROWS * (size_t)r;
    for (size_t r0 = 0; r0 < N; r0 += ATTN_LORA_ROWS) {
        const size_t n = N - r0 < ATTN_LORA_ROWS ? N - r0 : ATTN_LORA_ROWS;
        const float *xs = x + r0 * ldx, *dys = dy + r0 * ldy;
        if (l->grad_B) { /* grad_B (rank, out) += alpha h^T dy, h = x A again */
            down(l, xs, ldx, n, h);
            attn_sgemm(0, 1, 0, r, out, (int)n, l->alpha, h, r, dys, (int)ldy, 1.0f, l->grad_B,
                       out);
        }
        if (!l->grad_A && !dx) continue;
        /* dh (n, rank) = alpha dy B^T */
        attn_sgemm(0, 0, 1, (int)n, r, out, l->alpha, dys, (int)ldy, l->B, out, 0.0f, dh, r);
        if (l->grad_A) /* grad_A (in, rank) += x^T dh */
            attn_sgemm(0, 1, 0, in, r, (int)n, 1.0f, xs, (int)ldx, dh, r, 1.0f, l->grad_A, r);
        if (dx) /* dx (n, in) += dh A^T */
            attn_sgemm(0, 0, 1, (int)n, in, r, 1.0f, dh, r, l->A, r, 1.0f, dx + r0 * lddx,
                       (int)lddx);
    }
}
