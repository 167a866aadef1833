#!/usr/bin/env bash
# Issue 21 item 2's measure: the rate of the matrix products a nanogpt-cpu /
# speedrun step makes (M = B*T = 768 tokens; N, K the layer widths: QKV and
# out_proj 128 -> 3*128 / 128, the feed-forward 128 -> 512 -> 128, the head
# 128 -> 65) against a large product (1024^3), same precision, same run,
# at 1 and 2 threads (attn bench sgemm: best of --repeat). The target: the
# small products at >= 75% of the large-product rate.
#   bash bench/small_gemm.sh [ATTN] [fp32|bf16] [REPEAT]
set -uo pipefail
ATTN=${1:-build/attn}
PREC=${2:-fp32}
REPEAT=${3:-20}
echo "# $(date -u +%FT%TZ) $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg), precision $PREC"
rate() { # M N K threads -> GFLOP/s from the best time
  "$ATTN" bench sgemm --m "$1" --n "$2" --k "$3" --threads "$4" --repeat "$REPEAT" --precision "$PREC" |
    awk -v m="$1" -v n="$2" -v k="$3" '{ for (i = 1; i <= NF; i++) if ($i ~ /^min_s=/) { split($i, a, "="); printf "%.2f", 2 * m * n * k / a[2] / 1e9 } }'
}
for th in 1 2; do
  big=$(rate 1024 1024 1024 "$th")
  printf 'threads=%d large 1024x1024x1024 %s GFLOP/s\n' "$th" "$big"
  for mnk in "768 384 128" "768 128 128" "768 512 128" "768 128 512" "768 65 128"; do
    set -- $mnk
    r=$(rate "$1" "$2" "$3" "$th")
    printf 'threads=%d small %sx%sx%s %s GFLOP/s = %.0f%% of large\n' "$th" "$1" "$2" "$3" "$r" \
      "$(echo "100 * $r / $big" | bc -l)"
  done
done
