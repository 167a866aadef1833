#!/usr/bin/env bash
# The documentation's examples run as written, and its links lead somewhere
# (issues 9 and 17). The pages are README.md and every docs/*.md. Every ```sh,
# ```python and ```c block carries a marker on the line before it:
#   <!-- readme-test: run -->           run here, as written (sh and python)
#   <!-- readme-test: skip (why) -->    not run (the reason is required)
#   <!-- readme-test: file NAME -->     the file NAME, for the blocks after it
# A block without a marker fails the test, so a new example is never silently
# untested. tests/support/docs_check.py also fails a relative link to a path
# the repository does not have (or a #section its page lacks), a README over
# 160 lines, and a page of docs/ the README does not link; it is first run on
# a made-up set of pages with each of those faults, and must name them all.
#
# Pages share nothing: each page's blocks run in order in a fresh folder of
# its own (blocks may use what earlier blocks of the same page made), with
# this build's attn first on PATH, after a setup that stands in for `make
# run`: a tiny model trained for a few steps into runs/tiny (the real one
# trains for minutes) on a small corpus holding the characters the examples
# use. Python blocks run with /usr/bin/python3, the package from SRC/python
# (linked as python/ in the folder, so `PYTHONPATH=python` works as written)
# and this build's libattn.so; `pkg-config attn` gives this build's headers
# and library, as an installed attn.pc would.
#
#   bash tests/readme_examples.sh ATTN SRCDIR
set -uo pipefail
ATTN=$1
SRC=$(cd "$2" && pwd)
BUILD=$(cd "$(dirname "$ATTN")" && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/attn-readme.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fails=0
n=0
ok() { n=$((n + 1)); echo "ok   $1"; }
bad() { n=$((n + 1)); fails=$((fails + 1)); echo "FAIL $1"; }
check=$SRC/tests/support/docs_check.py

# The checker finds each kind of fault (on made-up pages, outside any git tree).
fake=$tmp/fake
mkdir -p "$fake/docs"
{
  echo "# fake"
  echo "[a](docs/a.md) [gone](docs/gone.md) [anchor](docs/a.md#no-such-part) [up](../x.md)"
  echo '```sh'
  echo 'echo unmarked'
  echo '```'
  echo '<!-- readme-test: skip -->'
  echo '```python'
  echo 'print("a skip without a reason")'
  echo '```'
  echo '<!-- readme-test: run -->'
  echo '```c'
  echo 'int main(void) { return 0; }'
  echo '```'
  for i in $(seq 1 150); do echo "line $i"; done
} > "$fake/README.md"
printf '# a\n\n## A part\n\n[back](../README.md#fake) [part](#a-part) [bad](#b-part)\n' > "$fake/docs/a.md"
printf '# b\n\nNot linked from the README.\n' > "$fake/docs/b.md"
/usr/bin/python3 "$check" "$fake" "$tmp/fake-out" > "$tmp/fake.txt" 2>&1
want=("README.md:2: link to docs/gone.md: no such file"
  "README.md:2: link to docs/a.md#no-such-part: docs/a.md has no heading #no-such-part"
  "README.md:2: link to ../x.md: outside the repository"
  "README.md:3: a \`\`\`sh block without a readme-test marker"
  "README.md:7: a \`\`\`python block without a readme-test marker"
  "README.md:11: a \`\`\`c block cannot run"
  "docs/a.md:5: link to #b-part: docs/a.md has no heading #b-part"
  "README.md: does not link docs/b.md"
  "README.md: 163 lines, more than 160")
missed=()
for w in "${want[@]}"; do grep -qF "$w" "$tmp/fake.txt" || missed+=("$w"); done
if [ ${#missed[@]} -eq 0 ] && [ "$(wc -l < "$tmp/fake.txt")" -eq ${#want[@]} ]; then
  ok "the checker names each fault of a made-up set of pages (${#want[@]})"
else
  bad "the checker on made-up pages: missed [${missed[*]}], said: $(cat "$tmp/fake.txt")"
fi

# The real pages.
if /usr/bin/python3 "$check" "$SRC" "$tmp/blocks" > "$tmp/check.txt" 2>&1; then
  ok "$(wc -l < "$tmp/blocks/pages") pages: every sh, python and c block marked ($(find "$tmp/blocks" \
    -name '*.run' | wc -l) run, $(find "$tmp/blocks" -name '*.file' | wc -l) files, $(find \
    "$tmp/blocks" -name '*.skip' | wc -l) skipped), every relative link resolves, README short"
else
  [ -f "$tmp/blocks/pages" ] || { bad "docs_check.py: $(cat "$tmp/check.txt")"; exit 1; }
  while IFS= read -r line; do bad "$line"; done < "$tmp/check.txt"
fi

# Setup standing in for `make run`: runs/tiny, a few steps, in a template
# folder each page gets a copy of.
template=$tmp/template
mkdir -p "$template/runs" "$tmp/bin" "$tmp/pkgconfig"
ln -s "$BUILD/$(basename "$ATTN")" "$tmp/bin/attn"
ln -s "$SRC/python" "$template/python"
# GPT-2's vocabulary files, as `make test` fetches them (scripts/get-data.sh gpt2).
[ -d "$SRC/data/gpt2" ] && mkdir -p "$template/data" && ln -s "$SRC/data/gpt2" "$template/data/gpt2"
. "$SRC/tests/python/pyenv.sh"
pyenv "$SRC" "$BUILD/libattn.so"
san=
if [ "${PY[0]}" = env ]; then
  # A sanitized build: Python (in the sh blocks too) loads libattn with the
  # sanitizer runtime first; leaks are not checked here (Python's own at exit).
  export "${PY[1]}" "${PY[2]}"
  san=" -fsanitize=address,undefined"
fi
# attn.pc for this build, uninstalled: the headers of SRC, the library here.
sed -e "s|^prefix=.*|prefix=$SRC|; s|^libdir=.*|libdir=$BUILD|; s|^includedir=.*|includedir=$SRC/include|" \
  -e "s|^Cflags: .*|&$san|; s|^Libs: .*|&$san|" "$BUILD/attn.pc" > "$tmp/pkgconfig/attn.pc"
export PKG_CONFIG_PATH=$tmp/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}
for i in $(seq 1 40); do
  echo "ROMEO: To be, or not to be, that is the question; First Citizen: speak $((i % 9))."
  echo "JULIET: What's in a name? that which we call a rose by any other word would smell as sweet!"
done > "$tmp/corpus.txt"
echo '{"n_layers": 3, "n_heads": 2, "emb_dim": 32, "context_length": 64, "batch_size": 2,
       "max_steps": 3, "eval_interval": 3, "eval_iters": 1}' > "$tmp/tiny.json"
"$ATTN" train --preset tiny --config "$tmp/tiny.json" --data "$tmp/corpus.txt" --threads 1 \
  --out "$template/runs/tiny" > "$tmp/train.log" 2>&1 || bad "setup: training runs/tiny: $(tail -3 "$tmp/train.log")"

# What each page's blocks promise to leave behind.
declare -A promised=(
  [README.md]="figures/01-attn-scores.svg romeo.html mha"
  [docs/chapter3.md]="chapter3.txt chapter3-cpu.txt x.npy y.npy grads/input.npy grads/out_proj.bias.npy w.safetensors"
  [docs/viz.md]="romeo.html head.svg figures/01-attn-scores.svg figures/14-mha-head1-weights.svg"
  [docs/python.md]="romeo-py.html"
  [docs/library.md]="gen gen.txt"
  [docs/chapter5.md]="model.pth"
)
while read -r p page; do
  work=$tmp/pages/$p
  mkdir -p "$tmp/pages"
  cp -a "$template" "$work"
  for f in "$tmp/blocks/$p"/*.run "$tmp/blocks/$p"/*.file; do
    [ -e "$f" ] && echo "$f"
  done | sort > "$tmp/order"
  while IFS= read -r f; do
    read -r _ where lang name < "$f"
    if [ "${f##*.}" = file ]; then
      mkdir -p "$(dirname "$work/$name")"
      tail -n +2 "$f" > "$work/$name"
      continue
    fi
    case $lang in
    py) run=("${PY[@]}") ;;
    *) run=(bash -e -o pipefail) ;;
    esac
    if (cd "$work" && PATH="$tmp/bin:$PATH" OMP_NUM_THREADS=1 "${run[@]}" "$f") > "$tmp/out" 2>&1; then
      ok "$where runs as written"
    else
      bad "$where failed: $(tail -5 "$tmp/out")"
      sed 's/^/     | /' "$f"
    fi
  done < "$tmp/order"
  for want in ${promised[$page]:-}; do
    [ -s "$work/$want" ] || bad "the examples of $page did not write $want"
  done
  unset "promised[$page]"
done < "$tmp/blocks/pages"
for page in "${!promised[@]}"; do bad "no page $page (its examples write ${promised[$page]})"; done

echo "readme_examples: $((n - fails)) of $n checks passed"
[ "$fails" -eq 0 ]
