#!/usr/bin/env bash
# `attn forward` behaviour that needs no PyTorch (numbers are checked against
# PyTorch by test_parity and parity_live): weights round-trip through
# safetensors, gradient file names, flag forms, determinism, train/eval and
# the two dropout streams.
#
#   bash tests/cli_forward.sh ATTN SRCDIR
set -uo pipefail
export LC_ALL=C
attn=$1
src=$2
tmp=$(mktemp -d "${TMPDIR:-/tmp}/attn-cli-forward.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
failures=0
checks=0
check() { # check "what" command...
    local what=$1
    shift
    checks=$((checks + 1))
    if "$@"; then
        echo "ok   $what"
    else
        failures=$((failures + 1))
        echo "FAIL $what"
    fi
}
run() { "$attn" forward "$@" >"$tmp/last.txt" 2>&1 || { cat "$tmp/last.txt"; return 1; }; }
same() { cmp -s "$1" "$2"; }
differ() { ! cmp -s "$1" "$2"; }

# The committed fixtures give ready-made inputs: x (2, 6, 3) book batch.
x=$src/tests/fixtures/parity/mha_book/x.npy
dy=$src/tests/fixtures/parity/mha_book/dy.npy
x2=$src/tests/fixtures/parity/v2_book/x.npy
M=(mha --d-out 2 --heads 2 --input "$x")

check "--help exits 0 and lists every module" \
    bash -c '"$0" forward --help | grep -q mha-wrapper && "$0" forward --help | grep -q self-attention-v1' "$attn"
check "mha runs and writes y" run "${M[@]}" --output "$tmp/y1.npy" --save-weights "$tmp/w.safetensors"
check "summary names module and shapes" grep -q '^mha: x (2, 6, 3) -> y (2, 6, 2), seed 123, eval' "$tmp/last.txt"
check "same command, same bytes" run "${M[@]}" --output "$tmp/y1b.npy"
check "  (compare)" same "$tmp/y1.npy" "$tmp/y1b.npy"
check "another seed, other weights" run "${M[@]}" --seed 7 --output "$tmp/y7.npy"
check "  (compare)" differ "$tmp/y1.npy" "$tmp/y7.npy"
check "--weights from --save-weights restores seed 123's weights" \
    run "${M[@]}" --seed 7 --weights "$tmp/w.safetensors" --output "$tmp/y7w.npy"
check "  (compare)" same "$tmp/y1.npy" "$tmp/y7w.npy"
check "--flag=value form" run mha --d-out=2 --heads=2 --input="$x" --output="$tmp/y1c.npy"
check "  (compare)" same "$tmp/y1.npy" "$tmp/y1c.npy"
check "--d-in matching the input is accepted" run "${M[@]}" --d-in 3 --output "$tmp/y1d.npy"
check "  (compare)" same "$tmp/y1.npy" "$tmp/y1d.npy"

# Dropout: only in --train, and the stream matters.
D=(mha --d-out 2 --heads 2 --dropout 0.5 --input "$x")
check "eval ignores dropout" run "${D[@]}" --output "$tmp/ye.npy"
check "  (compare)" same "$tmp/y1.npy" "$tmp/ye.npy"
check "train, torch-cpu" run "${D[@]}" --train --output "$tmp/ycpu.npy"
check "  (differs from eval)" differ "$tmp/y1.npy" "$tmp/ycpu.npy"
check "train, default stream is torch-cpu" run "${D[@]}" --train --rng torch-cpu --output "$tmp/ycpu2.npy"
check "  (compare)" same "$tmp/ycpu.npy" "$tmp/ycpu2.npy"
check "train, torch-mkl" run "${D[@]}" --train --rng torch-mkl --output "$tmp/ymkl.npy"
check "  (differs from torch-cpu)" differ "$tmp/ycpu.npy" "$tmp/ymkl.npy"

# Gradient files: dX plus one file per state_dict name.
check "mha-wrapper backward" run mha-wrapper --d-out 2 --heads 2 --qkv-bias --input "$x" \
    --grad-output "$src/tests/fixtures/parity/wrapper_book/dy.npy" --grad-dir "$tmp/g"
want="heads.0.W_key.bias.npy heads.0.W_key.weight.npy heads.0.W_query.bias.npy
heads.0.W_query.weight.npy heads.0.W_value.bias.npy heads.0.W_value.weight.npy
heads.1.W_key.bias.npy heads.1.W_key.weight.npy heads.1.W_query.bias.npy
heads.1.W_query.weight.npy heads.1.W_value.bias.npy heads.1.W_value.weight.npy input.npy"
check "  grad files named as the state_dict" \
    test "$(cd "$tmp/g" && ls | tr '\n' ' ')" = "$(echo $want) "
check "self-attention-v1 backward (no --output)" run self-attention-v1 --d-out 2 --input "$x2" \
    --grad-output "$src/tests/fixtures/parity/v1_book/dy.npy" --grad-dir "$tmp/g1"
check "  grad files" test "$(cd "$tmp/g1" && ls | tr '\n' ' ')" = \
    "W_key.npy W_query.npy W_value.npy input.npy "
check "mha backward into an existing dir" run "${M[@]}" --grad-output "$dy" --grad-dir "$tmp/g1"

echo "cli_forward: $((checks - failures)) of $checks checks passed"
[ "$failures" -eq 0 ]
