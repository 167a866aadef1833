/* Internal: an object's buffers listed once. Each object writes one table
 * of (field, element count, kind), and the same table is allocated by one
 * loop and freed by another, so a buffer added to the table is both (and a
 * free list cannot drift from the allocation list).
 *
 *   static int cache_buffers(cache *c, size_t n, attn_bufs_op op) {
 *       const attn_buf t[] = {ATTN_BUF(c->q, n), ATTN_BUF(c->keep, n)};
 *       return ATTN_BUFS(t, op);
 *   }
 *
 * Freeing reads no counts: the object's free function passes zeros. */
#ifndef ATTN_BASE_BUFFERS_H
#define ATTN_BASE_BUFFERS_H

#include <stddef.h>

typedef enum attn_buf_kind {
    ATTN_BUF_ZEROED,   /* calloc, huge pages advised (attn_calloc_hinted) */
    ATTN_BUF_HUGE,     /* attn_alloc_huge (alloc_huge.h): not zeroed */
    ATTN_BUF_STREAMED, /* attn_calloc_streamed (alloc_huge.h): zeroed */
} attn_buf_kind;

typedef struct attn_buf {
    void **field; /* the object's pointer */
    size_t count; /* elements; 0: no buffer (the field is left as it is) */
    size_t size;  /* bytes per element */
    attn_buf_kind kind;
} attn_buf;

/* Table entries for pointer field f with n elements of f's type. */
#define ATTN_BUF_KIND(f, n, kind)                                                                  \
    { (void **)&(f), (n), sizeof *(f), (kind) }
#define ATTN_BUF(f, n) ATTN_BUF_KIND(f, n, ATTN_BUF_ZEROED)

typedef enum attn_bufs_op { ATTN_BUFS_ALLOC, ATTN_BUFS_FREE } attn_bufs_op;

/* ALLOC: every entry with a count gets its buffer; returns 0, or -1 when a
 * count * size overflows or memory runs out, with what this call allocated
 * freed again (those fields NULL). FREE: every field freed and set NULL;
 * returns 0. */
int attn_bufs(const attn_buf *t, size_t n, attn_bufs_op op);
#define ATTN_BUFS(t, op) attn_bufs((t), sizeof(t) / sizeof *(t), (op))

#endif
