"""attn.torch: the book's chapter-3 classes as torch.nn.Module drop-ins whose
forward and backward run attn's C code, and a fused causal
scaled_dot_product_attention.

    import torch, attn.torch as at
    torch.manual_seed(123)
    mha = at.MultiHeadAttention(d_in, d_out, context_length, 0.1, num_heads=2)

SelfAttention_v1, SelfAttention_v2, CausalAttention,
MultiHeadAttentionWrapper and MultiHeadAttention take the book's constructor
arguments and create the book's parameters and buffers in the book's order,
so torch.manual_seed gives the book's weights and state_dicts load both ways.
Their forward and backward go through a torch.autograd.Function into the
library (the weights are copied in on each forward; the C module keeps the
activations its backward needs; a backward whose forward is no longer the
module's last one recomputes it first). In training mode with dropout the
masks are drawn from PyTorch's default generator exactly as the book's
nn.Dropout draws them (one bernoulli_(1 - p) per dropped tensor, in the same
order), so after the same torch.manual_seed the outputs are equal on any
PyTorch build; they cost one byte per element of the dropped (B, [H,] T, T)
weights. The modules run float32 tensors on the CPU; anything else raises
attn.Error."""
import ctypes

import numpy as np
import torch
import torch.nn as nn

from . import _lib
from ._lib import Error, lib
from .modules import Core, _c_array

__all__ = ["SelfAttention_v1", "SelfAttention_v2", "CausalAttention",
           "MultiHeadAttentionWrapper", "MultiHeadAttention", "scaled_dot_product_attention",
           "swap_attention"]


class _Bridge:
    """The C module behind one attn.torch module."""

    def __init__(self, key):
        kind, d_in, d_out, heads, ctx, p, bias = key
        self.key = key
        self.core = Core(kind, d_in, d_out, heads, ctx, p, bias, seed=None,
                         what=f"attn.torch {kind}")
        self.names = [q.name for q in self.core.params]
        self.paths = [tuple(n.split(".")) for n in self.names]
        self.forwards = 0  # which forward the C module's saved activations belong to

    def __deepcopy__(self, memo):
        return None  # never shared: a copied module makes its own

    def run(self, x, masks, params, B, T):
        y = torch.empty(x.shape[:-1] + (self.core.out_dim,), dtype=torch.float32)
        with self.core.hold():  # the weights stay the C module's until its forward is done
            for q, t in zip(self.core.params, params):
                ctypes.memmove(q.data, t.contiguous().data_ptr(), q.numel * 4)
            if masks is None:
                self.core.forward(x.data_ptr(), B, T, y.data_ptr(), False)
            else:
                self.core.forward(x.data_ptr(), B, T, y.data_ptr(), True, 0, masks.data_ptr(),
                                  masks.numel())
        self.forwards += 1
        return y, self.forwards

    def grads(self, x, dy, masks, params, B, T, token, need_x):
        if token != self.forwards:  # another forward ran since: restore this one's activations
            self.run(x, masks, params, B, T)
        dy = dy.contiguous()
        if dy.dtype != torch.float32:
            dy = dy.float()
        dx = torch.zeros_like(x) if need_x else None  # the C backward accumulates
        with self.core.hold():
            self.core.backward(x.data_ptr(), B, T, dy.data_ptr(),
                               dx.data_ptr() if need_x else None)
            return dx, [torch.from_numpy(_c_array(q.grad, q.shape).copy())
                        for q in self.core.params]


class _AttnFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, bridge, masks, B, T, x, *params):
        y, token = bridge.run(x, masks, params, B, T)
        ctx.bridge, ctx.masks, ctx.shape, ctx.token = bridge, masks, (B, T), token
        ctx.save_for_backward(x, *params)
        return y

    @staticmethod
    def backward(ctx, dy):
        x, *params = ctx.saved_tensors
        need = ctx.needs_input_grad
        dx, grads = ctx.bridge.grads(x, dy, ctx.masks, params, *ctx.shape, ctx.token, need[4])
        return (None, None, None, None, dx, *[g if n else None for g, n in zip(grads, need[5:])])


def _check_tensor(t, what):
    if not isinstance(t, torch.Tensor):
        raise Error(f"{what} must be a torch.Tensor, got {type(t).__name__}")
    if t.device.type != "cpu":
        raise Error(f"{what} must be on the CPU, got {t.device}")


class _AttnModule(nn.Module):
    """The forward every attn.torch class shares."""

    _kind, _rank = None, 3

    def _config(self):  # (d_in, d_out, heads, context_length, qkv_bias)
        raise NotImplementedError

    def _dropout_p(self):
        return 0.0

    def _mask_shapes(self, B, T):
        return []

    def __getstate__(self):  # pickling: the C module is made again on use
        state = self.__dict__.copy()
        state.pop("_attn_bridge", None)
        return state

    def forward(self, x):
        name = type(self).__name__
        _check_tensor(x, f"{name}: x")
        d_in, d_out, heads, ctx, bias = self._config()
        if x.dim() != self._rank or x.shape[-1] != d_in:
            want = f"(T, {d_in})" if self._rank == 2 else f"(B, T, {d_in})"
            raise Error(f"{name}: x must be {want}, got {tuple(x.shape)}", "shape")
        if x.dtype != torch.float32:
            raise Error(f"{name}: x must be float32 (the parameters' dtype), got {x.dtype}")
        p = self._dropout_p()
        key = (self._kind, d_in, d_out, heads, ctx, p, bias)
        bridge = self.__dict__.get("_attn_bridge")
        if bridge is None or bridge.key != key:
            bridge = self.__dict__["_attn_bridge"] = _Bridge(key)
        params = []
        for n, path in zip(bridge.names, bridge.paths):
            t = self
            for a in path:  # "W_query.weight" -> self.W_query.weight
                t = getattr(t, a)
            if t.dtype != torch.float32 or t.device.type != "cpu":
                raise Error(f"{name}: parameter {n} must be a float32 CPU tensor, "
                            f"got {t.dtype} on {t.device}")
            params.append(t)
        B, T = (1, x.shape[0]) if self._rank == 2 else (x.shape[0], x.shape[1])
        masks = None
        if self.training and p > 0:
            # nn.Dropout: torch.empty_like(w).bernoulli_(1 - p), one tensor per
            # dropout in forward order; a byte tensor draws the same values.
            masks = torch.cat([torch.empty(s, dtype=torch.uint8).bernoulli_(1 - p).reshape(-1)
                               for s in self._mask_shapes(B, T)])
        return _AttnFunction.apply(bridge, masks, B, T, x.contiguous(), *params)


class SelfAttention_v1(_AttnModule):
    _kind, _rank = "self-attention-v1", 2

    def __init__(self, d_in, d_out):
        super().__init__()
        self.W_query = nn.Parameter(torch.rand(d_in, d_out))
        self.W_key = nn.Parameter(torch.rand(d_in, d_out))
        self.W_value = nn.Parameter(torch.rand(d_in, d_out))

    def _config(self):
        d_in, d_out = self.W_query.shape
        return d_in, d_out, 1, 1, False


class SelfAttention_v2(_AttnModule):
    _kind, _rank = "self-attention-v2", 2

    def __init__(self, d_in, d_out, qkv_bias=False):
        super().__init__()
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)

    def _config(self):
        d_out, d_in = self.W_query.weight.shape
        return d_in, d_out, 1, 1, self.W_query.bias is not None


class CausalAttention(_AttnModule):
    _kind = "causal-attention"

    def __init__(self, d_in, d_out, context_length, dropout, qkv_bias=False):
        super().__init__()
        self.d_out = d_out
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.dropout = nn.Dropout(dropout)
        self.register_buffer(
            "mask", torch.triu(torch.ones(context_length, context_length), diagonal=1)
        )

    def _config(self):
        d_out, d_in = self.W_query.weight.shape
        return d_in, d_out, 1, self.mask.shape[0], self.W_query.bias is not None

    def _dropout_p(self):
        return float(self.dropout.p)

    def _mask_shapes(self, B, T):
        return [(B, T, T)]


class MultiHeadAttentionWrapper(_AttnModule):
    _kind = "mha-wrapper"

    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        super().__init__()
        self.heads = nn.ModuleList(
            [
                CausalAttention(d_in, d_out, context_length, dropout, qkv_bias)
                for _ in range(num_heads)
            ]
        )

    def _config(self):
        d_in, d_out, _, ctx, bias = self.heads[0]._config()
        return d_in, d_out, len(self.heads), ctx, bias

    def _dropout_p(self):
        ps = {float(h.dropout.p) for h in self.heads}
        if len(ps) != 1:
            raise Error(f"MultiHeadAttentionWrapper: the heads' dropout rates differ: {sorted(ps)}")
        return ps.pop()

    def _mask_shapes(self, B, T):
        return [(B, T, T)] * len(self.heads)


class MultiHeadAttention(_AttnModule):
    _kind = "mha"

    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        super().__init__()
        assert d_out % num_heads == 0, "d_out must be divisible by num_heads"
        self.d_out = d_out
        self.num_heads = num_heads
        self.head_dim = d_out // num_heads
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.out_proj = nn.Linear(d_out, d_out)
        self.dropout = nn.Dropout(dropout)
        self.register_buffer(
            "mask", torch.triu(torch.ones(context_length, context_length), diagonal=1)
        )

    def _config(self):
        d_out, d_in = self.W_query.weight.shape
        return d_in, d_out, self.num_heads, self.mask.shape[0], self.W_query.bias is not None

    def _dropout_p(self):
        return float(self.dropout.p)

    def _mask_shapes(self, B, T):
        return [(B, self.num_heads, T, T)]


def swap_attention(model):
    """Replace every book MultiHeadAttention inside model (e.g. the book's
    GPTModel) by an attn.torch.MultiHeadAttention with the same configuration,
    weights and training mode. Returns model."""
    from . import book
    for parent in list(model.modules()):
        for child_name, child in list(parent.named_children()):
            if isinstance(child, book.MultiHeadAttention):
                d_out, d_in = child.W_query.weight.shape
                new = MultiHeadAttention(d_in, d_out, child.mask.shape[0], child.dropout.p,
                                         child.num_heads, child.W_query.bias is not None)
                new.load_state_dict(child.state_dict())
                new.train(child.training)
                setattr(parent, child_name, new)
    return model


# ---------------------------------------------------------------- fused SDPA

class _SDPA(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, bits, p, scale, precision):
        B, H, T, D = q.shape
        q32, k32, v32 = (t.float().contiguous() for t in (q, k, v))
        o = torch.empty((B, H, T, D), dtype=torch.float32)
        lse = torch.empty((B, H, T), dtype=torch.float32)
        _lib.call(lib.attn_h_sdpa_forward, B, H, T, D, q32.data_ptr(), k32.data_ptr(),
                  v32.data_ptr(), scale, p, bits.data_ptr() if bits is not None else None,
                  precision, 0, o.data_ptr(), lse.data_ptr())
        ctx.save_for_backward(q, k, v, o, lse, bits)
        ctx.args = (p, scale, precision)
        return o.to(q.dtype)

    @staticmethod
    def backward(ctx, d_o):
        q, k, v, o, lse, bits = ctx.saved_tensors
        p, scale, precision = ctx.args
        B, H, T, D = q.shape
        q32, k32, v32 = (t.float().contiguous() for t in (q, k, v))
        d_o = d_o.float().contiguous()
        dq, dk, dv = (torch.zeros((B, H, T, D), dtype=torch.float32) for _ in range(3))
        _lib.call(lib.attn_h_sdpa_backward, B, H, T, D, q32.data_ptr(), k32.data_ptr(),
                  v32.data_ptr(), o.data_ptr(), lse.data_ptr(), scale, p,
                  bits.data_ptr() if bits is not None else None, precision, 0, d_o.data_ptr(),
                  dq.data_ptr(), dk.data_ptr(), dv.data_ptr())
        return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype), None, None, None, None


def scaled_dot_product_attention(q, k, v, is_causal=True, dropout_p=0.0, scale=None):
    """softmax(q k^T * scale + causal mask) v with dropout on the weights, on
    (B, H, T, D) tensors (PyTorch 2's signature; causal only), by attn's fused
    kernel: no (T, T) matrix, O(T) memory, gradients for q, k and v.

    float32, or bfloat16 on a CPU with AVX512-BF16 (bf16 products, fp32
    softmax and sums, as autocast; output bfloat16). scale None: 1/sqrt(D).
    dropout_p > 0 draws the mask from PyTorch's default generator as
    nn.Dropout on the (B, H, T, T) weights would (one byte per element while
    drawing, kept packed at one bit for the backward)."""
    for name, t in (("q", q), ("k", k), ("v", v)):
        _check_tensor(t, f"scaled_dot_product_attention: {name}")
    if q.dim() != 4 or k.shape != q.shape or v.shape != q.shape:
        raise Error("scaled_dot_product_attention: q, k and v must be (B, H, T, D) of one shape, "
                    f"got {tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}", "shape")
    if not (q.dtype == k.dtype == v.dtype) or q.dtype not in (torch.float32, torch.bfloat16):
        raise Error("scaled_dot_product_attention: q, k and v must all be float32 or all "
                    f"bfloat16, got {q.dtype}, {k.dtype}, {v.dtype}")
    if not is_causal:
        raise Error("scaled_dot_product_attention: attn's fused kernel is causal only "
                    "(is_causal=True)")
    p = _lib.cfloat("scaled_dot_product_attention: dropout_p", dropout_p, 0.0, 1.0)
    if p == 1.0:
        raise _lib.ArgValueError(f"scaled_dot_product_attention: dropout_p must be in [0, 1), "
                                 f"got {p}")
    if scale is not None:  # inf or NaN would make every weight NaN
        scale = _lib.cfloat("scaled_dot_product_attention: scale", scale)
        if not scale > 0:
            raise _lib.ArgValueError(f"scaled_dot_product_attention: scale must be > 0, "
                                     f"got {scale}")
    for n, d in zip("BHTD", q.shape):
        _lib.cint(f"scaled_dot_product_attention: q's {n}", d, 1)
    precision = 1 if q.dtype == torch.bfloat16 else 0
    bits = None
    if p > 0:
        B, H, T, _ = q.shape
        keep = torch.empty((B, H, T, T), dtype=torch.uint8).bernoulli_(1 - p)
        bits = torch.from_numpy(np.packbits(keep.numpy().reshape(-1), bitorder="little"))
        del keep
    return _SDPA.apply(q, k, v, bits, p, 0.0 if scale is None else float(scale), precision)
