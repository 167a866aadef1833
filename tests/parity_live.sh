#!/usr/bin/env bash
# Live PyTorch parity: fresh random configs (module, dims, heads, bias, B, T,
# context length, dropout, train/eval, seed, sometimes --weights) through
# PyTorch 1.13.1 and `attn forward`, compared by scripts/parity_report.py.
#
#   bash tests/parity_live.sh ATTN SRCDIR            # random seed (printed)
#   PARITY_SEED=1234 bash tests/parity_live.sh ...    # replay a run
#   PARITY_CASES=200 ...                              # more configs (default 40)
#
# Needs /usr/bin/python3 with python3-torch and python3-numpy (Debian).
# Skipped under sanitizers with `ctest -E parity_live`.
set -euo pipefail
attn=$(realpath "$1")
src=$2
py=/usr/bin/python3
if ! "$py" -c 'import torch, numpy' 2>/dev/null; then
    echo "SKIP: $py cannot import torch and numpy" \
        "(scripts/install-deps.sh test installs python3-torch python3-numpy)"
    exit 77
fi
seed=${PARITY_SEED:-$(( ($(date +%s) ^ (RANDOM << 15) ^ RANDOM) & 0x7fffffff ))}
cases=${PARITY_CASES:-40}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/attn-parity-live.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
echo "parity_live: seed $seed, $cases configs (replay: PARITY_SEED=$seed bash $0 ATTN SRCDIR)"
"$py" "$src/scripts/gen_parity_fixtures.py" --random "$cases" --seed "$seed" --out "$tmp/ref" >/dev/null
if ! "$py" "$src/scripts/parity_report.py" --attn "$attn" --cases "$tmp/ref"; then
    echo "parity_live: FAILED — replay with PARITY_SEED=$seed" >&2
    exit 1
fi
