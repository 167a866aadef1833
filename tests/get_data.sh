#!/usr/bin/env bash
# scripts/get-data.sh in a throw-away copy of the checkout: a file copied
# from ../shared/data and checked by its md5; a copy with the wrong md5, and
# an offline download, each refused (exit 1) with a message saying why,
# leaving neither the file nor a temp file behind; an unknown name is a
# usage error (exit 2). No network is used (curl and wget are stand-ins).
# Usage: bash tests/get_data.sh <path-to-attn> <source-dir>
set -u
SRC=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "${BASH_SOURCE[0]}")/support/lib.sh"

mkdir -p "$tmp/repo/scripts" "$tmp/bin" "$tmp/shared/data"
cp "$SRC/scripts/get-data.sh" "$tmp/repo/scripts/"
# Stand-ins for an offline machine: both downloaders fail as curl does.
for t in curl wget; do printf '#!/bin/sh\necho "%s: (6) Could not resolve host" >&2\nexit 6\n' "$t" \
  > "$tmp/bin/$t"; chmod +x "$tmp/bin/$t"; done
get() { (cd "$tmp/repo" && PATH="$tmp/bin:$PATH" bash scripts/get-data.sh "$@") > "$tmp/out" 2>&1; }
leftovers() { ls -A "$tmp/repo/data" 2> /dev/null | grep -c '^\.get\.'; }

# 1. Offline, no ../shared copy: exit 1, what to do, nothing left behind.
get tinyshakespeare
rc=$?
[ $rc -eq 1 ] && ok "offline: exit 1" || bad "offline: exit $rc"
grep -q 'cannot download tinyshakespeare.txt (offline?): put it at data/tinyshakespeare.txt' \
  "$tmp/out" && ok "... says where to put the file" || bad "no hint: $(cat "$tmp/out")"
grep -q 'unbound variable' "$tmp/out" && bad "... a shell error: $(cat "$tmp/out")" \
  || ok "... no shell error"
[ "$(leftovers)" = 0 ] && [ ! -e "$tmp/repo/data/tinyshakespeare.txt" ] \
  && ok "... no file, no temp file" || bad "left: $(ls -A "$tmp/repo/data")"

# 2. A ../shared copy with the wrong md5: refused, nothing left behind.
echo "not the verdict" > "$tmp/shared/data/the-verdict.txt"
get the-verdict
rc=$?
[ $rc -eq 1 ] && grep -q 'the-verdict.txt should have md5' "$tmp/out" \
  && ok "wrong md5: exit 1 with the expected md5" || bad "wrong md5: exit $rc, $(cat "$tmp/out")"
[ "$(leftovers)" = 0 ] && [ ! -e "$tmp/repo/data/the-verdict.txt" ] \
  && ok "... no file, no temp file" || bad "left: $(ls -A "$tmp/repo/data")"

# 3. The real file in ../shared/data (where the checkout has it): copied, checked.
real=
for d in "$SRC/data" "$SRC/../shared/data"; do
  [ -s "$d/the-verdict.txt" ] && real=$d/the-verdict.txt && break
done
if [ -n "$real" ]; then
  cp "$real" "$tmp/shared/data/the-verdict.txt"
  get the-verdict
  rc=$?
  [ $rc -eq 0 ] && cmp -s "$real" "$tmp/repo/data/the-verdict.txt" && [ "$(leftovers)" = 0 ] \
    && ok "a good ../shared copy: copied" || bad "good copy: exit $rc, $(cat "$tmp/out")"
else
  ok "(no the-verdict.txt here: the good-copy case is left out)"
fi

# 4. An unknown name: usage, exit 2.
get nonsense
rc=$?
[ $rc -eq 2 ] && grep -q '^usage: get-data.sh' "$tmp/out" && ok "unknown name: exit 2" \
  || bad "unknown name: exit $rc"

[ "$fails" -eq 0 ] || exit 1
