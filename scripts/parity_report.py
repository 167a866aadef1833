#!/usr/bin/python3
"""Run `attn forward` on PyTorch reference cases and report the parity figures.

    /usr/bin/python3 scripts/parity_report.py --attn build/attn [--cases DIR]

DIR holds case directories as scripts/gen_parity_fixtures.py writes them
(default: the committed tests/fixtures/parity). For each case this runs

    attn forward MODULE --d-in .. --d-out .. [--heads ..] [--context-length ..]
        [--dropout ..] [--qkv-bias] --seed S --rng torch-cpu [--train]
        [--weights weights.safetensors] --input x.npy --output y.npy
        --grad-output dy.npy --grad-dir grads/

and compares with PyTorch's tensors, elementwise (c = attn, r = PyTorch):

  outputs:   err = |c - r| / max(1, |r|)                      must be <= 1e-5
  gradients: err = max|C - R| / max(max|R|, 1e-2 * S)         must be <= 1e-4
             per gradient tensor (dX and each parameter), S the largest
             |PyTorch gradient| in the whole case: the tensor's relative
             error, judged against 1% of the case's gradient scale when the
             tensor is (mathematically) zero, as W_key.bias always is

It prints one line per case and a table per module: the largest absolute
difference and the largest err above, for outputs and for gradients. Exit
status 1 if any case fails (or attn fails), 0 otherwise.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

OUT_TOL, GRAD_TOL = 1e-5, 1e-4


def out_err(c, r):
    d = np.abs(c.astype(np.float64) - r.astype(np.float64))
    return float(d.max(initial=0)), float((d / np.maximum(1.0, np.abs(r))).max(initial=0))


def grad_err(c, r, scale):
    """(max |c - r|, max |c - r| / max(max|r|, 1e-2 * scale))."""
    d = float(np.abs(c.astype(np.float64) - r.astype(np.float64)).max(initial=0))
    denom = max(float(np.abs(r).max(initial=0)), 1e-2 * scale)
    return d, (d / denom if denom > 0 else (0.0 if d == 0 else float("inf")))


def attn_command(attn, cfg, case, out):
    cmd = [attn, "forward", cfg["module"], "--d-in", str(cfg["d_in"]), "--d-out", str(cfg["d_out"]),
           "--seed", str(cfg["seed"]), "--rng", cfg["rng"]]
    if cfg["module"] in ("mha-wrapper", "mha", "seed004-mha"):
        cmd += ["--heads", str(cfg["num_heads"])]
    if cfg["module"] not in ("self-attention-v1", "self-attention-v2"):
        cmd += ["--context-length", str(cfg["context_length"]), "--dropout", repr(cfg["dropout"])]
    if cfg["qkv_bias"]:
        cmd.append("--qkv-bias")
    if cfg["train"]:
        cmd.append("--train")
    if "weights_seed" in cfg:
        cmd += ["--weights", os.path.join(case, "weights.safetensors")]
    cmd += ["--input", os.path.join(case, "x.npy"), "--output", os.path.join(out, "y.npy"),
            "--grad-output", os.path.join(case, "dy.npy"), "--grad-dir", os.path.join(out, "grads")]
    return cmd


def run_case(attn, case, out):
    """Returns (cfg, result dict) — result has 'error' when attn failed."""
    with open(os.path.join(case, "config.json")) as f:
        cfg = json.load(f)
    cmd = attn_command(attn, cfg, case, out)
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if p.returncode != 0:
        return cfg, {"error": "exit %d: %s" % (p.returncode, p.stderr.strip()), "cmd": cmd}
    res = {"cmd": cmd}
    res["y_abs"], res["y_err"] = out_err(np.load(os.path.join(out, "y.npy")),
                                         np.load(os.path.join(case, "y.npy")))
    res["g_abs"], res["g_err"], res["g_worst"] = 0.0, 0.0, ""
    names = ["input"] + cfg["params"]
    refs = {n: np.load(os.path.join(case, "grads", n + ".npy")) for n in names}
    scale = max(float(np.abs(r).max(initial=0)) for r in refs.values())
    for name in names:
        c, r = np.load(os.path.join(out, "grads", name + ".npy")), refs[name]
        if c.shape != r.shape:
            return cfg, {"error": "%s: shape %s, PyTorch %s" % (name, c.shape, r.shape), "cmd": cmd}
        a, e = grad_err(c, r, scale)
        res["g_abs"] = max(res["g_abs"], a)
        if e >= res["g_err"]:
            res["g_err"], res["g_worst"] = e, name
    res["ok"] = res["y_err"] <= OUT_TOL and res["g_err"] <= GRAD_TOL
    return cfg, res


def describe(cfg):
    s = "d_in=%d d_out=%d" % (cfg["d_in"], cfg["d_out"])
    if cfg["module"] in ("mha-wrapper", "mha", "seed004-mha"):
        s += " heads=%d" % cfg["num_heads"]
    s += " B=%d T=%d" % (cfg["B"], cfg["T"])
    if cfg["module"] not in ("self-attention-v1", "self-attention-v2"):
        s += " ctx=%d p=%g %s" % (cfg["context_length"], cfg["dropout"],
                                  "train" if cfg["train"] else "eval")
    if cfg["qkv_bias"]:
        s += " bias"
    if "weights_seed" in cfg:
        s += " +weights"
    return s + " seed=%d" % cfg["seed"]


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--attn", required=True, help="path of the attn program")
    ap.add_argument("--cases", default=os.path.join(here, "..", "tests", "fixtures", "parity"))
    a = ap.parse_args()
    cases = sorted(d for d in os.listdir(a.cases)
                   if os.path.isfile(os.path.join(a.cases, d, "config.json")))
    if not cases:
        print("parity: no cases in %s" % a.cases, file=sys.stderr)
        return 1
    per_module, failed = {}, 0
    with tempfile.TemporaryDirectory(prefix="attn-parity-") as tmp:
        for name in cases:
            out = os.path.join(tmp, name)
            os.makedirs(out)
            cfg, res = run_case(a.attn, os.path.join(a.cases, name), out)
            if "error" in res:
                failed += 1
                print("FAIL %-22s %-18s %s\n     %s\n     command: %s" % (
                    name, cfg["module"], describe(cfg), res["error"], " ".join(res["cmd"])))
                continue
            m = per_module.setdefault(cfg["module"], {"n": 0, "y_abs": 0, "y_err": 0,
                                                      "g_abs": 0, "g_err": 0})
            m["n"] += 1
            for k in ("y_abs", "y_err", "g_abs", "g_err"):
                m[k] = max(m[k], res[k])
            failed += not res["ok"]
            print("%s %-22s %-18s y err %.2e  grad err %.2e (%s)  %s" % (
                "ok  " if res["ok"] else "FAIL", name, cfg["module"], res["y_err"], res["g_err"],
                res["g_worst"], describe(cfg)))
            if not res["ok"]:
                print("     command: %s" % " ".join(res["cmd"]))
    print()
    print("%-18s %5s  %-12s %-12s  %-12s %-12s" % ("module", "cases", "y max|d|", "y err",
                                                   "grad max|d|", "grad err"))
    for mod in ["self-attention-v1", "self-attention-v2", "causal-attention", "mha-wrapper", "mha",
                "attention-head", "seed004-mha"]:
        if mod in per_module:
            m = per_module[mod]
            print("%-18s %5d  %-12.3e %-12.3e  %-12.3e %-12.3e" % (
                mod, m["n"], m["y_abs"], m["y_err"], m["g_abs"], m["g_err"]))
    print("bounds: y err <= %g (|d| / max(1, |ref|) per element); grad err <= %g "
          "(max|d| / max(max|ref|, 1e-2 S) per tensor)" % (OUT_TOL, GRAD_TOL))
    print("%d of %d cases passed" % (len(cases) - failed, len(cases)))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
