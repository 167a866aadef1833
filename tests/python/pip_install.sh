#!/usr/bin/env bash
# `pip install .` and `pip install -e .` of the Python package, offline
# (--no-build-isolation --no-index, Debian's python3-setuptools), into a fresh
# `python3 -m venv --system-site-packages`: setup.py builds libattn through
# CMake into the package; then `import attn.torch` from another folder, with
# no PYTHONPATH or ATTN_LIBRARY, runs a module in C. The source is copied
# first (no build/, data/, .git), so nothing is written into SRC. ~1-2 min.
#   bash tests/python/pip_install.sh ATTN SRC
set -eu
src=$2
py=/usr/bin/python3
if ! $py -m pip --version > /dev/null 2>&1 || ! $py -c 'import venv, setuptools, numpy' 2> /dev/null \
  || ! $py -m venv --help > /dev/null 2>&1 || ! command -v cmake > /dev/null; then
  echo "SKIP: needs python3-pip, python3-venv, python3-setuptools, python3-numpy and cmake"
  exit 77
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/attn-pip.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/src" "$tmp/elsewhere"
(cd "$src" && tar --exclude=./build --exclude='./build-*' --exclude=./data --exclude=./.git \
  --exclude=./runs --exclude='*.so' --exclude='*.egg-info' --exclude=__pycache__ -cf - .) |
  tar -xf - -C "$tmp/src"
$py -m venv --system-site-packages "$tmp/venv"
vpy=$tmp/venv/bin/python
export ATTN_CMAKE_ARGS="-DATTN_CUDA=OFF -DATTN_MPI=OFF" ATTN_BUILD_JOBS=2
# The copy has no data/: the build fetches GPT-2's vocabulary from the
# source's (as scripts/get-data.sh does from ../shared/data), offline.
export ATTN_DATA_FROM=$src/data
[ -s "$src/data/gpt2/vocab.bpe" ] || { echo "SKIP: no data/gpt2 (scripts/get-data.sh gpt2)"; exit 77; }
unset ATTN_GPT2_DIR
unset PYTHONPATH ATTN_LIBRARY
pip_install() {
  if ! "$vpy" -m pip install -q --no-build-isolation --no-index "$@" > "$tmp/pip.log" 2>&1; then
    cat "$tmp/pip.log"
    echo "FAIL: pip install $*"
    exit 1
  fi
}
# The package is imported from the venv (or the editable source), its
# library from inside the package; a module runs in C.
check() {
  (cd "$tmp/elsewhere" && "$vpy" - "$1" << 'PY'
import os, sys
import attn, attn.torch as at
import torch
want = os.path.realpath(sys.argv[1])
for what, path in (("package", attn.__file__), ("library", attn.library)):
    assert os.path.realpath(path).startswith(want), f"{what} {path} is not under {want}"
torch.manual_seed(0)
y = at.MultiHeadAttention(4, 4, 8, 0.0, 2)(torch.rand(1, 5, 4))
assert y.shape == (1, 5, 4)
# GPT-2's vocabulary came with the package: found from here, no variable.
import attn.tokenizer
d = attn.tokenizer.gpt2_dir()
assert os.path.realpath(d).startswith(want), f"vocabulary {d} is not under {want}"
enc = attn.tokenizer.get_encoding("gpt2")
assert enc.encode("Hello, world") == [15496, 11, 995], enc.encode("Hello, world")
print("ok:", attn.__version__, attn.library, d)
PY
  )
}
pip_install "$tmp/src"
site=$("$vpy" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
check "$site/attn" || { echo "FAIL: import after pip install ."; exit 1; }
[ -f "$site/attn/libattn-ompwait.so" ] || { echo "FAIL: libattn-ompwait.so not installed"; exit 1; }
pip_install -e "$tmp/src"   # reuses the CMake build folder: quick
check "$tmp/src/python/attn" || { echo "FAIL: import after pip install -e ."; exit 1; }
echo "PASS"
