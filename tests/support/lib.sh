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
