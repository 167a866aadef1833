"""attn from Python: the C library's chapter-3 modules, fused attention, GPT,
trainer and attention pages, on numpy arrays (pure Python over libattn.so).

    import attn
    m = attn.MultiHeadAttention(3, 2, 6, 0.0, num_heads=2, seed=123)
    y = m(x); dx = m.backward(dy); m.grads, m.state_dict()
    gpt = attn.GPT.load("runs/tiny"); gpt.generate("ROMEO:", 100, seed=7)
    attn.train(preset="tiny", data="data/tinyshakespeare.txt", out="runs/tiny")
    attn.viz(gpt, "ROMEO:")                 # the attn viz page inline in Jupyter

attn.torch (imported on its own: it needs PyTorch) has the book's classes as
torch.nn.Module drop-ins and scaled_dot_product_attention; attn.book holds the
book's own PyTorch classes, attn.variants the GPTModel with the model variant
keys (norm, act, tie_weights, pos_emb). Every failure is an attn.Error."""
try:
    import numpy  # noqa: F401
except ImportError as e:  # name the package, not only the import that failed
    raise ImportError(f"attn needs numpy ({e}): pip install numpy, or on Debian "
                      "apt-get install python3-numpy", name="numpy") from e
from ._lib import Error
from ._lib import lib as _c
from ._lib import library_path as library  # the libattn.so in use
from .modules import (CausalAttention, MultiHeadAttention, MultiHeadAttentionWrapper,
                      SelfAttention_v1, SelfAttention_v2)
from . import seed004
from .gpt import GPT, FinetuneResult, TrainResult, train
from .viz import View, viz

__version__ = _c.attn_version().decode()


def set_num_threads(n, blas_threads=1):
    """Threads for attn's computations (OpenMP and OMP_NUM_THREADS,
    process-wide, as torch.set_num_threads). blas_threads=1 also sets OpenBLAS to one thread,
    as the attn program runs (attn's products are then split over the OpenMP
    threads); on Debian numpy and torch share that OpenBLAS. 0 leaves it."""
    from ._lib import cint
    n = cint("set_num_threads: n", n, 1)
    blas_threads = cint("set_num_threads: blas_threads", blas_threads, 0)
    import os
    os.environ["OMP_NUM_THREADS"] = str(n)  # what the kernels read (and child processes)
    _c.attn_h_set_threads(n, blas_threads)


def get_num_threads():
    """The OpenMP threads attn's computations use now."""
    return _c.attn_h_get_threads()


__all__ = ["Error", "SelfAttention_v1", "SelfAttention_v2", "CausalAttention",
           "MultiHeadAttentionWrapper", "MultiHeadAttention", "seed004", "GPT", "train",
           "TrainResult", "FinetuneResult", "viz", "View", "set_num_threads", "get_num_threads",
           "library", "__version__"]
