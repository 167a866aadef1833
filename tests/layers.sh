#!/usr/bin/env bash
# src/ keeps its layers (docs/library.md#layers): no folder uses a higher one,
# no two folders or files form a cycle. The checker first proves on planted
# violations that it sees each kind, then reads this build's tree.
set -u
ATTN=$1
SRC=$2
PY=${PYTHON:-python3}
command -v "$PY" >/dev/null || { echo "SKIP: no $PY"; exit 77; }
command -v nm >/dev/null || { echo "SKIP: no nm (binutils)"; exit 77; }
"$PY" "$SRC/tests/layers.py" --self-test || { echo "FAIL: the checker misses a planted violation"; exit 1; }
"$PY" "$SRC/tests/layers.py" "$SRC" "$(dirname "$ATTN")"
