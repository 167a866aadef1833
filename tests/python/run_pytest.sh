#!/usr/bin/env bash
# One pytest file of the Python package's tests, as ctest runs it: the
# package from SRC/python, the build's library and attn program, no files
# left behind (pytest's temporary folders are removed, no caches written).
#   bash tests/python/run_pytest.sh ATTN LIBATTN SRC TEST_FILE
set -u
attn=$1 lib=$2 src=$3 file=$4
if ! /usr/bin/python3 -c 'import pytest, numpy, torch' 2> /dev/null; then
  echo "SKIP: the Python tests need python3-pytest, python3-numpy and python3-torch" \
    "(scripts/install-deps.sh test)"
  exit 77
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/attn-pytest.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
. "$src/tests/python/pyenv.sh"
pyenv "$src" "$lib"
ATTN_BIN="$attn" "${PY[@]}" -m pytest -q -p no:cacheprovider --basetemp="$tmp/pytest" \
  -o console_output_style=classic "$file"
