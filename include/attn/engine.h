/* attn/engine.h — where and in what precision a model runs.
 *
 * The fp32 CPU engine is the exact reference: every other engine (bf16 on
 * CPU, CUDA) plugs in behind the same model and trainer API and is tested
 * against it. Checkpoints are always fp32, whatever engine wrote them. */
#ifndef ATTN_ENGINE_H
#define ATTN_ENGINE_H

#include "attn/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum attn_device { ATTN_DEVICE_CPU = 0, ATTN_DEVICE_CUDA } attn_device;

typedef enum attn_precision {
    ATTN_PRECISION_FP32 = 0, /* the reference; default everywhere      */
    ATTN_PRECISION_BF16      /* bf16 operands, fp32 accumulate/master   */
} attn_precision;

/* "cpu" | "cuda" -> device; anything else -> ATTN_ERR_INVALID_ARG with the
 * valid names in the message. */
attn_status attn_device_parse(const char *name, attn_device *out, attn_error *err);
const char *attn_device_name(attn_device d);

/* "fp32" | "bf16" -> precision, as attn_device_parse. */
attn_status attn_precision_parse(const char *name, attn_precision *out, attn_error *err);
const char *attn_precision_name(attn_precision p);

/* ATTN_OK when this CPU runs p; for BF16 that needs AVX512-BF16 (vdpbf16ps),
 * else ATTN_ERR_INVALID_ARG "bf16 needs a CPU with AVX512-BF16 ...". */
attn_status attn_precision_check(attn_precision p, attn_error *err);

#ifdef __cplusplus
}
#endif
#endif
