/* ATTN_VEC_CLONES: put before a loop-heavy static function to have GCC
 * compile it three times (AVX-512, AVX2, baseline x86-64) and pick one at
 * load time by the CPU, so the loops vectorise at the machine's width
 * without -march flags on the whole build. Same results at every width:
 * only for loops whose elements do not interact (no reassociated sums).
 * Empty elsewhere (clang, ASan builds, other CPUs). */
#ifndef ATTN_SRC_VEC_CLONES_H
#define ATTN_SRC_VEC_CLONES_H

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) &&                             \
    !defined(__SANITIZE_ADDRESS__)
#define ATTN_VEC_CLONES                                                                            \
    __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define ATTN_VEC_CLONES
#endif

#endif
