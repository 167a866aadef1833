/* One allocation loop and one free loop for tables of buffers (see buffers.h). */
#include "buffers.h"

#include <stdint.h>
#include <stdlib.h>

#include "alloc_huge.h"

static void *alloc_one(const attn_buf *b) {
    if (b->count > SIZE_MAX / b->size) return NULL;
    switch (b->kind) {
    case ATTN_BUF_HUGE: return attn_alloc_huge(b->count * b->size);
    case ATTN_BUF_STREAMED: return attn_calloc_streamed(b->count, b->size);
    default: return attn_calloc_hinted(b->count, b->size);
    }
}

static void free_upto(const attn_buf *t, size_t n, int allocated_only) {
    for (size_t i = 0; i < n; i++) {
        if (allocated_only && t[i].count == 0) continue;
        free(*t[i].field);
        *t[i].field = NULL;
    }
}

int attn_bufs(const attn_buf *t, size_t n, attn_bufs_op op) {
    if (op == ATTN_BUFS_FREE) {
        free_upto(t, n, 0);
        return 0;
    }
    for (size_t i = 0; i < n; i++) {
        if (t[i].count == 0) continue;
        void *p = alloc_one(&t[i]);
        if (!p) {
            free_upto(t, i, 1);
            return -1;
        }
        *t[i].field = p;
    }
    return 0;
}
