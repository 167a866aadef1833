#!/usr/bin/env bash
# Fine-tuning runs checkpoint and resume bit for bit (attn/finetune.h's
# attn_finetune_ckpt): a straight --task classify run against the same run
# killed (kill -9) at chosen instants and continued with the command that
# started it plus --resume: the same model bytes (cmp), the same log.csv,
# the same printed loss and accuracy lines. The instants are fixed, not
# timed: tests/shim/fault_inject.c holds the run (SIGSTOP) at the k-th file
# operation in its folder, where this test kills it, so it lands inside the
# run on any machine. Also --task instruct once (its stdout, the per-epoch
# samples included, the straight run's); a resume with another task,
# other data or other settings refused (exit 2, the folder unchanged); a
# finished run resumed: nothing trained; --dry-run's plan, nothing written.
# The starting models are the book's GPTModel after torch.manual_seed(123)
# (skip 77 without torch). Usage: bash finetune_resume.sh <attn> <source-dir>
set -u
ATTN=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
SRC=$(cd "$2" && pwd)
. "$SRC/tests/support/lib.sh"
. "$SRC/tests/python/pyenv.sh"
finetune_inputs shim
finetune_setup "$SRC" "$ATTN"
book_test_mode_model "$tmp/m.pth"
cd "$tmp" || exit 1
cls=(train --task classify --n-heads 2 --init-from m.pth --data "$FIX/train.csv"
  --val "$FIX/validation.csv" --epochs 3 --eval-interval 4)
lines() { grep -E '^(Ep |Training accuracy|Final accuracy|Initial losses|   (Training|Validation) loss)' "$1"; }

# The straight run, its folder's file operations counted.
ATTN_FAULT_DIR="$tmp/full/" ATTN_FAULT_LOG="$tmp/ops.log" LD_PRELOAD=$SHIM \
  "$ATTN" "${cls[@]}" --out full > full.out 2> full.err || bad "straight run: $(tail -3 full.err)"
nops=$(wc -l < ops.log)
nck=$(ls -d full/ckpt-* 2> /dev/null | wc -l)
[ -L full/latest ] && [ "$nck" = 1 ] && [ -f full/train_state.safetensors ] &&
  ok "a straight run: latest -> $(readlink full/latest), $nops file operations" ||
  bad "straight run folder: $(ls -la full)"

# Kill points: a third, a half and nine tenths into the run's operations.
for k in $((nops / 3)) $((nops / 2)) $((nops * 9 / 10)); do
  d=k$k
  finetune_run_killed "$k" "$d" "${cls[@]}"
  [ -L $d/latest ] || [ -d $d/ckpt-* ] || { bad "kill at op $k: no checkpoint yet"; continue; }
  before=$(readlink $d/latest)
  "$ATTN" "${cls[@]}" --out $d --resume > $d.out 2> $d.err
  rc=$?
  if [ $rc -eq 0 ] && cmp -s full/model.safetensors $d/model.safetensors &&
    cmp -s full/log.csv $d/log.csv && diff <(lines full.out) <(lines $d.out) > /dev/null; then
    ok "killed at op $k of $nops (live: $before), resumed: the same model bytes, log and lines"
  else
    bad "kill at op $k (rc $rc): $(tail -2 $d.err) $(diff <(lines full.out) <(lines $d.out) | head -4)"
  fi
done
grep -q "resumed k$((nops / 2)) at step" k$((nops / 2)).err && ok "a resume says where it starts" ||
  bad "no resume line: $(cat k$((nops / 2)).err)"

# snap DIR: its entries, sizes and links (what a refused command must not change)
snap() { find "$1" -printf '%P %s %l\n' | sort; }
finetune_run_killed $((nops / 2)) half "${cls[@]}"
s0=$(snap half)
expect() {
  local code=$1 pat=$2
  shift 2
  "$ATTN" "$@" > e.out 2> e.err
  local rc=$?
  if [ $rc -eq "$code" ] && grep -q -- "$pat" e.err && [ "$(snap half)" = "$s0" ]; then
    ok "exit $code: $(head -1 e.err)"
  else
    bad "$* -> rc $rc (want $code, '$pat'): $(cat e.err)"
  fi
}
head -20 "$FIX/train.csv" > other.csv
expect 2 "is a --task classify run" train --task instruct --n-heads 2 --init-from m.pth \
  --data "$DATA" --limit 10 --out half --resume
expect 2 "trained on other data" train --task classify --n-heads 2 --init-from m.pth \
  --data other.csv --val "$FIX/validation.csv" --epochs 3 --eval-interval 4 --out half --resume
expect 2 "other settings: lr=" "${cls[@]}" --out half --resume --lr 1e-4
expect 1 "not an empty folder" "${cls[@]}" --out half
expect 2 "holds no checkpoint" "${cls[@]}" --out nowhere --resume
out=$("$ATTN" "${cls[@]}" --out half --resume --dry-run 2>&1)
echo "$out" | grep -q "^run  *half: resumes from its checkpoint at step" &&
  echo "$out" | grep -q "^memory  *~" && echo "$out" | grep -q "^compute  *at most .* GFLOP" &&
  [ "$(snap half)" = "$s0" ] && ok "--dry-run --resume: the plan, nothing written" ||
  bad "dry run of a resume: $out"

# a finished run resumed: nothing trained, the same files
s1=$(snap full)
"$ATTN" "${cls[@]}" --out full --resume > again.out 2> again.err
[ $? -eq 0 ] && grep -q "had finished" again.err && [ "$(snap full)" = "$s1" ] &&
  diff <(lines full.out) <(lines again.out) > /dev/null &&
  ok "a finished run resumed: nothing trained, its lines again" || bad "finished: $(cat again.err)"

# --dry-run of a new run: the plan (rows, steps, parameters, memory), no folder;
# the head counted at its 2 classes: 8 rows of 48 tokens, emb 12, one block
# of 1728 weights a token and a 24-weight head: 3 (2 * 384 * 1752) + 3.5 (4 *
# 8 * 12 * 48 * 49 / 2) = 5,617,152 FLOP a step; logits and their gradient
# 2 * 384 * 2 floats (not the vocabulary's 147 MiB)
"$ATTN" "${cls[@]}" --out plan --dry-run > plan.out 2>&1
grep -q "trainable parameters" plan.out && grep -q "^memory" plan.out &&
  grep -q "^checkpoints  *plan/ckpt-<step>" plan.out && [ ! -e plan ] &&
  grep -q "^compute  *at most 0.00562 GFLOP a step" plan.out && grep -q "head 6.00 KiB" plan.out &&
  ok "--dry-run: $(grep -c . plan.out) lines, the 2-class head's cost, no folder" ||
  bad "dry run: $(cat plan.out)"

# --task instruct (chapter 7 --test_mode), killed once: half its file
# operations in, after epoch 1's sample and its checkpoint (which keeps the
# sample); the resume prints the straight run's stdout, the sample of epoch
# 1 replayed at its place (only the timing line and the folder's name differ)
if [ -f "$DATA" ]; then
  ins=(train --task instruct --n-heads 2 --init-from m.pth --data "$DATA" --limit 10 --eval-interval 1)
  ATTN_FAULT_DIR="$tmp/ifull/" ATTN_FAULT_LOG="$tmp/iops.log" LD_PRELOAD=$SHIM \
    "$ATTN" "${ins[@]}" --out ifull > ifull.out 2> ifull.err || bad "instruct: $(tail -3 ifull.err)"
  finetune_run_killed $(($(wc -l < iops.log) / 2)) ikill "${ins[@]}"
  grep -q "^Below is" ikill.out1 && grep -aq '"samples":{"dtype":"U8"' ikill/latest/train_state.safetensors ||
    bad "instruct: not killed after epoch 1's sample and its checkpoint: $(cat ikill.out1)"
  "$ATTN" "${ins[@]}" --out ikill --resume > ikill.out 2> ikill.err
  rc=$?
  stdout_of() { grep -v "^Training completed in" "$1.out" | sed "s|\b$1\b|RUN|g"; }
  [ $rc -eq 0 ] && cmp -s ifull/model.safetensors ikill/model.safetensors &&
    cmp -s ifull/log.csv ikill/log.csv && cmp -s ifull/responses.json ikill/responses.json &&
    [ "$(grep -c "^Below is" ifull.out)" = 2 ] && diff <(stdout_of ifull) <(stdout_of ikill) > /dev/null &&
    ok "instruct killed after epoch 1's sample and resumed: the same model, log, responses and stdout" ||
    bad "instruct resume (rc $rc): $(tail -2 ikill.err) $(diff <(stdout_of ifull) <(stdout_of ikill) | cut -c1-100)"
  "$ATTN" "${ins[@]}" --out ifull --resume > ifull.again 2> /dev/null
  diff <(grep "^Below is" ifull.out) <(grep "^Below is" ifull.again) > /dev/null &&
    ok "a finished instruct run resumed: its two samples printed again" ||
    bad "finished instruct resume: $(cat ifull.again)"
else
  echo "skip - instruct: the book's instruction-data.json is missing"
fi
[ $fails -eq 0 ] && echo "all ok" || echo "$fails failed"
exit $((fails > 0))
