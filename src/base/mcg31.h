/* Internal: MKL's MCG31 generator (VSL_BRNG_MCG31), the stream behind the
 * torch-mkl dropout masks (attn/rng.h).
 *
 * x_{k+1} = a x_k mod m, m = 2^31 - 1; element k of a mask is kept when
 * PyTorch's double test x_k / m < 1 - p holds, which is exactly
 * x_k < attn_mcg31_threshold(p). Since x_k = x_0 a^k, any stretch of a mask
 * can be drawn on its own: the threads and vector lanes below each start
 * from x_0 a^k, and every element's bit is the one the serial recurrence
 * gives, at any thread count and on any instruction set. */
#ifndef ATTN_SRC_MCG31_H
#define ATTN_SRC_MCG31_H

#include <stddef.h>
#include <stdint.h>

#define ATTN_MCG31_M 2147483647u /* 2^31 - 1 */
#define ATTN_MCG31_A 1132489760u /* MKL's VSL_BRNG_MCG31 multiplier */
/* Elements per block: lane j of a block starts at x a^j (attn_mcg31_apow). */
#define ATTN_MCG31_BLOCK 64

/* a^0 .. a^64 mod m (tests/test_dropout_mcg31.c checks them). */
extern const uint32_t attn_mcg31_apow[ATTN_MCG31_BLOCK + 1];

/* a b mod m for a, b < 2^32: 2^31 == 1 (mod m), so fold the high bits. */
static inline uint32_t attn_mcg31_mul(uint64_t a, uint64_t b) {
    uint64_t p = a * b;
    p = (p & ATTN_MCG31_M) + (p >> 31);
    p = (p & ATTN_MCG31_M) + (p >> 31);
    return (uint32_t)(p >= ATTN_MCG31_M ? p - ATTN_MCG31_M : p);
}

/* a^e mod m. */
uint32_t attn_mcg31_pow(uint64_t e);

/* The first state of a tensor's mask from one 32-bit draw, as MKL seeds it
 * (s mod m, and 1 for 0). */
static inline uint32_t attn_mcg31_seed(uint32_t s) {
    const uint32_t x = s % ATTN_MCG31_M;
    return x ? x : 1u;
}

/* Smallest x with (double)x / m >= 1 - p: the kept elements are x < it. */
uint32_t attn_mcg31_threshold(double p);

/* A row drawer: keep[j] = (x_j < thr) for j < n, x_0 = x (bytes 0/1), or
 * mult[j] = x_j < thr ? scale : 0. One thread. */
typedef struct attn_mcg31_rows {
    void (*keep)(uint32_t x, uint32_t thr, uint8_t *keep, size_t n);
    void (*mult)(uint32_t x, uint32_t thr, float scale, float *mult, size_t n);
} attn_mcg31_rows;

/* The fastest drawer this CPU runs (ATTN_SIMD=generic forces the scalar
 * one); every drawer gives the same bits. */
const attn_mcg31_rows *attn_mcg31_pick(void);

/* keep[k] for k < n from x_0 = x, split over the OpenMP threads when n is
 * large and no parallel region is active. */
void attn_mcg31_keep(uint32_t x, uint32_t thr, uint8_t *keep, size_t n);

void attn_mcg31_keep_generic(uint32_t x, uint32_t thr, uint8_t *keep, size_t n);
void attn_mcg31_mult_generic(uint32_t x, uint32_t thr, float scale, float *mult, size_t n);
#if defined(__x86_64__) && defined(__GNUC__)
void attn_mcg31_keep_avx512(uint32_t x, uint32_t thr, uint8_t *keep, size_t n);
void attn_mcg31_mult_avx512(uint32_t x, uint32_t thr, float scale, float *mult, size_t n);
#endif

#endif
