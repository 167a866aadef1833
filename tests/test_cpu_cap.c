/* ATTN_SIMD caps every CPU path (attn/cpu.h, issue 46): under a cap the
 * library answers as a CPU with nothing above it would — the fp32 kernels'
 * path, AVX-512 GEMV, the bf16 engine, AMX — and the report says what runs.
 * Each case sets the cap itself, whatever the suite's own ATTN_SIMD. */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "attn/cpu_report.h"
#include "attn/engine.h"
#include "attn/flash_attention.h"
#include "kernels/flash_kernels.h"

static void cap(const char *level) {
    if (level)
        setenv("ATTN_SIMD", level, 1);
    else
        unsetenv("ATTN_SIMD");
}

Test(cpu_cap, levels_parse_and_name_each_other) {
    for (int l = ATTN_CPU_LEVEL_GENERIC; l <= ATTN_CPU_LEVEL_AMX; l++) {
        attn_cpu_level got;
        cr_assert_eq(attn_cpu_level_parse(attn_cpu_level_name((attn_cpu_level)l), &got), 0);
        cr_assert_eq(got, l);
    }
    attn_cpu_level got = ATTN_CPU_LEVEL_GENERIC;
    cr_assert_eq(attn_cpu_level_parse("auto", &got), 0);
    cr_assert_eq(got, ATTN_CPU_LEVEL_AMX);
    cr_assert_eq(attn_cpu_level_parse("AVX2", &got), -1);
    cr_assert_eq(attn_cpu_level_parse("sse", &got), -1);
    cr_assert_eq(attn_cpu_level_parse(NULL, &got), -1);
}

Test(cpu_cap, an_unknown_cap_is_reported_and_caps_nothing) {
    cap(NULL);
    const attn_cpu_level uncapped = attn_cpu_level_used();
    attn_error err;
    cr_assert_eq(attn_cpu_cap_check(&err), ATTN_OK);
    cap("avx-512");
    cr_assert_eq(attn_cpu_cap_check(&err), ATTN_ERR_INVALID_ARG);
    cr_assert(strstr(err.msg, "avx-512") && strstr(err.msg, "avx2"), "%s", err.msg);
    cr_assert_eq(attn_cpu_level_used(), uncapped);
    cap("");
    cr_assert_eq(attn_cpu_cap_check(&err), ATTN_OK);
    cr_assert_eq(attn_cpu_level_used(), uncapped);
}

/* Every question the kernels ask, at every cap: nothing above the cap. */
Test(cpu_cap, every_path_stays_at_or_below_the_cap) {
    cap(NULL);
    const attn_cpu_level native = attn_cpu_level_native();
    for (int l = ATTN_CPU_LEVEL_GENERIC; l <= ATTN_CPU_LEVEL_AMX; l++) {
        cap(attn_cpu_level_name((attn_cpu_level)l));
        const attn_cpu_level used = (int)native < l ? native : (attn_cpu_level)l;
        cr_assert_eq(attn_cpu_cap(), l);
        cr_assert_eq(attn_cpu_level_used(), used, "cap %d", l);
        cr_assert_eq(attn_simd_supported(ATTN_SIMD_AVX2), used >= ATTN_CPU_LEVEL_AVX2);
        cr_assert_eq(attn_simd_supported(ATTN_SIMD_AVX512), used >= ATTN_CPU_LEVEL_AVX512);
        cr_assert_eq(attn_simd_supported(ATTN_SIMD_GENERIC), 1);
        const attn_simd want = used >= ATTN_CPU_LEVEL_AVX512 ? ATTN_SIMD_AVX512
                               : used >= ATTN_CPU_LEVEL_AVX2 ? ATTN_SIMD_AVX2
                                                             : ATTN_SIMD_GENERIC;
        cr_assert_eq(attn_simd_resolve(ATTN_SIMD_AUTO), want, "cap %d", l);
        cr_assert_eq(attn_cpu_has(ATTN_CPU_AVX512_BW), used >= ATTN_CPU_LEVEL_AVX512);
        cr_assert_eq(attn_cpu_has(ATTN_CPU_AVX512_BF16), used >= ATTN_CPU_LEVEL_AVX512_BF16);
        cr_assert_eq(attn_cpu_has(ATTN_CPU_AMX_BF16), used >= ATTN_CPU_LEVEL_AMX);
        attn_error err;
        const attn_status bf16 = attn_precision_check(ATTN_PRECISION_BF16, &err);
        cr_assert_eq(bf16 == ATTN_OK, used >= ATTN_CPU_LEVEL_AVX512_BF16, "cap %d", l);
        if (bf16 != ATTN_OK && native >= ATTN_CPU_LEVEL_AVX512_BF16) /* says the cap did it */
            cr_assert(strstr(err.msg, "ATTN_SIMD"), "%s", err.msg);
        cr_assert(!attn_flash_amx_usable() || used == ATTN_CPU_LEVEL_AMX);
        attn_cpu_report r;
        attn_cpu_report_get(&r);
        cr_assert_eq(r.native, native);
        cr_assert_eq(r.cap, l);
        cr_assert_eq(r.cap_set, 1);
        cr_assert_eq(r.used, used);
        cr_assert_eq(r.fp32_path, want);
        cr_assert_eq(r.gemv_path, want); /* the fp32 kernels' level */
        cr_assert_eq(r.bf16_engine, used >= ATTN_CPU_LEVEL_AVX512_BF16);
    }
}

/* The fused attention refuses an explicit path above the cap, and runs the
 * capped one when asked for none. */
Test(cpu_cap, flash_attention_refuses_a_path_above_the_cap) {
    cap("generic");
    enum { T = 8, D = 4 };
    float q[T * D], k[T * D], v[T * D], o[T * D], lse[T];
    for (int i = 0; i < T * D; i++)
        q[i] = k[i] = v[i] = (float)(i % 5) * 0.1f;
    attn_flash_problem pb = {.B = 1,
                             .T = T,
                             .H = 1,
                             .head_dim = D,
                             .q = q,
                             .k = k,
                             .v = v,
                             .ld_q = D,
                             .ld_k = D,
                             .ld_v = D,
                             .o = o,
                             .ld_o = D,
                             .lse = lse};
    attn_error err;
    attn_flash_workspace ws = {0};
    attn_flash_options opt = {.threads = 1, .simd = ATTN_SIMD_AVX2};
    cr_assert_eq(attn_flash_forward(&pb, &opt, &ws, &err), ATTN_ERR_INVALID_ARG);
    cr_assert(strstr(err.msg, "avx2"), "%s", err.msg);
    opt.simd = ATTN_SIMD_AUTO;
    cr_assert_eq(attn_flash_forward(&pb, &opt, &ws, &err), ATTN_OK, "%s", err.msg);
    attn_flash_workspace_free(&ws);
    cap(NULL);
}
