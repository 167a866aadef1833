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

/* The CPU's own level up to avx512-bf16: AMX is probed only when asked
 * about (the probe asks Linux for the tile state). */
static attn_cpu_level native_below_amx(void) {
#ifdef ATTN_CPU_X86
    __builtin_cpu_init();
    /* The levels are the x86-64 microarchitecture levels (v3, v4), which
     * the compiler's per-level copies of loops (vec_clones.h) are built for. */
#if defined(__clang__)
    if (!(HAS("avx2") && HAS("fma") && HAS("bmi") && HAS("bmi2") && HAS("f16c")))
        return ATTN_CPU_LEVEL_GENERIC;
    if (!(HAS("avx512f") && HAS("avx512bw") && HAS("avx512dq") && HAS("avx512vl") &&
          HAS("avx512cd")))
        return ATTN_CPU_LEVEL_AVX2;
#else
    if (!HAS("x86-64-v3")) return ATTN_CPU_LEVEL_GENERIC;
    if (!HAS("x86-64-v4")) return ATTN_CPU_LEVEL_AVX2;
#endif
    return HAS("avx512bf16") ? ATTN_CPU_LEVEL_AVX512_BF16 : ATTN_CPU_LEVEL_AVX512;
#else
    return ATTN_CPU_LEVEL_GENERIC;
#endif
}

static int native_amx(void) {
#ifdef ATTN_CPU_X86
    return amx_bf16();
#else
    return 0;
#endif
}

attn_cpu_level attn_cpu_level_native(void) {
    const attn_cpu_level l = native_below_amx();
    return l == ATTN_CPU_LEVEL_AVX512_BF16 && native_amx() ? ATTN_CPU_LEVEL_AMX : l;
}

static const char *const LEVEL_NAMES[] = {"generic", "avx2", "avx512", "avx512-bf16", "amx"};

const char *attn_cpu_level_name(attn_cpu_level l) {
    return (unsigned)l <= ATTN_CPU_LEVEL_AMX ? LEVEL_NAMES[l] : "unknown";
}

int attn_cpu_level_parse(const char *name, attn_cpu_level *out) {
    if (!name) return -1;
    if (strcmp(name, "auto") == 0) {
        *out = ATTN_CPU_LEVEL_AMX;
        return 0;
    }
    for (int l = 0; l <= ATTN_CPU_LEVEL_AMX; l++)
        if (strcmp(name, LEVEL_NAMES[l]) == 0) {
            *out = (attn_cpu_level)l;
            return 0;
        }
    return -1;
}

/* Read on every question (not cached): a test may set ATTN_SIMD between
 * calls, and getenv costs far less than any kernel it chooses. */
attn_cpu_level attn_cpu_cap(void) {
    attn_cpu_level cap;
    const char *env = getenv("ATTN_SIMD");
    if (!env || !*env || attn_cpu_level_parse(env, &cap) != 0) return ATTN_CPU_LEVEL_AMX;
    return cap;
}

attn_cpu_level attn_cpu_level_used(void) {
    const attn_cpu_level cap = attn_cpu_cap();
    if (cap == ATTN_CPU_LEVEL_GENERIC) return cap; /* no CPU question asked at all */
    const attn_cpu_level native = attn_cpu_level_native();
    return native < cap ? native : cap;
}

/* 1 when the capped CPU reaches level l. */
static int reaches(attn_cpu_level l) {
    if (attn_cpu_cap() < l) return 0;
    if (l == ATTN_CPU_LEVEL_AMX)
        return native_below_amx() == ATTN_CPU_LEVEL_AVX512_BF16 && native_amx();
    return native_below_amx() >= l;
}

int attn_cpu_has(attn_cpu_feature f) {
    switch (f) {
    case ATTN_CPU_AVX512_BW: return reaches(ATTN_CPU_LEVEL_AVX512);
    case ATTN_CPU_AVX512_BF16: return reaches(ATTN_CPU_LEVEL_AVX512_BF16);
    case ATTN_CPU_AMX_BF16: return reaches(ATTN_CPU_LEVEL_AMX);
    }
    return 0;
}

int attn_simd_supported(attn_simd s) {
    switch (s) {
    case ATTN_SIMD_AUTO:
    case ATTN_SIMD_GENERIC: return 1;
    case ATTN_SIMD_AVX2: return reaches(ATTN_CPU_LEVEL_AVX2);
    case ATTN_SIMD_AVX512: return reaches(ATTN_CPU_LEVEL_AVX512);
    }
    return 0;
}

attn_simd attn_simd_resolve(attn_simd s) {
    if (s != ATTN_SIMD_AUTO) return s;
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
    const attn_cpu_level cap = attn_cpu_cap();
    if (cap < ATTN_CPU_LEVEL_AVX512 && cap < native_below_amx())
        return cap == ATTN_CPU_LEVEL_AVX2 ? "Haswell" : "Nehalem";
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
    return attn_cpu_count();
}

int attn_cpu_count(void) {
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) {
        const int n = CPU_COUNT(&set);
        if (n > 0) return n;
    }
    const long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)(n > 4096 ? 4096 : n) : 1;
}
