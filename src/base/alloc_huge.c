/* Large-buffer allocation on transparent huge pages (see alloc_huge.h). */
#define _DEFAULT_SOURCE /* madvise, posix_memalign */
#include "alloc_huge.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define HUGE_PAGE ((size_t)2 << 20)

void *attn_alloc_huge(size_t bytes) {
    if (bytes < 2 * HUGE_PAGE) return malloc(bytes);
    void *p = NULL;
    const size_t rounded = (bytes + HUGE_PAGE - 1) / HUGE_PAGE * HUGE_PAGE;
    if (posix_memalign(&p, HUGE_PAGE, rounded) != 0) return NULL;
#ifdef MADV_HUGEPAGE
    (void)madvise(p, rounded, MADV_HUGEPAGE); /* a hint: failure only costs speed */
#endif
    return p;
}

void *attn_calloc_hinted(size_t n, size_t size) {
    void *p = calloc(n, size);
#ifdef MADV_HUGEPAGE
    const size_t bytes = n * size; /* calloc checked the product */
    if (p && bytes >= 2 * HUGE_PAGE) {
        const uintptr_t lo = ((uintptr_t)p + HUGE_PAGE - 1) & ~(uintptr_t)(HUGE_PAGE - 1);
        const uintptr_t hi = ((uintptr_t)p + bytes) & ~(uintptr_t)(HUGE_PAGE - 1);
        if (hi > lo) (void)madvise((void *)lo, hi - lo, MADV_HUGEPAGE); /* a hint */
    }
#endif
    return p;
}

void *attn_calloc_streamed(size_t n, size_t size) {
    if (size && n > SIZE_MAX / size) return NULL;
    const size_t bytes = n * size;
    if (bytes < HUGE_PAGE) return calloc(n, size);
    void *p = NULL;
    if (posix_memalign(&p, HUGE_PAGE, bytes) != 0) return NULL;
#ifdef MADV_HUGEPAGE
    (void)madvise(p, bytes / HUGE_PAGE * HUGE_PAGE, MADV_HUGEPAGE);
#endif
    memset(p, 0, bytes);
    return p;
}
