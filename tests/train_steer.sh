#!/usr/bin/env bash
# Steering a run (issue 9 item 5): the progress bar fits the terminal (no
# wrapping at 40, 60 or 80 columns) and shows elapsed<ETA, tokens/s and lr;
# the best-validation checkpoint is kept in DIR/best.
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

# 2. DIR/best holds the checkpoint of the lowest val loss after step 0 (with
#    lr 0.05 this corpus overfits: val rises after step 30 here, so best is
#    not the last checkpoint), and generate samples from it.
train --out "$tmp/best" --lr 0.05 > /dev/null 2> "$tmp/best.err" || bad "run failed: $(cat "$tmp/best.err")"
want=$(awk -F, 'NR > 1 && $1 > 0 && $6 != "" { if (m == "" || $6 < m) { m = $6; s = $1 } } END { print s }' "$tmp/best/loss.csv")
got=$("$ATTN" info "$tmp/best/best" 2>&1 | awk '$1 == "step" { print $2 }')
[ -n "$want" ] && [ "$got" = "$want" ] && ok "DIR/best is the step-$want checkpoint (lowest val loss)" ||
  bad "DIR/best step '$got', lowest val loss at '$want'"
"$ATTN" generate --checkpoint "$tmp/best/best" --max-new-tokens 5 --seed 1 > /dev/null 2>&1 &&
  ok "generate reads DIR/best" || bad "generate --checkpoint DIR/best failed"

[ $fails -eq 0 ] && echo "all ok" || echo "$fails failed"
exit $((fails > 0))
