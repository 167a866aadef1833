#!/usr/bin/env bash
# Evaluations you can see and stop (issue 47): off a terminal each
# evaluation's progress shows as lines on stderr (what it measures, batch k
# of n, elapsed and time left), stdout keeps its lines; a stop during an
# evaluation (the testing hook, and a real SIGINT) abandons it at the next
# batch or layer, saves the step's checkpoint without it, exits 130, and
# --resume runs it again: the stopped and resumed run is the unbroken one
# byte for byte (loss.csv, weights, training state, stdout). Nothing here
# depends on the machine's speed: progress lines come per batch
# (--progress-every 0), the stops are counted in batches, and the SIGINT
# lands in an evaluation of thousands of batches, sent when its first one is
# done. The summary names the steps' time apart from the evaluations'.
# Usage: bash train_eval_progress.sh <path-to-attn> <source-dir>
set -u
ATTN=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "${BASH_SOURCE[0]}")/support/lib.sh"

make_corpus "$tmp/corpus.txt" 200
cat > "$tmp/cfg.json" << 'JSON'
{"context_length": 32, "emb_dim": 32, "n_heads": 2, "n_layers": 2, "drop_rate": 0.1,
 "batch_size": 4, "max_steps": 6, "eval_interval": 3, "eval_iters": 3, "log_interval": 1}
JSON
train() { "$ATTN" train --data "$tmp/corpus.txt" --config "$tmp/cfg.json" --threads 1 "$@"; }
nolines() { sed 's/, time .*//' "$@"; } # stdout without the wall-clock part of iter lines

# 1. Progress lines off a terminal: one per batch with --progress-every 0, on
#    stderr; stdout as without them.
train --out "$tmp/ref" > "$tmp/ref.log" 2> "$tmp/ref.err" || bad "reference run: $(cat "$tmp/ref.err")"
train --out "$tmp/p" --progress-every 0 > "$tmp/p.log" 2> "$tmp/p.err" || bad "run: $(cat "$tmp/p.err")"
pre='attn train: evaluating at step'
if grep -q "^$pre 0: train loss estimate 0/3 batches, 0% of the evaluation, 0:00 elapsed, ? left$" "$tmp/p.err" &&
   grep -q "^$pre 0: val loss estimate 3/3 batches, 100% of the evaluation" "$tmp/p.err" &&
   grep -q "^$pre 3: train loss estimate 2/3 batches, 33% of the evaluation" "$tmp/p.err" &&
   grep -Eq "^$pre 6 \(the final evaluation\): exact val loss ([0-9]+)/\1 batches, 100% of the evaluation, [0-9]+:[0-9]{2} elapsed, [0-9]+:[0-9]{2} left$" "$tmp/p.err" &&
   [ "$(grep -c "^$pre 6 (the final evaluation): exact val loss" "$tmp/p.err")" -ge 10 ] &&
   ! grep -q "^$pre" "$tmp/ref.err" && ! grep -q 'evaluating' "$tmp/p.log" &&
   cmp -s <(nolines "$tmp/ref.log") <(nolines "$tmp/p.log"); then
  ok "progress lines: each evaluation's parts batch by batch (stderr), stdout unchanged ($(grep -c "^$pre" "$tmp/p.err") lines)"
else
  bad "progress lines: $(grep "^$pre" "$tmp/p.err" | tail -3)"
fi
# The summary: the steps' time and tokens/s apart from the evaluations'.
grep -Eq '^attn train: 6 steps in [0-9.]+ s \([0-9]+ tokens/s\); evaluations [0-9.]+ s, checkpoints [0-9.]+ s: [0-9.]+ s in all; final val loss [0-9.]+ \(exact: the whole val split\)' "$tmp/ref.err" &&
  ok "summary: steps, evaluations and checkpoints timed apart" || bad "summary: $(tail -1 "$tmp/ref.err")"
train --out "$tmp/one" --steps 1 > /dev/null 2> "$tmp/one.err"
grep -q '^attn train: 1 step in ' "$tmp/one.err" && ok "summary: '1 step'" || bad "1 step: $(tail -1 "$tmp/one.err")"

# On a terminal the bar shows each evaluation as it goes (what, batches,
# share, elapsed<ETA: drawn as each part begins), within the width.
if command -v script > /dev/null; then
  for cols in 40 80; do
    script -qec "stty cols $cols rows 24; '$ATTN' train --data '$tmp/corpus.txt' --config '$tmp/cfg.json' --threads 1 --out '$tmp/bar$cols' 2>/dev/null" /dev/null > "$tmp/bar$cols.txt" 2>&1
    tr '\r' '\n' < "$tmp/bar$cols.txt" | sed 's/\x1b\[K//g; s/[[:cntrl:]]//g' | grep 'eval at step' > "$tmp/seg$cols.txt"
    longest=$(awk '{ if (length($0) > m) m = length($0) } END { print m + 0 }' "$tmp/seg$cols.txt")
    [ -s "$tmp/seg$cols.txt" ] && [ "$longest" -lt "$cols" ] &&
      ok "the evaluation's bar fits $cols columns (longest $longest)" ||
      bad "evaluation bar at $cols columns: longest $longest: $(tail -1 "$tmp/seg$cols.txt")"
  done
  grep -Eq '^\[#*\.*\] eval at step 6 \(final\) \| exact val loss 0/[0-9]+ \| [0-9]+% \| [0-9]+:[0-9]{2}<[0-9]+:[0-9]{2}$' "$tmp/seg80.txt" &&
    grep -Eq '^\[\.+\] eval at step 0 \| train loss estimate 0/3 \| 0% \| 0:00<\?$' "$tmp/seg80.txt" &&
    ok "at 80 columns: bar, the evaluation, its part and batches, share, elapsed<ETA" ||
    bad "80-column evaluation bar: $(cat "$tmp/seg80.txt")"
else
  echo "skip - no script(1) for a pseudo-terminal"
fi

# 2. A stop during the evaluation at step 0, 3 (mid-run) and 6 (the final
#    one), after its first batch: saved, exit 130, resumed == unbroken.
for s in 0 3 6; do
  train --out "$tmp/s$s" --interrupt-in-eval $s > "$tmp/s$s.log" 2> "$tmp/s$s.err"
  rc=$?
  train --out "$tmp/s$s" --resume > "$tmp/s$s.2.log" 2> "$tmp/s$s.2.err" || bad "resume at $s: $(cat "$tmp/s$s.2.err")"
  same=1
  for f in loss.csv model.safetensors train_state.safetensors; do
    cmp -s "$tmp/ref/$f" "$tmp/s$s/$f" || same=0
  done
  if [ $rc -eq 130 ] && [ "$same" = 1 ] &&
     grep -q "^attn train: stopped during the evaluation at step $s (train loss estimate, batch 1 of 3; 1.0 of its [0-9]* batches done); a resume runs it again$" "$tmp/s$s.err" &&
     grep -q "^attn train: interrupted after step $s; checkpoint saved in" "$tmp/s$s.err" &&
     ! grep -q "^step $s:" "$tmp/s$s.log" && grep -q "^step $s:" "$tmp/s$s.2.log" &&
     cmp -s <(nolines "$tmp/ref.log") <(cat "$tmp/s$s.log" "$tmp/s$s.2.log" | nolines); then
    ok "stopped in the step-$s evaluation after 1 batch: saved, exit 130; resumed == unbroken (files, lines)"
  else
    bad "stop in the step-$s evaluation: rc=$rc same=$same $(tail -2 "$tmp/s$s.err")"
  fi
done

# 3. A real Ctrl-C (SIGINT) in a long evaluation: the step-0 exact pass over
#    a 3 MB corpus's val split, one 64-token window per batch (~4700
#    batches). The signal goes once batch 1 is reported; the run stops at
#    the next layer or batch, well before the last.
yes 'First Citizen: before we proceed any further, hear me speak. All: speak, speak!' |
  head -c 3000000 > "$tmp/big.txt"
cat > "$tmp/big.json" << 'JSON'
{"context_length": 64, "emb_dim": 128, "n_heads": 4, "n_layers": 4, "drop_rate": 0.0,
 "batch_size": 1, "max_steps": 2, "eval_interval": 1, "eval_iters": 1}
JSON
bigargs=(train --data "$tmp/big.txt" --config "$tmp/big.json" --threads 1 --eval exact
  --progress-every 0 --out "$tmp/big")
"$ATTN" "${bigargs[@]}" > "$tmp/big.log" 2> "$tmp/big.err" &
pid=$!
deadline=$((SECONDS + 300)) # a safety net only: a run that never gets there fails
until grep -q "^$pre 0: exact val loss [1-9]" "$tmp/big.err" 2> /dev/null || ! kill -0 $pid 2> /dev/null ||
  [ $SECONDS -ge $deadline ]; do sleep 0.02; done
t0=$EPOCHREALTIME
kill -INT $pid
wait $pid
rc=$?
t1=$EPOCHREALTIME
line=$(grep '^attn train: stopped during the evaluation at step 0' "$tmp/big.err")
k=$(sed -n 's/.*exact val loss, batch \([0-9]*\) of \([0-9]*\);.*/\1/p' <<< "$line")
n=$(sed -n 's/.*exact val loss, batch \([0-9]*\) of \([0-9]*\);.*/\2/p' <<< "$line")
ms=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%d", (b - a) * 1000 }')
if [ $rc -eq 130 ] && [ -n "$k" ] && [ -n "$n" ] && [ "$n" -ge 4000 ] && [ "$k" -lt "$n" ] &&
   [ "$(readlink "$tmp/big/latest")" = ckpt-0 ]; then
  ok "SIGINT in the exact evaluation: stopped at batch $k of $n, saved, exit 130 (${ms} ms after the signal here)"
else
  bad "SIGINT in an evaluation: rc=$rc, '$line', latest $(readlink "$tmp/big/latest")"
fi
# Resumable: the resume runs that evaluation again (stopped by the hook
# after its first batch, not to spend the whole pass).
"$ATTN" "${bigargs[@]}" --resume --interrupt-in-eval 0 > /dev/null 2> "$tmp/big2.err"
rc=$?
[ $rc -eq 130 ] && grep -q "^attn train: resuming $tmp/big at step 0" "$tmp/big2.err" &&
  grep -q "^attn train: stopped during the evaluation at step 0 (exact val loss, batch 0 of $n;" "$tmp/big2.err" &&
  ok "the SIGINT's checkpoint resumes, into the same evaluation" ||
  bad "resume after SIGINT: rc=$rc $(tail -2 "$tmp/big2.err")"

[ $fails -eq 0 ] && echo "all ok" || echo "$fails failed"
exit $((fails > 0))
