"""The book's chapter-6 training step (gpt_class_finetune.py: all frozen but
the last block and the final norm, a 2-way head, the loss on the last token,
AdamW(lr=5e-5, weight_decay=0.1)) on the book's PyTorch model and on
attn.torch.swap_model of the same model, alternating, one process, the same
batch. Prints each one's median step and the ratio. --lora R: appendix E's
step instead (after the head: every tensor frozen, then
replace_linear_with_lora(model, rank=R, alpha=R) on every Linear).

    PYTHONPATH=python ATTN_LIBRARY=build/libattn.so /usr/bin/python3 \\
        bench/book_ch6_step.py [--emb 768 --layers 12 --heads 12] [--B 8 --T 120] [--lora 16]"""
import argparse
import copy
import os
import statistics
import sys
import time

import torch

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "tests", "python"))
from book_ch4 import GPTModel  # noqa: E402 (the book's model, written out)
from book_ch67 import calc_loss_batch, make_classifier, replace_linear_with_lora  # noqa: E402

import attn.torch as at  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--emb", type=int, default=256)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--vocab", type=int, default=50257)
    ap.add_argument("--B", type=int, default=8)
    ap.add_argument("--T", type=int, default=120)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--threads", type=int, default=torch.get_num_threads())
    ap.add_argument("--lora", type=int, default=0, help="appendix E's rank (0: chapter 6)")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    cfg = {"vocab_size": a.vocab, "context_length": max(a.T, 128), "emb_dim": a.emb,
           "n_heads": a.heads, "n_layers": a.layers, "drop_rate": 0.0, "qkv_bias": True}
    torch.manual_seed(123)
    book = GPTModel(cfg)
    mine = copy.deepcopy(book)
    for m in (book, mine):
        torch.manual_seed(1)
        make_classifier(m, a.emb, 2)
        if a.lora:  # appendix E: all frozen, then the adapters (drawn from the same seed)
            for prm in m.parameters():
                prm.requires_grad = False
            torch.manual_seed(2)
            replace_linear_with_lora(m, rank=a.lora, alpha=a.lora)
    mine = at.swap_model(mine)
    g = torch.Generator().manual_seed(0)
    x = torch.randint(0, a.vocab, (a.B, a.T), generator=g)
    y = torch.randint(0, 2, (a.B,), generator=g)
    runs = {}
    for name, m in (("book", book), ("attn", mine)):
        opt = torch.optim.AdamW(m.parameters(), lr=5e-5, weight_decay=0.1)
        runs[name] = (m, opt, [], [])
    for r in range(a.rounds + 1):  # round 0 warms up
        for name, (m, opt, times, losses) in runs.items():
            t0 = time.perf_counter()
            opt.zero_grad()
            loss = calc_loss_batch(x, y, m, "cpu")
            loss.backward()
            opt.step()
            dt = time.perf_counter() - t0
            if r:
                times.append(dt)
                losses.append(loss.item())
    tb, ta = (statistics.median(runs[n][2]) for n in ("book", "attn"))
    print(f"cfg emb {a.emb} layers {a.layers} heads {a.heads} vocab {a.vocab}, B {a.B} "
          f"T {a.T}, threads {a.threads}, {a.rounds} alternating rounds"
          + (f", LoRA rank {a.lora}" if a.lora else ""))
    print(f"book {tb:.4f} s/step, attn {ta:.4f} s/step: {tb / ta:.2f}x")
    print("losses book", [f"{v:.6f}" for v in runs["book"][3]])
    print("losses attn", [f"{v:.6f}" for v in runs["attn"][3]])


if __name__ == "__main__":
    main()
