#!/usr/bin/env bash
# A gpt2 run's token file changed under the run (attn/token_file.h: attn
# maps no file; the ids are read window by window with pread and checked):
#  1. truncated (`truncate -s 0`): the run ends with exit 1 and a message
#     naming the file, no crash (a mapped file gave "Bus error", 135);
#  2. overwritten in place with other bytes of the same size (0xFF: ids past
#     the vocabulary): the same;
#  3. replaced by another file (rename over it): the run reads the file it
#     opened and checked, and ends as an untouched run does.
# After 1 and 2 the run's last checkpoint is whole: `attn generate` loads it
# and `--resume` (the token file rebuilt from the text) ends with the
# uninterrupted run's weights. The run is held (the fault shim's stop mode,
# tests/shim/fault_inject.c) at its first file operation after its first
# checkpoint while the file is changed, so no step of it races the change,
# however fast the machine.
# Usage: bash tests/train_token_change.sh <path-to-attn> <source-dir>
set -u
ATTN=$1
SRC=$2
SHIM=$(dirname "$ATTN")/libattn_fault.so
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "${BASH_SOURCE[0]}")/support/lib.sh"
[ -f "$SHIM" ] || { echo "FAIL - fault shim $SHIM not built"; exit 1; }
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0"

VOCAB=
for d in "$SRC/data/gpt2" "$SRC/../shared/data/gpt2"; do
  [ -f "$d/encoder.json" ] && [ -f "$d/vocab.bpe" ] && VOCAB=$(cd "$d" && pwd) && break
done
[ -n "$VOCAB" ] || { echo "SKIP: no GPT-2 vocabulary in data/gpt2 (scripts/get-data.sh gpt2)"; exit 77; }
export ATTN_GPT2_DIR=$VOCAB ATTN_CACHE_DIR=$tmp/cache

make_corpus "$tmp/corpus.txt" 60
cat > "$tmp/small.json" << 'JSON'
{"emb_dim": 32, "n_layers": 2, "n_heads": 2, "context_length": 32, "batch_size": 2,
 "eval_interval": 100, "eval_iters": 1, "checkpoint_interval": 1}
JSON
args=(train --preset gpt2-124m --config "$tmp/small.json" --threads 1 --steps 6
  --data "$tmp/corpus.txt")

# The reference run (which counts the file operations in its run folder);
# the commit of its first checkpoint is the rename of ref/latest.
ATTN_FAULT_DIR="$tmp/ref/" ATTN_FAULT_LOG="$tmp/ops.log" LD_PRELOAD=$SHIM \
  "$ATTN" "${args[@]}" --out "$tmp/ref" > /dev/null 2> "$tmp/ref.err" ||
  { bad "reference run failed: $(cat "$tmp/ref.err")"; exit 1; }
sort -n -k1,1 -o "$tmp/ops.log" "$tmp/ops.log"
first=$(grep -m1 " rename $tmp/ref/latest\$" "$tmp/ops.log" | cut -d' ' -f1)
[ -n "$first" ] || { bad "no checkpoint commit in the reference run's operations"; exit 1; }
train_file=$(grep -o '[^ ]*tok-[^ ]*\.u16 (train' "$tmp/ref.err" | cut -d' ' -f1)
[ -f "$train_file" ] || { bad "no train token file named in: $(cat "$tmp/ref.err")"; exit 1; }

held() { [ "$(cut -d' ' -f3 "/proc/$1/stat" 2> /dev/null)" = T ]; }
# held_run DIR CHANGE: a run into DIR held after its first checkpoint,
# CHANGE (a shell command) run on the train token file, the run let go;
# its exit status in $rc, its stderr in DIR.err.
held_run() {
  ATTN_FAULT_DIR="$1/" ATTN_FAULT_AT=$((first + 1)) ATTN_FAULT_MODE=stop LD_PRELOAD=$SHIM \
    "$ATTN" "${args[@]}" --out "$1" > /dev/null 2> "$1.err" & # $! must be attn itself
  local pid=$! waited=0
  while ! held $pid && kill -0 $pid 2> /dev/null && [ $waited -lt 6000 ]; do
    sleep 0.05
    waited=$((waited + 1))
  done
  if held $pid; then
    eval "$2"
    kill -CONT $pid
  else
    bad "$1: the run was never held at operation $((first + 1))"
    kill -9 $pid 2> /dev/null
  fi
  wait $pid
  rc=$?
}

# after_change NAME DIR: exit 1 naming the file; the last checkpoint loads
# and resumes to the uninterrupted run's weights.
after_change() {
  local name=$1 d=$2
  [ $rc = 1 ] && grep -qF "attn train: the token file '$train_file' changed under the run" "$d.err" &&
    ok "$name: exit 1, the message names the token file" ||
    bad "$name: exit $rc: $(cat "$d.err")"
  local live
  live=$(readlink "$d/latest")
  case $live in ckpt-*) ;; *) bad "$name: no checkpoint left ('$live')" ;; esac
  "$ATTN" generate --checkpoint "$d" --prompt "All:" --max-new-tokens 4 --seed 1 \
    > /dev/null 2> "$tmp/g.err" && ok "$name: the last checkpoint ($live) loads (attn generate)" ||
    bad "$name: attn generate on $live: $(cat "$tmp/g.err")"
  "$ATTN" train --out "$d" --resume --threads 1 > /dev/null 2> "$tmp/r.err" &&
    cmp -s "$tmp/ref/model.safetensors" "$d/model.safetensors" &&
    cmp -s "$tmp/ref/train_state.safetensors" "$d/train_state.safetensors" &&
    ok "$name: --resume ends with the uninterrupted run's weights" ||
    bad "$name: resume: $(tail -2 "$tmp/r.err")"
}

# 1. Truncated under the run.
held_run "$tmp/cut" 'truncate -s 0 "$train_file"'
after_change "truncated" "$tmp/cut"

# 2. Overwritten in place, same size, ids 65535 (the resume above rebuilt it).
held_run "$tmp/junk" 'size=$(stat -c %s "$train_file");
  head -c "$size" /dev/zero | tr "\0" "\377" | dd of="$train_file" conv=notrunc status=none'
after_change "overwritten in place" "$tmp/junk"
grep -q "is id 65535, not below the vocabulary's 50257" "$tmp/junk.err" &&
  ok "overwritten in place: the message gives the id read" || bad "overwritten: $(cat "$tmp/junk.err")"

# 3. Replaced by another file: the run keeps the one it opened.
held_run "$tmp/swap" 'head -c 100 /dev/zero > "$tmp/other.u16" && mv "$tmp/other.u16" "$train_file"'
[ $rc = 0 ] && cmp -s "$tmp/ref/model.safetensors" "$tmp/swap/model.safetensors" &&
  ok "replaced (renamed over): the run reads the file it opened, as an untouched run" ||
  bad "replaced: exit $rc: $(cat "$tmp/swap.err")"

[ $fails = 0 ]
