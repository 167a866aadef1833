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
        [--tokens 60] [--threads 1 2] [--repeat 3]

Prints one key=value line per run (the book's at each torch thread count,
before and after attn's, which puts the weights both models share on 2 MiB
pages; attn's at attn's default threads), the best (fastest) of --repeat
after an untimed warm-up, then the speed-up over the book's best run and
whether the tokens are the book's (exit 1 when they are not)."""
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


def best_of(gen, model, idx, tokens, repeat):
    gen(model, idx, 4)  # warm-up
    best, out = float("inf"), None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = gen(model, idx, tokens)
        best = min(best, time.perf_counter() - t0)
    return best, out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("book", help="path of ch04/03_kv-cache/gpt_with_kv_cache.py")
    ap.add_argument("--tokens", type=int, default=60)
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    book = load_book(a.book)
    torch.manual_seed(123)
    model = book.GPTModel(CFG)
    model.eval()
    idx = torch.tensor([PROMPT])
    gen = book.generate_text_simple_cached
    peer, want = float("inf"), None

    def book_runs(when):
        nonlocal peer, want
        for t in a.threads:
            torch.set_num_threads(t)
            s, want = best_of(gen, model, idx, a.tokens, a.repeat)
            peer = min(peer, s)
            print(f"case=book_cached {when} threads={t} tokens={a.tokens} best_s={s:.4f} "
                  f"tokens_per_s={a.tokens / s:.1f} torch={torch.__version__}", flush=True)

    book_runs("before")
    swapped = at.swap_model(model)
    s, got = best_of(gen, swapped, idx, a.tokens, a.repeat)
    same = torch.equal(got, want)
    print(f"case=attn_swap_model_cached threads={os.environ.get('OMP_NUM_THREADS', 'default')} "
          f"tokens={a.tokens} best_s={s:.4f} tokens_per_s={a.tokens / s:.1f}", flush=True)
    # attn put the shared weights on 2 MiB pages: the book's model runs on them as well now
    book_runs("after")
    print(f"speedup={peer / s:.2f} (over the book's best run) same_tokens={same}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
