#!/usr/bin/python3
"""The training peer for bench/train_nanogpt.sh: the book's GPTModel
(scripts/gpt_parity.py) trained in PyTorch 1.13.1 with the nanogpt-cpu recipe
(ctx 64, emb 128, 4 heads, 4 layers, dropout 0, batch 12, AdamW lr 1e-3,
betas (0.9, 0.99), weight decay 0.1 on 2-D weights, clip 1.0) on Tiny
Shakespeare. Times STEPS training steps (after 5 warm-up steps) with
torch.set_num_threads(1) and (2) and prints one key=value line per setting:

  /usr/bin/python3 bench/train_torch.py --data data/tinyshakespeare.txt --steps 200
"""
import argparse
import os
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts"))
from gpt_parity import GPTModel  # noqa: E402

CFG = {"vocab_size": 65, "context_length": 64, "emb_dim": 128, "n_heads": 4, "n_layers": 4,
       "drop_rate": 0.0, "qkv_bias": False}
BATCH = 12


def time_steps(ids, steps, threads):
    torch.set_num_threads(threads)
    torch.manual_seed(1337)
    model = GPTModel(CFG)
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=1e-3, betas=(0.9, 0.99))
    T = CFG["context_length"]
    n_train = int(0.9 * len(ids))

    def step():
        p = torch.randint(n_train - T - 1, (BATCH,))
        x = torch.stack([ids[i:i + T] for i in p])
        y = torch.stack([ids[i + 1:i + 1 + T] for i in p])
        logits = model(x)
        loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), y.flatten())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        return loss.item()

    for _ in range(5):
        step()
    start = time.perf_counter()
    for _ in range(steps):
        loss = step()
    return (time.perf_counter() - start) / steps, loss


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--data", default="data/tinyshakespeare.txt")
    ap.add_argument("--steps", type=int, default=200)
    args = ap.parse_args()
    with open(args.data, encoding="utf-8") as f:
        text = f.read()
    vocab = sorted(set(text))
    if len(vocab) != CFG["vocab_size"]:
        sys.exit(f"train_torch.py: expected 65 characters in {args.data}, found {len(vocab)}")
    index = {c: i for i, c in enumerate(vocab)}
    ids = torch.tensor([index[c] for c in text], dtype=torch.long)
    for threads in (1, 2):
        s, loss = time_steps(ids, args.steps, threads)
        print(f"case=torch_train threads={threads} steps={args.steps} ms_per_step={s * 1e3:.2f} "
              f"tokens_per_s={BATCH * CFG['context_length'] / s:.0f} last_loss={loss:.4f}")


if __name__ == "__main__":
    main()
