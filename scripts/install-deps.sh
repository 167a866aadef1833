#!/usr/bin/env bash
# Install what attn needs on Debian 12. Usage: install-deps.sh [--print] build|test
#   build: compiler, CMake, OpenBLAS, cJSON, oneDNN, PCRE2, xxHash, libzip, pkg-config (what `make run` needs)
#   test:  the above plus Criterion, PyTorch/NumPy for the parity tests,
#          pytest, nbclient, ipykernel and nbconvert for the Python package and
#          its example notebook (tqdm: the notebook's progress bar),
#          Chromium (headless) for the attn viz page test, and Open MPI for the
#          data-parallel training tests (the build uses it when present);
#          pandas, matplotlib and requests (the book's chapter-6/7 scripts,
#          tests/book_ch67_fixtures.sh), Node.js (Debian's, when no node is on
#          PATH) and npm's tiktoken 1.0.22 (their tokenizer's stand-in)
# As root it runs apt-get; otherwise it prints the exact line to run and fails.
# --print only lists the packages (scripts/check-deps.sh checks the lists).
set -euo pipefail
print=0
if [ "${1:-}" = --print ]; then print=1; shift; fi
what=${1:-build}
case $what in build | test) ;; *) echo "usage: install-deps.sh [--print] build|test" >&2; exit 2 ;; esac
pkgs=(gcc make cmake pkg-config libopenblas-dev libcjson-dev libdnnl-dev libpcre2-dev libxxhash-dev libzip-dev)
if [ "$what" = test ]; then
  pkgs+=(libcriterion-dev python3-torch python3-numpy chromium libopenmpi-dev openmpi-bin
    python3-pytest python3-nbclient python3-ipykernel jupyter-nbconvert python3-tqdm
    python3-pandas python3-matplotlib python3-requests)
  # A Node.js from elsewhere (NodeSource's) is kept; Debian's otherwise.
  command -v node > /dev/null || pkgs+=(nodejs npm)
fi
if [ $print -eq 1 ]; then
  printf '%s\n' "${pkgs[@]}"
  exit 0
fi
missing=()
for p in "${pkgs[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
# npm's tiktoken, globally (npm root -g is where the tests look); not fatal:
# offline, the tests that want it skip and say why.
tiktoken() {
  [ "$what" = test ] && command -v npm > /dev/null || return 0
  [ -f "$(npm root -g 2> /dev/null)/tiktoken/package.json" ] && return 0
  if [ "$(id -u)" -ne 0 ]; then
    echo "attn: for the book's chapter-6/7 check, run as root:  npm install -g tiktoken@1.0.22" >&2
    return 0
  fi
  echo "attn: installing npm's tiktoken 1.0.22" >&2
  npm install -g --silent tiktoken@1.0.22 > /dev/null ||
    echo "attn: npm install -g tiktoken@1.0.22 failed (offline?): book_ch67_fixtures will skip" >&2
}
if [ ${#missing[@]} -eq 0 ]; then
  tiktoken
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "attn: missing packages: ${missing[*]}" >&2
  echo "attn: run as root:  apt-get install -y ${missing[*]}" >&2
  exit 1
fi
echo "attn: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
tiktoken
