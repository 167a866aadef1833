#!/usr/bin/env bash
# The GPU figures of issue 13 in one run (needs a CUDA GPU, PyTorch with CUDA
# for the peer, and compute-sanitizer for the checks):
#   bench/gpu.sh BUILD_DIR CORPUS [OUT_DIR]
# 1. tests/cuda/test_cuda_gpt, plain and under compute-sanitizer memcheck
#    and racecheck; 2. seed004 config, batch 64 x 256, attn --device cuda
#    fp32 and bf16 against bench/gpu_torch.py (fp32, bf16 autocast eager and
#    torch.compile, KV-cache generation) in the same run; 3. the full seed004
#    preset on the GPU (bf16) with its val loss, then 500 sampled tokens
#    from it on the GPU and on the CPU.
set -u
BUILD=${1:?build dir}
C=${2:?corpus}
OUT=${3:-${OUT:-/tmp/attn-gpu}}
mkdir -p "$OUT"
A=$BUILD/attn
T=$BUILD/test_cuda_gpt
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
echo "== test_cuda_gpt"; timeout 100 "$T" > "$OUT/test_cuda_gpt.log" 2>&1; echo rc=$?
grep -E "FAIL|checks" "$OUT/test_cuda_gpt.log"
echo "== memcheck"; timeout 120 compute-sanitizer --tool memcheck --leak-check full "$T" > "$OUT/memcheck.log" 2>&1; echo rc=$?
tail -2 "$OUT/memcheck.log"
echo "== racecheck"; timeout 120 compute-sanitizer --tool racecheck "$T" > "$OUT/racecheck.log" 2>&1; echo rc=$?
tail -1 "$OUT/racecheck.log"
for p in fp32 bf16; do
  echo "== attn seed004 B64x256 $p"
  timeout 100 "$A" train --data "$C" --preset seed004 --batch-size 64 --steps 25 --eval-iters 1 \
    --eval-interval 1000 --log-interval 5 --device cuda --precision $p --out "$OUT/b64$p" 2>&1 | tail -1
done
echo "== torch peer (same run)"
timeout 200 python3 "$(dirname "$0")/gpu_torch.py" --data "$C" --steps 25 2>&1 | tail -5
echo "== full seed004 preset, bf16"
timeout 600 "$A" train --data "$C" --preset seed004 --device cuda --precision bf16 --out "$OUT/seed004" \
  > "$OUT/seed004_train.log" 2>&1; echo rc=$?
grep -E "^step|steps in" "$OUT/seed004_train.log"
echo "== generate 500 from it"
"$A" generate --checkpoint "$OUT/seed004" --max-new-tokens 500 --device cuda > "$OUT/gen_cuda.txt" 2> "$OUT/gen_cuda.err"
cat "$OUT/gen_cuda.err"
timeout 120 "$A" generate --checkpoint "$OUT/seed004" --max-new-tokens 500 > "$OUT/gen_cpu.txt" 2> "$OUT/gen_cpu.err"
cat "$OUT/gen_cpu.err"
cmp -s "$OUT/gen_cuda.txt" "$OUT/gen_cpu.txt" && echo "same sample text on GPU and CPU (seed 1337)" || echo "sample texts differ"
