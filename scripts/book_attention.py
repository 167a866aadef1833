"""The book's chapter-3 attention classes (SelfAttention_v1, SelfAttention_v2,
CausalAttention, MultiHeadAttentionWrapper, MultiHeadAttention) and chapter-4
GPTModel with its parts, for every script that needs PyTorch's side (parity
fixtures, the GPT parity model, the benchmark). The one copy lives in the
Python package, python/attn/book.py; it is loaded here by path, so scripts need
torch 1.13.1 (/usr/bin/python3 on Debian) but not a built libattn.
"""
import importlib.util
import os

_path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python", "attn", "book.py")
_spec = importlib.util.spec_from_file_location("attn_book", _path)
_book = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_book)

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
