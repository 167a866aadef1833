"""The numpy layer (attn.SelfAttention_v1 ... attn.seed004.MultiHeadAttention)
against the book's PyTorch classes: same seed, same weights; forward within
1e-6, gradients within 1e-5 (max |diff| over max(1, max |PyTorch's|): a bias
gradient summing hundreds of rows is ~100, where float32's own step is 8e-6),
dropout masks equal (the torch-cpu stream is
what Debian's PyTorch draws); state_dicts both ways; bad inputs raise
attn.Error with a message; C memory is freed by close(), with and collection."""
import gc

import numpy as np
import pytest
import torch

import attn
import attn.book as book
from conftest import INPUTS
import gen_seed004_fixtures as s4

# Dropout masks match PyTorch's only for the build's own stream; Debian's
# python3-torch has no MKL (torch-cpu).
STREAM = "torch-mkl" if torch.backends.mkl.is_available() else "torch-cpu"
SEED004 = {"embedding_dim": 6, "heads_num": 2, "head_size": 3, "context_size": 7,
           "dropout_rate": 0.3, "use_bias": True}

# (numpy class, book class, constructor args, input shape)
CASES = [
    (attn.SelfAttention_v1, book.SelfAttention_v1, (3, 2), (6, 3)),
    (attn.SelfAttention_v2, book.SelfAttention_v2, (3, 2, True), (6, 3)),
    (attn.CausalAttention, book.CausalAttention, (3, 4, 6, 0.3, True), (2, 6, 3)),
    (attn.MultiHeadAttentionWrapper, book.MultiHeadAttentionWrapper, (3, 2, 6, 0.5, 3, True),
     (2, 6, 3)),
    (attn.MultiHeadAttention, book.MultiHeadAttention, (4, 6, 8, 0.4, 2, True), (2, 7, 4)),
    (attn.MultiHeadAttention, book.MultiHeadAttention, (5, 8, 70, 0.2, 4, False), (3, 66, 5)),
    (attn.seed004.AttentionHead, s4.AttentionHead, (SEED004,), (2, 7, 6)),
    (attn.seed004.MultiHeadAttention, s4.MultiHeadAttention, (SEED004,), (2, 5, 6)),
]
IDS = [f"{c[0].__module__.split('.')[-1]}.{c[0].__name__}-{i}" for i, c in enumerate(CASES)]


def err(a, b):
    """max |a - b|, relative to the reference's magnitude when that is above 1."""
    b = np.asarray(b, np.float64)
    return float(np.abs(np.asarray(a, np.float64) - b).max() / max(1.0, np.abs(b).max()))


def run_both(ours_cls, book_cls, args, shape, seed, training):
    m = ours_cls(*args, seed=seed, **({} if "SelfAttention" in ours_cls.__name__
                                      else {"stream": STREAM}))
    m.train(training)
    torch.manual_seed(seed)
    ref = book_cls(*args)
    ref.train(training)
    g = np.random.default_rng(seed)
    x = g.random(shape).astype(np.float32)
    y = m.forward(x)
    xt = torch.from_numpy(x.copy()).requires_grad_()
    yt = ref(xt)  # draws its dropout masks after the constructor, as ours does
    dy = g.random(y.shape).astype(np.float32)
    dx = m.backward(dy)
    yt.backward(torch.from_numpy(dy))
    return m, ref, y, yt.detach().numpy(), dx, xt.grad.numpy()


@pytest.mark.parametrize("ours_cls, book_cls, args, shape", CASES, ids=IDS)
@pytest.mark.parametrize("training", [False, True], ids=["eval", "train"])
def test_against_pytorch(ours_cls, book_cls, args, shape, training):
    m, ref, y, yt, dx, dxt = run_both(ours_cls, book_cls, args, shape, 123, training)
    assert y.shape == yt.shape and y.dtype == np.float32
    assert err(y, yt) <= 1e-6
    assert err(dx, dxt) <= 1e-5
    grads = m.grads
    assert list(grads) == [n for n, _ in ref.named_parameters()]
    for n, p in ref.named_parameters():
        assert err(grads[n], p.grad.numpy()) <= 1e-5, n
    if training and "SelfAttention" not in ours_cls.__name__:
        # Dropout did drop something, so the equality above compared masks.
        _, _, y_eval, _, _, _ = run_both(ours_cls, book_cls, args, shape, 123, False)
        assert not np.allclose(y, y_eval), "dropout changed nothing"


def test_backward_gradients_are_not_accumulated():
    m = attn.MultiHeadAttention(3, 4, 6, 0.0, 2, seed=1)
    x = np.random.default_rng(0).random((2, 6, 3), np.float32)
    y = m(x)
    m.backward(np.ones_like(y))
    first = m.grads
    m.backward(np.ones_like(y))
    for n, g in m.grads.items():
        assert np.array_equal(g, first[n]), n


def test_book_tables():
    """seed 000 In [39]: MultiHeadAttention(3, 2, 6, 0.0, num_heads=2) on the
    stacked inputs, first row 0.3190 0.4858."""
    x = np.array([INPUTS, INPUTS], np.float32)
    with attn.MultiHeadAttention(3, 2, 6, 0.0, num_heads=2, seed=123) as m:
        y = m(x)
    assert np.allclose(y[0, 0], [0.3190, 0.4858], atol=5e-5)


@pytest.mark.parametrize("ours_cls, book_cls, args, shape", CASES, ids=IDS)
def test_state_dict_both_ways(ours_cls, book_cls, args, shape):
    m = ours_cls(*args, seed=5)
    torch.manual_seed(77)
    ref = book_cls(*args)
    sd = m.state_dict()
    assert list(sd) == list(ref.state_dict())  # parameters and the mask buffers, same order
    ref.load_state_dict({k: torch.from_numpy(v) for k, v in sd.items()})  # strict
    for k, v in ref.state_dict().items():
        assert np.array_equal(v.numpy(), sd[k]), k
    torch.manual_seed(78)
    other = book_cls(*args)
    m.load_state_dict(other.state_dict())  # torch tensors, strict
    for k, v in other.state_dict().items():
        assert np.array_equal(m.state_dict()[k], v.numpy()), k
    x = np.random.default_rng(3).random(shape, np.float32)
    m.eval()
    other.eval()
    assert err(m(x), other(torch.from_numpy(x)).detach().numpy()) <= 1e-6


def test_inputs_without_copy_and_converted():
    m = attn.CausalAttention(3, 2, 6, 0.0, seed=1)
    x = np.random.default_rng(1).random((2, 6, 3)).astype(np.float32)
    y = m(x)
    assert m._x is x  # C-contiguous float32: handed to C as it is
    x64 = x.astype(np.float64)
    assert np.array_equal(m(x64), y) and m._x is not x64
    big = np.random.default_rng(2).random((2, 6, 6)).astype(np.float32)
    view = big[:, :, ::2]  # not contiguous
    assert np.array_equal(m(view), m(np.ascontiguousarray(view)))
    assert np.array_equal(m(x.tolist()), y)  # lists too
    assert np.array_equal(m((x * 4).astype(np.int64)), m((x * 4).astype(np.int64).astype(np.float32)))


def test_bad_inputs():
    m = attn.MultiHeadAttention(3, 4, 6, 0.0, 2, seed=1)
    x = np.zeros((2, 6, 3), np.float32)
    with pytest.raises(attn.Error, match=r"x must be \(B, T, 3\), got \(2, 6, 4\)"):
        m(np.zeros((2, 6, 4), np.float32))
    with pytest.raises(attn.Error, match=r"x must be \(B, T, 3\), got \(6, 3\)"):
        m(np.zeros((6, 3), np.float32))
    with pytest.raises(attn.Error, match="dtype complex128"):
        m(x.astype(complex))
    with pytest.raises(attn.Error, match="dtype bool"):
        m(x > 0)
    with pytest.raises(attn.Error, match="dtype <U1"):
        m(np.full((2, 6, 3), "a"))
    with pytest.raises(attn.Error, match="T = 7 exceeds context_length = 6"):
        m(np.zeros((2, 7, 3), np.float32))
    with pytest.raises(attn.Error, match="backward: call forward first"):
        m.backward(np.zeros((2, 6, 4), np.float32))
    m(x)
    with pytest.raises(attn.Error, match=r"dy must be shaped as the output \(2, 6, 4\)"):
        m.backward(np.zeros((2, 6, 3), np.float32))
    with pytest.raises(attn.Error, match=r"W_query.weight must be \(4, 3\), got \(3, 4\)"):
        m.load_state_dict({**m.state_dict(), "W_query.weight": np.zeros((3, 4))})
    with pytest.raises(attn.Error, match=r"missing \['out_proj.bias'\]"):
        m.load_state_dict({k: v for k, v in m.state_dict().items() if k != "out_proj.bias"})
    with pytest.raises(attn.Error, match="d_out .5. must be divisible by num_heads .2."):
        attn.MultiHeadAttention(3, 5, 6, 0.0, 2)
    with pytest.raises(attn.Error, match="dropout"):
        attn.CausalAttention(3, 2, 6, 1.5)
    with pytest.raises(attn.Error, match="d_in must be an integer"):
        attn.CausalAttention("3", 2, 6, 0.0)
    with pytest.raises(attn.Error, match="stream must be one of torch-cpu, torch-mkl"):
        attn.CausalAttention(3, 2, 6, 0.0, stream="mt")
    with pytest.raises(attn.Error, match="config needs the key 'heads_num'"):
        attn.seed004.MultiHeadAttention({k: v for k, v in SEED004.items() if k != "heads_num"})
    with pytest.raises(attn.Error) as e:
        attn.SelfAttention_v1(3, 2).forward(np.zeros((1, 6, 3)))
    assert e.value.status == "shape" and isinstance(e.value, RuntimeError)


def test_close_with_and_collection():
    m = attn.CausalAttention(3, 2, 6, 0.0, seed=1)
    m.close()
    m.close()  # twice is fine
    assert m.closed
    for call in (lambda: m(np.zeros((1, 6, 3))), m.state_dict, lambda: m.grads):
        with pytest.raises(attn.Error, match="CausalAttention is closed"):
            call()
    with attn.MultiHeadAttention(3, 4, 6, 0.0, 2, seed=1) as m2:
        m2(np.zeros((1, 6, 3)))
    assert m2.closed
    m3 = attn.MultiHeadAttention(3, 4, 6, 0.0, 2, seed=1)
    finalizer = m3._core._finalizer
    assert finalizer.alive
    del m3
    gc.collect()
    assert not finalizer.alive  # the C module was destroyed


def test_version_and_seed(attn_bin):
    from conftest import run_attn
    assert run_attn("--version").stdout.strip() == f"attn {attn.__version__}"
    a = attn.CausalAttention(3, 2, 6, 0.0)
    assert isinstance(a.seed, int) and 0 <= a.seed < 2**32
    c = attn.CausalAttention(3, 2, 6, 0.0, seed=a.seed)
    assert all(np.array_equal(v, c.state_dict()[k]) for k, v in a.state_dict().items())
