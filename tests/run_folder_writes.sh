#!/usr/bin/env bash
# A run folder is attn train's, whole (issue 31, items 1, 2, 3, 4, 5, 10):
#  1. train --out RUN/best --resume, --out RUN/ckpt-N --resume: refused
#     (exit 2), the run unchanged;
#  2. train --out RUN/ckpt-N --force, --out RUN/sub (a new folder inside):
#     refused, nothing removed or made;
#  3. viz --out into RUN/best, onto RUN/.attn-run, RUN/.lock, RUN/loss.csv,
#     forward gpt --output RUN/loss.csv, viz --out onto the corpus the run
#     was trained on, chapter3 --figures RUN/figs: refused (exit 2);
#  4. Python's View.save('RUN/model.safetensors'): attn.Error, run unchanged;
#  5. forward mha --output same.npy --save-weights same.npy: refused (exit 2);
#  10. --dry-run on a non-empty folder attn did not make refuses as the real
#     run does (same exit code and message).
# Every refusal leaves the run folder byte-identical and the corpus kept.
# Usage: bash run_folder_writes.sh <path-to-attn> <source-dir>
set -u
ATTN=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
SRC=$(cd "${2:-$(dirname "$0")/..}" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "${BASH_SOURCE[0]}")/support/lib.sh"
cd "$tmp" || exit 1

make_corpus corpus.txt
cat > cfg.json <<'JSON'
{"context_length": 16, "emb_dim": 16, "n_heads": 2, "n_layers": 1, "drop_rate": 0.1,
 "batch_size": 2, "max_steps": 20, "eval_interval": 10, "eval_iters": 1,
 "log_interval": 1, "warmup_steps": 2}
JSON
"$ATTN" train --data corpus.txt --config cfg.json --threads 1 --out RUN > /dev/null 2>&1 ||
  { bad "training the run failed"; exit 1; }
[ -d RUN/best ] && [ -f RUN/.attn-run ] || { bad "the run has no best/ or marker"; exit 1; }
live=$(cd RUN && ls -d ckpt-* | head -1)
snap() {
  (cd RUN && find . -name .lock -prune -o -printf '%y %p %l\n' | sort &&
    find . -type f -exec md5sum {} + | sort)
  md5sum corpus.txt
}
snap > before.txt
# refused WHAT CMD...: exit 2, a message, the run and the corpus unchanged.
refused() {
  local what=$1
  shift
  "$@" > /dev/null 2> o.err
  local rc=$?
  if [ $rc -eq 2 ] && [ -s o.err ] && snap | cmp -s before.txt -; then
    ok "$what: refused (exit 2), the run kept"
  else
    bad "$what: rc=$rc $(head -c 300 o.err)"
  fi
}
train() { "$ATTN" train --data corpus.txt --config cfg.json --threads 1 "$@"; }

# ---- 1, 2: train --out inside the run ----------------------------------
refused "1: train --out RUN/best --resume" train --out RUN/best --resume --steps 30
refused "1: train --out RUN/$live --resume" train --out "RUN/$live" --resume --steps 30
refused "2: train --out RUN/$live --force" train --out "RUN/$live" --force
refused "2: train --out RUN/best --force" train --out RUN/best --force
refused "2: train --out RUN/sub (a new folder inside)" train --out RUN/sub
[ ! -e RUN/sub ] && ok "2: RUN/sub was not made" || bad "2: RUN/sub was made"
refused "1: train --dry-run --out RUN/best --resume" train --out RUN/best --resume --dry-run
ln -s RUN/best bestlink
refused "1: train --out a link to RUN/best --resume" train --out bestlink --resume
"$ATTN" train --out RUN --resume --steps 20 --threads 1 > /dev/null 2> o.err &&
  ok "the run folder itself still resumes" || bad "RUN --resume: $(cat o.err)"
snap > before.txt

# ---- 3: viz and forward gpt into the run, onto its corpus ---------------
viz() { "$ATTN" viz --checkpoint RUN --prompt ab "$@"; }
refused "3: viz --out RUN/best/model.safetensors" viz --out RUN/best/model.safetensors
refused "3: viz --out RUN/.attn-run" viz --out RUN/.attn-run
refused "3: viz --out RUN/.lock" viz --out RUN/.lock
refused "3: viz --out RUN/loss.csv" viz --out RUN/loss.csv
refused "3: viz --out RUN/new.html" viz --out RUN/new.html
refused "3: viz --svg RUN/best/x.svg" viz --layer 0 --head 0 --svg RUN/best/x.svg
cp corpus.txt small.txt
"$ATTN" train --data "$tmp/small.txt" --config cfg.json --threads 1 --out RUN2 > /dev/null 2>&1 ||
  bad "training RUN2 failed"
cp small.txt small.before
"$ATTN" viz --checkpoint RUN2 --prompt ab --out small.txt > /dev/null 2> o.err
rc=$?
[ $rc -eq 2 ] && cmp -s small.txt small.before && ok "3: viz --out onto the run's corpus: refused" ||
  bad "3: viz onto the corpus: rc=$rc $(cat o.err)"
ln small.txt corpus-hardlink.txt
"$ATTN" viz --checkpoint RUN2 --prompt ab --out corpus-hardlink.txt > /dev/null 2> o.err
rc=$?
[ $rc -eq 2 ] && cmp -s small.txt small.before && ok "3: viz --out onto a hard link of the corpus: refused" ||
  bad "3: viz onto the corpus's hard link: rc=$rc $(cat o.err)"
printf '\x93NUMPY\x01\x00\x76\x00' > ids.npy
printf "%-117s\n" "{'descr': '<i8', 'fortran_order': False, 'shape': (1, 4), }" >> ids.npy
head -c 32 /dev/zero >> ids.npy
refused "3: forward gpt --output RUN/loss.csv" "$ATTN" forward gpt --checkpoint RUN --input ids.npy --output RUN/loss.csv
refused "3: forward gpt --output RUN/best/y.npy" "$ATTN" forward gpt --checkpoint RUN --input ids.npy --output RUN/best/y.npy
refused "3: export RUN RUN/gpt2.safetensors" "$ATTN" export RUN RUN/gpt2.safetensors --format book
refused "3: export RUN RUN/best/model.safetensors" "$ATTN" export RUN RUN/best/model.safetensors --format book
refused "3: export RUN2 onto its corpus" "$ATTN" export RUN2 small.txt --format book
mkdir -p RUN/mine
snap > before.txt
refused "3: chapter3 --figures RUN" "$ATTN" chapter3 --figures RUN
refused "3: chapter3 --figures RUN/figs" "$ATTN" chapter3 --figures RUN/figs
refused "3: chapter3 --figures RUN/mine (a user's folder inside)" "$ATTN" chapter3 --figures RUN/mine
mkdir figs && ln -s ../RUN/loss.csv figs/01-attn-scores.svg
refused "3: chapter3 --figures whose first file links into the run" "$ATTN" chapter3 --figures figs
viz --out page.html > /dev/null 2>&1 && [ -s page.html ] && ok "3: viz --out outside the run is written" ||
  bad "viz outside the run"

# ---- 4: Python's View.save --------------------------------------------
# Python as the suite runs it (tests/python/pyenv.sh: this build's library,
# and the sanitizer runtimes first when it is a sanitized build).
. "$SRC/tests/python/pyenv.sh"
pyenv "$SRC" "$(dirname "$ATTN")/libattn.so"
if /usr/bin/python3 -c "import numpy" 2> /dev/null; then
  "${PY[@]}" - > py.out 2>&1 <<'PY'
import attn
v = attn.viz("RUN", "ab")
for p in ["RUN/model.safetensors", "RUN/best/model.safetensors", "RUN/loss.csv", "RUN/x.html"]:
    try:
        v.save(p)
        print("WROTE", p)
    except attn.Error as e:
        print("refused", p, e)
v.save("ok.html")
print("saved ok.html")
PY
  if ! grep -q WROTE py.out && [ "$(grep -c '^refused' py.out)" -eq 4 ] && grep -q "saved ok.html" py.out &&
     snap | cmp -s before.txt -; then
    ok "4: View.save into the run: attn.Error, the run kept"
  else
    bad "4: View.save: $(cat py.out)"
  fi
else
  echo "ok   - 4: skipped (no numpy)"
fi

# ---- 5: two outputs on one file ----------------------------------------
{
  printf '\x93NUMPY\x01\x00\x76\x00'
  printf "%-117s\n" "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 4, 3), }"
  head -c 96 /dev/zero
} > x.npy
"$ATTN" forward mha --d-out 4 --heads 2 --input x.npy --output same.bin --save-weights same.bin > /dev/null 2> o.err
rc=$?
[ $rc -eq 2 ] && [ ! -e same.bin ] && grep -q "name one file" o.err &&
  ok "5: forward --output and --save-weights on one file: refused" || bad "5: rc=$rc $(cat o.err)"
ln -s same2.bin link.bin
"$ATTN" forward mha --d-out 4 --heads 2 --input x.npy --output link.bin --save-weights same2.bin > /dev/null 2> o.err
rc=$?
[ $rc -eq 2 ] && [ ! -e same2.bin ] && ok "5: the same through a dangling link: refused" || bad "5 link: rc=$rc $(cat o.err)"

# ---- 10: --dry-run says what the real run would ------------------------
mkdir notmine && echo "my notes" > notmine/notes.txt
train --out notmine --dry-run > dry.out 2> dry.err
drc=$?
train --out notmine > /dev/null 2> real.err
rrc=$?
[ $drc -ne 0 ] && [ $drc -eq $rrc ] && ! grep -q "a new run" dry.out && cmp -s dry.err real.err &&
  [ "$(ls -A notmine)" = notes.txt ] &&
  ok "10: --dry-run on a folder attn did not make refuses as the real run (exit $rrc)" ||
  bad "10: dry rc=$drc real rc=$rrc: $(cat dry.out dry.err real.err)"

[ $fails -eq 0 ] && echo "all run-folder write checks passed" || echo "$fails check(s) failed"
exit $((fails > 0))
