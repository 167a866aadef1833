#!/usr/bin/env bash
# tests/support/at_level.sh LEVEL ATTN BINARY [ARGS...]: run a test binary
# under ATTN_SIMD=LEVEL, as on a CPU that has nothing above LEVEL (attn/cpu.h),
# so every dispatch level is tested on whatever machine runs the suite. On a
# CPU whose own level is not above LEVEL the cap changes nothing and the main
# run already tested these paths: exit 77 (skipped), saying so.
set -u
level=$1 attn=$2
shift 2
levels=(generic avx2 avx512 avx512-bf16 amx)
rank() { local i; for i in "${!levels[@]}"; do [ "${levels[$i]}" = "$1" ] && echo "$i" && return; done; echo -1; }
native=$(env -u ATTN_SIMD "$attn" info --cpu --json | sed -n 's/^[[:space:]]*"cpu":[[:space:]]*"\([^"]*\)".*/\1/p')
if [ "$(rank "$level")" -lt 0 ] || [ "$(rank "$native")" -lt 0 ]; then
  echo "at_level.sh: unknown level '$level' or CPU level '$native'" >&2
  exit 2
fi
if [ "$(rank "$native")" -le "$(rank "$level")" ]; then
  echo "SKIP: this CPU is at $native, not above $level: the uncapped run tested these paths"
  exit 77
fi
echo "ATTN_SIMD=$level on a $native CPU: $*"
ATTN_SIMD=$level exec "$@"
