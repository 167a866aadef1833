#!/usr/bin/env bash
# The short OpenMP spin (GOMP_SPINCOUNT=1000, src/base/ompwait/ompwait.c) is in
# effect without a second process, and so are OpenBLAS's kernels for the CPU. libgomp itself reports what it read:
# with OMP_DISPLAY_ENV=verbose it prints its settings once, as it starts, so
# one block means one process image (a restart through /proc/self/exe
# printed two, the first with libgomp's default 300000), and its
# GOMP_SPINCOUNT line is the value in effect. Checked for attn, for a
# program linked with libattn.so and for Python loading libattn.so with
# ctypes; a user's own OMP_WAIT_POLICY or GOMP_SPINCOUNT is kept.
# Usage: bash startup_spin.sh <path-to-attn> <source-dir>
set -u
ATTN=$1
SRC=$2
build=$(dirname "$ATTN")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "${BASH_SOURCE[0]}")/support/lib.sh"
# The user's own choices are unset for the default cases.
clean() { env -u OMP_WAIT_POLICY -u GOMP_SPINCOUNT OMP_DISPLAY_ENV=verbose "$@"; }
blocks() { grep -c "OPENMP DISPLAY ENVIRONMENT BEGIN" "$1"; }
spin() { sed -n "s/^ *GOMP_SPINCOUNT = '\([0-9]*\)'.*/\1/p" "$1" | tr '\n' ' ' | sed 's/ $//'; }
# expect NAME FILE RC SPIN: one block, exit 0, spin count SPIN.
expect() {
  local b s
  b=$(blocks "$2") s=$(spin "$2")
  [ "$3" -eq 0 ] && [ "$b" -eq 1 ] && [ "$s" = "$4" ] &&
    ok "$1: one process, libgomp read GOMP_SPINCOUNT $s" ||
    bad "$1: rc $3, $b display blocks, spin count(s) '$s' (want one, $4): $(head -c 300 "$2")"
}

make_corpus "$tmp/c.txt" 20
cat > "$tmp/cfg.json" <<'JSON'
{"context_length": 16, "emb_dim": 32, "n_heads": 2, "n_layers": 1, "batch_size": 2,
 "max_steps": 2, "eval_interval": 2, "eval_iters": 1}
JSON

# The commands the old restart applied to (threads > 1), and one it did not.
clean "$ATTN" train --data "$tmp/c.txt" --config "$tmp/cfg.json" --threads 2 --out "$tmp/a" \
  > /dev/null 2> "$tmp/train.err"
expect "attn train --threads 2" "$tmp/train.err" $? 1000
clean "$ATTN" --version > /dev/null 2> "$tmp/version.err"
expect "attn --version" "$tmp/version.err" $? 1000
# One exec only, seen by the kernel's side too, where strace may trace.
if strace -f -qq -e trace=execve -o "$tmp/probe.st" true 2> /dev/null; then
  clean strace -f -qq -e trace=execve -o "$tmp/st" "$ATTN" train --data "$tmp/c.txt" \
    --config "$tmp/cfg.json" --threads 2 --out "$tmp/s" > /dev/null 2>&1
  n=$(grep -c 'execve(' "$tmp/st")
  [ "$n" -eq 1 ] && ok "strace: attn train --threads 2 is one execve" ||
    bad "strace: $n execve calls: $(cat "$tmp/st")"
fi

# The user's choice wins.
env -u OMP_WAIT_POLICY GOMP_SPINCOUNT=5 OMP_DISPLAY_ENV=verbose "$ATTN" --version \
  > /dev/null 2> "$tmp/user.err"
expect "GOMP_SPINCOUNT=5 attn --version" "$tmp/user.err" $? 5
env -u GOMP_SPINCOUNT OMP_WAIT_POLICY=passive OMP_DISPLAY_ENV=verbose "$ATTN" --version \
  > /dev/null 2> "$tmp/passive.err"
expect "OMP_WAIT_POLICY=passive attn --version" "$tmp/passive.err" $? 0

# Embedders get it from libattn.so: a C program and Python's ctypes (with a
# sanitizer build's libattn.so, the program is sanitized and Python preloads
# the runtime, which must come first).
san=() pre=()
if ldd "$build/libattn.so" | grep -q libasan; then
  san=(-fsanitize=address,undefined)
  pre=(LD_PRELOAD="$(cc -print-file-name=libasan.so)" ASAN_OPTIONS=detect_leaks=0)
fi
printf '#include <attn/version.h>\n#include <stdio.h>\nint main(void) { return puts(attn_version()) < 0; }\n' \
  > "$tmp/v.c"
if cc -std=c11 "${san[@]}" "$tmp/v.c" -I"$SRC/include" -L"$build" -lattn -Wl,-rpath,"$build" -o "$tmp/v"; then
  clean "$tmp/v" > /dev/null 2> "$tmp/c.err"
  expect "a program linked with libattn.so" "$tmp/c.err" $? 1000
else
  bad "could not build a program against $build/libattn.so"
fi
clean "${pre[@]}" /usr/bin/python3 -c "import ctypes, sys; ctypes.CDLL(sys.argv[1])" "$build/libattn.so" \
  2> "$tmp/py.err"
expect "python3: ctypes.CDLL(libattn.so)" "$tmp/py.err" $? 1000

# OpenBLAS's kernels (ompwait.c, 2.): on an Intel CPU, the ones its features
# allow, whatever its model number; elsewhere OpenBLAS's own choice. OpenBLAS
# says what it picked with OPENBLAS_VERBOSE=2 ("Core: NAME").
flags=" $(grep -m1 '^flags' /proc/cpuinfo | cut -d: -f2) "
has() { for f in "$@"; do [[ $flags == *" $f "* ]] || return 1; done; }
want=
if grep -q -m1 'GenuineIntel' /proc/cpuinfo; then
  if has avx512f avx512cd avx512bw avx512dq avx512vl; then want=SkylakeX
  elif has avx2 fma; then want=Haswell; fi
fi
blas() { env -u OPENBLAS_CORETYPE OPENBLAS_VERBOSE=2 "$@"; }
core() { sed -n 's/^Core: *\([A-Za-z0-9]*\).*/\1/p' "$1" | head -1; }
expect_core() { # name, file, rc, core
  local c
  c=$(core "$2")
  [ "$3" -eq 0 ] && [ "$c" = "$4" ] && ok "$1: OpenBLAS runs its $c kernels" ||
    bad "$1: rc $3, OpenBLAS core '$c' (want $4): $(head -c 300 "$2")"
}
blas "$ATTN" --version > /dev/null 2> "$tmp/blas.err"
rc=$?
if [ -z "$(core "$tmp/blas.err")" ]; then
  echo "skip: this OpenBLAS does not name its kernels (not a DYNAMIC_ARCH build)"
elif [ -n "$want" ]; then
  expect_core "attn --version" "$tmp/blas.err" $rc "$want"
  [ -x "$tmp/v" ] && { blas "$tmp/v" > /dev/null 2> "$tmp/blas_c.err"; \
    expect_core "a program linked with libattn.so" "$tmp/blas_c.err" $? "$want"; }
  blas "${pre[@]}" /usr/bin/python3 -c "import ctypes, sys; ctypes.CDLL(sys.argv[1])" \
    "$build/libattn.so" 2> "$tmp/blas_py.err"
  expect_core "python3: ctypes.CDLL(libattn.so)" "$tmp/blas_py.err" $? "$want"
  # numpy first starts OpenBLAS with its own choice: the package says so, once.
  py() { blas "${pre[@]}" ATTN_LIBRARY="$build/libattn.so" PYTHONPATH="$SRC/python" \
    /usr/bin/python3 -W always -c "$1" 2>&1 | grep -c "RuntimeWarning: attn: OpenBLAS"; }
  n=$(py "import numpy, attn")
  [ "$n" = 1 ] && ok "import numpy, attn: warns that OpenBLAS runs other kernels" ||
    bad "import numpy, attn: $n warnings (want 1)"
  n=$(py "import attn, numpy")
  [ "$n" = 0 ] && ok "import attn, numpy: no warning" || bad "import attn, numpy: $n warnings"
else
  echo "skip: not an Intel CPU with AVX2 or AVX-512: OpenBLAS chose $(core "$tmp/blas.err") itself"
fi
# ATTN_SIMD's cap (attn/cpu.h) reaches OpenBLAS on any CPU above it: an AVX2
# CPU's kernels (Haswell), or no AVX at all (Nehalem).
if [ -n "$(core "$tmp/blas.err")" ] && has avx512f avx512bw avx512dq avx512vl avx2 fma; then
  for cap in avx2:Haswell generic:Nehalem; do
    ATTN_SIMD=${cap%%:*} blas "$ATTN" --version > /dev/null 2> "$tmp/blas_cap.err"
    expect_core "ATTN_SIMD=${cap%%:*} attn --version" "$tmp/blas_cap.err" $? "${cap#*:}"
  done
fi
if [ -n "$(core "$tmp/blas.err")" ]; then # the user's choice wins (SSE3: any x86-64 runs it)
  OPENBLAS_CORETYPE=Prescott OPENBLAS_VERBOSE=2 "$ATTN" --version > /dev/null 2> "$tmp/blas_user.err"
  expect_core "OPENBLAS_CORETYPE=Prescott attn --version" "$tmp/blas_user.err" $? Prescott
fi

[ $fails -eq 0 ] || { echo "$fails failure(s)"; exit 1; }
echo "all start-up checks passed"
