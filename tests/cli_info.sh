#!/usr/bin/env bash
# attn info DIR (issue 9): on a tiny run trained here, the config, step, losses,
# vocabulary, parameter count and file sizes it prints match what the run wrote
# (loss.csv, the files' sizes, the corpus's characters, the book's parameter
# formula); --json parses; a weights-only file and bad paths behave.
#
#   bash tests/cli_info.sh ATTN SRCDIR
set -uo pipefail
ATTN=$1
tmp=$(mktemp -d "${TMPDIR:-/tmp}/attn-cli-info.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "${BASH_SOURCE[0]}")/support/lib.sh" # make_corpus; its own ok/bad below count
fails=0
n=0
ok() { n=$((n + 1)); echo "ok   $1"; }
bad() { n=$((n + 1)); fails=$((fails + 1)); echo "FAIL $1"; }

make_corpus "$tmp/corpus.txt" 60
cat > "$tmp/cfg.json" <<'JSON'
{"context_length": 16, "emb_dim": 32, "n_heads": 2, "n_layers": 2, "drop_rate": 0.1,
 "batch_size": 4, "max_steps": 12, "eval_interval": 5, "eval_iters": 2,
 "log_interval": 1, "warmup_steps": 2}
JSON
"$ATTN" train --data "$tmp/corpus.txt" --config "$tmp/cfg.json" --threads 1 --out "$tmp/run" \
  > "$tmp/train.log" 2>&1 || { bad "training failed: $(tail -3 "$tmp/train.log")"; exit 1; }

"$ATTN" info "$tmp/run" > "$tmp/info.txt" 2> "$tmp/err" && ok "info exits 0" || bad "info: $(cat "$tmp/err")"
grep -q "^step           12$" "$tmp/info.txt" && ok "text: step 12" || bad "text step: $(cat "$tmp/info.txt")"
grep -q "^parameters     28288 " "$tmp/info.txt" && ok "text: parameter count" || bad "text parameters"

"$ATTN" info --json "$tmp/run" > "$tmp/info.json" || bad "info --json failed"
python3 - "$tmp" <<'PY' && ok "--json agrees with loss.csv, the files and the config" || bad "--json fields"
import csv, json, os, sys
tmp = sys.argv[1]
j = json.load(open(f"{tmp}/info.json"))
m = j["model"]
V, C, E, L = m["vocab_size"], m["context_length"], m["emb_dim"], m["n_layers"]
assert (C, E, m["n_heads"], L, m["qkv_bias"]) == (16, 32, 2, 2, False), m
# The book's GPTModel: embeddings, per block W_q/W_k/W_v (no bias), out_proj,
# FF 4E with biases, two LayerNorms; final norm; out_head without bias.
block = 3 * E * E + (E * E + E) + (E * 4 * E + 4 * E) + (4 * E * E + E) + 2 * 2 * E
want = V * E + C * E + L * block + 2 * E + E * V
assert j["parameters"] == want, (j["parameters"], want)
text = open(f"{tmp}/corpus.txt").read()
assert j["vocabulary"] == "".join(sorted(set(text))), j["vocabulary"]
assert V == len(set(text))
assert j["step"] == 12 and j["state_step"] == 12
assert j["model_bytes"] == os.path.getsize(f"{tmp}/run/model.safetensors")
assert j["state_bytes"] == os.path.getsize(f"{tmp}/run/train_state.safetensors")
assert j["training"]["max_steps"] == 12 and j["training"]["batch_size"] == 4
rows = list(csv.DictReader(open(f"{tmp}/run/loss.csv")))
last = rows[-1]
assert j["last_step"]["step"] == int(last["step"]) == 12
assert abs(j["last_step"]["loss"] - float(last["loss"])) < 1e-5, (j["last_step"], last)
evals = [r for r in rows if r["val_loss"]]
assert j["evaluations"] == len(evals), (j["evaluations"], len(evals))
assert abs(j["last_eval"]["val_loss"] - float(evals[-1]["val_loss"])) < 1e-5
best = min(evals, key=lambda r: float(r["val_loss"]))
assert j["best_eval"]["step"] == int(best["step"])
assert j["corpus"].endswith("corpus.txt")
PY

"$ATTN" info "$tmp/run/model.safetensors" > "$tmp/w.txt" 2>&1 && grep -q "training state none" "$tmp/w.txt" &&
  grep -q "^parameters     28288 " "$tmp/w.txt" && ok "a model file alone: weights only" || bad "model file: $(cat "$tmp/w.txt")"
grep -q "^init           book$" "$tmp/info.txt" && ok "text: init book (the book's draws)" || bad "text init: $(cat "$tmp/info.txt")"
python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); assert j["model"]["init"] == "book" and j["training_history"] is True' "$tmp/info.json" &&
  ok "--json: init, training_history" || bad "--json init: $(cat "$tmp/info.json")"

# Another program's weights (HF, llm.c, the book's): tests/gpt2_preset.sh.

"$ATTN" info "$tmp/none" > /dev/null 2> "$tmp/err"
rc=$?
[ $rc -eq 1 ] && grep -q "$tmp/none" "$tmp/err" && ok "missing folder: exit 1 naming it" || bad "missing: rc=$rc $(cat "$tmp/err")"
"$ATTN" info "$tmp/corpus.txt" > /dev/null 2> "$tmp/err"
rc=$?
[ $rc -eq 1 ] && grep -q "corpus.txt" "$tmp/err" && ok "not a checkpoint: exit 1" || bad "not a checkpoint: rc=$rc $(cat "$tmp/err")"
"$ATTN" info "$tmp/run" "$tmp/run" > /dev/null 2> "$tmp/err"
[ $? -eq 2 ] && ok "two folders: usage error" || bad "two folders: $(cat "$tmp/err")"

echo "cli_info: $((n - fails)) of $n checks passed"
[ "$fails" -eq 0 ]
