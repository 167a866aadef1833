/* The MCG31 row drawers chosen at run time and split over threads (see
 * mcg31.h); the drawers themselves are in mcg31.c and mcg31_avx512.c. */
#include <omp.h>

#include "attn/cpu.h"
#include "mcg31.h"
#include "parallel.h"

const attn_mcg31_rows *attn_mcg31_pick(void) {
    static const attn_mcg31_rows generic = {attn_mcg31_keep_generic, attn_mcg31_mult_generic};
#if defined(__x86_64__) && defined(__GNUC__)
    static const attn_mcg31_rows avx512 = {attn_mcg31_keep_avx512, attn_mcg31_mult_avx512};
    if (attn_simd_resolve(ATTN_SIMD_AUTO) == ATTN_SIMD_AVX512) return &avx512;
#endif
    return &generic;
}

void attn_mcg31_keep(uint32_t x, uint32_t thr, uint8_t *keep, size_t n) {
    const attn_mcg31_rows *k = attn_mcg31_pick();
    if (n < ATTN_PAR_MIN || omp_in_parallel()) {
        k->keep(x, thr, keep, n);
        return;
    }
    const size_t chunks = (n + ATTN_PAR_CHUNK - 1) / ATTN_PAR_CHUNK;
#pragma omp parallel for schedule(static)
    for (size_t c = 0; c < chunks; c++) {
        const size_t k0 = c * ATTN_PAR_CHUNK;
        const size_t m = n - k0 < ATTN_PAR_CHUNK ? n - k0 : ATTN_PAR_CHUNK;
        k->keep(attn_mcg31_mul(x, attn_mcg31_pow(k0)), thr, keep + k0, m);
    }
}
