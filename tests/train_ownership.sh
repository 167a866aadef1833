#!/usr/bin/env bash
# Nothing is deleted that attn did not make (issue 17, items 1, 2, 3, 14):
#  1. a run folder whose `latest` is missing, dangling, a file or a folder,
#     and copies made without symlinks (rsync without -l, cp -rL, zip): a
#     plain run is refused (exit 2) and changes nothing; --resume continues
#     from the newest complete checkpoint, saying so, deleting nothing on
#     the way, and ends equal to an uninterrupted run;
#  2. a folder attn did not make (a user's ckpt-7/notes.txt, loss.csv,
#     notes.txt) is refused even with --force and left as it was; in a run
#     folder of attn's, the user's files survive --force and the saves (a
#     save at step 7 takes another name); a run folder of an older attn (no
#     marker) still resumes;
#  3. an output that is one of the command's inputs (viz --out/--svg onto the
#     checkpoint through its symlink, forward gpt --output, forward
#     --output/--save-weights/--grad-dir) is refused (exit 2, a usage error)
#     and the input kept;
#  14. a failed train removes the folder it made (never one that was there);
#     --force removes the old run's best/ at once, so a stop before the
#     first evaluation leaves none; an --out path too long for checkpoint
#     paths is refused before anything is made.
# Usage: bash train_ownership.sh <path-to-attn> <source-dir>
set -u
ATTN=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "${BASH_SOURCE[0]}")/support/lib.sh"
cd "$tmp" || exit 1

make_corpus corpus.txt
cat > cfg.json <<'JSON'
{"context_length": 16, "emb_dim": 16, "n_heads": 2, "n_layers": 1, "drop_rate": 0.1,
 "batch_size": 2, "max_steps": 40, "eval_interval": 10, "eval_iters": 1,
 "log_interval": 1, "warmup_steps": 2}
JSON
train() { "$ATTN" train --data corpus.txt --config cfg.json --threads 1 "$@"; }
# Every entry of a folder (type, name, link target) and every file's bytes.
snap() {
  (cd "$1" && find . -name .lock -prune -o -printf '%y %p %l\n' | sort &&
    find . -type f ! -name .lock -exec md5sum {} + | sort)
}
same_as_whole() { cmp -s whole/model.safetensors "$1/model.safetensors" && cmp -s whole/loss.csv "$1/loss.csv"; }

train --out whole > /dev/null 2>&1 || bad "reference run failed"
train --out run --interrupt-after 30 > /dev/null 2>&1
[ "$(readlink run/latest)" = ckpt-30 ] && [ -d run/best ] || bad "setup: run stopped at 30: $(ls -A run)"

# ---- 1. latest missing, dangling, a file, a folder; copies without symlinks
variant() { # name: makes folder v-<name> from run
  local d=v-$1
  rm -rf "$d"
  case $1 in
    missing) cp -a run "$d" && rm "$d/latest" ;;
    dangling) cp -a run "$d" && ln -sfn ckpt-99 "$d/latest" ;;
    file) cp -a run "$d" && rm "$d/latest" && printf ckpt-30 > "$d/latest" ;;
    folder) cp -a run "$d" && rm "$d/latest" && cp -r run/ckpt-30 "$d/latest" ;;
    rsync) cp -a run "$d" && find "$d" -type l -delete ;; # rsync -r without -l skips links
    cp-rL) cp -rL run "$d" ;;
    zip) # zip -r stores what links point at
      (cd run && zip -qr ../run.zip .) && mkdir "$d" && (cd "$d" && unzip -q ../run.zip) ;;
  esac
}
have_zip=1
command -v zip > /dev/null && command -v unzip > /dev/null || have_zip=0
for v in missing dangling file folder rsync cp-rL zip; do
  if [ $v = zip ] && [ $have_zip = 0 ]; then
    ok "(zip/unzip not installed: a zip copy has cp -rL's layout, checked above)"
    continue
  fi
  variant $v
  d=v-$v
  before=$(snap "$d")
  train --out "$d" > /dev/null 2> p.err
  rc=$?
  if [ $rc -eq 2 ] && grep -q "already holds a checkpoint (step 30); continue it with --resume" p.err &&
     [ "$(snap "$d")" = "$before" ]; then
    ok "$v: a plain run is refused and changes nothing"
  else
    bad "$v: plain run rc=$rc $(cat p.err)"
  fi
  "$ATTN" train --out "$d" --resume --threads 1 > /dev/null 2> r.err
  rc=$?
  if [ $rc -eq 0 ] && grep -q "resuming $d at step 30" r.err && ! grep -q "removed" r.err &&
     grep -q "the newest complete checkpoint" r.err &&
     same_as_whole "$d" && [ -L "$d/latest" ] && [ "$(readlink "$d/latest")" = ckpt-40 ]; then
    ok "$v: --resume continues at step 30 ($(grep -o 'latest was [^;]*' r.err | head -1)), equal to an uninterrupted run"
  else
    bad "$v: --resume rc=$rc $(cat r.err)"
  fi
done
# Nothing deleted on the way: the checkpoint a resume starts from is still
# there after a resume that stops before its first save.
variant missing
mv v-missing v-keep
"$ATTN" train --out v-keep --resume --threads 1 --steps 30 > /dev/null 2> k.err
[ -f v-keep/ckpt-30/model.safetensors ] && [ -d v-keep/best/ckpt-30 ] &&
  [ "$(readlink v-keep/latest)" = ckpt-30 ] &&
  ok "a resume with nothing to train deletes nothing and repairs latest" ||
  bad "resume with nothing to train: $(cat k.err); $(ls -A v-keep)"

# ---- 2. folders and files that are not attn's --------------------------
mkdir -p users/ckpt-7
echo mine > users/ckpt-7/notes.txt
echo "epoch,my loss" > users/loss.csv
before=$(snap users)
for flags in "" "--force"; do
  # shellcheck disable=SC2086
  train --out users $flags > /dev/null 2> u.err
  rc=$?
  [ $rc -eq 1 ] && grep -q "users/loss.csv was not written by attn" u.err && [ "$(snap users)" = "$before" ] &&
    ok "a user's loss.csv and ckpt-7/notes.txt: refused ${flags:-without flags}, left as they were" ||
    bad "user's folder ${flags}: rc=$rc $(cat u.err); $(ls -A users)"
done
rm users/loss.csv
echo top > users/notes.txt
before=$(snap users)
train --out users --force > /dev/null 2> u.err
rc=$?
[ $rc -eq 1 ] && grep -q "users is not empty and was not made by attn train" u.err && [ "$(snap users)" = "$before" ] &&
  ok "a folder attn did not make is refused even with --force" || bad "foreign folder: rc=$rc $(cat u.err)"
# In attn's own run folder the user's files stay through --force and saves.
cp -a run mine
mkdir mine/ckpt-7
echo mine > mine/ckpt-7/notes.txt
echo top > mine/notes.txt
train --out mine --force --checkpoint-interval 1 > /dev/null 2> m.err
rc=$?
train --out fresh --checkpoint-interval 1 > /dev/null 2>&1
if [ $rc -eq 0 ] && [ "$(cat mine/ckpt-7/notes.txt)" = mine ] && [ "$(cat mine/notes.txt)" = top ] &&
   grep -q "the files of yours in it stay" m.err && cmp -s fresh/model.safetensors mine/model.safetensors &&
   [ "$(ls -d mine/ckpt-*)" = "$(printf 'mine/ckpt-40\nmine/ckpt-7')" ]; then
  ok "--force and 40 saves (one at step 7) keep the user's ckpt-7/notes.txt and notes.txt"
else
  bad "user files in a run folder: rc=$rc $(cat m.err); $(ls -A mine)"
fi
echo "my own table" > mine/loss.csv
train --out mine --resume > /dev/null 2> m2.err
rc=$?
[ $rc -eq 1 ] && grep -q "mine/loss.csv was not written by attn" m2.err && [ "$(cat mine/loss.csv)" = "my own table" ] &&
  ok "a loss.csv of the user's in a run folder stops a resume, untouched" || bad "user loss.csv: rc=$rc $(cat m2.err)"
# A run folder of an older attn (no marker) with the user's notes resumes.
cp -a run older
rm older/.attn-run
echo top > older/notes.txt
"$ATTN" train --out older --resume --threads 1 > /dev/null 2> o.err
[ $? -eq 0 ] && same_as_whole older && [ "$(cat older/notes.txt)" = top ] && [ -f older/.attn-run ] &&
  ok "a run folder of an older attn (no marker) is adopted and resumes" || bad "older run folder: $(cat o.err)"

# ---- 3. an output that is an input -------------------------------------
cp -a whole ck
rm ck/.attn-run # a checkpoint folder, not a run folder: no write may enter one (run_folder_writes.sh)
cp ck/model.safetensors model.before
cp ck/train_state.safetensors state.before
ln -s ck/model.safetensors elsewhere.npy
printf '\x93NUMPY\x01\x00\x76\x00' > ids.npy
printf "%-117s\n" "{'descr': '<i8', 'fortran_order': False, 'shape': (1, 4), }" >> ids.npy
head -c 32 /dev/zero >> ids.npy
guard=ids.npy # the other input that must stay
cp "$guard" guard.before
refused() { # what, then the command
  local what=$1
  shift
  "$@" > /dev/null 2> o.err
  local rc=$?
  if [ $rc -eq 2 ] && grep -q "which writing would destroy" o.err && cmp -s model.before ck/model.safetensors &&
     cmp -s state.before ck/train_state.safetensors && cmp -s guard.before "$guard" && [ -L ck/model.safetensors ]; then
    ok "$what: refused, the input kept"
  else
    bad "$what: rc=$rc $(cat o.err)"
  fi
}
refused "viz --out onto the checkpoint's weights (a symlink)" "$ATTN" viz --checkpoint ck --prompt ab --out ck/model.safetensors
refused "viz --svg onto its training state" "$ATTN" viz --checkpoint ck --prompt ab --layer 0 --head 0 --svg ck/train_state.safetensors
refused "viz --out onto ckpt-40/model.safetensors" "$ATTN" viz --checkpoint ck --prompt ab --out ck/ckpt-40/model.safetensors
refused "forward gpt --output onto the weights" "$ATTN" forward gpt --checkpoint ck --input ids.npy --output ck/model.safetensors
refused "forward gpt --output through a link elsewhere" "$ATTN" forward gpt --checkpoint ck --input ids.npy --output elsewhere.npy
refused "forward gpt --output onto its --input" "$ATTN" forward gpt --checkpoint ck --input ids.npy --output ids.npy
refused "forward gpt --output onto a file checkpoint" "$ATTN" forward gpt --checkpoint ck/model.safetensors --input ids.npy --output ck/model.safetensors
"$ATTN" viz --checkpoint ck --prompt ab --out ck/attention.html > /dev/null 2>&1 && [ -s ck/attention.html ] &&
  ok "viz --out a new file in the checkpoint folder is written" || bad "viz next to the checkpoint"
{
  printf '\x93NUMPY\x01\x00\x76\x00'
  printf "%-117s\n" "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 4, 3), }"
  head -c 96 /dev/zero
} > x.npy
guard=x.npy
cp "$guard" guard.before
fwd() { "$ATTN" forward mha --d-out 4 --heads 2 --input x.npy "$@"; }
refused "forward --output onto its --input" fwd --output x.npy
fwd --output y.npy --save-weights w.st > /dev/null 2>&1 || bad "forward with --save-weights failed"
cp w.st w.before
"$ATTN" forward mha --d-out 4 --heads 2 --input x.npy --weights w.st --save-weights w.st > /dev/null 2> o.err
[ $? -eq 2 ] && grep -q "which writing would destroy" o.err && cmp -s w.st w.before &&
  ok "forward --save-weights onto its --weights: refused, kept" || bad "--save-weights onto --weights: $(cat o.err)"
mkdir g
cp x.npy g/input.npy
"$ATTN" forward mha --d-out 4 --heads 2 --input g/input.npy --grad-output y.npy --grad-dir g > /dev/null 2> o.err
[ $? -eq 2 ] && grep -q "which writing would destroy" o.err && cmp -s g/input.npy x.npy &&
  ok "forward --grad-dir whose input.npy is the --input: refused, kept" || bad "--grad-dir onto --input: $(cat o.err)"

# ---- 14. a failed run, --force and Ctrl-C, a long --out ----------------
printf 'abcdefgh' > tiny.txt
"$ATTN" train --data tiny.txt --config cfg.json --threads 1 --out made/a/b > /dev/null 2> f.err
rc=$?
[ $rc -eq 1 ] && [ ! -e made ] && ok "a failed run removes the folders it made" ||
  bad "failed run: rc=$rc, left $(find made 2> /dev/null | tr '\n' ' ') $(cat f.err)"
mkdir empty
"$ATTN" train --data tiny.txt --config cfg.json --threads 1 --out empty > /dev/null 2>&1
rc=$?
[ $rc -eq 1 ] && [ -d empty ] && [ -z "$(ls -A empty)" ] &&
  ok "a failed run leaves a folder that was there as it was (empty)" || bad "failed run in empty: rc=$rc $(ls -A empty)"
cp -a run forced
train --out forced --force --interrupt-after 2 > /dev/null 2> f.err
rc=$?
[ $rc -eq 130 ] && [ ! -e forced/best ] && [ "$(readlink forced/latest)" = ckpt-2 ] && [ ! -e forced/ckpt-30 ] &&
  ok "--force, then a stop before the first evaluation: no old best/ is left" ||
  bad "--force then stop: rc=$rc $(ls -A forced forced/best 2>&1 | tr '\n' ' ')"
long=$tmp/$(printf 'd%.0s' $(seq 200))
for _ in $(seq 19); do long=$long/$(printf 'd%.0s' $(seq 200)); done
train --out "$long" > /dev/null 2> l.err
rc=$?
[ $rc -eq 2 ] && grep -q "output directory path is .* characters long" l.err &&
  [ -z "$(ls -d "$tmp"/dd* 2> /dev/null)" ] &&
  ok "an --out path too long for checkpoints is refused at start (${#long} characters)" ||
  bad "long --out: rc=$rc $(tail -1 l.err)"

[ $fails -eq 0 ] && echo "all ownership checks passed" && exit 0
echo "$fails check(s) failed"
exit 1
