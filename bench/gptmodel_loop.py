#!/usr/bin/python3
"""The book's chapter-5 training loop at GPT_CONFIG_124M (context 256, batch
2, drop_rate 0.1, qkv_bias False): the book's GPTModel (attn.book, plain
PyTorch) against attn.torch.GPTModel returning the logits (the book's
calc_loss_batch: F.cross_entropy in torch) and attn.torch.GPTModel(targets=)
(attn's fused head + loss), in the same run; and the last two with
attn.torch.AdamW in place of torch.optim.AdamW (the loop's other line).

One step is the book's: optimizer.zero_grad(); loss = ...; loss.backward();
optimizer.step() (AdamW, lr 4e-4, weight_decay 0.1). The three variants
share one set of weights and one optimizer (attn.torch.swap_model of the
book's model), so memory is one model's; they alternate, `steps` steps each
per round, with torch and attn at 1 and then 2 threads; each variant's best
wall seconds per step over rounds and thread counts is kept, and its best
process CPU seconds per step at 1 thread (the work itself, which a machine
busy with other jobs disturbs less than the wall time).

  /usr/bin/python3 bench/gptmodel_loop.py               # 3 steps x 2 rounds
  /usr/bin/python3 bench/gptmodel_loop.py --steps 5 --rounds 3 --threads 2
  /usr/bin/python3 bench/gptmodel_loop.py --bf16        # + precision="bf16" rows
"""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import attn  # noqa: E402 (before torch: OpenBLAS's kernels, docs/engines.md)
import attn.torch as at  # noqa: E402
import torch  # noqa: E402
from attn.book import GPTModel  # noqa: E402

GPT_CONFIG_124M = {"vocab_size": 50257, "context_length": 256, "emb_dim": 768, "n_heads": 12,
                   "n_layers": 12, "drop_rate": 0.1, "qkv_bias": False}


def book_loss(model, x, y):
    """The book's calc_loss_batch."""
    logits = model(x)
    return torch.nn.functional.cross_entropy(logits.flatten(0, 1), y.flatten())


def fused_loss(model, x, y):
    return model(x, targets=y)


def run(model, loss_fn, optimizer, batches, steps):
    """steps steps of the book's loop: wall and process CPU seconds per
    step, and the last loss."""
    model.train()
    t0, c0 = time.perf_counter(), time.process_time()
    for i in range(steps):
        x, y = batches[i % len(batches)]
        optimizer.zero_grad()
        loss = loss_fn(model, x, y)
        loss.backward()
        optimizer.step()
    return ((time.perf_counter() - t0) / steps, (time.process_time() - c0) / steps,
            loss.item())


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=3, help="steps per variant per round")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--bf16", action="store_true",
                    help="also precision='bf16' (AVX512-BF16 CPUs), both paths")
    ap.add_argument("--only", help="the variants whose name contains one of these "
                    "comma-separated words (the book's always runs)")
    args = ap.parse_args()

    torch.manual_seed(123)
    book = GPTModel(GPT_CONFIG_124M)
    ours = at.swap_model(book)  # the same Parameters: one optimizer trains both
    optimizer = torch.optim.AdamW(book.parameters(), lr=4e-4, weight_decay=0.1)
    B, T, V = 2, GPT_CONFIG_124M["context_length"], GPT_CONFIG_124M["vocab_size"]
    g = torch.Generator().manual_seed(1)
    batches = [(torch.randint(0, V, (B, T), generator=g), torch.randint(0, V, (B, T), generator=g))
               for _ in range(4)]
    # attn.torch.AdamW for torch.optim.AdamW: the loop's one other line
    ours_opt = at.AdamW(book.parameters(), lr=4e-4, weight_decay=0.1)
    variants = [("book GPTModel", book, book_loss, optimizer),
                ("attn GPTModel (logits)", ours, book_loss, optimizer),
                ("attn GPTModel (targets=)", ours, fused_loss, optimizer),
                ("attn (logits) + AdamW", ours, book_loss, ours_opt),
                ("attn (targets=) + AdamW", ours, fused_loss, ours_opt)]
    if args.bf16:
        ours16 = at.swap_model(book, precision="bf16")
        variants += [("attn bf16 (logits)", ours16, book_loss, optimizer),
                     ("attn bf16 (targets=)", ours16, fused_loss, optimizer),
                     ("attn bf16 (targets=) + AdamW", ours16, fused_loss, ours_opt)]
    if args.only:
        words = args.only.split(",")
        variants = [v for v in variants if v[0] == "book GPTModel" or any(w in v[0] for w in words)]
    best = {name: float("inf") for name, _, _, _ in variants}
    cpu = dict(best)
    best_threads = {}
    print(f"torch {torch.__version__}, attn {attn.__version__}, {os.cpu_count()} CPUs; "
          f"GPT_CONFIG_124M, batch {B}, {args.steps} steps x {args.rounds} rounds, "
          f"threads {args.threads}; load average {os.getloadavg()[0]:.1f}")
    for n in args.threads:
        torch.set_num_threads(n)
        attn.set_num_threads(n)
        for _, model, fn, opt in variants:  # warm-up: grads, AdamW state, buffers
            run(model, fn, opt, batches, 1)
        for r in range(args.rounds):
            for name, model, fn, opt in variants:
                s, c, loss = run(model, fn, opt, batches, args.steps)
                if s < best[name]:
                    best[name], best_threads[name] = s, n
                if n == 1:
                    cpu[name] = min(cpu[name], c)
                print(f"threads {n} round {r}: {name:28s} {s:7.3f} s/step, cpu {c:7.3f} s "
                      f"(loss {loss:.4f})", flush=True)
    base = best["book GPTModel"]
    print(f"best of threads {args.threads} (load average now {os.getloadavg()[0]:.1f})")
    for name, _, _, _ in variants:
        print(f"  {name:28s} {best[name]:7.3f} s/step  {base / best[name]:5.2f}x the book's")
    for name, _, _, _ in variants:  # machine-readable (bench/compare.sh reads them)
        slug = "".join(c if c.isalnum() else "_" for c in name).strip("_")
        print(f"result variant={slug} s_per_step={best[name]:.4f} threads={best_threads[name]}")
    if 1 in args.threads:  # one thread: CPU time is the work, whatever else the machine runs
        base = cpu["book GPTModel"]
        print("CPU seconds per step at 1 thread (less sensitive to a busy machine)")
        for name, _, _, _ in variants:
            print(f"  {name:28s} {cpu[name]:7.3f} s/step  {base / cpu[name]:5.2f}x the book's")


if __name__ == "__main__":
    main()
