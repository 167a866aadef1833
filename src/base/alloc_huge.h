/* Internal: allocation for large activation buffers. */
#ifndef ATTN_ALLOC_HUGE_H
#define ATTN_ALLOC_HUGE_H

#include <stddef.h>

/* malloc-compatible (release with free()). Buffers of 4 MiB and more are
 * 2 MiB aligned and advised onto transparent huge pages: the attention
 * kernels walk (B, T, 3 d_out) rows one head (a few hundred bytes) per row,
 * which with 4 KiB pages costs a TLB miss per row. */
void *attn_alloc_huge(size_t bytes);

/* calloc-compatible (release with free()), for weights a one-token step
 * streams from DRAM (src/gpt_kv.c): from 2 MiB up, 2 MiB aligned with every
 * whole 2 MiB page inside advised onto huge pages; the tail stays on 4 KiB
 * pages, so no memory is used beyond calloc's. With 4 KiB pages a streamed
 * read stalls at each page (a TLB miss, and the hardware prefetcher stops
 * there): bench/membw.c read 8-15 GB/s on 4 KiB pages, 20 GB/s on 2 MiB. */
void *attn_calloc_streamed(size_t n, size_t size);

#endif
