#!/usr/bin/env bash
# Live PyTorch parity of the model variants (issue 20; the attention keys
# too, on the fused path and the reference one): for each variant
# config below, attn initialises a model (seed 4321), runs forward + backward
# (eval, then training with dropout on the torch-cpu stream) and dumps
# weights, logits, loss and gradients (tests/test_gpt_variants.c, `dump`);
# scripts/gpt_parity.py builds the variant's PyTorch model
# (python/attn/variants.py), loads them and compares (<= 1e-4 relative).
# Usage: bash tests/gpt_variants_live.sh <path-to-attn> <source-dir>
set -euo pipefail
attn="$1"
src="$2"
bin="$(dirname "$attn")/test_gpt_variants"
py=/usr/bin/python3
if ! "$py" -c 'import torch' 2>/dev/null; then
    echo "SKIP: /usr/bin/python3 has no torch (scripts/install-deps.sh test installs python3-torch)"
    exit 77
fi
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
configs=(
    '{"norm": "rmsnorm"}'
    '{"act": "relu2"}'
    '{"act": "swiglu"}'
    '{"tie_weights": true}'
    '{"pos_emb": "none"}'
    '{"norm": "rmsnorm", "act": "swiglu", "tie_weights": true, "pos_emb": "none", "qkv_bias": false}'
    '{"norm": "rmsnorm", "act": "relu2", "tie_weights": true}'
    '{"n_kv_heads": 2}'
    '{"n_kv_heads": 1, "pos_emb": "rope", "qk_norm": true}'
    '{"pos_emb": "alibi", "window": 7}'
    '{"window": 5, "softcap": 2.5, "pos_emb": "rope", "norm": "rmsnorm", "act": "swiglu"}'
)
for cfg in "${configs[@]}"; do
    for training in 0 1; do
        ATTN_GPT_VARIANT_DUMP="$tmp/dump.safetensors" ATTN_GPT_VARIANT_CONFIG="$cfg" \
            ATTN_GPT_VARIANT_TRAINING=$training "$bin" --filter 'gpt_variants/dump' >/dev/null
        echo "$cfg training=$training:"
        "$py" "$src/scripts/gpt_parity.py" check "$tmp/dump.safetensors"
    done
done
