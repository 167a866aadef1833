#!/usr/bin/env bash
# The option tables (cli/options.c, issue 9): `--flag value` and `--flag=value`
# give the same result, every bad value gets the one wording naming the valid
# range or choices, usage errors exit 2 and runtime failures 1, --help is made
# from the table (ranges and defaults shown), the tables pass their own check,
# and `attn --version` is the CMake project version.
#
#   bash tests/cli_options.sh ATTN SRCDIR
set -uo pipefail
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
expect 2 "^attn rng: --rng must be one of torch-mkl, torch-cpu, not 'mkl'$" "unknown stream" -- rng --dropout 0.1 --rng mkl
expect 2 "^attn chapter3: --rng must be one of torch-mkl, torch-cpu, not 'x'$" "chapter3 bad stream" -- chapter3 --rng=x
expect 2 "^attn viz: --temperature must be a number >= 0, not '-1'$" "viz negative temperature" -- viz --temperature -1
expect 2 "^attn viz: --top-k must be an integer in \[0, 1000000\], not '1e3'$" "viz top-k 1e3" -- viz --top-k 1e3
expect 2 "^attn rng: --seed needs a value \(an integer" "missing value" -- rng --seed
expect 2 "^attn chapter3: unknown option '--figure' \(see 'attn chapter3 --help'\)$" "unknown option" -- chapter3 --figure x
expect 2 "^attn chapter3: unknown option '--nope' " "unknown --opt=value" -- chapter3 --nope=1
expect 2 "^attn rng: unexpected argument 'extra'" "stray argument" -- rng extra
expect 2 "^attn viz: --checkpoint DIR is required" "required option" -- viz --prompt x --out "$tmp/x.html"
expect 2 "^attn chapter3: --figures must be a non-empty DIR, not ''$" "empty string" -- chapter3 --figures ""
expect 2 "^attn info: --json takes no value$" "flag with a value" -- info --json=1 x
expect 2 "^attn info: which checkpoint" "info without DIR" -- info
expect 2 "^attn: unknown command 'nope'" "unknown command" -- nope
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
for cmd in chapter3 rng viz info train generate forward bench; do
  expect 2 "unknown (or incomplete )?option|unknown benchmark|which module" "$cmd: unknown option" -- $cmd --no-such-option
done

# 5. --help comes from the table: every option with its range and default; exit 0.
for cmd in chapter3 rng viz info; do
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
"$ATTN" chapter3 --help | grep -q "default torch-mkl" && ok "chapter3 --help shows the --rng default" ||
  bad "chapter3 --help lacks the --rng default"
"$ATTN" viz --help | grep -q "default 0.8" && ok "viz --help shows the temperature default" ||
  bad "viz --help lacks defaults"
"$ATTN" --help | grep -q "^  info " && ok "attn --help lists info" || bad "attn --help lacks info"

echo "cli_options: $((n - fails)) of $n checks passed"
[ "$fails" -eq 0 ]
