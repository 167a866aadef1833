/* attn/cpu.h — what this CPU can run, and how many threads to use.
 *
 * Every run-time CPU check of the library is here (src/base/cpu.c): the
 * kernels ask attn_cpu_has() or attn_simd_resolve() and never probe the CPU
 * themselves. Answers are facts of the CPU and the process, the same on
 * every call.
 *
 * The environment variable ATTN_SIMD=generic|avx2|avx512 forces a path for
 * ATTN_SIMD_AUTO (when the CPU supports it): the fp32 kernels' vector width,
 * for tests and comparisons. */
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

/* 1 when this CPU can run s (GENERIC and AUTO always can). */
int attn_simd_supported(attn_simd s);
/* AUTO -> the environment's ATTN_SIMD when set and supported, else the best
 * supported path; any other value is returned as is. */
attn_simd attn_simd_resolve(attn_simd s);
const char *attn_simd_name(attn_simd s);
/* "auto", "generic", "avx2", "avx512"; 0 on success, -1 otherwise. */
int attn_simd_parse(const char *name, attn_simd *out);

/* Instruction sets the other kernels need, beyond attn_simd's paths. */
typedef enum attn_cpu_feature {
    ATTN_CPU_AVX512_BW,   /* AVX-512 F, BW, VL + FMA: GEMV, bf16 conversion, masks */
    ATTN_CPU_AVX512_BF16, /* AVX-512 F + BF16 (vdpbf16ps): the bf16 engine */
    ATTN_CPU_AMX_BF16     /* AMX-TILE + AMX-BF16, and Linux granted the tile state */
} attn_cpu_feature;

/* 1 when the CPU (and, for AMX, the OS) allows f. The first AMX question
 * asks Linux for the tile state, once per process. */
int attn_cpu_has(attn_cpu_feature f);

/* OpenBLAS's kernel name for this CPU ("SkylakeX", "Haswell") on Intel CPUs,
 * for OPENBLAS_CORETYPE (src/base/ompwait/); NULL elsewhere: OpenBLAS's own
 * detection is right there. */
const char *attn_cpu_openblas_core(void);

/* Threads used when none are asked for: OMP_NUM_THREADS when set to a
 * positive number, else the number of CPUs this process may run on. */
int attn_default_threads(void);

#ifdef __cplusplus
}
#endif

#endif
