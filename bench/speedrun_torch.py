#!/usr/bin/python3
"""The speedrun recipe (attn train --preset speedrun) in PyTorch 1.13.1: the
same model (nanogpt-cpu's width at context 256; RMSNorm and SwiGLU by
default, the variant GPTModel of python/attn/variants.py via
scripts/gpt_parity.py), AdamW lr 2e-3 -> 1e-4 with 100 warm-up steps then
warmup-stable-decay (flat, then linear over the last 40% of the time
budget), betas (0.9, 0.99), weight decay 0.1 on 2-D weights, clip 1.0,
batch 3 random windows of the first 90% of Tiny Shakespeare; it trains
until the wall-time budget (evaluations included, the final one kept in
reserve) is spent, then evaluates exactly as attn does: every val token
once, in windows of context_length.

  /usr/bin/python3 bench/speedrun_torch.py --data data/tinyshakespeare.txt \\
      [--budget 600] [--threads 2] [--bf16] [--batch 3] [--config '{"norm": "layernorm"}']

Prints steps, wall seconds and the exact val loss on one key=value line."""
import argparse
import json
import os
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts"))
from gpt_parity import variants  # noqa: E402

CFG = {"vocab_size": 65, "context_length": 256, "emb_dim": 128, "n_heads": 4, "n_layers": 4,
       "drop_rate": 0.0, "qkv_bias": False, "norm": "rmsnorm", "act": "swiglu"}
BATCH, LR, MIN_LR, WARMUP, COOLDOWN = 3, 2e-3, 1e-4, 100, 0.4


def lr_at(step, progress):
    if step < WARMUP:
        return LR * (step + 1) / (WARMUP + 1)
    start = 1 - COOLDOWN
    return LR if progress <= start else LR + (MIN_LR - LR) * min(1.0, (progress - start) / COOLDOWN)


def exact_val(model, val, T, bf16):
    total, count = 0.0, 0
    model.eval()
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
        for s in range(0, len(val) - 1, T * 64):  # 64 windows per forward, the tail alone
            xs, ys = [], []
            for w in range(s, min(s + T * 64, len(val) - 1), T):
                n = min(T, len(val) - 1 - w)
                xs.append(val[w:w + n])
                ys.append(val[w + 1:w + 1 + n])
            full = [i for i, x in enumerate(xs) if len(x) == T]
            groups = [([xs[i] for i in full], [ys[i] for i in full])]
            groups += [([x], [y]) for x, y in zip(xs, ys) if len(x) < T]
            for gx, gy in groups:
                if not gx:
                    continue
                logits = model(torch.stack(gx)).float()
                ce = torch.nn.functional.cross_entropy(logits.flatten(0, 1), torch.stack(gy).flatten(),
                                                       reduction="sum")
                total += ce.double().item()
                count += sum(len(y) for y in gy)
    model.train()
    return total / count


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", required=True)
    ap.add_argument("--budget", type=float, default=600)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--bf16", action="store_true", help="autocast bf16 (PyTorch's CPU autocast)")
    ap.add_argument("--config", default="{}", help="model keys over the recipe's (JSON)")
    ap.add_argument("--seed", type=int, default=1337)
    ap.add_argument("--batch", type=int, default=BATCH)
    a = ap.parse_args()
    t0 = time.perf_counter()
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    cfg = dict(CFG, **json.loads(a.config))
    batch = a.batch
    text = open(a.data, encoding="utf-8").read()
    chars = sorted(set(text))
    index = {c: i for i, c in enumerate(chars)}
    ids = torch.tensor([index[c] for c in text], dtype=torch.int64)
    n = len(ids)
    split = n // 10 * 9 + (n % 10) * 9 // 10
    train, val = ids[:split], ids[split:]
    T = cfg["context_length"]
    model = variants.gpt_model(cfg)
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=LR, betas=(0.9, 0.99))
    step, step_s, eval_s = 0, 0.0, None
    while True:
        now = time.perf_counter() - t0
        # Reserve the final evaluation: its time at 1/3 of a step per token, x1.25.
        keep = eval_s if eval_s else 1.25 * step_s / 3 * (len(val) / (batch * T) + batch)
        if now + keep + step_s >= a.budget:
            break
        progress = min(1.0, now / max(a.budget - keep, 1e-9))
        for g in opt.param_groups:
            g["lr"] = lr_at(step, progress)
        t = time.perf_counter()
        p = torch.randint(len(train) - T - 1, (batch,))
        x = torch.stack([train[i:i + T] for i in p])
        y = torch.stack([train[i + 1:i + 1 + T] for i in p])
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=a.bf16):
            logits = model(x)
        loss = torch.nn.functional.cross_entropy(logits.float().flatten(0, 1), y.flatten())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        step_s = time.perf_counter() - t
        step += 1
    val_loss = exact_val(model, val, T, a.bf16)
    wall = time.perf_counter() - t0
    print(f"torch speedrun: threads={a.threads} bf16={int(a.bf16)} batch={batch} steps={step} "
          f"wall_s={wall:.1f} "
          f"exact_val_loss={val_loss:.4f} config={json.dumps(cfg, separators=(',', ':'))}")


if __name__ == "__main__":
    main()
