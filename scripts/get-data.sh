#!/usr/bin/env bash
# Put Tiny Shakespeare at data/tinyshakespeare.txt (never committed: data/ is
# gitignored). Order: already there; a copy in ../shared/data/ next to the
# checkout; else download it from its public home (Karpathy's char-rnn repo).
set -euo pipefail
cd "$(dirname "$0")/.."
dest=data/tinyshakespeare.txt
url=https://raw.githubusercontent.com/karpathy/char-rnn/master/data/tinyshakespeare/input.txt
size=1115394
if [ -s "$dest" ]; then exit 0; fi
mkdir -p data
tmp=$(mktemp data/.tinyshakespeare.XXXXXX)
trap 'rm -f "$tmp"' EXIT
if [ -s ../shared/data/tinyshakespeare.txt ]; then
  cp ../shared/data/tinyshakespeare.txt "$tmp"
  echo "attn: copied Tiny Shakespeare from ../shared/data/" >&2
elif command -v curl >/dev/null; then
  echo "attn: downloading Tiny Shakespeare from $url" >&2
  curl -fsSL --retry 3 -o "$tmp" "$url"
elif command -v wget >/dev/null; then
  echo "attn: downloading Tiny Shakespeare from $url" >&2
  wget -q -O "$tmp" "$url"
else
  echo "attn: no data/tinyshakespeare.txt, no ../shared/data copy, and neither curl nor wget to fetch $url" >&2
  exit 1
fi
got=$(wc -c < "$tmp")
if [ "$got" -ne "$size" ]; then
  echo "attn: Tiny Shakespeare should be $size bytes, got $got" >&2
  exit 1
fi
mv "$tmp" "$dest"
trap - EXIT
