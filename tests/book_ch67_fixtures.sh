#!/usr/bin/env bash
# tests/fixtures/book_ch67/ is what the book's own chapter-6, appendix-E and
# chapter-7 code computes (issue 49's reference): re-run its three small runs
# (ch06 --test_mode, appendix E on a tiny model, ch07 --test_mode) with
# scripts/gen_book_ch67_fixtures.py --check and want every printed loss,
# accuracy, logit and generated response back (floats within 1e-6, all else
# exact; on this machine the files come back byte for byte), and the saved
# training starts hashing to the recorded state_sha256_at_start. ~25 s.
# Peers (each missing one: exit 77): /usr/bin/python3 with torch, pandas,
# matplotlib, numpy, tqdm and requests; node with npm's tiktoken (a
# node_modules folder: $ATTN_NODE_MODULES, a $NODE_PATH entry or npm's global
# root); the book's repository at the pinned commit ($ATTN_BOOK_DIR, a
# checkout, or $ATTN_BOOK_GIT, a git directory; default data/book-code from
# scripts/get-book.sh, else the mirror the generator names); the-verdict.txt, tinyshakespeare.txt and
# book/instruction-data.json in data/ or ../shared/data/.
# Usage: bash book_ch67_fixtures.sh <path-to-attn> <source-dir>
set -u
SRC=$(cd "$2" && pwd)
. "$SRC/tests/support/lib.sh"
PY=/usr/bin/python3
GEN=$SRC/scripts/gen_book_ch67_fixtures.py
skip() { echo "SKIP: $1"; exit 77; }

[ -x "$PY" ] || skip "no $PY"
$PY -c "import torch, pandas, matplotlib, numpy, tqdm, requests" 2> /dev/null ||
  skip "the book's code needs torch, pandas, matplotlib, numpy, tqdm and requests for $PY"
command -v node > /dev/null || skip "no node (npm's tiktoken stands in for Python's)"
mods=
for d in ${ATTN_NODE_MODULES:-} $(echo "${NODE_PATH:-}" | tr ':' ' ') \
    $(command -v npm > /dev/null && npm root -g 2> /dev/null); do
  [ -f "$d/tiktoken/package.json" ] && { mods=$d; break; }
done
[ -n "$mods" ] || skip "no node_modules with npm's tiktoken (set ATTN_NODE_MODULES)"
commit=$(sed -n 's/^BOOK_COMMIT = "\(.*\)"$/\1/p' "$GEN")
book=()
# scripts/get-book.sh's copy (make test runs it) when no other is named
[ -z "${ATTN_BOOK_DIR:-}${ATTN_BOOK_GIT:-}" ] &&
  [ -f "$SRC/data/book-code/ch06/01_main-chapter-code/gpt_class_finetune.py" ] &&
  ATTN_BOOK_DIR=$SRC/data/book-code
if [ -n "${ATTN_BOOK_DIR:-}" ]; then
  [ -f "$ATTN_BOOK_DIR/ch06/01_main-chapter-code/gpt_class_finetune.py" ] ||
    skip "ATTN_BOOK_DIR=$ATTN_BOOK_DIR is not a checkout of LLMs-from-scratch"
  book=(--book-dir "$ATTN_BOOK_DIR")
else
  gitdir=${ATTN_BOOK_GIT:-$(sed -n 's/^BOOK_GIT = "\(.*\)"$/\1/p' "$GEN")}
  git --git-dir "$gitdir" cat-file -e "$commit^{commit}" 2> /dev/null ||
    skip "the book's repository at $commit is not at $gitdir (set ATTN_BOOK_GIT or ATTN_BOOK_DIR)"
  book=(--book-git "$gitdir")
fi
data=
for d in "$SRC/data" "$SRC/../shared/data"; do
  [ -s "$d/the-verdict.txt" ] && [ -s "$d/tinyshakespeare.txt" ] &&
    [ -s "$d/book/instruction-data.json" ] && { data=$(cd "$d" && pwd); break; }
done
[ -n "$data" ] ||
  skip "the-verdict.txt, tinyshakespeare.txt, book/instruction-data.json not in data/ or ../shared/data/"

out=$(mktemp)
trap 'rm -f "$out"' EXIT
$PY "$GEN" --check "${book[@]}" --node-modules "$mods" --data-dir "$data" \
  --out-dir "$SRC/tests/fixtures/book_ch67" > "$out" 2>&1
rc=$?
summary=$(grep '^--check:' "$out")
[ $rc -eq 0 ] && [ -n "$summary" ] && ok "the book's ch06/appendix-E/ch07 small runs: $summary" ||
  bad "gen_book_ch67_fixtures.py --check: rc=$rc $(grep -v 'it/s\]' "$out" | tail -20)"
[ $fails -eq 0 ] && echo "all ok" || echo "$fails failed"
exit $((fails > 0))
