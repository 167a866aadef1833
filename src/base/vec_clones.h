/* ATTN_VEC_FN / ATTN_VEC_PROC: a loop-heavy static function compiled three
 * times (x86-64-v4: AVX-512, x86-64-v3: AVX2, baseline x86-64), so its loops
 * vectorise at the machine's width without -march flags on the whole build;
 * each call picks one by attn_cpu_level_used() (attn/cpu.h), so ATTN_SIMD
 * caps them as it caps every other path. Same results at every width: only
 * for loops whose elements do not interact (no reassociated sums).
 *
 *   ATTN_VEC_PROC(name, (float *x, size_t n), (x, n), { ...body... })
 *   ATTN_VEC_FN(double, name, (const float *x, size_t n), (x, n), { ... })
 *
 * One plain copy elsewhere (clang, ASan builds, other CPUs). */
#ifndef ATTN_SRC_VEC_CLONES_H
#define ATTN_SRC_VEC_CLONES_H

#include "attn/cpu.h"

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) &&                             \
    !defined(__SANITIZE_ADDRESS__)
#define ATTN_VEC_COPIES(RET, NAME, PARAMS, ...)                                                    \
    __attribute__((target("arch=x86-64-v4"))) static RET NAME##_v4 PARAMS __VA_ARGS__              \
        __attribute__((target("arch=x86-64-v3"))) static RET NAME##_v3 PARAMS                      \
            __VA_ARGS__ static RET NAME##_v1 PARAMS __VA_ARGS__
/* One question a call (a getenv and the CPU's cached answers): the caller's
 * loop is a chunk of thousands of elements. */
static inline int attn_vec_level(void) {
    const attn_cpu_level l = attn_cpu_level_used();
    return l >= ATTN_CPU_LEVEL_AVX512 ? 4 : l >= ATTN_CPU_LEVEL_AVX2 ? 3 : 1;
}
#define ATTN_VEC_PICK(NAME)                                                                        \
    (attn_vec_level() == 4 ? NAME##_v4 : attn_vec_level() == 3 ? NAME##_v3 : NAME##_v1)
#define ATTN_VEC_FN(RET, NAME, PARAMS, ARGS, ...)                                                  \
    ATTN_VEC_COPIES(RET, NAME, PARAMS, __VA_ARGS__)                                                \
    static RET NAME PARAMS {                                                                       \
        return ATTN_VEC_PICK(NAME) ARGS;                                                           \
    }
#define ATTN_VEC_PROC(NAME, PARAMS, ARGS, ...)                                                     \
    ATTN_VEC_COPIES(void, NAME, PARAMS, __VA_ARGS__)                                               \
    static void NAME PARAMS {                                                                      \
        ATTN_VEC_PICK(NAME) ARGS;                                                                  \
    }
#else
#define ATTN_VEC_FN(RET, NAME, PARAMS, ARGS, ...) static RET NAME PARAMS __VA_ARGS__
#define ATTN_VEC_PROC(NAME, PARAMS, ARGS, ...) static void NAME PARAMS __VA_ARGS__
#endif

#endif
