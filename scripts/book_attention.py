"""The book's chapter-3 attention classes (SelfAttention_v1, SelfAttention_v2,
CausalAttention, MultiHeadAttentionWrapper, MultiHeadAttention) and chapter-4
GPTModel with its parts, for every script that needs PyTorch's side (parity
fixtures, the GPT parity model, the benchmark), and `variants`, the GPTModel
with attn's variant keys (norm, act, tie_weights, pos_emb). The one copy lives
in the Python package, python/attn/book.py and variants.py; they are loaded
here by path, so scripts need torch 1.13.1 (/usr/bin/python3 on Debian) but
not a built libattn.
"""
import importlib.util
import os
import sys

_dir = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python", "attn")


def _load(name, file):
    spec = importlib.util.spec_from_file_location(name, os.path.join(_dir, file))
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # variants.py imports attn_book
    spec.loader.exec_module(module)
    return module


_book = _load("attn_book", "book.py")
variants = _load("attn_variants", "variants.py")

SelfAttention_v1 = _book.SelfAttention_v1
SelfAttention_v2 = _book.SelfAttention_v2
CausalAttention = _book.CausalAttention
MultiHeadAttentionWrapper = _book.MultiHeadAttentionWrapper
MultiHeadAttention = _book.MultiHeadAttention
LayerNorm = _book.LayerNorm
GELU = _book.GELU
FeedForward = _book.FeedForward
TransformerBlock = _book.TransformerBlock
GPTModel = _book.GPTModel
