#!/usr/bin/env bash
# torch.load reads what attn_pth_write writes (attn/pth.h): the tensors of
# tests/fixtures/pth/*.expected.safetensors written as .pth by pth_copy (built
# beside attn) load, with weights_only=True too, as an OrderedDict equal to
# the torch.save'd fixture (names and order, dtypes, shapes, bits), also
# with zip64 fields, and the GPT one into the book's GPTModel. Skips without
# torch.
# Usage: bash pth_torch_live.sh <path-to-attn> <source-dir>
set -euo pipefail
ATTN=$1
src=$2
py=/usr/bin/python3
if ! "$py" -c 'import torch' 2>/dev/null; then
  echo "SKIP: /usr/bin/python3 has no torch (scripts/install-deps.sh test installs python3-torch)"
  exit 77
fi
copy=$(dirname "$ATTN")/pth_copy
[ -x "$copy" ] || { echo "FAIL: no $copy (built with the tests)"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fx=$src/tests/fixtures/pth
for name in basic gpt; do
  "$copy" "$fx/$name.expected.safetensors" "$tmp/$name.pth"
done
# zip64 fields on every entry (as a file of 4 GiB or more has them)
"$copy" "$fx/basic.expected.safetensors" "$tmp/basic64.pth" 0
"$py" - "$fx" "$tmp" "$src/scripts" <<'PY'
import sys
import torch
fx, tmp, scripts = sys.argv[1:]
for name, fixture in (("basic", "basic"), ("gpt", "gpt"), ("basic64", "basic")):
    want = torch.load(f"{fx}/{fixture}.pth")
    for weights_only in (True, False):
        got = torch.load(f"{tmp}/{name}.pth", weights_only=weights_only)
        assert type(got).__name__ == "OrderedDict", type(got)
        assert list(got) == list(want), (list(got), list(want))
        for k, w in want.items():
            g = got[k]
            assert g.dtype == w.dtype and g.shape == w.shape, (k, g.dtype, w.dtype, g.shape, w.shape)
            assert g.is_contiguous() and not g.requires_grad, k
            assert torch.equal(g.view(-1).view(torch.uint8) if g.numel() else g,
                               w.contiguous().view(-1).view(torch.uint8) if w.numel() else w), k
    print(f"ok   - {name}: torch.load (weights_only=True and False) equals the torch.save'd file")
sys.path.insert(0, scripts)
from book_attention import GPTModel
cfg = {"vocab_size": 11, "context_length": 4, "emb_dim": 8, "n_heads": 2, "n_layers": 1,
       "drop_rate": 0.0, "qkv_bias": False}
model = GPTModel(cfg)
model.load_state_dict(torch.load(f"{tmp}/gpt.pth", weights_only=True))
print("ok   - the book's GPTModel loads attn's gpt.pth (strict)")
PY
