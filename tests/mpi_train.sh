#!/usr/bin/env bash
# Data-parallel training under mpirun (attn/dist.h), end to end on a small
# corpus and model with dropout: `mpirun -np 2` (1 thread each) against one
# process with --grad-accum 2 — the same loss lines and checkpoint bytes —,
# resume after a rank dies, resume with another rank layout, and the start-up
# refusals (different configs, a bad corpus path on one rank, grad_accum not
# a multiple of the ranks). Skipped (exit 77) when attn was built without MPI
# or mpirun is missing.
# Usage: bash mpi_train.sh <path-to-attn> <source-dir>
set -u
ATTN=$1
tmp=$(mktemp -d); [ -n "${KEEP:-}" ] && echo "kept in $tmp"
trap '[ -n "${KEEP:-}" ] || rm -rf "$tmp"' EXIT
. "$(dirname "${BASH_SOURCE[0]}")/support/lib.sh"

# Open MPI refuses root without these; two cores need --oversubscribe.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
if ! command -v mpirun > /dev/null; then
  echo "SKIP - mpirun not installed (scripts/install-deps.sh test installs openmpi-bin)"
  exit 77
fi
# Open MPI's own allocations are not freed at exit: no leak report for the
# ranks under ASan (single-process runs keep the caller's ASAN_OPTIONS).
mpi() { ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0 mpirun --oversubscribe \
  -x OMPI_ALLOW_RUN_AS_ROOT -x OMPI_ALLOW_RUN_AS_ROOT_CONFIRM -x OMP_NUM_THREADS -x ASAN_OPTIONS "$@"; }
# Two ranks: one rank alone runs without MPI (it never opens the plug-in).
probe=$(mpi -np 2 "$ATTN" train --steps 0 2>&1)
if grep -q "built without MPI" <<<"$probe"; then
  echo "SKIP - this attn was built without MPI: $probe"
  exit 77
fi

make_corpus "$tmp/corpus.txt"
cat > "$tmp/cfg.json" <<'JSON'
{"context_length": 16, "emb_dim": 32, "n_heads": 2, "n_layers": 2, "drop_rate": 0.1,
 "batch_size": 4, "max_steps": 20, "eval_interval": 10, "eval_iters": 3,
 "log_interval": 1, "warmup_steps": 5, "checkpoint_interval": 5}
JSON
args=(train --data "$tmp/corpus.txt" --config "$tmp/cfg.json" --threads 1)
losses() { sed 's/, time .*//' "$@"; } # drop the wall-clock part of iter lines
same_ckpt() { cmp -s "$1/model.safetensors" "$2/model.safetensors" &&
  cmp -s "$1/train_state.safetensors" "$2/train_state.safetensors" && cmp -s "$1/loss.csv" "$2/loss.csv"; }

# 1. Two ranks against one process accumulating two micro-batches.
"$ATTN" "${args[@]}" --grad-accum 2 --out "$tmp/ga" > "$tmp/ga.log" 2> "$tmp/ga.err" ||
  bad "--grad-accum 2 run failed: $(cat "$tmp/ga.err")"
mpi -np 2 "$ATTN" "${args[@]}" --out "$tmp/np2" > "$tmp/np2.log" 2> "$tmp/np2.err" ||
  bad "mpirun -np 2 failed: $(cat "$tmp/np2.err")"
[ "$(grep -c '^iter ' "$tmp/np2.log")" -eq 20 ] && grep -q "^step 20: train loss" "$tmp/np2.log" &&
  ok "rank 0 alone logs (20 iter lines, one per step)" || bad "np2 log: $(head -3 "$tmp/np2.log")"
if diff <(losses "$tmp/ga.log") <(losses "$tmp/np2.log") > "$tmp/d"; then
  ok "mpirun -np 2 logs the same losses as --grad-accum 2, bit for bit"
else
  bad "losses differ: $(head -5 "$tmp/d")"
fi
same_ckpt "$tmp/ga" "$tmp/np2" && ok "mpirun -np 2 writes the same checkpoint bytes as --grad-accum 2" ||
  bad "checkpoints differ between mpirun -np 2 and --grad-accum 2"
grep -q "MPI: 2 ranks; rank 0 spent [0-9.]* ms per step in MPI" "$tmp/np2.err" &&
  ok "MPI time and bytes per step reported" || bad "no MPI summary: $(cat "$tmp/np2.err")"
# Accumulation really changes the run (the comparison above is not vacuous).
"$ATTN" "${args[@]}" --out "$tmp/one" > "$tmp/one.log" 2>&1
! cmp -s "$tmp/one/model.safetensors" "$tmp/ga/model.safetensors" &&
  ok "--grad-accum 2 differs from a plain run" || bad "--grad-accum 2 equals a plain run"

# 2. Four micro-batches: one process, 2 ranks x 2, 4 ranks x 1 — one run.
"$ATTN" "${args[@]}" --grad-accum 4 --out "$tmp/g4" > "$tmp/g4.log" 2>&1
mpi -np 2 "$ATTN" "${args[@]}" --grad-accum 4 --out "$tmp/m4" > "$tmp/m4.log" 2>&1
mpi -np 4 "$ATTN" "${args[@]}" --out "$tmp/n4" > "$tmp/n4.log" 2>&1
same_ckpt "$tmp/g4" "$tmp/m4" && same_ckpt "$tmp/g4" "$tmp/n4" &&
  ok "grad_accum 4 as 1x4, 2x2 and 4x1 ranks x micro-batches: identical checkpoints" ||
  bad "grad_accum 4 layouts differ"

# 2b. A model whose products are split over threads (issue 31): 2 ranks of
# one thread each against one process accumulating 2 micro-batches at the
# default thread count (every CPU).
cat > "$tmp/wide.json" <<'JSON'
{"context_length": 64, "emb_dim": 128, "n_heads": 4, "n_layers": 2, "drop_rate": 0.1,
 "batch_size": 8, "max_steps": 6, "eval_interval": 3, "eval_iters": 2, "log_interval": 1}
JSON
wide=(train --data "$tmp/corpus.txt" --config "$tmp/wide.json")
env -u OMP_NUM_THREADS "$ATTN" "${wide[@]}" --grad-accum 2 --out "$tmp/wga" > /dev/null 2>&1
mpi -np 2 "$ATTN" "${wide[@]}" --threads 1 --out "$tmp/wnp" > /dev/null 2> "$tmp/wnp.err"
cmp -s "$tmp/wga/model.safetensors" "$tmp/wnp/model.safetensors" &&
  cmp -s "$tmp/wga/train_state.safetensors" "$tmp/wnp/train_state.safetensors" &&
  ok "emb 128: mpirun -np 2 (1 thread each) = --grad-accum 2 at the default threads, byte for byte" ||
  bad "emb 128: mpirun -np 2 and --grad-accum 2 at the default thread count differ $(tail -1 "$tmp/wnp.err")"

# 3. Rank 1 dies after step 13 (checkpoints every 5 steps): the job ends
# with an error naming the rank, the step-10 checkpoint is intact, and
# --resume under mpirun finishes the run exactly.
mpi -np 2 "$ATTN" "${args[@]}" --out "$tmp/kill" --kill-rank 1 --kill-after 13 \
  > "$tmp/kill.log" 2> "$tmp/kill.err"
rc=$?
[ $rc -ne 0 ] && grep -qi "rank 1" "$tmp/kill.err" &&
  ok "a killed rank ends the job: exit $rc, message names rank 1" ||
  bad "killed rank: rc=$rc $(cat "$tmp/kill.err")"
grep -aq '"step":"10"' "$tmp/kill/train_state.safetensors" &&
  "$ATTN" generate --checkpoint "$tmp/kill" --max-new-tokens 5 > /dev/null 2>&1 &&
  ok "the last complete checkpoint (step 10) is intact and loads" || bad "checkpoint after the kill"
mpi -np 2 "$ATTN" train --out "$tmp/kill" --resume --threads 1 > "$tmp/kres.log" 2> "$tmp/kres.err" ||
  bad "resume under mpirun failed: $(cat "$tmp/kres.err")"
if diff <(losses "$tmp/ga.log" | sed -n '/^iter 10:/,$p') <(losses "$tmp/kres.log") > "$tmp/d"; then
  ok "resume under mpirun logs the reference losses from step 10 on"
else
  bad "resumed losses differ: $(head -5 "$tmp/d")"
fi
same_ckpt "$tmp/ga" "$tmp/kill" && ok "resumed run ends with the reference checkpoint bytes" ||
  bad "resumed checkpoint differs"

# 4. Another layout on resume: 2 ranks interrupted at step 7, one process
# (grad_accum 2 from the checkpoint) finishes it — still the same run.
mpi -np 2 "$ATTN" "${args[@]}" --out "$tmp/lay" --interrupt-after 7 > /dev/null 2> "$tmp/lay.err"
rc=$?
"$ATTN" train --out "$tmp/lay" --resume --threads 1 > /dev/null 2> "$tmp/lay2.err" ||
  bad "single-process resume of a 2-rank run failed: $(cat "$tmp/lay2.err")"
[ $rc -eq 130 ] && same_ckpt "$tmp/ga" "$tmp/lay" &&
  ok "2 ranks interrupted at step 7, resumed by one process: reference checkpoint" ||
  bad "layout change on resume: rc=$rc"

# 5. Start-up refusals.
mpi -np 1 "$ATTN" "${args[@]}" --out "$tmp/mm" --grad-accum 2 : \
  -np 1 "$ATTN" "${args[@]}" --out "$tmp/mm" --grad-accum 2 --seed 7 > /dev/null 2> "$tmp/mm.err"
rc=$?
[ $rc -ne 0 ] && grep -q "refusing to start: rank 1's configuration or corpus differs" "$tmp/mm.err" &&
  [ ! -e "$tmp/mm/model.safetensors" ] &&
  ok "ranks with different configs are refused at start-up (exit $rc)" ||
  bad "config mismatch: rc=$rc $(cat "$tmp/mm.err")"
# A different executable on rank 1 (one extra byte at the end still runs).
cp "$ATTN" "$tmp/attn-other" && printf 'x' >> "$tmp/attn-other"
mpi -np 1 "$ATTN" "${args[@]}" --out "$tmp/bx" : -np 1 "$tmp/attn-other" "${args[@]}" --out "$tmp/bx" \
  > /dev/null 2> "$tmp/bx.err"
rc=$?
[ $rc -ne 0 ] && grep -q "refusing to start: rank 1's attn executable differs" "$tmp/bx.err" &&
  ok "ranks running different attn binaries are refused at start-up" ||
  bad "binary mismatch: rc=$rc $(cat "$tmp/bx.err")"
mpi -np 1 "$ATTN" "${args[@]}" --out "$tmp/bd" : \
  -np 1 "$ATTN" "${args[@]}" --out "$tmp/bd" --data "$tmp/missing.txt" > /dev/null 2> "$tmp/bd.err"
rc=$?
[ $rc -ne 0 ] && grep -q "missing.txt" "$tmp/bd.err" && grep -q "rank 1 of 2 failed" "$tmp/bd.err" &&
  ok "a bad corpus path on rank 1 ends the job naming the rank and the cause (exit $rc)" ||
  bad "bad data path: rc=$rc $(cat "$tmp/bd.err")"
mpi -np 2 "$ATTN" "${args[@]}" --out "$tmp/g3" --grad-accum 3 > /dev/null 2> "$tmp/g3.err"
rc=$?
[ $rc -ne 0 ] && grep -q "grad_accum 3 is not a multiple of the 2 ranks" "$tmp/g3.err" &&
  ok "grad_accum not a multiple of the ranks is refused" || bad "grad_accum 3 on 2 ranks: rc=$rc $(cat "$tmp/g3.err")"

[ $fails -eq 0 ] || { echo "$fails failure(s)"; exit 1; }
echo "all MPI training checks passed"
