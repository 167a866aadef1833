#!/usr/bin/env bash
# attn train / generate with --device cuda end to end (tiny preset on Tiny
# Shakespeare, or ATTN_CORPUS): 200 steps on the GPU then 100 resumed on the
# CPU, and the reverse, from the same checkpoint files; the loss continues
# (mean batch loss of the 20 steps after the switch within 0.15 of the 20
# before, final val loss below the start); the same seed on the GPU gives the
# same loss lines twice; bf16 trains; generate --device cuda samples the GPU
# checkpoint, greedy output equal to the CPU's. Exits 77 (skipped) without a
# usable GPU.  Usage: bash train_cuda.sh <path-to-attn> <source-dir>
set -u
ATTN=$1
SRC=$2
corpus=${ATTN_CORPUS:-$SRC/data/tinyshakespeare.txt}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
ok() { echo "ok   - $1"; }
bad() { echo "FAIL - $1"; fails=$((fails + 1)); }

# The device first (on a small corpus of its own), so a skip names the GPU.
for i in $(seq 200); do echo "ROMEO: wherefore art thou? JULIET: a rose by any other name."; done \
  > "$tmp/probe.txt"
probe=$("$ATTN" train --data "$tmp/probe.txt" --preset tiny --steps 1 --eval-iters 1 --device cuda \
  --out "$tmp/probe" 2>&1 >/dev/null)
if echo "$probe" | grep -q -e "without CUDA" -e "no CUDA device"; then
  echo "SKIP: $(echo "$probe" | grep -e "without CUDA" -e "no CUDA device" | head -1)"
  exit 77
fi
if [ ! -s "$corpus" ]; then echo "SKIP: no corpus at $corpus"; exit 77; fi

train() { "$ATTN" train --data "$corpus" --preset tiny --steps 300 --eval-interval 100 \
  --eval-iters 5 --log-interval 10 "$@"; }
# mean batch loss of steps [a, b] from loss.csv
mean_loss() { awk -F, -v a="$2" -v b="$3" 'NR>1 && $1>=a && $1<=b && $2!="" {s+=$2; n++}
  END {printf "%.4f", s/n}' "$1/loss.csv"; }
final_val() { awk -F, 'NR>1 && $6!="" {v=$6} END {print v}' "$1/loss.csv"; }
first_val() { awk -F, 'NR>1 && $6!="" {print $6; exit}' "$1/loss.csv"; }

for order in "cuda cpu" "cpu cuda"; do
  set -- $order
  d="$tmp/run_$1_$2"
  train --device "$1" --interrupt-after 200 --out "$d" > "$d.log1" 2>&1
  rc=$?
  [ $rc -eq 130 ] || bad "$1 first 200 steps exited $rc: $(tail -2 "$d.log1")"
  train --device "$2" --out "$d" --resume > "$d.log2" 2>&1 ||
    bad "$2 resume failed: $(tail -2 "$d.log2")"
  before=$(mean_loss "$d" 181 200)
  after=$(mean_loss "$d" 201 220)
  v0=$(first_val "$d")
  v1=$(final_val "$d")
  if awk -v a="$before" -v b="$after" -v v0="$v0" -v v1="$v1" \
    'BEGIN {d = a - b; if (d < 0) d = -d; exit !(d <= 0.15 && v1 < v0 - 1.0)}'; then
    ok "$1 200 steps -> $2 100 steps: loss $before -> $after, val $v0 -> $v1"
  else
    bad "$1 200 steps -> $2 100 steps: loss $before -> $after, val $v0 -> $v1"
  fi
  grep -h "steps in" "$d.log1" "$d.log2" | sed 's/^/     /'
done

# Determinism: the same seed on the GPU, twice.
for k in 1 2; do
  "$ATTN" train --data "$corpus" --preset tiny --steps 60 --eval-interval 30 --eval-iters 3 \
    --log-interval 1 --device cuda --out "$tmp/det$k" 2>/dev/null | sed 's/, time .*//' > "$tmp/det$k.txt"
done
if [ -s "$tmp/det1.txt" ] && cmp -s "$tmp/det1.txt" "$tmp/det2.txt" &&
  cmp -s "$tmp/det1/model.safetensors" "$tmp/det2/model.safetensors"; then
  ok "GPU run repeated: identical loss lines and weights ($(wc -l < "$tmp/det1.txt") lines)"
else
  bad "GPU runs with the same seed differ"
fi

# bf16 GEMMs train too.
"$ATTN" train --data "$corpus" --preset tiny --steps 200 --eval-interval 100 --eval-iters 5 \
  --device cuda --precision bf16 --out "$tmp/bf16" > "$tmp/bf16.log" 2>&1 ||
  bad "bf16 run failed: $(tail -2 "$tmp/bf16.log")"
v0=$(first_val "$tmp/bf16"); v1=$(final_val "$tmp/bf16")
if awk -v v0="$v0" -v v1="$v1" 'BEGIN {exit !(v1 < v0 - 1.0)}'; then
  ok "bf16: val $v0 -> $v1"
else
  bad "bf16: val $v0 -> $v1"
fi

# Generation from the GPU-trained checkpoint on both devices: greedy equal.
g1=$("$ATTN" generate --checkpoint "$tmp/run_cuda_cpu" --max-new-tokens 100 --temperature 0 \
  --device cuda 2>"$tmp/gen.err")
g2=$("$ATTN" generate --checkpoint "$tmp/run_cuda_cpu" --max-new-tokens 100 --temperature 0 \
  2>/dev/null)
if [ -n "$g1" ] && [ "$g1" = "$g2" ]; then
  ok "generate --device cuda greedy = CPU greedy ($(cat "$tmp/gen.err"))"
else
  bad "generate --device cuda differs: '$g1' vs '$g2' ($(cat "$tmp/gen.err"))"
fi

echo "$fails failed"
[ $fails -eq 0 ]
