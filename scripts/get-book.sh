#!/usr/bin/env bash
# The book's chapter-6, appendix-E and chapter-7 code at the commit the
# fixtures were made from (tests/fixtures/book_ch67/: the peer that
# tests/book_ch67_fixtures.sh re-runs), into data/book-code/ (never
# committed: data/ is gitignored), laid out as the repository is. Each file
# is checked by the md5 the fixtures record. Exit 1 when a file cannot be had
# (offline): the test then skips, saying why.
#   scripts/get-book.sh
set -euo pipefail
cd "$(dirname "$0")/.."
commit=28c65cdfbc3338e2e040016eea4b7fdf556e4d57
dest=data/book-code
# file under the repository | md5
FILES="
ch06/01_main-chapter-code/gpt_class_finetune.py|399016bdc5b5ae3e4a410e31d3d5c0e8
ch06/01_main-chapter-code/previous_chapters.py|af4f38edb056c61be981fe3c1a125362
ch07/01_main-chapter-code/gpt_instruction_finetuning.py|64e1d373b8621f100ab10e804b03a169
ch07/01_main-chapter-code/previous_chapters.py|cdacd36427e3acbe5fdc0996f8e2e7ce
appendix-E/01_main-chapter-code/appendix-E.ipynb|a6353b50efb316f37448afc56daa10dd
appendix-E/01_main-chapter-code/previous_chapters.py|6d7f7ac198924d4e0df7a32f9f615ae4
"
mirror=/work/.mirror/rasbt+LLMs-from-scratch/repo # a developer machine's copy, when there
while IFS='|' read -r file md5; do
  [ -n "$file" ] || continue
  out=$dest/$file
  if [ -s "$out" ] && [ "$(md5sum < "$out" | cut -d' ' -f1)" = "$md5" ]; then continue; fi
  mkdir -p "$(dirname "$out")"
  tmp=$(mktemp "$(dirname "$out")/.get.XXXXXX")
  if git --git-dir "$mirror" cat-file -e "$commit:$file" 2> /dev/null; then
    git --git-dir "$mirror" show "$commit:$file" > "$tmp"
  elif ! curl -fsSL --retry 3 -o "$tmp" \
      "https://raw.githubusercontent.com/rasbt/LLMs-from-scratch/$commit/$file"; then
    rm -f "$tmp"
    echo "attn: cannot download the book's $file (offline?)" >&2
    exit 1
  fi
  if [ "$(md5sum < "$tmp" | cut -d' ' -f1)" != "$md5" ]; then
    rm -f "$tmp"
    echo "attn: the book's $file at $commit should have md5 $md5" >&2
    exit 1
  fi
  mv "$tmp" "$out"
done <<< "$FILES"
