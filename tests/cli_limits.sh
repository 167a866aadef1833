#!/usr/bin/env bash
# Issue 31 items 8, 9, 12, 13, 16: sizes checked before allocation, one
# number parser, every text option checked as UTF-8, input-shape
# disagreements and viz's prompt + N are usage errors (exit 2). The memory
# cases run under `ulimit -v` and `--max-memory 64M`, so a regression that
# allocates first fails here in seconds instead of eating the machine.
# Usage: bash cli_limits.sh <path-to-attn> <source-dir>
set -u
ATTN=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "${BASH_SOURCE[0]}")/support/lib.sh"

make_corpus "$tmp/corpus.txt"
# expect WHAT RC TEXT cmd...: exit status RC and TEXT in stderr.
expect() {
  local what=$1 want_rc=$2 want=$3
  shift 3
  "$@" > "$tmp/o" 2> "$tmp/e"
  local rc=$?
  [ $rc -eq "$want_rc" ] && { [ -z "$want" ] || grep -qF -- "$want" "$tmp/e"; } && ok "$what" ||
    bad "$what: rc=$rc (want $want_rc) $(head -c 400 "$tmp/e")"
}
train() { "$ATTN" train --data "$tmp/corpus.txt" --threads 1 "$@"; }
# limited KB cmd...: cmd under `ulimit -v KB`; not under ASan, whose shadow
# memory alone is terabytes of address space (--max-memory still holds it).
asan=0
ldd "$ATTN" 2> /dev/null | grep -q libasan && asan=1
limited() {
  local kb=$1
  shift
  if [ $asan -eq 1 ]; then "$@"; else bash -c 'ulimit -v "$0"; "$@"' "$kb" "$@"; fi
}

# 8. A huge config is refused from its size, before anything is allocated.
echo '{"n_layers": 4096, "emb_dim": 65536, "n_heads": 1}' > "$tmp/huge.json"
for dry in --dry-run ""; do
  t0=$SECONDS
  # shellcheck disable=SC2086
  expect "huge config ${dry:-(real run)}: refused, naming the size" 1 "needs about" \
    limited 4000000 "$ATTN" train --data "$tmp/corpus.txt" --threads 1 \
    --config "$tmp/huge.json" --max-memory 64M --out "$tmp/huge" $dry
  [ $((SECONDS - t0)) -le 20 ] || bad "huge config took $((SECONDS - t0)) s"
  grep -q "TiB" "$tmp/e" && grep -q "64.0 MiB" "$tmp/e" || bad "size and limit not named: $(cat "$tmp/e")"
done
[ ! -e "$tmp/huge" ] && ok "the refused run made no folder" || bad "the refused run made $tmp/huge"
# Without --max-memory the budget is the memory available now.
expect "huge config, no --max-memory: refused against available memory" 1 "the memory available now" \
  limited 4000000 "$ATTN" train --data "$tmp/corpus.txt" --threads 1 \
  --config "$tmp/huge.json" --out "$tmp/huge" --dry-run
cat > "$tmp/small.json" <<'JSON'
{"context_length": 16, "emb_dim": 16, "n_heads": 2, "n_layers": 1, "batch_size": 2,
 "max_steps": 2, "eval_interval": 2, "eval_iters": 1}
JSON
train --config "$tmp/small.json" --out "$tmp/small" > /dev/null 2>&1 || bad "setup: the small run failed"
expect "a small run fits --max-memory 64M" 0 "" train --config "$tmp/small.json" \
  --out "$tmp/small2" --max-memory 64M --dry-run
expect "--max-memory 1x is a usage error" 2 "--max-memory must be a size" \
  train --config "$tmp/small.json" --out "$tmp/x" --max-memory 1x --dry-run

# 9. A module too large for the budget is refused before its weights exist.
python3 - "$tmp/x.npy" <<'PY'
import struct, sys
hdr = "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 2, 3), }"
hdr += " " * (63 - len(hdr) - 10) + "\n"
with open(sys.argv[1], "wb") as f:
    f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(hdr)) + hdr.encode())
    f.write(struct.pack("<6f", 1, 2, 3, 4, 5, 6))
PY
t0=$SECONDS
expect "forward mha --d-out 134217727: refused, naming the size" 1 "needs about" \
  limited 2000000 "$ATTN" forward mha --d-out 134217727 --heads 1 \
  --input "$tmp/x.npy" --output "$tmp/y.npy" --max-memory 64M
[ $((SECONDS - t0)) -le 10 ] || bad "forward took $((SECONDS - t0)) s"
expect "forward mha --d-out 4 fits --max-memory 64M" 0 "" "$ATTN" forward mha --d-out 4 \
  --heads 2 --input "$tmp/x.npy" --output "$tmp/y.npy" --max-memory 64M

# A checkpoint's model and KV cache against --max-memory (generate).
expect "generate --max-memory 1K: refused, naming the size" 1 "the model with its KV cache needs about" \
  "$ATTN" generate "$tmp/small" --max-memory 1K
expect "generate --max-memory 64M fits" 0 "" "$ATTN" generate "$tmp/small" --max-memory 64M \
  --max-new-tokens 4
# viz and bench take --max-memory too, checked before anything is made:
# viz from the checkpoint's header (model, KV cache, the page's weights),
# bench from its sizes (mha's module, sgemm's matrices, a preset's run).
expect "viz --max-memory 1K: refused, naming the size" 1 "the model and its attention page needs about" \
  "$ATTN" viz "$tmp/small" --prompt ab --out "$tmp/vm.html" --max-memory 1K
[ ! -e "$tmp/vm.html" ] || bad "the refused viz wrote its page"
expect "viz --max-memory 64M fits" 0 "wrote" \
  "$ATTN" viz "$tmp/small" --prompt ab --out "$tmp/vm.html" --max-memory 64M
expect "bench mha --max-memory 1M: refused" 1 "the benchmark's buffers needs about" \
  limited 500000 "$ATTN" bench mha --max-memory 1M
expect "bench sgemm of 3 x 37 GiB: refused before allocating" 1 "the benchmark's buffers needs about" \
  limited 500000 "$ATTN" bench sgemm --m 100000 --n 100000 --k 100000 --max-memory 64G
expect "bench mha --max-memory 1x is a usage error" 2 "--max-memory must be a size" \
  "$ATTN" bench mha --max-memory 1x
expect "bench train --max-memory 1M: refused" 1 "the run (weights, gradients" \
  limited 500000 "$ATTN" bench train --preset seed004 --max-memory 1M
expect "bench generate --max-memory 1M: refused" 1 "the model with its KV cache needs about" \
  limited 500000 "$ATTN" bench generate --preset seed004 --max-memory 1M

# 12. One number parser: exact integers, decimal floats, strict JSON.
expect "--seed over 2^53 is refused, not rounded" 2 "--seed must be" \
  train --config "$tmp/small.json" --out "$tmp/x" --dry-run --seed 9007199254740993
expect "--seed 2^53 is accepted" 0 "" \
  train --config "$tmp/small.json" --out "$tmp/x" --dry-run --seed 9007199254740992
expect "--lr 0x10 (hex) is refused" 2 "--lr must be" \
  train --config "$tmp/small.json" --out "$tmp/x" --dry-run --lr 0x10
expect "--eps ' 1' (a space) is refused" 2 "--eps must be" \
  train --config "$tmp/small.json" --out "$tmp/x" --dry-run --eps " 1"
expect "--lr 1e-3 is accepted" 0 "" \
  train --config "$tmp/small.json" --out "$tmp/x" --dry-run --lr 1e-3
expect "--threads ' 1' is refused" 2 "--threads must be" \
  train --config "$tmp/small.json" --out "$tmp/x" --dry-run --threads " 1"
echo '{"context_length": 16, "emb_dim": 16, "n_heads": 2, "n_layers": 016}' > "$tmp/z.json"
expect "JSON 016 (a leading zero) is refused" 2 "'016'" \
  train --config "$tmp/z.json" --out "$tmp/x" --dry-run
echo '{"context_length": 16, "emb_dim": 16, "n_heads": 2, "n_layers": 1, "qk_norm": 1}' > "$tmp/b.json"
expect "JSON \"qk_norm\": 1 is refused (true or false)" 2 "qk_norm' must be true or false" \
  train --config "$tmp/b.json" --out "$tmp/x" --dry-run
echo '{"context_length": 16, "emb_dim": 16, "n_heads": 2, "n_layers": 1, "seed": 9007199254740993}' > "$tmp/s.json"
expect "JSON seed over 2^53 is refused" 2 "9007199254740993" \
  train --config "$tmp/s.json" --out "$tmp/x" --dry-run
[ ! -e "$tmp/x" ] || bad "a dry run wrote $tmp/x"

# 13. Every text option is checked as UTF-8, like --prompt.
expect "generate --stop \$'\\xff' is refused" 2 "--stop must be valid UTF-8" \
  "$ATTN" generate "$tmp/small" --stop $'\xff'
expect "generate --prompt \$'\\xff' is refused" 2 "--prompt must be valid UTF-8" \
  "$ATTN" generate "$tmp/small" --prompt $'a\xffb'
expect "generate --stop é is accepted" 0 "" \
  "$ATTN" generate "$tmp/small" --prompt "ab" --stop "é" --max-new-tokens 2

# 16. Usage errors exit 2: X's last dim against --d-in; viz's prompt + N.
expect "forward --d-in 7 against X's 3: exit 2" 2 "got (1, 2, 3)" \
  "$ATTN" forward mha --d-out 4 --heads 2 --d-in 7 --input "$tmp/x.npy" --output "$tmp/y.npy"
expect "viz --prompt ab --generate 15 at context 16: exit 2" 2 "must fit in the model's context_length 16" \
  "$ATTN" viz "$tmp/small" --prompt ab --generate 15 --out "$tmp/v.html"
[ ! -e "$tmp/v.html" ] || bad "the refused viz wrote its page"
expect "viz --prompt ab --generate 14 at context 16 fits" 0 "wrote" \
  "$ATTN" viz "$tmp/small" --prompt ab --generate 14 --out "$tmp/v.html"

[ $fails -eq 0 ] && echo "all ok" || echo "$fails failed"
exit $((fails > 0))
