/* The one place that asks the CPU what it can run (attn/cpu.h). Also
 * compiled into libattn-ompwait.so, whose constructor runs before libgcc's
 * own CPU probe: every check calls __builtin_cpu_init first, and nothing
 * here needs more than libc. */
#define _GNU_SOURCE /* sched_getaffinity, syscall */
#include "attn/cpu.h"

#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#if defined(__x86_64__) && defined(__GNUC__)
#define ATTN_CPU_X86 1
#include <cpuid.h>
#include <sys/syscall.h>
#endif

#ifdef ATTN_CPU_X86
/* __builtin_cpu_supports takes literals only. */
#define HAS(f) __builtin_cpu_supports(f)

#define ARCH_REQ_XCOMP_PERM 0x1023 /* Linux: ask for an extended state */
#define XFEATURE_XTILEDATA 18      /* the AMX tile data */

static int amx_bf16(void) {
    static int cached = -1; /* a CPU and process fact: asked of Linux once */
    if (cached < 0) {
        unsigned a, b, c, d;
        int ok = __get_cpuid_count(7, 0, &a, &b, &c, &d) && (d & (1u << 22)) /* AMX-BF16 */ &&
                 (d & (1u << 24)) /* AMX-TILE */;
        /* The kernel hands out tile state only on request. */
        if (ok) ok = syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) == 0;
        cached = ok;
    }
    return cached;
}
#endif

int attn_cpu_has(attn_cpu_feature f) {
#ifdef ATTN_CPU_X86
    __builtin_cpu_init();
    switch (f) {
    case ATTN_CPU_AVX512_BW:
        return HAS("avx512f") && HAS("avx512bw") && HAS("avx512vl") && HAS("fma");
    case ATTN_CPU_AVX512_BF16: return HAS("avx512f") && HAS("avx512bf16");
    case ATTN_CPU_AMX_BF16: return amx_bf16();
    }
#else
    (void)f;
#endif
    return 0;
}

int attn_simd_supported(attn_simd s) {
    if (s == ATTN_SIMD_AUTO || s == ATTN_SIMD_GENERIC) return 1;
#ifdef ATTN_CPU_X86
    __builtin_cpu_init();
    if (s == ATTN_SIMD_AVX2) return HAS("avx2") && HAS("fma");
    if (s == ATTN_SIMD_AVX512)
        return HAS("avx512f") && HAS("avx512dq") && HAS("avx512vl") && HAS("avx2") && HAS("fma");
#endif
    return 0;
}

attn_simd attn_simd_resolve(attn_simd s) {
    if (s != ATTN_SIMD_AUTO) return s;
    const char *env = getenv("ATTN_SIMD");
    attn_simd forced;
    if (env && attn_simd_parse(env, &forced) == 0 && forced != ATTN_SIMD_AUTO &&
        attn_simd_supported(forced))
        return forced;
    if (attn_simd_supported(ATTN_SIMD_AVX512)) return ATTN_SIMD_AVX512;
    if (attn_simd_supported(ATTN_SIMD_AVX2)) return ATTN_SIMD_AVX2;
    return ATTN_SIMD_GENERIC;
}

const char *attn_simd_name(attn_simd s) {
    switch (s) {
    case ATTN_SIMD_AUTO: return "auto";
    case ATTN_SIMD_GENERIC: return "generic";
    case ATTN_SIMD_AVX2: return "avx2";
    case ATTN_SIMD_AVX512: return "avx512";
    }
    return "unknown";
}

int attn_simd_parse(const char *name, attn_simd *out) {
    static const attn_simd all[] = {ATTN_SIMD_AUTO, ATTN_SIMD_GENERIC, ATTN_SIMD_AVX2,
                                    ATTN_SIMD_AVX512};
    for (size_t i = 0; name && i < sizeof all / sizeof all[0]; i++)
        if (strcmp(name, attn_simd_name(all[i])) == 0) {
            *out = all[i];
            return 0;
        }
    return -1;
}

const char *attn_cpu_openblas_core(void) {
#ifdef ATTN_CPU_X86
    __builtin_cpu_init();
    if (!__builtin_cpu_is("intel")) return NULL;
    /* The single-precision kernels OpenBLAS also uses for Cooper Lake and
     * Sapphire Rapids. */
    if (HAS("avx512f") && HAS("avx512cd") && HAS("avx512bw") && HAS("avx512dq") && HAS("avx512vl"))
        return "SkylakeX";
    if (HAS("avx2") && HAS("fma")) return "Haswell";
#endif
    return NULL;
}

int attn_default_threads(void) {
    const char *env = getenv("OMP_NUM_THREADS");
    if (env) {
        char *end = NULL;
        const long n = strtol(env, &end, 10);
        if (end != env && n > 0) return n > 4096 ? 4096 : (int)n;
    }
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) {
        const int n = CPU_COUNT(&set);
        if (n > 0) return n;
    }
    const long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)(n > 4096 ? 4096 : n) : 1;
}
