/* attn/engine_cpu.h — the CPU engine (attn/engine_ops.h's table filled with
 * attn's kernels).
 *
 *   cpu-fp32  every op in fp32: the reference every engine is held to.
 *   cpu-bf16  the products (linear, attention, feedforward) through the bf16
 *             GEMM engine (attn/gemm.h: bf16 operands, fp32 sums); every
 *             other op in fp32, as cpu-fp32 runs it. Needs AVX512-BF16.
 *
 * An op runs its module on the engine's products whatever GEMM engine the
 * module carries (its bf16 field): a model hands the engine's to its
 * modules (attn_gpt_set_precision), so that the op needs no copy. */
#ifndef ATTN_ENGINE_CPU_H
#define ATTN_ENGINE_CPU_H

#include "attn/engine_ops.h"
#include "attn/status.h"

#ifdef __cplusplus
extern "C" {
#endif

struct attn_bf16_gemm;

/* e = the CPU engine of precision p (owning, for BF16, a bf16 GEMM engine;
 * attn_engine_free releases it). BF16 fails as attn_precision_check does on
 * a CPU without AVX512-BF16 (e cleared). */
attn_status attn_engine_cpu_init(attn_engine *e, attn_precision p, attn_error *err);

/* The bf16 GEMM engine a CPU engine's products run on: NULL for cpu-fp32
 * and for an engine that is not the CPU's. */
struct attn_bf16_gemm *attn_engine_cpu_gemm(const attn_engine *e);

/* 1 when e is a CPU engine (either precision). */
int attn_engine_is_cpu(const attn_engine *e);

#ifdef __cplusplus
}
#endif
#endif
