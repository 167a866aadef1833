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
    echo "SKIP: /usr/bin/python3 has no torch (scripts/install-deps.sh test installs python3-torch)"
    exit 77
fi
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
ATTN_ATTENTION_DUMP="$tmp" "$bin" --filter 'attention_variants/dump' >/dev/null
"$py" "$src/scripts/attention_parity.py" check "$tmp"

# attn forward mha with the variants: PyTorch's output on the weights it saved.
"$py" -c 'import numpy as np, sys; np.save(sys.argv[1], np.random.RandomState(0).randn(2, 11, 24).astype(np.float32))' "$tmp/x.npy"
"$attn" forward mha --input "$tmp/x.npy" --d-out 32 --heads 4 --kv-heads 2 --positions rope \
    --rope-fraction 0.5 --window 5 --qk-norm --softcap 3 --qkv-bias --output "$tmp/y.npy" \
    --save-weights "$tmp/w.safetensors" > /dev/null
"$py" - "$src" "$tmp" <<'PY'
import sys
import numpy as np
import torch
sys.path.insert(0, sys.argv[1] + "/scripts")
from book_attention import variants
from gpt_parity import rel_err, st_read
d = sys.argv[2]
w, _ = st_read(d + "/w.safetensors")
cfg = {"emb_dim": 32, "n_heads": 4, "n_kv_heads": 2, "pos_emb": "rope", "window": 5,
       "qk_norm": True, "softcap": 3.0, "drop_rate": 0.0, "qkv_bias": True}
att = variants.Attention(cfg, rope_fraction=0.5, d_in=24).eval()
with torch.no_grad():
    for n, p in att.named_parameters():
        p.copy_(torch.from_numpy(w[n]))
    y = att(torch.from_numpy(np.load(d + "/x.npy"))).numpy()
e = rel_err(np.load(d + "/y.npy"), y)
print(f"attn forward mha --kv-heads 2 --positions rope --window 5 --qk-norm --softcap 3: max rel err {e:.3g}")
sys.exit(0 if e <= 1e-5 else 1)
PY
