#!/usr/bin/env bash
# The final evaluation's exact val loss (issue 47): final_eval auto runs the
# exact pass over the val split only when it is a small part of the run (at
# most a tenth of the planned steps' operations, or under 1e11 operations);
# else the run says so when it starts and in its summary, with the share
# and the option that forces it (--final-eval exact), which a resume may
# also change; --final-eval sampled leaves it out; it cannot contradict
# --eval exact. The rule reads configs and token counts only: no machine
# speed.
# Usage: bash train_final_eval.sh <path-to-attn> <source-dir>
set -u
ATTN=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "${BASH_SOURCE[0]}")/support/lib.sh"

# ~70k val tokens through a 0.8 M-parameter model: ~1.2e11 operations, 23x
# what 2 steps of 512 tokens cost.
yes 'First Citizen: before we proceed any further, hear me speak. All: speak, speak!' |
  head -c 700000 > "$tmp/big.txt"
cat > "$tmp/big.json" << 'JSON'
{"context_length": 64, "emb_dim": 128, "n_heads": 4, "n_layers": 4, "drop_rate": 0.0,
 "batch_size": 8, "max_steps": 2, "eval_interval": 100, "eval_iters": 2}
JSON
big() { "$ATTN" train --data "$tmp/big.txt" --config "$tmp/big.json" --threads 2 "$@"; }
exact() { tail -1 "$1/loss.csv" | cut -d, -f7; } # the final evaluation's exact val loss

# 1. auto: no exact pass, said at the start and in the summary, with the share.
big --out "$tmp/a" > "$tmp/a.log" 2> "$tmp/a.err" || bad "auto run: $(cat "$tmp/a.err")"
nval=$(sed -n 's/.* \([0-9]*\) val tokens;.*/\1/p' "$tmp/a.err")
V=$(sed -n 's/.*(vocab \([0-9]*\),.*/\1/p' "$tmp/a.err")
# attn/cost.h's rule: a forward of a batch is the weight products (2 per
# weight a token meets) and the causal attention (4 C per query-key pair and
# layer); a step 3x and 3.5x of them; b batches of 8 windows over 2 steps.
share=$(awk -v n="$nval" -v V="$V" 'BEGIN { T = 64; C = 128; L = 4;
  w = int((n - 1 + T - 1) / T); b = int((w + 7) / 8);
  m = 2 * T * (12 * L * C * C + C * V); a = 4 * L * C * T * (T + 1) / 2;
  printf "%.2f", b * (m + a) / (2 * (3 * m + 3.5 * a)) }')
why="an exact pass over the $nval val tokens would cost ${share}x the steps (auto runs one up to 0.10x); --final-eval exact runs it"
if [ -n "$nval" ] && grep -qF "attn train: the final evaluation will be sampled: $why" "$tmp/a.err" &&
   grep -qF "(sampled: $why)" "$tmp/a.err" && [ -z "$(exact "$tmp/a")" ] &&
   grep -q '^step 2: train loss [0-9.]*, val loss [0-9.]*$' "$tmp/a.log"; then
  ok "auto skips a pass of ${share}x the steps, says so at the start and the end, and how to force it"
else
  bad "auto: nval=$nval share=$share $(grep 'sampled' "$tmp/a.err")"
fi

# 2. A resume may change final_eval: stopped after step 1, resumed with
#    --final-eval exact, the final evaluation takes the exact val loss.
big --out "$tmp/f" --interrupt-after 1 > "$tmp/f.log" 2> /dev/null
big --out "$tmp/f" --resume --final-eval exact > "$tmp/f2.log" 2> "$tmp/f2.err"
rc=$?
if [ $rc -eq 0 ] && [ -n "$(exact "$tmp/f")" ] &&
   grep -q '^step 2: train loss [0-9.]*, val loss [0-9.]*, exact val loss [0-9.]*$' "$tmp/f2.log" &&
   grep -q 'final val loss [0-9.]* (exact: the whole val split)' "$tmp/f2.err" &&
   ! grep -q 'will be sampled' "$tmp/f2.err" &&
   cmp -s <(head -n -1 "$tmp/a/loss.csv") <(head -n -1 "$tmp/f/loss.csv"); then
  ok "--final-eval exact (given on --resume) forces the pass: exact val loss $(exact "$tmp/f"); the steps as auto's"
else
  bad "--final-eval exact on resume: rc=$rc $(tail -2 "$tmp/f2.err")"
fi

# 3. A cheap pass (under 1e11 operations) runs under auto; --final-eval
#    sampled leaves it out and says why.
make_corpus "$tmp/small.txt"
small() { "$ATTN" train --data "$tmp/small.txt" --config "$tmp/big.json" --threads 1 --steps 1 "$@"; }
small --out "$tmp/s1" > /dev/null 2> "$tmp/s1.err"
small --out "$tmp/s2" --final-eval sampled > /dev/null 2> "$tmp/s2.err"
[ -n "$(exact "$tmp/s1")" ] && grep -q '(exact: the whole val split)' "$tmp/s1.err" &&
  [ -z "$(exact "$tmp/s2")" ] && grep -q 'final val loss [0-9.]* (sampled: --final-eval sampled)' "$tmp/s2.err" &&
  ! grep -q 'will be sampled' "$tmp/s2.err" &&
  ok "a cheap pass runs under auto; --final-eval sampled leaves it out" ||
  bad "cheap pass / sampled: $(tail -1 "$tmp/s1.err") / $(tail -1 "$tmp/s2.err")"

# 4. --final-eval sampled contradicts --eval exact: a usage error.
small --out "$tmp/x" --eval exact --final-eval sampled > /dev/null 2> "$tmp/x.err"
rc=$?
[ $rc -eq 2 ] && grep -q 'final_eval sampled contradicts eval_mode exact' "$tmp/x.err" && [ ! -e "$tmp/x" ] &&
  ok "--eval exact --final-eval sampled: exit 2, nothing made" || bad "contradiction: rc=$rc $(cat "$tmp/x.err")"

[ $fails -eq 0 ] && echo "all ok" || echo "$fails failed"
exit $((fails > 0))
