#!/usr/bin/python3
"""Load a checkpoint written by `attn train` into the book's PyTorch GPTModel
(scripts/gpt_parity.py; a variant's: python/attn/variants.py) and compare its
logits and loss with `attn forward gpt`'s on the same ids.

  check_checkpoint_torch.py DIR IDS.npy TARGETS.npy LOGITS.npy LOSS

DIR/model.safetensors holds the weights under the book's state_dict names and
the config (book's keys) and tokenizer (char's vocabulary, or gpt2's files)
in its metadata; LOGITS.npy and LOSS
are attn's outputs. Exit 1 when max |attn - torch| / max |torch| > 1e-4.
Run with /usr/bin/python3 (torch 1.13.1)."""
import json
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpt_parity import load_weights, st_read, variants  # noqa: E402

d, ids_p, tg_p, logits_p, loss_s = sys.argv[1:6]
tensors, meta = st_read(os.path.join(d, "model.safetensors"))
cfg = json.loads(meta["config"])
if meta.get("tokenizer") == "gpt2":  # GPT-2's files as metadata: encoder.json's tokens
    assert len(json.loads(meta["gpt2_encoder_json"])) == cfg["vocab_size"], "vocab != vocab_size"
else:
    assert len(meta["vocabulary"]) == cfg["vocab_size"], "vocabulary size != vocab_size"
model = variants.gpt_model(cfg)  # the book's GPTModel, or the variant cfg names
assert sorted(tensors) == sorted(n for n, _ in model.named_parameters()), \
    (sorted(tensors), [n for n, _ in model.named_parameters()])
load_weights(model, tensors)
model.eval()
ids = torch.from_numpy(np.load(ids_p).astype(np.int64))
tg = torch.from_numpy(np.load(tg_p).astype(np.int64))
with torch.no_grad():
    logits = model(ids)
    loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), tg.flatten()).item()
attn_logits = np.load(logits_p)
rel = np.abs(attn_logits - logits.numpy()).max() / np.abs(logits.numpy()).max()
loss_rel = abs(float(loss_s) - loss) / abs(loss)
print(f"checkpoint step {meta.get('step')}: logits rel err {rel:.2e}, "
      f"loss attn {float(loss_s):.6f} torch {loss:.6f} (rel {loss_rel:.2e})")
sys.exit(0 if rel <= 1e-4 and loss_rel <= 1e-4 else 1)
