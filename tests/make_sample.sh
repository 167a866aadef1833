#!/usr/bin/env bash
# `make sample` (issue 9): samples from the last `make run`'s model without
# training (the run folder is left byte for byte as it was) and prints what
# `attn generate` prints for the same options; with no trained model it fails
# with a message saying to run `make run` first. Runs the Makefile target with
# this build's attn (make -o build: the build step is this test's own build).
#
#   bash tests/make_sample.sh ATTN SRCDIR
set -uo pipefail
ATTN=$1
SRC=$2
BUILD=$(cd "$(dirname "$ATTN")" && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/attn-make-sample.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fails=0
n=0
ok() { n=$((n + 1)); echo "ok   $1"; }
bad() { n=$((n + 1)); fails=$((fails + 1)); echo "FAIL $1"; }
msample() { make -s --no-print-directory -o build -C "$SRC" sample BUILD="$BUILD" "$@"; }

msample RUN_DIR="$tmp/none" > "$tmp/out" 2> "$tmp/err"
rc=$?
[ $rc -ne 0 ] && grep -q "no trained model in $tmp/none/.*run 'make run' first" "$tmp/err" &&
  ok "no model: fails (rc $rc) saying to run 'make run' first" || bad "no model: rc=$rc $(cat "$tmp/err")"

for i in $(seq 1 40); do echo "First Citizen: speak, speak! $((i % 5))"; done > "$tmp/corpus.txt"
echo '{"context_length": 16, "emb_dim": 16, "n_heads": 2, "n_layers": 1, "batch_size": 2,
       "max_steps": 3, "eval_interval": 3, "eval_iters": 1}' > "$tmp/cfg.json"
"$ATTN" train --data "$tmp/corpus.txt" --config "$tmp/cfg.json" --threads 1 --out "$tmp/run" \
  > /dev/null 2>&1 || bad "training the tiny run failed"
(cd "$tmp/run" && find . -type f -exec sha256sum {} + | sort) > "$tmp/before"

msample RUN_DIR="$tmp/run" SAMPLE_ARGS="--max-new-tokens 40 --seed 3" > "$tmp/out" 2> "$tmp/err"
rc=$?
"$ATTN" generate --checkpoint "$tmp/run" --max-new-tokens 40 --seed 3 > "$tmp/want" 2> /dev/null
grep -v "^$BUILD/attn generate" "$tmp/out" > "$tmp/got" # make echoes the command line
[ $rc -eq 0 ] && [ -s "$tmp/want" ] && cmp -s "$tmp/got" "$tmp/want" &&
  ok "make sample prints attn generate's text for the same options" ||
  bad "make sample: rc=$rc, got '$(cat "$tmp/got")' want '$(cat "$tmp/want")' err '$(cat "$tmp/err")'"
(cd "$tmp/run" && find . -type f -exec sha256sum {} + | sort) > "$tmp/after"
cmp -s "$tmp/before" "$tmp/after" && ok "the run folder is untouched (no training)" ||
  bad "make sample changed the run folder"

echo "make_sample: $((n - fails)) of $n checks passed"
[ "$fails" -eq 0 ]
