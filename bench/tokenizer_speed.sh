#!/usr/bin/env bash
# GPT-2 tokenizer speed on one core: attn's BPE (C, PCRE2 JIT; through
# Python's attn.tokenizer, one call per text) against tiktoken's gpt2
# encoding (npm's WASM package), same run, alternating, best of 5 each;
# and the ids compared. MB/s = text bytes / seconds of one encode.
#   bench/tokenizer_speed.sh [NODE_MODULES_PARENT] [TEXT...]
# NODE_MODULES_PARENT: a folder holding node_modules/tiktoken
# (`npm install tiktoken`); without it only attn is timed.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
node_dir=${1:-}
shift || true
texts=("$@")
[ ${#texts[@]} -gt 0 ] || texts=("$root/data/tinyshakespeare.txt" "$root/data/the-verdict.txt")
echo "# $(date -u +%FT%TZ) $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), load $(cut -d' ' -f1-3 /proc/loadavg)"
for t in "${texts[@]}"; do
  for round in 1 2; do
    PYTHONPATH=$root/python taskset -c 0 /usr/bin/python3 - "$t" << 'PY'
import sys, time, attn.tokenizer
enc = attn.tokenizer.get_encoding('gpt2')
text = open(sys.argv[1], encoding='utf-8').read()
n = len(text.encode('utf-8'))
best = min((lambda t0: (enc.encode(text, allowed_special={'<|endoftext|>'}), time.perf_counter() - t0)[1])(time.perf_counter()) for _ in range(5))
ids = enc.encode(text, allowed_special={'<|endoftext|>'})
open('/tmp/attn_tok_ids.txt', 'w').write(' '.join(map(str, ids)))
print(f"attn     {sys.argv[1].split('/')[-1]}: {n / best / 1e6:.1f} MB/s ({n} bytes, {len(ids)} tokens, best {best * 1000:.1f} ms)")
PY
    if [ -n "$node_dir" ]; then
      NODE_PATH=$node_dir/node_modules taskset -c 0 node - "$t" << 'JS'
const { get_encoding } = require('tiktoken');
const fs = require('fs');
const enc = get_encoding('gpt2');
const text = fs.readFileSync(process.argv[2], 'utf8');
const n = Buffer.byteLength(text, 'utf8');
let best = Infinity, ids;
for (let i = 0; i < 5; i++) {
  const t0 = process.hrtime.bigint();
  ids = enc.encode(text, ['<|endoftext|>']);
  const s = Number(process.hrtime.bigint() - t0) / 1e9;
  if (s < best) best = s;
}
const same = fs.readFileSync('/tmp/attn_tok_ids.txt', 'utf8') === Array.from(ids).join(' ');
console.log(`tiktoken ${process.argv[2].split('/').pop()}: ${(n / best / 1e6).toFixed(1)} MB/s (${ids.length} tokens, best ${(best * 1000).toFixed(1)} ms); ids equal to attn's: ${same}`);
JS
    fi
  done
done
