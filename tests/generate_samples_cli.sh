#!/usr/bin/env bash
# attn generate --num-samples N: N samples decoded together, printed one
# after the other with a line of 15 '-' between them; sample i is exactly
# the text of a one-sample run with --seed SEED+i (across window slides and
# with --stop), at --threads 1 and 2; greedy gives N equal texts; the
# option's range and the memory check come before any allocation.
# Usage: bash generate_samples_cli.sh <path-to-attn> <source-dir>
set -u
ATTN=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "${BASH_SOURCE[0]}")/support/lib.sh"

make_corpus "$tmp/corpus.txt"
cat > "$tmp/cfg.json" <<'JSON'
{"context_length": 16, "emb_dim": 16, "n_heads": 2, "n_layers": 1, "drop_rate": 0.0,
 "batch_size": 2, "max_steps": 30, "eval_interval": 30, "eval_iters": 1, "warmup_steps": 5}
JSON
"$ATTN" train --data "$tmp/corpus.txt" --config "$tmp/cfg.json" --threads 1 --out "$tmp/run" > /dev/null 2>&1 ||
  bad "training the test model failed"
gen() { "$ATTN" generate --checkpoint "$tmp/run" --prompt "All:" --max-new-tokens 80 --temperature 1.2 "$@"; }

# Sample i of a batched run: the lines between the i-th and (i+1)-th separator.
sample() { awk -v want="$2" '/^---------------$/ { n++; next } n == want' "$1"; }

for extra in "" "--stop e"; do
  for t in 1 2; do
    gen --seed 11 --num-samples 3 --threads $t $extra > "$tmp/batch.txt" 2> "$tmp/batch.err" ||
      bad "--num-samples 3 --threads $t $extra failed: $(cat "$tmp/batch.err")"
    same=1
    for i in 0 1 2; do
      gen --seed $((11 + i)) --threads 1 $extra > "$tmp/one.txt" 2> /dev/null
      sample "$tmp/batch.txt" $i > "$tmp/got.txt"
      cmp -s "$tmp/one.txt" "$tmp/got.txt" || { same=0; echo "sample $i:"; cat "$tmp/got.txt" "$tmp/one.txt"; }
    done
    [ $same -eq 1 ] && ok "--num-samples 3 --threads $t $extra: sample i is --seed 11+i alone" ||
      bad "--num-samples 3 --threads $t $extra differs from the single runs"
  done
done
grep -q '^attn generate: 3 samples x [0-9]* tokens in' "$tmp/batch.err" &&
  ok "stderr counts the samples and their tokens" || bad "stderr: $(cat "$tmp/batch.err")"

gen --seed 5 --num-samples 2 --temperature 0 > "$tmp/greedy.txt" 2> /dev/null &&
  [ "$(sample "$tmp/greedy.txt" 0)" = "$(sample "$tmp/greedy.txt" 1)" ] &&
  [ "$(grep -c '^---------------$' "$tmp/greedy.txt")" = 1 ] &&
  ok "greedy: both samples the same text" || bad "greedy samples differ"

gen --num-samples 0 > /dev/null 2> "$tmp/e0.err"; rc=$?
[ $rc -eq 2 ] && grep -q -- "--num-samples" "$tmp/e0.err" && ok "--num-samples 0: exit 2" ||
  bad "--num-samples 0: rc=$rc $(cat "$tmp/e0.err")"
gen --num-samples 100000 > /dev/null 2> "$tmp/e1.err"; rc=$?
[ $rc -eq 2 ] && ok "--num-samples 100000 (over 65536): exit 2" || bad "rc=$rc $(cat "$tmp/e1.err")"
gen --num-samples 65536 --max-memory 64M > /dev/null 2> "$tmp/e2.err"; rc=$?
[ $rc -eq 1 ] && grep -q "the samples' KV caches" "$tmp/e2.err" &&
  ok "65536 samples over --max-memory 64M: exit 1 before allocating" || bad "rc=$rc $(cat "$tmp/e2.err")"
gen --num-samples 2 --device cuda > /dev/null 2> "$tmp/e3.err"; rc=$?
[ $rc -eq 2 ] && grep -q "decodes one sample" "$tmp/e3.err" && ok "--device cuda with 2 samples: exit 2" ||
  bad "cuda: rc=$rc $(cat "$tmp/e3.err")"

# attn bench generate: the existing keys, then the floor's; N sequences.
"$ATTN" bench generate --preset tiny --tokens 4 --threads 1 --num-samples 3 > "$tmp/bench.txt" 2>&1; rc=$?
line=$(cat "$tmp/bench.txt")
missing=""
for k in tokens_per_s faults fastest_token_ms median_token_ms num_samples=3 weight_mb_per_step weight_gbs membw_gbs floor_pct fastest_floor_pct; do
  grep -q " $k" "$tmp/bench.txt" || missing="$missing $k"
done
[ $rc -eq 0 ] && [[ "$line" == case=generate\ preset=tiny\ precision=fp32\ threads=1\ tokens=4\ * ]] && [ -z "$missing" ] &&
  ok "bench generate --num-samples 3: one line with the floor's keys" || bad "bench generate: rc=$rc missing:$missing $line"
"$ATTN" bench generate --preset tiny --num-samples 0 > /dev/null 2>&1; rc=$?
[ $rc -eq 2 ] && ok "bench generate --num-samples 0: exit 2" || bad "bench --num-samples 0: rc=$rc"

[ $fails -eq 0 ] && echo "all ok" || echo "$fails failed"
exit $((fails > 0))
