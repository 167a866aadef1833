#!/usr/bin/env bash
# Issue 17, items 4, 5, 10, 12, 13: what attn does with inputs that lie or
# fail, on a tiny run trained here and files crafted from it.
#   4. metadata claiming a huge model (emb_dim 65536, n_layers 4096) in a
#      small file fails at once, naming the key, in every reader (info,
#      generate, viz, forward gpt, --init-from, --resume); run under
#      `ulimit -v` so that an attempt to allocate it fails instead of
#      swapping (the verdict is the message, never the time);
#   5. a metadata integer that is not plain digits ("-5") is refused;
#  10. a failed write to stdout (/dev/full, stdout closed) exits 1 saying so;
#  12. values out of a range that depends on the model exit 2 naming the
#      range; --out and --svg naming one file are refused; bench out of
#      memory exits 1;
#  13. NaN/Inf weights, a .npy of version 9.0, a loss.csv given as a
#      checkpoint and a bad vocabulary get messages that say so.
#
#   bash tests/cli_inputs.sh ATTN SRCDIR
set -uo pipefail
ATTN=$1
PY=/usr/bin/python3
tmp=$(mktemp -d "${TMPDIR:-/tmp}/attn-cli-inputs.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "${BASH_SOURCE[0]}")/support/lib.sh" # make_corpus, ok, bad
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1   # one thread: no pools under ulimit -v

# expect RC REGEX WHAT -- ARGS...: attn ARGS exits RC with stderr matching REGEX.
expect() {
  local want=$1 re=$2 what=$3
  shift 4
  "$ATTN" "$@" > "$tmp/out" 2> "$tmp/err"
  local rc=$?
  if [ $rc -eq "$want" ] && grep -qE -- "$re" "$tmp/err"; then
    ok "$what: exit $rc, $(head -1 "$tmp/err")"
  else
    bad "$what: rc=$rc (want $want), stderr '$(head -3 "$tmp/err")'"
  fi
}

# The memory limit for the commands that read lying files: far below the
# 16 GB one Linear(65536, 65536) of the lie needs, far above what attn needs
# (the CUDA libraries it links map ~1 GB). ASan reserves terabytes of
# address space, so its builds run without the limit (they never allocate
# the lie once the check is there).
ldd "$ATTN" > "$tmp/ldd" 2>&1 # (not piped into grep -q: pipefail would see ldd's SIGPIPE)
asan=0
grep -q 'libasan' "$tmp/ldd" && asan=1
limited() {
  if [ $asan -eq 1 ]; then "$@"; else (ulimit -v 4000000 && "$@"); fi
}
expect_limited() {
  local want=$1 re=$2 what=$3
  shift 4
  limited "$ATTN" "$@" > "$tmp/out" 2> "$tmp/err"
  local rc=$?
  if [ $rc -eq "$want" ] && grep -qE -- "$re" "$tmp/err"; then
    ok "$what: exit $rc, $(head -1 "$tmp/err")"
  else
    bad "$what: rc=$rc (want $want), stderr '$(head -3 "$tmp/err")'"
  fi
}

make_corpus "$tmp/corpus.txt" 60
cat > "$tmp/cfg.json" << 'JSON'
{"context_length": 16, "emb_dim": 32, "n_heads": 2, "n_layers": 2, "drop_rate": 0.1,
 "batch_size": 4, "max_steps": 4, "eval_interval": 2, "eval_iters": 1,
 "log_interval": 1, "warmup_steps": 2}
JSON
"$ATTN" train --data "$tmp/corpus.txt" --config "$tmp/cfg.json" --threads 1 --out "$tmp/run" \
  > "$tmp/train.log" 2>&1 || {
  bad "training failed: $(tail -3 "$tmp/train.log")"
  exit 1
}
RUN=$tmp/run

# npy FILE DESCR SHAPE VALUES...: a version 1.0 .npy file (no numpy needed).
npy() {
  "$PY" - "$@" << 'PY'
import struct, sys
path, descr, shape, *vals = sys.argv[1:]
h = "{'descr': '%s', 'fortran_order': False, 'shape': %s, }" % (descr, shape)
h = h.encode() + b' ' * (117 - len(h)) + b'\n'  # 10 + 118 bytes: aligned to 64
fmt = {'<i8': 'q', '<f4': 'f'}[descr]
body = struct.pack('<%d%s' % (len(vals), fmt), *[float(v) if fmt == 'f' else int(v) for v in vals])
open(path, 'wb').write(b'\x93NUMPY\x01\x00' + struct.pack('<H', len(h)) + h + body)
PY
}

# edit SRC DST CHANGES...: copy the run folder (or a model file), then edit
# its safetensors files: FILE:KIND:ARG with FILE model or state, KIND meta
# (key=value), model (config key=int) or value (tensor=float: its 3rd value).
edit() {
  "$PY" - "$@" << 'PY'
import json, shutil, struct, sys, os
src, dst, changes = sys.argv[1], sys.argv[2], sys.argv[3:]
def read(p):
    b = open(p, 'rb').read()
    n = struct.unpack('<Q', b[:8])[0]
    return json.loads(b[8:8 + n]), bytearray(b[8 + n:])
def write(p, h, data):
    hb = json.dumps(h).encode()
    hb += b' ' * (-len(hb) % 8)
    open(p, 'wb').write(struct.pack('<Q', len(hb)) + hb + bytes(data))
if os.path.isdir(src):
    shutil.copytree(src, dst, symlinks=True)
    live = os.path.join(dst, 'latest')
    files = {'model': os.path.join(live, 'model.safetensors'),
             'state': os.path.join(live, 'train_state.safetensors')}
else:
    shutil.copy(src, dst)
    files = {'model': dst}
for ch in changes:  # FILE:KIND:ARGS
    which, kind, arg = ch.split(':', 2)
    p = files[which]
    h, d = read(p)
    meta = h['__metadata__']
    if kind == 'meta':      # key=value
        k, v = arg.split('=', 1)
        meta[k] = v
    elif kind == 'model':   # key=int in the model config (state: config.model)
        k, v = arg.split('=', 1)
        if which == 'model':
            c = json.loads(meta['config']); c[k] = int(v); meta['config'] = json.dumps(c)
        else:
            c = json.loads(meta['config']); c['model'][k] = int(v); meta['config'] = json.dumps(c)
    elif kind == 'value':   # tensor=nan|inf: its third float
        name, v = arg.split('=', 1)
        b = h[name]['data_offsets'][0] + 8
        d[b:b + 4] = struct.pack('<f', float(v))
    write(p, h, d)
PY
}

# --- 4. a config that lies about the model's size ------------------------------
edit "$RUN/model.safetensors" "$tmp/huge.safetensors" model:model:emb_dim=65536 model:model:n_layers=4096
EMB="the config says emb_dim 65536, but tensor 'tok_emb.weight' has shape \(39, 32\), not \(39, 65536\)"
expect_limited 1 "huge.safetensors: $EMB" "info: emb_dim 65536 in a 116 KB file" -- info "$tmp/huge.safetensors"
expect_limited 1 "$EMB" "generate: the same" -- generate --checkpoint "$tmp/huge.safetensors" --max-new-tokens 2
expect_limited 1 "$EMB" "viz: the same" -- viz --checkpoint "$tmp/huge.safetensors" --prompt "All" --out "$tmp/v.html"
npy "$tmp/ids.npy" '<i8' '(1, 4)' 0 0 0 0
expect_limited 1 "$EMB" "forward gpt: the same" -- forward gpt --checkpoint "$tmp/huge.safetensors" \
  --input "$tmp/ids.npy" --output "$tmp/logits.npy"
expect_limited 1 "$EMB" "train --init-from: the same" -- train --data "$tmp/corpus.txt" \
  --init-from "$tmp/huge.safetensors" --out "$tmp/ft" --threads 1
edit "$RUN/model.safetensors" "$tmp/layers.safetensors" model:model:n_layers=4096
expect_limited 1 "the config says n_layers 4096, but tensor 'trf_blocks.2.att.W_query.weight' is missing" \
  "n_layers 4096 in a 2-layer file" -- info "$tmp/layers.safetensors"
# --resume builds its trainer from the training state's config.
edit "$RUN" "$tmp/hugestate" state:model:emb_dim=65536 state:model:n_layers=4096
STATE_EMB="train_state.safetensors: the config says emb_dim 65536, but tensor 'exp_avg.tok_emb.weight' has shape"
expect_limited 1 "$STATE_EMB" "train --resume: the state's config says emb_dim 65536" -- \
  train --out "$tmp/hugestate" --resume --threads 1
expect_limited 1 "$STATE_EMB" "info: the same state" -- info "$tmp/hugestate"
rm -rf "$tmp/hugestate" "$tmp/ft"

# --- 5. metadata integers are digits only --------------------------------------
edit "$RUN" "$tmp/neg" model:meta:step=-5 state:meta:step=-5
expect 1 "metadata 'step' is '-5', not an integer in \[0, 9223372036854775807\]" \
  "resume at step -5 is refused" -- train --out "$tmp/neg" --resume --threads 1
expect 1 "model.safetensors: metadata 'step' is '-5'" "info: step -5" -- info "$tmp/neg"
rm -rf "$tmp/neg"
edit "$RUN" "$tmp/adam" state:meta:adamw_step=+3
expect 1 "metadata 'adamw_step' is '\+3'" "resume: adamw_step '+3'" -- train --out "$tmp/adam" --resume --threads 1
rm -rf "$tmp/adam"
edit "$RUN" "$tmp/cur" "state:meta:sampler_cursor= 7"
expect 1 "metadata 'sampler_cursor' is ' 7'" "resume: sampler_cursor ' 7'" -- train --out "$tmp/cur" --resume --threads 1
rm -rf "$tmp/cur"

# --- 10. stdout that cannot be written -----------------------------------------
stdout_case() { # WHAT ARGS...: exit 1 and the message, into /dev/full and into a closed stdout
  local what=$1
  shift
  "$ATTN" "$@" > /dev/full 2> "$tmp/err"
  local rc=$?
  [ $rc -eq 1 ] && grep -q "cannot write to standard output: No space left on device" "$tmp/err" &&
    ok "$what > /dev/full: exit 1, $(tail -1 "$tmp/err")" || bad "$what > /dev/full: rc=$rc $(cat "$tmp/err")"
  "$ATTN" "$@" >&- 2> "$tmp/err"
  rc=$?
  [ $rc -eq 1 ] && grep -q "cannot write to standard output: Bad file descriptor" "$tmp/err" &&
    ok "$what, stdout closed: exit 1" || bad "$what, stdout closed: rc=$rc $(cat "$tmp/err")"
}
stdout_case "generate" generate --checkpoint "$RUN" --max-new-tokens 20
stdout_case "generate (long)" generate --checkpoint "$RUN" --max-new-tokens 20000
stdout_case "rng" rng --seed 1
stdout_case "forward gpt --targets (the loss line)" forward gpt --checkpoint "$RUN" --input "$tmp/ids.npy" \
  --targets "$tmp/ids.npy" --output "$tmp/logits.npy"
stdout_case "--version" --version
stdout_case "--help" --help
stdout_case "generate --help" generate --help
stdout_case "chapter3" chapter3
stdout_case "info" info "$RUN"
"$ATTN" generate --checkpoint "$RUN" --max-new-tokens 20 > "$tmp/gen.txt" 2> "$tmp/err" && [ -s "$tmp/gen.txt" ] &&
  ok "generate to a file still exits 0" || bad "generate to a file: $(cat "$tmp/err")"
# A closed stdout is not handed to a file attn opens: training writes its
# checkpoint intact and says that its log could not be written.
"$ATTN" train --data "$tmp/corpus.txt" --config "$tmp/cfg.json" --threads 1 --out "$tmp/closed" >&- 2> "$tmp/err"
rc=$?
[ $rc -eq 1 ] && grep -q "cannot write to standard output" "$tmp/err" && "$ATTN" info "$tmp/closed" > /dev/null 2>&1 &&
  cmp -s "$tmp/closed/model.safetensors" "$RUN/model.safetensors" &&
  ok "train with stdout closed: exit 1, the checkpoint is the same as with stdout open" ||
  bad "train with stdout closed: rc=$rc $(cat "$tmp/err")"

# --- 12. ranges that depend on the model, one rule ------------------------------
expect 2 "^attn viz: --layer must be an integer in \[0, 1\] \(the model has 2 layers\), not '3'$" \
  "viz --layer 3 of 2 layers" -- viz --checkpoint "$RUN" --prompt "All" --layer 3 --head 0 --svg "$tmp/h.svg"
expect 2 "^attn viz: --head must be an integer in \[0, 1\] \(the model has 2 heads\), not '2'$" \
  "viz --head 2 of 2 heads" -- viz --checkpoint "$RUN" --prompt "All" --layer 0 --head 2 --svg "$tmp/h.svg"
expect 2 "^attn viz: --generate must be an integer in \[0, 15\] \(below the model's context_length\), not '100'$" \
  "viz --generate 100 with context 16" -- viz --checkpoint "$RUN" --prompt "All" --generate 100 --out "$tmp/v.html"
"$ATTN" viz --help | grep -q "at most n_layers - 1" && ok "viz --help states --layer's range" ||
  bad "viz --help: --layer's range"
expect 0 "wrote" "viz --temperature 1e308: a finite number >= 0, as its help says" -- \
  viz --checkpoint "$RUN" --prompt "All" --generate 2 --temperature 1e308 --out "$tmp/v.html"
expect 2 "^attn viz: --temperature must be a number >= 0, not 'inf'$" "viz --temperature inf" -- \
  viz --checkpoint "$RUN" --prompt "All" --generate 2 --temperature inf --out "$tmp/v.html"
rm -f "$tmp/v.html"
for other in "$tmp/same.out" "$tmp/./same.out"; do
  expect 2 "--out and --svg name one file" "viz --out same.out --svg ${other#"$tmp/"}" -- \
    viz --checkpoint "$RUN" --prompt "All" --layer 0 --head 0 --out "$tmp/same.out" --svg "$other"
  [ ! -e "$tmp/same.out" ] && ok "nothing written" || bad "viz wrote $tmp/same.out"
done
: > "$tmp/target.out"
ln -s target.out "$tmp/link.out"
expect 2 "--out and --svg name one file" "viz --out a link to --svg's file" -- \
  viz --checkpoint "$RUN" --prompt "All" --layer 0 --head 0 --out "$tmp/link.out" --svg "$tmp/target.out"
npy "$tmp/x.npy" '<f4' '(1, 6, 3)' $(seq 0 17)
expect 2 "^attn forward: --context-length must be an integer in \[6, [0-9]+\] \(at least the T = 6 tokens of --input\), not '2'$" \
  "forward --context-length 2 below X's 6 tokens" -- forward causal-attention --d-out 2 --input "$tmp/x.npy" --context-length 2
if [ $asan -eq 1 ]; then
  ok "bench out of memory: skipped under ASan (it aborts on a 16 GB request)"
else
  expect_limited 1 "needs about" "bench mha out of memory: refused before allocating (exit 1)" -- \
    bench mha --d-model 65536 --heads 1 --tokens 1 --batch 1 --threads 1
fi

# --- 13. files that are not what they claim ------------------------------------
edit "$RUN" "$tmp/nan" model:value:trf_blocks.1.ff.layers.0.weight=nan
expect 1 "checkpoint $tmp/nan/model.safetensors holds non-finite values \(tensor trf_blocks.1.ff.layers.0.weight\)" \
  "generate: a NaN weight" -- generate --checkpoint "$tmp/nan" --max-new-tokens 20
expect 1 "holds non-finite values \(tensor trf_blocks.1.ff.layers.0.weight\)" "train --resume: a NaN weight" -- \
  train --out "$tmp/nan" --resume --steps 6 --threads 1
rm -rf "$tmp/nan"
edit "$RUN/model.safetensors" "$tmp/inf.safetensors" model:value:tok_emb.weight=-inf
expect 1 "holds non-finite values \(tensor tok_emb.weight\)" "forward gpt: an -inf weight" -- \
  forward gpt --checkpoint "$tmp/inf.safetensors" --input "$tmp/ids.npy" --output "$tmp/logits.npy"
cp "$tmp/x.npy" "$tmp/v9.npy"
printf '\x09' | dd of="$tmp/v9.npy" bs=1 seek=6 conv=notrunc status=none
expect 1 "v9.npy: unsupported .npy version 9.0" "a .npy of version 9.0" -- forward causal-attention --d-out 2 --input "$tmp/v9.npy"
grep -q implausible "$tmp/err" && bad "version 9.0: 'implausible' is still said"
expect 1 "loss.csv is not a weights file attn reads" "loss.csv as a checkpoint" -- generate --checkpoint "$RUN/loss.csv"
grep -q implausible "$tmp/err" && bad "loss.csv: 'implausible' is still said"
expect 1 "loss.csv: not a .npy file" "loss.csv as a .npy" -- forward causal-attention --d-out 2 --input "$RUN/loss.csv"
edit "$RUN/model.safetensors" "$tmp/vocab.safetensors" "model:meta:vocabulary=ba"
expect 1 "vocab.safetensors: bad vocabulary metadata: vocabulary characters must be distinct and sorted" \
  "a bad vocabulary names the file" -- generate --checkpoint "$tmp/vocab.safetensors"

echo "cli_inputs: $fails failed"
[ "$fails" -eq 0 ]
