#!/usr/bin/env bash
# bf16 against fp32 loss curves: STEPS (default 500) training steps of the
# tiny and nanogpt-cpu presets with --precision fp32 and bf16 (same seed,
# same batches); prints the largest relative gap between the two curves
# (batch losses smoothed over 10 steps, and each eval's val loss) and fails
# if it is above 1%. Minutes; not part of `make test` (test_bf16 runs 40).
#   bench/bf16_loss.sh [build-dir]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
steps=${STEPS:-500}
scripts/get-data.sh
out=$(mktemp -d "${TMPDIR:-/tmp}/attn-bf16.XXXXXX")
trap 'rm -rf "$out"' EXIT
rc=0
for preset in tiny nanogpt-cpu; do
  for p in fp32 bf16; do
    "./$build/attn" train --preset "$preset" --steps "$steps" --eval-interval 100 \
      --data data/tinyshakespeare.txt --out "$out/$preset-$p" --precision "$p" \
      > "$out/$preset-$p.log" 2> "$out/$preset-$p.err"
  done
  /usr/bin/python3 - "$out/$preset-fp32/loss.csv" "$out/$preset-bf16/loss.csv" "$preset" <<'PY' || rc=1
import csv, sys
def read(p):
    rows = list(csv.DictReader(open(p)))
    loss = [float(r["loss"]) for r in rows if r["loss"]]
    val = {int(r["step"]): float(r["val_loss"]) for r in rows if r["val_loss"]}
    return loss, val
(l32, v32), (l16, v16) = read(sys.argv[1]), read(sys.argv[2])
sm = lambda l, i: sum(l[i:i + 10]) / len(l[i:i + 10])
gap = max(abs(sm(l16, i) - sm(l32, i)) / sm(l32, i) for i in range(0, len(l32), 10))
vgap = max(abs(v16[s] - v32[s]) / v32[s] for s in v32)
last = max(v32)
print(f"{sys.argv[3]}: {len(l32)} steps; largest gap of the smoothed batch loss {100 * gap:.2f}%, "
      f"of val loss {100 * vgap:.2f}%; final val loss fp32 {v32[last]:.4f}, bf16 {v16[last]:.4f}")
sys.exit(0 if max(gap, vgap) <= 0.01 else 1)
PY
done
exit $rc
