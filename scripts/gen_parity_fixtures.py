#!/usr/bin/python3
"""PyTorch reference fixtures for attn's parity tests.

Run with Debian's interpreter (/usr/bin/python3, python3-torch 1.13.1 — a
non-MKL build, so dropout masks come from the torch-cpu stream):

    /usr/bin/python3 scripts/gen_parity_fixtures.py            # rewrite tests/fixtures/parity
    /usr/bin/python3 scripts/gen_parity_fixtures.py --random 6 --seed 42 --out DIR

Each case directory gets
    config.json   module, dims, seed, train, rng, B, T, parameter names
    x.npy         float32 input, (T, d_in) for v1/v2, (B, T, d_in) otherwise
    dy.npy        float32 upstream gradient, shaped as y
    y.npy         module(x) after torch.manual_seed(seed); Class(...)
    grads/input.npy and grads/<state_dict name>.npy   gradients of sum(y * dy)
and, for cases with "weights_seed", weights.safetensors holding the state_dict
of a model built from that seed; the reference then is
    torch.manual_seed(seed); m = Class(...); m.load_state_dict(file)
which is what `attn forward --seed S --weights FILE` promises.

x and dy come from NumPy's generator (never torch's), so the torch generator
sees exactly manual_seed -> constructor -> forward's dropout draws, as attn's
does. The committed fixtures (tests/fixtures/parity) are checked by
tests/test_parity.c; --random configs are what tests/parity_live.sh runs.
"""
import argparse
import json
import os
import random
import shutil
import struct
import sys

import numpy as np
import torch


# The book's classes (chapter 3) and seed 004's own AttentionHead / MultiHeadAttention.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from book_attention import (  # noqa: E402
    CausalAttention,
    MultiHeadAttention,
    MultiHeadAttentionWrapper,
    SelfAttention_v1,
    SelfAttention_v2,
)
from gen_seed004_fixtures import AttentionHead as Seed004Head  # noqa: E402
from gen_seed004_fixtures import MultiHeadAttention as Seed004MHA  # noqa: E402

MODULES = ["self-attention-v1", "self-attention-v2", "causal-attention", "mha-wrapper", "mha",
           "attention-head", "seed004-mha"]
UNBATCHED = {"self-attention-v1", "self-attention-v2"}


def build(cfg):
    m, d_in, d_out = cfg["module"], cfg["d_in"], cfg["d_out"]
    if m == "self-attention-v1":
        return SelfAttention_v1(d_in, d_out)
    if m == "self-attention-v2":
        return SelfAttention_v2(d_in, d_out, cfg["qkv_bias"])
    ctx, p, h, bias = cfg["context_length"], cfg["dropout"], cfg["num_heads"], cfg["qkv_bias"]
    if m == "causal-attention":
        return CausalAttention(d_in, d_out, ctx, p, bias)
    if m == "mha-wrapper":
        return MultiHeadAttentionWrapper(d_in, d_out, ctx, p, h, bias)
    if m == "mha":
        return MultiHeadAttention(d_in, d_out, ctx, p, h, bias)
    seed004 = {"embedding_dim": d_in, "use_bias": bias, "dropout_rate": p, "context_size": ctx,
               "heads_num": h, "head_size": d_out if m == "attention-head" else d_in // h}
    if m == "attention-head":
        return Seed004Head(seed004)
    if m == "seed004-mha":
        return Seed004MHA(seed004)
    raise ValueError("unknown module " + m)


# --- Files -------------------------------------------------------------------


def save_npy(path, a):
    np.save(path, np.ascontiguousarray(a, dtype=np.float32))


def save_safetensors(path, tensors):
    """Minimal safetensors writer (the format: u64 LE header size, JSON
    header, raw little-endian data); python3-safetensors is not in Debian."""
    header, blobs, off = {}, [], 0
    for name, t in tensors.items():
        a = np.ascontiguousarray(t.detach().numpy(), dtype="<f4")
        header[name] = {"dtype": "F32", "shape": list(a.shape), "data_offsets": [off, off + a.nbytes]}
        blobs.append(a.tobytes())
        off += a.nbytes
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


# The book's six-token input ("Your journey starts with one step").
BOOK_INPUTS = np.array(
    [
        [0.43, 0.15, 0.89],
        [0.55, 0.87, 0.66],
        [0.57, 0.85, 0.64],
        [0.22, 0.58, 0.33],
        [0.77, 0.25, 0.10],
        [0.05, 0.80, 0.55],
    ],
    dtype=np.float32,
)


def make_case(outdir, cfg):
    """Run one config through PyTorch and write its fixture directory."""
    cfg = dict(cfg)
    cfg.setdefault("num_heads", 1)
    cfg.setdefault("dropout", 0.0)
    cfg.setdefault("qkv_bias", False)
    cfg.setdefault("train", False)
    cfg.setdefault("rng", "torch-cpu")
    cfg.setdefault("B", 1)
    cfg.setdefault("context_length", cfg["T"])
    cfg.setdefault("data_seed", cfg["seed"] + 1000)
    assert cfg["rng"] == "torch-cpu", "this PyTorch build only gives the torch-cpu stream"
    assert not torch.backends.mkl.is_available(), "expected Debian's non-MKL PyTorch"
    unbatched = cfg["module"] in UNBATCHED
    B, T, d_in = cfg["B"], cfg["T"], cfg["d_in"]
    if unbatched:
        assert B == 1
    xshape = (T, d_in) if unbatched else (B, T, d_in)

    data = np.random.default_rng(cfg["data_seed"])
    if cfg.get("book_inputs"):
        x = BOOK_INPUTS if unbatched else np.stack([BOOK_INPUTS] * B)
        x = x.reshape(xshape)
    else:
        x = data.uniform(-1.0, 1.0, size=xshape).astype(np.float32)

    os.makedirs(os.path.join(outdir, "grads"), exist_ok=True)
    if "weights_seed" in cfg:
        torch.manual_seed(cfg["weights_seed"])
        donor = build(cfg)
        buffers = {name for name, _ in donor.named_buffers()}  # causal masks: not parameters
        state = {k: v for k, v in donor.state_dict().items() if k not in buffers}
        save_safetensors(os.path.join(outdir, "weights.safetensors"), state)

    torch.manual_seed(cfg["seed"])
    model = build(cfg)
    if "weights_seed" in cfg:
        model.load_state_dict(state, strict=False)  # buffers (masks) are not in the file
    model.train(bool(cfg["train"]))

    xt = torch.tensor(x, requires_grad=True)
    y = model(xt)
    dy = data.uniform(-1.0, 1.0, size=tuple(y.shape)).astype(np.float32)
    y.backward(torch.tensor(dy))

    save_npy(os.path.join(outdir, "x.npy"), x)
    save_npy(os.path.join(outdir, "dy.npy"), dy)
    save_npy(os.path.join(outdir, "y.npy"), y.detach().numpy())
    save_npy(os.path.join(outdir, "grads", "input.npy"), xt.grad.numpy())
    names = []
    for name, p in model.named_parameters():
        names.append(name)
        save_npy(os.path.join(outdir, "grads", name + ".npy"), p.grad.numpy())
    cfg["params"] = names
    cfg["y_shape"] = list(y.shape)
    cfg["torch_version"] = torch.__version__
    with open(os.path.join(outdir, "config.json"), "w") as f:
        json.dump(cfg, f, indent=1, sort_keys=True)
        f.write("\n")
    return cfg


# --- The committed spread of configs ----------------------------------------
# Every module; bias on/off; heads 1-4; T = 1; odd sizes; B > 1; dropout in
# training (torch-cpu stream) and in eval mode; p = 0 in training (no draws);
# context_length > T. "book" cases use the book's inputs and seeds.

FIXED_CASES = [
    ("v1_book", dict(module="self-attention-v1", d_in=3, d_out=2, T=6, seed=123, book_inputs=True)),
    ("v1_odd", dict(module="self-attention-v1", d_in=5, d_out=7, T=3, seed=1)),
    ("v1_T1", dict(module="self-attention-v1", d_in=4, d_out=3, T=1, seed=2)),
    ("v2_book", dict(module="self-attention-v2", d_in=3, d_out=2, T=6, seed=789, book_inputs=True)),
    ("v2_bias", dict(module="self-attention-v2", d_in=6, d_out=5, T=4, seed=3, qkv_bias=True)),
    ("v2_T1_bias", dict(module="self-attention-v2", d_in=3, d_out=4, T=1, seed=4, qkv_bias=True)),
    ("causal_book", dict(module="causal-attention", d_in=3, d_out=2, B=2, T=6, seed=123,
                         book_inputs=True)),
    ("causal_bias_ctx7", dict(module="causal-attention", d_in=5, d_out=3, B=3, T=4,
                              context_length=7, seed=5, qkv_bias=True)),
    ("causal_dropout_train", dict(module="causal-attention", d_in=4, d_out=3, B=2, T=5,
                                  dropout=0.5, train=True, seed=123)),
    ("causal_p0_train", dict(module="causal-attention", d_in=3, d_out=3, B=2, T=3,
                             dropout=0.0, train=True, seed=6)),
    ("causal_T1_train", dict(module="causal-attention", d_in=2, d_out=3, B=2, T=1,
                             dropout=0.3, train=True, seed=7, qkv_bias=True)),
    ("causal_dropout_eval", dict(module="causal-attention", d_in=3, d_out=2, B=1, T=4,
                                 dropout=0.5, train=False, seed=8)),
    ("wrapper_h1", dict(module="mha-wrapper", d_in=3, d_out=4, num_heads=1, B=1, T=3, seed=9)),
    ("wrapper_book", dict(module="mha-wrapper", d_in=3, d_out=2, num_heads=2, B=2, T=6, seed=123,
                          book_inputs=True)),
    ("wrapper_h3_bias_train", dict(module="mha-wrapper", d_in=5, d_out=3, num_heads=3, B=2, T=5,
                                   context_length=6, dropout=0.25, train=True, seed=10,
                                   qkv_bias=True)),
    ("wrapper_h4_eval", dict(module="mha-wrapper", d_in=4, d_out=2, num_heads=4, B=3, T=3,
                             dropout=0.5, train=False, seed=11)),
    ("mha_h1", dict(module="mha", d_in=3, d_out=5, num_heads=1, B=1, T=4, seed=12)),
    ("mha_book", dict(module="mha", d_in=3, d_out=2, num_heads=2, B=2, T=6, seed=123,
                      book_inputs=True)),
    ("mha_h3_bias", dict(module="mha", d_in=5, d_out=9, num_heads=3, B=2, T=7, seed=13,
                         qkv_bias=True)),
    ("mha_h4_train", dict(module="mha", d_in=6, d_out=8, num_heads=4, B=3, T=5, context_length=8,
                          dropout=0.1, train=True, seed=14)),
    ("mha_T1_train", dict(module="mha", d_in=4, d_out=4, num_heads=2, B=2, T=1, dropout=0.5,
                          train=True, seed=15, qkv_bias=True)),
    ("mha_h2_dropout_eval", dict(module="mha", d_in=7, d_out=6, num_heads=2, B=2, T=5,
                                 dropout=0.5, train=False, seed=16)),
    ("mha_h2_p0_train", dict(module="mha", d_in=4, d_out=6, num_heads=2, B=1, T=5, dropout=0.0,
                             train=True, seed=17, qkv_bias=True)),
    ("head004_eval", dict(module="attention-head", d_in=6, d_out=4, B=2, T=5, context_length=8,
                          seed=18)),
    ("head004_bias_train", dict(module="attention-head", d_in=5, d_out=3, B=2, T=4,
                                dropout=0.3, train=True, seed=19, qkv_bias=True)),
    ("head004_T1", dict(module="attention-head", d_in=3, d_out=2, B=1, T=1, seed=20)),
    ("mha004_h2_eval", dict(module="seed004-mha", d_in=6, d_out=6, num_heads=2, B=2, T=5,
                            seed=21)),
    ("mha004_h3_train", dict(module="seed004-mha", d_in=9, d_out=9, num_heads=3, B=2, T=6,
                             context_length=7, dropout=0.2, train=True, seed=22, qkv_bias=True)),
    ("mha004_h1_T1", dict(module="seed004-mha", d_in=4, d_out=4, num_heads=1, B=1, T=1,
                          dropout=0.5, train=True, seed=23)),
]


def random_config(r):
    """One fresh config from random.Random r: any module, shape and seed."""
    module = r.choice(MODULES)
    cfg = dict(module=module, seed=r.randrange(0, 2**32), data_seed=r.randrange(0, 2**32))
    big = r.random() < 0.15  # now and then a larger shape
    cfg["d_in"] = r.randint(1, 64 if big else 12)
    cfg["T"] = r.randint(1, 32 if big else 9)
    if module in UNBATCHED:
        cfg["d_out"] = r.randint(1, 64 if big else 12)
        cfg["qkv_bias"] = module != "self-attention-v1" and r.random() < 0.5
        return cfg
    cfg["B"] = r.randint(1, 4)
    cfg["context_length"] = cfg["T"] + r.choice([0, 0, 1, 5])
    cfg["qkv_bias"] = r.random() < 0.5
    cfg["train"] = r.random() < 0.7
    cfg["dropout"] = r.choice([0.0, 0.1, 0.25, 0.5, 0.75, round(r.random() * 0.95, 3)])
    single = module in ("causal-attention", "attention-head")
    cfg["num_heads"] = 1 if single else r.randint(1, 8 if big else 4)
    if module == "mha":
        cfg["d_out"] = cfg["num_heads"] * r.randint(1, 8 if big else 4)
    elif module == "seed004-mha":  # embedding_dim = heads_num * head_size, d_out = d_in
        cfg["d_in"] = cfg["d_out"] = cfg["num_heads"] * r.randint(1, 8 if big else 4)
    else:
        cfg["d_out"] = r.randint(1, 32 if big else 6)
    if r.random() < 0.25:
        cfg["weights_seed"] = r.randrange(0, 2**32)
    return cfg


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--out", default=os.path.join(here, "..", "tests", "fixtures", "parity"))
    ap.add_argument("--random", type=int, default=0, metavar="N",
                    help="write N random configs (case_000 ...) instead of the fixed set")
    ap.add_argument("--seed", type=int, default=0, help="seed for --random's choices")
    a = ap.parse_args()
    torch.set_num_threads(1)
    if a.random:
        r = random.Random(a.seed)
        cases = [("case_%03d" % i, random_config(r)) for i in range(a.random)]
    else:
        cases = FIXED_CASES
        if os.path.isdir(a.out):
            shutil.rmtree(a.out)
    for name, cfg in cases:
        cfg = make_case(os.path.join(a.out, name), cfg)
        print("%-24s %s" % (name, json.dumps({k: cfg[k] for k in sorted(cfg) if k not in
                                              ("params", "torch_version", "y_shape")})))
    return 0


if __name__ == "__main__":
    sys.exit(main())
