#!/usr/bin/env bash
# Fine-tuning at --precision bf16 (matrix products on bf16 operands, fp32
# sums, weights and AdamW): chapter 6's classifier (2-way head, last block
# trainable), appendix E's LoRA and chapter 7's instruct run on the book's
# --test_mode model. Each runs, gives the same bytes at 1 and 2 threads
# (model, log.csv, responses.json), is killed -9 half-way (a fixed instant:
# tests/shim/fault_inject.c) and resumed to the same bytes, and its losses
# (every one log.csv holds) are within 2^-8 of the fp32 run's, relative to
# max(1, |loss|): a bf16 operand is its fp32 value within 2^-9 (relative),
# and a loss is a mean of log-softmaxes over a few such products, so its
# error is a few 2^-9 at most and averages down over the sums; the runs
# here stay under 6e-4 (relative) over their 66 or 2 steps, and 2^-8
# (3.9e-3) leaves room for the drift training adds, yet catches a path
# that is not bf16-close (a wrong scale or head is off by far more).
# Skips (77) where attn has no bf16 engine (AVX512-BF16) or no torch.
# Usage: bash finetune_bf16.sh <attn> <source-dir>
set -u
ATTN=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
SRC=$(cd "$2" && pwd)
. "$SRC/tests/support/lib.sh"
. "$SRC/tests/python/pyenv.sh"
finetune_inputs shim
attn_bf16 "$ATTN" || { echo "SKIP: attn runs no bf16 here (AVX512-BF16 under ATTN_SIMD)"; exit 77; }
finetune_setup "$SRC" "$ATTN"
book_test_mode_model "$tmp/m.pth"
cd "$tmp" || exit 1
base=(train --n-heads 2 --init-from m.pth)
cls=("${base[@]}" --task classify --data "$FIX/train.csv" --val "$FIX/validation.csv" --epochs 2)
lora=("${cls[@]}" --lora-rank 16 --lora-alpha 16 --lr 8e-4)
ins=("${base[@]}" --task instruct --data "$DATA" --limit 10 --lora-rank 4 --lora-alpha 8)

# close FP32 BF16: every loss of BF16/log.csv within 2^-8 of FP32's (relative
# to max(1, |loss|)); the worst relative difference printed.
close() {
  /usr/bin/python3 - "$1/log.csv" "$2/log.csv" << 'EOF'
import sys
def losses(p):
    rows = [l.split(",") for l in open(p).read().splitlines()[1:]]
    return [(r[0], r[2], float(r[3]), float(r[4])) for r in rows if r[0].endswith("loss")]
a, b = losses(sys.argv[1]), losses(sys.argv[2])
assert a and [x[:2] for x in a] == [x[:2] for x in b], (a, b)
worst = 0.0
for x, y in zip(a, b):
    for u, v in ((x[2], y[2]), (x[3], y[3])):
        rel = abs(u - v) / max(1.0, abs(u))
        assert rel <= 2 ** -8, (x, y)
        worst = max(worst, rel)
assert worst > 0, "bf16 gave fp32's bits: not a bf16 run"
print(f"{len(a)} loss pairs within 2^-8 of fp32 (worst {worst:.1e})")
EOF
}

# same A B FILES...: the files of runs A and B byte for byte
same() {
  local a=$1 b=$2 f
  shift 2
  for f in "$@"; do cmp -s "$a/$f" "$b/$f" || return 1; done
}

# check NAME FILES -- ARGS...: fp32 and bf16 runs, bf16 at 1 and 2 threads,
# bf16 killed half-way and resumed.
check() {
  local name=$1 files=$2
  shift 3
  "$ATTN" "$@" --out "${name}32" > "${name}32.out" 2>&1 || bad "$name fp32: $(tail -2 "${name}32.out")"
  ATTN_FAULT_DIR="$tmp/${name}1/" ATTN_FAULT_LOG="$tmp/$name.ops" LD_PRELOAD=$SHIM \
    "$ATTN" "$@" --precision bf16 --threads 1 --out "${name}1" > "${name}1.out" 2>&1 ||
    bad "$name bf16: $(tail -2 "${name}1.out")"
  "$ATTN" "$@" --precision bf16 --threads 2 --out "${name}2" > "${name}2.out" 2>&1
  # shellcheck disable=SC2086 # files: a list
  same "${name}1" "${name}2" $files && ok "$name bf16: 1 and 2 threads, the same $files" ||
    bad "$name bf16: 1 and 2 threads differ"
  msg=$(close "${name}32" "${name}1" 2>&1) && ok "$name bf16: $msg" || bad "$name bf16 vs fp32: $msg"
  finetune_run_killed $(($(wc -l < "$name.ops") / 2)) "${name}k" "$@" --precision bf16 --threads 2
  "$ATTN" "$@" --precision bf16 --threads 2 --out "${name}k" --resume > "${name}k.out" 2>&1
  local rc=$?
  # shellcheck disable=SC2086
  [ $rc -eq 0 ] && grep -q "resumed ${name}k at step" "${name}k.out" && same "${name}1" "${name}k" $files &&
    ok "$name bf16 killed half-way and resumed: the same $files" ||
    bad "$name bf16 resume (rc $rc): $(tail -2 "${name}k.out")"
}

check head "model.safetensors log.csv" -- "${cls[@]}"
check lora "model.safetensors log.csv" -- "${lora[@]}"
if [ -f "$DATA" ]; then
  check sft "model.safetensors log.csv responses.json" -- "${ins[@]}" --eval-interval 1
else
  echo "skip - instruct: the book's instruction-data.json is missing"
fi
[ $fails -eq 0 ] && echo "all ok" || echo "$fails failed"
exit $((fails > 0))
