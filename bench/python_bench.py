#!/usr/bin/python3
"""attn from Python (issue 19's targets), every figure from the same run:

  1. attn.torch.MultiHeadAttention forward + backward at B8 T1024 D768 H12,
     called from PyTorch, against the book's MultiHeadAttention in PyTorch
     1.13 and against `attn bench mha --backward` on the same shape (what
     the bridge costs); 1 and 2 threads, the faster kept per contender.
  2. The book's GPTModel at seed 004's size (ctx 256, emb 768, 12 heads, 10
     layers, vocab 65, no dropout) with attn.torch.MultiHeadAttention in place
     of its own: the training step's time against the unchanged model, and the
     two loss curves over 20 AdamW steps on the same batches (equal to 1e-5).
  3. attn.torch.scaled_dot_product_attention forward + backward at B1 T4096
     D64 H12: peak memory against PyTorch's naive softmax attention.
  4. Calling overhead: a (1, 6, 3) MultiHeadAttention forward from Python.

Each measurement runs in its own process (a clean heap for its peak RSS), all
with GOMP_SPINCOUNT=1000 (what `import attn` and the attn program set) and
OpenBLAS at the run's thread count for PyTorch's own products. Prints
key=value lines as they come, then the table.

  /usr/bin/python3 bench/python_bench.py --attn build/attn [--quick] [--gpt-batch 4]
"""
import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.dirname(HERE)


# ----------------------------------------------------------------- children

def setup(threads):
    import attn  # first: OpenMP's short spin (set in the environment anyway)
    import torch
    attn.set_num_threads(threads, blas_threads=threads)
    torch.set_num_threads(threads)
    return attn, torch


def child_mha(args):
    attn, torch = setup(args.threads)
    import attn.book as book
    import attn.torch as at
    B, T, D, H = args.shape
    torch.manual_seed(123)
    model = (at if args.who == "attn" else book).MultiHeadAttention(D, D, T, 0.0, H)
    x = torch.rand(B, T, D) * 2 - 1
    dy = torch.rand(B, T, D) * 2 - 1
    times = []
    for r in range(args.repeat + 1):  # the first run warms up
        xg = x.clone().requires_grad_(True)
        t0 = time.perf_counter()
        model(xg).backward(dy)
        t = time.perf_counter() - t0
        model.zero_grad(set_to_none=True)
        if r:
            times.append(t)
    return {"median_s": statistics.median(times), "min_s": min(times)}


def child_sdpa(args):
    attn, torch = setup(args.threads)
    import attn.torch as at
    B, H, T, D = args.shape
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(B, H, T, D, generator=g).requires_grad_() for _ in range(3))
    do = torch.randn(B, H, T, D, generator=g)
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0 = time.perf_counter()
    if args.who == "attn":
        o = at.scaled_dot_product_attention(q, k, v, is_causal=True)
    else:  # naive: the (B, H, T, T) scores, mask, softmax, weights @ v
        s = (q @ k.transpose(-2, -1)) * D ** -0.5
        s = s.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf"))
        o = torch.softmax(s, dim=-1) @ v
    o.backward(do)
    t = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {"s": t, "peak_mb": peak / 1024, "base_mb": base / 1024, "delta_mb": (peak - base) / 1024}


def child_overhead(args):
    attn, torch = setup(1)
    import numpy as np
    import attn.book as book
    import attn.torch as at
    x = np.random.default_rng(0).random((1, 6, 3)).astype(np.float32)
    m = attn.MultiHeadAttention(3, 2, 6, 0.0, 2, seed=123)
    torch.manual_seed(123)
    tm = at.MultiHeadAttention(3, 2, 6, 0.0, 2)
    torch.manual_seed(123)
    bm = book.MultiHeadAttention(3, 2, 6, 0.0, 2)
    xt = torch.from_numpy(x)
    xg = xt.clone().requires_grad_()

    def per_call(fn, n=2000):
        best = float("inf")
        for _ in range(7):
            t0 = time.perf_counter()
            for _ in range(n):
                fn()
            best = min(best, (time.perf_counter() - t0) / n)
        return best * 1e6

    out = {"numpy_us": per_call(lambda: m.forward(x))}
    with torch.no_grad():
        out["torch_nograd_us"] = per_call(lambda: tm(xt))
        out["book_nograd_us"] = per_call(lambda: bm(xt))
    out["torch_grad_us"] = per_call(lambda: tm(xg))
    out["book_grad_us"] = per_call(lambda: bm(xg))
    return out


def child_gpt(args):
    attn, torch = setup(args.threads)
    import attn.book as book
    import attn.torch as at
    cfg = {"vocab_size": 65, "context_length": 256, "emb_dim": 768, "n_heads": 12,
           "n_layers": 10, "drop_rate": 0.0, "qkv_bias": False}
    torch.manual_seed(123)
    model = book.GPTModel(cfg)
    if args.who == "attn":
        at.swap_attention(model)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1)
    g = torch.Generator().manual_seed(1)
    B, T = args.gpt_batch, cfg["context_length"]
    losses, times = [], []
    for step in range(args.steps):
        ids = torch.randint(0, 65, (B, T + 1), generator=g)
        t0 = time.perf_counter()
        loss = torch.nn.functional.cross_entropy(model(ids[:, :-1]).flatten(0, 1),
                                                 ids[:, 1:].flatten())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        times.append(time.perf_counter() - t0)
        losses.append(loss.item())
    return {"step_median_s": statistics.median(times[1:]), "step_min_s": min(times[1:]),
            "losses": losses}


CHILDREN = {"mha": child_mha, "sdpa": child_sdpa, "overhead": child_overhead, "gpt": child_gpt}


# ------------------------------------------------------------------- parent

def run_child(case, **kw):
    argv = [sys.executable, os.path.abspath(__file__), "--child", case]
    for k, v in kw.items():
        argv += [f"--{k.replace('_', '-')}"] + ([str(x) for x in v] if isinstance(v, tuple)
                                                else [str(v)])
    env = dict(os.environ, GOMP_SPINCOUNT="1000", PYTHONPATH=os.path.join(SRC, "python"))
    r = subprocess.run(argv, capture_output=True, text=True, env=env)
    if r.returncode:
        sys.exit(f"python_bench: {case} {kw} failed:\n{r.stderr[-2000:]}")
    out = json.loads(r.stdout.strip().splitlines()[-1])
    print(f"{case} {' '.join(f'{k}={v}' for k, v in kw.items())} -> "
          f"{' '.join(f'{k}={v:.4g}' for k, v in out.items() if not isinstance(v, list))}",
          flush=True)
    return out


def attn_bench(attn_bin, shape, threads, repeat):
    B, T, D, H = shape
    argv = [attn_bin, "bench", "mha", "--batch", B, "--tokens", T, "--d-model", D, "--heads", H,
            "--backward", "--mha-only", "--threads", threads, "--repeat", repeat]
    r = subprocess.run([str(a) for a in argv], capture_output=True, text=True)
    if r.returncode:
        sys.exit(f"python_bench: {' '.join(map(str, argv))}: {r.stderr}")
    for line in r.stdout.splitlines():
        f = dict(w.split("=", 1) for w in line.split() if "=" in w)
        if f.get("case") == "mha" and "median_s" in f:
            out = {"median_s": float(f["median_s"]), "min_s": float(f["min_s"])}
            print(f"attn bench mha --backward threads={threads} -> median_s={out['median_s']:.4g} "
                  f"min_s={out['min_s']:.4g}", flush=True)
            return out
    sys.exit(f"python_bench: no timing line in: {r.stdout}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--attn", default=os.path.join(SRC, "build", "attn"))
    ap.add_argument("--quick", action="store_true", help="small shapes, few steps")
    ap.add_argument("--gpt-batch", type=int, default=4)
    ap.add_argument("--gpt-threads", type=int, default=2)
    ap.add_argument("--child", choices=CHILDREN)
    ap.add_argument("--who")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--shape", type=int, nargs=4)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--steps", type=int, default=20)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(CHILDREN[args.child](args)))
        return
    os.environ.setdefault("ATTN_LIBRARY", os.path.join(os.path.dirname(os.path.abspath(args.attn)),
                                                       "libattn.so"))
    mha_shape = (2, 256, 256, 4) if args.quick else (8, 1024, 768, 12)
    sdpa_shape = (1, 12, 1024, 64) if args.quick else (1, 12, 4096, 64)
    steps = 3 if args.quick else 20
    print(f"python_bench: {time.strftime('%Y-%m-%d %H:%M')}, load average "
          f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs", flush=True)

    # 1. MHA forward + backward, interleaved, 1 and 2 threads.
    mha = {}
    for threads in (1, 2):
        mha[("book", threads)] = run_child("mha", who="book", threads=threads, shape=mha_shape)
        mha[("attn.torch", threads)] = run_child("mha", who="attn", threads=threads,
                                                 shape=mha_shape)
        mha[("attn bench", threads)] = attn_bench(args.attn, mha_shape, threads, 3)
    best = {w: min((mha[(w, t)]["median_s"], t) for t in (1, 2))
            for w in ("book", "attn.torch", "attn bench")}
    # 3. SDPA memory.
    sdpa = {w: run_child("sdpa", who=w, threads=2, shape=sdpa_shape) for w in ("naive", "attn")}
    # 4. Overhead.
    ov = run_child("overhead")
    # 2. The GPT at seed 004's size.
    gpt = {w: run_child("gpt", who=w, threads=args.gpt_threads, gpt_batch=args.gpt_batch,
                        steps=steps) for w in ("book", "attn")}
    diffs = [abs(a - b) for a, b in zip(gpt["book"]["losses"], gpt["attn"]["losses"])]

    B, T, D, H = mha_shape
    print("\n| case | attn | PyTorch / reference | ratio | target |")
    print("|---|---|---|---|---|")
    b, a, c = best["book"], best["attn.torch"], best["attn bench"]
    print(f"| MHA fwd+bwd B{B} T{T} D{D} H{H}, median (best of 1/2 threads) | "
          f"attn.torch {a[0]:.3f} s ({a[1]} thr) | book MHA {b[0]:.3f} s ({b[1]} thr) | "
          f"{b[0] / a[0]:.2f}x | >= 2x |")
    print(f"| same, the bridge's cost | attn.torch {a[0]:.3f} s | attn bench mha --backward "
          f"{c[0]:.3f} s ({c[1]} thr) | {a[0] / c[0]:.3f} | <= 1.10 |")
    for t in (1, 2):
        print(f"| (MHA at {t} thread{'s' if t > 1 else ''}: book / attn.torch / attn bench, "
              f"median [min]) | {mha[('book', t)]['median_s']:.3f} [{mha[('book', t)]['min_s']:.3f}] / "
              f"{mha[('attn.torch', t)]['median_s']:.3f} [{mha[('attn.torch', t)]['min_s']:.3f}] / "
              f"{mha[('attn bench', t)]['median_s']:.3f} [{mha[('attn bench', t)]['min_s']:.3f}] s"
              f" | | | |")
    gb, ga = gpt["book"], gpt["attn"]
    print(f"| seed004 GPTModel train step (B{args.gpt_batch} T256, {args.gpt_threads} threads), "
          f"median | attn.torch MHA {ga['step_median_s']:.2f} s | book {gb['step_median_s']:.2f} s | "
          f"{gb['step_median_s'] / ga['step_median_s']:.2f}x | report |")
    print(f"| same, loss over {steps} steps | max abs diff {max(diffs):.2e} "
          f"(last {ga['losses'][-1]:.5f} vs {gb['losses'][-1]:.5f}) | | | <= 1e-5 |")
    Bs, Hs, Ts, Ds = sdpa_shape
    na, at_ = sdpa["naive"], sdpa["attn"]
    print(f"| SDPA fwd+bwd B{Bs} T{Ts} D{Ds} H{Hs}: peak RSS above the inputs | "
          f"{at_['delta_mb']:.0f} MB ({at_['s']:.2f} s) | naive {na['delta_mb']:.0f} MB "
          f"({na['s']:.2f} s) | {100 * at_['delta_mb'] / na['delta_mb']:.1f}% | <= 15% |")
    print(f"| same, whole-process peak RSS | {at_['peak_mb']:.0f} MB | {na['peak_mb']:.0f} MB | "
          f"{100 * at_['peak_mb'] / na['peak_mb']:.1f}% | |")
    print(f"| (1, 6, 3) MHA forward, per call | numpy layer {ov['numpy_us']:.1f} us | "
          f"attn.torch {ov['torch_nograd_us']:.1f} us no_grad, {ov['torch_grad_us']:.1f} us "
          f"with grad; book {ov['book_nograd_us']:.1f} / {ov['book_grad_us']:.1f} us | | <= 30 us |")


if __name__ == "__main__":
    main()
