"""attn.torch in dtypes other than float32 (issue 33): the chapter-3 modules
after .double(), .half() and .to(torch.bfloat16) compute in float32 in C and
cast back, saying so once per class and dtype; outputs and gradients come back
in the module's dtype, close to the book's class in that dtype; the input must
have the parameters' dtype. scaled_dot_product_attention's dtypes:
test_torch_sdpa.py."""
import warnings

import pytest
import torch

import attn
import attn.book as book
import attn.torch as at
from attn import _torch_sdpa


def err(a, b):
    return float((a.detach().double() - b.detach().double()).abs().max()
                 / max(1.0, float(b.detach().abs().max())))


@pytest.mark.parametrize("dtype, tol", [(torch.float64, 1e-6), (torch.float16, 5e-3),
                                        (torch.bfloat16, 3e-2)])
def test_modules_in_other_dtypes(dtype, tol):
    _torch_sdpa._WARNED.clear()
    torch.manual_seed(3)
    ours = at.MultiHeadAttention(8, 8, 12, 0.0, 2).to(dtype)
    torch.manual_seed(3)
    ref = book.MultiHeadAttention(8, 8, 12, 0.0, 2).double()
    x = torch.rand(2, 10, 8, dtype=torch.float64)
    xa = x.clone().to(dtype).requires_grad_()
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        y = ours(xa)
        ours(xa)
    assert [str(w.message) for w in said] == \
        [f"MultiHeadAttention: attn computes {dtype} in float32 and casts the result back "
         "(said once)"]
    assert y.dtype == dtype and err(y, ref(x)) <= tol
    y.float().sum().backward()
    assert xa.grad.dtype == dtype and ours.W_query.weight.grad.dtype == dtype
    xr = x.detach().clone().requires_grad_()
    ref(xr).sum().backward()
    assert err(xa.grad, xr.grad) <= 10 * tol
    assert err(ours.W_query.weight.grad, ref.W_query.weight.grad) <= 10 * tol


def test_the_input_must_have_the_parameters_dtype():
    m = at.CausalAttention(3, 4, 6, 0.0).double()
    with pytest.raises(attn.Error, match=r"x must be torch.float64 \(the parameters' dtype\), "
                                         "got torch.float32"):
        m(torch.zeros(1, 6, 3))
    with pytest.raises(attn.Error, match="x must be torch.float64"):
        m(torch.zeros(1, 6, 3, dtype=torch.int64))
