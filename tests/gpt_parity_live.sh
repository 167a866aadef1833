#!/usr/bin/env bash
# Live PyTorch parity of the GPT: attn initialises a model (seed 1234), runs
# forward + backward (eval, then training with dropout on the torch-cpu
# stream) and dumps weights, logits, loss and gradients; scripts/gpt_parity.py
# loads them into the book's GPTModel and compares (<= 1e-4 relative).
# Usage: bash tests/gpt_parity_live.sh <path-to-attn> <source-dir>
set -euo pipefail
attn="$1"
src="$2"
bin="$(dirname "$attn")/test_gpt_parity"
py=/usr/bin/python3
if ! "$py" -c 'import torch' 2>/dev/null; then
    echo "SKIP: /usr/bin/python3 has no torch (scripts/install-deps.sh test installs python3-torch)"
    exit 77
fi
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
for training in 0 1; do
    ATTN_GPT_PARITY_DUMP="$tmp/dump$training.safetensors" ATTN_GPT_PARITY_TRAINING=$training \
        "$bin" --filter 'gpt_parity/dump' >/dev/null
    echo "training=$training:"
    "$py" "$src/scripts/gpt_parity.py" check "$tmp/dump$training.safetensors"
done
