/* Internal: allocation for large activation buffers. */
#ifndef ATTN_ALLOC_HUGE_H
#define ATTN_ALLOC_HUGE_H

#include <stddef.h>

/* malloc-compatible (release with free()). Buffers of 4 MiB and more are
 * 2 MiB aligned and advised onto transparent huge pages: the attention
 * kernels walk (B, T, 3 d_out) rows one head (a few hundred bytes) per row,
 * which with 4 KiB pages costs a TLB miss per row. */
void *attn_alloc_huge(size_t bytes);

#endif
