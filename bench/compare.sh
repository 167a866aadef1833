#!/usr/bin/env bash
# The comparison table of docs/benchmarks.md on the machine at hand: each row
# runs attn and its peer in the same run, alternating (the row's own script,
# one round a call, the rows in turn, N rounds), the peer at its best of 1
# and 2 threads, then prints one markdown table: attn, peer, ratio (> 1:
# attn faster), the floor where the row has one, medians over the rounds,
# under a header naming the CPU and its class as attn sees it. A row whose
# peer is not here is printed as "skipped: why".
#   bench/compare.sh [--quick] [--rounds N] [--rows a,b,...] [--simd LEVEL]
#                    [--llmc DIR] [--book DIR] [--node-modules DIR] [--raw DIR]
#   bench/compare.sh --list      # the rows, their peers, what each needs
# Peers: --llmc an llm.c checkout built with `make train_gpt2`; --book a
# checkout of rasbt/LLMs-from-scratch (ch05/01_main-chapter-code,
# ch04/03_kv-cache); --node-modules a node_modules folder holding npm's
# tiktoken; torch: /usr/bin/python3's. Also from LLMC_DIR, BOOK_DIR,
# NODE_MODULES. --simd LEVEL runs attn under ATTN_SIMD=LEVEL, and PyTorch
# under ATEN_CPU_CAPABILITY and the OpenBLAS kernels of that level (avx2:
# Haswell; avx512: SkylakeX; generic: Nehalem) unless set; llm.c runs as built (-march=native).
# Raw output of every script goes to --raw DIR (default: a new folder under
# /tmp, kept, named at the end).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
here=$root/bench
PY=/usr/bin/python3

ROWS="mha-fwd mha-bwd gpt2-step nanogpt book-loop ch05 gen-fp32 gen-bf16"
row_title() {
  case $1 in
    mha-fwd) echo "MHA fwd, $mha_shape, fp32 (\`attn bench mha\`)" ;;
    mha-bwd) echo "MHA fwd+bwd, $mha_shape, fp32" ;;
    gpt2-step) echo "GPT-2 124M step, B4 T64, fp32 (\`bench/llmc_peer.sh\`)" ;;
    nanogpt) echo "nanogpt-cpu, $nano_steps steps, fp32, whole run (\`bench/train_nanogpt.sh\`)" ;;
    book-loop) echo "the book's 124M loop as written, torch AdamW (\`bench/gptmodel_loop.py\`)" ;;
    ch05) echo "the book's chapter-5 run, first epoch (\`bench/book_ch05_peer.sh\`)" ;;
    gen-fp32) echo "GPT-2 124M generation, 1 sequence, $gen_tokens tokens, fp32 (\`bench/gen_floor.sh\`)" ;;
    gen-bf16) echo "the same, bf16 weights (fp32 sums)" ;;
  esac
}
row_peer() {
  case $1 in
    mha-*) echo "torch.nn.MultiheadAttention (PyTorch)" ;;
    gpt2-step) echo "llm.c train_gpt2 (--llmc)" ;;
    nanogpt) echo "the book's GPTModel, nanoGPT's recipe, PyTorch" ;;
    book-loop) echo "the book's GPTModel + torch.optim.AdamW" ;;
    ch05) echo "the book's gpt_train.py on PyTorch (--book, --node-modules)" ;;
    gen-fp32) echo "the book's KV-cached generator on PyTorch (--book)" ;;
    gen-bf16) echo "attn fp32, same run" ;;
  esac
}

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; }
die() { echo "bench/compare.sh: $*" >&2; exit 2; }

quick=0 rounds= rows= simd= list=0 raw=
llmc=${LLMC_DIR:-} book=${BOOK_DIR:-} nm=${NODE_MODULES:-}
while [ $# -gt 0 ]; do
  case $1 in
    --quick) quick=1 ;;
    --rounds) rounds=${2:?--rounds N}; shift ;;
    --rows) rows=${2:?--rows a,b,...}; shift ;;
    --simd) simd=${2:?--simd LEVEL}; shift ;;
    --llmc) llmc=${2:?--llmc DIR}; shift ;;
    --book) book=${2:?--book DIR}; shift ;;
    --node-modules) nm=${2:?--node-modules DIR}; shift ;;
    --raw) raw=${2:?--raw DIR}; shift ;;
    --list) list=1 ;;
    -h|--help) usage; exit 0 ;;
    *) usage >&2; die "unknown argument '$1'" ;;
  esac
  shift
done
[ -z "$rounds" ] && rounds=$((quick ? 1 : 3))
[[ $rounds =~ ^[1-9][0-9]*$ ]] || die "--rounds takes a positive count, not '$rounds'"
case $simd in ''|generic|avx2|avx512|avx512-bf16|amx) ;; *) die "--simd: generic, avx2, avx512, avx512-bf16 or amx, not '$simd'" ;; esac
rows=${rows//,/ }
for r in ${rows:-$ROWS}; do [[ " $ROWS " == *" $r "* ]] || die "no row '$r' (rows: ${ROWS// /,})"; done
rows=${rows:-$ROWS}

# Sizes: the table's, or --quick's (the same rows, small enough for minutes).
if ((quick)); then
  mha_args=(--batch 1 --tokens 1024 --d-model 768 --heads 12) mha_rep=3 mha_shape="B1 T1024 D768 H12"
  nano_steps=200 torch_steps=50 loop_steps=1 gen_tokens=16
else
  mha_args=(--batch 8 --tokens 1024 --d-model 768 --heads 12) mha_rep=5 mha_shape="B8 T1024 D768 H12"
  nano_steps=2000 torch_steps=200 loop_steps=3 gen_tokens=64
fi

if ((list)); then
  for r in $ROWS; do printf '%-10s %s\n%-10s   peer: %s\n' "$r" "$(row_title "$r")" "" "$(row_peer "$r")"; done
  exit 0
fi

# Why a row cannot run here (empty: it can). Checked before anything runs.
torch_ok=
have_torch() { # asked once: importing torch takes seconds
  [ -z "$torch_ok" ] && { "$PY" -c 'import torch' 2> /dev/null && torch_ok=1 || torch_ok=0; }
  [ "$torch_ok" = 1 ]
}
book_kv() { echo "$book/ch04/03_kv-cache/gpt_with_kv_cache_optimized.py"; }
missing() {
  case $1 in
    mha-*|nanogpt|book-loop) have_torch || echo "no PyTorch ($PY cannot import torch)" ;;
    gpt2-step)
      if [ -z "$llmc" ]; then echo "no llm.c (give --llmc DIR, a checkout built with make train_gpt2)"
      elif [ ! -x "$llmc/train_gpt2" ]; then echo "no llm.c build ($llmc/train_gpt2: run make train_gpt2 there)"
      elif ! "$PY" -c 'import numpy' 2> /dev/null; then echo "no numpy (llm.c's input files are written with it)"
      fi ;;
    ch05)
      if ! have_torch; then echo "no PyTorch"
      elif [ -z "$book" ] || [ ! -f "$book/ch05/01_main-chapter-code/gpt_train.py" ]; then
        echo "no book (give --book DIR, a checkout of rasbt/LLMs-from-scratch)"
      elif ! command -v node > /dev/null; then echo "no node (the book's tokenizer is npm's tiktoken)"
      elif [ -z "$nm" ] || [ ! -d "$nm/tiktoken" ]; then echo "no tiktoken (give --node-modules DIR holding npm's tiktoken)"
      fi ;;
    gen-fp32)
      if ! have_torch; then echo "no PyTorch"
      elif [ -z "$book" ] || [ ! -f "$(book_kv)" ]; then echo "no book (give --book DIR, a checkout of rasbt/LLMs-from-scratch)"
      fi ;;
    gen-bf16) ;;
  esac
}

# The level's environment: attn capped; PyTorch's own kernels and OpenBLAS
# held to the same level where they can be (the user's settings win).
if [ -n "$simd" ]; then
  export ATTN_SIMD=$simd
  case $simd in
    avx2) : "${ATEN_CPU_CAPABILITY:=avx2}" "${OPENBLAS_CORETYPE:=Haswell}" ;;
    avx512) : "${ATEN_CPU_CAPABILITY:=avx512}" "${OPENBLAS_CORETYPE:=SkylakeX}" ;;
    generic) : "${ATEN_CPU_CAPABILITY:=default}" "${OPENBLAS_CORETYPE:=Nehalem}" ;;
  esac
  [ -n "${ATEN_CPU_CAPABILITY:-}" ] && export ATEN_CPU_CAPABILITY
  [ -n "${OPENBLAS_CORETYPE:-}" ] && export OPENBLAS_CORETYPE
fi
# One OpenBLAS setting for every row (the environment's): the scripts that try
# several would otherwise pick kernels above the level.
export BLAS_SETTINGS=${BLAS_SETTINGS:-set}

# attn: $ATTN as given, or built (Release) in $BUILD (default build/).
if [ -n "${ATTN:-}" ]; then
  [ -x "$ATTN" ] || die "ATTN=$ATTN: not a program"
  attn=$(cd "$(dirname "$ATTN")" && pwd)/$(basename "$ATTN")
  build=$(dirname "$attn")
else
  build=${BUILD:-$root/build}
  cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release > /dev/null
  cmake --build "$build" -j "$(nproc)" --target attn attn_shared > /dev/null
  attn=$build/attn
fi
export ATTN=$attn ATTN_LIBRARY=${ATTN_LIBRARY:-$build/libattn.so}

if [ -z "$raw" ]; then raw=$(mktemp -d "${TMPDIR:-/tmp}/attn-compare.XXXXXX")
else mkdir -p "$raw"; fi
res=$raw/results.tsv
: > "$res"

# A result line: row round attn peer unit(s|tok/s) attn_note peer_note floor
put() { printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$@" >> "$res"; }
kv() { sed -n "s/\\(^\\|.* \\)$1=\\([^ ]*\\).*/\\2/p" | head -1; } # KEY < line -> its value

run_mha() { # round backward(0|1)
  local r=$1 b=$2 row=mha-fwd f=$raw/mha-fwd.$1.txt
  local extra=()
  ((b)) && extra=(--backward) row=mha-bwd f=$raw/mha-bwd.$1.txt
  "$attn" bench mha "${mha_args[@]}" --repeat "$mha_rep" --threads 2 "${extra[@]}" > "$f" 2>&1
  "$PY" "$here/bench_mha.py" --model torch "${mha_args[@]}" --repeat "$mha_rep" "${extra[@]}" >> "$f" 2>&1
  local a t fl
  a=$(grep '^case=mha ' "$f" | kv median_s)
  fl=$(grep '^case=floor ' "$f")
  t=$(grep '^case=torch_torch ' "$f")
  put "$row" "$r" "$a" "$(kv median_s <<< "$t")" s "2 threads; kernels $(kv kernels <<< "$fl")" \
    "$(kv threads <<< "$t") thread(s)" "$(kv mha_over_floor <<< "$fl")× the fp32 floor"
}

run_gpt2() {
  local r=$1 f=$raw/gpt2-step.$1.txt l
  "$here/llmc_peer.sh" "$llmc" 1 > "$f" 2>&1 || { put gpt2-step "$r" nan nan s "llmc_peer.sh failed: $f" "" ""; return; }
  l=$(grep '^result ' "$f")
  put gpt2-step "$r" "$(kv attn_s <<< "$l")" "$(kv llmc_s <<< "$l")" s \
    "$(kv attn_threads <<< "$l") thread(s); peak RSS $(kv attn_rss_mb <<< "$l") MB" \
    "$(kv llmc_threads <<< "$l") thread(s); peak RSS $(kv llmc_rss_mb <<< "$l") MB" \
    "$(kv attn_over_floor <<< "$l")× the floor"
}

run_nanogpt() {
  local r=$1 f=$raw/nanogpt.$1.txt l
  TORCH_STEPS=$torch_steps "$here/train_nanogpt.sh" build --steps "$nano_steps" > "$f" 2>&1 ||
    { put nanogpt "$r" nan nan s "train_nanogpt.sh failed: $f" "" ""; return; }
  l=$(grep '^result ' "$f")
  local ms steps peer
  ms=$(kv torch_ms_per_step <<< "$l") steps=$(kv steps <<< "$l")
  # the peer's whole run: its measured step and evaluation times x the run's
  peer=$(kv torch_whole_s <<< "$l")
  put nanogpt "$r" "$(kv wall_s <<< "$l")" "$peer" s \
    "wall, evaluations and set-up included; $(kv tokens_per_s <<< "$l") tokens/s in steps, val $(kv val_loss <<< "$l")" \
    "$steps × $ms ms a step ($torch_steps timed, $(kv torch_threads <<< "$l") thread(s)) and nanoGPT's evaluations, no set-up" ""
}

run_loop() {
  local r=$1 f=$raw/book-loop.$1.txt b a
  "$PY" "$here/gptmodel_loop.py" --only "GPTModel (logits)" --steps "$loop_steps" --rounds 1 --threads 1 2 > "$f" 2>&1 ||
    { put book-loop "$r" nan nan s "gptmodel_loop.py failed: $f" "" ""; return; }
  b=$(grep '^result variant=book_GPTModel ' "$f")
  a=$(grep '^result variant=attn_GPTModel__logits ' "$f")
  put book-loop "$r" "$(kv s_per_step <<< "$a")" "$(kv s_per_step <<< "$b")" s \
    "attn.torch.GPTModel, the book's loss and torch AdamW; s/step, $(kv threads <<< "$a") thread(s)" \
    "s/step, $(kv threads <<< "$b") thread(s)" ""
}

run_ch05() {
  local r=$1 f=$raw/ch05.$1.txt
  "$here/book_ch05_peer.sh" "$book/ch05/01_main-chapter-code" "$nm" 1 1 > "$f" 2>&1 ||
    { put ch05 "$r" nan nan s "book_ch05_peer.sh failed: $f" "" ""; return; }
  # the peer's best thread count; the lines must be the same in every pair
  local best a t th lines
  best=$(grep '^result ' "$f" | "$PY" -c '
import sys
rows = [dict(kv.split("=", 1) for kv in l.split()[1:]) for l in sys.stdin]
b = min(rows, key=lambda d: float(d["torch_s"]))
print(b["attn_s"], b["torch_s"], b["torch_threads"], "same" if all(d["lines"] == "same" for d in rows) else "differ")')
  read -r a t th lines <<< "$best"
  put ch05 "$r" "$a" "$t" s "2 threads, wall; printed lines: $lines" "$th thread(s), wall" ""
}

run_gen() { # round: both generation rows from one gen_floor.sh call
  local r=$1 f=$raw/gen.$1.txt
  local bookpy=
  [ -z "$(missing gen-fp32)" ] && bookpy=$(book_kv)
  "$here/gen_floor.sh" "$attn" "$bookpy" 1 "$gen_tokens" 1 > "$f" 2>&1
  "$PY" - "$f" "$r" "$res" "$want_gen_fp32" "$want_gen_bf16" "$bookpy" << 'PY'
import sys
f, r, res, w32, w16, book = sys.argv[1:7]
rows = [dict(kv.split("=", 1) for kv in l.split()[1:] if "=" in kv)
        for l in open(f) if l.startswith("round=")]
def best(case, **want):
    c = [d for d in rows if d.get("case") == case and all(d.get(k) == v for k, v in want.items())]
    return max(c, key=lambda d: float(d["tokens_per_s"])) if c else None
a32 = best("generate", precision="fp32", num_samples="1")
a16 = best("generate", precision="bf16", num_samples="1")
tk = best("gen_torch_kv")
def note(d):
    return f"tokens/s, {d['threads']} thread(s)" if d else ""
def floor(d):
    return f"{d['floor_pct']}% of the bandwidth floor (fastest step {d['fastest_floor_pct']}%)" if d else ""
nan = "nan"
with open(res, "a") as o:
    if w32 == "1" and book:
        o.write("\t".join(["gen-fp32", r, a32["tokens_per_s"] if a32 else nan, tk["tokens_per_s"] if tk else nan,
                           "tok/s", note(a32), f"tokens/s, {tk['threads']} thread(s)" if tk else "gen_torch_kv printed no line",
                           floor(a32)]) + "\n")
    if w16 == "1":
        o.write("\t".join(["gen-bf16", r, a16["tokens_per_s"] if a16 else nan, a32["tokens_per_s"] if a32 else nan,
                           "tok/s", note(a16), note(a32).replace("tokens/s", "attn fp32 tokens/s"), floor(a16)]) + "\n")
PY
}

# The header: the machine as it is now.
cpu_json=$("$attn" info --cpu --json 2> /dev/null || echo '{}')
jget() { "$PY" -c 'import json,sys; d=json.loads(sys.argv[1]); v=d.get(sys.argv[2]); print("-" if v is None else v)' "$cpu_json" "$1"; }
model=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)
fam=$(grep -m1 '^cpu family' /proc/cpuinfo | cut -d: -f2 | xargs)
[ -n "$fam" ] && model="$model (family $fam, model $(grep -m1 '^model\s' /proc/cpuinfo | cut -d: -f2 | xargs))"
commit=$(git -C "$root" rev-parse --short HEAD 2> /dev/null || echo "?")
[ -n "$(git -C "$root" status --porcelain --untracked-files=no 2> /dev/null)" ] && commit="$commit (+ uncommitted changes)"
load0=$(cut -d' ' -f1-3 /proc/loadavg)

# Skipped rows, then the rounds: every runnable row once a round, in turn.
declare -A skip
want_gen_fp32=0 want_gen_bf16=0 nrun=0
for r in $rows; do
  why=$(missing "$r")
  if [ -n "$why" ]; then skip[$r]=$why; continue; fi
  nrun=$((nrun + 1))
  case $r in gen-fp32) want_gen_fp32=1 ;; gen-bf16) want_gen_bf16=1 ;; esac
done
echo "# bench/compare.sh: raw output in $raw" >&2
# the corpora and GPT-2's vocabulary, only when a row will run
[ "$nrun" -gt 0 ] && (cd "$root" && scripts/get-data.sh tinyshakespeare the-verdict gpt2 > /dev/null)
for n in $(seq 1 "$rounds"); do
  gen_done=0
  for r in $rows; do
    [ -n "${skip[$r]:-}" ] && continue
    echo "# round $n: $r ($(date -u +%T), load $(cut -d' ' -f1 /proc/loadavg))" >&2
    case $r in
      mha-fwd) run_mha "$n" 0 ;;
      mha-bwd) run_mha "$n" 1 ;;
      gpt2-step) run_gpt2 "$n" ;;
      nanogpt) run_nanogpt "$n" ;;
      book-loop) run_loop "$n" ;;
      ch05) run_ch05 "$n" ;;
      gen-*) ((gen_done)) || run_gen "$n"; gen_done=1 ;;
    esac
  done
done

{
  echo "### $model — attn class \`$(jget cpu)\`"
  echo
  echo "- date $(date -u '+%F %H:%M UTC'), commit $commit, $(nproc) CPUs"
  echo "- ATTN_SIMD: ${ATTN_SIMD:-(no cap)}; attn runs at \`$(jget used)\` (fp32 kernels $(jget fp32_kernels), gemv $(jget gemv), bf16 engine $(jget bf16_engine), AMX $(jget amx), OpenBLAS $(jget openblas))"
  [ -n "$simd" ] && echo "- peers: PyTorch under ATEN_CPU_CAPABILITY=${ATEN_CPU_CAPABILITY:-unset}, OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-unset}; llm.c as built (-march=native: not capped)"
  echo "- threads: attn 2 unless said; each peer at its best of 1 and 2"
  echo "- load average before: $load0; after: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "- $rounds round(s)$( ((quick)) && echo ", --quick (small shapes and step counts)"); medians over the rounds; ratio > 1: attn faster"
  echo
} > "$raw/header.md"
for r in $rows; do # row, title, peer, why skipped
  printf '%s\t%s\t%s\t%s\n' "$r" "$(row_title "$r")" "$(row_peer "$r")" "${skip[$r]:-}"
done > "$raw/rows.tsv"
"$PY" - "$res" "$raw/header.md" "$raw/rows.tsv" << 'PY'
import re, statistics, sys
res, header, rows = sys.argv[1:4]
def plural(text):
    return re.sub(r"\b(\d+) thread\(s\)", lambda m: m.group(1) + (" thread" if m.group(1) == "1" else " threads"), text)
order, titles, peers, skips = [], {}, {}, {}
for l in open(rows):
    row, titles[row], peers[row], why = l.rstrip("\n").split("\t")
    order.append(row)
    if why:
        skips[row] = why
got = {}
for l in open(res):
    row, r, a, p, unit, an, pn, fl = l.rstrip("\n").split("\t")
    got.setdefault(row, []).append((float(a or "nan"), float(p or "nan"), unit, an, pn, fl))
def num(x):
    return f"{x:.3f}" if x < 10 else f"{x:.1f}"
print(open(header).read(), end="")
print("| row | attn | peer | ratio | floor |")
print("|---|---|---|---|---|")
for row in order:
    if row in skips:
        print(f"| {titles[row]} | skipped: {skips[row]} | {peers[row]} | – | – |")
        continue
    g = got.get(row, [])
    ok = [x for x in g if x[0] == x[0] and x[1] == x[1]]  # no NaN
    if not ok:
        why = g[0][3] if g else "no result"
        print(f"| {titles[row]} | failed: {why} | {peers[row]} | – | – |")
        continue
    unit = ok[0][2]
    a = statistics.median(x[0] for x in ok)
    p = statistics.median(x[1] for x in ok)
    rat = [x[1] / x[0] if unit == "s" else x[0] / x[1] for x in ok]
    ratio = f"**{statistics.median(rat):.2f}×**"
    if len(rat) > 1:
        ratio += f" ({min(rat):.2f}–{max(rat):.2f})"
    last = ok[-1]
    u = " s" if unit == "s" else ""
    fl = " / ".join(x[5] for x in ok if x[5]) or "–"
    print(plural(f"| {titles[row]} | {num(a)}{u} ({last[3]}) | {peers[row]}: {num(p)}{u} ({last[4]}) | {ratio} | {fl} |"))
PY
echo "# raw output: $raw" >&2
