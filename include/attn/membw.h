/* attn/membw.h — the machine's memory bandwidth, measured: the floor a
 * memory-bound kernel is held against. The KV-cached one-token step
 * (attn/gpt.h) streams every weight once per token, so its best rate is
 * this bandwidth divided by the bytes of weights per token; `attn bench
 * generate` prints the step's GB/s as a share of it ("% of floor"). */
#ifndef ATTN_MEMBW_H
#define ATTN_MEMBW_H

#include <stddef.h>

#include "attn/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Bytes per second read from memory: a streaming read (AVX-512 when
 * present; every other pass with a prefetch 1 KiB ahead, which
 * bench/membw.c found best here at times) of a buffer of `bytes` on 2 MiB
 * pages, as the weights are (0: 256 MiB, or twice the L3 when that is
 * larger, up to 2 GiB; `attn bench generate` passes the bytes of weights a
 * step streams: the same working set against the same caches), one
 * contiguous range per thread of `threads` OpenMP threads (0:
 * attn_default_threads()), best of `passes` (0: 10) after an untimed one.
 * The buffer is written before it is read (calloc's pages would all read
 * as the one zero page). */
attn_status attn_membw_read(int threads, size_t bytes, int passes, double *bytes_per_s,
                            attn_error *err);

#ifdef __cplusplus
}
#endif
#endif
