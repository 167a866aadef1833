/* Internal: allocation for large activation buffers. */
#ifndef ATTN_ALLOC_HUGE_H
#define ATTN_ALLOC_HUGE_H

#include <stddef.h>

/* malloc-compatible (release with free()). Buffers of 4 MiB and more are
 * 2 MiB aligned and advised onto transparent huge pages: the attention
 * kernels walk (B, T, 3 d_out) rows one head (a few hundred bytes) per row,
 * which with 4 KiB pages costs a TLB miss per row. */
void *attn_alloc_huge(size_t bytes);

/* calloc itself (lazily faulted, released with free()), with the whole
 * 2 MiB pages inside a buffer of 4 MiB and more advised onto huge pages:
 * a first touch then maps 2 MiB, not 4 KiB. Parameters, gradients, AdamW
 * moments and activations of a 124M model are 2+ GB, and on this VM a 4 KiB
 * first touch costs ~4 us (1 GB: 4.3 s on 4 KiB pages, 2.2 s on 2 MiB),
 * which made a GPT-2 run's first step ~6 s longer than the next. A buffer
 * never touched (a generate run's gradients) still takes no memory. */
void *attn_calloc_hinted(size_t n, size_t size);

/* calloc-compatible (release with free()), for weights a one-token step
 * streams from DRAM (src/gpt_kv.c): from 2 MiB up, 2 MiB aligned with every
 * whole 2 MiB page inside advised onto huge pages; the tail stays on 4 KiB
 * pages, so no memory is used beyond calloc's. With 4 KiB pages a streamed
 * read stalls at each page (a TLB miss, and the hardware prefetcher stops
 * there): bench/membw.c read 8-15 GB/s on 4 KiB pages, 20 GB/s on 2 MiB. */
void *attn_calloc_streamed(size_t n, size_t size);

/* malloc-compatible, zeroed with every page written now: for a buffer made
 * at a step's first use whose pages must not fault in later steps. A plain
 * malloc + memset does not do it: GCC turns the pair into calloc, whose
 * fresh pages are mapped one by one as later steps first write them
 * (seed004's bf16 step: 256 page faults a step). */
void *attn_alloc_touched(size_t bytes);

/* Back the whole 2 MiB pages inside [p, p + bytes) (memory someone else
 * allocated: PyTorch's weights) with huge pages now (MADV_COLLAPSE, Linux
 * 6.1+), contents and addresses unchanged: a one-token step streams every
 * weight, ~25% faster off 4 KiB pages (bench/gptmodel_kv.py). A hint: its
 * failure (an older kernel, THP "never", no free huge page) costs speed only. */
void attn_collapse_huge(void *p, size_t bytes);

/* Hand the whole pages inside [p, p + bytes) back to the system
 * (MADV_DONTNEED): memory its owner no longer reads (a model's fp32 weights
 * once a bf16 copy replaces them). They read as zero afterwards; a partial
 * page at either end stays. */
void attn_release_pages(void *p, size_t bytes);

/* Zeroed memory for a parameter arena (attn/param.h): 64-byte aligned,
 * and from 4 MiB up 2 MiB aligned with every whole 2 MiB page advised onto
 * huge pages, lazily faulted as calloc's (a gradient block a generate run
 * never touches takes no memory). Release with attn_free_aligned(p, bytes),
 * the same bytes. */
void *attn_calloc_aligned(size_t bytes);
void attn_free_aligned(void *p, size_t bytes);

#endif
