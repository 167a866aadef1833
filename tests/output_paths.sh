#!/usr/bin/env bash
# Output writers never replace a non-regular file, loaders check a header
# before reading a body: attn forward's --output to a FIFO, a symlink (also
# dangling), device nodes (/dev/full, /dev/null), "-", /dev/stdout and
# /proc/self/fd/1; --input from /dev/zero, a pipe of zeros, stdin; a
# checkpoint that is a device or a pipe. Each output is compared with the
# same command's output to a regular file.
# Usage: bash output_paths.sh <path-to-attn> <source-dir>
set -u
ATTN=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
ok() { echo "ok   - $1"; }
bad() { echo "FAIL - $1"; fails=$((fails + 1)); }

# A (2, 4, 3) float32 .npy written byte by byte (no numpy needed).
{
  printf '\x93NUMPY\x01\x00\x76\x00'
  printf "%-117s\n" "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 4, 3), }"
  head -c 96 /dev/urandom | od -An -v -tu1 | tr -s ' ' '\n' | grep . | head -96 |
    awk '{ printf "%c", ($1 % 64) + 32 }' | head -c 96 # printable bytes: finite floats
} > "$tmp/x.npy"
fwd() { "$ATTN" forward mha --d-out 4 --heads 2 --input "$@"; }
fwd "$tmp/x.npy" --output "$tmp/ref.npy" > /dev/null 2>&1 || { bad "reference forward failed"; exit 1; }

# FIFO: written in place, stays a FIFO, the reader gets the bytes.
mkfifo "$tmp/fifo"
cat "$tmp/fifo" > "$tmp/from_fifo.npy" &
reader=$!
timeout 300 "$ATTN" forward mha --d-out 4 --heads 2 --input "$tmp/x.npy" --output "$tmp/fifo" > /dev/null 2>&1
rc=$?
wait $reader
[ $rc -eq 0 ] && [ -p "$tmp/fifo" ] && cmp -s "$tmp/from_fifo.npy" "$tmp/ref.npy" &&
  ok "FIFO output: still a FIFO, reader got the same bytes" || bad "FIFO output (rc=$rc)"

# Symlink: the link stays, its target is replaced.
echo old > "$tmp/target.npy"
ln -s target.npy "$tmp/link.npy"
fwd "$tmp/x.npy" --output "$tmp/link.npy" > /dev/null 2>&1
[ -L "$tmp/link.npy" ] && [ "$(readlink "$tmp/link.npy")" = target.npy ] && cmp -s "$tmp/target.npy" "$tmp/ref.npy" &&
  ok "symlink output: link kept, target replaced" || bad "symlink output"
mkdir "$tmp/sub"
ln -s sub/made.npy "$tmp/dangling.npy"
fwd "$tmp/x.npy" --output "$tmp/dangling.npy" > /dev/null 2>&1
[ -L "$tmp/dangling.npy" ] && cmp -s "$tmp/sub/made.npy" "$tmp/ref.npy" &&
  ok "dangling symlink output: its target is created" || bad "dangling symlink output"

# Devices: written in place, never replaced (as root rename would replace them).
fwd "$tmp/x.npy" --output /dev/full > /dev/null 2> "$tmp/full.err"
rc=$?
[ $rc -eq 1 ] && grep -q "/dev/full.*No space left" "$tmp/full.err" && [ -c /dev/full ] &&
  ok "/dev/full: clear error, still a device" || bad "/dev/full: rc=$rc $(cat "$tmp/full.err"); $(ls -l /dev/full)"
fwd "$tmp/x.npy" --output /dev/null > /dev/null 2>&1 && [ -c /dev/null ] &&
  ok "/dev/null: written, still a device" || bad "/dev/null output; $(ls -l /dev/null)"

# stdout three ways; the summary then goes to stderr.
fwd "$tmp/x.npy" --output - 2> "$tmp/dash.err" > "$tmp/dash.npy"
cmp -s "$tmp/dash.npy" "$tmp/ref.npy" && grep -q "mha: x (2, 4, 3)" "$tmp/dash.err" &&
  ok "--output - writes the .npy to stdout, the summary to stderr" || bad "--output -"
fwd "$tmp/x.npy" --output /dev/stdout 2> /dev/null > "$tmp/devstdout.npy"
cmp -s "$tmp/devstdout.npy" "$tmp/ref.npy" && ok "--output /dev/stdout (a regular file)" ||
  bad "--output /dev/stdout"
fwd "$tmp/x.npy" --output /proc/self/fd/1 2> /dev/null | cat > "$tmp/procfd.npy"
cmp -s "$tmp/procfd.npy" "$tmp/ref.npy" && ok "--output /proc/self/fd/1 (a pipe)" ||
  bad "--output /proc/self/fd/1"

# Inputs: stdin and pipes yes, devices no; the header is checked first.
fwd - --output - < "$tmp/x.npy" 2> /dev/null | cmp -s - "$tmp/ref.npy" && ok "--input - reads stdin" ||
  bad "--input -"
t0=$(date +%s%N)
fwd /dev/zero --output "$tmp/z.npy" > /dev/null 2> "$tmp/zero.err"
rc=$?
ms=$((($(date +%s%N) - t0) / 1000000))
[ $rc -ne 0 ] && grep -q "'/dev/zero': it is a character device" "$tmp/zero.err" && [ ! -e "$tmp/z.npy" ] &&
  ok "--input /dev/zero refused in $ms ms" || bad "--input /dev/zero: rc=$rc $(cat "$tmp/zero.err")"
t0=$(date +%s%N)
head -c 400000000 /dev/zero | fwd /dev/stdin --output "$tmp/z.npy" > /dev/null 2> "$tmp/pz.err"
ms=$((($(date +%s%N) - t0) / 1000000))
grep -q "not a .npy file (bad magic)" "$tmp/pz.err" &&
  ok "a pipe of zeros is refused after its header ($ms ms for 400 MB offered)" || bad "pipe of zeros: $(cat "$tmp/pz.err")"
"$ATTN" generate --checkpoint /dev/zero > /dev/null 2> "$tmp/gz.err"
[ $? -ne 0 ] && grep -q "character device" "$tmp/gz.err" && ok "a checkpoint that is a device is refused" ||
  bad "generate --checkpoint /dev/zero: $(cat "$tmp/gz.err")"
head -c 400000000 /dev/zero | "$ATTN" generate --checkpoint /dev/stdin > /dev/null 2> "$tmp/gp.err"
grep -q "not a safetensors file" "$tmp/gp.err" && ok "a checkpoint stream of zeros is refused after its header" ||
  bad "generate from a pipe of zeros: $(cat "$tmp/gp.err")"
# A real checkpoint through a pipe loads.
fwd "$tmp/x.npy" --output "$tmp/y.npy" --save-weights "$tmp/w.safetensors" > /dev/null 2>&1
fwd "$tmp/x.npy" --weights /dev/stdin --output "$tmp/yw.npy" < <(cat "$tmp/w.safetensors") > /dev/null 2> "$tmp/pw.err"
cmp -s "$tmp/yw.npy" "$tmp/y.npy" && ok "weights read from a pipe" || bad "weights from a pipe: $(cat "$tmp/pw.err")"

[ $fails -eq 0 ] && echo "all output/input path checks passed" && exit 0
echo "$fails check(s) failed"
exit 1
