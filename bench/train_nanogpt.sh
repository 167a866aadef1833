#!/usr/bin/env bash
# Training benchmark: `attn train --preset nanogpt-cpu` (nanoGPT's
# shakespeare-char CPU recipe: ctx 64, emb 128, 4 heads, 4 layers, batch 12,
# 2000 steps) on Tiny Shakespeare. Reports wall time, training tokens/s and
# the final validation loss. Reference on a 2-core machine: nanoGPT
# (PyTorch 1.13.1) takes 148 s and reaches val loss 1.886; the target for
# attn is val loss <= 1.89 (and <= 40 s).
# The same-run peer: bench/train_torch.py times the book's GPTModel with the
# same recipe in PyTorch 1.13.1 (1 and 2 threads, the faster kept) for
# TORCH_STEPS steps (default 200; 0 skips it) and the ratio is printed.
# attn runs nanoGPT's work: its evaluations (eval_iters batches a split),
# not attn's exact final val pass (--final-eval sampled; the default `auto`
# adds it, ~1.4 s here, and the peer never runs one). Extra arguments come
# after it: `--final-eval auto` brings it back.
# Usage: bench/train_nanogpt.sh [build-dir] [extra attn train args...]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
shift || true
scripts/get-data.sh
echo "# $(date -u +%FT%TZ) $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
out=$(mktemp -d "${TMPDIR:-/tmp}/attn-bench.XXXXXX")
trap 'rm -rf "$out"' EXIT
start=$(date +%s.%N)
"${ATTN:-./$build/attn}" train --preset nanogpt-cpu --data data/tinyshakespeare.txt --out "$out/run" \
  --final-eval sampled "$@" \
  > "$out/log.txt" 2> "$out/err.txt"
end=$(date +%s.%N)
grep '^step ' "$out/log.txt"
wall=$(awk -v a="$start" -v b="$end" 'BEGIN { print b - a }')
summary=$(tail -1 "$out/err.txt")
tps=$(sed -n 's/.*(\([0-9]*\) tokens\/s).*/\1/p' <<< "$summary")
last=$(grep '^step ' "$out/log.txt" | tail -1) # the last evaluation (--steps N: not 2000)
val=${last##*val loss }
printf 'nanogpt-cpu: wall %.1f s, %s tokens/s (training steps), final val loss %s (target <= 1.89; nanoGPT: 148 s, 1.886)\n' \
  "$wall" "$tps" "$val"
torch_steps=${TORCH_STEPS:-200}
if [[ $torch_steps -gt 0 ]]; then
  run_steps=$(sed -n 's/^attn train: \([0-9]*\) step.*/\1/p' <<< "$summary")
  /usr/bin/python3 bench/train_torch.py --data data/tinyshakespeare.txt --steps "$torch_steps" \
    --run-steps "${run_steps:-2000}" | tee "$out/torch.txt"
  best=$(sed -n 's/.*tokens_per_s=\([0-9]*\).*/\1/p' "$out/torch.txt" | sort -n | tail -1)
  awk -v a="$tps" -v t="$best" 'BEGIN { printf "training tokens/s: attn %d, PyTorch book GPTModel %d (best thread setting): %.2fx\n", a, t, a / t }'
  # the best setting's line: its ms a step and thread count
  tline=$(grep "tokens_per_s=$best " "$out/torch.txt" | head -1)
  torch_ms=$(sed -n 's/.*ms_per_step=\([0-9.]*\).*/\1/p' <<< "$tline")
  torch_th=$(sed -n 's/.*threads=\([0-9]*\).*/\1/p' <<< "$tline")
  # the peer's whole run (steps and evaluations), its faster setting
  torch_whole=$(sed -n 's/.*whole_s=\([0-9.]*\).*/\1/p' "$out/torch.txt" | sort -g | head -1)
  awk -v a="$wall" -v t="$torch_whole" 'BEGIN { printf "whole run: attn %.1f s (set-up included), PyTorch %.1f s (steps and evaluations): %.2fx\n", a, t, t / a }'
fi
# one machine-readable line (bench/compare.sh reads it); steps: attn's training steps
steps=$(sed -n 's/^attn train: \([0-9]*\) step.*/\1/p' <<< "$summary")
echo "result wall_s=$wall steps=${steps:-?} tokens_per_s=$tps val_loss=${val:--}" \
  "torch_ms_per_step=${torch_ms:--} torch_threads=${torch_th:--} torch_tokens_per_s=${best:--}" \
  "torch_whole_s=${torch_whole:--}"
[[ $last != "step 2000:"* ]] || awk -v v="$val" 'BEGIN { exit !(v <= 1.89) }' || { echo "val loss above 1.89" >&2; exit 1; }
