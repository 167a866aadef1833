#!/usr/bin/env python3
"""Peer timing for `attn bench generate --preset gpt2-124m` (issue 34): the
book's KV-cached generator (rasbt/LLMs-from-scratch ch04/03_kv-cache,
gpt_with_kv_cache_optimized.py: GPTModel and generate_text_simple_cached)
at GPT_CONFIG_124M, one sequence, random weights, greedy, on PyTorch's CPU
at each thread count. The book's file stays outside this repository: give
its path.

    /usr/bin/python3 bench/gen_torch_kv.py PATH/gpt_with_kv_cache_optimized.py \
        [--tokens 64] [--threads 1 2] [--repeat 3]

Prints one key=value line per thread count, as attn bench generate does:
tokens_per_s is --tokens over the best (fastest) of --repeat runs of
generate_text_simple_cached from a one-token prompt (its prefill is that one
token, then --tokens one-token steps; an untimed warm-up run first)."""
import argparse
import importlib.util
import os
import sys
import time
import types


def load_book(path):
    # The book's file imports tiktoken at the top but the generator never
    # uses it: a stand-in when it is not installed.
    if "tiktoken" not in sys.modules:
        try:
            import tiktoken  # noqa: F401
        except ImportError:
            sys.modules["tiktoken"] = types.ModuleType("tiktoken")
    spec = importlib.util.spec_from_file_location("book_kv", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("book", help="path of gpt_with_kv_cache_optimized.py")
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    import torch

    book = load_book(a.book)
    cfg = {"vocab_size": 50257, "context_length": 1024, "emb_dim": 768, "n_heads": 12,
           "n_layers": 12, "drop_rate": 0.1, "qkv_bias": False, "kv_window_size": 1024}
    torch.manual_seed(123)
    model = book.GPTModel(cfg)
    model.eval()
    idx = torch.tensor([[0]], dtype=torch.long)
    blas = os.environ.get("OPENBLAS_CORETYPE", "unset")
    for t in a.threads:
        torch.set_num_threads(t)
        book.generate_text_simple_cached(model, idx, 4)  # warm-up
        best = float("inf")
        for _ in range(a.repeat):
            t0 = time.perf_counter()
            out = book.generate_text_simple_cached(model, idx, a.tokens)
            best = min(best, time.perf_counter() - t0)
        n = out.shape[1] - idx.shape[1]
        print(f"case=gen_torch_kv model=gpt2-124m precision=fp32 threads={t} tokens={n} "
              f"best_s={best:.4f} tokens_per_s={n / best:.1f} torch={torch.__version__} "
              f"OPENBLAS_CORETYPE={blas}", flush=True)


if __name__ == "__main__":
    main()
