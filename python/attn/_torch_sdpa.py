"""attn.torch.scaled_dot_product_attention and the dtype rule every attn.torch
class shares (imported through attn.torch; needs PyTorch)."""
import warnings

import numpy as np
import torch

from . import _lib
from ._lib import Error, lib

_WARNED = set()  # (what, dtype) pairs already warned about


def check_tensor(t, what, floating=True):
    """t must be a torch.Tensor on the CPU (attn.Error otherwise)."""
    if not isinstance(t, torch.Tensor):
        raise Error(f"{what} must be a torch.Tensor, got {type(t).__name__}")
    if t.device.type != "cpu":
        raise Error(f"{what} must be on the CPU, got {t.device}")
    if floating and not t.is_floating_point():
        raise Error(f"{what} must hold floating point numbers, got {t.dtype}")


def warn_fp32(what, dtype):
    """Say once per (what, dtype) that a dtype attn has no kernels for is
    computed in float32 and cast back."""
    if (what, dtype) in _WARNED:
        return
    _WARNED.add((what, dtype))
    warnings.warn(f"{what}: attn computes {dtype} in float32 and casts the result back "
                  "(said once)", RuntimeWarning, stacklevel=4)


# A tensor's storage, by public API: untyped_storage from torch 2 (where
# storage() warns: TypedStorage is deprecated), storage() before.
_storage_of = getattr(torch.Tensor, "untyped_storage", None) or torch.Tensor.storage


def pin(t, shape):
    """(address, alias) of t if it is a contiguous float32 CPU tensor of
    shape whose storage holds it, else None: every tensor of the user's that
    C reads is pinned right before the call. All is read from one snapshot,
    t.data (a .data replaced by another thread meanwhile changes t, not the
    snapshot); hold the alias until C is done with the address (it holds
    the storage: a .data replaced meanwhile frees nothing C reads)."""
    a = t.data
    if (a.dtype is not torch.float32 or a.shape != shape or not a.is_cpu
            or a.layout is not torch.strided or not a.is_contiguous()):
        return None
    s = _storage_of(a)
    ptr, base = a.data_ptr(), s.data_ptr()
    return (ptr, a) if base <= ptr and ptr + 4 * a.numel() <= base + s.nbytes() else None


def no_double_backward(what):
    """A backward run with create_graph=True (grad mode on) would return
    gradients with no graph: refused."""
    if torch.is_grad_enabled():
        raise Error(f"{what}: attn's backward is not differentiable (create_graph=True, or "
                    "a gradient of a gradient): for second derivatives run the book's PyTorch "
                    "model")


def changed(what):
    """The error for a tensor a backward reads that is not what its forward read."""
    return Error(f"{what} changed between the forward and the backward (its .data "
                 "replaced or its storage resized); run the forward again", "state")


def have_bf16():
    """Whether this CPU runs attn's bf16 kernels (AVX512-BF16)."""
    return lib.attn_precision_check(1, None) == 0


class _SDPA(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, bits, p, scale, precision):
        B, H, T, D = q.shape
        held = _held(q, k, v, q.shape)
        if held is None:  # resized since the checks
            raise Error("scaled_dot_product_attention: query, key or value is outside its "
                        "storage", "shape")
        (q32, _), (k32, _), (v32, _) = held  # addresses (held keeps their storages)
        o = torch.empty((B, H, T, D), dtype=torch.float32)
        lse = torch.empty((B, H, T), dtype=torch.float32)
        _lib.call(lib.attn_h_sdpa_forward, B, H, T, D, q32, k32, v32, scale, p,
                  bits.data_ptr() if bits is not None else None, precision, 0, o.data_ptr(),
                  lse.data_ptr())
        ctx.save_for_backward(q, k, v, o, lse, bits)
        ctx.args = (p, scale, precision)
        return o.to(q.dtype)

    @staticmethod
    def backward(ctx, d_o):
        no_double_backward("scaled_dot_product_attention")
        q, k, v, o, lse, bits = ctx.saved_tensors
        p, scale, precision = ctx.args
        B, H, T, D = o.shape
        held = _held(q, k, v, o.shape)
        if held is None:
            raise changed("scaled_dot_product_attention: query, key or value")
        (q32, _), (k32, _), (v32, _) = held  # addresses (held keeps their storages)
        d_o = d_o.float().contiguous()
        dq, dk, dv = (torch.zeros((B, H, T, D), dtype=torch.float32) for _ in range(3))
        _lib.call(lib.attn_h_sdpa_backward, B, H, T, D, q32, k32, v32, o.data_ptr(),
                  lse.data_ptr(), scale, p, bits.data_ptr() if bits is not None else None,
                  precision, 0, d_o.data_ptr(), dq.data_ptr(), dk.data_ptr(), dv.data_ptr())
        return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype), None, None, None, None


def _held(q, k, v, shape):
    """pin of q, k and v as float32 contiguous tensors of shape, or None."""
    out = []
    for t in (q, k, v):
        held = pin(t.float().contiguous(), shape)
        if held is None:
            return None
        out.append(held)
    return out


def _keep_mask(shape, p):
    """nn.Dropout's draw on the (B, H, Tq, Tk) weights: one bernoulli_(1 - p)
    from PyTorch's default generator (a byte tensor draws the same values)."""
    return torch.empty(shape, dtype=torch.uint8).bernoulli_(1 - p)


def _fused(q, k, v, p, scale):
    B, H, T, _ = q.shape
    bits = None
    if p > 0:
        keep = _keep_mask((B, H, T, T), p)
        bits = torch.from_numpy(np.packbits(keep.numpy().reshape(-1), bitorder="little"))
        del keep
    precision = 0
    if q.dtype == torch.bfloat16 and have_bf16():
        precision = 1
    elif q.dtype != torch.float32:
        warn_fp32("scaled_dot_product_attention", q.dtype)
        return _SDPA.apply(q.float(), k.float(), v.float(), bits, p, scale, 0).to(q.dtype)
    return _SDPA.apply(q, k, v, bits, p, scale, precision)


def _fallback(q, k, v, attn_mask, p, is_causal, scale):
    """The definition in torch ops (float32 for float16/bfloat16 inputs):
    softmax(q k^T * scale + mask) v, dropout as nn.Dropout on the weights."""
    dtype = q.dtype
    if dtype not in (torch.float32, torch.float64):
        warn_fp32("scaled_dot_product_attention", dtype)
        q, k, v = q.float(), k.float(), v.float()
    Tq, Tk = q.shape[-2], k.shape[-2]
    s = (q @ k.transpose(-2, -1)) * (scale if scale is not None else q.shape[-1] ** -0.5)
    if is_causal:  # PyTorch 2: the top-left aligned lower triangle
        s = s.masked_fill(torch.ones(Tq, Tk, dtype=torch.bool).triu(1), float("-inf"))
    if attn_mask is not None:
        if attn_mask.dtype == torch.bool:
            s = s.masked_fill(~attn_mask, float("-inf"))
        else:
            s = s + attn_mask.to(s.dtype)
    w = torch.softmax(s, dim=-1)
    if p > 0:
        w = w * _keep_mask(w.shape, p).to(w.dtype) / (1 - p)
    return (w @ v).to(dtype)


def _check_shapes(q, k, v, enable_gqa):
    if q.dim() < 2 or k.dim() != q.dim() or v.dim() != q.dim():
        raise Error("scaled_dot_product_attention: query, key and value must be (..., L, E), "
                    f"(..., S, E) and (..., S, Ev), got {tuple(q.shape)}, {tuple(k.shape)}, "
                    f"{tuple(v.shape)}", "shape")
    if k.shape[-1] != q.shape[-1] or v.shape[-2] != k.shape[-2] or \
            k.shape[:-3] != q.shape[:-3] or v.shape[:-3] != q.shape[:-3]:
        raise Error("scaled_dot_product_attention: shapes do not fit: query "
                    f"{tuple(q.shape)}, key {tuple(k.shape)}, value {tuple(v.shape)}", "shape")
    if q.dim() >= 3 and (k.shape[-3] != q.shape[-3] or v.shape[-3] != q.shape[-3]):
        H, Hk = q.shape[-3], k.shape[-3]
        if not enable_gqa or v.shape[-3] != Hk or H % Hk:
            raise Error(f"scaled_dot_product_attention: query has {H} heads, key {Hk} and "
                        f"value {v.shape[-3]}: grouped key/value heads need enable_gqa=True and "
                        "a number of query heads divisible by theirs", "shape")
        return H // Hk
    return 1


def _check_args(dropout_p, scale):
    p = _lib.cfloat("scaled_dot_product_attention: dropout_p", dropout_p, 0.0, 1.0)
    if p == 1.0:
        raise _lib.ArgValueError(f"scaled_dot_product_attention: dropout_p must be in [0, 1), "
                                 f"got {p}")
    if scale is not None:  # inf or NaN would make every weight NaN
        scale = _lib.cfloat("scaled_dot_product_attention: scale", scale)
        if not scale > 0:
            raise _lib.ArgValueError(f"scaled_dot_product_attention: scale must be > 0, "
                                     f"got {scale}")
    return p, scale


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0,
                                 is_causal=False, scale=None, enable_gqa=False):
    """softmax(query key^T * scale + mask) value, with dropout on the
    weights: PyTorch 2's torch.nn.functional.scaled_dot_product_attention,
    with its signature and defaults (is_causal=False, as there; before attn
    0.3 this function was causal by default: pass is_causal=True).

    query (..., H, L, E), key (..., Hk, S, E), value (..., Hk, S, Ev): CPU
    tensors of one floating dtype. attn_mask: None, a bool tensor (True:
    take part) or an additive float tensor, broadcastable to (..., H, L, S).
    is_causal: the top-left lower triangle (query i sees keys 0..i).
    scale None: 1/sqrt(E); else > 0. enable_gqa: Hk may divide H (query
    head h uses key/value head h // (H / Hk)). dropout_p > 0 draws the
    (..., H, L, S) mask from PyTorch's default generator as nn.Dropout on the
    weights would. Returns (..., H, L, Ev) in the inputs' dtype.

    In C (attn's fused kernel: no (L, S) matrix, O(L) memory, gradients in
    C) when the problem is causal, unmasked, 4-D with L == S and E == Ev:
    float32, or bfloat16 on a CPU with AVX512-BF16 (bf16 products, fp32
    softmax and sums, as autocast). Grouped heads are repeated for it. Every
    other case runs the definition in torch ops (float64 in float64).
    float16, and bfloat16 without AVX512-BF16, are computed in float32 and
    cast back, with one warning."""
    for name, t in (("query", query), ("key", key), ("value", value)):
        check_tensor(t, f"scaled_dot_product_attention: {name}")
    if not (query.dtype == key.dtype == value.dtype):
        raise Error("scaled_dot_product_attention: query, key and value must have one dtype, "
                    f"got {query.dtype}, {key.dtype}, {value.dtype}")
    group = _check_shapes(query, key, value, enable_gqa)
    p, scale = _check_args(dropout_p, scale)
    if is_causal and attn_mask is not None:
        raise Error("scaled_dot_product_attention: pass attn_mask or is_causal, not both "
                    "(as PyTorch)")
    if isinstance(attn_mask, bool):  # an old positional call: (q, k, v, is_causal)
        raise Error("scaled_dot_product_attention: attn_mask must be a tensor, got a bool; "
                    "the 4th argument is attn_mask as in PyTorch 2: pass is_causal= by name")
    if attn_mask is not None:
        check_tensor(attn_mask, "scaled_dot_product_attention: attn_mask",
                     floating=attn_mask.dtype != torch.bool)
    if group > 1:
        key = key.repeat_interleave(group, dim=-3)
        value = value.repeat_interleave(group, dim=-3)
    fused = (is_causal and query.dim() == 4 and query.shape == key.shape == value.shape
             and query.dtype in (torch.float32, torch.bfloat16, torch.float16))
    if fused:
        for n, d in zip("BHTD", query.shape):
            _lib.cint(f"scaled_dot_product_attention: query's {n}", d, 1)
        return _fused(query, key, value, p, 0.0 if scale is None else float(scale))
    return _fallback(query, key, value, attn_mask, p, is_causal, scale)
