#!/usr/bin/env bash
# attn bench: one key=value line per case with every documented key, for the
# fused and the reference path; bad input fails with a message and exit 2.
# Usage: bash bench_cli.sh <path-to-attn> <source-dir>
set -uo pipefail
attn=$1
fail=0
check() { # description, condition
  if eval "$2"; then echo "ok: $1"; else echo "FAIL: $1"; fail=1; fi
}
out=$("$attn" bench mha --batch 1 --tokens 33 --d-model 16 --heads 2 --repeat 1 --threads 2 --backward)
check "bench mha exits 0" '[ $? -eq 0 ]'
for c in mha core sgemm; do
  line=$(grep "^case=$c " <<<"$out")
  check "case=$c printed" '[ -n "$line" ]'
  for k in B=1 T=33 D=16 H=2 mode= threads=2 median_s= min_s= gflops= peak_rss_mb=; do
    check "case=$c has $k" 'grep -q " $k" <<<"$line"'
  done
done
check "mode is forward+backward" 'grep -q "^case=mha .*mode=forward+backward" <<<"$out"'
floor=$(grep "^case=floor " <<<"$out")
for k in B=1 T=33 D=16 H=2 mode=forward+backward threads=2 gflop= floor_s= mha_over_floor= kernels= openblas=; do
  check "case=floor has $k" 'grep -q " $k" <<<"$floor"'
done
# the kernels named are the ones ATTN_SIMD leaves (attn info --cpu's fp32 path)
for level in generic avx2 avx512; do
  want=$(ATTN_SIMD=$level "$attn" info --cpu | awk '$1 == "fp32" && $2 == "kernels" {print $3}')
  got=$(ATTN_SIMD=$level "$attn" bench mha --batch 1 --tokens 9 --d-model 8 --heads 2 --repeat 1 --threads 1 | grep "^case=floor")
  check "ATTN_SIMD=$level: kernels=$want" '[ -n "$want" ] && grep -q " kernels=$want " <<<"$got"'
done
rope=$("$attn" bench mha --batch 1 --tokens 9 --d-model 16 --heads 4 --kv-heads 2 --repeat 1 --backward --mha-only --positions rope)
check "--positions rope adds case=rope, same sizes" 'grep -q "^case=rope B=1 T=9 D=16 H=4 mode=forward+backward " <<<"$rope"'
check "no case=rope without rope" '! grep -q "^case=rope" <<<"$out"'
ref=$("$attn" bench mha --batch 1 --tokens 9 --d-model 8 --heads 2 --repeat 1 --reference)
check "reference path timed" 'grep -q "^case=mha_reference .*mode=forward " <<<"$ref"'
sg=$("$attn" bench sgemm --m 32 --n 16 --k 8 --repeat 1 --threads 1)
check "sgemm case" 'grep -q "^case=sgemm .*mode=32x16x8 threads=1" <<<"$sg"'
if "$attn" info --cpu --json | grep -q '"bf16_engine":[[:space:]]*true'; then # the bf16 engine's product, and the kernel
  sg=$("$attn" bench sgemm --m 32 --n 16 --k 8 --repeat 1 --threads 1 --precision bf16)
  check "bf16 sgemm case" 'grep -q "^case=sgemm .*mode=32x16x8,bf16 threads=1" <<<"$sg"'
  out=$("$attn" bench mha --batch 1 --tokens 33 --d-model 16 --heads 2 --repeat 1 --backward --precision bf16)
  check "bf16 core case" 'grep -q "^case=core .*mode=forward+backward,bf16" <<<"$out"'
fi
err=$("$attn" bench mha --tokens 8 --d-model 10 --heads 3 2>&1 >/dev/null); rc=$?
check "indivisible heads rejected (exit 2)" '[ $rc -eq 2 ]'
check "message names the problem" 'grep -q "divisible" <<<"$err"'
err=$("$attn" bench mha --threads zero 2>&1 >/dev/null); rc=$?
check "bad --threads rejected" '[ $rc -eq 2 ] && grep -q "attn bench: --threads" <<<"$err"'
err=$("$attn" bench nope 2>&1 >/dev/null); rc=$?
check "unknown benchmark rejected" '[ $rc -eq 2 ] && grep -q "unknown benchmark" <<<"$err"'
# bench train --context N: llm.c's shape (B4 T64 for GPT-2) on any preset.
printf 'First Citizen:\nBefore we proceed any further, hear me speak.\n%.0s' $(seq 200) > "${TMPDIR:-/tmp}/bench_cli_corpus.$$"
out=$("$attn" bench train --preset tiny --batch-size 2 --context 16 --steps 1 --threads 1 \
  --data "${TMPDIR:-/tmp}/bench_cli_corpus.$$" 2>&1); rc=$?
check "bench train --context 16 trains 2 x 16 tokens" '[ $rc -eq 0 ] && grep -q "case=train preset=tiny B=2 T=16 " <<<"$out"'
err=$("$attn" bench train --preset tiny --context 65 --data "${TMPDIR:-/tmp}/bench_cli_corpus.$$" 2>&1 >/dev/null); rc=$?
check "bench train --context over context_length rejected" '[ $rc -eq 2 ] && grep -q "over the preset" <<<"$err"'
# --config: the preset's model with keys over it (llm.c's tied GPT-2 with qkv bias).
cfg=${TMPDIR:-/tmp}/bench_cli_cfg.$$.json
echo '{"n_layers": 1}' > "$cfg"
w1=$("$attn" bench generate --preset tiny --tokens 2 --threads 1 | sed -n 's/.*weight_mb_per_step=\([0-9.]*\).*/\1/p')
w2=$("$attn" bench generate --preset tiny --config "$cfg" --tokens 2 --threads 1 | sed -n 's/.*weight_mb_per_step=\([0-9.]*\).*/\1/p')
check "bench generate --config n_layers 1 streams fewer weights" "awk -v a='$w1' -v b='$w2' 'BEGIN {exit !(b > 0 && b < a)}'"
echo '{"n_layer": 1}' > "$cfg"
err=$("$attn" bench train --preset tiny --config "$cfg" 2>&1 >/dev/null); rc=$?
check "bench train --config with an unknown key rejected" '[ $rc -eq 2 ] && grep -q "n_layers" <<<"$err"'
rm -f "${TMPDIR:-/tmp}/bench_cli_corpus.$$" "$cfg"
exit $fail
