#!/usr/bin/env bash
# --time-budget SECONDS: whatever the machine's speed, a run ends with its
# final (exact) evaluation and a checkpoint that loads; the LR follows the
# clock (warm-up by steps, then down, never up); the clock is checkpointed,
# so a stopped run resumes counting from where it stopped; --dry-run shows
# the plan. Nothing here depends on how many steps fit in the budget.
# Usage: bash train_budget.sh <path-to-attn> <source-dir>
set -uo pipefail
ATTN=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
ok() { echo "ok   - $1"; }
bad() { echo "FAIL - $1"; fails=$((fails + 1)); }
for i in $(seq 1 300); do echo "ROMEO: wherefore art thou? JULIET: a rose by any other name."; done > "$tmp/c.txt"
echo '{"context_length": 16, "emb_dim": 24, "n_heads": 3, "n_layers": 2, "batch_size": 4,
  "max_steps": 100000000, "eval_interval": 20, "eval_iters": 2, "warmup_steps": 3}' > "$tmp/c.json"
train() { "$ATTN" train --data "$tmp/c.txt" --config "$tmp/c.json" --threads 1 "$@"; }
elapsed() { # the clock in DIR's training state (safetensors metadata)
  /usr/bin/python3 -c 'import json, struct, sys
f = open(sys.argv[1], "rb"); n = struct.unpack("<Q", f.read(8))[0]
print(json.loads(f.read(n))["__metadata__"].get("elapsed_s", ""))' "$1/train_state.safetensors"; }

# 1. A 2-second budget ends the run: exit 0, "the time budget spent", the
#    last row of loss.csv the final evaluation with its exact val loss, a
#    checkpoint at that step that generate reads, the clock recorded.
train --out "$tmp/b" --time-budget 2 > "$tmp/b.log" 2> "$tmp/b.err"
rc=$?
last=$(tail -1 "$tmp/b/loss.csv")
step=$(echo "$last" | cut -d, -f1)
[ $rc -eq 0 ] && grep -q "the time budget spent; final val loss [0-9.]* (exact: the whole val split)" "$tmp/b.err" &&
  [ -n "$(echo "$last" | cut -d, -f7)" ] && [ "$("$ATTN" info "$tmp/b" | awk '$1 == "step" { print $2 }')" = "$step" ] &&
  ok "--time-budget 2: ended at step $step with an exact evaluation and its checkpoint" ||
  bad "rc=$rc last='$last' $(tail -2 "$tmp/b.err")"
"$ATTN" generate "$tmp/b" --max-new-tokens 5 --seed 1 > /dev/null 2>&1 && ok "generate reads it" ||
  bad "generate failed"
e=$(elapsed "$tmp/b")
awk -v e="$e" 'BEGIN { exit !(e > 0) }' && ok "the training state records the clock ($e s)" ||
  bad "elapsed_s '$e'"

# 2. The LR: warm-up (3 steps), then never up, and never below min_lr.
awk -F, 'NR > 1 && $3 != "" { if ($1 > 4 && $3 > prev * (1 + 1e-6)) up++; if ($3 < 0.0002 * (1 - 1e-6)) low++; prev = $3 }
  END { exit up + low > 0 }' "$tmp/b/loss.csv" &&
  ok "the LR warms up, then only goes down, to min_lr at the lowest" || bad "LR: $(cut -d, -f1,3 "$tmp/b/loss.csv" | head -20 | tr '\n' ' ')"

# 3. Stopped after step 5 and resumed: the clock counts on from the
#    checkpoint, and the resumed run ends with its final evaluation.
train --out "$tmp/r" --time-budget 2 --interrupt-after 5 > /dev/null 2>&1
e1=$(elapsed "$tmp/r")
train --out "$tmp/r" --time-budget 2 --resume > /dev/null 2> "$tmp/r.err"
rc=$?
e2=$(elapsed "$tmp/r")
[ $rc -eq 0 ] && awk -v a="$e1" -v b="$e2" 'BEGIN { exit !(a > 0 && b > a) }' &&
  grep -q "the time budget spent" "$tmp/r.err" && [ -n "$(tail -1 "$tmp/r/loss.csv" | cut -d, -f7)" ] &&
  ok "resumed: the clock went on ($e1 s at the stop, $e2 s at the end), final exact evaluation" ||
  bad "resume: rc=$rc clock '$e1' -> '$e2' $(tail -1 "$tmp/r.err")"

# 4. A budget already spent: the resumed run evaluates and saves, no step.
n=$(grep -c . "$tmp/r/loss.csv")
s=$(tail -1 "$tmp/r/loss.csv" | cut -d, -f1)
train --out "$tmp/r" --time-budget 2 --resume > /dev/null 2>&1 &&
  [ "$(tail -1 "$tmp/r/loss.csv" | cut -d, -f1)" = "$s" ] && [ "$(grep -c . "$tmp/r/loss.csv")" = "$n" ] && ok "a spent budget takes no further step" ||
  bad "spent budget: $(tail -2 "$tmp/r/loss.csv")"

# 5. --dry-run states the budget.
train --out "$tmp/d" --time-budget 600 --dry-run | grep -q "^time .*--time-budget 600 s, evaluations included" &&
  ok "--dry-run shows the budget" || bad "dry-run: $(train --out "$tmp/d" --time-budget 600 --dry-run | tail -2)"
# 6. The set-up is on the clock: the fault shim holds the run (SIGSTOP) at
#    its first operation in the run folder, before any step, for 3 s; a 2-s
#    budget is then spent, so the run evaluates and saves at step 0.
SHIM=$(dirname "$ATTN")/libattn_fault.so
if [ -f "$SHIM" ]; then
  ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0" ATTN_FAULT_DIR="$tmp/s" \
    ATTN_FAULT_AT=1 ATTN_FAULT_MODE=stop LD_PRELOAD=$SHIM "$ATTN" train --data "$tmp/c.txt" \
    --config "$tmp/c.json" --threads 1 --out "$tmp/s" --time-budget 2 > /dev/null 2> "$tmp/s.err" &
  pid=$!
  for _ in $(seq 1 3000); do # up to 300 s for the process to reach the hold
    [ "$(cut -d' ' -f3 "/proc/$pid/stat" 2> /dev/null)" = T ] && break
    sleep 0.1
  done
  sleep 3
  kill -CONT $pid
  wait $pid
  rc=$?
  e=$(elapsed "$tmp/s")
  [ $rc -eq 0 ] && grep -q "the time budget spent" "$tmp/s.err" &&
    [ "$(tail -1 "$tmp/s/loss.csv" | cut -d, -f1)" = 0 ] && awk -v e="$e" 'BEGIN { exit !(e >= 3) }' &&
    ok "set-up held 3 s of a 2-s budget: no step, final evaluation at step 0 (clock $e s)" ||
    bad "set-up not on the clock: rc=$rc clock '$e' last '$(tail -1 "$tmp/s/loss.csv")' $(tail -1 "$tmp/s.err")"
else
  bad "fault shim $SHIM not built"
fi
[ "$fails" -eq 0 ] || exit 1
