#!/usr/bin/env bash
# attn vs PyTorch 1.13.1 on causal multi-head attention, same run, same machine:
# builds attn (Release), then bench/bench_mha.py times every case in separate
# processes under /usr/bin/time -v and prints the ratios. Extra arguments go
# to bench_mha.py (e.g. --quick, --reference, --threads N).
#   bench/run.sh                 # the issue's cases (B=8 T=1024 D=768 H=12; B=1 T=4096)
#   bench/run.sh --quick         # small shapes, seconds
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD:-$root/build}
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$build" -j "$(nproc)" --target attn >/dev/null
echo "# $(date -u +%FT%TZ) $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
/usr/bin/python3 "$root/bench/bench_mha.py" --attn "$build/attn" "$@"
# The long context: attn alone (PyTorch would need ~(12 * 32768^2 * 4 B) = 48 GiB per T x T tensor).
if [[ " $* " != *" --quick "* ]]; then
  /usr/bin/time -v "$build/attn" bench mha --batch 1 --tokens 32768 --d-model 768 --heads 12 \
    --mha-only --warmup 0 \
    --backward --repeat 1 2> >(grep -E "Maximum resident|Elapsed" >&2)
fi
