#!/usr/bin/env bash
# attn train --task instruct and attn generate --instruction against the
# book's own run (tests/fixtures/book_ch67/ch07_test_mode.json, chapter 7's
# gpt_instruction_finetuning.py --test_mode): every printed loss within 1e-5
# (RUN/log.csv holds them at full precision), the lines the book prints
# (its two 50-token samples included), the ten test responses (the book's
# generate, greedy, eos_id=50256) and attn generate --instruction's; the
# same bytes at 1 and 2 threads; --mask-prompt's loss against exercise 7.2's
# collate in PyTorch; attn export of a LoRA run (the adapters merged: the
# exported files generate the run's tokens); bad inputs (an entry missing a
# field, not an array, empty): a clean error, exit 1 or 2, nothing written. The starting model
# is the book's GPTModel after torch.manual_seed(123), made here with
# PyTorch (skip 77 without it). Usage: bash finetune_instruct.sh <attn> <source-dir>
set -u
ATTN=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
SRC=$(cd "$2" && pwd)
. "$SRC/tests/support/lib.sh"
. "$SRC/tests/python/pyenv.sh"
finetune_inputs
[ -f "$DATA" ] || { echo "SKIP: the book's instruction-data.json is missing"; exit 77; }
finetune_setup "$SRC" "$ATTN"
book_test_mode_model "$tmp/ch07.pth"
cd "$tmp" || exit 1
common=(train --task instruct --n-heads 2 --init-from ch07.pth --data "$DATA" --limit 10)

"$ATTN" "${common[@]}" --out ch07 > ch07.out 2> ch07.err
rc=$?
msg=$(/usr/bin/python3 - "$FIX/ch07_test_mode.json" << 'EOF' 2>&1
import json, sys
d = json.load(open(sys.argv[1]))
keep = ("Training set", "Validation set", "Test set", "Initial losses", "Ep ", "Below is")
book = [l for l in d["stdout"].splitlines() if l.startswith(keep)]
ours = [l for l in open("ch07.out").read().splitlines() if l.startswith(keep)]
assert ours == book, (ours, book)
rows = [l.split(",") for l in open("ch07/log.csv").read().splitlines()[1:]]
init = [(float(a[3]), float(a[4])) for a in rows if a[0] == "initial_loss"]
got = [(float(a[3]), float(a[4])) for a in rows if a[0] == "loss"]
calls = d["loss_loader_calls"]
want_init = [(calls[0]["value"], calls[1]["value"])]
want = list(zip(d["result"]["train_losses"], d["result"]["val_losses"]))
assert len(init) == 1 and len(got) == len(want), (init, got)
for g, w in zip(init + got, want_init + want):
    assert abs(g[0] - w[0]) <= 1e-5 and abs(g[1] - w[1]) <= 1e-5, (g, w)
resp = [e["model_response"] for e in json.load(open("ch07/responses.json"))]
assert resp == d["responses"], "responses differ"
print(f"{len(book)} printed lines, {1 + len(got)} loss pairs within 1e-5, "
      f"{len(resp)} responses the book's")
EOF
) && ok "ch07 --test_mode: $msg" || bad "ch07 (rc $rc): $msg $(tail -3 ch07.err)"

# attn generate --instruction: the template, greedy, stops at <|endoftext|>
msg=$(/usr/bin/python3 - "$FIX/ch07_test_mode.json" "$DATA" "$ATTN" << 'EOF' 2>&1
import json, subprocess, sys
d = json.load(open(sys.argv[1]))
data = json.load(open(sys.argv[2]))
first = d["data_subset"]["test"][0]
for i in (0, 3):
    e = data[first + i]
    args = [sys.argv[3], "generate", "ch07", "--instruction", e["instruction"]]
    if e["input"]:
        args += ["--input", e["input"]]
    out = subprocess.run(args, capture_output=True, text=True, check=True).stdout
    assert out == d["responses"][i] + "\n", (i, out[:80], d["responses"][i][:80])
print("2 test entries: the book's responses")
EOF
) && ok "generate --instruction: $msg" || bad "generate --instruction: $msg"

# attn info: the task, the head, what trained; with LoRA the adapters
out=$("$ATTN" info ch07 2>&1)
echo "$out" | grep -q "^task  *instruct" && echo "$out" | grep -q "^trainable  *all: 1209480 of" &&
  echo "$out" | grep -q "^lora  *none" && ok "info: instruct, all trainable, no LoRA" ||
  bad "info ch07: $out"
"$ATTN" "${common[@]}" --out lora --lora-rank 4 --lora-alpha 8 --epochs 1 > lora.out 2>&1
out=$("$ATTN" info lora 2>&1)
echo "$out" | grep -q "^trainable  *adapters" && echo "$out" | grep -q "^lora  *rank 4, alpha 8" &&
  "$ATTN" generate lora --instruction "Say hi" --max-new-tokens 3 > /dev/null 2>&1 &&
  ok "LoRA instruct run: info says rank 4 alpha 8, generate merges the adapters" ||
  bad "LoRA instruct: $out $(tail -2 lora.out)"

# attn export of an instruct LoRA run: the adapters merged into the weights
# (hf needs qkv biases: a GPT-2 layout of the test model); the exported
# files generate the run's tokens, which the base's are not (the run trains
# hard enough to change them); llmc (a tied head) refused, nothing written
"${PY[@]}" - << 'EOF' || bad "the qkv-bias model did not build"
import torch, attn.book as book
cfg = {"vocab_size": 50257, "context_length": 120, "drop_rate": 0.0, "qkv_bias": True,
       "emb_dim": 12, "n_layers": 1, "n_heads": 2}
torch.manual_seed(123)
torch.save(book.GPTModel(cfg).state_dict(), "qkv.pth")
EOF
"$ATTN" train --task instruct --n-heads 2 --init-from qkv.pth --data "$DATA" --limit 10 \
  --epochs 3 --batch-size 2 --lr 3e-2 --lora-rank 4 --lora-alpha 8 --out xl > xl.out 2>&1 ||
  bad "LoRA run to export: $(tail -2 xl.out)"
"$ATTN" export xl xl.safetensors --format hf --hf-config > /dev/null 2> x.err &&
  "$ATTN" export xl xl.pth --format book > /dev/null 2>> x.err || bad "export: $(cat x.err)"
gen() { "$ATTN" generate "$1" --n-heads 2 --instruction "Name a color." --max-new-tokens 12; }
want=$(gen xl) base=$(gen qkv.pth)
[ -n "$want" ] && [ "$want" != "$base" ] && [ "$(gen xl.safetensors)" = "$want" ] &&
  [ "$(gen xl.pth)" = "$want" ] &&
  ok "export --format hf and book of a LoRA instruct run: the run's tokens ('$want'), merged" ||
  bad "exported tokens: run '$want', hf '$(gen xl.safetensors)', book '$(gen xl.pth)', base '$base'"
"$ATTN" export xl xl.bin --format llmc > x.out 2> x.err
[ $? -eq 2 ] && grep -q "ties the head to wte" x.err && [ ! -e xl.bin ] &&
  ok "export --format llmc of an instruct run: exit 2, $(head -c 60 x.err)..." ||
  bad "export llmc of an instruct run: $(cat x.err)"

# the same bytes at every thread count
"$ATTN" "${common[@]}" --out t1 --threads 1 > /dev/null 2>&1
"$ATTN" "${common[@]}" --out t2 --threads 2 > /dev/null 2>&1
cmp -s t1/model.safetensors t2/model.safetensors && cmp -s t1/model.safetensors ch07/model.safetensors &&
  ok "1 and 2 threads: the same checkpoint" || bad "1 and 2 threads differ"

# --mask-prompt (exercise 7.2): the initial training loss against the
# exercise's collate on the same batch (the fixture's first train order)
"$ATTN" "${common[@]}" --out mask --mask-prompt > mask.out 2>&1
msg=$("${PY[@]}" - "$FIX/ch07_test_mode.json" "$DATA" << 'EOF' 2>&1
import json, sys, torch, attn.book as book, attn.tokenizer as T
d = json.load(open(sys.argv[1]))
data = json.load(open(sys.argv[2]))[:10]
enc = T.get_encoding("gpt2")
def fmt(e):
    t = ("Below is an instruction that describes a task. Write a response that appropriately "
         "completes the request.\n\n### Instruction:\n" + e["instruction"])
    return t + ("\n\n### Input:\n" + e["input"] if e["input"] else "")
batch = [(len(enc.encode(fmt(e))), enc.encode(fmt(e) + "\n\n### Response:\n" + e["output"]))
         for e in data]
perm = d["loader_iterations"][0]["perm"][:8]
L = max(len(batch[i][1]) + 1 for i in perm)
xs, ys = [], []
for i in perm:
    plen, item = batch[i]
    p = item + [50256] * (L - len(item))
    x, y = torch.tensor(p[:-1]), torch.tensor(p[1:])
    idx = torch.nonzero(y == 50256).squeeze()
    if idx.numel() > 1:
        y[idx[1:]] = -100
    y[:plen - 1] = -100
    xs.append(x); ys.append(y)
cfg = {"vocab_size": 50257, "context_length": 120, "drop_rate": 0.0, "qkv_bias": False,
       "emb_dim": 12, "n_layers": 1, "n_heads": 2}
m = book.GPTModel(cfg); m.load_state_dict(torch.load("ch07.pth")); m.eval()
with torch.no_grad():
    want = torch.nn.functional.cross_entropy(m(torch.stack(xs)).flatten(0, 1),
                                             torch.stack(ys).flatten()).item()
rows = [l.split(",") for l in open("mask/log.csv").read().splitlines()[1:]]
got = float([a for a in rows if a[0] == "initial_loss"][0][3])
assert abs(got - want) <= 1e-5, (got, want)
unmasked = d["loss_loader_calls"][0]["value"]
assert abs(got - unmasked) > 1e-3, (got, unmasked)
print(f"initial loss {got:.6f} = exercise 7.2's {want:.6f}")
EOF
) && ok "--mask-prompt: $msg" || bad "--mask-prompt: $msg $(tail -2 mask.out)"

# expect CODE PATTERN ARGS...: the exit code, the message, no run folder
expect() {
  local code=$1 pat=$2
  shift 2
  "$ATTN" "$@" > e.out 2> e.err
  local rc=$?
  if [ $rc -eq "$code" ] && grep -q -- "$pat" e.err && [ ! -e bad ]; then
    ok "exit $code: $(head -1 e.err)"
  else
    bad "$* -> rc $rc (want $code, '$pat'): $(cat e.err)"
  fi
}
printf '[{"instruction": "a", "input": "", "output": "b"}, {"instruction": "c", "output": "d"}]' > nofield.json
printf '{"instruction": "a", "input": "", "output": "b"}' > object.json
printf '[]' > empty.json
printf '[{"instruction": "a", "input": 3, "output": "b"}]' > number.json
t=(train --task instruct --n-heads 2 --init-from ch07.pth --out bad)
expect 1 "nofield.json: entry 1 has no \"input\"" "${t[@]}" --data nofield.json
expect 1 "object.json is not an array" "${t[@]}" --data object.json
expect 1 "empty.json holds no entries" "${t[@]}" --data empty.json
expect 1 "entry 0: \"input\" is not a string" "${t[@]}" --data number.json
expect 1 "fewer than one batch" "${t[@]}" --data "$DATA" --limit 3
expect 2 "does not apply to --task instruct" "${t[@]}" --data "$DATA" --val x.csv
expect 2 "does not apply to --task classify" train --task classify --n-heads 2 \
  --init-from ch07.pth --data "$FIX/train.csv" --out bad --mask-prompt
expect 2 "option of --task classify or instruct" train --data "$DATA" --out bad --mask-prompt
expect 2 "does not apply with --instruction" generate ch07 --instruction x --temperature 1
expect 2 "--input goes with --instruction" generate ch07 --input x
[ $fails -eq 0 ] && echo "all ok" || echo "$fails failed"
exit $((fails > 0))
