#!/usr/bin/env bash
# attn viz and attn chapter3 --figures end to end, on a checkpoint trained
# here (tiny config, 60 steps, ~2 s): the page in a real headless Chromium
# (script ran, no console errors, one model-view cell per layer x head, a
# screenshot that is not blank; a page with an injected error must be caught
# by the same checks), its JSON attention against the book's GPTModel in
# PyTorch (<= 1e-5), generated text == `attn generate`'s, SVGs parse as XML,
# chapter-3 figures == the printed tables, and the bad inputs (clear error,
# non-zero exit, no file). Checks live in scripts/viz_check.py. Issue 17:
# the page says that position i+1 was chosen from position i's output and a
# click on a generated character shows that query; one colour scale with a
# legend; a prompt longer than the context keeps its last characters (as
# attn generate) with a note; --out x.svg is refused; `attn viz DIR`.
# Usage: bash tests/viz_cli.sh <path-to-attn> <source-dir>
set -u
ATTN=$1
SRC=$2
PY=/usr/bin/python3
CHECK="$SRC/scripts/viz_check.py"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "${BASH_SOURCE[0]}")/support/lib.sh"

# The embedded page sources are up to date with src/viz/page/.
"$PY" "$SRC/scripts/gen_viz_page.py" "$tmp/page.inc" && cmp -s "$tmp/page.inc" "$SRC/src/viz/page.inc" &&
  ok "src/viz/page.inc matches src/viz/page/" || bad "src/viz/page.inc is stale: run scripts/gen_viz_page.py"

make_corpus "$tmp/corpus.txt" 150
# 3 heads, context 80 (a 70-character sequence spans two 64-row tiles).
cat > "$tmp/cfg.json" <<'JSON'
{"context_length": 80, "emb_dim": 48, "n_heads": 3, "n_layers": 2, "drop_rate": 0.1,
 "batch_size": 8, "max_steps": 60, "eval_interval": 60, "eval_iters": 1,
 "log_interval": 20, "warmup_steps": 5}
JSON
"$ATTN" train --data "$tmp/corpus.txt" --config "$tmp/cfg.json" --threads 1 --out "$tmp/ck" \
  > /dev/null 2> "$tmp/train.err" || { bad "training the test checkpoint: $(cat "$tmp/train.err")"; exit 1; }
CK=$tmp/ck
PROMPT="First Citizen: before we proceed any further, hear me speak"

# 1. The page, and the same sampled text as attn generate.
"$ATTN" viz --checkpoint "$CK" --prompt "$PROMPT" --generate 11 --seed 7 --out "$tmp/page.html" \
  2> "$tmp/viz.err" && [ -s "$tmp/page.html" ] && ok "attn viz writes the page" ||
  bad "attn viz: $(cat "$tmp/viz.err")"
"$PY" "$CHECK" page "$tmp/page.html" && ok "page JSON has the documented shape" || bad "page JSON"
gen=$("$ATTN" generate --checkpoint "$CK" --prompt "$PROMPT" --max-new-tokens 11 --seed 7 2>/dev/null)
page_text=$("$PY" -c 'import sys,re,json; s=open(sys.argv[1]).read(); print("".join(json.loads(re.search(r"id=\"attn-data\">(.*?)</script>", s, re.S).group(1))["tokens"]))' "$tmp/page.html")
[ "$gen" = "$page_text" ] && ok "generated characters == attn generate's (same seed)" ||
  bad "page text '$page_text' vs generate '$gen'"
grep -qiE '(src|href)="(https?:)?//' "$tmp/page.html" && bad "the page loads something from the network" ||
  ok "no external scripts, styles or fonts"
"$ATTN" viz "$CK" --prompt "$PROMPT" --generate 11 --seed 7 --out "$tmp/page2.html" 2> /dev/null &&
  cmp -s "$tmp/page.html" "$tmp/page2.html" && ok "attn viz DIR == attn viz --checkpoint DIR" ||
  bad "attn viz DIR: a different page"

# A prompt longer than the context keeps its last characters, as attn
# generate does (the last 80), with a note on stderr and in the page.
data() { "$PY" -c 'import sys,re,json; s=open(sys.argv[1]).read(); d=json.loads(re.search(r"id=\"attn-data\">(.*?)</script>", s, re.S).group(1)); print(d[sys.argv[2]] if sys.argv[2] != "text" else "".join(d["tokens"]))' "$@"; }
long2="$PROMPT and $PROMPT" # 123 characters
"$ATTN" viz --checkpoint "$CK" --prompt "$long2" --out "$tmp/long.html" 2> "$tmp/long.err"; rc=$?
[ $rc -eq 0 ] && [ "$(data "$tmp/long.html" text)" = "${long2: -80}" ] && [ "$(data "$tmp/long.html" prompt_dropped)" = 43 ] &&
  grep -q "note: the prompt has 123 characters; the model reads at most 80 (context_length), so it keeps the last 80, as attn generate does" "$tmp/long.err" &&
  ok "a 123-character prompt keeps its last 80, with a note: $(cat "$tmp/long.err" | head -1)" ||
  bad "long prompt: rc=$rc $(cat "$tmp/long.err")"
# --generate N promises prompt + N fit in context_length (issue 31 item 16):
# a prompt that leaves no room for N is refused, nothing written.
"$ATTN" viz --checkpoint "$CK" --prompt "$long2" --generate 30 --seed 7 --out "$tmp/longg.html" 2> "$tmp/longg.err"; rc=$?
[ $rc -eq 2 ] && [ ! -e "$tmp/longg.html" ] &&
  grep -q "the prompt (123 characters) + --generate 30 must fit in the model's context_length 80" "$tmp/longg.err" &&
  ok "a 123-character prompt with --generate 30 is refused (exit 2)" ||
  bad "long prompt + generate: rc=$rc $(cat "$tmp/longg.err")"
"$PY" "$CHECK" page "$tmp/long.html" > /dev/null && ok "the shortened page's JSON is consistent" || bad "long page JSON"

# 2. Weights against PyTorch's book GPTModel on the same checkpoint.
if "$PY" -c 'import torch' 2>/dev/null; then
  "$PY" "$CHECK" torch "$tmp/page.html" "$CK" && ok "attention == PyTorch GPTModel's (<= 1e-5)" ||
    bad "attention vs PyTorch"
else
  echo "skip - no torch for the PyTorch comparison"
fi

# 3. A real browser: Chromium headless runs the page's script.
chrome() {
  timeout 120 chromium --headless --no-sandbox --disable-gpu --disable-background-networking \
    --no-first-run --user-data-dir="$tmp/profile" "$@"
}
if command -v chromium > /dev/null; then
  chrome --enable-logging=stderr --v=0 --dump-dom "file://$tmp/page.html#layer=1&query=45&detail=1,2" \
    > "$tmp/dom.html" 2> "$tmp/chrome.err"
  "$PY" "$CHECK" dom "$tmp/dom.html" 6 1 45 &&
    ok "browser: script ran, 2 x 3 model-view cells, head view (one colour scale) and large view drawn, i -> i+1 explained, no page errors" ||
    bad "browser DOM"
  # A click on generated character 62's row shows query 61, whose output chose it.
  cp "$tmp/page.html" "$tmp/click.html"
  printf '<script>document.querySelector("#gen tr[data-pos=\\"62\\"]").click();</script>\n' >> "$tmp/click.html"
  chrome --dump-dom "file://$tmp/click.html#layer=1" > "$tmp/dom-click.html" 2> /dev/null
  "$PY" "$CHECK" why "$tmp/dom-click.html" 62 1 && ok "browser: a generated character's row shows the query whose output chose it" ||
    bad "browser: the generated row click"
  chrome --dump-dom "file://$tmp/long.html#layer=0&query=70&detail=0,0" > "$tmp/dom-long.html" 2> /dev/null
  "$PY" "$CHECK" dom "$tmp/dom-long.html" 6 0 70 && ok "browser: the shortened page shows its note" ||
    bad "browser: the shortened page"
  if grep -E 'CONSOLE' "$tmp/chrome.err" > "$tmp/console.txt"; then
    bad "console messages: $(head -3 "$tmp/console.txt")"
  else
    ok "browser: no console messages"
  fi
  # The same checks catch a broken page (so they can fail).
  sed 's/"use strict";/"use strict"; console.error("injected"); noSuchFunction();/' "$tmp/page.html" > "$tmp/broken.html"
  chrome --enable-logging=stderr --v=0 --dump-dom "file://$tmp/broken.html" > "$tmp/dom2.html" 2> "$tmp/chrome2.err"
  ! "$PY" "$CHECK" dom "$tmp/dom2.html" 6 > /dev/null && grep -q 'CONSOLE.*noSuchFunction' "$tmp/chrome2.err" &&
    ok "browser: an injected error is caught by both checks" || bad "an injected page error went unnoticed"
  chrome --hide-scrollbars --window-size=1200,1000 --screenshot="$tmp/shot.png" \
    "file://$tmp/page.html#query=45&detail=1,2" > /dev/null 2>&1
  "$PY" "$CHECK" png "$tmp/shot.png" && ok "browser: the screenshot is not blank" || bad "blank screenshot"
else
  bad "chromium is not installed (scripts/install-deps.sh test)"
fi

# 4. One head as SVG; the chapter-3 figures.
"$ATTN" viz --checkpoint "$CK" --prompt "$PROMPT" --generate 11 --seed 7 --layer 1 --head 2 \
  --svg "$tmp/head.svg" 2> /dev/null && "$PY" "$CHECK" svg "$tmp/head.svg" 70 70 "$tmp/page.html" 1 2 &&
  ok "head SVG parses, its cells == the page's layer 1 head 2" || bad "head SVG"
"$ATTN" chapter3 --figures "$tmp/figs" > "$tmp/ch3.txt" 2> "$tmp/ch3.err" || bad "chapter3 --figures: $(cat "$tmp/ch3.err")"
"$ATTN" chapter3 | cmp -s - "$tmp/ch3.txt" && ok "chapter3 prints the same with --figures" ||
  bad "--figures changes the printed walk"
n=0
for f in "$tmp"/figs/*.svg; do "$PY" "$CHECK" svg "$f" 0 0 > /dev/null 2>&1; n=$((n + 1)); done
"$PY" -c 'import sys, xml.etree.ElementTree as ET; [ET.parse(f) for f in sys.argv[1:]]' "$tmp"/figs/*.svg &&
  ok "all $n chapter-3 figures parse as XML" || bad "a chapter-3 figure is not XML"
"$PY" "$CHECK" figures "$tmp/ch3.txt" "$tmp/figs" && ok "figure values == the chapter's tables" ||
  bad "figure values"

# 5. Bad inputs: clear message, non-zero exit, nothing written.
expect_fail() { # rc-wanted message-regex description -- args...
  local want=$1 re=$2 what=$3
  shift 4
  rm -f "$tmp/out.html" "$tmp/out.svg"
  "$ATTN" viz "$@" > /dev/null 2> "$tmp/err"
  local rc=$?
  if [ $rc -eq "$want" ] && grep -qE -- "$re" "$tmp/err" && [ ! -e "$tmp/out.html" ] && [ ! -e "$tmp/out.svg" ]; then
    ok "$what: exit $rc, '$(head -1 "$tmp/err")'"
  else
    bad "$what: rc=$rc (want $want), stderr '$(cat "$tmp/err")'"
  fi
}
expect_fail 1 "'Z'.*position 3|position 3.*'Z'" "character outside the vocabulary" -- \
  --checkpoint "$CK" --prompt "FirZt" --out "$tmp/out.html"
expect_fail 2 "--prompt TEXT must not be an empty string" "empty prompt" -- --checkpoint "$CK" --prompt "" --out "$tmp/out.html"
expect_fail 2 "--generate must be an integer in \[0, 79\] \(below the model's context_length\), not '80'" "generate fills the context" -- \
  --checkpoint "$CK" --prompt "$PROMPT" --generate 80 --out "$tmp/out.html"
expect_fail 2 "--out writes the HTML page, not SVG: .*use --svg $tmp/out.svg --layer L --head H" "--out x.svg" -- \
  --checkpoint "$CK" --prompt "First" --out "$tmp/out.svg"
expect_fail 2 "--svg writes SVG, not HTML: for the page use --out $tmp/out.html" "--svg x.html" -- \
  --checkpoint "$CK" --prompt "First" --layer 0 --head 0 --svg "$tmp/out.html"
expect_fail 2 "--layer must be an integer in \[0, 1\] \(the model has 2 layers\), not '2'" "unknown layer" -- \
  --checkpoint "$CK" --prompt "First" --layer 2 --head 0 --svg "$tmp/out.svg" --out "$tmp/out.html"
expect_fail 2 "--head must be an integer in \[0, 2\] \(the model has 3 heads\), not '3'" "unknown head" -- \
  --checkpoint "$CK" --prompt "First" --layer 0 --head 3 --svg "$tmp/out.svg"
expect_fail 2 "--layer must be an integer in \[0, [0-9]+\], not '-1'" "negative layer" -- \
  --checkpoint "$CK" --prompt "First" --layer -1 --head 0 --svg "$tmp/out.svg"
expect_fail 2 "--svg needs --layer L and --head H" "--svg without a head" -- \
  --checkpoint "$CK" --prompt "First" --svg "$tmp/out.svg"
expect_fail 2 "nothing to write" "no output asked for" -- --checkpoint "$CK" --prompt "First"
expect_fail 1 "/nonexistent-dir" "unwritable --out" -- \
  --checkpoint "$CK" --prompt "First" --out /nonexistent-dir/out.html
expect_fail 1 "/nonexistent-dir" "unwritable --svg (the page is taken back)" -- \
  --checkpoint "$CK" --prompt "First" --out "$tmp/out.html" --layer 0 --head 0 --svg /nonexistent-dir/o.svg
expect_fail 1 "nothere" "missing checkpoint" -- --checkpoint "$tmp/nothere" --prompt "First" --out "$tmp/out.html"
touch "$tmp/afile"
"$ATTN" chapter3 --figures "$tmp/afile/sub" > /dev/null 2> "$tmp/err"
rc=$?
[ $rc -eq 1 ] && grep -q "figures" "$tmp/err" && ok "chapter3 --figures into an impossible directory: exit 1" ||
  bad "chapter3 --figures bad dir: rc=$rc $(cat "$tmp/err")"

[ $fails -eq 0 ] && echo "viz_cli: all passed" || echo "viz_cli: $fails failed"
exit $((fails > 0))
