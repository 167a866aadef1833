#!/usr/bin/python3
"""PyTorch parity of attn's attention variants on MultiHeadAttention itself
(issue 20): grouped-query, RoPE (theta, rotated fraction), ALiBi, sliding
window, QK-norm and soft-cap, as python/attn/variants.py's Attention writes
them (math, no SDPA: Debian's torch 1.13 has none).

  check DIR   every DIR/case*.safetensors written by test_attention_variants
              (`dump`, ATTN_ATTENTION_DUMP=DIR): attn's weights, x, dy, output,
              dx and parameter gradients for one random combination; the
              PyTorch module on the same weights must give the output within
              1e-5 and the gradients within 1e-4 (max |attn - torch| / max
              |torch|, with a floor for gradients: 1% of the case's largest,
              at least 1e-3, as some are rounding noise; see check_case).
              Exit 1 above.

Run with /usr/bin/python3 (torch 1.13.1)."""
import glob
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from book_attention import variants  # noqa: E402
from gpt_parity import rel_err, st_read  # noqa: E402

FWD_TOL, GRAD_TOL = 1e-5, 1e-4


def check_case(path):
    t, meta = st_read(path)
    sp = json.loads(meta["spec"])
    H, hd = sp["heads"], sp["head_dim"]
    cfg = {"emb_dim": H * hd, "n_heads": H, "n_kv_heads": sp["kv_heads"],
           "pos_emb": {"none": "learned", "rope": "rope", "alibi": "alibi"}[sp["positions"]],
           "window": sp["window"], "qk_norm": bool(sp["qk_norm"]), "softcap": sp["softcap"],
           "drop_rate": 0.0, "qkv_bias": "W_query.bias" in t}
    x = torch.from_numpy(t["x"])
    att = variants.Attention(cfg, rope_theta=sp["rope_theta"],
                             rope_fraction=sp["rope_fraction"], d_in=x.shape[-1])
    names = [n for n, _ in att.named_parameters()]
    with torch.no_grad():
        for n, p in att.named_parameters():
            p.copy_(torch.from_numpy(t[n]))
    att.eval()
    x.requires_grad_(True)
    y = att(x)
    y.backward(torch.from_numpy(t["dy"]))
    ey = rel_err(t["y"], y.detach().numpy())
    errs = {"dx": rel_err(t["dx"], x.grad.numpy(), 1e-3)}
    # A gradient that is zero in exact arithmetic is rounding noise in both:
    # W_key.bias (it shifts a score row by a constant; not so with a
    # soft-cap, then a small second-order term), and every q/k gradient when
    # each query sees one key (T = 1, window 1). So each tensor's floor is
    # 1% of the case's largest gradient (and at least 1e-3).
    top = max(float(abs(p.grad.numpy()).max()) for p in att.parameters())
    floor = max(1e-3, 1e-2 * top)
    for n, p in att.named_parameters():
        errs[n] = rel_err(t["grad." + n], p.grad.numpy(), floor)
    worst = max(errs, key=errs.get)
    eg = errs[worst]
    ok = ey <= FWD_TOL and eg <= GRAD_TOL
    shown = {k: v for k, v in sp.items() if k not in ("rope_theta", "rope_fraction")
             or sp["positions"] == "rope"}
    print(f"{'ok  ' if ok else 'FAIL'} T {x.shape[1]:3d} {shown}: out {ey:.2g}, grads {eg:.2g}"
          f" ({worst}; {len(names) + 1} tensors)")
    return ok


def main():
    if len(sys.argv) != 3 or sys.argv[1] != "check":
        print(__doc__, file=sys.stderr)
        return 2
    files = sorted(glob.glob(os.path.join(sys.argv[2], "case*.safetensors")))
    if not files:
        print(f"no case*.safetensors in {sys.argv[2]}", file=sys.stderr)
        return 1
    bad = sum(not check_case(f) for f in files)
    print(f"{len(files) - bad}/{len(files)} combinations within tolerance")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
