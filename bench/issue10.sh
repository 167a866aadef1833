#!/usr/bin/env bash
# Issue 10's targets in one run (bench/issue10.py): builds attn (Release),
# then prints every figure with PyTorch 1.13's and the ratio. About 10
# minutes on a busy 2-core machine; --quick for a one-minute smoke run.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD:-$root/build}
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$build" -j "$(nproc)" --target attn >/dev/null
"$root/scripts/get-data.sh"
exec /usr/bin/python3 "$root/bench/issue10.py" --attn "$build/attn" "$@"
