#!/usr/bin/env bash
# Put the data attn uses under data/ (never committed: data/ is gitignored).
#   scripts/get-data.sh [NAME...]     NAME: tinyshakespeare (default), the-verdict, gpt2, book
# Each file: already there; else a copy in $ATTN_DATA_FROM (a folder laid
# out as data/, for copies of the source such as the pip test's), else in
# ../shared/data/ next to the checkout; else its public download. Every file
# is checked by its md5.
set -euo pipefail
cd "$(dirname "$0")/.."

# name | file under data/ | md5 | public home
FILES="
tinyshakespeare|tinyshakespeare.txt|6fb458f1232090904fb40fe944165e91|https://raw.githubusercontent.com/karpathy/char-rnn/master/data/tinyshakespeare/input.txt
the-verdict|the-verdict.txt|692fcf20b91588284f45ff38cd599434|https://raw.githubusercontent.com/rasbt/LLMs-from-scratch/main/ch02/01_main-chapter-code/the-verdict.txt
gpt2|gpt2/encoder.json|dffec25a898b1f5e569bec4dffd7e5c0|https://openaipublic.blob.core.windows.net/gpt-2/models/124M/encoder.json
gpt2|gpt2/vocab.bpe|75a37753dd7a28a2c5df80c28bf06e4e|https://openaipublic.blob.core.windows.net/gpt-2/models/124M/vocab.bpe
book|book/instruction-data.json|2bdd7e1e6893fb2a365efbc8016d936e|https://raw.githubusercontent.com/rasbt/LLMs-from-scratch/28c65cdfbc3338e2e040016eea4b7fdf556e4d57/ch07/01_main-chapter-code/instruction-data.json
"

fetch_failed() { # file
  echo "attn: cannot download $1 (offline?): put it at data/$1 or ../shared/data/$1" >&2
  exit 1
}

get() { # file md5 url
  local dest=data/$1 tmp got
  if [ -s "$dest" ]; then return 0; fi
  mkdir -p "$(dirname "$dest")"
  tmp=$(mktemp "$(dirname "$dest")/.get.XXXXXX")
  # expanded now: the trap may run after this function's locals are gone
  trap "rm -f '$tmp'" EXIT
  if [ -n "${ATTN_DATA_FROM:-}" ] && [ -s "$ATTN_DATA_FROM/$1" ]; then
    cp "$ATTN_DATA_FROM/$1" "$tmp"
    echo "attn: copied $1 from $ATTN_DATA_FROM/" >&2
  elif [ -s "../shared/data/$1" ]; then
    cp "../shared/data/$1" "$tmp"
    echo "attn: copied $1 from ../shared/data/" >&2
  elif command -v curl > /dev/null; then
    echo "attn: downloading $1 from $3" >&2
    curl -fsSL --retry 3 -o "$tmp" "$3" || fetch_failed "$1"
  elif command -v wget > /dev/null; then
    echo "attn: downloading $1 from $3" >&2
    wget -q -O "$tmp" "$3" || fetch_failed "$1"
  else
    echo "attn: no data/$1, no ../shared/data copy, and neither curl nor wget to fetch $3" >&2
    exit 1
  fi
  got=$(md5sum < "$tmp" | cut -d' ' -f1)
  if [ "$got" != "$2" ]; then
    echo "attn: $1 should have md5 $2, got $got" >&2
    exit 1
  fi
  chmod 644 "$tmp"
  mv "$tmp" "$dest"
  trap - EXIT
}

[ $# -gt 0 ] || set -- tinyshakespeare
for name in "$@"; do
  found=0
  while IFS='|' read -r n file md5 url; do
    [ "$n" = "$name" ] || continue
    found=1
    get "$file" "$md5" "$url"
  done <<< "$FILES"
  if [ $found -eq 0 ]; then
    echo "usage: get-data.sh [tinyshakespeare|the-verdict|gpt2|book]..." >&2
    exit 2
  fi
done
