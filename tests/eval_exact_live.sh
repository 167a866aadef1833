#!/usr/bin/env bash
# The exact evaluation (attn_gpt_loss_windows: the whole val split, every
# token once, windows of context_length): its loss equals PyTorch's over the
# same windows (scripts/check_eval_exact_torch.py) for the book's model and
# a variant; it is the same at 1 and 2 threads (fp32 and, where the CPU has
# AVX512-BF16, bf16); a run with --eval exact resumes bit for bit; best/
# is chosen by the exact losses. Skips the PyTorch checks without torch.
# Usage: bash eval_exact_live.sh <path-to-attn> <source-dir>
set -uo pipefail
ATTN=$1
src=$2
py=/usr/bin/python3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
ok() { echo "ok   - $1"; }
bad() { echo "FAIL - $1"; fails=$((fails + 1)); }
# 1950 characters: the val split's 194 predictions are 16 windows of 12 and one of 2.
for i in $(seq 1 50); do printf 'ROMEO: wherefore art thou, Romeo? %04d\n' "$i"; done > "$tmp/c.txt"
echo '{"context_length": 12, "emb_dim": 24, "n_heads": 3, "n_layers": 2, "qkv_bias": true,
  "batch_size": 5, "max_steps": 24, "eval_interval": 6, "eval_iters": 2, "lr": 0.01}' > "$tmp/c.json"
echo '{"context_length": 12, "emb_dim": 24, "n_heads": 3, "n_layers": 2, "norm": "rmsnorm",
  "act": "relu2", "tie_weights": true, "batch_size": 5, "max_steps": 12, "eval_interval": 6,
  "eval_iters": 2}' > "$tmp/v.json"
train() { "$ATTN" train --data "$tmp/c.txt" "$@" > /dev/null 2> "$tmp/err"; }
exact() { tail -1 "$1/loss.csv" | cut -d, -f7; } # the final evaluation's

# 1. fp32, 1 and 2 threads: the same run, the same exact losses.
train --config "$tmp/c.json" --out "$tmp/t1" --eval exact --threads 1 || bad "run: $(cat "$tmp/err")"
train --config "$tmp/c.json" --out "$tmp/t2" --eval exact --threads 2 || bad "run: $(cat "$tmp/err")"
n=$(awk -F, 'NR > 1 && $7 != ""' "$tmp/t1/loss.csv" | wc -l)
[ "$n" = 5 ] && [ -z "$(awk -F, 'NR > 1 && $5 != "" && $6 != ""' "$tmp/t1/loss.csv")" ] &&
  ok "--eval exact: 5 evaluations with an exact val loss, no sampled one" ||
  bad "exact rows $n: $(cat "$tmp/t1/loss.csv" | head -3)"
cmp -s "$tmp/t1/loss.csv" "$tmp/t2/loss.csv" && ok "fp32: loss.csv identical at 1 and 2 threads" ||
  bad "fp32 threads: $(diff "$tmp/t1/loss.csv" "$tmp/t2/loss.csv" | head -4)"

# 2. A sampled run's final evaluation is exact too, and says so.
train --config "$tmp/c.json" --out "$tmp/s" --threads 1 || bad "run: $(cat "$tmp/err")"
"$ATTN" train --data "$tmp/c.txt" --config "$tmp/c.json" --out "$tmp/s2" --threads 1 > "$tmp/s2.log" 2> "$tmp/s2.err"
[ -n "$(exact "$tmp/s")" ] && [ "$(exact "$tmp/s")" = "$(exact "$tmp/t1")" ] &&
  grep -q "^step 24: train loss [0-9.]*, val loss [0-9.]*, exact val loss [0-9.]*$" "$tmp/s2.log" &&
  grep -q "final val loss [0-9.]* (exact: the whole val split)" "$tmp/s2.err" &&
  ok "--eval sampled: the final evaluation adds the exact loss (the same as --eval exact's)" ||
  bad "final exact: '$(exact "$tmp/s")' vs '$(exact "$tmp/t1")'; $(tail -2 "$tmp/s2.log")"

# 3. PyTorch over the same windows.
if "$py" -c 'import torch' 2>/dev/null; then
  "$py" "$src/scripts/check_eval_exact_torch.py" "$tmp/t1" "$tmp/c.txt" "$(exact "$tmp/t1")" &&
    ok "book's model: the exact loss is PyTorch's" || bad "book's model vs PyTorch"
  train --config "$tmp/v.json" --out "$tmp/v" --threads 2 || bad "variant run: $(cat "$tmp/err")"
  "$py" "$src/scripts/check_eval_exact_torch.py" "$tmp/v" "$tmp/c.txt" "$(exact "$tmp/v")" &&
    ok "variant (rmsnorm, relu2, tied): the exact loss is PyTorch's" || bad "variant vs PyTorch"
else
  echo "skip - /usr/bin/python3 has no torch"
fi

# 4. bf16 (AVX512-BF16 CPUs): the same at 1 and 2 threads, near fp32's.
if "$ATTN" info --cpu --json | grep -q '"bf16_engine":[[:space:]]*true'; then
  train --config "$tmp/c.json" --out "$tmp/b1" --eval exact --precision bf16 --threads 1 &&
    train --config "$tmp/c.json" --out "$tmp/b2" --eval exact --precision bf16 --threads 2 ||
    bad "bf16 run: $(cat "$tmp/err")"
  cmp -s "$tmp/b1/loss.csv" "$tmp/b2/loss.csv" && ok "bf16: loss.csv identical at 1 and 2 threads" ||
    bad "bf16 threads: $(diff "$tmp/b1/loss.csv" "$tmp/b2/loss.csv" | head -4)"
  if "$py" -c 'import torch' 2>/dev/null; then
    "$py" "$src/scripts/check_eval_exact_torch.py" "$tmp/b1" "$tmp/c.txt" "$(exact "$tmp/b1")" 1e-2 &&
      ok "bf16: the exact loss within 1% of PyTorch's fp32 on the same weights" ||
      bad "bf16 vs PyTorch fp32"
  fi
else
  echo "skip - no AVX512-BF16: bf16 not checked"
fi

# 5. Resume: stopped after step 10 and resumed, the run is the uninterrupted one.
train --config "$tmp/c.json" --out "$tmp/r" --eval exact --threads 1 --interrupt-after 10
train --config "$tmp/c.json" --out "$tmp/r" --eval exact --threads 1 --resume ||
  bad "resume: $(cat "$tmp/err")"
cmp -s "$tmp/r/loss.csv" "$tmp/t1/loss.csv" && cmp -s "$tmp/r/model.safetensors" "$tmp/t1/model.safetensors" &&
  cmp -s "$tmp/r/train_state.safetensors" "$tmp/t1/train_state.safetensors" &&
  ok "--eval exact: stopped at 10 and resumed == one run (loss.csv, model, state)" ||
  bad "resume differs: $(diff "$tmp/r/loss.csv" "$tmp/t1/loss.csv" | head -4)"

# 6. best/ is the step of the lowest exact val loss: on a corpus whose val
#    split is other lines, val rises after the first evaluations.
{ for i in $(seq 1 45); do printf 'ROMEO: wherefore art thou, Romeo? %04d\n' "$i"; done
  for i in $(seq 1 5); do printf 'JULIET: a rose by any other name %04d\n' "$i"; done; } > "$tmp/d.txt"
"$ATTN" train --data "$tmp/d.txt" --config "$tmp/c.json" --out "$tmp/o" --eval exact --lr 0.03 \
  --warmup-steps 2 --steps 60 --threads 1 > /dev/null 2> "$tmp/err" || bad "run: $(cat "$tmp/err")"
want=$(awk -F, 'NR > 1 && $1 > 0 && $7 != "" { if (m == "" || $7 < m) { m = $7; s = $1 } } END { print s }' "$tmp/o/loss.csv")
got=$("$ATTN" info "$tmp/o/best" 2>&1 | awk '$1 == "step" { print $2 }')
[ -n "$want" ] && [ "$want" != 60 ] && [ "$got" = "$want" ] &&
  ok "best/ is the step-$want checkpoint (lowest exact val loss), not the last" ||
  bad "best/ step '$got', lowest exact val loss at '$want'"

[ "$fails" -eq 0 ] || exit 1
