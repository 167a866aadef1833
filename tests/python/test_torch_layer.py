"""attn.torch against the book's classes (attn.book) in PyTorch: after the same
torch.manual_seed the same weights; forward within 1e-6 and gradients within
1e-5 (relative to max(1, max |PyTorch's|)), training-mode dropout equal (the
masks come from PyTorch's generator), state_dicts both ways, the book's
GPTModel with attn.torch.MultiHeadAttention in place; and
scaled_dot_product_attention against a reference softmax over odd shapes,
with dropout, and by finite differences."""
import copy
import pickle
import warnings

import numpy as np
import pytest
import torch

import attn
import attn.book as book
import attn.torch as at

CASES = [
    ("SelfAttention_v1", (3, 2), (6, 3)),
    ("SelfAttention_v2", (3, 2, True), (6, 3)),
    ("CausalAttention", (3, 4, 6, 0.3, True), (2, 6, 3)),
    ("MultiHeadAttentionWrapper", (3, 2, 6, 0.5, 3, True), (2, 6, 3)),
    ("MultiHeadAttention", (4, 6, 8, 0.4, 2, True), (2, 7, 4)),
    ("MultiHeadAttention", (16, 24, 80, 0.1, 3, False), (2, 70, 16)),
]
IDS = [f"{c[0]}-{i}" for i, c in enumerate(CASES)]


def err(a, b):
    a, b = (t.detach().double() if isinstance(t, torch.Tensor) else torch.tensor(t) for t in (a, b))
    return float((a - b).abs().max() / max(1.0, float(b.abs().max())))


def pair(name, args, seed=123):
    torch.manual_seed(seed)
    ours = getattr(at, name)(*args)
    torch.manual_seed(seed)
    ref = getattr(book, name)(*args)
    return ours, ref


@pytest.mark.parametrize("name, args, shape", CASES, ids=IDS)
@pytest.mark.parametrize("training", [False, True], ids=["eval", "train"])
def test_against_book(name, args, shape, training):
    ours, ref = pair(name, args)
    assert [(n, p.shape) for n, p in ours.named_parameters()] == \
        [(n, p.shape) for n, p in ref.named_parameters()]
    for (n, p), (_, q) in zip(ours.named_parameters(), ref.named_parameters()):
        assert torch.equal(p, q), f"{n}: manual_seed gives the book's weights"
    ours.train(training)
    ref.train(training)
    x = torch.rand(shape)
    xa, xb = x.clone().requires_grad_(), x.clone().requires_grad_()
    torch.manual_seed(7)
    ya = ours(xa)
    torch.manual_seed(7)
    yb = ref(xb)
    after = torch.rand(1)  # the generator is left where the book's leaves it
    torch.manual_seed(7)
    ref(x)
    assert torch.equal(after, torch.rand(1))
    assert ya.shape == yb.shape and ya.dtype == torch.float32
    assert err(ya, yb) <= 1e-6
    dy = torch.rand(ya.shape)
    ya.backward(dy)
    yb.backward(dy)
    assert err(xa.grad, xb.grad) <= 1e-5
    for (n, p), (_, q) in zip(ours.named_parameters(), ref.named_parameters()):
        assert err(p.grad, q.grad) <= 1e-5, n
    if training and "SelfAttention" not in name:
        ours.eval()
        assert not torch.allclose(ya, ours(x)), "dropout changed nothing"


@pytest.mark.parametrize("name, args, shape", CASES, ids=IDS)
def test_state_dict_both_ways(name, args, shape):
    ours, ref = pair(name, args, seed=1)
    torch.manual_seed(2)
    other = getattr(book, name)(*args)
    assert list(ours.state_dict()) == list(other.state_dict())
    ours.load_state_dict(other.state_dict())  # book -> attn.torch
    ref.load_state_dict(ours.state_dict())    # attn.torch -> book
    x = torch.rand(shape)
    for m in (ours, ref, other):
        m.eval()
    with torch.no_grad():
        assert err(ours(x), other(x)) <= 1e-6 and err(ref(x), other(x)) == 0


def test_a_backward_after_another_forward_recomputes():
    ours, ref = pair("MultiHeadAttention", (4, 8, 10, 0.3, 2))
    x1, x2 = torch.rand(2, 9, 4, requires_grad=True), torch.rand(3, 5, 4)
    r1 = x1.detach().clone().requires_grad_()
    torch.manual_seed(3)
    y1 = ours(x1)
    ours(x2)  # the C module now holds this forward's activations
    torch.manual_seed(3)
    ref(r1).backward(torch.ones(2, 9, 8))
    y1.backward(torch.ones(2, 9, 8))  # same masks replayed
    assert err(x1.grad, r1.grad) <= 1e-5
    for (n, p), (_, q) in zip(ours.named_parameters(), ref.named_parameters()):
        assert err(p.grad, q.grad) <= 1e-5, n


def test_copies_pickles_optimizers():
    ours, ref = pair("MultiHeadAttention", (4, 8, 10, 0.0, 2))
    x = torch.rand(2, 6, 4)
    ours(x)
    twin = copy.deepcopy(ours)
    again = pickle.loads(pickle.dumps(ours))
    assert torch.equal(twin(x), ours(x)) and torch.equal(again(x), ours(x))
    # Weights changed in place by an optimizer reach the C module.
    opt_a = torch.optim.SGD(ours.parameters(), lr=0.5)
    opt_b = torch.optim.SGD(ref.parameters(), lr=0.5)
    for _ in range(3):
        for m, o in ((ours, opt_a), (ref, opt_b)):
            o.zero_grad()
            m(x).square().sum().backward()
            o.step()
    assert err(ours(x), ref(x)) <= 1e-5
    with torch.no_grad():
        assert err(ours(x), ref(x)) <= 1e-5


def test_gpt_with_attn_attention_trains_like_the_book():
    cfg = {"vocab_size": 11, "context_length": 12, "emb_dim": 16, "n_heads": 2, "n_layers": 2,
           "drop_rate": 0.0, "qkv_bias": False}
    torch.manual_seed(0)
    ref = book.GPTModel(cfg)
    ours = copy.deepcopy(ref)
    assert at.swap_attention(ours) == 2
    assert sum(isinstance(m, at.MultiHeadAttention) for m in ours.modules()) == 2
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(0, 11, (3, 12), generator=g)
    tg = torch.randint(0, 11, (3, 12), generator=g)
    opts = [torch.optim.AdamW(m.parameters(), lr=1e-2) for m in (ours, ref)]
    for _ in range(5):
        losses = []
        for m, o in zip((ours, ref), opts):
            o.zero_grad()
            loss = torch.nn.functional.cross_entropy(m(ids).flatten(0, 1), tg.flatten())
            loss.backward()
            o.step()
            losses.append(loss.item())
        assert abs(losses[0] - losses[1]) <= 1e-5


def test_bad_inputs():
    m = at.MultiHeadAttention(3, 4, 6, 0.0, 2)
    with pytest.raises(attn.Error, match=r"x must be \(B, T, 3\), got \(2, 6, 4\)"):
        m(torch.zeros(2, 6, 4))
    with pytest.raises(attn.Error, match="x must be torch.float32.*got torch.float64"):
        m(torch.zeros(2, 6, 3, dtype=torch.float64))
    with pytest.raises(attn.Error, match="T = 7 exceeds context_length = 6"):
        m(torch.zeros(1, 7, 3))
    with pytest.raises(attn.Error, match="must be a torch.Tensor"):
        m(np.zeros((1, 6, 3), np.float32))
    with pytest.raises(AssertionError, match="d_out must be divisible by num_heads"):
        at.MultiHeadAttention(3, 5, 6, 0.0, 2)  # the book's own check
    m.double()
    with pytest.raises(attn.Error, match=r"x must be torch.float64 \(the parameters' dtype\)"):
        m(torch.zeros(1, 6, 3))


# ------------------------------------------------------------------- SDPA


def reference(q, k, v, scale=None, keep=None, p=0.0):
    """Naive causal softmax attention (float64): the definition."""
    q, k, v = q.double(), k.double(), v.double()
    T = q.shape[-2]
    s = (q @ k.transpose(-2, -1)) * (scale if scale is not None else q.shape[-1] ** -0.5)
    s = s.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf"))
    w = torch.softmax(s, dim=-1)
    if keep is not None:
        w = w * keep / (1 - p)
    return w @ v


@pytest.mark.parametrize("B, H, T, D, scale", [
    (1, 1, 1, 16, None),      # one token
    (2, 3, 70, 16, None),     # T not a multiple of the 64-row tile
    (1, 2, 129, 64, 0.05),    # another scale
    (2, 1, 33, 128, None),
    (1, 2, 65, 48, None),
])
def test_sdpa_against_reference(B, H, T, D, scale):
    g = torch.Generator().manual_seed(T * D)
    q, k, v = (torch.randn(B, H, T, D, generator=g).requires_grad_() for _ in range(3))
    o = at.scaled_dot_product_attention(q, k, v, is_causal=True, scale=scale)
    qr, kr, vr = (t.detach().clone().double().requires_grad_() for t in (q, k, v))
    ref = reference(qr, kr, vr, scale)
    assert o.shape == (B, H, T, D) and o.dtype == torch.float32
    assert err(o, ref) <= 2e-6
    do = torch.randn(B, H, T, D, generator=g)
    o.backward(do)
    ref.backward(do.double())
    for a, b in ((q, qr), (k, kr), (v, vr)):
        assert err(a.grad, b.grad) <= 1e-5


def test_sdpa_dropout_masks_from_torch():
    B, H, T, D, p = 2, 3, 40, 16, 0.3
    q, k, v = (torch.randn(B, H, T, D).requires_grad_() for _ in range(3))
    torch.manual_seed(11)
    o = at.scaled_dot_product_attention(q, k, v, dropout_p=p, is_causal=True)
    torch.manual_seed(11)  # nn.Dropout on the (B, H, T, T) weights draws this
    keep = torch.empty(B, H, T, T).bernoulli_(1 - p)
    qr, kr, vr = (t.detach().clone().double().requires_grad_() for t in (q, k, v))
    ref = reference(qr, kr, vr, keep=keep.double(), p=p)
    assert err(o, ref) <= 2e-6
    o.sum().backward()
    ref.sum().backward()
    for a, b in ((q, qr), (k, kr), (v, vr)):
        assert err(a.grad, b.grad) <= 1e-5


def test_sdpa_finite_differences():
    g = torch.Generator().manual_seed(5)
    q, k, v = (torch.randn(1, 2, 7, 16, generator=g).requires_grad_() for _ in range(3))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # float32 inputs (gradcheck prefers float64)
        assert torch.autograd.gradcheck(
            lambda a, b, c: at.scaled_dot_product_attention(a, b, c, is_causal=True, scale=0.3), (q, k, v),
            eps=1e-2, atol=2e-3, rtol=1e-2)


def test_sdpa_bfloat16():
    from attn import _lib
    have = _lib.lib.attn_precision_check(1, None) == 0  # AVX512-BF16 here?
    q, k, v = (torch.randn(1, 2, 50, 32).requires_grad_() for _ in range(3))
    qb, kb, vb = (t.detach().bfloat16().requires_grad_() for t in (q, k, v))
    if not have:  # computed in float32, cast back, said once
        with pytest.warns(RuntimeWarning, match="in float32"):
            o = at.scaled_dot_product_attention(qb, kb, vb, is_causal=True)
    else:
        o = at.scaled_dot_product_attention(qb, kb, vb, is_causal=True)
    assert o.dtype == torch.bfloat16
    ref = reference(qb.float(), kb.float(), vb.float())
    assert err(o.float(), ref) <= 2e-2
    o.float().sum().backward()
    assert qb.grad.dtype == torch.bfloat16 and torch.isfinite(qb.grad.float()).all()


def test_sdpa_bad_inputs():
    q = torch.zeros(1, 2, 4, 8)
    with pytest.raises(attn.Error, match="shapes do not fit"):
        at.scaled_dot_product_attention(q, q, torch.zeros(1, 2, 5, 8))
    with pytest.raises(attn.Error, match="must have one dtype"):
        at.scaled_dot_product_attention(q, q, q.double())
    with pytest.raises(attn.Error, match="need enable_gqa=True"):
        at.scaled_dot_product_attention(q, q[:, :1], q[:, :1])
    with pytest.raises(attn.Error, match="not both"):
        at.scaled_dot_product_attention(q, q, q, attn_mask=torch.ones(4, 4).bool(),
                                        is_causal=True)
    with pytest.raises(attn.Error, match=r"dropout_p must be in \[0, 1\)"):
        at.scaled_dot_product_attention(q, q, q, dropout_p=1.0)
    with pytest.raises(attn.Error, match="scale must be > 0"):
        at.scaled_dot_product_attention(q, q, q, scale=-1.0)
