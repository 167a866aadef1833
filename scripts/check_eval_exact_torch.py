#!/usr/bin/python3
"""The exact validation loss of an `attn train` checkpoint, computed in
PyTorch 1.13 and compared with attn's (attn_gpt_loss_windows).

  check_eval_exact_torch.py DIR CORPUS LOSS [TOL]

Loads DIR/model.safetensors into the book's GPTModel (or the variant its
config names: python/attn/variants.py via gpt_parity), encodes CORPUS with
the checkpoint's vocabulary, takes the last 10% (from floor(0.9 n), as
attn's split) and runs it as attn does: the n - 1 predictions in
consecutive windows of context_length tokens, the last one shorter, each
window on its own (eval mode, fp32); the per-token cross-entropies summed in
float64. Exit 1 when |LOSS - torch| / torch > TOL (default 2e-5)."""
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpt_parity import load_weights, st_read, variants  # noqa: E402

d, corpus, loss_s = sys.argv[1:4]
tol = float(sys.argv[4]) if len(sys.argv) > 4 else 2e-5
tensors, meta = st_read(os.path.join(d, "model.safetensors"))
cfg = json.loads(meta["config"])
vocab = meta["vocabulary"]
model = variants.gpt_model(cfg)
load_weights(model, tensors)
model.eval()
text = open(corpus, encoding="utf-8").read()
index = {c: i for i, c in enumerate(vocab)}
ids = [index[c] for c in text]
n = len(ids)
val = torch.tensor(ids[n // 10 * 9 + (n % 10) * 9 // 10:], dtype=torch.int64)
T = cfg["context_length"]
total, count = 0.0, 0
with torch.no_grad():
    for s in range(0, len(val) - 1, T):
        x = val[s:min(s + T, len(val) - 1)]
        y = val[s + 1:s + 1 + len(x)]
        logits = model(x[None])[0]
        ce = torch.nn.functional.cross_entropy(logits, y, reduction="none")
        total += ce.double().sum().item()
        count += len(x)
assert count == len(val) - 1
ref = total / count
rel = abs(float(loss_s) - ref) / ref
print(f"exact val loss over {count} tokens: attn {float(loss_s):.7f} torch {ref:.7f} "
      f"(rel {rel:.1e}, tolerance {tol:g})")
sys.exit(0 if rel <= tol else 1)
