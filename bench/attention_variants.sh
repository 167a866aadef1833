#!/usr/bin/env bash
# The attention variants' targets (issue 20), every figure a ratio of two
# cases timed in the same run, alternating (best of REPEAT rounds of each):
#   1. grouped-query, n_kv_heads = n_heads / 4, at B 8 T 1024 D 768 H 12:
#      MultiHeadAttention forward+backward against MHA's (target <= 1.05x);
#      the KV cache per token and layer, 2 kv_dim floats, 4x smaller.
#   2. sliding window W 256 at B 1 T 4096 H 12 head_dim 64: the fused kernel
#      alone (case=core), forward+backward, against full causal (>= 3x faster).
#   3. RoPE: the fused MHA forward+backward with and without it at the sizes
#      of 1, and its share of one run: the rotations alone (case=rope) over
#      the module with them (<= 5% of the time).
#   bench/attention_variants.sh [BUILD] [THREADS] [REPEAT]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
attn=$(cd "${1:-$root/build}" && pwd)/attn
threads=${2:-$(nproc)}
repeat=${3:-3}
echo "# $(date -u +%FT%TZ) $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) cores, threads $threads, load $(cut -d' ' -f1-3 /proc/loadavg)"

# min_s of one case line; $1: the case name, the rest: attn bench mha options
time_case() {
  local name=$1
  shift
  "$attn" bench mha --threads "$threads" --repeat 1 --warmup 1 "$@" | awk -v c="case=$name" '$1 == c { for (i = 2; i <= NF; i++) if (sub("^min_s=", "", $i)) print $i }'
}

# best of $repeat alternating rounds of two option sets (separated by --);
# prints "a b ratio" with ratio = b / a
compare() {
  local name=$1 a=() b=() best_a=1e9 best_b=1e9
  shift
  while [ "$1" != "--" ]; do a+=("$1"); shift; done
  shift
  b=("$@")
  for _ in $(seq 1 "$repeat"); do
    local ta tb
    ta=$(time_case "$name" "${a[@]}")
    tb=$(time_case "$name" "${b[@]}")
    best_a=$(awk -v x="$best_a" -v y="$ta" 'BEGIN { print (y < x ? y : x) }')
    best_b=$(awk -v x="$best_b" -v y="$tb" 'BEGIN { print (y < x ? y : x) }')
  done
  awk -v a="$best_a" -v b="$best_b" 'BEGIN { printf "%.4f %.4f %.3f\n", a, b, b / a }'
}

big=(--batch 8 --tokens 1024 --d-model 768 --heads 12 --backward --mha-only)
read -r mha gqa r <<< "$(compare mha "${big[@]}" -- "${big[@]}" --kv-heads 3)"
echo "gqa: MHA ${mha}s, n_kv_heads 3 ${gqa}s: ${r}x MHA's time (target <= 1.05); KV cache per token and layer: 2*768 vs 2*192 floats, 4.00x smaller"
long=(--batch 1 --tokens 4096 --d-model 768 --heads 12 --backward)
read -r full win r <<< "$(compare core "${long[@]}" -- "${long[@]}" --window 256)"
echo "window: fused kernel fwd+bwd, full causal ${full}s, window 256 ${win}s: $(awk -v r="$r" 'BEGIN { printf "%.2f", 1 / r }')x faster (target >= 3)"
read -r none rope r <<< "$(compare mha "${big[@]}" -- "${big[@]}" --positions rope)"
echo "rope: fused MHA fwd+bwd ${none}s, with RoPE ${rope}s: $(awk -v r="$r" 'BEGIN { printf "%+.1f", (r - 1) * 100 }')% (two runs: noise of a few % either way)"
# The share from one run: the rotations alone (case=rope) over the module with them (case=mha).
"$attn" bench mha --threads "$threads" --repeat "$((repeat * 2))" --warmup 1 "${big[@]}" --positions rope |
  awk '{ for (i = 2; i <= NF; i++) if (sub("^min_s=", "", $i)) t[$1] = $i }
       END { printf "rope: its rotations alone %.4fs of the fused MHA fwd+bwd %.4fs: %.2f%% (target <= 5%%)\n", t["case=rope"], t["case=mha"], 100 * t["case=rope"] / t["case=mha"] }'
