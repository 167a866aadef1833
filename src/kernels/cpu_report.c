/* What runs on this CPU under ATTN_SIMD's cap (attn/cpu.h): the answers
 * the kernels themselves act on, gathered for `attn info --cpu` and
 * Python. Here rather than in base/ because it asks OpenBLAS too. */
#include <cblas.h>
#include <stdlib.h>
#include <string.h>

#include "attn/cpu_report.h"
#include "attn/engine.h"
#include "flash_kernels.h"
#include "gemv.h"

attn_status attn_cpu_cap_check(attn_error *err) {
    const char *env = getenv("ATTN_SIMD");
    attn_cpu_level l;
    if (!env || !*env || attn_cpu_level_parse(env, &l) == 0) return ATTN_OK;
    return attn_fail(err, ATTN_ERR_INVALID_ARG,
                     "ATTN_SIMD='%.64s' is not a level: use generic, avx2, avx512, avx512-bf16, "
                     "amx or auto (unset: no cap)",
                     env);
}

void attn_cpu_report_get(attn_cpu_report *r) {
    const char *env = getenv("ATTN_SIMD");
    attn_cpu_level l;
    r->native = attn_cpu_level_native();
    r->cap = attn_cpu_cap();
    r->cap_set = env && *env && attn_cpu_level_parse(env, &l) == 0 && strcmp(env, "auto") != 0;
    r->used = attn_cpu_level_used();
    r->fp32_path = attn_simd_resolve(ATTN_SIMD_AUTO);
    r->gemv_path = attn_gemv_path();
    r->bf16_engine = attn_precision_check(ATTN_PRECISION_BF16, NULL) == ATTN_OK;
    r->amx = attn_flash_amx_usable();
    r->openblas_core = openblas_get_corename();
}
