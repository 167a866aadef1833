/* attn/cpu.h — what this CPU can run, and how many threads to use.
 *
 * Every run-time CPU check of the library is here (src/base/cpu.c): the
 * kernels ask attn_cpu_has() or attn_simd_resolve() and never probe the CPU
 * themselves. Answers are facts of the CPU and the process, the same on
 * every call.
 *
 * The environment variable ATTN_SIMD caps every path at a level, as if the
 * CPU had nothing above it: generic < avx2 < avx512 < avx512-bf16 < amx
 * (unset, empty or "auto": no cap). ATTN_SIMD=avx2 on an AVX-512 machine
 * runs what an AVX2-only CPU runs: the fp32 kernels' AVX2 path, no AVX-512
 * GEMV or activation kernels, no bf16 engine, no AMX, and (set before
 * OpenBLAS loads, by libattn-ompwait.so) OpenBLAS's Haswell kernels. Every
 * question below answers for the capped CPU. An ATTN_SIMD the parser does
 * not know caps nothing; attn_cpu_cap_check() (attn/cpu_report.h) says so,
 * for the programs that report it. */
#ifndef ATTN_CPU_H
#define ATTN_CPU_H

#ifdef __cplusplus
extern "C" {
#endif

/* The fp32 kernels' vector paths. */
typedef enum attn_simd {
    ATTN_SIMD_AUTO = 0, /* ATTN_SIMD from the environment, else the best supported */
    ATTN_SIMD_GENERIC,  /* portable C */
    ATTN_SIMD_AVX2,     /* AVX2 + FMA */
    ATTN_SIMD_AVX512    /* AVX-512F (with DQ, VL) */
} attn_simd;

/* 1 when this CPU can run s under ATTN_SIMD's cap (GENERIC and AUTO
 * always can). */
int attn_simd_supported(attn_simd s);
/* AUTO -> the best path attn_simd_supported allows (the cap included); any
 * other value is returned as is. */
attn_simd attn_simd_resolve(attn_simd s);
const char *attn_simd_name(attn_simd s);
/* "auto", "generic", "avx2", "avx512"; 0 on success, -1 otherwise. */
int attn_simd_parse(const char *name, attn_simd *out);

/* The levels ATTN_SIMD caps at, lowest first (each includes the ones
 * before it). */
typedef enum attn_cpu_level {
    ATTN_CPU_LEVEL_GENERIC = 0, /* portable C only */
    ATTN_CPU_LEVEL_AVX2,        /* AVX2 + FMA */
    ATTN_CPU_LEVEL_AVX512,      /* AVX-512 F, BW, DQ, VL */
    ATTN_CPU_LEVEL_AVX512_BF16, /* + AVX512-BF16: the bf16 engine */
    ATTN_CPU_LEVEL_AMX          /* + AMX-BF16 tiles (granted by the OS) */
} attn_cpu_level;

/* The highest level this CPU (and OS) has, ignoring ATTN_SIMD. */
attn_cpu_level attn_cpu_level_native(void);
/* The cap ATTN_SIMD sets (ATTN_CPU_LEVEL_AMX when unset, empty, "auto" or
 * not a level name). */
attn_cpu_level attn_cpu_cap(void);
/* What the library uses: the lower of the two. */
attn_cpu_level attn_cpu_level_used(void);
/* "generic", "avx2", "avx512", "avx512-bf16", "amx". */
const char *attn_cpu_level_name(attn_cpu_level l);
/* A level's name (or "auto": *out = ATTN_CPU_LEVEL_AMX) -> 0, else -1. */
int attn_cpu_level_parse(const char *name, attn_cpu_level *out);
/* Instruction sets the other kernels need, beyond attn_simd's paths. */
typedef enum attn_cpu_feature {
    ATTN_CPU_AVX512_BW,   /* AVX-512 F, BW, VL + FMA: GEMV, bf16 conversion, masks */
    ATTN_CPU_AVX512_BF16, /* AVX-512 F + BF16 (vdpbf16ps): the bf16 engine */
    ATTN_CPU_AMX_BF16     /* AMX-TILE + AMX-BF16, and Linux granted the tile state */
} attn_cpu_feature;

/* 1 when the CPU (and, for AMX, the OS) allows f and ATTN_SIMD's cap is
 * at or above it (AVX512_BW: avx512, AVX512_BF16: avx512-bf16, AMX: amx).
 * The first AMX question asks Linux for the tile state, once per process. */
int attn_cpu_has(attn_cpu_feature f);

/* OpenBLAS's kernel name for OPENBLAS_CORETYPE (src/base/ompwait/): under
 * an ATTN_SIMD cap below the CPU's level, the capped level's ("Haswell" for
 * avx2, "Nehalem" for generic), on any CPU; else, on Intel CPUs, the one
 * their features allow ("SkylakeX", "Haswell"); NULL otherwise: OpenBLAS's
 * own detection is right there. */
const char *attn_cpu_openblas_core(void);

/* Threads used when none are asked for: OMP_NUM_THREADS when set to a
 * positive number, else attn_cpu_count(). */
int attn_default_threads(void);
/* The number of CPUs this process may run on (its affinity), at least 1. */
int attn_cpu_count(void);

#ifdef __cplusplus
}
#endif

#endif
