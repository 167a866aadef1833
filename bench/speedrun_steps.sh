#!/usr/bin/env bash
# The speedrun recipe's ladder at a fixed number of steps (no wall time):
# each rung adds one change to the nanogpt-cpu model and recipe and trains
# STEPS steps (default 500; warm-up a tenth); the final evaluation is exact
# (the whole val split), so rungs compare without sampling noise. The
# changes here do not change a step's cost much (schedule, norm,
# activation, rate, tying), so a step-matched gain is a gain at 600 s too;
# what trades steps for time (context, batch, width, bf16) is
# bench/speedrun.sh's, at 600 s on an idle machine.
#   bash bench/speedrun_steps.sh [ATTN] [STEPS]   (two rungs at a time, 1 thread each)
set -uo pipefail
ATTN=${1:-build/attn}
STEPS=${2:-500}
DATA=${DATA:-data/tinyshakespeare.txt} # scripts/get-data.sh
out=${OUT:-runs/speedrun-steps}
mkdir -p "$out"
W=$((STEPS / 10))
base="--preset nanogpt-cpu --steps $STEPS --warmup-steps $W --eval-interval $STEPS --eval-iters 1 --threads 1"
rung() { # name, then what it adds (training options; model keys as a JSON file)
  local name=$1 model=$2
  shift 2
  echo "$model" > "$out/$name.json"
  "$ATTN" train --data "$DATA" $base --config "$out/$name.json" --out "$out/$name" --force "$@" \
    > "$out/$name.log" 2>&1
  echo "$name $(tail -1 "$out/$name/loss.csv" | cut -d, -f7) $*  $model"
}
{
  rung A-baseline '{}' &
  rung B-wsd '{}' --lr-schedule wsd &
  wait
  rung C-rmsnorm '{"norm": "rmsnorm"}' --lr-schedule wsd &
  rung D-relu2 '{"norm": "rmsnorm", "act": "relu2"}' --lr-schedule wsd &
  wait
  rung E-lr2e-3 '{"norm": "rmsnorm", "act": "relu2"}' --lr-schedule wsd --lr 2e-3 --min-lr 1e-4 &
  rung F-tied '{"norm": "rmsnorm", "act": "relu2", "tie_weights": true}' --lr-schedule wsd --lr 2e-3 --min-lr 1e-4 &
  wait
  rung G-lr3e-3 '{"norm": "rmsnorm", "act": "relu2"}' --lr-schedule wsd --lr 3e-3 --min-lr 1e-4 &
  rung H-swiglu '{"norm": "rmsnorm", "act": "swiglu"}' --lr-schedule wsd --lr 2e-3 --min-lr 1e-4 &
  wait
  rung I-swiglu-lr3e-3 '{"norm": "rmsnorm", "act": "swiglu"}' --lr-schedule wsd --lr 3e-3 --min-lr 1e-4
} | tee "$out/ladder.txt"
