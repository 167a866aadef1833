#!/usr/bin/env bash
# Issue 21's ladder at 600 s of wall time each (run it on an IDLE machine:
# ~3.5 hours): every rung is `attn train --time-budget 600` (start to final
# evaluation, evaluations included; measured here from process start to
# exit) and reports its steps and exact val loss (the whole val split).
# Rungs add one change each; then the final recipe (--preset speedrun) on
# three seeds, and the same recipe in PyTorch 1.13 (bench/speedrun_torch.py,
# fp32 and bf16 autocast, 1 and 2 threads). The mark: nanoGPT's A100
# shakespeare-char val loss 1.4697. Output: one line per rung, and
# runs/speedrun/RUNG/loss.svg.
#   bash bench/speedrun.sh [ATTN] [BUDGET]      (BUDGET default 600)
set -uo pipefail
ATTN=${1:-build/attn}
BUDGET=${2:-600}
DATA=${DATA:-data/tinyshakespeare.txt} # scripts/get-data.sh
out=${OUT:-runs/speedrun}
mkdir -p "$out"
bf16=$(grep -q avx512_bf16 /proc/cpuinfo && echo 1 || echo 0)
echo "# $(date -u +%FT%TZ) $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg), budget $BUDGET s, avx512_bf16 $bf16"
printf '%-22s %7s %8s %10s  %s\n' rung steps wall_s exact_val what
rung() { # name, what it is, then attn train's options
  local name=$1 what=$2
  shift 2
  local t0 t1
  t0=$(date +%s.%N)
  "$ATTN" train --data "$DATA" --out "$out/$name" --force --time-budget "$BUDGET" "$@" \
    > "$out/$name.log" 2>&1
  t1=$(date +%s.%N)
  local last
  last=$(tail -1 "$out/$name/loss.csv")
  printf '%-22s %7s %8.1f %10s  %s\n' "$name" "${last%%,*}" "$(echo "$t1 - $t0" | bc)" \
    "$(echo "$last" | cut -d, -f7)" "$what"
}
model() { echo "$2" > "$out/$1.json"; echo "$out/$1.json"; }
rung 0-nanogpt-cpu "nanogpt-cpu, cosine over the budget, fp32" --preset nanogpt-cpu --steps 1000000 \
  --eval-interval 1000
rung 1-wsd "+ warmup-stable-decay" --preset nanogpt-cpu --steps 1000000 --eval-interval 1000 \
  --lr-schedule wsd
rung 2-rms-relu2 "+ RMSNorm, ReLU^2" --preset nanogpt-cpu --steps 1000000 --eval-interval 1000 \
  --lr-schedule wsd --config "$(model 2 '{"norm": "rmsnorm", "act": "relu2"}')"
rung 3-swiglu "+ SwiGLU for ReLU^2" --preset nanogpt-cpu --steps 1000000 --eval-interval 1000 \
  --lr-schedule wsd --config "$(model 3 '{"norm": "rmsnorm", "act": "swiglu"}')"
# (the preset runs bf16 where the CPU has it: the fp32 rungs say fp32)
rung 4-lr "+ lr 2e-3 (context 64, batch 12)" --preset speedrun --precision fp32 --batch-size 12 \
  --config "$(model 4 '{"context_length": 64}')"
rung 5-speedrun "+ context 256 at batch 3 (= --preset speedrun, fp32)" --preset speedrun \
  --precision fp32
prec=()
if [ "$bf16" = 1 ]; then
  rung 6-bf16 "+ bf16 products" --preset speedrun --precision bf16
  rung 7-ctx64 "bf16, back to context 64, batch 12" --preset speedrun --precision bf16 \
    --batch-size 12 --config "$(model 7 '{"context_length": 64}')"
  rung 8-ctx512 "bf16, context 512, batch 2" --preset speedrun --precision bf16 \
    --batch-size 2 --config "$(model 8 '{"context_length": 512}')"
  rung 9-deep6 "bf16, 6 layers" --preset speedrun --precision bf16 \
    --config "$(model 9 '{"n_layers": 6}')"
  rung 10-drop "bf16, dropout 0.1 (torch-mkl masks)" --preset speedrun --precision bf16 \
    --dropout-stream torch-mkl --config "$(model 10 '{"drop_rate": 0.1}')"
  prec=(--precision bf16)
fi
for seed in 1 2 3; do
  rung "seed$seed" "--preset speedrun ${prec[*]} --seed $seed" --preset speedrun "${prec[@]}" \
    --seed "$seed"
done
for t in 1 2; do # the peer at its best thread count, fp32 and bf16 autocast
  for b in "" --bf16; do
    /usr/bin/python3 "$(dirname "$0")/speedrun_torch.py" --data "$DATA" --budget "$BUDGET" \
      --threads "$t" $b
  done
done
