#!/usr/bin/python3
"""Causal multi-head attention: attn against PyTorch 1.13.1 in the same run.

Each case (B, T, D, H, forward or forward+backward) is timed in separate
processes, each under /usr/bin/time -v for its peak RSS:
  - attn bench mha ...            (fused path; --reference adds the step-by-step path)
  - this script, --model book     (the book's chapter-3 MultiHeadAttention class)
  - this script, --model torch    (torch.nn.MultiheadAttention, need_weights=False)
PyTorch runs with torch.set_num_threads(1) and (2); the faster is kept. The
script prints one key=value line per measurement and a ratio table.

  /usr/bin/python3 bench/bench_mha.py --attn build/attn              # the issue's cases
  /usr/bin/python3 bench/bench_mha.py --attn build/attn --quick      # small shapes
  /usr/bin/python3 bench/bench_mha.py --model torch --batch 8 ...    # one PyTorch timing
"""
import argparse
import os
import re
import resource
import statistics
import subprocess
import sys
import time


def book_mha_class():
    """The book's chapter-3 MultiHeadAttention (scripts/book_attention.py)."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts"))
    from book_attention import MultiHeadAttention

    return MultiHeadAttention


def time_torch(model_name, B, T, D, H, backward, repeat, threads):
    import torch

    torch.set_num_threads(threads)
    torch.manual_seed(123)
    if model_name == "book":
        model = book_mha_class()(D, D, T, 0.0, H)
        run = lambda x: model(x)
    else:
        model = torch.nn.MultiheadAttention(D, H, batch_first=True)
        causal = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)
        run = lambda x: model(x, x, x, attn_mask=causal, need_weights=False)[0]
    x = torch.rand(B, T, D) * 2 - 1
    dy = torch.rand(B, T, D) * 2 - 1
    times = []
    for r in range(repeat + 1):  # the first run warms up
        if backward:
            xg = x.clone().requires_grad_(True)
            t0 = time.perf_counter()
            y = run(xg)
            y.backward(dy)
            t = time.perf_counter() - t0
            model.zero_grad(set_to_none=True)
        else:
            with torch.no_grad():
                t0 = time.perf_counter()
                run(x)
                t = time.perf_counter() - t0
        if r > 0:
            times.append(t)
    return statistics.median(times), min(times)


def flops(B, T, D, backward):
    proj = 8.0 * B * T * D * D
    core = 2.0 * B * D * T * (T + 1)
    return 3 * proj + 3.5 * core if backward else proj + core


def parse_kv(line):
    return dict(kv.split("=", 1) for kv in line.split())


def run_measured(cmd, env=None):
    """Run cmd under /usr/bin/time -v; return (key=value dicts, peak RSS MiB)."""
    p = subprocess.run(["/usr/bin/time", "-v"] + cmd, capture_output=True, text=True, env=env)
    if p.returncode != 0:
        sys.stderr.write(p.stdout + p.stderr)
        raise SystemExit("bench_mha.py: command failed: " + " ".join(cmd))
    m = re.search(r"Maximum resident set size \(kbytes\): (\d+)", p.stderr)
    rss = int(m.group(1)) / 1024.0 if m else float("nan")
    rows = [parse_kv(l) for l in p.stdout.splitlines() if l.startswith("case=")]
    return rows, rss


def one_torch_case(args):
    best = None
    for threads in args.torch_threads:
        med, mn = time_torch(args.model, args.batch, args.tokens, args.d_model, args.heads,
                             args.backward, args.repeat, threads)
        if best is None or med < best[0]:
            best = (med, mn, threads)
    med, mn, threads = best
    mode = "forward+backward" if args.backward else "forward"
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    print(f"case=torch_{args.model} B={args.batch} T={args.tokens} D={args.d_model} "
          f"H={args.heads} mode={mode} threads={threads} median_s={med:.6f} min_s={mn:.6f} "
          f"gflops={flops(args.batch, args.tokens, args.d_model, args.backward) / med * 1e-9:.2f} "
          f"peak_rss_mb={rss:.1f}", flush=True)


ISSUE_CASES = [  # (B, T, D, H, backward, repeat)
    (8, 1024, 768, 12, False, 5),
    (8, 1024, 768, 12, True, 3),
    (1, 4096, 768, 12, True, 1),
]
QUICK_CASES = [(2, 256, 256, 4, False, 5), (2, 256, 256, 4, True, 3)]


def compare(args):
    cases = QUICK_CASES if args.quick else ISSUE_CASES
    me = os.path.abspath(__file__)
    results = []
    for B, T, D, H, bwd, rep in cases:
        common = ["--batch", str(B), "--tokens", str(T), "--d-model", str(D), "--heads", str(H),
                  "--repeat", str(rep)] + (["--backward"] if bwd else [])
        row = {"case": f"B={B} T={T} D={D} H={H} {'fwd+bwd' if bwd else 'fwd'}"}
        attn_cmd = [args.attn, "bench", "mha"] + common + ["--threads", str(args.threads)]
        rows, rss = run_measured(attn_cmd)
        for r in rows:
            print(" ".join(f"{k}={v}" for k, v in r.items()) + f" time_v_rss_mb={rss:.1f}",
                  flush=True)
        by = {r["case"]: r for r in rows}
        row["attn"] = float(by["mha"]["median_s"])
        # The mha line's own peak (getrusage right after the MHA runs, before
        # the kernel-only and sgemm cases allocate their buffers).
        row["attn_rss"] = float(by["mha"]["peak_rss_mb"])
        row["core_gflops"] = float(by["core"]["gflops"])
        row["sgemm_gflops"] = float(by["sgemm"]["gflops"])
        if args.reference:
            rows, rss = run_measured(attn_cmd + ["--reference"])
            for r in rows:
                print(" ".join(f"{k}={v}" for k, v in r.items()) + f" time_v_rss_mb={rss:.1f}",
                      flush=True)
            row["ref"] = float(rows[0]["median_s"])
        for model in ("book", "torch"):
            cmd = [sys.executable, me, "--model", model] + common + [
                "--torch-threads", ",".join(str(t) for t in args.torch_threads)]
            rows, rss = run_measured(cmd)
            r = rows[0]
            print(" ".join(f"{k}={v}" for k, v in r.items()) + f" time_v_rss_mb={rss:.1f}",
                  flush=True)
            row[model] = float(r["median_s"])
            row[model + "_rss"] = rss
        results.append(row)

    print()
    print("| case | attn s | book s | torch.nn s | speed-up vs torch.nn | vs book | "
          "core/sgemm | attn RSS MB | torch.nn RSS MB | RSS ratio |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in results:
        print(f"| {r['case']} | {r['attn']:.3f} | {r['book']:.3f} | {r['torch']:.3f} | "
              f"{r['torch'] / r['attn']:.2f}x | {r['book'] / r['attn']:.2f}x | "
              f"{r['core_gflops'] / r['sgemm_gflops']:.0%} | {r['attn_rss']:.0f} | "
              f"{r['torch_rss']:.0f} | {r['attn_rss'] / r['torch_rss']:.1%} |")


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--attn", help="path to the attn program: run the comparison")
    ap.add_argument("--quick", action="store_true", help="small shapes instead of the issue's")
    ap.add_argument("--reference", action="store_true", help="also time attn --reference")
    ap.add_argument("--threads", type=int, default=2, help="attn threads (default 2)")
    ap.add_argument("--model", choices=["book", "torch"], help="time one PyTorch model")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--tokens", type=int, default=1024)
    ap.add_argument("--d-model", type=int, default=768)
    ap.add_argument("--heads", type=int, default=12)
    ap.add_argument("--backward", action="store_true")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--torch-threads", default="1,2",
                    type=lambda s: [int(t) for t in s.split(",")])
    args = ap.parse_args()
    if args.model:
        one_torch_case(args)
    elif args.attn:
        compare(args)
    else:
        ap.error("give --attn PATH (comparison) or --model book|torch (one timing)")


if __name__ == "__main__":
    main()
