#!/usr/bin/env bash
# One 600-s run of issue 21's ablations (idle machine): attn train with
# --time-budget BUDGET and the given options, plus a model-config JSON (or -
# for none), and one line of steps, wall time and exact val loss.
#   bash bench/speedrun_one.sh NAME CONFIG_JSON|- [attn train options...]
# e.g. bench/speedrun_one.sh bf16-deep6 '{"n_layers": 6}' --preset speedrun --precision bf16
# Env: ATTN (build/attn), DATA (data/tinyshakespeare.txt), OUT (runs/speedrun),
# BUDGET (600).
set -uo pipefail
name=${1:?name}
cfg=${2:?config JSON or -}
shift 2
ATTN=${ATTN:-build/attn}
DATA=${DATA:-data/tinyshakespeare.txt}
out=${OUT:-runs/speedrun}
mkdir -p "$out"
extra=()
if [ "$cfg" != - ]; then
  echo "$cfg" > "$out/$name.json"
  extra=(--config "$out/$name.json")
fi
echo "# $(date -u +%FT%TZ) $name load $(cut -d' ' -f1-3 /proc/loadavg)"
t0=$(date +%s.%N)
"$ATTN" train --data "$DATA" --out "$out/$name" --force --time-budget "${BUDGET:-600}" "$@" \
  "${extra[@]}" > "$out/$name.log" 2>&1
rc=$?
t1=$(date +%s.%N)
last=$(tail -1 "$out/$name/loss.csv")
printf '%-18s rc=%s steps=%s wall_s=%.1f exact_val=%s load=%s %s cfg=%s\n' "$name" "$rc" \
  "${last%%,*}" "$(echo "$t1 - $t0" | bc)" "$(echo "$last" | cut -d, -f7)" \
  "$(cut -d' ' -f1 /proc/loadavg)" "$*" "$cfg"
