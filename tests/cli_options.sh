#!/usr/bin/env bash
# The option tables (cli/options.c, issue 9): `--flag value` and `--flag=value`
# give the same result, every bad value gets the one wording naming the valid
# range or choices, usage errors exit 2 and runtime failures 1, --help is made
# from the table (ranges and defaults shown), the tables pass their own check,
# and `attn --version` is the CMake project version. Issue 17 (friction): a
# misspelt command, option or choice gets "did you mean", the checkpoint of
# generate / viz / forward gpt may be given without its flag, testing hooks
# stay out of --help, and every --help fits 80 columns.
#
#   bash tests/cli_options.sh ATTN SRCDIR
set -uo pipefail
# (help texts are piped into grep without -q: -q stops at the first match and
# cuts the pipe, a SIGPIPE that pipefail reports as a failure)
ATTN=$1
SRC=$2
tmp=$(mktemp -d "${TMPDIR:-/tmp}/attn-cli-options.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fails=0
n=0
ok() { n=$((n + 1)); echo "ok   $1"; }
bad() { n=$((n + 1)); fails=$((fails + 1)); echo "FAIL $1"; }

# expect RC REGEX WHAT -- attn-args...: exit status RC and stderr matching REGEX.
expect() {
  local want=$1 re=$2 what=$3
  shift 4
  "$ATTN" "$@" > "$tmp/out" 2> "$tmp/err"
  local rc=$?
  if [ "$rc" -eq "$want" ] && grep -qE -- "$re" "$tmp/err"; then
    ok "$what: exit $rc, '$(head -1 "$tmp/err")'"
  else
    bad "$what: rc=$rc (want $want), stderr '$(cat "$tmp/err")'"
  fi
}

# 1. --version is the project version from CMakeLists.txt.
want=$(sed -n 's/^project(attn VERSION \([0-9.]*\).*/\1/p' "$SRC/CMakeLists.txt")
got=$("$ATTN" --version)
[ "$got" = "attn $want" ] && ok "--version: $got" || bad "--version: '$got', want 'attn $want'"

# 2. Every table passes its own check (names, ranges, defaults that parse).
"$ATTN" --check-options 2> "$tmp/err" && ok "option tables are sound" ||
  bad "option tables: $(cat "$tmp/err")"

# 3. --flag=value == --flag value.
a=$("$ATTN" rng --seed 7 --count 5 --dropout 0.3 --rng torch-cpu)
b=$("$ATTN" rng --seed=7 --count=5 --dropout=0.3 --rng=torch-cpu)
[ -n "$a" ] && [ "$a" = "$b" ] && ok "rng: --flag=value gives the same draws" || bad "rng: '$a' vs '$b'"
c=$("$ATTN" rng --seed=7 --count=5 --dropout=0.3 --rng=torch-mkl)
[ "$a" != "$c" ] && ok "rng: --rng=torch-mkl is a different stream" || bad "rng: --rng ignored"
[ "$("$ATTN" rng --count=3 | wc -l)" -eq 3 ] && ok "rng --count=3 prints 3 values" || bad "rng --count=3"
# Defaults come from the table: seed 123 and 6 values = torch.manual_seed(123); torch.rand(6).
first=$("$ATTN" rng | head -1)
[ "$first" = "0.29611194" ] && [ "$("$ATTN" rng | wc -l)" -eq 6 ] &&
  ok "rng defaults (seed 123, count 6; first draw as torch.rand: $first)" || bad "rng defaults: $first"
"$ATTN" chapter3 --rng=torch-cpu > "$tmp/cpu.txt" && "$ATTN" chapter3 --rng torch-cpu | cmp -s - "$tmp/cpu.txt" &&
  grep -q "dropout stream: torch-cpu" "$tmp/cpu.txt" && ok "chapter3 --rng=torch-cpu" || bad "chapter3 --rng=torch-cpu"

# 4. One wording for bad values, with the valid range or choices; exit 2.
expect 2 "^attn rng: --count must be an integer in \[1, 1000000\], not '0'$" "count 0" -- rng --count 0
expect 2 "^attn rng: --count must be an integer in \[1, 1000000\], not 'x'$" "count x (=form)" -- rng --count=x
expect 2 "^attn rng: --dropout must be a number in \[0, 1\), not '1'$" "dropout 1" -- rng --dropout 1
expect 2 "^attn rng: --dropout must be a number in \[0, 1\), not 'nan'$" "dropout nan" -- rng --dropout nan
expect 2 "^attn rng: --seed must be an integer in \[0, 18446744073709551615\], not '-1'$" "negative seed" -- rng --seed -1
expect 2 "^attn rng: --seed must be an integer .*, not '99999999999999999999'$" "seed overflow" -- rng --seed 99999999999999999999
expect 2 "^attn rng: --rng must be one of torch-mkl, torch-cpu, not 'mkl' \(did you mean 'torch-mkl'\?\)$" "unknown stream" -- rng --dropout 0.1 --rng mkl
expect 2 "^attn chapter3: --rng must be one of torch-mkl, torch-cpu, not 'x'$" "chapter3 bad stream (nothing near)" -- chapter3 --rng=x
expect 2 "^attn viz: --temperature must be a number >= 0, not '-1'$" "viz negative temperature" -- viz --temperature -1
expect 2 "^attn viz: --top-k must be an integer in \[0, 1000000\], not '1e3'$" "viz top-k 1e3" -- viz --top-k 1e3
expect 2 "^attn rng: --seed needs a value \(an integer" "missing value" -- rng --seed
expect 2 "^attn chapter3: unknown option '--figure' \(did you mean '--figures'\?\)$" "unknown option" -- chapter3 --figure x
expect 2 "^attn chapter3: unknown option '--nope' \(see 'attn chapter3 --help'\)$" "unknown --opt=value" -- chapter3 --nope=1
expect 2 "^attn rng: unexpected argument 'extra'" "stray argument" -- rng extra
expect 2 "^attn viz: which checkpoint\? give DIR \(or --checkpoint DIR" "required option" -- viz --prompt x --out "$tmp/x.html"
expect 2 "^attn chapter3: --figures DIR must not be an empty string$" "empty string" -- chapter3 --figures ""
expect 2 "^attn info: --json takes no value$" "flag with a value" -- info --json=1 x
expect 2 "^attn info: which checkpoint" "info without DIR" -- info
expect 2 "^attn: unknown command 'nope'" "unknown command" -- nope
# The tables of generate, forward (and forward gpt) and bench: the same wording.
expect 2 "^attn generate: --top-p must be a number in \(0, 1\], not '0'$" "generate top-p 0 (open low end)" -- generate --checkpoint x --top-p 0
expect 2 "^attn generate: --temperature must be a number >= 0, not 'inf'$" "generate temperature inf" -- generate --checkpoint x --temperature=inf
expect 2 "^attn generate: --max-new-tokens must be an integer >= 0, not '-1'$" "generate negative count" -- generate --checkpoint x --max-new-tokens -1
expect 2 "^attn generate: --precision must be one of fp32, bf16, not 'fp8'$" "generate precision fp8" -- generate --checkpoint x --precision fp8
expect 2 "^attn generate: which checkpoint\? give DIR \(or --checkpoint DIR" "generate without checkpoint" -- generate --prompt x
expect 2 "^attn forward: --d-out must be an integer in \[1, 134217727\], not 'x'$" "forward d-out x (=form)" -- forward mha --d-out=x --input x.npy
expect 2 "^attn forward: --rng must be one of torch-mkl, torch-cpu, not 'mkl' \(did you mean 'torch-mkl'\?\)$" "forward bad stream" -- forward mha --d-out 2 --input x.npy --rng mkl
expect 2 "^attn forward: which module\? one of: self-attention-v1 .* gpt$" "forward without a module" -- forward --d-out 2 --input x.npy
expect 2 "^attn forward gpt: --precision must be one of fp32, bf16, not 'fp8'$" "forward gpt precision fp8" -- forward gpt --checkpoint x --input x --output y --precision=fp8
expect 2 "^attn forward gpt: --output LOGITS.npy is required" "forward gpt without output" -- forward gpt --checkpoint x --input x
expect 2 "^attn bench: --simd must be one of auto, generic, avx2, avx512, not 'sse'$" "bench simd sse" -- bench mha --simd sse
expect 2 "^attn bench: --warmup must be an integer in \[0, 1000000000\], not '-1'$" "bench warmup -1" -- bench mha --warmup=-1
expect 2 "^attn bench: which benchmark\? mha, sgemm, train or generate$" "bench without a benchmark" -- bench --repeat 1
expect 2 "^attn bench train: --steps must be an integer in \[1, 1000000\], not '0'$" "bench train steps 0" -- bench train --steps 0
expect 2 "^attn bench generate: unknown option '--nope'" "bench generate unknown option" -- bench generate --nope=1

# --threads N in every command that computes, with the one range.
for cmd in chapter3 viz generate "forward mha" "forward gpt" "bench mha" "bench sgemm" "bench train" "bench generate"; do
  name=${cmd% mha}; name=${name% sgemm}
  expect 2 "^attn $name: --threads must be an integer in \[1, 4096\], not '0'$" "$cmd --threads 0" -- $cmd --threads=0
  "$ATTN" $cmd --help | grep "^  --threads N " > /dev/null && ok "$cmd --help lists --threads" || bad "$cmd --help lacks --threads"
done
"$ATTN" chapter3 --threads 1 > "$tmp/ch1.txt" && "$ATTN" chapter3 --threads=2 | cmp -s - "$tmp/ch1.txt" &&
  ok "chapter3 prints the same tables at 1 and 2 threads" || bad "chapter3 --threads changes the output"

# --flag=value == --flag value in the converted commands.
a=$("$ATTN" bench sgemm --m 32 --n 16 --k 8 --repeat 1 --threads 1 | grep -o 'mode=[^ ]* threads=[0-9]*')
b=$("$ATTN" bench sgemm --m=32 --n=16 --k=8 --repeat=1 --threads=1 | grep -o 'mode=[^ ]* threads=[0-9]*')
[ "$a" = "mode=32x16x8 threads=1" ] && [ "$a" = "$b" ] && ok "bench sgemm --flag=value: $b" || bad "bench sgemm: '$a' vs '$b'"
/usr/bin/python3 -c "import numpy as np; np.save('$tmp/x.npy', np.arange(36, dtype=np.float32).reshape(2, 6, 3) / 36)"
"$ATTN" forward mha --d-out 4 --heads 2 --seed 5 --dropout 0.5 --train --input "$tmp/x.npy" --output "$tmp/y1.npy" > "$tmp/s1.txt" &&
  "$ATTN" forward mha --d-out=4 --heads=2 --seed=5 --dropout=0.5 --train --input="$tmp/x.npy" --output="$tmp/y2.npy" > "$tmp/s2.txt" &&
  cmp -s "$tmp/y1.npy" "$tmp/y2.npy" && [ "$(sed 1d "$tmp/s1.txt" | cut -d'>' -f1)" = "$(sed 1d "$tmp/s2.txt" | cut -d'>' -f1)" ] &&
  ok "forward mha --flag=value gives the same Y" || bad "forward --flag=value: $(cat "$tmp/s1.txt" "$tmp/s2.txt")"
expect 2 "^attn forward: --heads does not apply to causal-attention$" "forward: a flag the kind does not use" -- forward causal-attention --d-out 2 --heads=2 --input "$tmp/x.npy"
expect 2 "^attn forward: seed004-mha: d_out \(4\) must equal d_in = embedding_dim \(3\)$" "forward: a config the kind refuses (exit 2)" -- forward seed004-mha --d-out 4 --input "$tmp/x.npy"
"$ATTN" forward --help | grep "^  seed004-mha " > /dev/null && ok "forward --help lists the library's module kinds" || bad "forward --help lacks the modules"

# Runtime failures exit 1.
expect 1 "nothere" "info on a missing folder" -- info "$tmp/nothere"
expect 1 "nothere" "viz on a missing checkpoint" -- viz --checkpoint "$tmp/nothere" --prompt x --out "$tmp/x.html"

# One exit-code rule in every command: a missing file is a runtime failure
# (1), an unknown option a usage error (2).
printf 'hello\n' > "$tmp/corpus.txt"
expect 1 "$tmp/nope.json" "train: missing --config file" -- train --data "$tmp/corpus.txt" --config "$tmp/nope.json" --out "$tmp/r"
expect 1 "$tmp/nope.txt" "train: missing --data file" -- train --data "$tmp/nope.txt" --out "$tmp/r"
expect 1 "$tmp/nope.npy" "forward: missing --input" -- forward mha --d-out 2 --input "$tmp/nope.npy" --output "$tmp/y.npy"
expect 1 "$tmp/nope" "generate: missing checkpoint" -- generate --checkpoint "$tmp/nope"
expect 1 "$tmp/nope" "forward gpt: missing checkpoint" -- forward gpt --checkpoint "$tmp/nope" --input "$tmp/x.npy" --output "$tmp/y.npy"
for cmd in chapter3 rng viz info train generate forward bench export; do
  expect 2 "unknown (or incomplete )?option|unknown benchmark|which module" "$cmd: unknown option" -- $cmd --no-such-option
done

# 5. --help comes from the table: every option with its range and default; exit 0.
for cmd in chapter3 rng viz info generate forward "forward gpt" bench "bench train" "bench generate" export; do
  if "$ATTN" $cmd --help > "$tmp/help" 2>&1 && grep -q "^usage: attn $cmd" "$tmp/help"; then
    ok "$cmd --help exits 0 with a usage line"
  else
    bad "$cmd --help: $(cat "$tmp/help")"
  fi
done
"$ATTN" rng --help > "$tmp/help"
grep -q "(an integer in \[1, 1000000\]; default 6)" "$tmp/help" &&
  grep -q "(one of torch-mkl, torch-cpu; default torch-mkl)" "$tmp/help" &&
  ok "rng --help shows ranges and defaults (--rng default torch-mkl)" || bad "rng --help: $(cat "$tmp/help")"
"$ATTN" chapter3 --help | grep "default torch-mkl" > /dev/null && ok "chapter3 --help shows the --rng default" ||
  bad "chapter3 --help lacks the --rng default"
"$ATTN" viz --help | grep "default 0.8" > /dev/null && ok "viz --help shows the temperature default" ||
  bad "viz --help lacks defaults"
"$ATTN" generate --help | grep "(a number in (0, 1\]; default 1)" > /dev/null && ok "generate --help shows top-p's half-open range" ||
  bad "generate --help lacks top-p's range"
"$ATTN" bench --help > "$tmp/help"
grep -q "(one of torch-mkl, torch-cpu; default torch-mkl)" "$tmp/help" && ok "bench --help shows the --rng default" ||
  bad "bench --help lacks the --rng default"
"$ATTN" --help | grep "^  info " > /dev/null && ok "attn --help lists info" || bad "attn --help lacks info"

# 6. Did you mean: commands, options (every table, attn train's key rows
# too), choices, modules, benchmarks, presets; exit 2.
expect 2 "^attn: unknown command 'generat' \(did you mean 'generate'\?\)$" "command typo" -- generat
expect 2 "^attn: unknown command 'Info' \(did you mean 'info'\?\)$" "command in capitals" -- Info
expect 2 "^attn: unknown command 'nope'$" "unknown command, nothing near" -- nope
expect 2 "^attn generate: unknown option '--temprature' \(did you mean '--temperature'\?\)$" "option typo" -- generate --checkpoint x --temprature 1
expect 2 "^attn generate: unknown option '--temprature' \(did you mean '--temperature'\?\)$" "option typo, =form" -- generate --checkpoint x --temprature=1
expect 2 "^attn rng: unknown option '-seed' \(did you mean '--seed'\?\)$" "one dash" -- rng -seed 3
expect 2 "^attn viz: unknown option '--top_k' \(did you mean '--top-k'\?\)$" "viz option typo" -- viz --top_k 3
expect 2 "^attn bench: unknown option '--head' \(did you mean '--heads'\?\)$" "bench option typo" -- bench mha --head 2
expect 2 "^attn forward gpt: unknown option '--target' \(did you mean '--targets'\?\)$" "forward gpt option typo" -- forward gpt --target y
expect 2 "^attn train: unknown option '--bach-size' \(did you mean '--batch-size'\?\)$" "train key-table option typo" -- train --bach-size 4
expect 2 "^attn train: unknown option '--dry' \(did you mean '--dry-run'\?\)$" "train prefix" -- train --dry
expect 2 "^attn train: --preset must be one of seed004, shakespeare-char, nanogpt-cpu, tiny, speedrun, gpt2-124m, gpt2-medium, gpt2-large, gpt2-xl, book-ch05, not 'nanogpt' \(did you mean 'nanogpt-cpu'\?\)$" "preset typo" -- train --preset nanogpt
expect 2 "^attn bench train: --preset must be one of .*, not 'Seed004' \(did you mean 'seed004'\?\)$" "bench train preset" -- bench train --preset Seed004
expect 2 "^attn train: --dropout-stream must be one of torch-cpu, torch-mkl, not 'torch_cpu' \(did you mean 'torch-cpu'\?\)$" "train key choice" -- train --dropout-stream torch_cpu
expect 2 "^attn train: --device must be one of cpu, cuda, not 'cdua' \(did you mean 'cuda'\?\)$" "train device" -- train --device cdua
expect 2 "^attn generate: --precision must be one of fp32, bf16, not 'bf61' \(did you mean 'bf16'\?\)$" "precision swap" -- generate --checkpoint x --precision bf61
expect 2 "^attn forward: unknown module 'mah' \(did you mean 'mha'\?\); one of: " "module typo" -- forward mah --d-out 2 --input x.npy
expect 2 "^attn bench: unknown benchmark 'sgem' \(did you mean 'sgemm'\?\)" "benchmark typo" -- bench sgem
expect 2 "^attn rng: unknown option '--hepl' \(did you mean '--help'\?\)$" "--help typo" -- rng --hepl

# 7. The checkpoint without its flag (as `attn info DIR`): generate, viz and
# forward gpt take DIR alone; both forms at once is a usage error.
expect 1 "$tmp/nope" "generate DIR (a missing one: a runtime failure)" -- generate "$tmp/nope" --max-new-tokens 1
expect 1 "$tmp/nope" "viz DIR" -- viz "$tmp/nope" --prompt x --out "$tmp/x.html"
expect 1 "$tmp/nope" "forward gpt DIR" -- forward gpt "$tmp/nope" --input x.npy --output y.npy
expect 2 "^attn generate: the checkpoint is given twice: give DIR or --checkpoint DIR" "generate DIR --checkpoint DIR" -- generate a --checkpoint b
expect 2 "^attn viz: the checkpoint is given twice" "viz --checkpoint DIR DIR" -- viz --checkpoint a b --prompt x --out "$tmp/x.html"
expect 2 "^attn generate: unexpected argument 'b'|given twice" "generate a b" -- generate a b
for cmd in generate viz "forward gpt"; do
  "$ATTN" $cmd --help | grep "^usage: attn $cmd \[--checkpoint\] DIR " > /dev/null &&
    "$ATTN" $cmd --help | grep -A1 "^  \[--checkpoint\] DIR " | grep -q "the flag may be left out" &&
    ok "$cmd --help shows both forms" || bad "$cmd --help: $("$ATTN" $cmd --help | head -3)"
done

# 8. Testing hooks are hidden from --help (and from suggestions) but accepted.
"$ATTN" train --help > "$tmp/help"
if grep -qE -- "--(interrupt-after|kill-rank|kill-after)|\(testing\)" "$tmp/help"; then
  bad "train --help shows a testing hook: $(grep -E -- '--(interrupt|kill)' "$tmp/help")"
else
  ok "train --help hides --interrupt-after, --kill-rank, --kill-after ($(wc -l < "$tmp/help") lines)"
fi
for i in $(seq 1 200); do echo "First Citizen: before we proceed any further, hear me speak $((i % 7))."; done > "$tmp/big.txt"
"$ATTN" train --data "$tmp/big.txt" --out "$tmp/never" --dry-run --threads 1 --steps 1 \
  --interrupt-after 5 --kill-rank 0 --kill-after=9 > /dev/null 2> "$tmp/err" &&
  ok "the hidden flags are still accepted" || bad "hidden flags refused: $(cat "$tmp/err")"
expect 2 "^attn train: unknown option '--kill' \(see 'attn train --help'\)$" "no hidden flag suggested" -- train --kill 1
expect 2 "^attn train: --interrupt-after must be an integer >= 1, not '0'$" "a hidden flag keeps its range" -- train --interrupt-after 0

# 9. Every --help fits 80 columns, says nothing of "non-empty" folders, and
# `attn --check-options` checks the tables' help width itself.
for cmd in "" chapter3 rng viz info generate forward "forward gpt" bench "bench mha" "bench sgemm" \
  "bench train" "bench generate" train export; do
  "$ATTN" $cmd --help > "$tmp/help" 2>&1
  long=$(awk 'length > 80' "$tmp/help" | head -1)
  [ -z "$long" ] && ok "attn $cmd --help fits 80 columns" || bad "attn $cmd --help: a line over 80: $long"
  grep -q "non-empty" "$tmp/help" && bad "attn $cmd --help says 'non-empty'" || true
done

echo "cli_options: $((n - fails)) of $n checks passed"
[ "$fails" -eq 0 ]
