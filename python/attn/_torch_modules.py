"""attn.torch's attention classes (chapters 3 and 4) and swap_attention:
see attn.torch, which exports them. Apart from attn.torch so that the whole
model (_torch_gpt) builds on them without the two importing each other."""
import inspect

import torch
import torch.nn as nn

from . import _torch_bind as _bind
from . import _torch_sdpa as _sdpa
from . import _torch_tree as _tree
from ._lib import Error, call, lib
from ._torch_sdpa import scaled_dot_product_attention
from .modules import Core

__all__ = ["SelfAttention_v1", "SelfAttention_v2", "CausalAttention",
           "MultiHeadAttentionWrapper", "MultiHeadAttention", "GroupedQueryAttention",
           "MultiHeadAttentionWithSWA", "swap_attention"]


class _Bridge:
    """The C module behind one attn.torch module, run on the torch tensors'
    own storage (_torch_bind: bound right before every C call)."""

    def __init__(self, key):
        kind, d_in, d_out, heads, ctx, p, bias = key
        self.key = key
        self.what = f"attn.torch {kind}"
        self.core = Core(kind, d_in, d_out, heads, ctx, p, bias, seed=None, what=self.what)
        self.names = [q.name for q in self.core.params]
        self.shapes = [q.shape for q in self.core.params]
        self.paths = [tuple(n.split(".")) for n in self.names]
        self.forwards = 0  # which forward the C module's saved activations belong to

    def __deepcopy__(self, memo):
        return None  # never shared: a copied module makes its own

    def refuse(self, i, t):
        return Error(f"{self.what}: parameter {self.names[i]} is {tuple(t.shape)} {t.dtype}, "
                     f"the module takes {self.shapes[i]} (its W_query's configuration)", "shape")

    def changed(self, i, t):
        return _sdpa.changed(f"{self.what}: parameter {self.names[i]}")

    def pin_x(self, x, B, T, backward):
        """(address, alias) of x, checked right before C reads it (_sdpa.pin)."""
        d_in = self.key[1]
        held = _sdpa.pin(x, (B, T, d_in) if x.dim() == 3 else (T, d_in))
        if held is None:
            if backward:
                raise _sdpa.changed(f"{self.what}: x")
            raise Error(f"{self.what}: x must be a float32 ({B}, {T}, {d_in}) tensor inside "
                        f"its storage, got {tuple(x.shape)} {x.dtype}", "shape")
        return held

    def run(self, x, masks, params, B, T, backward=False):
        """The C forward on params' storage: (y, which forward, the
        addresses bound and x's, for the backward to compare)."""
        y = torch.empty(x.shape[:-1] + (self.core.out_dim,), dtype=torch.float32)
        with self.core.hold():  # bound and run with no other thread between
            held = self.pin_x(x, B, T, backward)
            ptrs, aliases = _bind.bind(lib.attn_module_bind, self.core.handle, self.names,
                                       self.shapes, params, None,
                                       self.changed if backward else self.refuse)
            if masks is None:
                self.core.forward(held[0], B, T, y.data_ptr(), False)
            else:
                self.core.forward(held[0], B, T, y.data_ptr(), True, 0, masks.data_ptr(),
                                  masks.numel())
            del aliases  # held through the C call
        self.forwards += 1
        return y, (self.forwards, held[0], ptrs)

    def grads(self, x, dy, masks, params, B, T, token, need_x):
        _sdpa.no_double_backward(self.what)
        forward, x_ptr, ptrs = token
        _bind.unchanged(params, ptrs, self.shapes, self.changed)
        if x.data_ptr() != x_ptr:
            raise _sdpa.changed(f"{self.what}: x")
        dy = dy.contiguous()
        if dy.dtype != torch.float32:
            dy = dy.float()
        dx = torch.zeros_like(x) if need_x else None  # the C backward accumulates
        grads = [torch.zeros(s, dtype=torch.float32) for s in self.shapes]
        with self.core.hold():
            if forward != self.forwards:  # another forward ran since: this one's activations
                self.run(x, masks, params, B, T, True)
            held = self.pin_x(x, B, T, True)
            _, aliases = _bind.bind(lib.attn_module_bind, self.core.handle, self.names,
                                    self.shapes, params, grads, self.changed)
            try:
                self.core.backward_bound(held[0], B, T, dy.data_ptr(),
                                         dx.data_ptr() if need_x else None)
            finally:  # the gradients are the caller's: C's own again
                call(lib.attn_module_bind, self.core.handle, None, None, len(self.shapes))
            del aliases
        return dx, grads


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
    _sdpa.check_tensor(t, what, floating=False)


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
        state.pop("_attn_masks", None)
        return state

    def forward(self, x):
        """x (B, T, d_in) ((T, d_in) for the self-attention classes) -> the
        context vectors (B, T, d_out), by attn's C module (forward and
        backward in C). x has the parameters' dtype: float32 runs as it is,
        other dtypes are computed in float32 and cast back (one warning)."""
        name = type(self).__name__
        _check_tensor(x, f"{name}: x")
        # the tree first: a wrapped or replaced part raises, naming it
        _tree.check_attention(self, name, CausalAttention,
                              self.__dict__.setdefault("_attn_masks", {}))
        try:
            d_in, d_out, heads, ctx, bias = self._config()
        except (AttributeError, TypeError, ValueError) as e:
            raise Error(f"{name}: not the book's {name} ({e})") from None
        if x.dim() != self._rank or x.shape[-1] != d_in:
            want = f"(T, {d_in})" if self._rank == 2 else f"(B, T, {d_in})"
            raise Error(f"{name}: x must be {want}, got {tuple(x.shape)}", "shape")
        p = self._dropout_p()
        key = (self._kind, d_in, d_out, heads, ctx, p, bias)
        bridge = self.__dict__.get("_attn_bridge")
        if bridge is None or bridge.key != key:
            bridge = self.__dict__["_attn_bridge"] = _Bridge(key)
        params = self._params(bridge, name)
        dtype = params[0].dtype
        if x.dtype != dtype:
            raise Error(f"{name}: x must be {dtype} (the parameters' dtype), got {x.dtype}")
        if dtype != torch.float32:
            _sdpa.warn_fp32(name, dtype)
            params = [t.float() for t in params]
        B, T = (1, x.shape[0]) if self._rank == 2 else (x.shape[0], x.shape[1])
        masks = None
        if self.training and p > 0:
            # nn.Dropout: torch.empty_like(w).bernoulli_(1 - p), one tensor per
            # dropout in forward order; a byte tensor draws the same values.
            masks = torch.cat([torch.empty(s, dtype=torch.uint8).bernoulli_(1 - p).reshape(-1)
                               for s in self._mask_shapes(B, T)])
        params = [t.contiguous() for t in params]  # C binds their storage (_torch_bind)
        y = _AttnFunction.apply(bridge, masks, B, T, x.float().contiguous(), *params)
        return y if dtype == torch.float32 else y.to(dtype)

    def _params(self, bridge, name):
        params = []
        for n, path in zip(bridge.names, bridge.paths):
            t = self
            for a in path:  # "W_query.weight" -> self.W_query.weight
                t = getattr(t, a, None)
            if not isinstance(t, torch.Tensor):
                raise Error(f"{name}: parameter {n} is {_tree.describe(t)}, the module takes "
                            "a tensor")
            if not t.is_cpu or not t.is_floating_point():
                raise Error(f"{name}: parameter {n} must be a floating point CPU tensor, "
                            f"got {t.dtype} on {t.device}")
            if params and t.dtype != params[0].dtype:
                raise Error(f"{name}: parameter {n} is {t.dtype}, {bridge.names[0]} "
                            f"{params[0].dtype}: one dtype for all")
            params.append(t)
        return params


class SelfAttention_v1(_AttnModule):
    """The book's SelfAttention_v1(d_in, d_out) run by attn: W_query, W_key,
    W_value nn.Parameter(torch.rand(d_in, d_out)); forward(x) x (T, d_in) ->
    (T, d_out), forward and backward in C."""
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
    """The book's SelfAttention_v2(d_in, d_out, qkv_bias=False) run by attn:
    nn.Linear projections; forward(x) x (T, d_in) -> (T, d_out), forward and
    backward in C."""
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
    """The book's CausalAttention(d_in, d_out, context_length, dropout,
    qkv_bias=False) run by attn: forward(x) x (B, T, d_in) -> (B, T, d_out),
    forward and backward in C, dropout masks drawn as nn.Dropout draws them."""
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
    """The book's MultiHeadAttentionWrapper(d_in, d_out, context_length,
    dropout, num_heads, qkv_bias=False) run by attn: heads, a ModuleList of
    CausalAttention; forward(x) x (B, T, d_in) -> (B, T, num_heads * d_out)
    in one C call."""
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


class _KVCache:
    """The KV cache of the book's chapter 4, bonus 03 (cache_k, cache_v,
    ptr_current_pos, reset_cache) and the attention the cached classes run
    in torch ops around attn.torch.scaled_dot_product_attention."""

    def _init_cache(self):
        self.register_buffer("cache_k", None, persistent=False)
        self.register_buffer("cache_v", None, persistent=False)
        self.ptr_current_pos = 0

    _heads_first = False  # the book's cache layout: (B, S, H, hd); GQA's (B, G, S, hd)

    def _cached(self, t):
        """(B, H, S, hd) <-> the cache's layout (the book's, per class)."""
        return t if self._heads_first else t.transpose(1, 2)

    def reset_cache(self):
        """Empty the KV cache: the next forward(x, use_cache=True) starts at position 0."""
        self.cache_k, self.cache_v = None, None
        self.ptr_current_pos = 0

    def _cached_attention(self, x, use_cache, kv_heads, window=0, limit=None):
        name = type(self).__name__
        _check_tensor(x, f"{name}: x")
        d_in = self.W_query.weight.shape[1]
        if x.dim() != 3 or x.shape[-1] != d_in:
            raise Error(f"{name}: x must be (B, T, {d_in}), got {tuple(x.shape)}", "shape")
        b, T = x.shape[0], x.shape[1]
        H, hd = self.num_heads, self.head_dim
        q = self.W_query(x).view(b, T, H, hd).transpose(1, 2)
        k = self.W_key(x).view(b, T, kv_heads, hd).transpose(1, 2)
        v = self.W_value(x).view(b, T, kv_heads, hd).transpose(1, 2)
        start = self.ptr_current_pos if use_cache else 0
        if limit is not None and start + T > limit:
            raise Error(f"{name}: positions {start}..{start + T - 1} exceed context_length = "
                        f"{limit} (reset_cache() starts again)", "shape")
        if use_cache:
            if self.cache_k is not None:
                k = torch.cat([self._cached(self.cache_k), k], dim=2)
                v = torch.cat([self._cached(self.cache_v), v], dim=2)
            keep = k.shape[2] if not window else min(k.shape[2], window)
            self.cache_k = self._cached(k[:, :, -keep:])
            self.cache_v = self._cached(v[:, :, -keep:])
            self.ptr_current_pos += T
        S = k.shape[2]
        k0 = start + T - S  # the position of the first key
        if window and start + T - 1 - k0 < window:
            window = 0  # no key falls out of the window
        p = float(self.dropout.p) if self.training and hasattr(self, "dropout") else 0.0
        if start == 0 and S == T and not window:  # plain causal: fused in C
            o = scaled_dot_product_attention(q, k, v, dropout_p=p, is_causal=True,
                                             enable_gqa=kv_heads != H)
        else:
            i = torch.arange(start, start + T)[:, None]
            j = torch.arange(k0, k0 + S)[None, :]
            allowed = (j <= i) & ((i - j < window) if window else True)
            o = scaled_dot_product_attention(q, k, v, attn_mask=allowed, dropout_p=p,
                                             enable_gqa=kv_heads != H)
        return self.out_proj(o.transpose(1, 2).reshape(b, T, H * hd))


class MultiHeadAttention(_KVCache, _AttnModule):
    """The book's MultiHeadAttention (chapter 3) with chapter 4 bonus 03's
    KV cache, run by attn.

    MultiHeadAttention(d_in, d_out, context_length, dropout, num_heads,
    qkv_bias=False): W_query, W_key, W_value (nn.Linear d_in -> d_out),
    out_proj (d_out -> d_out), dropout and the (context_length,
    context_length) mask buffer, created in the book's order (the book's
    weights after torch.manual_seed, the same state_dict; a state_dict
    without "mask", as ch04/03's, loads too). cache_k and cache_v are
    non-persistent buffers (B, S, num_heads, head_dim), as the book's.

    forward(x) with x (B, T, d_in), T <= context_length -> (B, T, d_out):
    forward and backward in attn's C module; dropout masks drawn from
    PyTorch's generator as nn.Dropout draws them. forward(x,
    use_cache=True) appends x's keys and values to the cache and attends
    from positions ptr_current_pos.. (projections in torch,
    attention by scaled_dot_product_attention: fused in C for the first,
    causal chunk); reset_cache() empties it."""

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
        self._init_cache()

    def forward(self, x, use_cache=False):
        """x (B, T, d_in) -> (B, T, d_out); see the class."""
        if not use_cache:
            return _AttnModule.forward(self, x)
        return self._cached_attention(x, True, self.num_heads, limit=self.mask.shape[0])

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        # ch04/03 registers the mask non-persistent: its state_dicts lack it.
        if prefix + "W_query.weight" in state_dict and prefix + "mask" not in state_dict:
            state_dict[prefix + "mask"] = self.mask
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    def _config(self):
        d_out, d_in = self.W_query.weight.shape
        return d_in, d_out, self.num_heads, self.mask.shape[0], self.W_query.bias is not None

    def _dropout_p(self):
        return float(self.dropout.p)

    def _mask_shapes(self, B, T):
        return [(B, self.num_heads, T, T)]


class GroupedQueryAttention(_KVCache, nn.Module):
    """The book's GroupedQueryAttention (chapter 4, bonus 04), run by attn.

    GroupedQueryAttention(d_in, d_out, num_heads, num_kv_groups,
    dtype=None): W_key and W_value (nn.Linear d_in -> num_kv_groups *
    head_dim, no bias), W_query (d_in -> d_out) and out_proj (d_out ->
    d_out), no bias, in the book's order (its weights after
    torch.manual_seed, its state_dict); query heads h share key/value group
    h // (num_heads // num_kv_groups). dtype: the parameters' dtype.

    forward(x, use_cache=False): x (B, T, d_in) -> (B, T, d_out). The
    projections run in torch; the causal attention in attn's fused C kernel
    (float32; bfloat16 with AVX512-BF16; float16 in float32, said once;
    float64 in torch ops). use_cache=True: the KV cache of bonus 03
    (cache_k, cache_v (B, num_kv_groups, S, head_dim), ptr_current_pos,
    reset_cache()); a forward without it empties the cache."""

    _heads_first = True

    def __init__(self, d_in, d_out, num_heads, num_kv_groups, dtype=None):
        super().__init__()
        assert d_out % num_heads == 0, "d_out must be divisible by num_heads"
        assert num_heads % num_kv_groups == 0, "num_heads must be divisible by num_kv_groups"
        self.d_out = d_out
        self.num_heads = num_heads
        self.head_dim = d_out // num_heads
        self.W_key = nn.Linear(d_in, num_kv_groups * self.head_dim, bias=False, dtype=dtype)
        self.W_value = nn.Linear(d_in, num_kv_groups * self.head_dim, bias=False, dtype=dtype)
        self.num_kv_groups = num_kv_groups
        self.group_size = num_heads // num_kv_groups
        self.W_query = nn.Linear(d_in, d_out, bias=False, dtype=dtype)
        self.out_proj = nn.Linear(d_out, d_out, bias=False, dtype=dtype)
        self._init_cache()

    def forward(self, x, use_cache=False):
        """x (B, T, d_in) -> (B, T, d_out); see the class."""
        if not use_cache:
            self.reset_cache()
        return self._cached_attention(x, use_cache, self.num_kv_groups)


class MultiHeadAttentionWithSWA(_KVCache, nn.Module):
    """The book's MultiHeadAttentionWithSWA (chapter 4, bonus 06:
    sliding-window attention), run by attn.

    MultiHeadAttentionWithSWA(d_in, d_out, dropout, num_heads,
    qkv_bias=False, sliding_window_size=None): the parameters of
    MultiHeadAttention (no mask buffer); query i sees keys
    i - sliding_window_size + 1 .. i (None: all of 0..i).

    forward(x, use_cache=False): x (B, T, d_in) -> (B, T, d_out).
    Projections in torch; attention by scaled_dot_product_attention: in C
    (fused) while no key falls out of the window, else in torch ops with the
    band mask. Dropout on the weights as nn.Dropout draws it. use_cache=True:
    the KV cache (B, S, num_heads, head_dim), holding the last
    sliding_window_size keys and values (a chunk longer than the window
    attends over all its keys first, then the cache is trimmed);
    reset_cache() empties it; a forward without use_cache sets
    ptr_current_pos to 0, as the book's."""

    def __init__(self, d_in, d_out, dropout, num_heads, qkv_bias=False, sliding_window_size=None):
        super().__init__()
        assert d_out % num_heads == 0, "d_out must be divisible by num_heads"
        self.d_out = d_out
        self.num_heads = num_heads
        self.head_dim = d_out // num_heads
        self.sliding_window_size = sliding_window_size
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.out_proj = nn.Linear(d_out, d_out)
        self.dropout = nn.Dropout(dropout)
        self._init_cache()

    def forward(self, x, use_cache=False):
        """x (B, T, d_in) -> (B, T, d_out); see the class."""
        if not use_cache:
            self.ptr_current_pos = 0  # as the book's (the cache stays)
        return self._cached_attention(x, use_cache, self.num_heads,
                                      window=self.sliding_window_size or 0)


# ------------------------------------------------------------ swap_attention


def _linear(m, name):
    return isinstance(getattr(m, name, None), nn.Linear)


# What the book's attention classes hold; a module with more (RoPE tables,
# norms on q and k, ...) computes something else and is left alone.
_BOOK_PARTS = {"W_query", "W_key", "W_value", "out_proj", "dropout", "mask", "cache_k", "cache_v",
               "heads"}


def _plain(m):
    """m holds only the book's parts and its forward takes x (and use_cache)."""
    if (set(m._modules) | set(m._buffers) | set(m._parameters)) - _BOOK_PARTS:
        return False
    try:
        params = list(inspect.signature(m.forward).parameters.values())
    except (TypeError, ValueError):
        return False
    return len(params) >= 1 and all(p.name == "use_cache" for p in params[1:])


def _kind_of(m):
    """Which attn.torch class a module of the book's has the structure of
    (its attributes, whatever its class is called or defined), or None."""
    if isinstance(m, (_AttnModule, _KVCache)) or not _plain(m):
        return None  # already attn's, or more than the book's class
    if all(_linear(m, n) for n in ("W_query", "W_key", "W_value", "out_proj")) and \
            isinstance(getattr(m, "num_heads", None), int) and hasattr(m, "head_dim"):
        if isinstance(getattr(m, "num_kv_groups", None), int):
            return "gqa"
        if not isinstance(getattr(m, "dropout", None), nn.Dropout):
            return None
        if hasattr(m, "sliding_window_size"):
            return "swa"
        if isinstance(getattr(m, "mask", None), torch.Tensor):
            return "mha"
        return None
    if all(_linear(m, n) for n in ("W_query", "W_key", "W_value")) and \
            isinstance(getattr(m, "dropout", None), nn.Dropout) and \
            isinstance(getattr(m, "mask", None), torch.Tensor):
        return "causal"
    heads = getattr(m, "heads", None)
    if isinstance(heads, nn.ModuleList) and len(heads) and \
            all(_kind_of(h) == "causal" for h in heads):
        return "wrapper"
    return None


def _twin(kind, m):
    """An attn.torch module configured as m (its weights are set after)."""
    if kind == "wrapper":
        h = m.heads[0]
        d_out, d_in = h.W_query.weight.shape
        return MultiHeadAttentionWrapper(d_in, d_out, h.mask.shape[-1], h.dropout.p,
                                         len(m.heads), h.W_query.bias is not None)
    d_out, d_in = m.W_query.weight.shape
    bias = m.W_query.bias is not None
    if kind == "gqa":
        return GroupedQueryAttention(d_in, d_out, m.num_heads, m.num_kv_groups,
                                     dtype=m.W_query.weight.dtype)
    if kind == "swa":
        return MultiHeadAttentionWithSWA(d_in, d_out, m.dropout.p, m.num_heads, bias,
                                         m.sliding_window_size)
    if kind == "mha":
        return MultiHeadAttention(d_in, d_out, m.mask.shape[-1], m.dropout.p, m.num_heads, bias)
    return CausalAttention(d_in, d_out, m.mask.shape[-1], m.dropout.p, bias)


def _share(new, old):
    """new takes old's submodules (the same nn.Linear and nn.Dropout objects,
    so the same Parameters) and mask buffer, persistent or not as old's."""
    for name, child in old.named_children():
        if name == "heads":
            for a, b in zip(new.heads, child):
                _share(a, b)
        elif name in new._modules:
            setattr(new, name, child)
    mask = old._buffers.get("mask")
    if mask is not None:
        new._buffers["mask"] = mask
        if "mask" in old._non_persistent_buffers_set:
            new._non_persistent_buffers_set.add("mask")
    if hasattr(old, "ptr_current_pos"):
        new.ptr_current_pos = old.ptr_current_pos
        new.cache_k, new.cache_v = old.cache_k, old.cache_v
    new.train(old.training)


def swap_attention(model):
    """Replace, inside model (e.g. the book's GPTModel), every attention
    module that has the structure of one of the book's classes by the
    attn.torch class of the same configuration; returns how many it replaced
    (a warning when none). Recognised by attributes, wherever the class is
    defined: W_query/W_key/W_value/out_proj (nn.Linear), num_heads, head_dim,
    dropout and a mask buffer (MultiHeadAttention, with or without ch04/03's
    KV cache); num_kv_groups (GroupedQueryAttention); sliding_window_size
    (MultiHeadAttentionWithSWA); no out_proj (CausalAttention); heads, a
    ModuleList of those (MultiHeadAttentionWrapper). A module holding more
    than the book's parts (RoPE tables, norms, ...) or whose forward takes
    more than x and use_cache computes something else and is left alone.

    The weights are SHARED, not copied: the new module holds the old one's
    nn.Linear and nn.Dropout objects (and mask buffer), so optimizers made
    before the swap and state_dict keys stay valid. PyTorch's random
    generator is left as it was (the new modules' own weights, drawn and
    thrown away, come from a forked generator)."""
    count = 0

    def walk(parent):
        nonlocal count
        for child_name, child in list(parent.named_children()):
            kind = _kind_of(child)
            if kind is None:
                walk(child)  # a replaced module's insides are not looked at again
                continue
            with torch.random.fork_rng(devices=[]):
                new = _twin(kind, child)
            _share(new, child)
            setattr(parent, child_name, new)
            count += 1

    walk(model)
    if count == 0:
        import warnings
        warnings.warn("attn.torch.swap_attention: no attention module of the book's structure "
                      "found (W_query, W_key, W_value, out_proj, num_heads, mask, ...): nothing "
                      "replaced", RuntimeWarning, stacklevel=2)
    return count

