/* Building a GPT from its family (internal; attn/gpt_family.h): the build
 * run with its checks, and the fresh weights' draw over the table. */
#ifndef ATTN_SRC_GPT_BUILD_H
#define ATTN_SRC_GPT_BUILD_H

#include "attn/gpt_family.h"

/* m->cfg validated and set, m->blocks allocated: runs build (NULL: the
 * book's) with opts (NULL: none) and checks the list it made. */
attn_status attn_gpt_build_run(attn_gpt *m, attn_gpt_build_fn build, const attn_gpt_build *opts,
                               attn_error *err);

/* Fresh weights over the arena: the config's init kind, then the
 * adapters' A. */
void attn_gpt_draw(attn_gpt *m, attn_rng *rng);

#endif
