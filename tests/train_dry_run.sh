#!/usr/bin/env bash
# --dry-run is the real set-up minus training and writes (issue 17 item 7):
# it reads the saved run (a finished run says so, a resumed one counts the
# steps left), and every request the real run refuses it refuses too, with
# the same exit status and message: --steps below the saved step, a corpus
# shorter than the context, a corpus with a character --init-from's
# vocabulary lacks, a config vocab_size the corpus does not have, a bad JSON
# config, a folder holding a checkpoint. It writes nothing.
# Usage: bash train_dry_run.sh <path-to-attn> <source-dir>
set -u
ATTN=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "${BASH_SOURCE[0]}")/support/lib.sh"

make_corpus "$tmp/corpus.txt"
cat > "$tmp/small.json" <<'JSON'
{"context_length": 16, "emb_dim": 16, "n_heads": 2, "n_layers": 1, "batch_size": 2,
 "max_steps": 6, "eval_interval": 3, "eval_iters": 1}
JSON
train() { "$ATTN" train --data "$tmp/corpus.txt" --config "$tmp/small.json" --threads 1 "$@"; }
train --out "$tmp/fin" > /dev/null 2>&1 || bad "setup: the 6-step run failed"
train --out "$tmp/half" --interrupt-after 3 > /dev/null 2>&1
snapshot() { (cd "$tmp" && find fin half -printf '%p %s %T@\n' | sort); }
before=$(snapshot)

# 1. A finished run: the plan says so and what --steps N would do, and
#    promises no time for steps it will not take.
"$ATTN" train --out "$tmp/fin" --resume --dry-run --threads 1 > "$tmp/fin.log" 2> "$tmp/fin.err"; rc=$?
[ $rc -eq 0 ] && grep -q '^run *finished at step 6 (max_steps): nothing to train; --resume --steps N' "$tmp/fin.log" &&
  ! grep -q '^time' "$tmp/fin.log" && ok "a finished run: 'finished at step 6', no time promised" ||
  bad "finished: rc=$rc $(cat "$tmp/fin.log" "$tmp/fin.err")"

# 2. A stopped run: where it resumes and the time of the steps left.
"$ATTN" train --out "$tmp/half" --resume --dry-run --threads 1 > "$tmp/half.log" 2>&1; rc=$?
[ $rc -eq 0 ] && grep -q '^run *resumes at step 3 of 6$' "$tmp/half.log" &&
  grep -q '^time .* for 3 steps ' "$tmp/half.log" &&
  ok "a stopped run: resumes at step 3 of 6, time for 3 steps" || bad "stopped: rc=$rc $(cat "$tmp/half.log")"
"$ATTN" train --out "$tmp/fin" --resume --steps 10 --dry-run --threads 1 > "$tmp/ext.log" 2>&1; rc=$?
[ $rc -eq 0 ] && grep -q '^run *resumes at step 6 of 10$' "$tmp/ext.log" &&
  grep -q '^time .* for 4 steps ' "$tmp/ext.log" &&
  ok "--resume --steps 10 on the finished run: 4 steps to go" || bad "extend: rc=$rc $(cat "$tmp/ext.log")"

# Nothing written so far: the saved runs untouched (files, sizes, times;
# loss files not rewritten). Each dry run below is checked the same way.
[ "$(snapshot)" = "$before" ] && ok "--dry-run of saved runs wrote nothing" ||
  bad "written: $(diff <(echo "$before") <(snapshot))"

# 3. What the real run refuses, --dry-run refuses: same status, same
#    message. (The real run gets its own folder where it would start one;
#    --steps 2 keeps it short should it not refuse.)
n=0
same() { # name, dry-run output folder, args...
  local name=$1 out=$2
  shift 2
  n=$((n + 1))
  local real_out=$out
  [ "$out" = never ] && real_out=real$n
  local b
  b=$(snapshot)
  "$ATTN" train --out "$tmp/$out" --dry-run "$@" > "$tmp/dry.log" 2> "$tmp/dry.err"
  local drc=$?
  [ "$(snapshot)" = "$b" ] && [ ! -e "$tmp/never" ] || bad "$name: the dry run wrote"
  "$ATTN" train --out "$tmp/$real_out" "$@" > /dev/null 2> "$tmp/real.err"
  local rrc=$?
  sed -i "s|$tmp/$real_out|OUT|g" "$tmp/real.err"
  sed -i "s|$tmp/$out|OUT|g" "$tmp/dry.err"
  if [ $rrc -ne 0 ] && [ $drc -eq $rrc ] && cmp -s "$tmp/dry.err" "$tmp/real.err" && [ ! -s "$tmp/dry.log" ]; then
    ok "$name: both exit $drc: $(cat "$tmp/dry.err")"
  else
    bad "$name: dry-run rc=$drc '$(cat "$tmp/dry.err")', real rc=$rrc '$(cat "$tmp/real.err")'"
  fi
}
same "--resume --steps 2 on a run at step 6" fin --resume --steps 2 --threads 1
head -c 300 "$tmp/corpus.txt" > "$tmp/short.txt"
same "a corpus shorter than the context" never --data "$tmp/short.txt" --threads 1
{ head -c 2000 "$tmp/corpus.txt"; printf 'Zounds!\n'; } > "$tmp/other.txt"
same "--init-from with a character its vocabulary lacks" never --data "$tmp/other.txt" \
  --config "$tmp/small.json" --init-from "$tmp/fin" --threads 1
echo '{"vocab_size": 12}' > "$tmp/vocab.json"
same "a config vocab_size the corpus does not have" never --data "$tmp/corpus.txt" --config "$tmp/vocab.json" \
  --steps 2 --threads 1
printf '{"n_layers": 1} xyz' > "$tmp/trail.json"
same "JSON with text after the object" never --data "$tmp/corpus.txt" --config "$tmp/trail.json" --steps 2 --threads 1
echo '{"head_size": -5}' > "$tmp/neg.json"
same "JSON with a negative head_size" never --data "$tmp/corpus.txt" --config "$tmp/neg.json" --steps 2 --threads 1
same "a folder holding a checkpoint, without --resume" fin --data "$tmp/corpus.txt" --config "$tmp/small.json" --threads 1

# A dry run plans from the configs and the checkpoints' headers: it never
# allocates the model. A 100.9 M-parameter run (~2 GiB with its optimizer
# and activations) plans within `ulimit -v` 700 MB, fresh, resumed and
# from --init-from, while the real run cannot start there. Not under ASan,
# whose shadow memory does not fit such a limit.
cat > "$tmp/big.json" <<'JSON'
{"n_layers": 8, "emb_dim": 1024, "n_heads": 8, "context_length": 16, "batch_size": 2}
JSON
if ldd "$ATTN" 2> /dev/null | grep -q libasan; then
  echo "skip - the dry run's memory under ulimit -v (ASan build)"
else
  lim() { bash -c 'ulimit -v 700000; "$@"' lim "$ATTN" train --data "$tmp/corpus.txt" --threads 1 "$@"; }
  lim --config "$tmp/big.json" --out "$tmp/big" --dry-run > "$tmp/big.log" 2>&1; rc=$?
  [ $rc -eq 0 ] && grep -q '^parameters  100[0-9]* ' "$tmp/big.log" && grep -q '^memory  *~' "$tmp/big.log" &&
    ok "a 100.9M-parameter dry run within ulimit -v 700 MB" || bad "big dry run: rc=$rc $(cat "$tmp/big.log")"
  lim --config "$tmp/big.json" --out "$tmp/big" --steps 1 > "$tmp/bigreal.log" 2>&1; rc=$?
  [ $rc -eq 1 ] && ok "the real run cannot start there (exit 1): the limit bites" ||
    bad "the real big run under the limit: rc=$rc $(tail -3 "$tmp/bigreal.log")"
  rm -rf "$tmp/big"
  lim --out "$tmp/half" --resume --dry-run > "$tmp/lr.log" 2>&1 &&
    grep -q '^run *resumes at step 3 of 6$' "$tmp/lr.log" && ok "a resumed dry run reads headers only" ||
    bad "resumed dry run under the limit: $(cat "$tmp/lr.log")"
  lim --config "$tmp/small.json" --init-from "$tmp/fin" --out "$tmp/ft" --dry-run > "$tmp/li.log" 2>&1 &&
    grep -q '^run *a new run from the weights of' "$tmp/li.log" && [ ! -e "$tmp/ft" ] &&
    ok "an --init-from dry run" || bad "init-from dry run: $(cat "$tmp/li.log")"
fi

# The engine line: --preset speedrun runs bf16 where the CPU has AVX512-BF16
# (else fp32, saying why); --precision overrides it; other presets are fp32.
engine() { "$ATTN" train --data "$tmp/corpus.txt" --out "$tmp/never" --dry-run --threads 1 "$@" 2> "$tmp/eng.err" |
  sed -n 's/^engine *//p'; }
if attn_bf16 "$ATTN"; then want=bf16; else want=fp32; fi
e=$(engine --preset speedrun)
[ "$e" = "cpu, $want" ] && { [ $want = bf16 ] || grep -q 'runs in bf16 where the CPU has AVX512-BF16; this one has not' "$tmp/eng.err"; } &&
  ok "--preset speedrun: engine cpu, $want" || bad "speedrun engine '$e' (want $want): $(cat "$tmp/eng.err")"
e=$(engine --preset speedrun --precision fp32)
[ "$e" = "cpu, fp32" ] && ! grep -q 'bf16' "$tmp/eng.err" && ok "--precision fp32 overrides the preset" ||
  bad "speedrun --precision fp32: engine '$e' $(cat "$tmp/eng.err")"
e=$(engine --preset tiny)
[ "$e" = "cpu, fp32" ] && ok "--preset tiny: engine cpu, fp32" || bad "tiny engine '$e'"
[ ! -e "$tmp/never" ] || bad "the engine dry runs wrote"

# The plan counts the tokens as the run does, and prices its evaluations
# (issue 47): three sampled ones (steps 0, 3, 6) and the final exact pass.
train --out "$tmp/count" --dry-run > "$tmp/count.log" 2>&1
real=$(train --out "$tmp/count" 2>&1 | sed -n 's/.*; \([0-9]*\) train \/ \([0-9]*\) val tokens;.*/\1 \2/p')
plan=$(sed -n 's/^tokens *\([0-9]*\) train, \([0-9]*\) val$/\1 \2/p' "$tmp/count.log")
[ -n "$real" ] && [ "$plan" = "$real" ] && ok "--dry-run counts the run's tokens ($plan)" ||
  bad "dry-run tokens '$plan', the run's '$real'"
grep -q '^evaluation  3 evaluations of 1 batches of each split (~[0-9.]*% of the steps.* work); the final exact pass over [0-9]* val tokens' "$tmp/count.log" &&
  ok "--dry-run prices the evaluations" || bad "no evaluation line: $(grep -i eval "$tmp/count.log")"

[ $fails -eq 0 ] && echo "all ok" || echo "$fails failed"
exit $((fails > 0))
