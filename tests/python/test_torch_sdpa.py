"""attn.torch.scaled_dot_product_attention with PyTorch 2's signature against
the definition written in torch ops here (softmax(q k^T * scale + mask) v, in
float64): causal and not, bool and additive masks, L != S, grouped key/value
heads, dropout masks from PyTorch's generator; forward within 1e-5 and the
gradients of query, key and value within 1e-5; other dtypes."""
import warnings

import pytest
import torch

import attn
import attn.torch as at


def err(a, b):
    return float((a.detach().double() - b.detach().double()).abs().max()
                 / max(1.0, float(b.detach().abs().max())))


def definition(q, k, v, mask=None, causal=False, scale=None, keep=None, p=0.0):
    q, k, v = q.double(), k.double(), v.double()
    if k.shape[-3] != q.shape[-3]:
        g = q.shape[-3] // k.shape[-3]
        k, v = k.repeat_interleave(g, dim=-3), v.repeat_interleave(g, dim=-3)
    s = (q @ k.transpose(-2, -1)) * (scale if scale is not None else q.shape[-1] ** -0.5)
    L, S = q.shape[-2], k.shape[-2]
    if causal:
        s = s.masked_fill(~torch.ones(L, S, dtype=torch.bool).tril(), float("-inf"))
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf")) if mask.dtype == torch.bool else s + mask.double()
    w = torch.softmax(s, dim=-1)
    if keep is not None:
        w = w * keep.double() / (1 - p)
    return w @ v


def check(shapes, grads=True, **kw):
    g = torch.Generator().manual_seed(sum(map(sum, shapes)))
    q, k, v = (torch.randn(*s, generator=g).requires_grad_() for s in shapes)
    mask = kw.pop("mask", None)
    o = at.scaled_dot_product_attention(q, k, v, attn_mask=mask, **kw)
    refs = [t.detach().clone().double().requires_grad_() for t in (q, k, v)]
    ref = definition(*refs, mask=mask, causal=kw.get("is_causal", False), scale=kw.get("scale"))
    assert o.shape == ref.shape and o.dtype == q.dtype
    assert err(o, ref) <= 1e-5
    if grads:
        do = torch.randn(o.shape, generator=g)
        o.backward(do)
        ref.backward(do.double())
        for a, b in zip((q, k, v), refs):
            assert err(a.grad, b.grad) <= 1e-5


def test_defaults_are_pytorch_2s_non_causal():
    check([(2, 3, 9, 8)] * 3)


@pytest.mark.parametrize("B, H, Hk, L, S, E", [(2, 4, 4, 17, 17, 16), (1, 6, 2, 33, 33, 8),
                                               (2, 4, 1, 5, 11, 8)])
def test_causal_and_grouped(B, H, Hk, L, S, E):
    check([(B, H, L, E), (B, Hk, S, E), (B, Hk, S, E)], is_causal=True, enable_gqa=Hk != H,
          scale=0.2)


def test_masks_bool_and_additive():
    g = torch.Generator().manual_seed(3)
    keep = torch.rand(7, 10, generator=g) > 0.3
    keep[:, 0] = True  # every row keeps a key
    check([(2, 2, 7, 8), (2, 2, 10, 8), (2, 2, 10, 4)], mask=keep)
    check([(2, 2, 7, 8), (2, 2, 10, 8), (2, 2, 10, 4)], mask=torch.randn(2, 1, 7, 10, generator=g))
    check([(3, 7, 8), (3, 10, 8), (3, 10, 8)], mask=keep)  # 3-D, no heads


def test_dropout_draws_nn_dropouts_masks():
    p = 0.25
    for causal, shapes in ((True, [(2, 3, 20, 8)] * 3), (False, [(2, 3, 6, 8), (2, 3, 9, 8),
                                                                 (2, 3, 9, 8)])):
        q, k, v = (torch.randn(*s) for s in shapes)
        torch.manual_seed(4)
        o = at.scaled_dot_product_attention(q, k, v, dropout_p=p, is_causal=causal)
        torch.manual_seed(4)
        keep = torch.empty(q.shape[:-1] + (k.shape[-2],)).bernoulli_(1 - p)
        assert err(o, definition(q, k, v, causal=causal, keep=keep, p=p)) <= 1e-5


def test_dtypes():
    q = torch.randn(1, 2, 12, 8, dtype=torch.float64, requires_grad=True)
    o = at.scaled_dot_product_attention(q, q, q, is_causal=True)
    assert o.dtype == torch.float64 and err(o, definition(q, q, q, causal=True)) <= 1e-12
    o.sum().backward()
    assert q.grad.dtype == torch.float64
    h = q.detach().half()
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        for _ in range(3):
            o = at.scaled_dot_product_attention(h, h, h, is_causal=True)
    assert o.dtype == torch.float16 and err(o, definition(q, q, q, causal=True)) <= 5e-3
    assert len([w for w in said if "float16" in str(w.message)]) <= 1, "said once"


def test_an_old_positional_is_causal_is_named():
    q = torch.zeros(1, 2, 4, 8)
    with pytest.raises(attn.Error, match="pass is_causal= by name"):
        at.scaled_dot_product_attention(q, q, q, True)
    with pytest.raises(attn.Error, match=r"x must be \(B, T, 8\)"):
        at.GroupedQueryAttention(8, 8, 2, 1)(torch.zeros(4, 8))
