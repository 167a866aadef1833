#!/usr/bin/python3
"""The training peer for bench/train_nanogpt.sh: the book's GPTModel
(scripts/gpt_parity.py) trained in PyTorch 1.13.1 with the nanogpt-cpu recipe
(ctx 64, emb 128, 4 heads, 4 layers, dropout 0, batch 12, AdamW lr 1e-3,
betas (0.9, 0.99), weight decay 0.1 on 2-D weights, clip 1.0) on Tiny
Shakespeare. Times STEPS training steps (after 5 warm-up steps) with
torch.set_num_threads(1) and (2), then nanoGPT's estimate_loss (eval_iters 20
batches of each split, eval mode; the median of 3), and prints one key=value
line per setting, with whole_s: the recipe's whole run of --run-steps steps,
its evaluations at 0, 250, ... included (the steps' and evaluations' measured
times; no set-up):

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
EVAL_INTERVAL, EVAL_ITERS = 250, 20  # nanoGPT's CPU run: --eval_iters=20, eval_interval 250


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

    n_val = len(ids) - n_train

    @torch.no_grad()
    def estimate_loss():  # nanoGPT's: EVAL_ITERS batches of each split, eval mode
        model.eval()
        for lo, n in ((0, n_train), (n_train, n_val)):
            for _ in range(EVAL_ITERS):
                p = lo + torch.randint(n - T - 1, (BATCH,))
                x = torch.stack([ids[i:i + T] for i in p])
                y = torch.stack([ids[i + 1:i + 1 + T] for i in p])
                torch.nn.functional.cross_entropy(model(x).flatten(0, 1), y.flatten())
        model.train()

    for _ in range(5):
        step()
    start = time.perf_counter()
    for _ in range(steps):
        loss = step()
    step_s = (time.perf_counter() - start) / steps
    evals = []
    for _ in range(3):
        t = time.perf_counter()
        estimate_loss()
        evals.append(time.perf_counter() - t)
    return step_s, sorted(evals)[1], loss


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--data", default="data/tinyshakespeare.txt")
    ap.add_argument("--steps", type=int, default=200, help="steps timed")
    ap.add_argument("--run-steps", type=int, default=2000,
                    help="the run whose whole time is estimated (whole_s)")
    args = ap.parse_args()
    with open(args.data, encoding="utf-8") as f:
        text = f.read()
    vocab = sorted(set(text))
    if len(vocab) != CFG["vocab_size"]:
        sys.exit(f"train_torch.py: expected 65 characters in {args.data}, found {len(vocab)}")
    index = {c: i for i, c in enumerate(vocab)}
    ids = torch.tensor([index[c] for c in text], dtype=torch.long)
    for threads in (1, 2):
        s, ev, loss = time_steps(ids, args.steps, threads)
        # the recipe's whole run: its steps and its evaluations (at 0, EVAL_INTERVAL, ...)
        whole = args.run_steps * s + (args.run_steps // EVAL_INTERVAL + 1) * ev
        print(f"case=torch_train threads={threads} steps={args.steps} ms_per_step={s * 1e3:.2f} "
              f"tokens_per_s={BATCH * CFG['context_length'] / s:.0f} eval_ms={ev * 1e3:.1f} "
              f"run_steps={args.run_steps} whole_s={whole:.2f} last_loss={loss:.4f}")


if __name__ == "__main__":
    main()
