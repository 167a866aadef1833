#!/usr/bin/env bash
# Crash-safe checkpoints (attn/checkpoint.h), proven two ways on a tiny model:
#  1. fault injection (tests/shim/fault_inject.c via LD_PRELOAD): a 2-step
#     run that checkpoints at step 0 and every step is killed (SIGKILL) or sees an I/O error
#     at each file-system operation in its run folder, one at a time. After
#     each: the live checkpoint is exactly the last one whose pointer swap
#     happened (never a mix, never none once one was committed), `--resume`
#     succeeds and ends with the uninterrupted run's weights and loss.csv, and
#     no temp files or orphan checkpoint folders are left.
#  2. kill -9 at 24 drawn instants inside a 24-step run (held there by the
#     shim's stop mode, so none falls after the end; every other one after
#     the first checkpoint appeared): resume succeeds whenever a checkpoint
#     had completed and its loss lines, final weights and loss.csv equal the
#     uninterrupted run's.
# The fault loop hits every operation except the middle ones of a run of
# writes to one temp file (they all precede the same fsync and rename, so
# they prove the same thing as its first and last); ATTN_CRASH_ALL=1 hits
# every single one (424 runs, about a minute).
# Usage: bash train_crash.sh <path-to-attn> <source-dir>
set -u
ATTN=$1
SHIM=$(dirname "$ATTN")/libattn_fault.so
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "${BASH_SOURCE[0]}")/support/lib.sh"
[ -f "$SHIM" ] || { echo "FAIL - fault shim $SHIM not built"; exit 1; }
# The shim is preloaded ahead of the sanitizer runtime.
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0"

make_corpus "$tmp/corpus.txt"
cat > "$tmp/c2.json" <<'JSON'
{"context_length": 16, "emb_dim": 16, "n_heads": 2, "n_layers": 1, "drop_rate": 0.1,
 "batch_size": 2, "max_steps": 2, "eval_interval": 2, "eval_iters": 1,
 "log_interval": 1, "warmup_steps": 1, "checkpoint_interval": 1}
JSON
losses() { sed 's/, time .*//' "$@"; }
train() { "$ATTN" train --data "$tmp/corpus.txt" --threads 1 "$@"; }
# Debris a finished run must not leave: temp files, orphan checkpoints.
debris() {
  local live
  live=$(readlink "$1/latest" 2>/dev/null)
  ls -A "$1" | grep -E '^\..*\.tmp-|^\.lock$' | head -3
  ls -A "$1" | grep '^ckpt-' | grep -vx "$live" | head -3
}

# ---- 1. fault injection at every operation ------------------------------
train --config "$tmp/c2.json" --out "$tmp/ref" > "$tmp/ref.log" 2> "$tmp/ref.err" ||
  bad "reference run failed: $(cat "$tmp/ref.err")"
rm -rf "$tmp/count"
ATTN_FAULT_DIR="$tmp/count/" ATTN_FAULT_LOG="$tmp/ops.log" LD_PRELOAD=$SHIM \
  train --config "$tmp/c2.json" --out "$tmp/count" > /dev/null 2>&1 || bad "counting run failed"
cmp -s "$tmp/ref/model.safetensors" "$tmp/count/model.safetensors" ||
  bad "the shim changes the run's result"
nops=$(wc -l < "$tmp/ops.log")
# The checkpoint's two writer threads share the shim's counter and may log
# out of turn: in number order, line k is operation k, and the numbers are
# 1..N with none repeated or lost.
sort -n -k1,1 -o "$tmp/ops.log" "$tmp/ops.log"
awk '$1 != NR { exit 1 }' "$tmp/ops.log" || bad "operation log numbers repeat or skip"
# The commit points: the renames of DIR/latest (steps 0, 1 and 2).
mapfile -t commits < <(grep " rename $tmp/count/latest\$" "$tmp/ops.log" | cut -d' ' -f1)
if [ "$nops" -lt 50 ] || [ ${#commits[@]} -ne 3 ]; then
  bad "operation log: $nops operations, commits at ${commits[*]:-none}"
  commits=(0 0 0)
fi
# Each checkpoint's training state is written once, a gated one's (steps 0
# and 2: an evaluation runs meanwhile) after its evaluation, with its record.
states=$(awk '$2 == "fchmod" && $3 ~ /\/\.train_state\.safetensors\.tmp-/' "$tmp/ops.log" | wc -l)
[ "$states" -eq 3 ] && ok "each checkpoint's training state written once (3 files for 3 checkpoints)" ||
  bad "training-state files written: $states for 3 checkpoints"
# Which operations to hit.
awk -v all="${ATTN_CRASH_ALL:-0}" '
  { op[NR] = $2 }
  END { for (i = 1; i <= NR; i++)
          if (all || op[i] != "write" || op[i-1] != "write" || op[i+1] != "write") print i }' \
  "$tmp/ops.log" > "$tmp/hits"
tried=0 consistent=0 resumed=0
for mode in kill fail; do
  while read -r k; do
    d="$tmp/f-$mode-$k"
    tried=$((tried + 1))
    ATTN_FAULT_DIR="$d/" ATTN_FAULT_AT=$k ATTN_FAULT_MODE=$mode LD_PRELOAD=$SHIM \
      train --config "$tmp/c2.json" --out "$d" > /dev/null 2> "$tmp/f.err"
    rc=$?
    # The live checkpoint must be the last one committed before the fault
    # (a failure that does not stop the run, rc 0, ends at the last step).
    want=""
    [ $rc -eq 0 ] && want=ckpt-2
    for i in 2 1 0; do
      [ -z "$want" ] && [ "$k" -gt "${commits[$i]}" ] && want=ckpt-$i
    done
    live=$(readlink "$d/latest" 2>/dev/null)
    why=""
    if [ "$mode" = kill ] && [ $rc -ne 137 ] && [ $rc -ne 0 ]; then why="killed run exited $rc"; fi
    if [ "$mode" = fail ] && [ $rc -ne 0 ] && ! grep -q "attn train: .*: " "$tmp/f.err"; then
      why="failed run gave no clear message: $(cat "$tmp/f.err")"
    fi
    [ "$live" = "$want" ] || why="$why; live checkpoint '${live}', expected '${want}'"
    # Killed after the first checkpoint's folder was renamed into place but
    # before its pointer swap: that folder is whole, resume continues from it.
    whole=""
    [ -z "$want" ] && [ -d "$d/ckpt-0" ] && whole=1
    if [ -z "$why" ] && [ -n "$want$whole" ]; then
      consistent=$((consistent + 1))
      if "$ATTN" train --out "$d" --resume --threads 1 > /dev/null 2> "$tmp/r.err" &&
         cmp -s "$tmp/ref/model.safetensors" "$d/model.safetensors" &&
         cmp -s "$tmp/ref/train_state.safetensors" "$d/train_state.safetensors" &&
         cmp -s "$tmp/ref/loss.csv" "$d/loss.csv" && [ -z "$(debris "$d")" ]; then
        resumed=$((resumed + 1))
      else
        why="resume after $mode at op $k ($(sed -n "${k}p" "$tmp/ops.log" | cut -d' ' -f2)): $(cat "$tmp/r.err" | tail -1) $(debris "$d")"
      fi
    elif [ -z "$why" ]; then
      consistent=$((consistent + 1))
      # Nothing committed yet: resume says so, a fresh run starts cleanly.
      if "$ATTN" train --out "$d" --resume > /dev/null 2> "$tmp/r.err" ||
         ! grep -q "holds no checkpoint" "$tmp/r.err"; then
        why="resume without a checkpoint: $(cat "$tmp/r.err")"
      fi
    fi
    if [ -n "$why" ]; then
      bad "$mode at operation $k ($(sed -n "${k}p" "$tmp/ops.log" | cut -d' ' -f2,3)): $why"
    fi
    rm -rf "$d"
  done < "$tmp/hits"
done
nhits=$(wc -l < "$tmp/hits")
echo "fault injection: $nops operations per run, $nhits hit in each mode (kill, fail): $tried runs," \
  "$consistent left the previous or the new checkpoint, $resumed resumed to the reference result"
[ "$consistent" -eq "$tried" ] && ok "every injected kill/failure left one whole checkpoint (or none before the first)" ||
  bad "inconsistent folders after faults"

# ---- 2. kill -9 at random instants ---------------------------------------
# Every kill lands inside the run by construction, at any machine speed: each
# run is started with the shim holding it (SIGSTOP) at a drawn file-system
# operation k of the 24-step run, and is killed after a drawn delay or as soon
# as it is held, whichever comes first - mid-computation or at operation k,
# never after the run ended. Even tries draw k after the first commit and
# start their delay only once `latest` exists, so at least 12 kills leave a
# checkpoint whose resume is checked; every fourth try (1, 5, ...) draws k up
# to the first commit, so 6 kills land before it (resume refused, or the
# renamed ckpt-1 folder resumed). Time bounds only a hung run (a failure).
sed 's/"max_steps": 2/"max_steps": 24/; s/"eval_interval": 2/"eval_interval": 8/' "$tmp/c2.json" > "$tmp/c24.json"
t0=$(date +%s%N)
train --config "$tmp/c24.json" --out "$tmp/ref24" > "$tmp/ref24.log" 2> /dev/null || bad "24-step reference failed"
dur_ms=$((($(date +%s%N) - t0) / 1000000))
[ "$dur_ms" -lt 1 ] && dur_ms=1
rm -f "$tmp/ops24.log"
ATTN_FAULT_DIR="$tmp/count24/" ATTN_FAULT_LOG="$tmp/ops24.log" LD_PRELOAD=$SHIM \
  train --config "$tmp/c24.json" --out "$tmp/count24" > /dev/null 2>&1 || bad "24-step counting run failed"
sort -n -k1,1 -o "$tmp/ops24.log" "$tmp/ops24.log" # in number order (see above)
nops24=$(wc -l < "$tmp/ops24.log")
first24=$(grep -m1 " rename $tmp/count24/latest\$" "$tmp/ops24.log" | cut -d' ' -f1)
[ -n "$first24" ] && [ "$nops24" -gt "$first24" ] || { bad "24-step operation log: $nops24 operations, first commit at ${first24:-none}"; first24=1; }
now_ms() { echo $(($(date +%s%N) / 1000000)); }
held() { [ "$(cut -d' ' -f3 "/proc/$1/stat" 2> /dev/null)" = T ]; }
tries=0 kills=0 clean=0 none=0 after=0 limit_ms=300000
RANDOM=8 # reproducible draws
while [ $tries -lt 24 ]; do
  tries=$((tries + 1))
  d="$tmp/k$tries"
  if [ $((tries % 2)) -eq 0 ]; then
    k=$((first24 + 1 + RANDOM % (nops24 - first24)))
    delay_ms=$((RANDOM % (dur_ms / 2 + 1)))
  elif [ $((tries % 4)) -eq 1 ]; then # at the latest at the first commit
    k=$((1 + RANDOM % first24))
    delay_ms=$((RANDOM % (dur_ms + 1)))
  else
    k=$((1 + RANDOM % nops24))
    delay_ms=$((RANDOM % (dur_ms + 1)))
  fi
  ATTN_FAULT_DIR="$d/" ATTN_FAULT_AT=$k ATTN_FAULT_MODE=stop LD_PRELOAD=$SHIM \
    "$ATTN" train --data "$tmp/corpus.txt" --threads 1 --config "$tmp/c24.json" --out "$d" \
    > "$tmp/k.log" 2> /dev/null & # no function: $! must be attn itself
  pid=$!
  start=$(now_ms)
  # Even tries: the delay counts from the first checkpoint's pointer.
  if [ $((tries % 2)) -eq 0 ]; then
    while [ ! -e "$d/latest" ] && kill -0 $pid 2> /dev/null && ! held $pid &&
      [ $(($(now_ms) - start)) -lt $limit_ms ]; do sleep 0.005; done
  fi
  go=$(($(now_ms) + delay_ms))
  while [ "$(now_ms)" -lt $go ] && kill -0 $pid 2> /dev/null && ! held $pid; do sleep 0.005; done
  where="after ${delay_ms} ms"
  held $pid && where="held at operation $k ($(sed -n "${k}p" "$tmp/ops24.log" | cut -d' ' -f2))"
  had_latest=0
  [ -e "$d/latest" ] && had_latest=1
  kill -9 $pid 2> /dev/null
  wait $pid 2> /dev/null
  rc=$?
  if [ $rc -ne 137 ]; then
    bad "try $tries: the run held at operation $k exited $rc before the kill (timeout ${limit_ms} ms?)"
    rm -rf "$d"
    continue
  fi
  kills=$((kills + 1))
  if [ $((tries % 4)) -eq 1 ] && [ -e "$d/latest" ]; then
    bad "try $tries: killed $where, before the first commit (operation $first24), yet latest exists"
  fi
  if [ ! -e "$d/latest" ] && ! ls -d "$d"/ckpt-* > /dev/null 2>&1; then
    if "$ATTN" train --out "$d" --resume > /dev/null 2> "$tmp/r.err" || ! grep -q "holds no checkpoint" "$tmp/r.err"; then
      bad "kill -9 $where: no checkpoint, yet resume said: $(cat "$tmp/r.err")"
    else
      none=$((none + 1))
    fi
    rm -rf "$d"
    continue
  fi
  "$ATTN" train --out "$d" --resume --threads 1 > "$tmp/k2.log" 2> "$tmp/k2.err"
  rc2=$?
  s=$(sed -n 's/.*resuming .* at step \([0-9]*\)$/\1/p' "$tmp/k2.err")
  # The resumed run's lines = the reference's from iteration s on.
  awk -v s="${s:-x}" '$0 ~ "^iter " s ":" { on = 1 } on' "$tmp/ref24.log" | losses > "$tmp/want"
  if [ $rc2 -eq 0 ] && [ -n "$s" ] && diff -q "$tmp/want" <(losses "$tmp/k2.log") > /dev/null &&
     cmp -s "$tmp/ref24/model.safetensors" "$d/model.safetensors" &&
     cmp -s "$tmp/ref24/loss.csv" "$d/loss.csv" && [ -z "$(debris "$d")" ]; then
    clean=$((clean + 1))
    after=$((after + had_latest))
  else
    bad "kill -9 $where (step ${s:-?}): resume rc=$rc2 $(tail -1 "$tmp/k2.err") $(debris "$d")"
  fi
  rm -rf "$d"
done
echo "kill -9: $kills kills of $tries runs (a ${dur_ms} ms run, $nops24 operations, each held at a drawn one):" \
  "$clean clean resumes equal to the uninterrupted run ($after killed after a commit), $none before" \
  "the first checkpoint (resume refused, as it must)"
[ $kills -eq 24 ] && [ $((clean + none)) -eq $kills ] && [ "$after" -ge 12 ] && [ "$after" -le 18 ] &&
  ok "kill -9 at $kills instants inside the run: every resume matches the uninterrupted run" ||
  bad "kill -9: $clean clean of $kills ($none without a checkpoint, $after after a commit)"

[ $fails -eq 0 ] && echo "all crash-safety checks passed" && exit 0
echo "$fails check(s) failed"
exit 1
