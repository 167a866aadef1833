#!/usr/bin/env bash
# GPT-2's tokenizer in attn's models, end to end on a shrunken gpt2-124m
# (emb 32, 2 layers, 2 heads, context 32; vocab stays 50257): a run trains
# and checkpoints; stopped at step 3 and resumed to 5 it is the straight
# 5-step run byte for byte; the model file carries the tokenizer (metadata,
# no extra tensors), so info, generate and viz run with no vocabulary files
# anywhere; the text they print is valid UTF-8; and the bad inputs (missing,
# truncated or duplicated vocabulary files, a corrupt stored tokenizer, a
# vocabulary that disagrees with the embedding) fail saying so. PyTorch's
# load of such a file: tests/python/test_gpt2_model.py.
# Usage: bash tests/train_gpt2.sh <path-to-attn> <source-dir>
set -u
ATTN=$1
SRC=$2
PY=/usr/bin/python3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "${BASH_SOURCE[0]}")/support/lib.sh"

VOCAB=
for d in "$SRC/data/gpt2" "$SRC/../shared/data/gpt2"; do
  [ -f "$d/encoder.json" ] && [ -f "$d/vocab.bpe" ] && VOCAB=$(cd "$d" && pwd) && break
done
[ -n "$VOCAB" ] || { echo "SKIP: no GPT-2 vocabulary in data/gpt2 (scripts/get-data.sh gpt2)"; exit 77; }

# ~9k characters: play lines, non-ASCII text and the end-of-text token.
make_corpus "$tmp/corpus.txt" 60
for i in 1 2 3 4 5 6; do printf 'Café déjà vu — naïve “quotes” %d.\n<|endoftext|>\n' "$i"; done >> "$tmp/corpus.txt"
echo '{"emb_dim": 32, "n_layers": 2, "n_heads": 2, "context_length": 32}' > "$tmp/small.json"
train() { ATTN_GPT2_DIR=$VOCAB "$ATTN" train --preset gpt2-124m --config "$tmp/small.json" \
  --data "$tmp/corpus.txt" --threads 1 --steps 5 "$@"; }
mkdir "$tmp/elsewhere" # a folder without data/gpt2: what runs there needs the checkpoint only
nofiles() { (cd "$tmp/elsewhere" && ATTN_GPT2_DIR="$tmp/none" "$ATTN" "$@"); }

# 1. Train, stop at 3, resume to 5: the same files as the straight run.
train --out "$tmp/ref" > "$tmp/ref.log" 2> "$tmp/ref.err" && grep -q "vocab 50257" "$tmp/ref.log" "$tmp/ref.err" &&
  ok "gpt2-124m (shrunk) trains and checkpoints" || bad "training: $(cat "$tmp/ref.err")"
train --out "$tmp/res" --interrupt-after 3 > /dev/null 2>&1
[ "$(readlink "$tmp/res/latest")" = ckpt-3 ] &&
  ok "interrupted at step 3" || bad "no step-3 checkpoint"
nofiles train --out "$tmp/res" --resume --threads 1 > /dev/null 2> "$tmp/res.err" ||
  bad "resume without vocabulary files: $(cat "$tmp/res.err")"
same=1
for f in model.safetensors train_state.safetensors loss.csv; do
  cmp -s "$tmp/ref/$f" "$tmp/res/$f" || { same=0; bad "resumed $f differs from the straight run's"; }
done
[ $same = 1 ] && ok "3 steps + resume to 5 == 5 steps, byte for byte (model, state, losses)"

# 2. The model file carries the tokenizer as metadata, and only weights as tensors.
"$PY" - "$tmp/ref/model.safetensors" "$VOCAB" << 'PY' && ok "model.safetensors: tokenizer gpt2 + the two files' text, no extra tensors" || bad "checkpoint metadata"
import json, struct, sys
b = open(sys.argv[1], 'rb').read()
h = json.loads(b[8:8 + struct.unpack('<Q', b[:8])[0]])
m = h.pop('__metadata__')
assert m['tokenizer'] == 'gpt2' and 'vocabulary' not in m, sorted(m)
assert m['gpt2_encoder_json'] == open(sys.argv[2] + '/encoder.json', encoding='utf-8').read()
assert m['gpt2_vocab_bpe'] == open(sys.argv[2] + '/vocab.bpe', encoding='utf-8').read()
assert h['tok_emb.weight']['shape'] == [50257, 32] and 'out_head.weight' not in h  # tied: tok_emb's
assert all(k.startswith(('tok_emb', 'pos_emb', 'trf_blocks.', 'final_norm', 'out_head')) for k in h), sorted(h)
PY

# 3. info, generate and viz with no vocabulary files.
nofiles info "$tmp/ref" > "$tmp/info.txt" 2>&1 && grep -q '^tokenizer *gpt2$' "$tmp/info.txt" &&
  grep -q '^vocabulary *50257 tokens' "$tmp/info.txt" &&
  ok "info: tokenizer gpt2, 50257 tokens" || bad "info: $(cat "$tmp/info.txt")"
nofiles info "$tmp/ref" --json > "$tmp/info.json" 2>&1 &&
  "$PY" -c 'import json,sys; j=json.load(open(sys.argv[1])); assert j["tokenizer"] == "gpt2" and j["vocab_size"] == 50257 and "vocabulary" not in j' "$tmp/info.json" &&
  ok "info --json: tokenizer, vocab_size" || bad "info --json: $(cat "$tmp/info.json")"
gen() { nofiles generate "$tmp/ref" --max-new-tokens 40 --seed 5 --prompt "Café <|endoftext|> First" "$@"; }
gen > "$tmp/g1.txt" 2> "$tmp/g.err" && ok "generate samples" || bad "generate: $(cat "$tmp/g.err")"
"$PY" -c 'import sys; t = open(sys.argv[1], "rb").read().decode("utf-8"); assert t.startswith("Café <|endoftext|> First"), t' "$tmp/g1.txt" &&
  ok "generate prints valid UTF-8, the prompt's <|endoftext|> as text" || bad "generate output is not UTF-8 or lost the prompt"
gen --allow-special > "$tmp/g2.txt" 2>/dev/null && ! cmp -s "$tmp/g1.txt" "$tmp/g2.txt" &&
  ok "generate --allow-special: <|endoftext|> is the token (another text)" || bad "generate --allow-special"
nofiles viz "$tmp/ref" --prompt "First Citizen: café" --generate 5 --out "$tmp/v.html" --svg "$tmp/v.svg" --layer 0 --head 1 2> "$tmp/viz.err" &&
  grep -q "(9 tokens, generated ones included)" "$tmp/v.svg" &&
  "$PY" - "$tmp/v.html" << 'PY' && ok "viz: the page's tokens are GPT-2's" || bad "viz: $(cat "$tmp/viz.err")"
import json, re, sys
page = open(sys.argv[1], encoding='utf-8').read()
d = json.loads(re.search(r'<script type="application/json" id="attn-data">(.*?)</script>', page, re.S).group(1))
assert d['config']['vocab_size'] == 50257 and d['unit'] == 'tokens'
assert ''.join(d['tokens'][:d['n_prompt']]) == 'First Citizen: café', d['tokens']
assert d['token_ids'][:3] == [5962, 22307, 25] and len(d['generated']) == 5, d['token_ids']
PY

# 4. Bad vocabulary files and bad checkpoints.
expect() { # code, message fragment, name, command...
  local code=$1 msg=$2 name=$3
  shift 3
  "$@" > "$tmp/out" 2> "$tmp/err"
  local rc=$?
  [ $rc = "$code" ] && grep -qF -- "$msg" "$tmp/err" && ok "$name" ||
    bad "$name: exit $rc, $(head -c 400 "$tmp/err")"
}
fresh() { # vocabulary dir, config: a fresh run in a folder without data/gpt2
  (cd "$tmp/elsewhere" && ATTN_GPT2_DIR=$1 "$ATTN" train --preset gpt2-124m --config "$2" \
    --data "$tmp/corpus.txt" --threads 1 --steps 1 --out "$tmp/x$RANDOM")
}
# A folder named by $ATTN_GPT2_DIR is the only place looked at (attn/tokenizer.h).
expect 1 'not found ($ATTN_GPT2_DIR: /nonexistent-attn-vocab)' "missing files name the rule" \
  fresh /nonexistent-attn-vocab "$tmp/small.json"
grep -qF 'scripts/get-data.sh gpt2' "$tmp/err" && ok "... and scripts/get-data.sh gpt2" || bad "no get-data hint"
mkdir "$tmp/trunc" "$tmp/dup"
cp "$VOCAB/encoder.json" "$tmp/trunc/" && head -n 20000 "$VOCAB/vocab.bpe" > "$tmp/trunc/vocab.bpe"
expect 1 "vocab.bpe" "truncated vocab.bpe is refused" fresh "$tmp/trunc" "$tmp/small.json"
cp "$VOCAB/encoder.json" "$tmp/dup/" && { cat "$VOCAB/vocab.bpe"; sed -n 2p "$VOCAB/vocab.bpe"; } > "$tmp/dup/vocab.bpe"
expect 1 "twice" "a duplicate merge is refused" fresh "$tmp/dup" "$tmp/small.json"
echo '{"emb_dim": 32, "n_layers": 2, "n_heads": 2, "context_length": 32, "vocab_size": 100}' > "$tmp/v100.json"
expect 1 "does not match the gpt2 tokenizer's 50257 tokens" "config vocab_size 100 with gpt2" \
  fresh "$VOCAB" "$tmp/v100.json"
meta() { # src dst key=value...: a copy of model file src with metadata changed
  "$PY" - "$@" << 'PY'
import json, struct, sys
b = open(sys.argv[1], 'rb').read()
n = struct.unpack('<Q', b[:8])[0]
h = json.loads(b[8:8 + n])
for kv in sys.argv[3:]:
    k, v = kv.split('=', 1)
    m = h['__metadata__']
    if k == 'vocab_bpe_cut': m['gpt2_vocab_bpe'] = m['gpt2_vocab_bpe'][:int(v)]
    elif k == 'vocab_size': c = json.loads(m['config']); c['vocab_size'] = int(v); m['config'] = json.dumps(c)
    elif v == '': m.pop(k)
    else: m[k] = v
hb = json.dumps(h).encode()
hb += b' ' * (-len(hb) % 8)
open(sys.argv[2], 'wb').write(struct.pack('<Q', len(hb)) + hb + b[8 + n:])
PY
}
M=$tmp/ref/model.safetensors
meta "$M" "$tmp/cut.safetensors" vocab_bpe_cut=200000
expect 1 "cut.safetensors: bad gpt2 tokenizer metadata" "a truncated stored vocabulary (generate)" \
  nofiles generate "$tmp/cut.safetensors" --max-new-tokens 2
expect 1 "cut.safetensors: bad gpt2 tokenizer metadata" "... (info)" nofiles info "$tmp/cut.safetensors"
meta "$M" "$tmp/nofile.safetensors" gpt2_encoder_json=
expect 1 "tokenizer gpt2 but no gpt2_encoder_json/gpt2_vocab_bpe metadata" "a stored tokenizer without its files" \
  nofiles generate "$tmp/nofile.safetensors"
meta "$M" "$tmp/kind.safetensors" tokenizer=gpt3
expect 1 "unknown tokenizer 'gpt3'" "an unknown tokenizer kind" nofiles info "$tmp/kind.safetensors"
meta "$M" "$tmp/rows.safetensors" vocab_size=50256
expect 1 "the gpt2 tokenizer has 50257 tokens but the config says vocab_size 50256 (the embedding's rows)" \
  "vocabulary / embedding mismatch" nofiles viz "$tmp/rows.safetensors" --prompt "a" --out "$tmp/r.html"
[ -e "$tmp/r.html" ] && bad "viz wrote a page for a bad checkpoint"

# 6. The run as the book's model.pth (attn export --format book): generate
#    takes it with GPT-2's vocabulary files (a .pth carries no tokenizer) and
#    greedy text equals the run's own; without the files it says where they are.
"$ATTN" export "$tmp/ref" "$tmp/book.pth" --format book > /dev/null 2> "$tmp/exp.err" &&
  ok "export --format book: model.pth" || bad "export book: $(cat "$tmp/exp.err")"
g_run=$(nofiles generate "$tmp/ref" --max-new-tokens 12 --temperature 0 --prompt "First" 2> /dev/null)
g_pth=$(cd "$tmp/elsewhere" && ATTN_GPT2_DIR=$VOCAB "$ATTN" generate "$tmp/book.pth" --n-heads 2 \
  --max-new-tokens 12 --temperature 0 --prompt "First" 2> "$tmp/gp.err")
[ -n "$g_run" ] && [ "$g_run" = "$g_pth" ] && ok "generate on the book's .pth == on the run (greedy)" ||
  bad "generate .pth: '$g_pth' vs '$g_run' $(cat "$tmp/gp.err")"
expect 1 "scripts/get-data.sh gpt2" "a .pth without GPT-2's vocabulary files" \
  nofiles generate "$tmp/book.pth" --n-heads 2 --max-new-tokens 2

[ $fails = 0 ] && echo "all passed" || { echo "$fails failed"; exit 1; }
