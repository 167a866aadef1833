#!/usr/bin/env bash
# GPT-2 124M, one training step at llm.c's shape (batch 4 x 64 tokens), bf16
# against fp32 (issue 34's "bf16 >= 1.8x attn fp32" row), optionally against
# an older attn binary too: every (binary, precision) pair runs in each
# round, alternating, the order reversed every other round; the ratios come
# from the same round.
#   bench/gpt2_step.sh [ROUNDS] [OLD_ATTN]
# ROUNDS: default 3. OLD_ATTN: another build's attn, e.g. from a worktree of
# an earlier commit (`git worktree add /tmp/old REV && make -C /tmp/old`).
# MODEL=llmc (default): llm.c's GPT-2 (Q/K/V bias, head tied to the
# embedding, no dropout); MODEL=preset: gpt2-124m as the preset has it.
# BLAS=unset (default), set or a core type: the OpenBLAS setting (blas_setting.sh).
# Each round alternates the order (precisions, and binaries); the last lines
# give each one's median over the rounds. Each run: `attn bench train --preset gpt2-124m --batch-size 4 --context 64
# --precision P --steps 10`, the median step.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
rounds=${1:-3}
old=${2:-}
attn=${ATTN:-$root/build/attn}
. "$root/bench/blas_setting.sh"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(cd "$root" && scripts/get-data.sh tinyshakespeare gpt2 > /dev/null)
args=(--preset gpt2-124m --batch-size 4 --context 64 --steps 10 --data "$root/data/tinyshakespeare.txt")
case ${MODEL:-llmc} in
  llmc)
    echo '{"qkv_bias": true, "tie_weights": true, "drop_rate": 0.0}' > "$work/llmc.json"
    args+=(--config "$work/llmc.json") ;;
  preset) ;;
  *) echo "MODEL is llmc or preset" >&2; exit 2 ;;
esac
bins=(new)
[ -n "$old" ] && bins+=(old)
echo "# $(date -u +%FT%TZ) $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# model ${MODEL:-llmc}, OpenBLAS ${BLAS:-unset}; new = $attn${old:+, old = $old}"
step() { # binary precision -> median seconds
  with_blas "${BLAS:-unset}" "$1" bench train "${args[@]}" --precision "$2" |
    tr ' ' '\n' | sed -n 's/^median_s=//p'
}
for r in $(seq 1 "$rounds"); do
  order=(bf16 fp32)
  [ $((r % 2)) = 0 ] && order=(fp32 bf16)
  declare -A t=()
  wo=("${bins[@]}")
  [ $((r % 2)) = 0 ] && [ -n "$old" ] && wo=(old new)
  for p in "${order[@]}"; do
    for w in "${wo[@]}"; do
      b=$attn
      [ "$w" = old ] && b=$old
      t[$w-$p]=$(step "$b" "$p")
      echo "round $r $w $p: median ${t[$w-$p]} s"
      echo "$w $p ${t[$w-$p]}" >> "$work/all"
    done
  done
  for w in "${bins[@]}"; do
    awk -v a="${t[$w-bf16]}" -v b="${t[$w-fp32]}" -v w="$w" -v r="$r" \
      'BEGIN { printf "round %d %s: bf16 %.3f s, fp32 %.3f s: bf16 %.2fx fp32 (target 1.8x)\n", r, w, a, b, b / a }'
  done
  if [ -n "$old" ]; then
    for p in bf16 fp32; do
      awk -v o="${t[old-$p]}" -v n="${t[new-$p]}" -v p="$p" -v r="$r" \
        'BEGIN { printf "round %d %s: new %.3f s, old %.3f s: %.1f%% faster\n", r, p, n, o, 100 * (o - n) / o }'
    done
  fi
  unset t
done
# Over all rounds: each (binary, precision)'s median of the rounds' medians.
med() { awk -v w="$1" -v p="$2" '$1 == w && $2 == p { print $3 }' "$work/all" | sort -g |
  awk '{ v[NR] = $1 } END { print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) }'; }
for w in "${bins[@]}"; do
  awk -v a="$(med "$w" bf16)" -v b="$(med "$w" fp32)" -v w="$w" -v n="$rounds" \
    'BEGIN { printf "all %d rounds %s: bf16 %.4f s, fp32 %.4f s (medians): bf16 %.2fx fp32 (target 1.8x)\n", n, w, a, b, b / a }'
done
if [ -n "$old" ]; then
  for p in bf16 fp32; do
    awk -v o="$(med old "$p")" -v n="$(med new "$p")" -v p="$p" \
      'BEGIN { printf "all rounds %s: new %.4f s, old %.4f s: %.1f%% faster\n", p, n, o, 100 * (o - n) / o }'
  done
fi
