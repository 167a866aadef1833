"""The numpy layer: every chapter-3 module as a class over attn's C code.

    m = attn.MultiHeadAttention(3, 2, context_length=6, dropout=0.0, num_heads=2, seed=123)
    y = m.forward(x)          # x (B, T, d_in) -> y (B, T, d_out), numpy float32
    dx = m.backward(dy)       # dy shaped as y -> dx shaped as x; m.grads by name
    m.state_dict()            # PyTorch's names: W_query.weight, ..., out_proj.bias

Weights are what torch.manual_seed(seed) followed by the book's constructor
gives (seed=None: a random seed, kept in m.seed). As in PyTorch a module starts
in training mode: dropout (when its rate is > 0) draws its masks from the same
generator, continuing after the weights, in the stream given (torch-cpu:
Debian's PyTorch; torch-mkl: MKL builds, the book's printed tables); m.eval()
turns it off.

Inputs: a C-contiguous float32 array is passed to C as it is (no copy);
float64, integer or non-contiguous arrays are converted to a float32 copy
first. Anything else (a wrong dtype or shape, a closed module) raises
attn.Error naming what was expected (a bad type or value: an attn.Error that
is also a TypeError or ValueError). The C memory a module holds is freed by
close(), at the end of a `with` block, or when the object is collected. Threads
may share a module: its calls run one at a time (each keeps activations in
it), and close() in another thread waits for the call in flight."""
import collections
import ctypes
import os
import weakref

import numpy as np

from . import _lib
from ._lib import Error, lib

STREAMS = {"torch-cpu": 0, "torch-mkl": 1}


def _free_rng(rng):
    lib.attn_h_rng_free(rng)


def _index(value, what, lo=0, hi=_lib.INT_MAX):
    """An integer argument checked for C (attn._lib.cint)."""
    return _lib.cint(what, value, lo, hi)


def _rate(value, what):
    return _lib.cfloat(what, value)


def as_array(x, what, dtype=np.float32, kinds="fiu"):
    """x as a C-contiguous array of dtype (the same object when it already is
    one); a dtype outside kinds is an attn.Error."""
    if hasattr(x, "detach") and hasattr(x, "device"):  # a torch tensor
        if getattr(x.device, "type", "cpu") != "cpu":
            raise Error(f"{what} must be on the CPU, got a tensor on {x.device}")
        try:
            x = x.detach().numpy()
        except Exception as e:  # e.g. a dtype numpy has not (bfloat16)
            raise Error(f"{what}: cannot convert the tensor ({e})") from None
    try:
        a = np.asarray(x)
    except Exception as e:  # ragged lists and the like
        raise Error(f"{what}: not an array ({e})") from None
    if a.dtype.kind not in kinds or a.dtype == np.bool_:
        names = {"fiu": "real numbers (float32; float64 and integers are converted)",
                 "iu": "integers"}
        raise Error(f"{what} must hold {names.get(kinds, kinds)}, got dtype {a.dtype}")
    return np.ascontiguousarray(a, dtype=dtype)


def ptr(a):
    """The address of a numpy array's data (None for None)."""
    return None if a is None else a.ctypes.data


class Core:
    """One C module (attn/module.h) and its parameters, shared by the numpy
    layer and attn.torch. seed None creates zero weights (attn.torch copies
    PyTorch's in). Every C call holds the handle (attn._lib.Handle): close()
    in another thread waits for it, and later calls raise attn.Error."""

    def __init__(self, kind, d_in, d_out, num_heads=1, context_length=1, dropout=0.0,
                 qkv_bias=False, seed=None, what=None):
        what = what or kind
        d_in, d_out = _index(d_in, f"{what}: d_in"), _index(d_out, f"{what}: d_out")
        num_heads = _index(num_heads, f"{what}: num_heads")
        context_length = _index(context_length, f"{what}: context_length")
        dropout = _rate(dropout, f"{what}: dropout")
        # W_query, W_key and W_value (per head for the wrapper) and their
        # gradients at least: refused before C allocates and fills them.
        copies = num_heads if kind == "mha-wrapper" else 1
        _lib.check_budget(f"{what}: the weights of d_in {d_in}, d_out {d_out}",
                          3 * copies * d_in * d_out * 4 * 2)
        if seed is not None:
            seed = _lib.cint(f"{what}: seed", seed, 0, 2**64 - 1)
        rng = lib.attn_h_rng_create(seed) if seed is not None else None
        if seed is not None and not rng:
            raise Error("out of memory", "out of memory")
        h = ctypes.c_void_p()
        err = _lib.error()
        st = lib.attn_h_module_create(kind.encode(), d_in, d_out, num_heads, context_length,
                                      dropout, int(bool(qkv_bias)), rng, ctypes.byref(h),
                                      ctypes.byref(err))
        if st:
            if rng:
                _free_rng(rng)
            _lib.check(st, err)
        self.kind, self.dropout = kind, dropout
        # The module first, then its generator: one handle frees both.
        self._h = _lib.Handle(h.value, lambda a: (lib.attn_module_free(a),
                                                  rng and _free_rng(rng)), what)
        self.rng = rng
        self._finalizer = weakref.finalize(self, self._h.close)
        self.params = _lib.params(lib.attn_module_params(h.value))
        self.out_dim = lib.attn_module_out_dim(h.value)

    @property
    def handle(self):
        """The C address (None once closed)."""
        return None if self._h.closed else self._h.address

    def close(self):
        """Free the C module (waits for a call in flight); later calls raise
        attn.Error."""
        self._h.close()
        self._finalizer.detach()

    def hold(self):
        """A `with` block in which the C module stays alive (attn.Error once
        closed) and no other thread runs it: its forward and backward keep
        activations in the module."""
        return self._h.exclusive()

    def mask_numel(self, B, T):
        """How many dropout-mask bytes a forward of (B, T) takes."""
        with self._h as h:
            return lib.attn_h_module_mask_numel(h, _index(B, "B"), _index(T, "T"))

    def forward(self, x_ptr, B, T, y_ptr, training, stream=0, keep_ptr=None, n_keep=0):
        """The C forward on raw addresses: x (B, T, d_in) -> y (B, T, out_dim)
        float32; training with dropout uses keep_ptr's n_keep mask bytes
        when given, else draws from the module's generator in stream."""
        B, T = _index(B, f"{self._h.what}.forward: B"), _index(T, f"{self._h.what}.forward: T")
        with self._h.exclusive() as h:
            _lib.call(lib.attn_h_module_forward, h, x_ptr, B, T, y_ptr, int(training),
                      self.rng, stream, keep_ptr, n_keep)

    def backward(self, x_ptr, B, T, dy_ptr, dx_ptr):
        """This call's gradients alone: the C backward accumulates (+=) into the
        parameter grads and dx, so they are zeroed first (dx_ptr: zeros or None)."""
        with self._h.exclusive():
            for q in self.params:
                ctypes.memset(q.grad, 0, q.numel * 4)
            self.backward_bound(x_ptr, B, T, dy_ptr, dx_ptr)

    def backward_bound(self, x_ptr, B, T, dy_ptr, dx_ptr):
        """backward adding into the gradients bound last (attn_module_bind:
        the caller's, zeroed by the caller), not the module's own."""
        B, T = _index(B, f"{self._h.what}.backward: B"), _index(T, f"{self._h.what}.backward: T")
        with self._h.exclusive() as h:
            _lib.call(lib.attn_h_module_backward, h, x_ptr, B, T, dy_ptr, dx_ptr)


def _c_array(address, shape):
    """A numpy view of C floats (valid while their owner lives)."""
    n = 1
    for d in shape:
        n *= d
    return np.ctypeslib.as_array((ctypes.c_float * n).from_address(address)).reshape(shape)


class Module:
    """What every numpy-layer module shares (see the module's doc)."""

    _kind = None       # the C kind (attn/module.h)
    _input_rank = 3    # 2: one (T, d_in) sequence (SelfAttention_v1/v2)
    _mask_buffer = None  # the causal-mask buffer's state_dict name, if the class has one

    def _setup(self, d_in, d_out, num_heads=1, context_length=1, dropout=0.0, qkv_bias=False,
               seed=None, stream="torch-cpu", heads_buffers=0, tril=False):
        name = type(self).__name__
        d_in, d_out = _index(d_in, f"{name}: d_in"), _index(d_out, f"{name}: d_out")
        num_heads = _index(num_heads, f"{name}: num_heads")
        context_length = _index(context_length, f"{name}: context_length")
        dropout = _rate(dropout, f"{name}: dropout")
        if seed is None:
            seed = int.from_bytes(os.urandom(4), "little")
        seed = _lib.cint(f"{name}: seed", seed, 0, 2**64 - 1)
        if not isinstance(stream, str) or stream not in STREAMS:
            raise Error(f"{name}: stream must be one of {', '.join(STREAMS)}, got {stream!r}")
        if self._mask_buffer:  # the (context_length, context_length) float32 buffer below
            _lib.check_budget(f"{name}: the causal mask of context_length {context_length}",
                              context_length * context_length * 4)
        self.seed, self.stream, self.training = seed, stream, True
        self.d_in, self.context_length = d_in, context_length
        self._core = Core(self._kind, d_in, d_out, num_heads, context_length, dropout, qkv_bias,
                          seed, name)
        self._x = None
        self._out_shape = None
        # The book's causal-mask buffers, for state_dicts PyTorch loads as they are.
        self._buffers = collections.OrderedDict()
        if self._mask_buffer:
            ones = np.ones((context_length, context_length), np.float32)
            mask = np.tril(ones) if tril else np.triu(ones, k=1)
            names = [f"heads.{i}.{self._mask_buffer}" for i in range(heads_buffers)] \
                if heads_buffers else [self._mask_buffer]
            for n in names:
                self._buffers[n] = mask

    # -- state ---------------------------------------------------------------

    def _live(self):
        core = getattr(self, "_core", None)
        if core is None or core.handle is None:
            raise Error(f"{type(self).__name__} is closed", "state")
        return core

    def close(self):
        """Free the C memory now (later calls raise attn.Error)."""
        core = getattr(self, "_core", None)
        if core is not None:
            core.close()
        self._x = None

    @property
    def closed(self):
        """Whether close() has freed the C module."""
        core = getattr(self, "_core", None)
        return core is None or core.handle is None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def train(self, mode=True):
        """Training mode (dropout on when its rate is > 0) or, with mode False,
        eval mode; returns self."""
        self.training = bool(mode)
        return self

    def eval(self):
        """Eval mode (no dropout); returns self."""
        return self.train(False)

    # -- computing -------------------------------------------------------------

    def _shape_text(self):
        return "(T, %d)" % self.d_in if self._input_rank == 2 else "(B, T, %d)" % self.d_in

    def forward(self, x):
        """x (B, T, d_in) — or (T, d_in) for SelfAttention_v1/v2 — to y."""
        core = self._live()
        with core.hold():  # x, the saved activations and self._x stay one call's
            return self._forward(core, x)

    def _forward(self, core, x):
        name = type(self).__name__
        x = as_array(x, f"{name}.forward: x")
        if x.ndim != self._input_rank or x.shape[-1] != self.d_in:
            raise Error(f"{name}.forward: x must be {self._shape_text()}, got "
                        f"{tuple(x.shape)}", "shape")
        B, T = (1, x.shape[0]) if self._input_rank == 2 else x.shape[:2]
        y = np.empty((B, T, core.out_dim), np.float32)
        self._x = None
        core.forward(ptr(x), B, T, ptr(y), self.training, STREAMS[self.stream])
        self._x = x  # kept for backward (the C module saved its activations)
        self._out_shape = y.shape if self._input_rank == 3 else y.shape[1:]
        return y.reshape(self._out_shape)

    __call__ = forward

    def backward(self, dy):
        """dy (shaped as the last forward's y) to dx (shaped as its x). Sets
        grads to this call's parameter gradients (not accumulated)."""
        core = self._live()
        with core.hold():  # dy, self._x and the activations of one forward
            return self._backward(core, dy)

    def _backward(self, core, dy):
        name = type(self).__name__
        if self._x is None:
            raise Error(f"{name}.backward: call forward first", "state")
        dy = as_array(dy, f"{name}.backward: dy")
        if dy.shape != self._out_shape:
            raise Error(f"{name}.backward: dy must be shaped as the output "
                        f"{self._out_shape}, got {tuple(dy.shape)}", "shape")
        dx = np.zeros_like(self._x)  # the C backward accumulates into it
        B, T = (1, dx.shape[0]) if self._input_rank == 2 else dx.shape[:2]
        core.backward(ptr(self._x), B, T, ptr(dy), ptr(dx))
        return dx

    # -- parameters ------------------------------------------------------------

    @property
    def grads(self):
        """name -> gradient of the last backward (copies; zeros before one)."""
        core = self._live()
        with core.hold():
            return collections.OrderedDict((p.name, _c_array(p.grad, p.shape).copy())
                                           for p in core.params)

    def named_parameters(self):
        """(name, shape) of every parameter, in PyTorch's order."""
        return [(p.name, p.shape) for p in self._live().params]

    def state_dict(self):
        """name -> array (copies): the parameters under PyTorch's names, and
        the book's causal-mask buffers, so the book's module loads it as it is."""
        core = self._live()
        out = collections.OrderedDict()
        pending = dict(self._buffers)
        with core.hold():
            for p in core.params:
                # PyTorch lists a module's buffers before its submodules' parameters.
                for k in [k for k in pending if p.name.startswith(k[:k.rfind(".") + 1])]:
                    out[k] = pending.pop(k).copy()
                out[p.name] = _c_array(p.data, p.shape).copy()
        return out

    def load_state_dict(self, state, strict=True):
        """Set the parameters from a mapping of name -> array (numpy arrays or
        torch tensors, e.g. a book module's state_dict()). strict: every
        parameter must be there and nothing else (mask buffers may be)."""
        core = self._live()
        name = type(self).__name__
        known = {p.name: p for p in core.params}
        extra = [k for k in state if k not in known and k not in self._buffers]
        missing = [k for k in known if k not in state]
        if strict and (extra or missing):
            raise Error(f"{name}.load_state_dict: missing {missing}, unexpected {extra}",
                        "not found")
        arrays = {}
        for k, v in state.items():
            p = known.get(k)
            want = p.shape if p is not None else \
                self._buffers[k].shape if k in self._buffers else None
            if want is None:
                continue
            a = as_array(v, f"{name}.load_state_dict: {k}")
            if tuple(a.shape) != tuple(want):
                raise Error(f"{name}.load_state_dict: {k} must be {tuple(want)}, got "
                            f"{tuple(a.shape)}", "shape")
            if p is not None:
                arrays[k] = a
        with core.hold():
            for k, a in arrays.items():
                _c_array(known[k].data, known[k].shape)[...] = a

    def __repr__(self):
        state = "closed" if self.closed else f"seed={self.seed}"
        return f"attn.{type(self).__name__}({self._args}, {state})"


class SelfAttention_v1(Module):
    """SelfAttention_v1(d_in, d_out): raw W_query/W_key/W_value (d_in, d_out)
    from torch.rand; x (T, d_in) -> (T, d_out)."""
    _kind, _input_rank = "self-attention-v1", 2

    def __init__(self, d_in, d_out, *, seed=None):
        self._args = f"d_in={d_in}, d_out={d_out}"
        self._setup(d_in, d_out, seed=seed)


class SelfAttention_v2(Module):
    """SelfAttention_v2(d_in, d_out, qkv_bias=False): three nn.Linear
    projections; x (T, d_in) -> (T, d_out)."""
    _kind, _input_rank = "self-attention-v2", 2

    def __init__(self, d_in, d_out, qkv_bias=False, *, seed=None):
        self._args = f"d_in={d_in}, d_out={d_out}, qkv_bias={qkv_bias}"
        self._setup(d_in, d_out, qkv_bias=qkv_bias, seed=seed)


class CausalAttention(Module):
    """CausalAttention(d_in, d_out, context_length, dropout, qkv_bias=False):
    x (B, T, d_in) -> (B, T, d_out), T <= context_length."""
    _kind, _mask_buffer = "causal-attention", "mask"

    def __init__(self, d_in, d_out, context_length, dropout, qkv_bias=False, *, seed=None,
                 stream="torch-cpu"):
        self._args = (f"d_in={d_in}, d_out={d_out}, context_length={context_length}, "
                      f"dropout={dropout}, qkv_bias={qkv_bias}")
        self._setup(d_in, d_out, 1, context_length, dropout, qkv_bias, seed, stream)


class MultiHeadAttentionWrapper(Module):
    """MultiHeadAttentionWrapper(d_in, d_out, context_length, dropout,
    num_heads, qkv_bias=False): num_heads CausalAttention heads;
    x (B, T, d_in) -> (B, T, num_heads * d_out)."""
    _kind, _mask_buffer = "mha-wrapper", "mask"

    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False, *,
                 seed=None, stream="torch-cpu"):
        self._args = (f"d_in={d_in}, d_out={d_out}, context_length={context_length}, "
                      f"dropout={dropout}, num_heads={num_heads}, qkv_bias={qkv_bias}")
        self._setup(d_in, d_out, num_heads, context_length, dropout, qkv_bias, seed, stream,
                    heads_buffers=_index(num_heads, "MultiHeadAttentionWrapper: num_heads"))


class MultiHeadAttention(Module):
    """MultiHeadAttention(d_in, d_out, context_length, dropout, num_heads,
    qkv_bias=False): weight splits + out_proj; x (B, T, d_in) -> (B, T, d_out)."""
    _kind, _mask_buffer = "mha", "mask"

    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False, *,
                 seed=None, stream="torch-cpu"):
        self._args = (f"d_in={d_in}, d_out={d_out}, context_length={context_length}, "
                      f"dropout={dropout}, num_heads={num_heads}, qkv_bias={qkv_bias}")
        self._setup(d_in, d_out, num_heads, context_length, dropout, qkv_bias, seed, stream)
