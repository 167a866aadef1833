/* attn/attn.h — everything in one include. */
#ifndef ATTN_ATTN_H
#define ATTN_ATTN_H

#include "attn/causal_attention.h"
#include "attn/cross_entropy.h"
#include "attn/dropout.h"
#include "attn/embedding.h"
#include "attn/feedforward.h"
#include "attn/fileio.h"
#include "attn/gelu.h"
#include "attn/gpt.h"
#include "attn/layernorm.h"
#include "attn/linear.h"
#include "attn/module.h"
#include "attn/multi_head_attention.h"
#include "attn/npy.h"
#include "attn/ops.h"
#include "attn/param.h"
#include "attn/print.h"
#include "attn/residual.h"
#include "attn/rng.h"
#include "attn/safetensors.h"
#include "attn/seed004_attention.h"
#include "attn/self_attention.h"
#include "attn/softmax.h"
#include "attn/status.h"

#endif
