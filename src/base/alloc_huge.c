/* Large-buffer allocation on transparent huge pages (see alloc_huge.h). */
#define _DEFAULT_SOURCE /* madvise, posix_memalign */
#include "alloc_huge.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define HUGE_PAGE ((size_t)2 << 20)

/* Advise the whole 2 MiB pages inside [p, p + bytes) onto huge pages: a
 * hint, whose failure only costs speed. */
static void advise_huge(void *p, size_t bytes) {
#ifdef MADV_HUGEPAGE
    const uintptr_t lo = ((uintptr_t)p + HUGE_PAGE - 1) & ~(uintptr_t)(HUGE_PAGE - 1);
    const uintptr_t hi = ((uintptr_t)p + bytes) & ~(uintptr_t)(HUGE_PAGE - 1);
    if (p && hi > lo) (void)madvise((void *)lo, hi - lo, MADV_HUGEPAGE);
#else
    (void)p;
    (void)bytes;
#endif
}

#if defined(__linux__) && !defined(MADV_COLLAPSE)
#define MADV_COLLAPSE 25 /* Linux 6.1's; older headers lack it (older kernels: EINVAL) */
#endif

void attn_collapse_huge(void *p, size_t bytes) {
#ifdef MADV_COLLAPSE
    const uintptr_t lo = ((uintptr_t)p + HUGE_PAGE - 1) & ~(uintptr_t)(HUGE_PAGE - 1);
    const uintptr_t hi = ((uintptr_t)p + bytes) & ~(uintptr_t)(HUGE_PAGE - 1);
    if (p && hi > lo) (void)madvise((void *)lo, hi - lo, MADV_COLLAPSE);
#else
    (void)p;
    (void)bytes;
#endif
}

void attn_release_pages(void *p, size_t bytes) {
    const uintptr_t page = 4096, lo = ((uintptr_t)p + page - 1) & ~(page - 1);
    const uintptr_t hi = ((uintptr_t)p + bytes) & ~(page - 1);
    if (p && hi > lo) (void)madvise((void *)lo, hi - lo, MADV_DONTNEED);
}

void *attn_alloc_huge(size_t bytes) {
    if (bytes < 2 * HUGE_PAGE) return malloc(bytes);
    void *p = NULL;
    const size_t rounded = (bytes + HUGE_PAGE - 1) / HUGE_PAGE * HUGE_PAGE;
    if (posix_memalign(&p, HUGE_PAGE, rounded) != 0) return NULL;
    advise_huge(p, rounded);
    return p;
}

void *attn_calloc_hinted(size_t n, size_t size) {
    void *p = calloc(n, size);
    if (p && n * size >= 2 * HUGE_PAGE) advise_huge(p, n * size); /* calloc checked n * size */
    return p;
}

void *attn_alloc_touched(size_t bytes) {
    void *p = malloc(bytes ? bytes : 1);
    if (p) explicit_bzero(p, bytes); /* never folded into calloc, never elided */
    return p;
}

void *attn_calloc_streamed(size_t n, size_t size) {
    if (size && n > SIZE_MAX / size) return NULL;
    const size_t bytes = n * size;
    if (bytes < HUGE_PAGE) return calloc(n, size);
    void *p = NULL;
    if (posix_memalign(&p, HUGE_PAGE, bytes) != 0) return NULL;
    advise_huge(p, bytes);
    memset(p, 0, bytes);
    return p;
}

/* Small blocks from posix_memalign; large ones mapped (zero and lazily
 * faulted), 2 MiB aligned by trimming a larger mapping. */
#define ARENA_MAPPED (2 * HUGE_PAGE)

static size_t page_round(size_t bytes) {
    return (bytes + 4095) & ~(size_t)4095;
}

void *attn_calloc_aligned(size_t bytes) {
    if (bytes < ARENA_MAPPED) {
        void *p = NULL;
        if (posix_memalign(&p, 64, bytes ? bytes : 64) != 0) return NULL;
        memset(p, 0, bytes);
        return p;
    }
    const size_t len = page_round(bytes);
    if (len > SIZE_MAX - HUGE_PAGE) return NULL;
    unsigned char *raw =
        mmap(NULL, len + HUGE_PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED) return NULL;
    const uintptr_t at = ((uintptr_t)raw + HUGE_PAGE - 1) & ~(uintptr_t)(HUGE_PAGE - 1);
    unsigned char *p = (unsigned char *)at;
    const size_t head = (size_t)(p - raw), tail = HUGE_PAGE - head;
    if (head) munmap(raw, head);
    if (tail) munmap(p + len, tail);
    advise_huge(p, len);
    return p;
}

void attn_free_aligned(void *p, size_t bytes) {
    if (!p) return;
    if (bytes < ARENA_MAPPED)
        free(p);
    else
        munmap(p, page_round(bytes));
}
