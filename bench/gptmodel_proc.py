#!/usr/bin/python3
"""The chapter-5 step at GPT_CONFIG_124M (context 256, batch 2, drop 0.1),
each variant in a process of its own, alternating, ROUNDS rounds: the book's
GPTModel with torch.optim.AdamW against attn.torch.GPTModel (logits: the
book's calc_loss_batch in torch; targets=: attn's fused head + loss), with
torch.optim.AdamW or attn.torch.AdamW, fp32 and bf16. One process per
variant keeps each one's memory (and the page faults of tensors torch
allocates each step) its own, where bench/gptmodel_loop.py shares one
process and one set of weights. Prints each run's best seconds per step of
STEPS (after one untimed), then the best per variant and its ratio to the
book's.

  /usr/bin/python3 bench/gptmodel_proc.py [--rounds 2] [--steps 3] [--threads 2]
      [--only book,targets+adamw]
"""
import argparse
import os
import subprocess
import sys
import time

VARIANTS = ["book", "logits", "targets", "logits+adamw", "targets+adamw", "bf16 targets",
            "bf16 targets+adamw"]


def one(v, threads, steps):
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
    import attn
    import attn.torch as at
    import torch
    from attn.book import GPTModel
    torch.set_num_threads(threads)
    attn.set_num_threads(threads)
    cfg = {"vocab_size": 50257, "context_length": 256, "emb_dim": 768, "n_heads": 12,
           "n_layers": 12, "drop_rate": 0.1, "qkv_bias": False}
    torch.manual_seed(123)
    model = GPTModel(cfg) if v == "book" else at.GPTModel(
        cfg, precision="bf16" if v.startswith("bf16") else "fp32")
    opt_cls = at.AdamW if v.endswith("+adamw") else torch.optim.AdamW
    opt = opt_cls(model.parameters(), lr=4e-4, weight_decay=0.1)
    g = torch.Generator().manual_seed(1)
    x = torch.randint(0, 50257, (2, 256), generator=g)
    y = torch.randint(0, 50257, (2, 256), generator=g)

    def step():
        opt.zero_grad()
        if "targets" in v:
            loss = model(x, targets=y)
        else:
            loss = torch.nn.functional.cross_entropy(model(x).flatten(0, 1), y.flatten())
        loss.backward()
        opt.step()

    step()
    best = float("inf")
    for _ in range(steps):
        t = time.perf_counter()
        step()
        best = min(best, time.perf_counter() - t)
    print(f"{best:.4f}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--threads", type=int, nargs="+", default=[2])
    ap.add_argument("--only", help="comma-separated variants to run (default all: "
                    + ", ".join(VARIANTS) + ")")
    ap.add_argument("--one", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.one:
        return one(a.one, a.threads[0], a.steps)
    env = dict(os.environ)
    print(f"# {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}, {os.cpu_count()} CPUs, "
          f"load {os.getloadavg()[0]:.2f}, OPENBLAS_CORETYPE="
          f"{env.get('OPENBLAS_CORETYPE', 'unset')}", flush=True)
    variants = a.only.split(",") if a.only else VARIANTS
    bad = [v for v in variants if v not in VARIANTS]
    if bad:
        ap.error(f"unknown variant {bad[0]!r} (one of {', '.join(VARIANTS)})")
    best = {}
    for r in range(a.rounds):
        for th in a.threads:
            for v in variants:
                out = subprocess.run([sys.executable, os.path.abspath(__file__), "--one", v,
                                      "--threads", str(th), "--steps", str(a.steps)],
                                     capture_output=True, text=True, env=env)
                if out.returncode != 0:
                    print(f"round {r + 1} threads {th} {v}: failed: {out.stderr.strip()[-300:]}")
                    continue
                s = float(out.stdout.split()[-1])
                print(f"round {r + 1} threads {th} {v:20s} {s:7.3f} s/step", flush=True)
                if s < best.get(v, (float("inf"),))[0]:
                    best[v] = (s, th)
    if "book" in best:
        print("best per variant (threads):")
        for v in VARIANTS:
            if v in best:
                print(f"  {v:20s} {best[v][0]:7.3f} s/step ({best[v][1]})  "
                      f"{best['book'][0] / best[v][0]:5.2f}x the book's")


if __name__ == "__main__":
    main()
