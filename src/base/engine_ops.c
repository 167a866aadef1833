/* engine_ops.c — the engine table's own functions (attn/engine_ops.h): the
 * op names, and the calls every engine's table answers. The table's type
 * lives here, in the lowest layer, so that any layer can hold an engine and
 * call it; each engine fills it where its kernels are (the CPU engine in
 * src/attention/engine_cpu.c). */
#include "attn/engine_ops.h"

#include <string.h>

static const char *const OP_NAMES[] = {
    "linear",
    "linear_backward",
    "linear_backward_dy16",
    "linear_x16",
    "linear_backward_x16",
    "linear_qkv",
    "linear_qkv_backward",
    "layernorm",
    "layernorm_backward",
    "attention_core",
    "attention_core_backward",
    "activation",
    "activation_backward",
    "embedding",
    "embedding_backward",
    "cross_entropy",
    "cross_entropy_backward",
    "cross_entropy_grad",
    "adamw",
    "dropout_add",
    "dropout_add_backward",
    "dropout",
    "dropout_backward",
    "add_positions",
    "add_positions_backward",
    "add",
    "linear_step",
    "attention_step",
    "activation_step",
};
_Static_assert(sizeof OP_NAMES / sizeof *OP_NAMES == ATTN_OP_COUNT, "one name per attn_op");

const char *attn_op_name(attn_op op) {
    return (int)op >= 0 && op < ATTN_OP_COUNT ? OP_NAMES[op] : NULL;
}

attn_status attn_engine_supports_op(const attn_engine *e, const attn_op_desc *d, attn_error *err) {
    if (!e || !e->ops) return attn_fail(err, ATTN_ERR_INVALID_ARG, "no engine");
    if (!d || !attn_op_name(d->op))
        return attn_fail(err, ATTN_ERR_INVALID_ARG, "engine %s: no such op (%d)", e->name,
                         d ? (int)d->op : -1);
    return e->ops->supports_op(e, d, err);
}

void *attn_engine_alloc(const attn_engine *e, size_t bytes) {
    return bytes ? e->ops->alloc(e, bytes) : NULL;
}

void attn_engine_free_buffer(const attn_engine *e, void *p) {
    if (p) e->ops->free(e, p);
}

void attn_engine_free(attn_engine *e) {
    if (!e || !e->ops) return;
    if (e->ops->release) e->ops->release(e);
    memset(e, 0, sizeof *e);
}
