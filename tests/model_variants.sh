#!/usr/bin/env bash
# The model variant keys on the command line (issue 20): a run of a variant
# trains, `attn info` (text and --json) and `attn train --dry-run` show every
# variant key, the announcement names what differs from the book's model;
# --device cuda refuses a variant by name (exit 2, nothing made), an
# attention-key model trains and generates past its context with a window; a resume or
# --init-from with another variant is refused naming the key; the checkpoint
# loads into the PyTorch variant model with attn's logits (when torch is
# there).
#   bash tests/model_variants.sh ATTN SRCDIR
set -u
ATTN=$1
src=$2
tmp=$(mktemp -d "${TMPDIR:-/tmp}/attn-model-variants.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "${BASH_SOURCE[0]}")/support/lib.sh"

make_corpus "$tmp/c.txt" 40
cat > "$tmp/v.json" <<'JSON'
{"context_length": 12, "emb_dim": 24, "n_heads": 3, "n_layers": 2, "drop_rate": 0.1,
 "norm": "rmsnorm", "act": "swiglu", "tie_weights": true, "pos_emb": "none",
 "batch_size": 4, "max_steps": 10, "eval_interval": 5, "eval_iters": 1, "warmup_steps": 2}
JSON
if "$ATTN" train --data "$tmp/c.txt" --config "$tmp/v.json" --out "$tmp/run" --threads 1 \
  > "$tmp/train.out" 2> "$tmp/train.err"; then
  ok "a variant trains"
else
  bad "variant training failed: $(tail -3 "$tmp/train.err")"
fi
grep -q "attn train: not the book's GPTModel: pos_emb none, norm rmsnorm, act swiglu, tie_weights true$" \
  "$tmp/train.err" && ok "the run names its variant" || bad "announcement: $(cat "$tmp/train.err")"

want="pos_emb none, n_kv_heads 3, window 0, norm rmsnorm, act swiglu, qk_norm false, softcap 0, tie_weights true"
"$ATTN" info "$tmp/run" > "$tmp/info.txt" 2>&1
grep -qx "variant        $want" "$tmp/info.txt" && ok "info shows every variant key" ||
  bad "info: $(cat "$tmp/info.txt")"
"$ATTN" info --json "$tmp/run" > "$tmp/info.json"
/usr/bin/python3 - "$tmp/info.json" <<'PY' && ok "info --json: the keys, and the variant's parameter count" || bad "info --json"
import json, sys
j = json.load(open(sys.argv[1]))
m = j["model"]
assert {k: m[k] for k in ("pos_emb", "n_kv_heads", "window", "norm", "act", "qk_norm",
                          "softcap", "tie_weights")} == {
    "pos_emb": "none", "n_kv_heads": 3, "window": 0, "norm": "rmsnorm", "act": "swiglu",
    "qk_norm": False, "softcap": 0, "tie_weights": True}, m
V, E, L = m["vocab_size"], m["emb_dim"], m["n_layers"]
H = 8 * -(-E // 3)  # swiglu's hidden width
# tok_emb (tied head, no pos_emb); per block W_q/k/v, out_proj + bias,
# layers.0 (2H, E) + bias, layers.2 (E, H) + bias, two RMSNorm scales; final scale.
block = 3 * E * E + E * E + E + 2 * H * E + 2 * H + H * E + E + 2 * E
assert j["parameters"] == V * E + L * block + E, (j["parameters"], V * E + L * block + E)
PY

"$ATTN" train --out "$tmp/run" --resume --dry-run > "$tmp/dry.txt" 2>&1
grep -qx "variant     $want" "$tmp/dry.txt" && grep -q '"norm":"rmsnorm","act":"swiglu","tie_weights":true}' "$tmp/dry.txt" &&
  ok "--dry-run shows the variant" || bad "dry-run: $(cat "$tmp/dry.txt")"
"$ATTN" train --data "$tmp/c.txt" --out "$tmp/book" --dry-run > "$tmp/dry2.txt" 2>&1
grep -qx "variant     pos_emb learned, n_kv_heads 4, window 0, norm layernorm, act gelu, qk_norm false, softcap 0, tie_weights false" \
  "$tmp/dry2.txt" && ! grep -q '"norm"' "$tmp/dry2.txt" && ok "--dry-run of the book's model" ||
  bad "book dry-run: $(cat "$tmp/dry2.txt")"

# expect RC TEXT WHAT -- ARGS: exit status RC and TEXT in stderr.
expect() {
  local rc=$1 text=$2 what=$3
  shift 4
  "$ATTN" "$@" > /dev/null 2> "$tmp/err"
  local got=$?
  if [ "$got" -eq "$rc" ] && grep -qF -- "$text" "$tmp/err"; then ok "$what"; else bad "$what: rc $got: $(cat "$tmp/err")"; fi
}
echo '{"context_length": 12, "emb_dim": 24, "n_heads": 3, "n_layers": 1, "norm": "rmsnorm"}' > "$tmp/rms.json"
expect 2 "attn train: --device cuda: norm rmsnorm is not on the cuda engine yet" \
  "train --device cuda refuses a variant" -- train --data "$tmp/c.txt" --config "$tmp/rms.json" \
  --out "$tmp/gpu" --device cuda
[ ! -e "$tmp/gpu" ] && ok "... and makes no folder" || bad "the refused run left $tmp/gpu"
expect 2 "attn generate: --device cuda: pos_emb none is not on the cuda engine yet" \
  "generate --device cuda refuses a variant" -- generate "$tmp/run" --device cuda --prompt First
# The attention keys: trained and sampled on the CPU, refused by name on cuda.
echo '{"context_length": 12, "emb_dim": 24, "n_heads": 4, "n_layers": 1, "pos_emb": "rope",
  "n_kv_heads": 2, "window": 4, "qk_norm": true, "softcap": 30}' > "$tmp/rope.json"
expect 2 "attn train: --device cuda: pos_emb rope is not on the cuda engine yet" \
  "train --device cuda refuses rope by name" -- train --data "$tmp/c.txt" --config "$tmp/rope.json" \
  --out "$tmp/rope-gpu" --device cuda
"$ATTN" train --data "$tmp/c.txt" --config "$tmp/rope.json" --out "$tmp/rope" --steps 3 > "$tmp/rope.txt" 2>&1 &&
  ok "a rope + grouped-query + window + qk_norm + softcap model trains" || bad "rope train: $(cat "$tmp/rope.txt")"
"$ATTN" info "$tmp/rope" | grep -q "pos_emb rope, n_kv_heads 2, window 4" &&
  ok "info shows the attention keys" || bad "rope info: $("$ATTN" info "$tmp/rope" 2>&1)"
"$ATTN" viz "$tmp/rope" --prompt "First Citizen" --layer 0 --head 1 --svg "$tmp/rope.svg" > /dev/null 2>&1 &&
  grep -q "<svg" "$tmp/rope.svg" && ok "viz draws a variant's attention" || bad "rope viz: $("$ATTN" viz "$tmp/rope" --prompt First --layer 0 --head 1 --svg "$tmp/rope.svg" 2>&1)"
# A window and no learned table: the KV ring runs past context_length 12.
"$ATTN" generate "$tmp/rope" --prompt "First" --max-new-tokens 40 --seed 3 > "$tmp/rope-gen.txt" 2> "$tmp/rope-gen.err" &&
  [ "$(wc -c < "$tmp/rope-gen.txt")" -ge 45 ] && ok "a windowed model generates past its context" ||
  bad "rope generate: $(cat "$tmp/rope-gen.err")"
echo '{"act": "tanh"}' > "$tmp/tanh.json"
expect 2 "config key 'act' must be one of gelu, relu2, swiglu (got \"tanh\")" "a bad choice names the choices" \
  -- train --data "$tmp/c.txt" --config "$tmp/tanh.json" --out "$tmp/tanh"

sed 's/"act": "swiglu"/"act": "relu2"/' "$tmp/v.json" > "$tmp/v2.json"
expect 2 "act relu2, the checkpoint has swiglu" "resume with another variant names the key" \
  -- train --data "$tmp/c.txt" --config "$tmp/v2.json" --out "$tmp/run" --resume
echo '{"act": "gelu", "max_steps": 2}' > "$tmp/gelu.json"
expect 1 "its model has act swiglu, this run's gelu" "--init-from with another variant names the key" \
  -- train --data "$tmp/c.txt" --config "$tmp/gelu.json" --init-from "$tmp/run" --out "$tmp/ft"
"$ATTN" train --data "$tmp/c.txt" --init-from "$tmp/run" --out "$tmp/ft2" --steps 2 > /dev/null 2>&1 &&
  "$ATTN" info "$tmp/ft2" | grep -qx "variant        $want" && ok "--init-from keeps the checkpoint's variant" ||
  bad "init-from: $("$ATTN" info "$tmp/ft2" 2>&1)"
"$ATTN" generate "$tmp/run" --prompt "First" --max-new-tokens 20 --seed 3 > "$tmp/gen.txt" 2>&1 &&
  ok "generate samples a variant" || bad "generate: $(cat "$tmp/gen.txt")"

if /usr/bin/python3 -c 'import torch' 2> /dev/null; then
  /usr/bin/python3 - "$tmp" <<'PY'
import sys
import numpy as np
ids = np.random.default_rng(0).integers(0, 20, size=(3, 12))
np.save(sys.argv[1] + "/ids.npy", ids.astype(np.int64))
np.save(sys.argv[1] + "/tg.npy", np.roll(ids, -1, axis=1).astype(np.int64))
PY
  loss=$("$ATTN" forward gpt --checkpoint "$tmp/run" --input "$tmp/ids.npy" --targets "$tmp/tg.npy" \
    --output "$tmp/logits.npy" | sed -n 's/^loss: //p')
  /usr/bin/python3 "$src/scripts/check_checkpoint_torch.py" "$tmp/run" "$tmp/ids.npy" "$tmp/tg.npy" \
    "$tmp/logits.npy" "$loss" > "$tmp/torch.txt" 2>&1 &&
    ok "the checkpoint is PyTorch's variant model: $(cat "$tmp/torch.txt")" || bad "torch: $(cat "$tmp/torch.txt")"
else
  echo "skip - no torch for /usr/bin/python3"
fi

echo "model_variants: $fails failure(s)"
[ "$fails" -eq 0 ]
