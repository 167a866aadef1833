#!/usr/bin/env bash
# The book's chapter-5 run (gpt_train.py: GPT_CONFIG_124M at context 256,
# batch 2, AdamW 5e-4, an evaluation every 5 steps, a greedy sample after
# each epoch) on attn and on PyTorch 1.13, same run, alternating: attn
# `train --preset book-ch05 --steps 9E` against the book's own main() with
# num_epochs E (bench/book_ch05_torch.py), torch at 1 and 2 threads, attn
# at 2. The printed lines must be the same; the wall times are compared.
#   bench/book_ch05_peer.sh BOOK_DIR NODE_MODULES [EPOCHS] [ROUNDS]
# BOOK_DIR: the book's gpt_train.py and previous_chapters.py
# (rasbt/LLMs-from-scratch ch05/01_main-chapter-code); NODE_MODULES: npm's
# tiktoken. Times: wall seconds of the whole run (model set-up included).
# OpenBLAS: ATTN_BLAS and TORCH_BLAS each "set" (the environment's, the
# default), "unset" or a core type such as SkylakeX: give each its best
# (bench/gptmodel_loop.py under each setting finds torch's).
set -euo pipefail
. "$(dirname "$0")/blas_setting.sh"
attn_blas=${ATTN_BLAS:-set}
torch_blas=${TORCH_BLAS:-set}
root=$(cd "$(dirname "$0")/.." && pwd)
book=${1:?usage: bench/book_ch05_peer.sh BOOK_DIR NODE_MODULES [EPOCHS] [ROUNDS]}
nm=${2:?node_modules with tiktoken}
epochs=${3:-1}
rounds=${4:-1}
attn=${ATTN:-$root/build/attn}
data=$root/data/the-verdict.txt
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "# $(date -u +%FT%TZ) $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg); $epochs epoch(s) = $((9 * epochs)) steps"
echo "# OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-unset} OPENBLAS_L2_SIZE=${OPENBLAS_L2_SIZE:-unset}; attn under '$attn_blas', torch under '$torch_blas'"
for r in $(seq 1 "$rounds"); do
  rm -rf "$tmp/run"
  t0=$EPOCHREALTIME
  ATTN_CACHE_DIR=$tmp/cache ATTN_GPT2_DIR=$root/data/gpt2 with_blas "$attn_blas" "$attn" train --preset book-ch05 --data "$data" \
    --steps $((9 * epochs)) --threads 2 --out "$tmp/run" > "$tmp/attn.out" 2> "$tmp/attn.err"
  t1=$EPOCHREALTIME
  echo "round $r attn  threads 2: $(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.1f", b - a}') s"
  grep -v '^iter\|^attn train' "$tmp/attn.out" > "$tmp/attn.lines" || true
  for th in 1 2; do
    with_blas "$torch_blas" /usr/bin/python3 "$root/bench/book_ch05_torch.py" "$book" "$nm" "$data" "$epochs" "$th" > "$tmp/torch.out" 2> "$tmp/torch.err"
    tw=$(sed -n 's/^wall_s=//p' "$tmp/torch.out")
    echo "round $r torch threads $th: $tw s"
    grep -v '^wall_s=' "$tmp/torch.out" > "$tmp/torch.lines"
    same=same
    cmp -s "$tmp/attn.lines" "$tmp/torch.lines" && echo "  lines: the same ($(wc -l < "$tmp/attn.lines"))" ||
      { same=differ; echo "  lines differ:"; diff "$tmp/attn.lines" "$tmp/torch.lines" | head -20; }
    # one machine-readable line a pair (bench/compare.sh reads them)
    echo "result round=$r attn_s=$(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.2f", b - a}') attn_threads=2 torch_s=${tw:-nan} torch_threads=$th lines=$same"
  done
done
