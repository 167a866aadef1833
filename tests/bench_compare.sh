#!/usr/bin/env bash
# bench/compare.sh without timing anything: --help and --list, bad options
# (exit 2), and rows whose peer is missing printed as "skipped: why" with no
# figure in their place (nothing measured, nothing made up).
# Usage: bash bench_compare.sh <path-to-attn> <source-dir>
set -uo pipefail
attn=$1
src=$2
fail=0
check() { # description, condition
  if eval "$2"; then echo "ok: $1"; else echo "FAIL: $1"; fail=1; fi
}
cmp=$src/bench/compare.sh
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

out=$(bash "$cmp" --help)
check "--help exits 0" '[ $? -eq 0 ]'
check "--help shows the usage" 'grep -q "bench/compare.sh \[--quick\] \[--rounds N\]" <<<"$out"'
out=$(bash "$cmp" --list)
for r in mha-fwd mha-bwd gpt2-step nanogpt book-loop ch05 gen-fp32 gen-bf16; do
  check "--list names $r" 'grep -q "^$r " <<<"$out"'
done
check "--list names a peer per row" '[ "$(grep -c "peer: " <<<"$out")" -eq 8 ]'
for bad in "--rows nosuchrow" "--rounds 0" "--simd sse9" "--frobnicate"; do
  err=$(bash "$cmp" $bad 2>&1 > /dev/null)
  rc=$?
  check "$bad: exit 2" '[ $rc -eq 2 ]'
  check "$bad: says why" 'grep -q "bench/compare.sh: " <<<"$err"'
done

# Every peer missing: an llm.c folder without train_gpt2, no book, no node_modules.
mkdir -p "$tmp/llmc"
out=$(env -u LLMC_DIR -u BOOK_DIR -u NODE_MODULES ATTN="$attn" bash "$cmp" --rows gpt2-step,ch05,gen-fp32 \
  --llmc "$tmp/llmc" --book "$tmp/nobook" --raw "$tmp/raw" 2> "$tmp/err")
rc=$?
check "all rows skipped: exit 0" '[ $rc -eq 0 ]'
level=$("$attn" info --cpu --json | tr -d ' \t\n' | sed -n 's/.*"cpu":"\([^"]*\)".*/\1/p')
check "the header names the CPU class ($level)" '[ -n "$level" ] && grep -q "attn class \`$level\`" <<<"$out"'
check "the header names the CPU" 'grep -qF "$(grep -m1 "model name" /proc/cpuinfo | cut -d: -f2 | xargs)" <<<"$out"'
check "gpt2-step: skipped, no llm.c build" 'grep -q "^| GPT-2 124M step.* | skipped: no llm.c build" <<<"$out"'
check "ch05: skipped, why" 'grep -qE "^\| the book.s chapter-5 run.* \| skipped: no (book|PyTorch)" <<<"$out"'
check "gen-fp32: skipped, why" 'grep -qE "^\| GPT-2 124M generation.* \| skipped: no (book|PyTorch)" <<<"$out"'
check "three rows, all skipped" '[ "$(grep -c "| skipped: " <<<"$out")" -eq 3 ]'
check "no figure measured" '[ ! -s "$tmp/raw/results.tsv" ]'
check "no ratio printed" '! grep -q "×\*\*" <<<"$out"'
[ $fail -eq 0 ] || { cat "$tmp/err"; exit 1; }
