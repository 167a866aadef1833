#!/usr/bin/env bash
# attn generate on the library's attn_generator: --stop ends the output at
# the first completion of the stop string, --window N slides keeping N
# tokens (range checked), --threads N leaves the text unchanged.
# Usage: bash generate_cli.sh <path-to-attn> <source-dir>
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
gen() { "$ATTN" generate --checkpoint "$tmp/run" --seed 7 --prompt "All:" "$@"; }

gen --max-new-tokens 300 > "$tmp/full.txt" 2> /dev/null
gen --max-new-tokens 300 --stop "e" > "$tmp/stop.txt" 2> "$tmp/stop.err"; rc=$?
# Expected: the full text cut right after the first "e" the model generated.
gen_text=$(head -c -1 "$tmp/full.txt" | tail -c +5) # what follows the prompt
want="All:${gen_text%%e*}e"
got=$(head -c -1 "$tmp/stop.txt")
[ $rc -eq 0 ] && [ -n "$got" ] && [ "$got" = "$want" ] && [ "${got: -1}" = "e" ] &&
  ok "--stop e ends right after the first generated 'e'" || bad "--stop: rc=$rc got '$got' want '$want'"
n=$(grep -o '^attn generate: [0-9]* tokens' "$tmp/stop.err" | grep -o '[0-9]*')
[ "$n" = "$((${#got} - 4))" ] && ok "the token count stops with the text ($n)" || bad "count $n for '$got'"

gen --max-new-tokens 10 --window 16 > /dev/null 2> "$tmp/w.err"; rc=$?
[ $rc -eq 2 ] && grep -q -- "--window must be an integer in \[1, 15\] (below the model's context_length), not '16'" "$tmp/w.err" &&
  ok "--window out of range: exit 2 naming [1, 15]" || bad "rc=$rc $(cat "$tmp/w.err")"
gen --max-new-tokens 60 --window 15 > "$tmp/w15.txt" 2> /dev/null &&
  gen --max-new-tokens 60 --window 2 > "$tmp/w2.txt" 2> /dev/null &&
  [ "$(head -c 16 "$tmp/w15.txt")" = "$(head -c 16 "$tmp/w2.txt")" ] && ! cmp -s "$tmp/w15.txt" "$tmp/w2.txt" &&
  ok "--window changes the text only once the window slides" || bad "--window 15 vs 2"
gen --max-new-tokens 100 --threads 1 > "$tmp/t1.txt" 2> /dev/null &&
  gen --max-new-tokens 100 --threads 2 > "$tmp/t2.txt" 2> /dev/null &&
  cmp -s "$tmp/t1.txt" "$tmp/t2.txt" && cmp -s <(head -c 104 "$tmp/full.txt") <(head -c 104 "$tmp/t1.txt") &&
  ok "--threads 1 and 2 print the same text" || bad "--threads changes the text"
gen --threads 0 > /dev/null 2>&1; [ $? -eq 2 ] && ok "--threads 0 refused (exit 2)" || bad "--threads 0 accepted"

[ $fails -eq 0 ] && echo "all ok" || echo "$fails failed"
exit $((fails > 0))
