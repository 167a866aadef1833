#!/usr/bin/env bash
# A lean core: attn and libattn.so link no CUDA and no MPI library, and a
# plain run loads none (LD_DEBUG=files lists every object the loader opens);
# --device cuda opens the CUDA engine plug-in and says why no GPU can be used;
# the launcher's environment decides whether the MPI plug-in is opened; a
# missing, broken, foreign or mismatched plug-in gets a message naming it.
# Usage: bash lean_core.sh <path-to-attn> <source-dir>
set -u
ATTN=$1
build=$(dirname "$ATTN")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "${BASH_SOURCE[0]}")/support/lib.sh"
heavy='libcublas|libcudart|libcuda\.so|libmpi|libopen-rte|libopen-pal'

# 1. Linked: nothing of CUDA or MPI.
for f in "$ATTN" "$build/libattn.so"; do
  if ! libs=$(ldd "$f"); then
    bad "ldd $f failed"
  elif grep -Eq "$heavy" <<<"$libs"; then
    bad "ldd $(basename "$f") lists $(grep -Eo "$heavy[^ ]*" <<<"$libs" | tr '\n' ' ')"
  else
    ok "ldd $(basename "$f"): no CUDA and no MPI library"
  fi
done

make_corpus "$tmp/c.txt" 20
cat > "$tmp/cfg.json" <<'JSON'
{"context_length": 16, "emb_dim": 32, "n_heads": 2, "n_layers": 1, "batch_size": 2,
 "max_steps": 2, "eval_interval": 2, "eval_iters": 1}
JSON
train() { "$ATTN" train --data "$tmp/c.txt" --config "$tmp/cfg.json" --threads 1 "$@"; }
# The objects the dynamic loader opened (LD_DEBUG=files lines in file $1).
opened() { sed -n 's/.*file=\([^ ]*\) .*/\1/p' "$1" | sort -u | tr '\n' ' '; }

# 2. A plain run (and a world of one rank) loads neither engine.
for env in "" "OMPI_COMM_WORLD_SIZE=1"; do
  rm -rf "$tmp/a"
  env $env LD_DEBUG=files LD_DEBUG_OUTPUT="$tmp/ld" "$ATTN" train --data "$tmp/c.txt" \
    --config "$tmp/cfg.json" --threads 1 --out "$tmp/a" > /dev/null 2> "$tmp/err"
  rc=$?
  objs=$(cat "$tmp"/ld.* | opened /dev/stdin)
  rm -f "$tmp"/ld.*
  if [ $rc -eq 0 ] && [ -s "$tmp/a/model.safetensors" ] && [ -n "$objs" ] &&
    ! grep -Eq "$heavy|libattn-cuda|libattn-mpi" <<<"$objs"; then
    ok "train ${env:-(plain)}: ran and loaded no engine plug-in ($(wc -w <<<"$objs") objects)"
  else
    bad "train ${env:-(plain)}: rc $rc, loaded: $objs $(cat "$tmp/err")"
  fi
done

# 3. --device cuda opens the plug-in (which brings cuBLAS) and runs, or says
# there is no driver / no device; a build without the plug-in says so.
LD_DEBUG=files LD_DEBUG_OUTPUT="$tmp/ld" "$ATTN" train --data "$tmp/c.txt" --config "$tmp/cfg.json" \
  --threads 1 --device cuda --out "$tmp/d" > /dev/null 2> "$tmp/err"
rc=$?
objs=$(cat "$tmp"/ld.* | opened /dev/stdin)
rm -f "$tmp"/ld.*
if [ -e "$build/libattn-cuda.so" ]; then
  if grep -q "libattn-cuda.so" <<<"$objs" && grep -q "libcublas" <<<"$objs" &&
    { [ $rc -eq 0 ] || { [ $rc -eq 1 ] && grep -Eq "^attn train: --device cuda: (no CUDA driver .*, so no CUDA device|no CUDA device): " "$tmp/err"; }; }; then
    ok "--device cuda opened libattn-cuda.so: rc $rc, $(head -c 160 "$tmp/err")"
  else
    bad "--device cuda: rc $rc, $(cat "$tmp/err"), loaded: $objs"
  fi
else
  [ $rc -eq 1 ] && grep -q "attn was built without CUDA: the CUDA engine was not built (" "$tmp/err" &&
    ok "--device cuda in a build without the plug-in: $(cat "$tmp/err")" ||
    bad "--device cuda without the plug-in: rc $rc, $(cat "$tmp/err")"
fi

# 4. Where the plug-in is not, or is not one. ATTN_PLUGIN_DIR picks the folder.
if [ -e "$build/libattn-cuda.so" ]; then
  mkdir -p "$tmp/none" "$tmp/junk" "$tmp/foreign" "$tmp/old"
  printf 'not an ELF file\n' > "$tmp/junk/libattn-cuda.so"
  printf 'int attn_unrelated;\n' > "$tmp/f.c"
  cc -shared -fPIC "$tmp/f.c" -o "$tmp/foreign/libattn-cuda.so"
  # A plug-in of another attn version (the table's header only).
  cat > "$tmp/o.c" <<'C'
const struct { unsigned kind, abi; const char *version; unsigned long long layout; }
    attn_cuda_plugin_table = {0, 1, "0.0.1", 0};
C
  cc -shared -fPIC "$tmp/o.c" -o "$tmp/old/libattn-cuda.so"
  expect=(
    "none|the CUDA engine plug-in libattn-cuda.so was not found at $tmp/none/libattn-cuda.so"
    "junk|cannot open the CUDA engine plug-in $tmp/junk/libattn-cuda.so: "
    "foreign|$tmp/foreign/libattn-cuda.so is not the CUDA engine plug-in (it has no symbol attn_cuda_plugin_table)"
    "old|$tmp/old/libattn-cuda.so was built with attn 0.0.1 (plug-in ABI 1), not with this library")
  for e in "${expect[@]}"; do
    dir=${e%%|*} msg=${e#*|}
    ATTN_PLUGIN_DIR="$tmp/$dir" train --device cuda --out "$tmp/m$dir" > /dev/null 2> "$tmp/err"
    rc=$?
    [ $rc -eq 1 ] && grep -qF "attn train: --device cuda: $msg" "$tmp/err" && [ ! -e "$tmp/m$dir/model.safetensors" ] &&
      ok "plug-in in $dir/: exit 1, $(head -c 150 "$tmp/err")" ||
      bad "plug-in in $dir/: rc $rc, $(cat "$tmp/err")"
  done
fi

# 5. Several ranks need the MPI plug-in: without it the run stops, naming it
# (the plug-in itself is exercised under mpirun by tests/mpi_train.sh).
# ATTN_MODULE_DIR is ATTN_PLUGIN_DIR's old name, read until after 0.2.
if [ -e "$build/libattn-mpi.so" ]; then
  want="started by mpirun as one of several ranks, but the MPI plug-in libattn-mpi.so was not found at $tmp/none/libattn-mpi.so"
else
  want="started by mpirun as one of several ranks, but this attn was built without MPI: the MPI plug-in was not built ("
fi
for var in ATTN_PLUGIN_DIR ATTN_MODULE_DIR; do
  env OMPI_COMM_WORLD_SIZE=2 "$var=$tmp/none" "$ATTN" train --data "$tmp/c.txt" --config "$tmp/cfg.json" \
    --threads 1 --out "$tmp/r" > /dev/null 2> "$tmp/err"
  rc=$?
  [ $rc -eq 1 ] && grep -qF "$want" "$tmp/err" && [ ! -e "$tmp/r/model.safetensors" ] &&
    ok "2 ranks without the MPI plug-in ($var): exit 1, $(head -c 150 "$tmp/err")" ||
    bad "2 ranks without the MPI plug-in ($var): rc $rc, $(cat "$tmp/err")"
done

[ $fails -eq 0 ] || { echo "$fails failure(s)"; exit 1; }
echo "all lean-core checks passed"
