#!/usr/bin/python3
"""Every target of issue 10 in one run, attn next to PyTorch 1.13 (best of 1
and 2 threads; fp32, and bf16 autocast where PyTorch has it) with the ratio.
Bounded: about 10 minutes on a loaded 2-core machine (fewer with --quick).

  bench/issue10.sh            # builds attn, then runs this
  /usr/bin/python3 bench/issue10.py --attn build/attn [--quick]

Targets (2-core machine, same run):
  seed004 training step (B 8 x T 256): fp32 model GFLOP/s >= 80% of `attn bench
    sgemm`; bf16 >= 1.7x the fp32 step rate; >= 3x PyTorch fp32 (best threads)
  nanogpt-cpu 2000 steps: <= 40 s wall at val loss <= 1.89 (bf16 allowed); fp32 <= 60 s
  generation, seed004 size: >= 60 tokens/s fp32, >= 110 bf16; tiny >= 2x before (6-8k)
  MHA B8 T1024 D768 H12 vs torch.nn.MultiheadAttention: fp32 >= 3x fwd and fwd+bwd, bf16 >= 4x
  busy loop on one core: 2-thread training >= 0.9x 1-thread
  seed004 step: 0 minor page faults after the first
"""
import argparse
import os
import re
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "data", "tinyshakespeare.txt")
ROWS = []


def kv(line):
    return dict(re.findall(r"(\w+)=([^\s]+)", line))


def attn(args, attn_bin, env=None):
    out = subprocess.run([attn_bin] + args, check=True, capture_output=True, text=True,
                         env=env, cwd=ROOT)
    return [kv(l) for l in out.stdout.splitlines() if l.startswith("case=")]


def row(target, attn_fig, torch_fig, ratio, goal, met):
    ROWS.append((target, attn_fig, torch_fig, ratio, goal, met))
    print(f"  {target}: attn {attn_fig} | PyTorch {torch_fig} | ratio {ratio} | target {goal}"
          f" -> {'MET' if met else 'not met'}", flush=True)


# ------------------------------------------------------------------ PyTorch


def torch_gpt_step(cfg, batch, steps, threads, bf16):
    import torch
    sys.path.insert(0, os.path.join(ROOT, "scripts"))
    from gpt_parity import GPTModel

    torch.set_num_threads(threads)
    torch.manual_seed(1337)
    model = GPTModel(cfg)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, betas=(0.9, 0.95), weight_decay=0.1)
    T, V = cfg["context_length"], cfg["vocab_size"]
    x = torch.randint(V, (batch, T))
    y = torch.randint(V, (batch, T))

    def step():
        if bf16:
            with torch.autocast("cpu", dtype=torch.bfloat16):
                loss = torch.nn.functional.cross_entropy(model(x).flatten(0, 1).float(),
                                                         y.flatten())
        else:
            loss = torch.nn.functional.cross_entropy(model(x).flatten(0, 1), y.flatten())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()

    step()
    ts = []
    for _ in range(steps):
        t0 = time.perf_counter()
        step()
        ts.append(time.perf_counter() - t0)
    return min(ts)


def torch_mha(B, T, D, H, backward, repeat, threads, bf16):
    import torch

    torch.set_num_threads(threads)
    torch.manual_seed(123)
    model = torch.nn.MultiheadAttention(D, H, batch_first=True)
    causal = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)
    x = torch.rand(B, T, D) * 2 - 1
    dy = torch.rand(B, T, D) * 2 - 1
    ts = []
    for r in range(repeat + 1):
        xg = x.clone().requires_grad_(backward)
        t0 = time.perf_counter()
        with torch.set_grad_enabled(backward), torch.autocast("cpu", dtype=torch.bfloat16,
                                                              enabled=bf16):
            y = model(xg, xg, xg, attn_mask=causal, need_weights=False)[0]
        if backward:
            y.float().backward(dy)
            model.zero_grad(set_to_none=True)
        if r:
            ts.append(time.perf_counter() - t0)
    return min(ts)


def in_child(fn, *args):
    """Each PyTorch timing in its own process (thread pools do not mix)."""
    code = ("import sys; sys.path.insert(0, %r); import issue10; print(repr(issue10.%s(*%r)))"
            % (os.path.dirname(os.path.abspath(__file__)), fn, args))
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    return float(out.stdout.strip().splitlines()[-1])


def best_torch(fn, *args, bf16=False):
    return min(in_child(fn, *args, t, bf16) for t in (1, 2))


# ------------------------------------------------------------------ cases

SEED004 = {"vocab_size": 65, "context_length": 256, "emb_dim": 768, "n_heads": 12,
           "n_layers": 10, "drop_rate": 0.1, "qkv_bias": False}


def seed004_training(a, quick):
    batch = 2 if quick else 8
    print(f"# seed004 training step, batch {batch} x 256 (attn: 1 untimed + N timed steps, min)")
    steps = "2" if quick else "3"
    sg = attn(["bench", "sgemm", "--threads", "2", "--repeat", "5"], a)[0]
    sgemm = float(sg["gflops"])
    res = {}
    for p in ("fp32", "bf16"):
        r = attn(["bench", "train", "--preset", "seed004", "--batch-size", str(batch), "--steps", steps,
                  "--threads", "2", "--precision", p, "--data", DATA], a)[0]
        res[p] = r
        print(f"  attn {p}: min {r['min_s']} s/step, median {r['median_s']}, {r['gflops']} "
              f"GFLOP/s at the median, faults first {r['faults_first']}, per later step "
              f"{r['faults_per_step']}", flush=True)
    s32 = float(res["fp32"]["min_s"])
    s16 = float(res["bf16"]["min_s"])
    gf32 = float(res["fp32"]["gflops"]) * float(res["fp32"]["median_s"]) / s32
    tsteps = 1 if quick else 2
    t32 = best_torch("torch_gpt_step", SEED004, batch, tsteps)
    t16 = best_torch("torch_gpt_step", SEED004, batch, tsteps, bf16=True)
    print(f"  PyTorch book GPTModel: fp32 {t32:.2f} s/step, bf16 autocast {t16:.2f} s/step "
          f"(best of 1, 2 threads)", flush=True)
    row("seed004 fp32 FLOP rate vs sgemm", f"{gf32:.1f} GFLOP/s", "-",
        f"{gf32 / sgemm:.2f} of sgemm {sgemm:.1f}", ">= 0.80", gf32 / sgemm >= 0.8)
    row("seed004 bf16 vs fp32 step rate", f"{s16:.2f} s vs {s32:.2f} s", "-",
        f"{s32 / s16:.2f}x", ">= 1.7x", s32 / s16 >= 1.7)
    row("seed004 fp32 step vs PyTorch fp32", f"{s32:.2f} s", f"{t32:.2f} s", f"{t32 / s32:.2f}x",
        ">= 3x", t32 / s32 >= 3)
    row("seed004 bf16 step vs PyTorch bf16 autocast", f"{s16:.2f} s", f"{t16:.2f} s",
        f"{t16 / s16:.2f}x", "(best engine each)", True)
    row("seed004 bf16 step vs PyTorch fp32", f"{s16:.2f} s", f"{t32:.2f} s", f"{t32 / s16:.2f}x",
        ">= 3x", t32 / s16 >= 3)
    f = max(float(res[p]["faults_per_step"]) for p in res)
    row("seed004 minor faults per step after the first", f"{f:.1f}", "-", "-", "0", f == 0)


def nanogpt(a, quick):
    steps = 100 if quick else 2000
    print(f"# nanogpt-cpu, {steps} steps (attn train, wall clock incl. evals)")
    import tempfile

    walls = {}
    for p in ("fp32", "bf16"):
        with tempfile.TemporaryDirectory() as d:
            t0 = time.perf_counter()
            out = subprocess.run([a, "train", "--preset", "nanogpt-cpu", "--data", DATA, "--out", d,
                                  "--steps", str(steps), "--precision", p], check=True,
                                 capture_output=True, text=True, cwd=ROOT)
            wall = time.perf_counter() - t0
        val = float(re.search(r"final val loss ([0-9.]+)", out.stderr).group(1))
        walls[p] = (wall, val)
        print(f"  attn {p}: {wall:.1f} s wall, final val loss {val:.4f}", flush=True)
    tsteps = 20 if quick else 200
    out = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "train_torch.py"),
                          "--data", DATA, "--steps", str(tsteps)], check=True,
                         capture_output=True, text=True, cwd=ROOT)
    ms = min(float(kv(l)["ms_per_step"]) for l in out.stdout.splitlines() if "case=" in l)
    torch_wall = ms * 1e-3 * steps
    print(f"  PyTorch book GPTModel: {ms:.1f} ms/step over {tsteps} steps -> {torch_wall:.0f} s "
          f"for {steps} steps (training only; nanoGPT's own figure: 148 s)", flush=True)
    scale = steps / 2000
    for p, goal in (("fp32", 60), ("bf16", 40)):
        wall, val = walls[p]
        ok = wall <= goal * scale and (quick or val <= 1.89)
        row(f"nanogpt-cpu {p} wall, val loss {val:.3f}", f"{wall:.1f} s", f"{torch_wall:.0f} s",
            f"{torch_wall / wall:.2f}x", f"<= {goal * scale:.0f} s, val <= 1.89", ok)


def generation(a, quick):
    print("# generation (KV cache, greedy, randomly initialised model), tokens/s")
    n = "64" if quick else "200"
    for preset, p, goal in (("seed004", "fp32", 60), ("seed004", "bf16", 110),
                            ("tiny", "fp32", 12000)):
        best = max(float(attn(["bench", "generate", "--preset", preset, "--tokens", n,
                               "--threads", str(t), "--precision", p], a)[0]["tokens_per_s"])
                   for t in (1, 2))
        label = f"{preset} {p} generation (best of 1, 2 threads)"
        goal_s = f">= {goal}" + (" (2x the 6-8k before)" if preset == "tiny" else "")
        row(label, f"{best:.1f} tok/s", "no KV-cache peer", "-", goal_s, best >= goal)


def mha(a, quick, rounds=1):
    B, T = (2, 256) if quick else (8, 1024)
    print(f"# MultiHeadAttention B={B} T={T} D=768 H=12 vs torch.nn.MultiheadAttention "
          f"(each side its best of 1 and 2 threads; {rounds} interleaved round(s), min of each)")
    for backward in (False, True):
        mode = "forward+backward" if backward else "forward"
        for p in ("fp32", "bf16"):
            s_all, t_all = [], []
            for _ in range(rounds):
                for th in (1, 2):
                    args = ["bench", "mha", "--batch", str(B), "--tokens", str(T), "--d-model",
                            "768", "--heads", "12", "--repeat", "3", "--mha-only", "--threads",
                            str(th), "--precision", p]
                    r = attn(args + (["--backward"] if backward else []), a)[0]
                    s_all.append((float(r["min_s"]), th))
                t_all.append(best_torch("torch_mha", B, T, 768, 12, backward, 2,
                                        bf16=(p == "bf16")))
            s, th = min(s_all)
            t = min(t_all)
            print(f"    {mode} {p}: attn (s, threads) {s_all}; PyTorch {t_all}", flush=True)
            goal = 3 if p == "fp32" else 4
            row(f"MHA {mode} {p}", f"{s * 1e3:.0f} ms ({th} thr)", f"{t * 1e3:.0f} ms",
                f"{t / s:.2f}x", f">= {goal}x", t / s >= goal)


def busy(a, quick):
    print("# busy machine: a busy loop on one core, nanogpt-cpu training steps")
    loop = subprocess.Popen(["sh", "-c", "while :; do :; done"])
    try:
        time.sleep(0.5)
        r = {}
        for t in (1, 2, 1, 2):
            x = attn(["bench", "train", "--preset", "nanogpt-cpu", "--steps", "30", "--threads",
                      str(t), "--data", DATA], a)[0]
            r[t] = max(r.get(t, 0), float(x["tokens_per_s"]))
    finally:
        loop.kill()
        loop.wait()
    row("busy loop: 2-thread vs 1-thread training", f"{r[2]:.0f} vs {r[1]:.0f} tok/s", "-",
        f"{r[2] / r[1]:.2f}x", ">= 0.9x", r[2] / r[1] >= 0.9)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--attn", default=os.path.join(ROOT, "build", "attn"))
    ap.add_argument("--quick", action="store_true", help="small sizes (a smoke run, minutes)")
    ap.add_argument("--only", help="comma list of: seed004,nanogpt,generate,mha,busy")
    ap.add_argument("--rounds", type=int, default=1,
                    help="MHA: interleaved attn/PyTorch rounds, min of each (a loaded machine)")
    args = ap.parse_args()
    try:  # the peers run in children of this interpreter: it must have PyTorch
        import torch  # noqa: F401
    except ImportError:
        sys.exit(f"bench/issue10.py: {sys.executable} has no PyTorch; run it with "
                 "/usr/bin/python3 (Debian's python3-torch) or through bench/issue10.sh")
    a = os.path.abspath(args.attn)
    with open("/proc/loadavg") as f:
        load = " ".join(f.read().split()[:3])
    print(f"# {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}, {os.cpu_count()} cores, "
          f"load {load}", flush=True)
    cases = {"seed004": seed004_training, "nanogpt": nanogpt, "generate": generation, "mha": mha,
             "busy": busy}
    todo = args.only.split(",") if args.only else list(cases)
    t0 = time.perf_counter()
    for name in todo:
        if name == "mha":
            mha(a, args.quick, args.rounds)
        else:
            cases[name](a, args.quick)
    print(f"# summary ({time.perf_counter() - t0:.0f} s)")
    for r in ROWS:
        print(" | ".join(str(c) for c in r[:5]) + (" | MET" if r[5] else " | not met"))


if __name__ == "__main__":
    main()
