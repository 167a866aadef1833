"""The masked loss against PyTorch: F.cross_entropy(..., ignore_index=-100),
reduction mean. attn's C cross-entropy (attn/cross_entropy.h, through
ctypes) gives torch's loss and logits gradient; attn.GPT.loss of the
book's GPTModel gives torch's loss with chapter 6's targets (-100 but at
the last position) and chapter 7's (-100 after the text); every target
ignored is nan in both."""
import ctypes
import math

import numpy as np
import torch
import torch.nn.functional as F

import attn
import attn.book as book
from attn._lib import lib

VOCAB = "\n !',.:;?ACEFILMNORSTWabcdefghiklmnoprstuvwyz"
CFG = {"vocab_size": len(VOCAB), "context_length": 16, "emb_dim": 24, "n_heads": 3,
       "n_layers": 2, "drop_rate": 0.0, "qkv_bias": True}
F32P = ctypes.POINTER(ctypes.c_float)
I32P = ctypes.POINTER(ctypes.c_int32)


def _c_cross_entropy(logits, targets):
    lib.attn_cross_entropy_forward.restype = ctypes.c_float
    N, V = logits.shape
    lse = np.zeros(N, np.float32)
    d = np.zeros_like(logits)
    lg = np.ascontiguousarray(logits, np.float32)
    tg = np.ascontiguousarray(targets, np.int32)
    loss = lib.attn_cross_entropy_forward(lg.ctypes.data_as(F32P), tg.ctypes.data_as(I32P),
                                          lse.ctypes.data_as(F32P), ctypes.c_size_t(N),
                                          ctypes.c_size_t(V))
    lib.attn_cross_entropy_backward(lg.ctypes.data_as(F32P), tg.ctypes.data_as(I32P),
                                    lse.ctypes.data_as(F32P), ctypes.c_float(1.0),
                                    d.ctypes.data_as(F32P), ctypes.c_size_t(N), ctypes.c_size_t(V))
    return loss, d


def test_the_cross_entropy_is_torchs():
    g = torch.Generator().manual_seed(5)
    logits = torch.randn(70, 33, generator=g) * 3
    targets = torch.randint(0, 33, (70,), generator=g)
    targets[::3] = -100
    x = logits.clone().requires_grad_()
    want = F.cross_entropy(x, targets, ignore_index=-100)
    want.backward()
    loss, d = _c_cross_entropy(logits.numpy(), targets.numpy())
    assert abs(loss - want.item()) <= 1e-6 * abs(want.item())
    assert np.abs(d - x.grad.numpy()).max() <= 1e-7
    assert np.all(d[::3] == 0)


def test_every_target_ignored_is_nan_as_torch():
    logits = torch.randn(4, 5)
    targets = torch.full((4,), -100)
    assert math.isnan(F.cross_entropy(logits, targets, ignore_index=-100).item())
    loss, d = _c_cross_entropy(logits.numpy(), targets.numpy())
    assert math.isnan(loss) and np.all(d == 0)


def test_the_gpts_masked_loss_is_the_books():
    torch.manual_seed(3)
    model = book.GPTModel(CFG).eval()
    gpt = attn.GPT.from_torch(model, VOCAB)
    ids = torch.randint(0, len(VOCAB), (3, 12))
    with torch.no_grad():
        logits = model(ids)
    last = torch.full((3, 12), -100)  # chapter 6: the last position's class
    last[:, -1] = torch.tensor([1, 0, 7])
    padded = torch.randint(0, len(VOCAB), (3, 12))  # chapter 7: -100 after the text
    padded[0, 9:] = -100
    padded[2, 4:] = -100
    for tg in (last, padded):
        want = F.cross_entropy(logits.flatten(0, 1), tg.flatten(), ignore_index=-100).item()
        got = gpt.loss(ids.numpy(), tg.numpy())
        assert abs(got - want) <= 1e-5 * abs(want), (got, want)
    assert math.isnan(gpt.loss(ids.numpy(), np.full((3, 12), -100)))
