#!/usr/bin/env bash
# Live PyTorch parity of the attention variants on MultiHeadAttention (issue
# 20): test_attention_variants (`dump`) writes 24 random combinations of
# grouped-query heads (every kv count dividing the heads), RoPE, ALiBi,
# window, QK-norm and soft-cap at odd T and head dims 16..128, forward and
# backward; scripts/attention_parity.py checks each against
# python/attn/variants.py's Attention (output <= 1e-5, gradients <= 1e-4).
# Usage: bash tests/attention_parity_live.sh <path-to-attn> <source-dir>
set -euo pipefail
attn="$1"
src="$2"
bin="$(dirname "$attn")/test_attention_variants"
py=/usr/bin/python3
if ! "$py" -c 'import torch' 2>/dev/null; then
    echo "attention_parity_live: /usr/bin/python3 has no torch; skipping"
    exit 0
fi
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
ATTN_ATTENTION_DUMP="$tmp" "$bin" --filter 'attention_variants/dump' >/dev/null
"$py" "$src/scripts/attention_parity.py" check "$tmp"
