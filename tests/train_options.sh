#!/usr/bin/env bash
# attn train's options come from one table (issue 9): the command's own rows
# plus one row per training key made from the library's key table. Checked:
# --flag=value == --flag value; a key set by its option or by --config JSON
# resolves to the same config (--dry-run's "training" line); each bad value
# gets the one wording with the library's range; --help lists every key with
# its range; --threads is there. Issue 17: --dry-run states the time in
# words and, for a run over an hour, what this build and CPU offer to speed it
# up; the testing hooks are not in --help.
# Usage: bash train_options.sh <path-to-attn> <source-dir>
set -u
ATTN=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "${BASH_SOURCE[0]}")/support/lib.sh"

make_corpus "$tmp/corpus.txt"
dry() { "$ATTN" train --data "$tmp/corpus.txt" --out "$tmp/never" --dry-run --threads 1 "$@" 2>&1 |
  awk '$1 == "training" { print $2 }'; }

# 1. Options, --flag=value and JSON keys: the same resolved config.
a=$(dry --steps 7 --lr 0.01 --warmup-steps 3 --beta2 0.9 --dropout-stream torch-mkl --seed 5)
b=$(dry --steps=7 --lr=0.01 --warmup-steps=3 --beta2=0.9 --dropout-stream=torch-mkl --seed=5)
echo '{"max_steps": 7, "learning_rate": 0.01, "min_lr": 0.001, "warmup_steps": 3, "beta2": 0.9,
 "dropout_stream": "torch-mkl", "seed": 5}' > "$tmp/k.json"
c=$(dry --config "$tmp/k.json")
[ -n "$a" ] && [ "$a" = "$b" ] && ok "--flag=value == --flag value" || bad "'$a' vs '$b'"
[ "$a" = "$c" ] && ok "options and JSON keys resolve alike: $a" || bad "options '$a' vs JSON '$c'"
case "$a" in *'"max_steps":7,"learning_rate":0.01,"min_lr":0.001,"warmup_steps":3,'*'"beta2":0.9,'*'"seed":5,"dropout_stream":"torch-mkl"'*)
  ok "the keys took their values (--lr set min_lr to a tenth)" ;; *) bad "resolved: $a" ;; esac
d=$(dry --lr 0.01 --min-lr 0.005)
case "$d" in *'"min_lr":0.005'*) ok "--min-lr beside --lr stays" ;; *) bad "--min-lr: $d" ;; esac
[ "$(dry --threads=1 --steps 3 | grep -c max_steps)" = 1 ] && ok "--threads is an option of train" || bad "--threads"

# 2. One wording, the library's range, exit 2.
expect2() { # regex, args...
  local re=$1
  shift
  "$ATTN" train --data "$tmp/corpus.txt" --out "$tmp/never" "$@" > /dev/null 2> "$tmp/err"
  local rc=$?
  [ $rc -eq 2 ] && grep -qE -- "$re" "$tmp/err" && ok "$* -> $(cat "$tmp/err")" || bad "$*: rc=$rc $(cat "$tmp/err")"
}
expect2 "^attn train: --lr must be a number > 0, not '0'$" --lr 0
expect2 "^attn train: --lr must be a number > 0, not 'inf'$" --lr=inf
expect2 "^attn train: --batch-size must be an integer in \[1, 2147483647\], not '0'$" --batch-size 0
expect2 "^attn train: --beta2 must be a number in \[0, 1\), not '1'$" --beta2 1
expect2 "^attn train: --seed must be an integer in \[0, 9007199254740992\], not '-1'$" --seed -1
expect2 "^attn train: --dropout-stream must be one of torch-cpu, torch-mkl, not 'x'$" --dropout-stream x
expect2 "^attn train: --threads must be an integer in \[1, 4096\], not '0'$" --threads 0
expect2 "^attn train: --steps needs a value" --steps
expect2 "^attn train: --resume takes no value$" --resume=1
# The same range from JSON, worded by the library.
echo '{"beta2": 1}' > "$tmp/b.json"
expect2 "config key 'beta2' must be a number in \[0, 1\) \(got 1\)" --config "$tmp/b.json"
[ ! -e "$tmp/never" ] && ok "nothing written" || bad "files written: $(ls "$tmp/never")"

# 3. --help: every training key, its option and range.
"$ATTN" train --help > "$tmp/help"; rc=$?
miss=""
for k in batch_size max_steps learning_rate min_lr warmup_steps lr_decay_steps beta1 beta2 eps \
  weight_decay grad_clip eval_interval eval_iters log_interval checkpoint_interval seed \
  dropout_stream grad_accum; do
  grep -q "^  --[a-z0-9-]* [A-Z]* *$k: " "$tmp/help" || miss="$miss $k"
done
[ $rc -eq 0 ] && [ -z "$miss" ] && grep -q "(a number > 0; optional)" "$tmp/help" &&
  ok "--help lists all 18 training keys with their ranges" || bad "--help lacks:$miss"
long=$(awk 'length > 80' "$tmp/help" | head -1)
[ -z "$long" ] && ok "--help fits 80 columns" || bad "--help line over 80 columns: $long"

for hook in interrupt-after kill-rank kill-after; do
  grep -q -- "--$hook" "$tmp/help" && bad "--help shows the testing hook --$hook" || ok "--help hides --$hook"
done

# 4. --dry-run's time in words; the hints only for a run over an hour. The
# step counts make the verdict independent of the machine's speed: 1 tiny
# step is far below an hour, 10^8 seed004 steps far above.
plan() { "$ATTN" train --data "$tmp/corpus.txt" --out "$tmp/never" --dry-run --threads 1 "$@" 2>&1; }
short=$(plan --steps 1)
t=$(grep '^time ' <<< "$short")
if grep -qE '^time +(under a second|about [0-9]+ (seconds?|minutes?( [0-9]+ seconds?)?)) for 1 step \(' <<< "$t" &&
  ! grep -qE '[0-9]+:[0-9]{2}' <<< "$t" && ! grep -q '^faster' <<< "$short"; then
  ok "a short run: '$t', no hints"
else
  bad "short run plan: $t / $(grep '^faster' <<< "$short")"
fi
long=$(plan --preset seed004 --steps 100000000)
t=$(grep '^time ' <<< "$long")
hints=$(grep '^faster ' <<< "$long")
grep -qE '^time +about [0-9]+ (days?|hours?)( [0-9]+ (hours?|minutes?))? for 100000000 steps \(' <<< "$t" &&
  ! grep -qE '[0-9]+:[0-9]{2}' <<< "$t" && ok "a long run in words: ${t:0:60}..." || bad "long run time: $t"
# What the hints should offer, found out independently of attn: the CPU's
# flags and the engine plug-ins built beside the program (attn/engine.h).
want_bf16=0 want_mpi=0 want_cuda=0
attn_bf16 "$ATTN" && want_bf16=1
# mpirun only with cores to spare: 2 ranks of 2 threads at least.
[ -f "$(dirname "$ATTN")/libattn-mpi.so" ] && [ "$(nproc)" -ge 4 ] && want_mpi=1
[ -f "$(dirname "$ATTN")/libattn-cuda.so" ] && want_cuda=1
got_bf16=0 got_mpi=0 got_cuda=0
grep -q -- '--precision bf16' <<< "$hints" && got_bf16=1
grep -q 'mpirun -np [0-9]' <<< "$hints" && got_mpi=1
grep -q -- '--device cuda' <<< "$hints" && got_cuda=1
[ "$got_bf16$got_mpi$got_cuda" = "$want_bf16$want_mpi$want_cuda" ] &&
  { [ "$want_bf16$want_mpi$want_cuda" = 000 ] || grep -q '^faster  *over an hour here; try ' <<< "$hints"; } &&
  ok "hints over an hour: bf16 $got_bf16, mpirun $got_mpi, cuda $got_cuda (as the CPU and build offer)" ||
  bad "hints: got bf16/mpi/cuda $got_bf16$got_mpi$got_cuda, want $want_bf16$want_mpi$want_cuda: '$hints'"
if [ $want_bf16 = 1 ]; then
  plan --preset seed004 --steps 100000000 --precision bf16 | grep '^faster' | grep -q -- '--precision bf16' &&
    bad "--precision bf16 is offered to a bf16 run" || ok "a bf16 run is not offered --precision bf16"
fi

[ $fails -eq 0 ] && echo "all ok" || echo "$fails failed"
exit $((fails > 0))
