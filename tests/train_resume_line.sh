#!/usr/bin/env bash
# The command that started a run, plus --resume, continues it (issue 17 item
# 6): the preset, the config file and the options are resolved as a fresh
# start would resolve them and compared with the saved config; only a real
# difference is refused (exit 2, naming the key, both values and where the
# new one came from). max_steps, log_interval and checkpoint_interval may
# change, from options only; a bare --resume keeps working whatever preset
# the run used.
# Usage: bash train_resume_line.sh <path-to-attn> <source-dir>
set -u
ATTN=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "${BASH_SOURCE[0]}")/support/lib.sh"

make_corpus "$tmp/corpus.txt"
line=(--preset tiny --steps 30 --eval-interval 10 --data "$tmp/corpus.txt" --threads 1)

# 1. The issue's line, stopped at step 15, then the same line + --resume:
#    accepted, and the same run as one never stopped (loss.csv bit for bit).
"$ATTN" train "${line[@]}" --out "$tmp/whole" > /dev/null 2> "$tmp/whole.err" ||
  bad "uninterrupted run failed: $(cat "$tmp/whole.err")"
"$ATTN" train "${line[@]}" --out "$tmp/r" --interrupt-after 15 > /dev/null 2>&1
"$ATTN" train "${line[@]}" --out "$tmp/r" --resume > /dev/null 2> "$tmp/r.err"; rc=$?
[ $rc -eq 0 ] && cmp -s "$tmp/whole/loss.csv" "$tmp/r/loss.csv" &&
  ok "the starting line + --resume continues the run (bit for bit)" ||
  bad "up-arrow + --resume: rc=$rc $(cat "$tmp/r.err")"

# 2. ... also with the options in another order and --flag=value.
"$ATTN" train --out "$tmp/r" --threads=1 --eval-interval=10 --data "$tmp/corpus.txt" \
  --preset=tiny --steps=30 --resume > /dev/null 2> "$tmp/r2.err"; rc=$?
[ $rc -eq 0 ] && ok "reordered options, --flag=value: accepted" || bad "rc=$rc $(cat "$tmp/r2.err")"

# 3. The keys a resume may change: --steps (trains on), --log-interval,
#    --checkpoint-interval, on top of the starting line.
"$ATTN" train "${line[@]}" --out "$tmp/r" --resume --steps 32 --log-interval 7 \
  --checkpoint-interval 1 > /dev/null 2> "$tmp/r3.err"; rc=$?
[ $rc -eq 0 ] && [ "$(tail -1 "$tmp/r/loss.csv" | cut -d, -f1)" = 32 ] &&
  ok "--steps, --log-interval, --checkpoint-interval may change on resume" ||
  bad "rc=$rc $(cat "$tmp/r3.err")"

# 4. A real difference is refused, exit 2, naming the key, both values and
#    where the new value came from; nothing is trained.
refused() { # name, expected fragment, args...
  local name=$1 frag=$2
  shift 2
  "$ATTN" train "$@" > /dev/null 2> "$tmp/c.err"
  local rc=$?
  [ $rc -eq 2 ] && grep -qF -- "$frag" "$tmp/c.err" && ok "$name: $(cat "$tmp/c.err")" ||
    bad "$name: rc=$rc $(cat "$tmp/c.err")"
}
refused "another --eval-interval" "--eval-interval gives eval_interval 20, the checkpoint has 10" \
  "${line[@]}" --out "$tmp/r" --resume --eval-interval 20
refused "the line without --eval-interval" "preset 'tiny' gives eval_interval 250, the checkpoint has 10" \
  --preset tiny --data "$tmp/corpus.txt" --threads 1 --out "$tmp/r" --resume
echo '{"seed": 7}' > "$tmp/seed.json"
refused "a config file's key" "config $tmp/seed.json gives seed 7, the checkpoint has 1337" \
  "${line[@]}" --config "$tmp/seed.json" --out "$tmp/r" --resume
refused "another preset" "preset 'nanogpt-cpu' gives n_layers 4, the checkpoint has 3" \
  --preset nanogpt-cpu --steps 30 --eval-interval 10 --out "$tmp/r" --resume --threads 1
[ "$(tail -1 "$tmp/r/loss.csv" | cut -d, -f1)" = 32 ] && ok "the refused resumes trained nothing" ||
  bad "loss.csv moved: $(tail -1 "$tmp/r/loss.csv")"

# 5. No preset named: a bare --resume, and the starting line without
#    --preset (the default, tiny), continue a run of another preset and one
#    of the default.
cat > "$tmp/small.json" <<'JSON'
{"context_length": 16, "emb_dim": 16, "n_heads": 2, "n_layers": 1, "batch_size": 2,
 "max_steps": 6, "eval_interval": 3, "eval_iters": 1}
JSON
"$ATTN" train --preset nanogpt-cpu --config "$tmp/small.json" --data "$tmp/corpus.txt" --threads 1 \
  --out "$tmp/n" > /dev/null 2>&1
"$ATTN" train --out "$tmp/n" --resume --steps 8 --threads 1 > /dev/null 2> "$tmp/n.err"; rc=$?
[ $rc -eq 0 ] && [ "$(tail -1 "$tmp/n/loss.csv" | cut -d, -f1)" = 8 ] &&
  ok "bare --resume --steps 8 continues a nanogpt-cpu run" || bad "rc=$rc $(cat "$tmp/n.err")"
"$ATTN" train --config "$tmp/small.json" --eval-interval 2 --data "$tmp/corpus.txt" --threads 1 \
  --out "$tmp/d" > /dev/null 2>&1
"$ATTN" train --config "$tmp/small.json" --eval-interval 2 --data "$tmp/corpus.txt" --threads 1 \
  --out "$tmp/d" --resume --steps 8 > /dev/null 2> "$tmp/d.err"; rc=$?
[ $rc -eq 0 ] && ok "a run of the default preset resumes with its line (no --preset)" ||
  bad "rc=$rc $(cat "$tmp/d.err")"

# 6. A run extended with --resume --steps resumes with its starting line
#    (whose file says max_steps 6): the file's max_steps does not pull the
#    end back (what `make run` does after `--resume --steps 3000`).
"$ATTN" train --config "$tmp/small.json" --eval-interval 2 --data "$tmp/corpus.txt" --threads 1 \
  --out "$tmp/d" --resume > "$tmp/d2.log" 2> "$tmp/d2.err"; rc=$?
[ $rc -eq 0 ] && grep -q "resuming .* at step 8" "$tmp/d2.err" &&
  [ "$(tail -1 "$tmp/d/loss.csv" | cut -d, -f1)" = 8 ] &&
  ok "an extended run resumes with its starting line and stays at step 8" ||
  bad "rc=$rc $(cat "$tmp/d2.err")"

[ $fails -eq 0 ] && echo "all ok" || echo "$fails failed"
exit $((fails > 0))
