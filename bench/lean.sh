#!/usr/bin/env bash
# The lean core's figures: what attn links, the start-up cost of commands
# that never touch a GPU or ranks, --device cuda on this machine, and the
# long-context MHA peak RSS next to PyTorch's in the same run.
#   bench/lean.sh [BUILD [OLD_BUILD]]   e.g. bench/lean.sh build ../main/build
# OLD_BUILD (optional): the same start-up figures for another build, same run.
# Every figure under /usr/bin/time; start-up: median of 10 runs.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
old=${2:-}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
heavy='libcublas|libcudart|libcuda\.so|libmpi|libopen-rte|libopen-pal'
echo "# $(date -u +%FT%TZ) $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"

echo "== what attn links (ldd): CUDA or MPI libraries"
cmake --install "$build" --prefix "$tmp/prefix" > /dev/null
for f in "$build/attn" "$build/libattn.so" "$tmp/prefix/bin/attn" "$tmp/prefix/lib/libattn.so"; do
  n=$(ldd "$f" | grep -Ec "$heavy" || true)
  echo "ldd ${f#"$tmp/"}: $n CUDA/MPI libraries, $(ldd "$f" | wc -l) in all"
done

# median of 10: peak RSS (MB, /usr/bin/time %M), wall (ms, bash's
# EPOCHREALTIME around /usr/bin/time: includes time's own start, ~1 ms) and
# CPU time, user + sys (ms, the children's rusage: what a loaded machine's
# scheduling does not inflate)
startup() {
  local bin=$1 t0 t1; shift
  for _ in $(seq 1 10); do
    t0=$EPOCHREALTIME
    /usr/bin/time -f "%M" -o "$tmp/t" "$bin" "$@" > /dev/null 2>&1
    t1=$EPOCHREALTIME
    cpu=$(/usr/bin/python3 -c 'import resource, subprocess, sys
subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
r = resource.getrusage(resource.RUSAGE_CHILDREN)
print((r.ru_utime + r.ru_stime) * 1000)' "$bin" "$@")
    echo "$(cat "$tmp/t") $(awk -v a="$t0" -v b="$t1" 'BEGIN {print (b - a) * 1000}') $cpu"
  done > "$tmp/runs"
  med() { cut -d' ' -f"$1" "$tmp/runs" | sort -g | sed -n 5p; }
  printf "peak RSS %.1f MB, wall %.1f ms, cpu %.1f ms (medians of 10)" \
    "$(med 1 | awk '{print $1 / 1024}')" "$(med 2)" "$(med 3)"
}
echo "== start-up: /usr/bin/time -f %M attn ..., wall around it"
for b in "$build" ${old:+"$old"}; do
  echo "$b/attn --version:  $(startup "$b/attn" --version)"
  echo "$b/attn chapter3:   $(startup "$b/attn" chapter3)"
done

echo "== make run's training command (tiny preset), 20 steps: peak RSS"
corpus=$root/data/tinyshakespeare.txt
[ -s "$corpus" ] || corpus=$root/../shared/data/tinyshakespeare.txt
for b in "$build" ${old:+"$old"}; do
  rm -rf "$tmp/run"
  /usr/bin/time -f "%M" -o "$tmp/t" "$b/attn" train --preset tiny --data "$corpus" --steps 20 \
    --out "$tmp/run" > /dev/null 2>&1
  echo "$b/attn train --preset tiny --steps 20: peak RSS $(awk '{printf "%.1f", $1 / 1024}' "$tmp/t") MB"
done

echo "== --device cuda on this machine"
"$build/attn" train --preset tiny --data "$root/README.md" --steps 1 --device cuda --out "$tmp/gpu" \
  2>&1 | tail -1 || true

echo "== MHA forward+backward, B=1 T=4096 D=768 H=12: peak RSS (/usr/bin/time -v)"
rss() { sed -n 's/.*Maximum resident set size (kbytes): \([0-9]*\).*/\1/p' "$1" | awk '{printf "%.1f", $1 / 1024}'; }
/usr/bin/time -v "$build/attn" bench mha --batch 1 --tokens 4096 --d-model 768 --heads 12 \
  --backward --repeat 1 --threads 2 --mha-only > "$tmp/attn.out" 2> "$tmp/attn.time"
grep '^case=' "$tmp/attn.out"
a=$(rss "$tmp/attn.time")
for model in torch book; do
  /usr/bin/time -v /usr/bin/python3 "$root/bench/bench_mha.py" --model $model --batch 1 --tokens 4096 \
    --d-model 768 --heads 12 --backward --repeat 1 > "$tmp/$model.out" 2> "$tmp/$model.time"
  grep '^case=' "$tmp/$model.out"
  eval "${model}_rss=$(rss "$tmp/$model.time")"
done
# shellcheck disable=SC2154
awk -v a="$a" -v t="$torch_rss" -v b="$book_rss" 'BEGIN {
  printf "peak RSS: attn %.1f MB; torch.nn.MultiheadAttention %.1f MB (attn %.1f%%); book MultiHeadAttention %.1f MB (attn %.1f%%)\n",
    a, t, 100 * a / t, b, 100 * a / b }'
