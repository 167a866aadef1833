#!/usr/bin/env bash
# examples/chapter3.ipynb end to end (issue 19): executed headless by nbclient
# (python3 kernel, the package from SRC/python, a small corpus for its GPT);
# every tensor it prints equals the table `attn chapter3` prints at that step
# (with the dropout stream this PyTorch draws); exported to HTML by nbconvert
# and opened in headless Chromium, where the inline attention view's script
# runs (data-ready), with no page or console errors, one model-view cell per
# layer x head, and a screenshot of it that is not blank. An error injected
# into the view must be caught by the same checks. Checks: notebook_check.py.
#   bash tests/python/notebook.sh ATTN LIBATTN SRC
set -u
ATTN=$1 LIB=$2 SRC=$3
PY3=/usr/bin/python3  # for the checks; PY (pyenv) runs what loads libattn
CHECK="$SRC/tests/python/notebook_check.py"
. "$SRC/tests/support/lib.sh"
if ! $PY3 -c 'import nbclient, nbconvert, ipykernel, torch' 2> /dev/null || ! command -v chromium > /dev/null; then
  echo "SKIP: the notebook test needs python3-nbclient, jupyter-nbconvert, python3-ipykernel," \
    "python3-torch and chromium (scripts/install-deps.sh test)"
  exit 77
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/attn-notebook.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
for i in $(seq 1 80); do
  echo "ROMEO: To be, or not to be, that is the question; First Citizen: speak $((i % 9))."
  echo "JULIET: What's in a name? that which we call a rose by any other word would smell as sweet!"
done > "$tmp/corpus.txt"
# The kernel's files (connection file, IPython profile) stay in $tmp.
. "$SRC/tests/python/pyenv.sh"
pyenv "$SRC" "$LIB"
export ATTN_NOTEBOOK_DATA="$tmp/corpus.txt" JUPYTER_RUNTIME_DIR="$tmp/jupyter" \
  IPYTHONDIR="$tmp/ipython" PYDEVD_DISABLE_FILE_VALIDATION=1
mkdir -p "$tmp/work"

"${PY[@]}" "$CHECK" run "$SRC/examples/chapter3.ipynb" "$tmp/out.ipynb" "$tmp/work" > "$tmp/run.log" 2>&1 &&
  ok "the notebook runs headless: $(tail -1 "$tmp/run.log")" ||
  { bad "the notebook: $(grep -v '^0.00s' "$tmp/run.log" | tail -15)"; exit 1; }
stream=$($PY3 "$CHECK" stream)
"$ATTN" chapter3 --rng "$stream" > "$tmp/chapter3.txt" || bad "attn chapter3 --rng $stream"
$PY3 "$CHECK" tables "$tmp/out.ipynb" "$tmp/chapter3.txt" && ok "its tensors == attn chapter3 --rng $stream" ||
  bad "its tensors differ from attn chapter3's"

$PY3 "$CHECK" html "$tmp/out.ipynb" "$tmp/page.html" "$tmp/checked.html" && ok "nbconvert exports it" ||
  { bad "nbconvert"; exit 1; }
grep -qiE '(src|href)="(https?:)?//' "$tmp/page.html" && bad "the exported page loads something from the network" ||
  ok "the exported page loads nothing from the network"
chrome() {
  timeout 120 chromium --headless --no-sandbox --disable-gpu --disable-background-networking \
    --no-first-run --user-data-dir="$tmp/profile" "$@"
}
# The model is 2 layers x 4 heads (the notebook's config): 8 model-view cells.
chrome --enable-logging=stderr --v=0 --dump-dom "file://$tmp/checked.html" > "$tmp/dom.html" 2> "$tmp/chrome.err"
$PY3 "$CHECK" dom "$tmp/dom.html" 8 && ok "browser: the inline view's script ran, 2 x 4 cells, no page errors" ||
  bad "browser DOM"
if grep -E 'CONSOLE' "$tmp/chrome.err" > "$tmp/console.txt"; then
  bad "console messages: $(head -3 "$tmp/console.txt")"
else
  ok "browser: no console messages"
fi
chrome --hide-scrollbars --window-size=1200,900 --screenshot="$tmp/shot.png" "file://$tmp/checked.html" > /dev/null 2>&1
$PY3 "$SRC/scripts/viz_check.py" png "$tmp/shot.png" && ok "browser: the inline view's screenshot is not blank" ||
  bad "blank screenshot"
# The same checks catch a broken view (so they can fail).
sed 's/&quot;use strict&quot;;/\&quot;use strict\&quot;; noSuchFunction();/' "$tmp/checked.html" > "$tmp/broken.html"
chrome --enable-logging=stderr --v=0 --dump-dom "file://$tmp/broken.html" > "$tmp/dom2.html" 2> "$tmp/chrome2.err"
! $PY3 "$CHECK" dom "$tmp/dom2.html" 8 > /dev/null && grep -q 'CONSOLE.*noSuchFunction' "$tmp/chrome2.err" &&
  ok "browser: an error injected into the view is caught by both checks" ||
  bad "an injected error in the inline view went unnoticed"
echo "notebook: $([ "$fails" -eq 0 ] && echo all checks passed || echo "$fails check(s) failed")"
[ "$fails" -eq 0 ]
