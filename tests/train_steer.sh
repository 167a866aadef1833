#!/usr/bin/env bash
# Steering a run (issue 9 item 5): the progress bar fits the terminal (no
# wrapping at 40, 60 or 80 columns) and shows elapsed<ETA, tokens/s and lr.
# Usage: bash train_steer.sh <path-to-attn> <source-dir>
set -u
ATTN=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
ok() { echo "ok   - $1"; }
bad() { echo "FAIL - $1"; fails=$((fails + 1)); }

for i in $(seq 1 120); do
  echo "First Citizen: before we proceed any further, hear me speak $((i % 7))."
  echo "All: speak, speak! you are all resolved rather to die than to famish?"
done > "$tmp/corpus.txt"
cat > "$tmp/cfg.json" <<'JSON'
{"context_length": 16, "emb_dim": 16, "n_heads": 2, "n_layers": 1, "drop_rate": 0.0,
 "batch_size": 2, "max_steps": 40, "eval_interval": 10, "eval_iters": 1,
 "warmup_steps": 5, "log_interval": 10}
JSON
train() { "$ATTN" train --data "$tmp/corpus.txt" --config "$tmp/cfg.json" --threads 1 "$@"; }

# 1. Progress bar on a pseudo-terminal of each width: every redrawn segment
#    (between \r) stays below the last column, so nothing wraps.
if command -v script > /dev/null; then
  for cols in 40 60 80; do
    script -qec "stty cols $cols rows 24; '$ATTN' train --data '$tmp/corpus.txt' --config '$tmp/cfg.json' --threads 1 --out '$tmp/bar$cols' 2>/dev/null" /dev/null > "$tmp/bar$cols.txt" 2>&1
    tr '\r' '\n' < "$tmp/bar$cols.txt" | sed 's/\x1b\[K//g; s/[[:cntrl:]]//g' | grep -E 'step [0-9]+/|[0-9]+/40 ' > "$tmp/seg$cols.txt"
    longest=$(awk '{ if (length($0) > m) m = length($0) } END { print m + 0 }' "$tmp/seg$cols.txt")
    [ -s "$tmp/seg$cols.txt" ] && [ "$longest" -lt "$cols" ] &&
      ok "progress fits $cols columns (longest $longest)" ||
      bad "progress at $cols columns: longest $longest: $(tail -1 "$tmp/seg$cols.txt")"
  done
  grep -Eq '^\[[#.]+\] step 40/40 \| loss [0-9.]+ \| lr [0-9.]+e-[0-9]+ \| [0-9]+ tok/s \| [0-9]+:[0-9]+<[0-9]+:[0-9]+$' "$tmp/seg80.txt" &&
    ok "at 80 columns: bar, step, loss, lr, tokens/s, elapsed<ETA" ||
    bad "80-column line: $(tail -1 "$tmp/seg80.txt")"
else
  echo "skip - no script(1) for a pseudo-terminal"
fi

[ $fails -eq 0 ] && echo "all ok" || echo "$fails failed"
exit $((fails > 0))
