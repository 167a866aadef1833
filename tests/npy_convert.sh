#!/usr/bin/env bash
# float64 and integer .npy inputs where attn expects floats (issue 9): what a
# new user gets from np.random.rand / np.arange is converted to float32, so
# `attn forward` on it gives exactly what it gives on x.astype(np.float32)
# (output and gradients); a value outside float32's range is refused. The
# arrays are made by numpy here (skipped without /usr/bin/python3 + numpy).
#
#   bash tests/npy_convert.sh ATTN SRCDIR
set -uo pipefail
ATTN=$1
PY=/usr/bin/python3
if ! "$PY" -c "import numpy" 2> /dev/null; then
  echo "skip: no python3 + numpy"
  exit 0
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/attn-npy-convert.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fails=0
n=0
ok() { n=$((n + 1)); echo "ok   $1"; }
bad() { n=$((n + 1)); fails=$((fails + 1)); echo "FAIL $1"; }

"$PY" - "$tmp" <<'PY'
import sys
import numpy as np
t = sys.argv[1]
rs = np.random.RandomState(0)
x = rs.rand(2, 6, 3)                         # float64, as np.random.rand gives
np.save(f"{t}/x64.npy", x)
np.save(f"{t}/x32.npy", x.astype(np.float32))
dy = rs.rand(2, 6, 4)
np.save(f"{t}/dy64.npy", dy)
np.save(f"{t}/dy32.npy", dy.astype(np.float32))
xi = np.arange(36).reshape(2, 6, 3) - 17      # int64
np.save(f"{t}/xi64.npy", xi)
np.save(f"{t}/xi32.npy", xi.astype(np.int32))
np.save(f"{t}/xi_f32.npy", xi.astype(np.float32))
big = x.copy(); big[1, 2, 0] = 1e300
np.save(f"{t}/big.npy", big)
PY

run() { # name input grad-output
  mkdir -p "$tmp/$1"
  "$ATTN" forward mha --d-out 4 --heads 2 --input "$2" --output "$tmp/$1/y.npy" \
    --grad-output "$3" --grad-dir "$tmp/$1/g" > /dev/null 2> "$tmp/$1.err"
}
same() { # dir-a dir-b: every .npy identical
  (cd "$tmp/$1" && find . -name '*.npy' | sort) > "$tmp/la"
  (cd "$tmp/$2" && find . -name '*.npy' | sort) > "$tmp/lb"
  cmp -s "$tmp/la" "$tmp/lb" || return 1
  [ -s "$tmp/la" ] || return 1
  while read -r f; do cmp -s "$tmp/$1/$f" "$tmp/$2/$f" || return 1; done < "$tmp/la"
}

run r32 "$tmp/x32.npy" "$tmp/dy32.npy" || bad "float32 run: $(cat "$tmp/r32.err")"
run r64 "$tmp/x64.npy" "$tmp/dy64.npy" && same r32 r64 &&
  ok "float64 input and gradient == their astype(float32) (output and gradients)" ||
  bad "float64: $(cat "$tmp/r64.err")"
run ri32f "$tmp/xi_f32.npy" "$tmp/dy32.npy" || bad "float32 ints: $(cat "$tmp/ri32f.err")"
run ri64 "$tmp/xi64.npy" "$tmp/dy32.npy" && same ri32f ri64 && ok "int64 input == astype(float32)" ||
  bad "int64: $(cat "$tmp/ri64.err")"
run ri32 "$tmp/xi32.npy" "$tmp/dy32.npy" && same ri32f ri32 && ok "int32 input == astype(float32)" ||
  bad "int32: $(cat "$tmp/ri32.err")"
run rbig "$tmp/big.npy" "$tmp/dy32.npy"
rc=$?
[ $rc -eq 1 ] && grep -q "big.npy: value 1e+300 at flat index 24 is outside float32's range" "$tmp/rbig.err" &&
  [ ! -e "$tmp/rbig/y.npy" ] && ok "1e300 refused (exit 1, names the index), nothing written" ||
  bad "big: rc=$rc $(cat "$tmp/rbig.err")"

echo "npy_convert: $((n - fails)) of $n checks passed"
[ "$fails" -eq 0 ]
