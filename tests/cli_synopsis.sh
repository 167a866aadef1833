#!/usr/bin/env bash
# docs/cli.md's command synopsis is each command's own (issue 47;
# scripts/cli_synopsis.py writes it): every `usage:` entry of `attn CMD
# --help` (and of the subcommands forward gpt, bench train, bench generate)
# is a line of the block, and every line of the block is one of them
# (whitespace aside; `# comment` lines are the page's). Lines a synopsis
# wraps are joined.
set -u
ATTN=$1 SRC=$2
. "$SRC/tests/support/lib.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
norm() { tr -s ' \t' ' ' | sed 's/^ //; s/ $//'; }
# The synopsis of one --help: "usage: " then lines indented past the about text.
synopsis() {
  awk '/^usage:/ {p = 1; sub(/^usage: +/, ""); print "@" $0; next}
       p && /^      +[^ ]/ {sub(/^ +/, ""); if ($0 ~ /^attn /) print "@" $0; else print; next}
       p {exit}'
}
# Entries: each "@"-line joined with the lines that continue it.
entries() { awk '/^@/ {if (e) print e; e = substr($0, 2); next} {e = e " " $0} END {if (e) print e}' | norm; }
cmds=$("$ATTN" --help | awk '/^commands:/ {p = 1; next} p && /^  [a-z]/ {print $1} p && /^$/ {exit}')
[ -n "$cmds" ] || bad "attn --help lists no commands"
for c in $cmds "forward gpt" "bench train" "bench generate"; do
  # shellcheck disable=SC2086
  "$ATTN" $c --help 2>&1 | synopsis | entries >> "$tmp/help"
done
# The page's block: the fenced sh block under "## Commands".
awk '/^## Commands/ {s = 1} s && /^```sh/ {p = 1; next} p && /^```/ {exit} p' "$SRC/docs/cli.md" |
  grep -v '^ *#' | sed 's/  *# .*$//' | awk '/^attn / {print "@" $0; next} {sub(/^ +/, ""); print}' | entries |
  grep -v '^attn --version$' > "$tmp/doc"
[ -s "$tmp/doc" ] || bad "docs/cli.md: no synopsis block under ## Commands"
while IFS= read -r e; do
  grep -qxF -- "$e" "$tmp/doc" || bad "docs/cli.md lacks: $e"
done < "$tmp/help"
while IFS= read -r e; do
  grep -qxF -- "$e" "$tmp/help" || bad "docs/cli.md has a synopsis no --help gives: $e"
done < "$tmp/doc"
[ $fails -eq 0 ] && ok "docs/cli.md's synopsis is every command's --help ($(wc -l < "$tmp/help") entries)"
[ $fails -eq 0 ]
