#!/usr/bin/env bash
# GPT-2 124M, one training step at llm.c's shape (batch 4 x 64 tokens):
# attn against karpathy/llm.c's train_gpt2.c (fp32, OpenMP), same run,
# alternating, each at 1 and 2 threads, each peer under every OpenBLAS
# setting given (attn's products are OpenBLAS's; llm.c has its own loops).
#   bench/llmc_peer.sh LLMC_DIR [ROUNDS]
# LLMC_DIR: a checkout of llm.c, built there with its own Makefile
# (`make train_gpt2`: -Ofast -march=native -fopenmp). No GPT-2 weights or
# token files can be downloaded here, so this writes llm.c's inputs itself:
#   gpt2_124M.bin: llm.c's checkpoint (header 20240326, version 3, fp32,
#     vocabulary padded to 50304), random N(0, 0.02) weights, layer norms 1/0;
#   dev/data/tinyshakespeare/tiny_shakespeare_{train,val}.bin: its token
#     files (header 20240520, version 1, uint16), random GPT-2 ids;
# and runs train_gpt2 in that folder until it has printed 6 steps (its
# later evaluations and samples are not steps), the median of steps 1-5.
# attn: `attn bench train` of the same model (gpt2-124m with qkv_bias,
# the head tied to the embedding and no dropout, as llm.c's), 5 timed steps after one
# untimed. Peak RSS: /usr/bin/time -v of each. The floor: the step's FLOPs
# (attn's count: 6 N params-in-matmuls + causal attention) at this run's
# 1024^3 sgemm rate (attn bench sgemm, 2 threads, the fastest of 20, under the OpenBLAS
# setting of attn's best step).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
llmc=$(cd "${1:?usage: bench/llmc_peer.sh LLMC_DIR [ROUNDS]}" && pwd)
rounds=${2:-2}
attn=${ATTN:-$root/build/attn}
PY=/usr/bin/python3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
[ -x "$llmc/train_gpt2" ] || { echo "build llm.c first: (cd $llmc && make train_gpt2)"; exit 1; }
# attn's side reads GPT-2's vocabulary and the corpus (a fresh clone has neither).
(cd "$root" && scripts/get-data.sh tinyshakespeare gpt2 > /dev/null)
echo "# $(date -u +%FT%TZ) $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-unset} OPENBLAS_L2_SIZE=${OPENBLAS_L2_SIZE:-unset}"

mkdir -p "$work/dev/data/tinyshakespeare"
"$PY" - "$work" << 'PY'
import numpy as np, sys
w = sys.argv[1]
V, Vp, T, L, H, C = 50257, 50304, 1024, 12, 12, 768
rng = np.random.default_rng(0)
h = np.zeros(256, np.int32)
h[:8] = [20240326, 3, T, V, L, H, C, Vp]
shapes = [(Vp, C), (T, C), (L, C), (L, C), (L, 3 * C, C), (L, 3 * C), (L, C, C), (L, C),
          (L, C), (L, C), (L, 4 * C, C), (L, 4 * C), (L, C, 4 * C), (L, C), (C,), (C,)]
norms = {2, 8, 14}  # ln1w, ln2w, lnfw: ones; the biases zero
with open(w + '/gpt2_124M.bin', 'wb') as f:
    f.write(h.tobytes())
    for i, s in enumerate(shapes):
        if i in norms: a = np.ones(s, np.float32)
        elif len(s) == 1 or (len(s) == 2 and i not in (0, 1)): a = np.zeros(s, np.float32)
        else: a = (rng.standard_normal(s) * 0.02).astype(np.float32)
        f.write(a.tobytes())
for name, n in (('train', 200000), ('val', 20000)):
    t = np.zeros(256, np.int32)
    t[:3] = [20240520, 1, n]
    with open(f'{w}/dev/data/tinyshakespeare/tiny_shakespeare_{name}.bin', 'wb') as f:
        f.write(t.tobytes())
        f.write(rng.integers(0, V, n).astype(np.uint16).tobytes())
PY
# llm.c's GPT-2: biased Q/K/V, the head tied to the embedding, no dropout.
echo '{"qkv_bias": true, "tie_weights": true, "drop_rate": 0.0}' > "$work/llmc_shape.json"

llmc_run() { # threads -> "median_s peak_kb"
  ( cd "$work" && OMP_NUM_THREADS=$1 /usr/bin/time -v -o "$work/time.txt" stdbuf -oL "$llmc/train_gpt2" > "$work/llmc.out" 2>&1 & 
    pid=$!
    while kill -0 $pid 2> /dev/null && [ "$(grep -c '^step ' "$work/llmc.out" 2> /dev/null)" -lt 6 ]; do sleep 0.2; done
    pkill -x train_gpt2 2> /dev/null || true
    wait $pid 2> /dev/null || true )
  local med rss
  med=$(grep '^step ' "$work/llmc.out" | sed -n '2,6p' | sed 's/.*took \([0-9.]*\) ms.*/\1/' | sort -g | sed -n 3p)
  rss=$(grep 'Maximum resident' "$work/time.txt" | awk '{print $NF}')
  echo "$(awk -v m="$med" 'BEGIN {printf "%.4f", m / 1000}') $rss"
}
# attn under each OpenBLAS setting (the machine's, none, SkylakeX); llm.c
# does not use OpenBLAS. BLAS_SETTINGS="set unset SkylakeX" by default.
. "$(dirname "$0")/blas_setting.sh"
settings=${BLAS_SETTINGS:-set unset SkylakeX}
attn_run() { # threads setting -> "median_s peak_kb"
  with_blas "$2" /usr/bin/time -v -o "$work/time.txt" "$attn" bench train --preset gpt2-124m --config "$work/llmc_shape.json" \
    --batch-size 4 --context 64 --steps 5 --threads "$1" --data "$root/data/tinyshakespeare.txt" > "$work/attn.out" 2> "$work/attn.err" ||
    { cat "$work/attn.err" >&2; exit 1; }
  local line med rss
  cp "$work/attn.out" "$work/attn-$2.out"
  line=$(grep '^case=train' "$work/attn.out")
  med=$(echo "$line" | tr ' ' '\n' | sed -n 's/^median_s=//p')
  rss=$(grep 'Maximum resident' "$work/time.txt" | awk '{print $NF}')
  echo "$med $rss"
}
for r in $(seq 1 "$rounds"); do
  for th in 1 2; do
    echo "round $r threads $th llm.c $(llmc_run "$th")"
    for b in $settings; do
      echo "round $r threads $th attn  $(attn_run "$th" "$b") $b"
    done
  done
done | tee "$work/runs"
# the best attn row's setting: its line, and the floor at its sgemm rate
bb=$(sort -k6 -g "$work/runs" | awk '$5 == "attn" {print $8; exit}')
grep -m1 '^case=train' "$work/attn-$bb.out"
# 20 repeats, the fastest: a 7 ms product's median moves by 2x on a VM
sg=$(with_blas "$bb" "$attn" bench sgemm --m 1024 --n 1024 --k 1024 --threads 2 --repeat 20 2>/dev/null | grep -m1 'gflops' || true)
echo "sgemm 1024^3, 2 threads, OpenBLAS $bb: ${sg:-(attn bench sgemm printed no line)}"
"$PY" - "$work/runs" "$work/attn-$bb.out" "$sg" << 'PY'
import re, sys
runs = [l.split() for l in open(sys.argv[1])]
best = {}
for l in runs:
    who, t, rss = l[4], float(l[5]), int(l[6])
    b = best.get(who)
    if b is None or t < b[0]: best[who] = (t, l[3], rss, l[7] if len(l) > 7 else '-')
    best[who + '_rss'] = max(best.get(who + '_rss', 0), rss)
a, c = best['attn'], best['llm.c']
print(f"best step: attn {a[0]:.3f} s ({a[1]} threads, OpenBLAS {a[3]}), llm.c {c[0]:.3f} s ({c[1]} threads): attn {c[0] / a[0]:.2f}x llm.c")
print(f"peak RSS: attn {best['attn_rss'] / 1024:.0f} MB, llm.c {best['llm.c_rss'] / 1024:.0f} MB")
line = open(sys.argv[2]).read()
g = re.search(r'gflops=([0-9.]+)', line)
m = re.search(r'median_s=([0-9.]+)', line)
r = re.search(r'min_s=([0-9.]+)', sys.argv[3])
if g and m and r:
    gf = float(g.group(1)) * float(m.group(1))  # GFLOP a step
    rate = 2 * 1024**3 / float(r.group(1)) / 1e9  # the fastest repeat's rate
    floor = gf / rate
    print(f"floor: {gf:.1f} GFLOP a step at {rate:.1f} GFLOP/s (the fastest of 20 1024^3 products) = {floor:.3f} s; attn at {a[0] / floor:.2f}x the floor, llm.c at {c[0] / floor:.2f}x")
else:
    floor = float("nan")
# one machine-readable line (bench/compare.sh reads it)
print(f"result attn_s={a[0]:.4f} attn_threads={a[1]} attn_blas={a[3]} llmc_s={c[0]:.4f} "
      f"llmc_threads={c[1]} attn_rss_mb={best['attn_rss'] / 1024:.0f} "
      f"llmc_rss_mb={best['llm.c_rss'] / 1024:.0f} floor_s={floor:.4f} attn_over_floor={a[0] / floor:.3f}")
PY
