#!/usr/bin/env python3
"""The book's KV-cached generation on attn (issue 47, item 5): ch04/03's
generate_text_simple_cached (rasbt/LLMs-from-scratch,
ch04/03_kv-cache/gpt_with_kv_cache.py) on the book's own GPTModel and on
attn.torch.swap_model of that same model (its whole forward(idx,
use_cache=True) on attn's C KV cache), in one process: GPT_CONFIG_124M,
random weights (torch.manual_seed(123)), one sequence, greedy, the book's
prompt "Hello, I am" (its four GPT-2 ids). The book's file stays outside
this repository: give its path.

    /usr/bin/python3 bench/gptmodel_kv.py PATH/gpt_with_kv_cache.py \
        [--tokens 60] [--threads 1 2] [--rounds 5]

Untimed warm-ups first (attn's puts the weights both models share on 2 MiB
pages, so both run on them), then --rounds rounds, each the book's at every
torch thread count then attn's (attn's default threads), alternating so a
change of the machine's load meets both: one key=value line per run, the
best of each, the speed-up of attn's best over the book's best and whether
the tokens are the book's (exit 1 when they are not)."""
import argparse
import importlib.util
import os
import sys
import time
import types

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import attn.torch as at  # noqa: E402  (attn before torch: OpenMP's spin, OpenBLAS's kernels)
import torch  # noqa: E402

PROMPT = [15496, 11, 314, 716]  # "Hello, I am" (GPT-2's tokenizer), the book's main()
CFG = {"vocab_size": 50257, "context_length": 1024, "emb_dim": 768, "n_heads": 12,
       "n_layers": 12, "drop_rate": 0.1, "qkv_bias": False}


def load_book(path):
    # The book's file imports tiktoken at the top; the generator never uses it.
    if "tiktoken" not in sys.modules:
        try:
            import tiktoken  # noqa: F401
        except ImportError:
            sys.modules["tiktoken"] = types.ModuleType("tiktoken")
    spec = importlib.util.spec_from_file_location("book_kv", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def timed(gen, model, idx, tokens):
    t0 = time.perf_counter()
    out = gen(model, idx, tokens)
    return time.perf_counter() - t0, out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("book", help="path of ch04/03_kv-cache/gpt_with_kv_cache.py")
    ap.add_argument("--tokens", type=int, default=60)
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--rounds", type=int, default=5)
    a = ap.parse_args()
    book = load_book(a.book)
    torch.manual_seed(123)
    model = book.GPTModel(CFG)
    model.eval()
    swapped = at.swap_model(model)
    idx = torch.tensor([PROMPT])
    gen = book.generate_text_simple_cached
    # warm-ups (attn's first puts the weights both models share on 2 MiB pages)
    gen(swapped, idx, 4)
    for t in a.threads:
        torch.set_num_threads(t)
        gen(model, idx, 4)
    best = {}
    same = True
    for r in range(1, a.rounds + 1):
        for t in a.threads:
            torch.set_num_threads(t)
            s, want = timed(gen, model, idx, a.tokens)
            best[("book", t)] = min(best.get(("book", t), s), s)
            print(f"round={r} case=book_cached threads={t} tokens={a.tokens} seconds={s:.4f} "
                  f"tokens_per_s={a.tokens / s:.1f} torch={torch.__version__}", flush=True)
        s, got = timed(gen, swapped, idx, a.tokens)
        same = same and torch.equal(got, want)
        best["attn"] = min(best.get("attn", s), s)
        print(f"round={r} case=attn_swap_model_cached threads="
              f"{os.environ.get('OMP_NUM_THREADS', 'default')} tokens={a.tokens} seconds={s:.4f} "
              f"tokens_per_s={a.tokens / s:.1f}", flush=True)
    peer = min(v for k, v in best.items() if k != "attn")
    for k, v in best.items():
        print(f"best {k if k == 'attn' else f'book threads={k[1]}'}: {v:.4f} s "
              f"({a.tokens / v:.1f} tokens/s)")
    print(f"speedup={peer / best['attn']:.2f} (the book's best over attn's best) "
          f"same_tokens={same}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
