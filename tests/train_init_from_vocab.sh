#!/usr/bin/env bash
# --init-from on part of the corpus (issue 17 item 8): the first 3000
# characters of the checkpoint's corpus use fewer characters than it has;
# the run keeps the checkpoint's vocabulary (same ids, so it starts at the
# trained loss), resumes, and --dry-run plans it; a character the
# vocabulary lacks is refused naming it (escaped when unprintable) and its
# line and column.
# Usage: bash train_init_from_vocab.sh <path-to-attn> <source-dir>
set -u
ATTN=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "${BASH_SOURCE[0]}")/support/lib.sh"

make_corpus "$tmp/corpus.txt"
echo "QUEEN MARGARET: Zounds! 'Tis 8 or 9; jump, wax, vex." >> "$tmp/corpus.txt"
head -c 3000 "$tmp/corpus.txt" > "$tmp/part.txt"
cat > "$tmp/small.json" <<'JSON'
{"context_length": 16, "emb_dim": 32, "n_heads": 2, "n_layers": 1, "batch_size": 8,
 "max_steps": 60, "eval_interval": 60, "eval_iters": 4, "warmup_steps": 5}
JSON
vocab() { "$ATTN" info "$1" | awk '$1 == "vocabulary" { print $2 }'; }
v0() { awk '/^step 0:/ { print $NF }' "$1"; }
"$ATTN" train --data "$tmp/corpus.txt" --config "$tmp/small.json" --lr 0.02 --threads 1 \
  --out "$tmp/ck" > /dev/null 2>&1 || bad "setup: training the checkpoint failed"
full=$(vocab "$tmp/ck")
part=$(LC_ALL=C.UTF-8 awk 'BEGIN { RS = "\001" } { n = split($0, c, ""); for (i = 1; i <= n; i++) s[c[i]] = 1 } END { print length(s) }' "$tmp/part.txt")
[ -n "$full" ] && [ "$part" -lt "$full" ] && ok "the first 3000 characters use $part of the $full characters" ||
  bad "setup: part $part, full '$full'"

# 1. Fine-tuning on the part: accepted, the checkpoint's vocabulary kept, and
#    it starts at the trained loss (the ids are the ones it learnt).
ft() { "$ATTN" train --data "$tmp/part.txt" --config "$tmp/small.json" --eval-interval 5 --threads 1 "$@"; }
ft --out "$tmp/ft" --init-from "$tmp/ck" --steps 5 > "$tmp/ft.log" 2> "$tmp/ft.err"; rc=$?
[ $rc -eq 0 ] && [ "$(vocab "$tmp/ft")" = "$full" ] &&
  [ "$("$ATTN" info "$tmp/ft" | grep '^vocabulary')" = "$("$ATTN" info "$tmp/ck" | grep '^vocabulary')" ] &&
  ok "--init-from on the part keeps the checkpoint's $full characters" ||
  bad "fine-tune: rc=$rc $(cat "$tmp/ft.err")"
ft --out "$tmp/fresh" --steps 1 > "$tmp/fresh.log" 2> /dev/null
awk -v a="$(v0 "$tmp/ft.log")" -v b="$(v0 "$tmp/fresh.log")" 'BEGIN { exit !(a != "" && a + 0.5 < b) }' &&
  ok "it starts at the trained loss ($(v0 "$tmp/ft.log") vs fresh $(v0 "$tmp/fresh.log"))" ||
  bad "step-0 val loss $(v0 "$tmp/ft.log") vs fresh $(v0 "$tmp/fresh.log")"

# 2. The fine-tuned run resumes (with its saved vocabulary), and --dry-run
#    plans a fine-tune with the checkpoint's vocabulary.
ft --out "$tmp/ft" --resume --steps 8 > /dev/null 2> "$tmp/res.err"; rc=$?
[ $rc -eq 0 ] && [ "$(tail -1 "$tmp/ft/loss.csv" | cut -d, -f1)" = 8 ] &&
  ok "the fine-tuned run resumes to step 8" || bad "resume: rc=$rc $(cat "$tmp/res.err")"
ft --out "$tmp/never" --init-from "$tmp/ck" --dry-run > "$tmp/dry.log" 2>&1; rc=$?
[ $rc -eq 0 ] && grep -q "^corpus .*part.txt (3000 bytes, vocabulary $full)" "$tmp/dry.log" && [ ! -e "$tmp/never" ] &&
  ok "--dry-run plans it with vocabulary $full" || bad "dry-run: rc=$rc $(cat "$tmp/dry.log")"

# 3. A character the vocabulary lacks: refused (exit 1), naming it and where.
{ head -c 100 "$tmp/part.txt"; printf '\nAll: hear \xc3\xa9!\n'; tail -c +101 "$tmp/part.txt"; } > "$tmp/accent.txt"
"$ATTN" train --data "$tmp/accent.txt" --config "$tmp/small.json" --threads 1 --out "$tmp/x2" \
  --init-from "$tmp/ck" > /dev/null 2> "$tmp/x2.err"; rc=$?
line=$(($(head -c 100 "$tmp/part.txt" | wc -l) + 2))
[ $rc -eq 1 ] && grep -qF "character 'é' (U+00E9) at position 111 (line $line, column 11, byte 111) is not in the vocabulary" "$tmp/x2.err" &&
  grep -qF "$tmp/ck" "$tmp/x2.err" && ok "a character it lacks: $(cat "$tmp/x2.err")" ||
  bad "accent: rc=$rc $(cat "$tmp/x2.err")"
{ head -c 50 "$tmp/part.txt"; printf 'x\001y'; tail -c +51 "$tmp/part.txt"; } > "$tmp/ctrl.txt"
"$ATTN" train --data "$tmp/ctrl.txt" --config "$tmp/small.json" --threads 1 --out "$tmp/x3" \
  --init-from "$tmp/ck" > /dev/null 2> "$tmp/x3.err"; rc=$?
[ $rc -eq 1 ] && grep -qF "character U+0001 at position 51 " "$tmp/x3.err" &&
  ok "an unprintable one is escaped: $(cat "$tmp/x3.err")" || bad "control: rc=$rc $(cat "$tmp/x3.err")"

[ $fails -eq 0 ] && echo "all ok" || echo "$fails failed"
exit $((fails > 0))
