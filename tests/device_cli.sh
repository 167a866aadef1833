#!/usr/bin/env bash
# --device / --precision on the CLI, on any machine: bad names exit 2 naming
# the choices; bf16 on the CPU trainer runs on an AVX512-BF16 CPU, else
# exits 2 saying what it needs; generate --precision bf16 (bf16 weights,
# fp32 sums) runs at every ATTN_SIMD level, the same text at avx2 as at
# avx512 (the same sums), greedy and top-k;
# --device cuda either runs (a GPU is there) or exits 1 saying why not
# ("built without CUDA" / "no CUDA device"), with no checkpoint written.
# Usage: bash device_cli.sh <path-to-attn> <source-dir>
set -u
ATTN=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
ok() { echo "ok   - $1"; }
bad() { echo "FAIL - $1"; fails=$((fails + 1)); }
for i in $(seq 1 40); do echo "To be, or not to be, that is the question: $((i % 5))."; done > "$tmp/c.txt"
cat > "$tmp/cfg.json" <<'JSON'
{"context_length": 16, "emb_dim": 32, "n_heads": 2, "n_layers": 1, "batch_size": 2,
 "max_steps": 3, "eval_interval": 3, "eval_iters": 1}
JSON
train() { "$ATTN" train --data "$tmp/c.txt" --config "$tmp/cfg.json" --threads 1 "$@"; }

train --device tpu --out "$tmp/a" > /dev/null 2> "$tmp/err"; rc=$?
[ $rc -eq 2 ] && grep -q "one of cpu, cuda" "$tmp/err" && ok "train --device tpu: exit 2, $(head -1 "$tmp/err")" ||
  bad "train --device tpu: rc $rc, $(cat "$tmp/err")"
train --precision fp8 --out "$tmp/b" > /dev/null 2> "$tmp/err"; rc=$?
[ $rc -eq 2 ] && grep -q "one of fp32, bf16" "$tmp/err" && ok "train --precision fp8: exit 2" ||
  bad "train --precision fp8: rc $rc, $(cat "$tmp/err")"
train --precision bf16 --out "$tmp/c" > /dev/null 2> "$tmp/err"; rc=$?
if "$ATTN" info --cpu --json | grep -q '"bf16_engine":[[:space:]]*true'; then
  [ $rc -eq 0 ] && [ -s "$tmp/c/model.safetensors" ] &&
    ok "train --precision bf16 on an AVX512-BF16 CPU: runs, checkpoint written" ||
    bad "train --precision bf16 on the CPU: rc $rc, $(cat "$tmp/err")"
else
  [ $rc -eq 2 ] && grep -q "AVX512-BF16" "$tmp/err" && [ ! -e "$tmp/c/model.safetensors" ] &&
    ok "train --precision bf16 on a CPU without AVX512-BF16: exit 2, nothing written" ||
    bad "train --precision bf16 on the CPU: rc $rc, $(cat "$tmp/err")"
fi
train --device cuda --out "$tmp/d" > /dev/null 2> "$tmp/err"; rc=$?
if [ $rc -eq 0 ]; then
  [ -s "$tmp/d/model.safetensors" ] && ok "train --device cuda ran on a GPU" || bad "GPU run wrote no checkpoint"
elif [ $rc -eq 1 ] && grep -q -e "without CUDA" -e "no CUDA device" "$tmp/err" && [ ! -e "$tmp/d/model.safetensors" ]; then
  ok "train --device cuda without a GPU: exit 1, $(head -1 "$tmp/err")"
else
  bad "train --device cuda: rc $rc, $(cat "$tmp/err")"
fi
train --out "$tmp/e" > /dev/null 2>&1 || bad "CPU run failed"
# and one whose weights span whole pages: bf16 generation releases their
# fp32 pages (issue 50), so a step that still read them would read zeros
sed 's/"emb_dim": 32/"emb_dim": 128/' "$tmp/cfg.json" > "$tmp/wide.json"
"$ATTN" train --data "$tmp/c.txt" --config "$tmp/wide.json" --threads 1 --out "$tmp/w" > /dev/null 2>&1 ||
  bad "CPU run (emb_dim 128) failed"
for run in e w; do
for args in "--temperature 0" "--top-k 5 --seed 7"; do
  for level in avx512 avx2 generic; do
    ATTN_SIMD=$level "$ATTN" generate "$tmp/$run" --precision bf16 --max-new-tokens 40 --threads 1 \
      $args > "$tmp/gen.$level" 2> "$tmp/err"; rc=$?
    [ $rc -eq 0 ] && [ -s "$tmp/gen.$level" ] && ok "$run: generate --precision bf16 $args at ATTN_SIMD=$level" ||
      bad "$run: generate --precision bf16 $args at ATTN_SIMD=$level: rc $rc, $(cat "$tmp/err")"
  done
  cmp -s "$tmp/gen.avx512" "$tmp/gen.avx2" && ok "$run: bf16 $args: avx2's text is avx512's" ||
    bad "$run: bf16 $args: avx2 and avx512 differ: $(diff "$tmp/gen.avx512" "$tmp/gen.avx2" | head -4)"
done
done
"$ATTN" generate --checkpoint "$tmp/e" --device gpu --max-new-tokens 5 > /dev/null 2> "$tmp/err"; rc=$?
[ $rc -eq 2 ] && grep -q "^attn generate: --device must be one of cpu, cuda, not 'gpu'$" "$tmp/err" &&
  ok "generate --device gpu: exit 2" ||
  bad "generate --device gpu: rc $rc, $(cat "$tmp/err")"
"$ATTN" generate --checkpoint "$tmp/e" --device cuda --max-new-tokens 5 > /dev/null 2> "$tmp/err"; rc=$?
if [ $rc -eq 0 ] || { [ $rc -eq 1 ] && grep -q -e "without CUDA" -e "no CUDA device" "$tmp/err"; }; then
  ok "generate --device cuda: rc $rc"
else
  bad "generate --device cuda: rc $rc, $(cat "$tmp/err")"
fi
echo "$fails failed"
[ $fails -eq 0 ]
