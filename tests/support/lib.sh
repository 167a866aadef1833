# Sourced by the tests/*.sh scripts: their result lines and the small corpus
# with a fixed vocabulary that the training tests share.
fails=0
ok() { echo "ok   - $1"; }
bad() { echo "FAIL - $1"; fails=$((fails + 1)); }

# make_corpus FILE [N]: N (default 120) pairs of play lines, ~12k characters.
make_corpus() {
  local i
  for i in $(seq 1 "${2:-120}"); do
    echo "First Citizen: before we proceed any further, hear me speak $((i % 7))."
    echo "All: speak, speak! you are all resolved rather to die than to famish?"
  done > "$1"
}

# attn_bf16 ATTN: true when ATTN runs --precision bf16 here, as attn itself
# decides (the CPU under the ATTN_SIMD cap, attn/cpu.h), not /proc/cpuinfo.
attn_bf16() { "$1" info --cpu --json | grep -q '"bf16_engine":[[:space:]]*true'; }

# The fine-tuning tests' start (SRC ATTN): GPT-2's vocabulary and torch for
# the book's init (else skip), ATTN_GPT2_DIR, PY on ATTN's library
# (tests/python/pyenv.sh) and a private $tmp removed at exit.
finetune_setup() {
  [ -f "$1/data/gpt2/encoder.json" ] ||
    { echo "SKIP: data/gpt2 missing (scripts/get-data.sh gpt2)"; exit 77; }
  /usr/bin/python3 -c 'import torch' 2> /dev/null || { echo "SKIP: no torch for the book's init"; exit 77; }
  export ATTN_GPT2_DIR=$1/data/gpt2
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  pyenv "$1" "$(dirname "$2")/libattn.so"
}

# The fine-tuning tests' inputs, from $SRC and $ATTN: FIX (the book's
# fixtures), DATA (chapter 7's instruction-data.json, in data/ or
# ../shared/data/) and, with "shim", SHIM (the fault shim beside $ATTN,
# preloaded ahead of the sanitizer runtime in an ASan build).
finetune_inputs() {
  FIX=$SRC/tests/fixtures/book_ch67
  DATA=$SRC/data/book/instruction-data.json
  [ -f "$DATA" ] || DATA=$SRC/../shared/data/book/instruction-data.json # scripts/get-data.sh book
  [ "${1:-}" = shim ] || return 0
  SHIM=$(dirname "$ATTN")/libattn_fault.so
  [ -f "$SHIM" ] || { echo "FAIL - fault shim $SHIM not built"; exit 1; }
  export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0"
}

# The book's --test_mode GPTModel (emb 12, 1 layer, 2 heads, context 120, no
# qkv bias) as built after torch.manual_seed(123), saved to FILE (.pth).
book_test_mode_model() {
  "${PY[@]}" - "$1" << 'PYEOF' || { echo "SKIP: the book's model did not build"; exit 77; }
import sys, torch, attn.book as book
cfg = {"vocab_size": 50257, "context_length": 120, "drop_rate": 0.0, "qkv_bias": False,
       "emb_dim": 12, "n_layers": 1, "n_heads": 2}
torch.manual_seed(123)
torch.save(book.GPTModel(cfg).state_dict(), sys.argv[1])
PYEOF
}

# finetune_run_killed K NAME ARGS...: `$ATTN ARGS... --out NAME` (in $tmp)
# held at its K-th file operation in NAME by the fault shim $SHIM
# (tests/shim/fault_inject.c), then killed -9: a fixed instant, not a timed
# one. Its output goes to NAME.out1, NAME.err1.
finetune_run_killed() {
  local k=$1 name=$2
  shift 2
  ATTN_FAULT_DIR="$tmp/$name/" ATTN_FAULT_AT=$k ATTN_FAULT_MODE=stop LD_PRELOAD=$SHIM \
    "$ATTN" "$@" --out "$name" > "$name.out1" 2> "$name.err1" &
  local pid=$! st
  while st=$(ps -o stat= -p $pid 2> /dev/null) && [ "${st:0:1}" != T ]; do sleep 0.05; done
  kill -9 $pid 2> /dev/null
  wait $pid 2> /dev/null
}
