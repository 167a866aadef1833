#!/usr/bin/env bash
# A gpt2 run's corpus as token files (attn/token_file.h, attn_train_start):
# tokenized once into uint16 files in the cache folder ($ATTN_CACHE_DIR),
# reused while the text and GPT-2's files are unchanged, never trusted when
# they are not; their ids are the book's split of the text under GPT-2's
# BPE; a dry run writes no cache; a changed corpus cannot be resumed.
# Usage: bash tests/train_token_files.sh <path-to-attn> <source-dir>
set -u
ATTN=$1
SRC=$2
PY=/usr/bin/python3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "${BASH_SOURCE[0]}")/support/lib.sh"

VOCAB=
for d in "$SRC/data/gpt2" "$SRC/../shared/data/gpt2"; do
  [ -f "$d/encoder.json" ] && [ -f "$d/vocab.bpe" ] && VOCAB=$(cd "$d" && pwd) && break
done
[ -n "$VOCAB" ] || { echo "SKIP: no GPT-2 vocabulary in data/gpt2 (scripts/get-data.sh gpt2)"; exit 77; }

make_corpus "$tmp/corpus.txt" 50
for i in 1 2 3 4; do printf 'Café déjà vu — naïve “quotes” %d.\n<|endoftext|>\n' "$i"; done >> "$tmp/corpus.txt"
echo '{"emb_dim": 32, "n_layers": 2, "n_heads": 2, "context_length": 32}' > "$tmp/small.json"
export ATTN_CACHE_DIR=$tmp/cache
train() { ATTN_GPT2_DIR=${GPT2:-$VOCAB} "$ATTN" train --preset gpt2-124m --config "$tmp/small.json" \
  --threads 1 --steps 3 "$@"; }
files() { ls "$tmp/cache" 2> /dev/null | sort; }

# 1. Built once, then reused (the same files, untouched), the same run.
train --data "$tmp/corpus.txt" --out "$tmp/a" > /dev/null 2> "$tmp/a.err" &&
  grep -q "(train, built now).*(val, built now)" "$tmp/a.err" && [ "$(files | wc -l)" = 2 ] &&
  ok "a gpt2 run builds two token files (train, val) in \$ATTN_CACHE_DIR" || bad "first run: $(cat "$tmp/a.err")"
stamp() { for f in $(files); do stat -c '%i %Y %s' "$tmp/cache/$f"; done; }
before=$(stamp)
train --data "$tmp/corpus.txt" --out "$tmp/b" > /dev/null 2> "$tmp/b.err" &&
  grep -q "(train, reused).*(val, reused)" "$tmp/b.err" && [ "$(stamp)" = "$before" ] &&
  ok "a second run reuses them untouched" || bad "second run: $(cat "$tmp/b.err")"
cmp -s "$tmp/a/model.safetensors" "$tmp/b/model.safetensors" &&
  ok "... and trains to the same bytes" || bad "the reused tokens train differently"

# 2. Their ids: GPT-2's BPE of the text's first 90% of characters and of
# the rest, <|endoftext|> the special token (attn's Python tokenizer on the
# whole text; the run encoded it in chunks).
# Python as the suite runs it (tests/python/pyenv.sh: this build's library, ASan's too).
. "$SRC/tests/python/pyenv.sh"
pyenv "$SRC" "$(dirname "$ATTN")/libattn.so"
"${PY[@]}" - "$tmp/corpus.txt" "$tmp/cache" "$tmp/a.err" << 'PY' &&
import os, re, sys, array
import attn.tokenizer
text = open(sys.argv[1], encoding='utf-8').read()
enc = attn.tokenizer.get_encoding('gpt2')
cut = int(0.9 * len(text))
want = [enc.encode(text[:cut], allowed_special={'<|endoftext|>'}),
        enc.encode(text[cut:], allowed_special={'<|endoftext|>'})]
paths = re.search(r'token files \(uint16\): (\S+) \(train.*?\), (\S+) \(val', open(sys.argv[3]).read()).groups()
for path, ids in zip(paths, want):
    b = open(path, 'rb').read()
    assert b[:8] == b'ATTNTOK\0' and len(b) == 72 + 2 * len(ids), (path, len(b), len(ids))
    got = array.array('H', b[72:])
    assert got.tolist() == ids, path
assert 50256 in want[0] or 50256 in want[1]
PY
  ok "the token files hold the book's split under GPT-2's BPE, id for id" || bad "token file ids"

# 3. Changed vocabulary files: new token files, the old ones stay.
mkdir "$tmp/v2" && cp "$VOCAB/vocab.bpe" "$tmp/v2/" && { cat "$VOCAB/encoder.json"; echo; } > "$tmp/v2/encoder.json"
old=$(files)
GPT2=$tmp/v2 train --data "$tmp/corpus.txt" --out "$tmp/c" > /dev/null 2> "$tmp/c.err" &&
  grep -q "(train, built now)" "$tmp/c.err" && [ "$(files | wc -l)" = 4 ] &&
  [ -z "$(comm -23 <(echo "$old") <(files))" ] &&
  ok "other GPT-2 files: new token files, the old ones kept" || bad "changed vocabulary: $(cat "$tmp/c.err")"

# 4. A token file from another tokenizer at this one's name (its header's
# encoder hash changed) is not trusted: rebuilt, the run as before.
f=$(grep -o '[^ ]*tok-[^ ]*\.u16 (train' "$tmp/a.err" | cut -d' ' -f1)
printf '\x01' | dd of="$f" bs=1 seek=16 conv=notrunc status=none
train --data "$tmp/corpus.txt" --out "$tmp/d" > /dev/null 2> "$tmp/d.err" &&
  grep -q "(train, built now).*(val, reused)" "$tmp/d.err" &&
  cmp -s "$tmp/a/model.safetensors" "$tmp/d/model.safetensors" &&
  ok "a token file of another tokenizer is rebuilt, never used" || bad "foreign token file: $(cat "$tmp/d.err")"

# 5. A dry run counts the tokens and writes no cache.
n=$(files | wc -l)
ATTN_CACHE_DIR=$tmp/cache2 train --data "$tmp/corpus.txt" --out "$tmp/e" --dry-run > "$tmp/e.out" 2>&1 &&
  [ ! -e "$tmp/cache2" ] && [ ! -e "$tmp/e" ] && [ "$(files | wc -l)" = "$n" ] &&
  ok "--dry-run: no cache folder, no run folder" || bad "dry run: $(cat "$tmp/e.out")"

# 6. The run resumes on the same text, not on a changed one.
train --data "$tmp/corpus.txt" --out "$tmp/a" --resume --steps 4 > /dev/null 2> "$tmp/r.err" &&
  ok "resume on the same corpus (its token files reused)" || bad "resume: $(cat "$tmp/r.err")"
cp "$tmp/corpus.txt" "$tmp/changed.txt" && echo "one more line" >> "$tmp/changed.txt"
train --data "$tmp/changed.txt" --out "$tmp/a" --resume --steps 5 > /dev/null 2> "$tmp/r2.err"
[ $? = 1 ] && grep -q "different corpus" "$tmp/r2.err" && [ "$(readlink "$tmp/a/latest")" = ckpt-4 ] &&
  ok "a changed corpus is refused on resume, the run untouched" || bad "changed corpus: $(cat "$tmp/r2.err")"

# 7. A cache folder inside a run folder is refused (only the trainer writes there).
ATTN_CACHE_DIR=$tmp/a/cache train --data "$tmp/corpus.txt" --out "$tmp/f" > /dev/null 2> "$tmp/f.err"
[ $? = 1 ] && grep -q "run folder" "$tmp/f.err" && [ ! -e "$tmp/a/cache" ] &&
  ok "a cache inside a run folder is refused" || bad "cache in a run folder: $(cat "$tmp/f.err")"

[ $fails = 0 ]
