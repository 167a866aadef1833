#!/usr/bin/env bash
# Resuming from anywhere (issue 9): the resume hint that attn train prints
# (on Ctrl-C and at the end) works when run from another folder, even when
# the run was started with a relative --data and --out (the run records its
# corpus by absolute path; the hint names the folder by its absolute path,
# quoted when it holds a space); and --resume with the --preset/--config it
# was started with is accepted, while one that disagrees with the checkpoint
# is refused naming the key and both values.
# Usage: bash train_resume_paths.sh <path-to-attn> <source-dir>
set -u
ATTN=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "${BASH_SOURCE[0]}")/support/lib.sh"

mkdir -p "$tmp/a" "$tmp/b"
make_corpus "$tmp/a/corpus.txt"
cat > "$tmp/a/cfg.json" <<'JSON'
{"context_length": 16, "emb_dim": 16, "n_heads": 2, "n_layers": 1, "drop_rate": 0.1,
 "batch_size": 2, "max_steps": 40, "eval_interval": 10, "eval_iters": 1,
 "warmup_steps": 5, "log_interval": 1}
JSON
# hint FILE PATTERN: the command after "PATTERN: " in FILE's last line with it,
# with `attn` replaced by this build's binary.
hint() { grep -o "$2: attn train [^)]*" "$1" | tail -1 | sed "s|^$2: attn |\"\$ATTN\" |"; }

# 1. Reference: the whole run in one go.
(cd "$tmp/a" && "$ATTN" train --data corpus.txt --config cfg.json --threads 1 --out ref > /dev/null 2>&1) ||
  bad "reference run failed"

# 2. Relative --data and --out, stopped after step 13; the printed hint run
#    from another folder continues it to the reference's end, bit for bit.
(cd "$tmp/a" && "$ATTN" train --data corpus.txt --config cfg.json --threads 1 --out "my run" \
  --interrupt-after 13 > /dev/null 2> "$tmp/stop.err"); rc=$?
cmd=$(hint "$tmp/stop.err" "continue with")
[ $rc -eq 130 ] && [ -n "$cmd" ] && ok "interrupted run prints a resume hint: ${cmd#\"\$ATTN\" }" ||
  bad "interrupt: rc=$rc $(cat "$tmp/stop.err")"
case "$cmd" in *"'$tmp/a/my run'"*) ok "the hint names the folder by its absolute path, quoted" ;;
  *) bad "hint path: $cmd" ;; esac
(cd "$tmp/b" && eval "$cmd --threads 1" > /dev/null 2> "$tmp/res.err"); rc=$?
[ $rc -eq 0 ] && grep -q "resuming .* at step 13" "$tmp/res.err" &&
  ok "the hint works from another folder (resumed at step 13)" || bad "hint from elsewhere: rc=$rc $(cat "$tmp/res.err")"
cmp -s "$tmp/a/ref/loss.csv" "$tmp/a/my run/loss.csv" &&
  cmp -s "$tmp/a/ref/model.safetensors" "$tmp/a/my run/model.safetensors" &&
  ok "resumed from elsewhere == uninterrupted run (loss.csv, weights)" || bad "resumed run differs"
# The end-of-run hint, from a third folder: train on to step 50.
cmd=$(hint "$tmp/res.err" "train on with")
(cd / && eval "${cmd/--steps N/--steps 50} --threads 1" > /dev/null 2> "$tmp/more.err"); rc=$?
[ $rc -eq 0 ] && [ "$(tail -1 "$tmp/a/my run/loss.csv" | cut -d, -f1)" = 50 ] &&
  ok "the end-of-run hint (--steps 50) works from /" || bad "end hint: rc=$rc '$cmd' $(cat "$tmp/more.err")"

# A run extended past its config's max_steps resumes with that config
# repeated (as `make run` repeats --preset after `--resume --steps N`):
# max_steps is not compared, so the run stays at 50 and just ends.
(cd "$tmp/a" && "$ATTN" train --data corpus.txt --config cfg.json --out "my run" --resume --threads 1 \
  > /dev/null 2> "$tmp/again.err"); rc=$?
[ $rc -eq 0 ] && [ "$(tail -1 "$tmp/a/my run/loss.csv" | cut -d, -f1)" = 50 ] &&
  ok "an extended run resumes with its first --config repeated" || bad "rc=$rc $(cat "$tmp/again.err")"

# 3. --resume with the --preset and --config the run started with (no
#    --data, from another folder): accepted, and the same run bit for bit.
(cd "$tmp/a" && "$ATTN" train --data corpus.txt --preset nanogpt-cpu --config cfg.json --threads 1 \
  --out p1 > /dev/null 2>&1)
(cd "$tmp/a" && "$ATTN" train --data corpus.txt --preset nanogpt-cpu --config cfg.json --threads 1 \
  --out p2 --interrupt-after 9 > /dev/null 2>&1)
(cd "$tmp/b" && "$ATTN" train --preset nanogpt-cpu --config ../a/cfg.json --threads 1 --out ../a/p2 \
  --resume > /dev/null 2> "$tmp/same.err"); rc=$?
[ $rc -eq 0 ] && cmp -s "$tmp/a/p1/loss.csv" "$tmp/a/p2/loss.csv" &&
  ok "--resume with the same --preset and --config continues the run" ||
  bad "same preset/config: rc=$rc $(cat "$tmp/same.err")"

# 4. ... and refused, exit 2, naming what differs, when they disagree.
refused() { # name, expected message fragment, args...
  local name=$1 frag=$2
  shift 2
  "$ATTN" train --out "$tmp/a/p2" --resume --threads 1 "$@" > /dev/null 2> "$tmp/c.err"
  local rc=$?
  if [ $rc -eq 2 ] && grep -qF -- "$frag" "$tmp/c.err"; then
    ok "$name: $(cat "$tmp/c.err")"
  else
    bad "$name: rc=$rc $(cat "$tmp/c.err")"
  fi
}
refused "another preset" "preset 'tiny' gives learning_rate 0.002, the checkpoint has 0.001" \
  --preset tiny --config "$tmp/a/cfg.json"
sed 's/"emb_dim": 16/"emb_dim": 32/' "$tmp/a/cfg.json" > "$tmp/wide.json"
refused "a config file with another width" "config $tmp/wide.json gives emb_dim 32, the checkpoint has 16" \
  --config "$tmp/wide.json"
refused "a preset alone (its own model)" "preset 'nanogpt-cpu' gives context_length 64, the checkpoint has 16" \
  --preset nanogpt-cpu
refused "an option that changes the run" "different config: --batch-size gives batch_size 3, the checkpoint has 2" \
  --batch-size 3

[ $fails -eq 0 ] && echo "all ok" || echo "$fails failed"
exit $((fails > 0))
