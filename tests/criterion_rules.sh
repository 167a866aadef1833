#!/usr/bin/env bash
# Criterion binaries end with exit status 1 after any warning or error log
# line, even when every test passed (Criterion's "exit nonzero when a warning
# is raised"): one cr_log_warn("no AVX512-BF16 ...") failed `make test` on
# every CPU without that feature (issue 46). A case a CPU cannot run is its
# own test and calls cr_skip_test. This keeps both levels out of tests/.
set -u
ATTN=$1 SRC=$2
. "$SRC/tests/support/lib.sh"
hits=$(grep -nE 'cr_log_(warn|error)|CR_LOG_(WARNING|ERROR)' "$SRC"/tests/*.c "$SRC"/tests/support/*.c "$SRC"/tests/cuda/*.c 2> /dev/null)
[ -z "$hits" ] && ok "no test logs a warning or an error" ||
  bad "these log a warning/error, which fails the binary: use cr_skip_test: $hits"
[ $fails -eq 0 ]
