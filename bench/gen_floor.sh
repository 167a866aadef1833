#!/usr/bin/env bash
# Issue 34, generation: attn bench generate --preset gpt2-124m (tokens/s, the
# weights' GB/s and % of the measured read bandwidth) at fp32 and bf16, 1 and
# 2 threads, one sequence and --num-samples N, next to the book's KV-cached
# generator on PyTorch (bench/gen_torch_kv.py) in the same run, alternating,
# ROUNDS rounds. The book's file is not in this repository: give its path.
#   bench/gen_floor.sh [ATTN] [BOOK_KV_PY] [ROUNDS] [TOKENS] [SAMPLES]
#   bench/gen_floor.sh build/attn ../LLMs-from-scratch/ch04/03_kv-cache/gpt_with_kv_cache_optimized.py 3 64 4
# TORCH_BLAS: the peer's OpenBLAS setting, "set" (the environment's, the
# default), "unset" or a core type (SkylakeX); attn's one-token products are
# its own (no OpenBLAS).
set -u
. "$(dirname "$0")/blas_setting.sh"
ATTN=${1:-build/attn}
BOOK=${2:-}
ROUNDS=${3:-3}
TOKENS=${4:-64}
SAMPLES=${5:-4}
echo "# gen_floor $(date -u +%FT%TZ), $(nproc) CPUs, OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-unset}; torch under '${TORCH_BLAS:-set}'"
echo "# load before: $(cut -d' ' -f1-3 /proc/loadavg)"
for r in $(seq "$ROUNDS"); do
  for t in 1 2; do
    for p in fp32 bf16; do
      for n in $(printf '%s\n' 1 "$SAMPLES" | sort -un); do  # SAMPLES=1: one sequence once
        echo "round=$r $("$ATTN" bench generate --preset gpt2-124m --tokens "$TOKENS" --threads $t --precision $p --num-samples $n)"
      done
    done
  done
  if [ -n "$BOOK" ]; then
    with_blas "${TORCH_BLAS:-set}" /usr/bin/python3 "$(dirname "$0")/gen_torch_kv.py" "$BOOK" --tokens "$TOKENS" --threads 1 2 --repeat 1 |
      sed "s/^/round=$r /"
  fi
done
echo "# load after: $(cut -d' ' -f1-3 /proc/loadavg)"
