#!/usr/bin/env bash
# A checkpoint from `attn train` loads into the book's PyTorch GPTModel
# (scripts/check_checkpoint_torch.py) and gives the logits and loss that
# `attn forward gpt` gives (<= 1e-4 relative). Skips without torch.
# Usage: bash train_torch_live.sh <path-to-attn> <source-dir>
set -euo pipefail
ATTN=$1
src=$2
py=/usr/bin/python3
if ! "$py" -c 'import torch' 2>/dev/null; then
  echo "SKIP: /usr/bin/python3 has no torch (scripts/install-deps.sh test installs python3-torch)"
  exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for i in $(seq 1 60); do echo "ROMEO: wherefore art thou, Romeo? line $i"; done > "$tmp/c.txt"
echo '{"context_length": 12, "emb_dim": 24, "n_heads": 3, "n_layers": 2, "drop_rate": 0.1,
  "qkv_bias": true, "batch_size": 4, "max_steps": 15, "eval_interval": 5, "eval_iters": 1}' > "$tmp/c.json"
"$ATTN" train --data "$tmp/c.txt" --config "$tmp/c.json" --out "$tmp/run" --threads 1 > /dev/null 2>&1
"$py" - "$tmp" <<'PY'
import sys
import numpy as np
rng = np.random.default_rng(0)
ids = rng.integers(0, 20, size=(3, 12))
np.save(sys.argv[1] + "/ids.npy", ids.astype(np.int64))
np.save(sys.argv[1] + "/tg.npy", np.roll(ids, -1, axis=1).astype(np.int32))
PY
loss=$("$ATTN" forward gpt --checkpoint "$tmp/run" --input "$tmp/ids.npy" --targets "$tmp/tg.npy" \
  --output "$tmp/logits.npy" | sed -n 's/^loss: //p')
"$py" "$src/scripts/check_checkpoint_torch.py" "$tmp/run" "$tmp/ids.npy" "$tmp/tg.npy" "$tmp/logits.npy" "$loss"
