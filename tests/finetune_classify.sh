#!/usr/bin/env bash
# attn train --task classify and attn classify against the book's own runs
# (tests/fixtures/book_ch67, scripts/gen_book_ch67_fixtures.py): chapter 6's
# gpt_class_finetune.py --test_mode and appendix E's LoRA notebook on its
# tiny model, every printed line the same, every loss and accuracy within
# 1e-5 (RUN/log.csv holds them at full precision), the test set's accuracy
# and predictions; the same bytes at 1 and 2 threads; the bad inputs of
# issue 49 (a line's missing or non-integer label, an empty text, a text
# longer than the context, --lora-rank 0, another task's model): a clean
# error, exit 2 or 1, nothing written. The starting models are the book's
# GPTModel after torch.manual_seed(123), made here with PyTorch (skip 77
# without it). Usage: bash finetune_classify.sh <path-to-attn> <source-dir>
set -u
ATTN=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
SRC=$(cd "$2" && pwd)
. "$SRC/tests/support/lib.sh"
. "$SRC/tests/python/pyenv.sh"
finetune_inputs
finetune_setup "$SRC" "$ATTN"
book_test_mode_model "$tmp/ch06.pth"
# ch06 --test_mode builds GPTModel(qkv_bias False) after manual_seed(123);
# appendix E loads a seeded GPT-2 layout (qkv biases; out_head = wte's values).
"${PY[@]}" - "$tmp" << 'EOF' || { echo "SKIP: the book's model did not build"; exit 77; }
import sys, torch, attn.book as book
cfg = {"vocab_size": 50257, "context_length": 120, "drop_rate": 0.0, "qkv_bias": True,
       "emb_dim": 12, "n_layers": 1, "n_heads": 2}
torch.manual_seed(123)
m = book.GPTModel(cfg)
m.out_head.weight = torch.nn.Parameter(m.tok_emb.weight.detach().clone())
torch.save(m.state_dict(), sys.argv[1] + "/appE.pth")
EOF
cd "$tmp" || exit 1
common=(--task classify --n-heads 2 --data "$FIX/train.csv" --val "$FIX/validation.csv")

# compare FIXTURE RUN: printed lines, log.csv against result, test accuracy
compare() {
  /usr/bin/python3 - "$FIX/$1.json" "$2" << 'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
run = sys.argv[2]
book = [l for l in d["stdout"].splitlines() if l.startswith(("Ep ", "Training accuracy: "))
        and "|" in l or l.startswith("Ep ")]
ours = [l for l in open(run + ".out").read().splitlines() if l.startswith(("Ep ", "Training acc"))]
assert ours == book, (ours, book)
rows = [l.split(",") for l in open(run + "/log.csv").read().splitlines()[1:]]
r = d["result"]
losses = [(float(a[3]), float(a[4])) for a in rows if a[0] == "loss"]
accs = [(float(a[3]), float(a[4])) for a in rows if a[0] == "accuracy"]
want_l = list(zip(r["train_losses"], r["val_losses"]))
want_a = list(zip(r["train_accs"], r["val_accs"]))
assert len(losses) == len(want_l) and len(accs) == len(want_a)
for g, w in zip(losses + accs, want_l + want_a):
    assert abs(g[0] - w[0]) <= 1e-5 and abs(g[1] - w[1]) <= 1e-5, (g, w)
print(len(losses), "losses and", len(accs), "accuracies within 1e-5")
EOF
}

test_acc() { /usr/bin/python3 -c "import json,sys; d=json.load(open(sys.argv[1]))
f=d.get('final_accuracies') or {}
print('%.2f%%' % (100*f['test']) if f else [l.split()[-1] for l in d['stdout'].splitlines() if l.startswith('Test accuracy')][-1])" "$FIX/$1.json"; }

"$ATTN" train "${common[@]}" --init-from ch06.pth --out ch06 > ch06.out 2> ch06.err
rc=$?
msg=$(compare ch06_test_mode ch06 2>&1) && ok "ch06 --test_mode: $msg" ||
  bad "ch06 (rc $rc): $msg $(tail -3 ch06.err)"
want=$(test_acc ch06_test_mode)
got=$("$ATTN" classify ch06 --data "$FIX/test.csv" | awk '{print $2}')
[ "$got" = "$want" ] && ok "ch06 test accuracy $got" || bad "ch06 test accuracy $got, want $want"
# the first test rows' labels and probabilities: softmax of the book's logits
texts=()
while IFS= read -r t; do texts+=("$t"); done < <(/usr/bin/python3 -c "
import csv,sys
for i, r in enumerate(csv.DictReader(open(sys.argv[1]))):
    if i < 4: print(r['Text'])" "$FIX/test.csv")
"$ATTN" classify ch06 "${texts[@]}" > pred.txt
msg=$(/usr/bin/python3 - "$FIX/ch06_test_mode.json" << 'EOF'
import json, math, sys
d = json.load(open(sys.argv[1]))
lines = open("pred.txt").read().splitlines()
assert len(lines) == 4, lines
for i, line in enumerate(lines):
    label, probs, _ = line.split("\t", 2)
    lg = d["test_last_token_logits"][i]
    m = max(lg)
    e = [math.exp(x - m) for x in lg]
    want = [x / sum(e) for x in e]
    assert int(label) == d["test_predictions"][i], (label, d["test_predictions"][i])
    assert all(abs(float(p) - w) <= 1e-5 for p, w in zip(probs.split(), want)), (probs, want)
print("4 texts: the book's labels and probabilities")
EOF
) && ok "classify TEXT: $msg" || bad "classify TEXT: $msg"

"$ATTN" train "${common[@]}" --init-from appE.pth --out appE --lora-rank 16 --lora-alpha 16 \
  --lr 8e-4 > appE.out 2> appE.err
rc=$?
msg=$(compare appE_tiny appE 2>&1) && ok "appendix E LoRA: $msg" ||
  bad "appendix E (rc $rc): $msg $(tail -3 appE.err)"
want=$(test_acc appE_tiny)
got=$("$ATTN" classify appE --data "$FIX/test.csv" | awk '{print $2}')
[ "$got" = "$want" ] && ok "appendix E test accuracy $got" || bad "appE test accuracy $got, want $want"

# export: the adapters merged (W + alpha/r (A B)^T) into the book's plain
# chapter-6 model, whose logits are the book's LoRA model's
"$ATTN" export appE merged.pth --format book > /dev/null 2> export.err
msg=$("${PY[@]}" - "$FIX" << 'EOF'
import csv, json, sys, torch, attn.book as book, attn.tokenizer as T
cfg = {"vocab_size": 50257, "context_length": 120, "drop_rate": 0.0, "qkv_bias": True,
       "emb_dim": 12, "n_layers": 1, "n_heads": 2}
m = book.GPTModel(cfg)
m.out_head = torch.nn.Linear(12, 2)
m.load_state_dict(torch.load("merged.pth"), strict=True)
m.eval()
d = json.load(open(sys.argv[1] + "/appE_tiny.json"))
enc = T.get_encoding("gpt2")
rows = list(csv.DictReader(open(sys.argv[1] + "/test.csv")))
worst = 0.0
for i, r in enumerate(rows):
    ids = enc.encode(r["Text"])[:48]
    ids += [50256] * (48 - len(ids))
    with torch.no_grad():
        lg = m(torch.tensor([ids]))[0, -1].tolist()
    worst = max(worst, max(abs(a - b) for a, b in zip(lg, d["test_last_token_logits"][i])))
assert worst <= 1e-5, worst
print(f"{len(rows)} test rows, logits within {worst:.1e}")
EOF
) && ok "export --format book merges the adapters: $msg" || bad "merged export: $msg $(cat export.err)"
expect_hf=$("$ATTN" export appE m.safetensors --format hf 2>&1)
[ $? -eq 2 ] && [ ! -e m.safetensors ] && ok "export --format hf of a classifier: exit 2" ||
  bad "export hf of a classifier: $expect_hf"

# attn info of a classifier: task, classes, head width, trainable set, LoRA
out=$("$ATTN" info ch06 2>&1)
echo "$out" | grep -q "^task  *classify" && echo "$out" | grep -q "^head  *2 classes" &&
  echo "$out" | grep -q "^trainable  *last-block" && ok "info ch06: a 2-class classifier" ||
  bad "info ch06: $out"
out=$("$ATTN" info --json appE 2>&1)
echo "$out" | /usr/bin/python3 -c "import json,sys; d=json.load(sys.stdin)
assert (d['task'], d['classes'], d['head_width'], d['trainable'], d['lora_rank'], d['lora_alpha']) == ('classify', 2, 2, 'adapters', 16, 16), d" &&
  ok "info --json appE: classify, 2 classes, adapters of rank 16 alpha 16" || bad "info appE: $out"

# the same bytes at every thread count
"$ATTN" train "${common[@]}" --init-from ch06.pth --out t1 --threads 1 --epochs 1 > /dev/null 2>&1
"$ATTN" train "${common[@]}" --init-from ch06.pth --out t2 --threads 2 --epochs 1 > /dev/null 2>&1
cmp -s t1/model.safetensors t2/model.safetensors && ok "1 and 2 threads: the same checkpoint" ||
  bad "1 and 2 threads differ"

# a TSV (label<TAB>text) is the CSV's set
/usr/bin/python3 -c "
import csv,sys
for r in csv.DictReader(open(sys.argv[1])): print(r['Label'] + '\t' + r['Text'].replace('\n', ' '))
" "$FIX/train.csv" > train.tsv
"$ATTN" train --task classify --n-heads 2 --data train.tsv --val "$FIX/validation.csv" \
  --init-from ch06.pth --out tsv --epochs 1 > tsv.out 2>&1
"$ATTN" train "${common[@]}" --init-from ch06.pth --out csv1 --epochs 1 > csv1.out 2>&1
cmp -s tsv/model.safetensors csv1/model.safetensors && ok "the TSV trains as the CSV" ||
  bad "TSV and CSV differ: $(tail -2 tsv.out)"

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
printf 'Label,Text\n0,fine\n,no label here\n' > nolabel.csv
printf 'Label,Text\n0,fine\n1,ok\nspam,hello\n' > word.csv
printf 'Label,Text\n0,fine\n1,""\n' > empty.csv
t=(train --task classify --n-heads 2 --init-from ch06.pth --out bad)
expect 1 "nolabel.csv:3: missing label" "${t[@]}" --data nolabel.csv
expect 1 "word.csv:4: the label 'spam' is not an integer" "${t[@]}" --data word.csv
expect 1 "empty.csv:3: empty text" "${t[@]}" --data empty.csv
expect 2 "lora-rank must be" "${t[@]}" --data "$FIX/train.csv" --lora-rank 0
expect 2 "needs --init-from" train --task classify --data "$FIX/train.csv" --out bad
expect 2 "option of --task classify" train --data "$FIX/train.csv" --val x.csv --out bad
expect 2 "does not apply to --task classify" "${t[@]}" --data "$FIX/train.csv" --grad-accum 2
expect 1 "is a model of task classify" "${t[@]}" --data "$FIX/train.csv" --init-from ch06
expect 1 "is not a classifier" classify ch06.pth "a text"
expect 1 "is a model of task classify, not a language model" generate ch06 --max-new-tokens 2
mkdir full && touch full/notes.txt
expect 1 "not an empty folder" train --task classify --n-heads 2 --init-from ch06.pth \
  --data "$FIX/train.csv" --out full
[ -f full/notes.txt ] && ok "a folder of the user's is left as it was" || bad "full/ changed"
# a text longer than the context (120): cut, said once
{ echo "Label,Text"; for i in $(seq 1 16); do echo "$((i % 2)),short text $i"; done
  echo "1,$(for i in $(seq 1 200); do printf 'word '; done)"; } > long.csv
"$ATTN" train --task classify --n-heads 2 --init-from ch06.pth --data long.csv --out long \
  --epochs 1 > long.out 2>&1
n=$(grep -c "longer than the context (120 tokens); cut" long.out)
[ "$n" = 1 ] && grep -q "padded to 120 tokens" long.out && ok "a long text is cut to 120, said once" ||
  bad "long text: $(cat long.out)"
[ $fails -eq 0 ] && echo "all ok" || echo "$fails failed"
exit $((fails > 0))
