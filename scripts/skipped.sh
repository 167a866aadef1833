#!/usr/bin/env bash
# After ctest: which tests were skipped, and why (their "SKIP: ..." line),
# and which checks passing tests left out ("skip - ..." / "skip: ..."). A
# skipped test exits 77 because a peer it compares with is missing (torch,
# mpirun, a GPU, a CPU feature); CI installs the peers.
#   scripts/skipped.sh BUILD_DIR
log=${1:-build}/Testing/Temporary/LastTest.log
[ -f "$log" ] || exit 0
awk '
  /^[0-9]+\/[0-9]+ Testing: / { name = $3; why = ""; next }
  /^SKIP/                     { why = $0; next }
  /^skip[ :-]/                { part[++np] = name ": " $0; next }
  /^Test Skipped\.|^Test Passed\./ { if (why != "") skip[++ns] = name ": " why; why = "" }
  /^Test Failed\./            { why = "" }
  END {
    printf "make test: %d test(s) skipped, %d check(s) left out inside passing tests\n", ns, np
    for (i = 1; i <= ns; i++) print "  skipped      " skip[i]
    for (i = 1; i <= np; i++) print "  left out     " part[i]
  }' "$log"
