#!/usr/bin/env bash
# Steering a run (issue 9 item 5): the progress bar fits the terminal (no
# wrapping at 40, 60 or 80 columns) and shows elapsed<ETA, tokens/s and lr;
# the best-validation checkpoint is kept in DIR/best; --resume --steps N
# extends a run, the LR keeping its old horizon; --dry-run prints the plan;
# seed004-sized runs warn of their cost; --init-from DIR fine-tunes.
# Usage: bash train_steer.sh <path-to-attn> <source-dir>
set -u
ATTN=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "${BASH_SOURCE[0]}")/support/lib.sh"

make_corpus "$tmp/corpus.txt"
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

# 2b. best/ holds the model alone (no AdamW state: it is for generating,
#    exporting and fine-tuning). When the best evaluation is the run's last
#    checkpoint, best/ shares its model file (a hard link: a 124M model's
#    weights are written once), which stays whole when the run's own
#    checkpoint folder goes. At lr 0.01 the exact val loss falls to the end
#    of this 40-step run.
train --out "$tmp/hl" --lr 0.01 --eval exact > /dev/null 2> "$tmp/hl.err" || bad "run failed: $(cat "$tmp/hl.err")"
bstep=$("$ATTN" info "$tmp/hl/best" 2>&1 | awk '$1 == "step" { print $2 }')
ino() { stat -c %i "$1"; }
if [ "$bstep" = 40 ] && [ "$(ino "$tmp/hl/best/ckpt-40/model.safetensors")" = "$(ino "$tmp/hl/ckpt-40/model.safetensors")" ] &&
  [ "$(ls -A "$tmp/hl/best/ckpt-40")" = model.safetensors ] && [ ! -e "$tmp/hl/best/train_state.safetensors" ] &&
  "$ATTN" info "$tmp/hl/best" 2>&1 | grep -q "^training state none"; then
  ok "best/ at the last step links the run's model file (one write), and holds no training state"
else
  bad "best/ step '$bstep' (want 40), or its files are copies: $(ls -li "$tmp/hl/best" "$tmp/hl/best/ckpt-40" "$tmp/hl/ckpt-40" 2>&1 | tr '\n' ' ')"
fi
cp "$tmp/hl/ckpt-40/model.safetensors" "$tmp/hl-model.st"
rm -r "$tmp/hl/ckpt-40"
cmp -s "$tmp/hl-model.st" "$tmp/hl/best/ckpt-40/model.safetensors" &&
  "$ATTN" generate --checkpoint "$tmp/hl/best" --max-new-tokens 3 --seed 1 > /dev/null 2>&1 &&
  ok "the run's ckpt-40 removed, best/ keeps its bytes and generates" ||
  bad "best/ after the run's ckpt-40 went: $(ls "$tmp/hl" "$tmp/hl/best/ckpt-40" 2>&1 | tr '\n' ' ')"

# 3. --resume --steps N: a finished 40-step run goes on to 60; the LR keeps
#    its 40-step horizon (steps past it at min_lr, 2e-4 from the tiny preset).
#    A run stopped at step 17 and resumed with --steps 60 is the same run,
#    bit for bit (loss.csv identical but for the exact val loss the finished
#    run's final evaluation at step 40 took: a measurement, no state).
train --out "$tmp/ext" > /dev/null 2>&1 || bad "40-step run failed"
train --out "$tmp/ext" --resume --steps 60 > "$tmp/ext.log" 2> "$tmp/ext.err"; rc=$?
last=$(tail -1 "$tmp/ext/loss.csv" | cut -d, -f1)
lrs=$(awk -F, 'NR > 1 && $1 > 40 && $3 != "" { print $3 }' "$tmp/ext/loss.csv" | sort -u)
[ $rc -eq 0 ] && [ "$last" = 60 ] && grep -q "^step 60: train loss" "$tmp/ext.log" &&
  ok "--resume --steps 60 extends a finished 40-step run" ||
  bad "extend: rc=$rc last=$last $(cat "$tmp/ext.err")"
[ "$lrs" = "0.000199999995" ] && ok "steps past the old horizon run at min_lr" ||
  bad "lr after step 40: $lrs"
train --out "$tmp/ext2" --interrupt-after 17 > /dev/null 2>&1
train --out "$tmp/ext2" --resume --steps 60 > /dev/null 2> "$tmp/ext2.err" ||
  bad "resume --steps from a stopped run: $(cat "$tmp/ext2.err")"
csv6() { cut -d, -f1-6 "$1"; }
[ "$(csv6 "$tmp/ext/loss.csv")" = "$(csv6 "$tmp/ext2/loss.csv")" ] &&
  cmp -s "$tmp/ext/model.safetensors" "$tmp/ext2/model.safetensors" &&
  [ "$(grep -c '^40,.*,[0-9.]*$' "$tmp/ext/loss.csv")" = 1 ] &&
  ok "stopped at 17 then --steps 60 == finished at 40 then --steps 60 (bit for bit)" ||
  bad "loss.csv or weights differ: $(diff "$tmp/ext/loss.csv" "$tmp/ext2/loss.csv" | head -3)"
"$ATTN" train --out "$tmp/ext" --resume --threads 1 > /dev/null 2> "$tmp/ext3.err" &&
  ok "the extended run resumes again from its saved config" || bad "re-resume: $(cat "$tmp/ext3.err")"
"$ATTN" train --out "$tmp/ext" --resume --steps 30 --threads 1 > /dev/null 2> "$tmp/ext4.err"
rc=$?
[ $rc -ne 0 ] && grep -q "at step 60, beyond max_steps 30" "$tmp/ext4.err" &&
  ok "--steps below the current step is refused" || bad "rc=$rc $(cat "$tmp/ext4.err")"

# 4. --dry-run: the resolved config, the parameter count the run itself
#    reports, memory, checkpoint size and time; nothing written.
train --out "$tmp/dry" --dry-run > "$tmp/dry.log" 2> "$tmp/dry.err"; rc=$?
real=$(grep -o '[0-9]* parameters' "$tmp/ext.err" | head -1 | cut -d' ' -f1)
planned=$(awk '$1 == "parameters" { print $2 }' "$tmp/dry.log")
[ $rc -eq 0 ] && [ ! -e "$tmp/dry" ] && [ -n "$real" ] && [ "$planned" = "$real" ] &&
  grep -q '^training *{"batch_size":2,"max_steps":40' "$tmp/dry.log" &&
  grep -q '^memory *~[0-9.]* MiB' "$tmp/dry.log" && grep -q '^checkpoint *[0-9.]* MiB' "$tmp/dry.log" &&
  grep -qE '^time +(under a second|about [0-9]+ [a-z]+( [0-9]+ [a-z]+)?) for 40 steps' "$tmp/dry.log" &&
  ok "--dry-run prints config, $planned parameters, memory, checkpoint, time; writes nothing" ||
  bad "dry-run rc=$rc planned=$planned real=$real: $(cat "$tmp/dry.log" "$tmp/dry.err")"

# 5. A seed004-sized run warns of its cost before anything else (here it then
#    stops at once: the folder already holds a checkpoint).
"$ATTN" train --preset seed004 --data "$tmp/corpus.txt" --out "$tmp/ext" --threads 1 > /dev/null 2> "$tmp/big.err"
rc=$?
[ $rc -eq 2 ] && grep -q "warning: a large run: 71.1 M parameters, .* for 5000 steps" "$tmp/big.err" &&
  ok "seed004 warns of its cost before starting" || bad "rc=$rc $(cat "$tmp/big.err")"

# 6. --init-from: a new run from trained weights starts at their loss (step 0
#    well below a fresh model's), refuses another vocabulary and --resume.
train --out "$tmp/fresh" --steps 1 > "$tmp/fresh.log" 2> /dev/null
train --out "$tmp/ft" --init-from "$tmp/best/best" --steps 5 > "$tmp/ft.log" 2> "$tmp/ft.err"; rc=$?
v0() { awk '/^step 0:/ { print $NF }' "$1"; }
[ $rc -eq 0 ] && grep -q "starting from the weights of $tmp/best/best" "$tmp/ft.err" &&
  awk -v a="$(v0 "$tmp/ft.log")" -v b="$(v0 "$tmp/fresh.log")" 'BEGIN { exit !(a + 0.5 < b) }' &&
  ok "--init-from starts at the trained loss ($(v0 "$tmp/ft.log") vs fresh $(v0 "$tmp/fresh.log"))" ||
  bad "--init-from: rc=$rc $(cat "$tmp/ft.err") $(v0 "$tmp/ft.log") vs $(v0 "$tmp/fresh.log")"
tr 'a-z' 'A-Z' < "$tmp/corpus.txt" > "$tmp/upper.txt"
"$ATTN" train --data "$tmp/upper.txt" --config "$tmp/cfg.json" --threads 1 --out "$tmp/ft2" \
  --init-from "$tmp/ext" > /dev/null 2> "$tmp/ft2.err"; rc=$?
[ $rc -eq 1 ] && grep -q "vocab" "$tmp/ft2.err" && ok "--init-from refuses another vocabulary" ||
  bad "rc=$rc $(cat "$tmp/ft2.err")"
train --out "$tmp/ext" --resume --init-from "$tmp/ext" > /dev/null 2>&1
[ $? -eq 2 ] && ok "--init-from with --resume: usage error" || bad "--init-from with --resume accepted"

[ $fails -eq 0 ] && echo "all ok" || echo "$fails failed"
exit $((fails > 0))
