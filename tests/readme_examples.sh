#!/usr/bin/env bash
# The README's examples run as written (issue 9). Every ```sh and ```python
# block in README.md carries a marker on the line before it:
#   <!-- readme-test: run -->           run here, as written, in a fresh folder
#   <!-- readme-test: skip (why) -->    not run (the reason is required)
# A block without a marker fails the test, so a new example is never silently
# untested. The run blocks execute in order in one temp folder, with this
# build's attn first on PATH, after a setup that stands in for `make run`: a
# tiny model trained for a few steps into runs/tiny (the real one trains for
# minutes) on a small corpus holding the characters the examples use. Python
# blocks run with /usr/bin/python3, the package from SRC/python (linked as
# python/ in the folder, so `PYTHONPATH=python` works as written) and this
# build's libattn.so.
#
#   bash tests/readme_examples.sh ATTN SRCDIR
set -uo pipefail
ATTN=$1
SRC=$2
tmp=$(mktemp -d "${TMPDIR:-/tmp}/attn-readme.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fails=0
n=0
ok() { n=$((n + 1)); echo "ok   $1"; }
bad() { n=$((n + 1)); fails=$((fails + 1)); echo "FAIL $1"; }

# Split the README: tmp/blocks/NN.run|NN.skip, plus a list of unmarked blocks.
/usr/bin/python3 - "$SRC/README.md" "$tmp/blocks" <<'PY' || { echo "FAIL extracting the blocks"; exit 1; }
import os, re, sys
lines = open(sys.argv[1], encoding="utf-8").read().split("\n")
out = sys.argv[2]
os.makedirs(out)
k, i, unmarked = 0, 0, []
while i < len(lines):
    if lines[i].strip() in ("```sh", "```python"):
        lang = "py" if lines[i].strip() == "```python" else "sh"
        start = i
        j = i + 1
        while lines[j].strip() != "```":
            j += 1
        body = "\n".join(lines[i + 1:j]) + "\n"
        prev = lines[i - 1].strip() if i else ""
        m = re.fullmatch(r"<!-- readme-test: (run|skip \(.+\)) -->", prev)
        k += 1
        if not m:
            unmarked.append(f"README.md:{start + 1}")
        else:
            kind = "run" if m.group(1) == "run" else "skip"
            open(f"{out}/{k:02d}.{kind}", "w").write(f"# README.md:{start + 1} {lang}\n" + body)
        i = j
    i += 1
open(f"{out}/unmarked", "w").write("\n".join(unmarked))
PY
if [ -s "$tmp/blocks/unmarked" ]; then
  bad "sh or python blocks without a readme-test marker: $(tr '\n' ' ' < "$tmp/blocks/unmarked")"
else
  ok "every sh and python block is marked run or skip ($(ls "$tmp/blocks" | grep -c run) run, $(ls "$tmp/blocks" | grep -c skip) skipped)"
fi

# Setup standing in for `make run`: runs/tiny, a few steps.
work=$tmp/work
mkdir -p "$work/runs" "$tmp/bin"
ln -s "$(cd "$(dirname "$ATTN")" && pwd)/$(basename "$ATTN")" "$tmp/bin/attn"
ln -s "$(cd "$SRC" && pwd)/python" "$work/python"
. "$SRC/tests/python/pyenv.sh"
pyenv "$(cd "$SRC" && pwd)" "$(cd "$(dirname "$ATTN")" && pwd)/libattn.so"
if [ "${PY[0]}" = env ]; then
  # A sanitized build: Python (in the sh blocks too) loads libattn with the
  # sanitizer runtime first; leaks are not checked here (Python's own at exit).
  export "${PY[1]}" "${PY[2]}"
fi
for i in $(seq 1 40); do
  echo "ROMEO: To be, or not to be, that is the question; First Citizen: speak $((i % 9))."
  echo "JULIET: What's in a name? that which we call a rose by any other word would smell as sweet!"
done > "$tmp/corpus.txt"
echo '{"n_layers": 3, "n_heads": 2, "emb_dim": 32, "context_length": 64, "batch_size": 2,
       "max_steps": 3, "eval_interval": 3, "eval_iters": 1}' > "$tmp/tiny.json"
"$ATTN" train --preset tiny --config "$tmp/tiny.json" --data "$tmp/corpus.txt" --threads 1 \
  --out "$work/runs/tiny" > "$tmp/train.log" 2>&1 || bad "setup: training runs/tiny: $(tail -3 "$tmp/train.log")"

for f in "$tmp"/blocks/*.run; do
  where=$(head -1 "$f" | sed 's/^# //; s/ [a-z]*$//')
  case $(head -1 "$f") in
  *" py") run=("${PY[@]}") ;;
  *) run=(bash -e -o pipefail) ;;
  esac
  if (cd "$work" && PATH="$tmp/bin:$PATH" OMP_NUM_THREADS=1 "${run[@]}" "$f") > "$tmp/out" 2>&1; then
    ok "$where runs as written"
  else
    bad "$where failed: $(tail -5 "$tmp/out")"
    sed 's/^/     | /' "$f"
  fi
done
# What the run blocks promise to leave behind.
for want in x.npy y.npy grads/input.npy grads/out_proj.bias.npy w.safetensors romeo.html head.svg \
  figures/01-attn-scores.svg romeo-py.html; do
  [ -s "$work/$want" ] || bad "the examples did not write $want"
done

echo "readme_examples: $((n - fails)) of $n checks passed"
[ "$fails" -eq 0 ]
