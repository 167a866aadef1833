#!/usr/bin/env bash
# attn export: a trained run written as hf, llmc and book gives the run's
# logits bit for bit through `attn forward gpt`, the formats convert into
# each other and back to the same bytes, and the refusals: OUT inside a run
# folder, OUT that is RUN's file, an unknown format, a model the format
# cannot hold (exit 2 each, nothing written).
# Usage: bash export_cli.sh <path-to-attn> <source-dir>
set -u
ATTN=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "${BASH_SOURCE[0]}")/support/lib.sh"

make_corpus "$tmp/corpus.txt" 40
train() { # train OUT QKV_BIAS [TIE_WEIGHTS]
  cat > "$tmp/cfg.json" <<JSON
{"context_length": 16, "emb_dim": 16, "n_heads": 2, "n_layers": 1, "drop_rate": 0.0,
 "qkv_bias": $2, "tie_weights": ${3:-true},
 "batch_size": 2, "max_steps": 6, "eval_interval": 6, "eval_iters": 1, "warmup_steps": 2}
JSON
  "$ATTN" train --data "$tmp/corpus.txt" --config "$tmp/cfg.json" --threads 1 --out "$1" \
    > /dev/null 2>&1 || bad "training $1 failed"
}
train "$tmp/run" true
train "$tmp/nobias" false
train "$tmp/book" false false # the book's model: no q/k/v biases, its own head

# ids.npy: int64 (1, 8), written byte by byte (no numpy needed).
hdr="{'descr': '<i8', 'fortran_order': False, 'shape': (1, 8), }"
while [ $(((10 + ${#hdr} + 1) % 64)) -ne 0 ]; do hdr="$hdr "; done
{
  printf '\x93NUMPY\x01\x00'
  printf "\\x$(printf %02x $(((${#hdr} + 1) % 256)))\\x$(printf %02x $(((${#hdr} + 1) / 256)))"
  printf '%s\n' "$hdr"
  for v in 1 5 9 12 3 0 7 2; do printf "\\x$(printf %02x $v)\\0\\0\\0\\0\\0\\0\\0"; done
} > "$tmp/ids.npy"

logits() { # logits WEIGHTS OUT.npy [options]
  local w=$1 o=$2
  shift 2
  "$ATTN" forward gpt "$w" --input "$tmp/ids.npy" --output "$o" --threads 1 "$@" > /dev/null
}
logits "$tmp/run" "$tmp/run.npy" && ok "the run's logits" || bad "forward gpt on the run"

mkdir "$tmp/out"
for f in hf llmc book; do
  o=$tmp/out/model.$f
  "$ATTN" export "$tmp/run" "$o" --format $f > "$tmp/$f.txt" 2> "$tmp/$f.err" &&
    grep -q "^$o: $f from attn: vocab_size [0-9]*, context_length 16, emb_dim 16, n_heads 2" "$tmp/$f.txt" &&
    ok "export --format $f" || bad "export --format $f: $(cat "$tmp/$f.err" "$tmp/$f.txt")"
  # The book's torch.save file names no head count (a state_dict holds
  # tensors only): it is given, as a book reader knows it from the config.
  heads=(); [ $f = book ] && heads=(--n-heads 2)
  logits "$o" "$tmp/$f.npy" "${heads[@]}" && cmp -s "$tmp/run.npy" "$tmp/$f.npy" &&
    ok "  $f gives the run's logits bit for bit" || bad "  $f logits differ"
done

# Conversions: hf -> llmc -> book -> hf is the same file.
"$ATTN" export "$tmp/out/model.hf" "$tmp/c.bin" --format llmc > /dev/null &&
  "$ATTN" export "$tmp/c.bin" "$tmp/c.book" --format book > /dev/null &&
  "$ATTN" export "$tmp/c.book" "$tmp/c.hf" --format hf --n-heads 2 > /dev/null &&
  cmp -s "$tmp/out/model.hf" "$tmp/c.hf" && cmp -s "$tmp/out/model.llmc" "$tmp/c.bin" &&
  ok "hf -> llmc -> book -> hf: the same bytes" || bad "conversion chain"

mkdir "$tmp/hfdir"
"$ATTN" export "$tmp/run" "$tmp/hfdir/model.safetensors" --format hf --hf-config > /dev/null &&
  grep -q '"n_head":[[:space:]]*2' "$tmp/hfdir/config.json" &&
  grep -q '"activation_function":[[:space:]]*"gelu_new"' "$tmp/hfdir/config.json" &&
  ok "--hf-config writes config.json beside OUT" || bad "--hf-config"
logits "$tmp/hfdir" "$tmp/hfdir.npy" && cmp -s "$tmp/run.npy" "$tmp/hfdir.npy" &&
  ok "  an HF folder reads as its model.safetensors" || bad "  HF folder"

refuse() { # refuse WHAT WANT_RC PATTERN args...
  local what=$1 want=$2 pat=$3
  shift 3
  "$ATTN" export "$@" > "$tmp/r.out" 2> "$tmp/r.err"
  local rc=$?
  [ $rc -eq "$want" ] && grep -q "$pat" "$tmp/r.err" && ok "$what (exit $rc)" ||
    bad "$what: exit $rc, $(cat "$tmp/r.err")"
}
refuse "OUT inside the run folder" 2 "run folder" "$tmp/run" "$tmp/run/gpt2.bin" --format llmc
[ ! -e "$tmp/run/gpt2.bin" ] && ok "  nothing written there" || bad "  wrote into the run"
cp "$tmp/out/model.hf" "$tmp/keep.hf"
refuse "OUT is RUN's file" 2 "input" "$tmp/out/model.hf" "$tmp/out/model.hf" --format book
cmp -s "$tmp/out/model.hf" "$tmp/keep.hf" && ok "  RUN unchanged" || bad "  RUN changed"
refuse "unknown format" 2 "one of hf, llmc, book" "$tmp/run" "$tmp/x.gguf" --format gguf
refuse "no OUT" 2 "needs RUN and OUT" "$tmp/run" --format hf
refuse "--hf-config without hf" 2 "goes with --format hf" "$tmp/run" "$tmp/x.bin" --format llmc --hf-config
# A refusal names what the model has and the config keys that would make
# one the format takes.
refuse "no qkv_bias as hf" 2 'it has qkv_bias false; a model trained with {"qkv_bias":true} in its --config file can be' \
  "$tmp/nobias" "$tmp/nb.hf" --format hf
refuse "the book's model as llmc" 2 'it has qkv_bias false, tie_weights false; a model trained with {"qkv_bias":true,"tie_weights":true} in its --config file' \
  "$tmp/book" "$tmp/b.llmc" --format llmc
refuse "the book's model as hf" 2 '{"qkv_bias":true} in its --config file' "$tmp/book" "$tmp/b.hf" --format hf
[ ! -e "$tmp/nb.hf" ] && ok "  nothing written" || bad "  wrote a file"
"$ATTN" export "$tmp/nobias" "$tmp/nb.book" --format book > /dev/null &&
  ok "no qkv_bias as book" || bad "no qkv_bias as book"
refuse "a file that is no weights" 1 "not a weights file" "$tmp/corpus.txt" "$tmp/x.hf" --format hf
"$ATTN" export --help | grep -q -- "--format" && ok "--help" || bad "--help"

echo "export_cli: $fails failure(s)"
[ "$fails" -eq 0 ]
