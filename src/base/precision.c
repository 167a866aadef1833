/* precision.c — device and precision names, and whether this CPU runs a
 * precision (attn/engine.h). */
#include "attn/engine.h"

#include "attn/cpu.h"

#include <string.h>

static const char *const DEVICE_NAMES[] = {"cpu", "cuda"};
static const char *const PRECISION_NAMES[] = {"fp32", "bf16"};
_Static_assert(sizeof DEVICE_NAMES / sizeof *DEVICE_NAMES == ATTN_DEVICE_CUDA + 1,
               "one name per attn_device");
_Static_assert(sizeof PRECISION_NAMES / sizeof *PRECISION_NAMES == ATTN_PRECISION_BF16 + 1,
               "one name per attn_precision");

attn_status attn_device_parse(const char *name, attn_device *out, attn_error *err) {
    for (int i = 0; i <= ATTN_DEVICE_CUDA; i++)
        if (name && strcmp(name, DEVICE_NAMES[i]) == 0) {
            *out = (attn_device)i;
            return ATTN_OK;
        }
    return attn_fail(err, ATTN_ERR_INVALID_ARG, "unknown device '%s' (expected cpu or cuda)",
                     name ? name : "(null)");
}

const char *attn_device_name(attn_device d) {
    return (unsigned)d <= ATTN_DEVICE_CUDA ? DEVICE_NAMES[d] : "?";
}

attn_status attn_precision_parse(const char *name, attn_precision *out, attn_error *err) {
    for (int i = 0; i <= ATTN_PRECISION_BF16; i++)
        if (name && strcmp(name, PRECISION_NAMES[i]) == 0) {
            *out = (attn_precision)i;
            return ATTN_OK;
        }
    return attn_fail(err, ATTN_ERR_INVALID_ARG, "unknown precision '%s' (expected fp32 or bf16)",
                     name ? name : "(null)");
}

const char *attn_precision_name(attn_precision p) {
    return (unsigned)p <= ATTN_PRECISION_BF16 ? PRECISION_NAMES[p] : "?";
}

attn_status attn_precision_check(attn_precision p, attn_error *err) {
    if (p == ATTN_PRECISION_FP32) return ATTN_OK;
    if (p != ATTN_PRECISION_BF16)
        return attn_fail(err, ATTN_ERR_INVALID_ARG, "unknown precision %d (fp32 or bf16)", (int)p);
    if (attn_cpu_has(ATTN_CPU_AVX512_BF16)) return ATTN_OK;
    if (attn_cpu_level_native() >= ATTN_CPU_LEVEL_AVX512_BF16)
        return attn_fail(err, ATTN_ERR_INVALID_ARG,
                         "bf16 needs AVX512-BF16, which ATTN_SIMD=%s turns off on this CPU: "
                         "unset ATTN_SIMD, or use --precision fp32",
                         attn_cpu_level_name(attn_cpu_cap()));
    return attn_fail(err, ATTN_ERR_INVALID_ARG,
                     "bf16 needs a CPU with AVX512-BF16 (vdpbf16ps); this one has none: use "
                     "--precision fp32");
}
