#!/usr/bin/python3
"""PyTorch parity for attn's GPT: the book's chapter-4 GPTModel (written from
the book in python/attn/book.py: LayerNorm, GELU, FeedForward,
MultiHeadAttention, TransformerBlock, GPTModel) against attn's forward/backward,
and the same for the model variants (python/attn/variants.py: norm, act,
tie_weights, pos_emb, and the attention keys n_kv_heads, window, qk_norm,
softcap), and GPT-2's init (init gpt2, which every tied model draws).

  gen  OUT.safetensors   write the committed fixture: torch.manual_seed(SEED)
                         + GPTModel(CFG) weights, ids/targets, and PyTorch's
                         logits, loss and parameter gradients in eval mode and
                         in training mode (dropout on, torch.manual_seed(DROP_SEED)
                         right before the forward; Debian's non-MKL torch =
                         attn's torch-cpu stream).
  gen-variants DIR       the same for each of VARIANTS (CFG plus its keys), one
                         DIR/<name>.safetensors each (tests/test_gpt_variants.c).
  check DUMP.safetensors load a dump written by attn (test_gpt_parity with
                         ATTN_GPT_PARITY_DUMP set, or test_gpt_variants with
                         ATTN_GPT_VARIANT_DUMP: attn's own init, ids, targets,
                         logits, loss, grads), run the book's model (or the
                         variant its config names) on those weights and
                         compare. Exit 1 above TOL.

safetensors is read and written with json + struct + numpy (no package).
Run with /usr/bin/python3 (torch 1.13.1).
"""
import json
import os
import struct
import sys

import numpy as np
import torch

TOL = 1e-4  # max |attn - torch| / max |torch| per tensor (see rel_err)
FWD_TOL = 1e-5  # the same for the forward's results: logits and loss

# ---------------------------------------------------------------- the book's model


# The book's model (python/attn/book.py) is shared with the other scripts.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from book_attention import GPTModel, variants  # noqa: E402,F401

# The variant fixtures: CFG (gen's) plus these keys.
VARIANTS = {
    "rmsnorm": {"norm": "rmsnorm"},
    "relu2": {"act": "relu2"},
    "swiglu": {"act": "swiglu"},
    "tie_weights": {"tie_weights": True},  # drawn with GPT-2's init, as every tied model
    "gpt2_init": {"init": "gpt2"},  # GPT-2's init, untied
    "pos_none": {"pos_emb": "none"},
    "combo": {"norm": "rmsnorm", "act": "swiglu", "tie_weights": True, "pos_emb": "none",
              "qkv_bias": False},
    # the attention keys (attn/attention.h)
    "gqa": {"emb_dim": 16, "n_heads": 4, "n_kv_heads": 2},
    "mqa": {"n_kv_heads": 1},
    "rope": {"pos_emb": "rope"},
    "alibi": {"pos_emb": "alibi"},
    "window": {"window": 3},
    "qk_norm": {"qk_norm": True},
    "softcap": {"softcap": 0.3},
    "attention_combo": {"emb_dim": 16, "n_heads": 4, "n_kv_heads": 2, "pos_emb": "rope",
                        "window": 4, "qk_norm": True, "softcap": 0.5, "norm": "rmsnorm",
                        "act": "swiglu"},
    "alibi_combo": {"emb_dim": 24, "n_heads": 6, "n_kv_heads": 3, "pos_emb": "alibi",
                    "window": 4},
}

# ---------------------------------------------------------------- safetensors

DTYPES = {"F32": np.float32, "F64": np.float64, "I64": np.int64, "I32": np.int32}


def st_read(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    meta = header.pop("__metadata__", {})
    buf = data[8 + n:]
    out = {}
    for name, e in header.items():
        b, t = e["data_offsets"]
        out[name] = np.frombuffer(buf[b:t], dtype=DTYPES[e["dtype"]]).reshape(e["shape"]).copy()
    return out, meta


def st_write(path, tensors, meta):
    header = {"__metadata__": meta}
    blobs, off = [], 0
    for name, a in tensors.items():
        a = np.ascontiguousarray(a)
        dt = {np.dtype(np.float32): "F32", np.dtype(np.int64): "I64"}[a.dtype]
        raw = a.tobytes()
        header[name] = {"dtype": dt, "shape": list(a.shape), "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))

# ---------------------------------------------------------------- runs


def run(model, ids, targets, training, drop_seed):
    model.zero_grad()
    model.train(training)
    if training:
        torch.manual_seed(drop_seed)
    logits = model(ids)
    loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), targets.flatten())
    loss.backward()
    grads = {n: p.grad.detach().clone() for n, p in model.named_parameters()}
    return logits.detach(), loss.detach(), grads


def load_weights(model, tensors):
    sd = {n: torch.from_numpy(tensors[n]) for n, _ in model.named_parameters()}
    missing, unexpected = model.load_state_dict(sd, strict=False)
    # The only keys attn does not store are the causal-mask buffers (and a
    # tied out_head.weight, which is tok_emb.weight).
    tied = model.out_head.weight is model.tok_emb.weight
    assert all(k.endswith(".att.mask") or (tied and k == "out_head.weight") for k in missing), \
        missing
    assert not unexpected, unexpected


CFG = {"vocab_size": 13, "context_length": 8, "emb_dim": 12, "n_heads": 3, "n_layers": 2,
       "drop_rate": 0.25, "qkv_bias": True}


def gen(path, cfg=CFG, generator="scripts/gpt_parity.py gen"):
    seed, drop_seed, B, T = 123, 7, 2, 6
    torch.manual_seed(seed)
    model = variants.gpt_model(cfg)
    g = torch.Generator().manual_seed(99)
    ids = torch.randint(0, cfg["vocab_size"], (B, T), generator=g)
    targets = torch.randint(0, cfg["vocab_size"], (B, T), generator=g)
    out = {n: p.detach().numpy() for n, p in model.named_parameters()}
    out["ids"] = ids.numpy()
    out["targets"] = targets.numpy()
    for training, tag in ((False, "eval"), (True, "train")):
        logits, loss, grads = run(model, ids, targets, training, drop_seed)
        out[f"{tag}.logits"] = logits.numpy()
        out[f"{tag}.loss"] = loss.reshape(1).numpy()
        for n, gr in grads.items():
            out[f"{tag}.grad.{n}"] = gr.numpy()
    meta = {"config": json.dumps(cfg), "seed": str(seed), "drop_seed": str(drop_seed),
            "torch": torch.__version__, "generator": generator}
    st_write(path, out, meta)
    print(f"wrote {path}", file=sys.stderr)


def gen_variants(folder):
    os.makedirs(folder, exist_ok=True)
    for name, keys in VARIANTS.items():
        gen(os.path.join(folder, f"{name}.safetensors"), {**CFG, **keys},
            f"scripts/gpt_parity.py gen-variants ({name})")


def rel_err(a, b, floor=1e-12):
    """max |a - b| / max(max |b|, floor); the 1e-3 floor for gradients keeps
    ones that are zero in exact arithmetic (W_key.bias) from dividing noise
    by noise."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    return float(np.max(np.abs(a - b)) / max(np.max(np.abs(b)), floor))


def check(path):
    t, meta = st_read(path)
    cfg = json.loads(meta["config"])
    model = variants.gpt_model(cfg)
    if variants.variant(cfg):
        print(f"variant: {variants.variant(cfg)}")
    load_weights(model, t)
    ids = torch.from_numpy(t["ids"].astype(np.int64))
    targets = torch.from_numpy(t["targets"].astype(np.int64))
    training = meta.get("training", "0") == "1"
    drop_seed = int(meta.get("drop_seed", "0"))
    logits, loss, grads = run(model, ids, targets, training, drop_seed)
    worst = 0.0
    e = rel_err(t["logits"], logits.numpy())
    print(f"logits: max rel err {e:.3g}")
    fwd = e
    e = abs(float(t["loss"][0]) - float(loss)) / abs(float(loss))
    print(f"loss: attn {float(t['loss'][0]):.7f} torch {float(loss):.7f} rel err {e:.3g}")
    fwd = max(fwd, e)
    if fwd > FWD_TOL:
        print(f"FAIL: forward {fwd:.3g} (tolerance {FWD_TOL:g})")
        return 1
    worst = max(worst, fwd)
    gw, gname = 0.0, ""
    for n, gr in grads.items():
        e = rel_err(t["grad." + n], gr.numpy(), 1e-3)
        if e > gw:
            gw, gname = e, n
    print(f"grads ({len(grads)} tensors): worst max rel err {gw:.3g} ({gname})")
    worst = max(worst, gw)
    ok = worst <= TOL
    print(f"{'PASS' if ok else 'FAIL'}: worst {worst:.3g} (tolerance {TOL:g})")
    return 0 if ok else 1


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in ("gen", "gen-variants", "check"):
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    if sys.argv[1] == "gen":
        gen(sys.argv[2])
        sys.exit(0)
    if sys.argv[1] == "gen-variants":
        gen_variants(sys.argv[2])
        sys.exit(0)
    sys.exit(check(sys.argv[2]))
