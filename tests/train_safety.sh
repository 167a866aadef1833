#!/usr/bin/env bash
# attn train never loses or clobbers a run: one writer per folder (a second
# run fails at once naming the first, which is unaffected), no silent
# overwrite (--resume or --force), SIGHUP and SIGTERM save like Ctrl-C, stale
# temp files of a killed run are removed, a folder in the older layout (two
# regular files) resumes and is converted, and generate treats a subnormal
# temperature as greedy.
# Usage: bash train_safety.sh <path-to-attn> <source-dir>
set -u
ATTN=$1
tmp=$(mktemp -d)
pids=()
trap 'for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done; rm -rf "$tmp"' EXIT
. "$(dirname "${BASH_SOURCE[0]}")/support/lib.sh"

make_corpus "$tmp/corpus.txt"
cat > "$tmp/cfg.json" <<'JSON'
{"context_length": 16, "emb_dim": 16, "n_heads": 2, "n_layers": 1, "drop_rate": 0.1,
 "batch_size": 2, "max_steps": 40, "eval_interval": 10, "eval_iters": 1,
 "log_interval": 1, "warmup_steps": 2}
JSON
# Long enough to act on while it runs; stopped by a signal long before the end.
sed 's/"max_steps": 40/"max_steps": 200000/; s/"eval_interval": 10/"eval_interval": 100000/' \
  "$tmp/cfg.json" > "$tmp/long.json"
start_long() { # dir; sets pid
  "$ATTN" train --data "$tmp/corpus.txt" --config "$tmp/long.json" --threads 1 --out "$1" \
    > "$1.log" 2> "$1.err" &
  pid=$!
  pids+=("$pid")
  # Bounded (300 s) only as a safety net against a run that hangs.
  local deadline=$((SECONDS + 300))
  until grep -q "^iter 20:" "$1.log" 2>/dev/null; do
    kill -0 "$pid" 2>/dev/null && [ $SECONDS -lt $deadline ] || return 1
    sleep 0.05
  done
}
train() { "$ATTN" train --data "$tmp/corpus.txt" --config "$tmp/cfg.json" --threads 1 "$@"; }

# 1. One writer: a second run on a busy folder fails at once, naming the first.
mkdir -p "$tmp/busy"
start_long "$tmp/busy" || bad "long run did not start: $(cat "$tmp/busy.err")"
first=$pid
for flags in "" "--resume" "--force"; do
  t0=$(date +%s%N)
  # shellcheck disable=SC2086
  train --out "$tmp/busy" $flags > "$tmp/2.log" 2> "$tmp/2.err"
  rc=$?
  ms=$((($(date +%s%N) - t0) / 1000000))
  if [ $rc -eq 1 ] && grep -q "in use by another run (pid $first: attn train --out $tmp/busy)" "$tmp/2.err" &&
     ! grep -q . "$tmp/2.log"; then
    ok "second run ${flags:-(no flag)} refused in ${ms} ms, naming pid $first"
  else
    bad "second run ${flags:-(no flag)} on a busy folder: rc=$rc $(cat "$tmp/2.err")"
  fi
done
kill -0 "$first" 2>/dev/null && ok "the first run is still running" || bad "the first run died"

# 2. SIGTERM and SIGHUP save a checkpoint like Ctrl-C.
kill -TERM "$first"
wait "$first"
rc=$?
step=$(sed -n 's/.*interrupted after step \([0-9]*\);.*/\1/p' "$tmp/busy.err")
if [ $rc -eq 143 ] && [ -n "$step" ] && [ "$(readlink "$tmp/busy/latest")" = "ckpt-$step" ]; then
  ok "SIGTERM saved a checkpoint at step $step and exited 143 (128 + SIGTERM)"
else
  bad "SIGTERM: rc=$rc, $(tail -1 "$tmp/busy.err"), latest=$(readlink "$tmp/busy/latest")"
fi
# The first run was unaffected by the refused ones: its lines are a prefix of
# an undisturbed run's.
"$ATTN" train --data "$tmp/corpus.txt" --config "$tmp/long.json" --threads 1 --out "$tmp/undisturbed" \
  --interrupt-after "$step" > "$tmp/und.log" 2> /dev/null
if cmp -s <(sed 's/, time .*//' "$tmp/und.log") <(sed 's/, time .*//' "$tmp/busy.log") &&
   cmp -s "$tmp/undisturbed/model.safetensors" "$tmp/busy/model.safetensors"; then
  ok "the first run's losses and weights equal an undisturbed run's"
else
  bad "the first run differs from an undisturbed one"
fi
mkdir -p "$tmp/hup"
if start_long "$tmp/hup"; then
  kill -HUP "$pid"
  wait "$pid"
  rc=$?
  step=$(sed -n 's/.*interrupted after step \([0-9]*\);.*/\1/p' "$tmp/hup.err")
  if [ $rc -eq 129 ] && [ -n "$step" ] && [ "$(readlink "$tmp/hup/latest")" = "ckpt-$step" ] &&
     "$ATTN" train --out "$tmp/hup" --resume --threads 1 --interrupt-after $((step + 2)) > /dev/null 2> "$tmp/hup2.err";
     [ $? -eq 130 ] && grep -q "resuming $tmp/hup at step $step" "$tmp/hup2.err"; then
    ok "SIGHUP saved a checkpoint at step $step, exited 129 (128 + SIGHUP); resume continues from it"
  else
    bad "SIGHUP: rc=$rc $(tail -2 "$tmp/hup.err") $(cat "$tmp/hup2.err" 2>/dev/null)"
  fi
else
  bad "long run for SIGHUP did not start"
fi

# 3. No silent overwrite.
train --out "$tmp/run" > /dev/null 2>&1 || bad "first run failed"
cp -L "$tmp/run/model.safetensors" "$tmp/before.safetensors"
train --out "$tmp/run" --seed 5 > "$tmp/o.log" 2> "$tmp/o.err"
rc=$?
if [ $rc -eq 2 ] && grep -q "already holds a checkpoint (step 40); continue it with --resume or start over with --force" "$tmp/o.err" &&
   cmp -s "$tmp/before.safetensors" "$tmp/run/model.safetensors"; then
  ok "training into a folder with a checkpoint needs --resume or --force; nothing touched"
else
  bad "overwrite without --force: rc=$rc $(cat "$tmp/o.err")"
fi
train --out "$tmp/run" --seed 5 --force > /dev/null 2> "$tmp/f.err" || bad "--force run failed: $(cat "$tmp/f.err")"
train --out "$tmp/fresh5" --seed 5 > /dev/null 2>&1
if grep -q -- "--force: starting over in $tmp/run; removed the old run (its checkpoint at step 40, best/, loss.csv, loss.svg)" "$tmp/f.err" &&
   cmp -s "$tmp/fresh5/model.safetensors" "$tmp/run/model.safetensors" &&
   cmp -s "$tmp/fresh5/loss.csv" "$tmp/run/loss.csv"; then
  ok "--force says what it replaces and the result equals a fresh run"
else
  bad "--force: $(cat "$tmp/f.err")"
fi
train --out "$tmp/run" --resume --force > /dev/null 2> "$tmp/rf.err"
[ $? -eq 2 ] && grep -q "give one of them" "$tmp/rf.err" && ok "--resume with --force is refused" ||
  bad "--resume --force: $(cat "$tmp/rf.err")"

# 4. Stale temp files from a killed run go when the next run opens the folder;
# a checkpoint folder that is not attn's (a user's notes in it) stays.
d=$tmp/run
head -c 1000000 /dev/zero > "$d/.model.safetensors.tmp-AbC123"
mkdir "$d/.ckpt-41.tmp-99999" "$d/ckpt-98"
echo x > "$d/.ckpt-41.tmp-99999/.train_state.safetensors.tmp-Zz9"
cp -r "$d/ckpt-40" "$d/ckpt-99" # a save killed before its pointer swap
echo mine > "$d/ckpt-98/notes.txt"
ln -s ckpt-99 "$d/.latest.tmp-4242"
"$ATTN" train --out "$d" --resume --threads 1 > /dev/null 2> "$tmp/s.err"
left=$(ls -A "$d" | grep -E 'tmp-|ckpt-99|^\.lock$')
if grep -q "removed 4 stale temporary file(s)" "$tmp/s.err" && [ -z "$left" ] &&
   [ "$(cat "$d/ckpt-98/notes.txt")" = mine ] &&
   cmp -s "$tmp/fresh5/model.safetensors" "$d/model.safetensors"; then
  ok "stale temp files and orphan checkpoints removed; the live checkpoint and a user's folder kept"
else
  bad "stale files: $(cat "$tmp/s.err") left: $left"
fi
rm -r "$d/ckpt-98"

# 5. The older layout (two regular files at the top) resumes and is converted.
train --out "$tmp/half" --interrupt-after 17 > /dev/null 2>&1
mkdir "$tmp/old"
cp -L "$tmp/half/model.safetensors" "$tmp/half/train_state.safetensors" "$tmp/old/"
"$ATTN" train --out "$tmp/old" --resume --threads 1 > /dev/null 2> "$tmp/old.err"
if [ $? -eq 0 ] && [ -L "$tmp/old/model.safetensors" ] && [ "$(readlink "$tmp/old/latest")" = ckpt-40 ] &&
   train --out "$tmp/whole" > /dev/null 2>&1 && cmp -s "$tmp/whole/model.safetensors" "$tmp/old/model.safetensors"; then
  ok "a folder in the older layout resumes to the same result and is converted"
else
  bad "older layout: $(cat "$tmp/old.err")"
fi

# 6. A subnormal temperature is greedy, not garbage.
g0=$("$ATTN" generate --checkpoint "$tmp/whole" --max-new-tokens 60 --temperature 0 2>/dev/null)
for t in 1e-39 1e-45 1e-300; do
  g=$("$ATTN" generate --checkpoint "$tmp/whole" --max-new-tokens 60 --temperature $t --seed 9 2>/dev/null)
  [ -n "$g0" ] && [ "$g" = "$g0" ] && ok "--temperature $t samples greedily" || bad "--temperature $t: $g"
done

[ $fails -eq 0 ] && echo "all train safety checks passed" && exit 0
echo "$fails check(s) failed"
exit 1
