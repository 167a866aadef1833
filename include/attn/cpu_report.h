/* attn/cpu_report.h — what runs on this CPU under the ATTN_SIMD cap
 * (attn/cpu.h), gathered from the answers the kernels act on: for `attn
 * info --cpu`, Python's attn.cpu_info() and programs that check ATTN_SIMD. */
#ifndef ATTN_CPU_REPORT_H
#define ATTN_CPU_REPORT_H

#include "attn/cpu.h"
#include "attn/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ATTN_OK when ATTN_SIMD is unset or names a level, else
 * ATTN_ERR_INVALID_ARG with the accepted names. */
attn_status attn_cpu_cap_check(attn_error *err);

/* What runs here, for `attn info --cpu` and Python's attn.cpu_info(). */
typedef struct attn_cpu_report {
    attn_cpu_level native, cap, used; /* the CPU's, ATTN_SIMD's, the lower */
    int cap_set;                      /* 1 when ATTN_SIMD set a cap */
    attn_simd fp32_path;              /* the fp32 kernels' path (attention, activations) */
    attn_simd gemv_path;              /* GEMV and bf16 conversion: avx512, avx2 or generic */
    int bf16_engine;                  /* --precision bf16 (oneDNN, AVX512-BF16) */
    int amx;                          /* the fused attention's bf16 products on AMX */
    const char *openblas_core;        /* OPENBLAS_CORETYPE as OpenBLAS read it, or NULL */
} attn_cpu_report;

void attn_cpu_report_get(attn_cpu_report *r);

#ifdef __cplusplus
}
#endif

#endif
