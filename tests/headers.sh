#!/usr/bin/env bash
# Every public header (include/attn/*.h) stands on its own, as an embedder
# includes it (issue 17):
#  - alone, and twice (include guard), it compiles as C11 (-pedantic, warnings
#    are errors, gcc and clang) and as C++ (g++ -std=c++11);
#  - from C++ every function it declares has C linkage: a C++ program that
#    takes each one's address links against libattn.so (a declaration outside
#    extern "C" would ask for a mangled name and fail to link);
#  - every header that declares a backward states the backward rule, and an
#    embedder finds attn_gpt_load_checkpoint in the checkpoint header.
# Usage: bash headers.sh <path-to-attn> <source-dir>
set -u
ATTN=$1
SRC=$2
LIB=$(dirname "$ATTN")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "${BASH_SOURCE[0]}")/support/lib.sh"
[ -f "$LIB/libattn.so" ] || { echo "FAIL - no $LIB/libattn.so"; exit 1; }
CC_LIST="gcc"
command -v clang > /dev/null && CC_LIST="$CC_LIST clang"
CXX=${CXX:-g++}

n=0
for h in "$SRC"/include/attn/*.h; do
  name=attn/$(basename "$h")
  n=$((n + 1))
  printf '#include "%s"\n#include "%s"\nint attn_header_test_unit;\n' "$name" "$name" > "$tmp/unit.c"
  for cc in $CC_LIST; do
    $cc -std=c11 -pedantic -Wall -Wextra -Werror -fsyntax-only -I "$SRC/include" "$tmp/unit.c" \
      2> "$tmp/err" || bad "$name does not compile alone (twice) as C11 with $cc: $(head -3 "$tmp/err")"
  done
  # The functions it declares: a return type at the start of a line, then
  # attn_name( (declarations are written that way, one per statement); not
  # the static inline wrappers (a deprecated old name), which have no linkage.
  funcs=$(sed -n '/^static /!s/^[a-z][a-z0-9_ ]*[ *]\(attn_[a-z0-9_]*\)(.*/\1/p' "$h" | sort -u)
  {
    printf '#include "%s"\n#include "%s"\n#include <cstdio>\n' "$name" "$name"
    printf 'int main() {\n'
    for f in $funcs; do printf '    std::printf("%%p\\n", reinterpret_cast<void *>(&%s));\n' "$f"; done
    printf '    return 0;\n}\n'
  } > "$tmp/unit.cpp"
  $CXX -std=c++11 -Wall -Werror -I "$SRC/include" "$tmp/unit.cpp" -o "$tmp/unit" \
    -L"$LIB" -lattn -Wl,--unresolved-symbols=ignore-in-shared-libs 2> "$tmp/err" ||
    bad "$name: as C++ it does not compile or a function lacks C linkage: $(grep -m3 -E 'error|undefined' "$tmp/err")"
  if grep -qE '^(attn_status|void) attn_[a-z0-9_]*_backward[a-z_]*\(' "$h" &&
     ! grep -q "The backward rule (every attn backward" "$h"; then
    bad "$name declares a backward but does not state the backward rule"
  fi
done
# The loader is where an embedder looks (checkpoint.h), alone.
printf '#include "attn/checkpoint.h"\nint f(attn_gpt *m, attn_tokenizer *t, attn_error *e);\nint f(attn_gpt *m, attn_tokenizer *t, attn_error *e) { return (int)attn_gpt_load_checkpoint("d", m, t, NULL, e); }\n' > "$tmp/load.c"
gcc -std=c11 -Wall -Wextra -Werror -fsyntax-only -I "$SRC/include" "$tmp/load.c" 2> "$tmp/err" ||
  bad "attn/checkpoint.h alone does not declare attn_gpt_load_checkpoint: $(head -2 "$tmp/err")"
[ "$n" -ge 40 ] || bad "only $n headers found in $SRC/include/attn"
# attn/attn.h is "everything in one include": every other public header.
for h in "$SRC"/include/attn/*.h; do
  b=$(basename "$h")
  [ "$b" = attn.h ] || grep -q "^#include \"attn/$b\"" "$SRC/include/attn/attn.h" ||
    bad "attn/attn.h does not include attn/$b"
done
[ $fails -eq 0 ] && ok "$n headers compile alone and twice as C11 (gcc, clang) and C++, with C linkage" &&
  exit 0
exit 1
