"""attn.torch.GPTModel and swap_model: the book's chapter-4 GPTModel whose
whole network runs in attn's C model, as one torch.autograd.Function, on the
torch parameters' own storage (see GPTModel's docstring)."""
import copy
import ctypes
import json
import math
import sys
import threading
import weakref

import torch
import torch.nn as nn

from . import _torch_bind as _bind
from . import _torch_sdpa as _sdpa
from . import _torch_tree as _tree
from ._torch_modules import MultiHeadAttention
from ._lib import Error, call, lib, params as _c_params
# The book's layer norm and feed-forward (their torch forward; GPTModel runs them in C).
from .book import FeedForward as _FeedForward, LayerNorm as _LayerNorm

_IGNORE = -100  # F.cross_entropy's default ignore_index, attn's ATTN_IGNORE_INDEX
_BOOK_KEYS = ("vocab_size", "context_length", "emb_dim", "n_heads", "n_layers", "drop_rate",
              "qkv_bias")
_PRECISIONS = {"fp32": 0, "bf16": 1}

c_void_p = ctypes.c_void_p


class _HugeMemory:
    """Memory from attn_h_alloc_huge (2 MiB pages) that a numpy array, then
    a tensor, borrows; freed with the last of them."""

    def __init__(self, numel):
        self.ptr = lib.attn_h_alloc_huge(4 * numel)
        if not self.ptr:
            raise MemoryError(f"attn: cannot allocate {4 * numel} bytes")
        self.__array_interface__ = {"shape": (numel,), "typestr": "<f4",
                                    "data": (self.ptr, False), "version": 3}

    def __del__(self):
        lib.attn_h_free(self.ptr)


def _empty(shape):
    """torch.empty(shape) (float32); past 4 MiB on 2 MiB pages: the logits
    are a new 100 MB tensor every step at GPT-2's size, whose 25,000 4 KiB
    page faults cost ~0.1 s on a VM."""
    numel = math.prod(shape)
    if numel * 4 < (4 << 20):
        return torch.empty(shape, dtype=torch.float32)
    import numpy
    return torch.from_numpy(numpy.asarray(_HugeMemory(numel))).view(shape)


def _config(cfg):
    """The book's seven keys of cfg, checked (other keys are ignored, as
    the book's class ignores them)."""
    if not isinstance(cfg, dict):
        raise Error(f"GPTModel: cfg must be the book's config dict, got {type(cfg).__name__}")
    missing = [k for k in _BOOK_KEYS if k not in cfg]
    if missing:
        raise Error(f"GPTModel: cfg lacks {', '.join(missing)} (the book's GPT_CONFIG keys: "
                    f"{', '.join(_BOOK_KEYS)})")
    out = {k: cfg[k] for k in _BOOK_KEYS}
    out["drop_rate"] = float(out["drop_rate"])
    out["qkv_bias"] = bool(out["qkv_bias"])
    return out


class _Drawn:
    """Dropout masks drawn in C from torch's default CPU generator (see
    _c_draws_masks): one object per training forward, holding the
    generator's state before the draw, so that a backward that must run its
    forward again draws the same masks."""

    def __init__(self):
        self.start = None

    def state(self):
        """(state, first): a copy of the generator state to draw from, and
        whether this is the first forward, whose draw torch's generator then
        takes on (a later one, the backward's redo, draws the same again)."""
        first = self.start is None
        if first:
            self.start = torch.get_rng_state()
        return self.start.clone(), first


_C_DRAWS = None


def _c_draws_masks():
    """Whether attn's C draw (attn_h_torch_bernoulli: mt19937 and the
    non-MKL bernoulli_ rule, attn/rng.h) gives this torch build's own
    bernoulli_ values and leaves its generator in the same state: checked
    once per process on 4099 draws, torch's generator put back as it was."""
    global _C_DRAWS
    if _C_DRAWS is None:
        start = torch.get_rng_state()
        try:
            want = torch.empty(4099, dtype=torch.uint8).bernoulli_(0.9)
            after = torch.get_rng_state()
            state = start.clone()
            got = torch.empty(4099, dtype=torch.uint8)
            call(lib.attn_h_torch_bernoulli, state.data_ptr(), state.numel(), 0.9,
                 got.data_ptr(), got.numel())
            _C_DRAWS = bool(torch.equal(got, want) and torch.equal(state, after))
        except Error:
            _C_DRAWS = False
        finally:
            torch.set_rng_state(start)
    return _C_DRAWS


class _Bridge:
    """The C model (attn_h_bgpt) behind one GPTModel: its parameters bound to
    the torch tensors' memory on every call. built: what the module tree
    holds besides cfg (_torch_tree.structure): the head's width (0: the
    language model's) and bias, and the LoRA adapters (linear, rank,
    scale)."""

    def __init__(self, cfg, built=(0, 0, ())):
        self.cfg, self.built = cfg, built
        width, bias, sites = built
        self.width = width or cfg["vocab_size"]  # the logits' last dimension
        h = c_void_p()
        n = len(sites)
        names = (ctypes.c_char_p * max(n, 1))(*[site[0].encode() for site in sites])
        ranks = (ctypes.c_int * max(n, 1))(*[site[1] for site in sites])
        alphas = (ctypes.c_float * max(n, 1))(*[site[2] for site in sites])
        call(lib.attn_h_bgpt_create_built, json.dumps(cfg).encode(), width, bias, n, names, ranks,
             alphas, ctypes.byref(h))
        self.h = h.value
        self.trainable = None  # the flags the C model has (attn_h_bgpt_set_trainable)
        self.stale_kv, self.stale_what = 0, ""  # tokens a former C model cached (_bridge)
        self._finalizer = weakref.finalize(self, lib.attn_h_bgpt_free, self.h)
        plist = _c_params(lib.attn_h_bgpt_params(self.h))
        self.names = [p.name for p in plist]
        self.shapes = [p.shape for p in plist]
        self.table = dict(zip(self.names, self.shapes))  # what _torch_tree checks the tree against
        self.precision = 0
        self.calls = 0  # which forward the plain activations belong to
        self.grad_sets = []  # _GradSet: gradient buffers reused across steps
        # One C call at a time (they share the activations); reentrant: a
        # backward runs its forward again under the same hold.
        self.lock = threading.RLock()
        self.d_logits = None  # the fused loss's logits gradient, used under the lock only
        self.on_huge = set()  # (address, bytes) of parameters kv_forward put on 2 MiB pages

    def __deepcopy__(self, memo):
        return None  # a copied model makes its own

    def set_precision(self, precision):
        if precision != self.precision:
            call(lib.attn_h_bgpt_set_precision, self.h, precision)
            self.precision = precision

    def refuse(self, i, t):
        """The error for params[i], t, that the C model cannot bind."""
        return Error(f"GPTModel: parameter {self.names[i]} is {tuple(t.shape)} {t.dtype} on "
                     f"{t.device}; attn's model binds a contiguous float32 CPU tensor of "
                     f"{self.shapes[i]} inside its storage", "shape")

    def bind(self, params, grads=None):
        """Point the C model at params and grads (_torch_bind.bind: each
        checked right before the C call); returns (addresses, aliases) as
        it. With grads, the tensors without one (None: requires_grad False)
        are frozen in C: no gradient computed, the backward stopping below
        the lowest trainable one."""
        if len(params) != len(self.shapes):
            raise Error(f"GPTModel: {len(params)} parameters given, the model has "
                        f"{len(self.shapes)}", "shape")
        if grads is not None:
            flags = bytes(int(t is not None) for t in grads)
            if flags != self.trainable:
                self.trainable = None
                call(lib.attn_h_bgpt_set_trainable, self.h, flags, len(params))
                self.trainable = flags
        return _bind.bind(lib.attn_h_bgpt_bind, self.h, self.names, self.shapes, params, grads,
                          self.refuse)

    def mask_numel(self, B, T):
        return lib.attn_h_bgpt_mask_numel(self.h, B, T)

    def forward(self, idx, targets, masks, params, grads=None, logits=None):
        """One C forward: the loss (a float; NaN without targets), which
        forward this was (for backward_logits) and the parameters' addresses
        it bound (for the backward to compare). masks: None (evaluation), the
        keep bytes, or a _Drawn (drawn in C from torch's generator, which the
        first forward of it advances as torch's own draws would)."""
        B, T = idx.shape
        loss = ctypes.c_float(float("nan"))
        tgt = targets.data_ptr() if targets is not None else None
        out = logits.data_ptr() if logits is not None else None
        with self.lock:
            ptrs, storages = self.bind(params, grads)
            if isinstance(masks, _Drawn):
                state, first = masks.state()
                call(lib.attn_h_bgpt_forward_drawn, self.h, idx.data_ptr(), tgt, B, T,
                     state.data_ptr(), state.numel(), grads is not None, out,
                     ctypes.byref(loss))
                if first:
                    torch.set_rng_state(state)
            else:
                keep, n_keep = (masks.data_ptr(), masks.numel()) if masks is not None else (None,
                                                                                            0)
                call(lib.attn_h_bgpt_forward, self.h, idx.data_ptr(), tgt, B, T,
                     masks is not None, keep, n_keep, grads is not None, out, ctypes.byref(loss))
            self.calls += 1  # any forward may reuse the plain activations
            del storages  # held through the C call
            return loss.value, self.calls, ptrs

    def kv_forward(self, idx, params, own):
        """The cached forward (attn_h_bgpt_kv_forward) of idx (B, T) at the
        cache's positions: logits (B, T, V), the cache advanced by T.
        own[i]: params[i] is the model's tensor, not a copy made for this call."""
        B, T = idx.shape
        logits = _empty((B, T, self.width))
        with self.lock:
            ptrs, storages = self.bind(params)
            self.huge_pages(ptrs, params, own)
            call(lib.attn_h_bgpt_kv_forward, self.h, idx.data_ptr(), B, T, logits.data_ptr())
            del storages  # held through the C call
        return logits

    def huge_pages(self, ptrs, params, own):
        """The model's own weights onto 2 MiB pages, once per tensor memory
        (attn_h_collapse_huge: same contents and addresses): every token
        streams them all, ~25% faster than off PyTorch's 4 KiB pages."""
        if len(self.on_huge) > 4 * len(ptrs):
            self.on_huge.clear()  # (weights replaced many times: forget the old ones)
        for ptr, t, mine in zip(ptrs, params, own):
            key = (ptr, 4 * t.numel())
            if mine and key not in self.on_huge:
                lib.attn_h_collapse_huge(ptr, key[1])
                self.on_huge.add(key)

    def kv_reset(self):
        with self.lock:
            lib.attn_h_bgpt_kv_reset(self.h)
            self.stale_kv = 0

    def kv_len(self):
        with self.lock:
            return lib.attn_h_bgpt_kv_len(self.h)

    def d_logits_buffer(self, N, V):
        """The (N, V) buffer _LogitsLoss writes the logits' gradient into:
        kept (a fresh 100 MB would cost its page faults every step), never
        handed out, used under the lock."""
        if self.d_logits is None or self.d_logits.numel() < N * V:
            self.d_logits = None  # kept for any smaller batch, as the C activations are
            self.d_logits = torch.empty(N * V, dtype=torch.float32)
        return self.d_logits[:N * V].view(N, V)

    def backward_logits(self, d_logits, params, grads, B, T, token, redo):
        """The gradients of the logits forward `token`; redo() runs it again
        first when another forward ran since."""
        with self.lock:
            if token != self.calls:
                redo()
            _, storages = self.bind(params, grads)
            call(lib.attn_h_bgpt_backward_logits, self.h, d_logits.data_ptr(), B, T)
            del storages  # held through the C call


class _GradSet:
    """Gradient tensors the C model adds into, one per parameter, reused
    from step to step (a fresh 500 MB at GPT-2's size would cost its page
    faults on every step). AccumulateGrad never keeps them: a set handed to
    autograd is still referenced here, so it adds it into .grad or clones
    it; a set whose tensors someone else still holds at the next forward
    (torch.autograd.grad returns them) is left to them. States: busy (a
    forward or backward fills it, or a loss's gradients wait for their
    backward), handed (returned by a backward: free at the
    next forward in the same thread, when that backward pass is over), free."""

    def __init__(self, params):
        self.tensors = [torch.empty(p.shape, dtype=torch.float32) for p in params]
        self.state, self.owner = "free", None  # owner: the thread it was handed in
        self.refs = self.most_refs()  # only this set's own

    def most_refs(self):
        return max(sys.getrefcount(t) for t in self.tensors)


class _Lease:
    """A set held by one autograd node: freed with the node when its
    backward never ran (a loss computed with gradients but not used)."""

    def __init__(self, gset):
        self.gset = gset

    def __del__(self):
        if self.gset.state == "busy":
            self.gset.state = "free"


def _release_handed(bridge):
    """At a forward, every backward that handed out a set is done (within
    one backward pass, the engine may still hold a set's tensors in its
    input buffers while another node of the pass acquires: those stay
    handed until here)."""
    me = threading.get_ident()
    for g in list(bridge.grad_sets):
        if g.state == "handed" and g.owner == me:  # another thread's pass may still run
            g.state = "free"
            if g.most_refs() > g.refs:  # someone kept one (torch.autograd.grad's result,
                bridge.grad_sets.remove(g)  # a hook): theirs now, never written again


def _acquire(bridge, params, needs):
    """A zeroed gradient set for params (None where no gradient is wanted)."""
    shapes = [tuple(p.shape) for p in params]
    gset = next((g for g in bridge.grad_sets if g.state == "free" and
                 [tuple(t.shape) for t in g.tensors] == shapes), None)
    if gset is None:
        gset = _GradSet(params)
        bridge.grad_sets.append(gset)
    gset.state = "busy"
    grads = [t.zero_() if n else None for t, n in zip(gset.tensors, needs)]
    return _Lease(gset), grads


class _GPTFunction(torch.autograd.Function):
    """idx (B, T) [, targets] -> logits (B, T, V) or the mean loss: the whole
    GPT, forward and backward, in one C call each."""

    @staticmethod
    def forward(ctx, bridge, masks, idx, targets, *params):
        ctx.bridge, ctx.masks = bridge, masks
        _release_handed(bridge)
        needs = ctx.needs_input_grad[4:]
        if targets is not None:  # the fused head + loss, gradients computed now
            ctx.lease, grads = _acquire(bridge, params, needs) if any(needs) else (None, None)
            loss, _, ctx.ptrs = bridge.forward(idx, targets, masks, params, grads)
            ctx.grads = grads  # the backward only scales and hands them over
            ctx.params = params  # to compare at backward (not saved: no version check)
            return torch.tensor(loss, dtype=torch.float32)
        B, T = idx.shape
        logits = _empty((B, T, bridge.width))
        _, ctx.token, ptrs = bridge.forward(idx, None, masks, params, logits=logits)
        ctx.save_for_backward(idx, *params)  # and torch checks they are not changed in place
        # not a view (as_subclass's alias would be): changed in place as the book's logits may
        logits = torch.Tensor._make_subclass(_Logits, logits)
        logits._attn_info = _LogitsInfo(bridge, masks, idx, params, ctx.token, logits, ptrs)
        ctx.ptrs = ptrs
        return logits

    @staticmethod
    def backward(ctx, d_out):
        _sdpa.no_double_backward("GPTModel")
        needs = ctx.needs_input_grad[4:]
        if getattr(ctx, "grads", None) is not None or not hasattr(ctx, "token"):
            grads, ctx.grads = ctx.grads, None
            if grads is None:
                raise Error("GPTModel: backward twice through one loss (its gradients were "
                            "computed once, by the forward)", "state")
            _unchanged(ctx.bridge, ctx.params, ctx.ptrs)
            scale = float(d_out)
            if scale != 1.0:
                for g in grads:
                    if g is not None:
                        g.mul_(scale)
            ctx.lease.gset.state, ctx.lease.gset.owner = "handed", threading.get_ident()
            return (None, None, None, None, *grads)
        idx, *params = ctx.saved_tensors
        _unchanged(ctx.bridge, params, ctx.ptrs)
        grads = _backward_logits(ctx.bridge, ctx.masks, idx, params, needs, ctx.token,
                                 d_logits=d_out.float().contiguous())
        return (None, None, None, None, *grads)


class _CachedFunction(torch.autograd.Function):
    """idx (B, T) -> logits (B, T, V) of the cached forward (use_cache=True),
    on the bridge's KV cache. Its result takes part in autograd as the
    book's does (requires_grad where a parameter does), but has no
    backward: attn's cached steps keep no activations."""

    @staticmethod
    def forward(ctx, bridge, idx, own, *params):
        return bridge.kv_forward(idx, params, own)

    @staticmethod
    def backward(ctx, d_out):
        raise Error("GPTModel: a forward with use_cache=True has no backward in attn (its KV "
                    "cache keeps no activations): train with use_cache=False, or run the "
                    "cached forward under torch.no_grad(), as generate_text_simple_cached does",
                    "state")


def _unchanged(bridge, params, ptrs):
    """The parameters a backward binds are the tensors its forward bound:
    a .data replaced between the two (another shape, or other memory)
    raises instead of running C on it."""
    def refuse(i, t):
        return Error(f"GPTModel: parameter {bridge.names[i]} changed between the forward "
                     f"and the backward (its .data replaced: {tuple(t.shape)} now, "
                     f"{bridge.shapes[i]} at the forward); run the forward again", "state")
    _bind.unchanged(params, ptrs, bridge.shapes, refuse)


def _backward_logits(bridge, masks, idx, params, needs, token, d_logits=None, fill=None):
    """The parameters' gradients of the logits forward `token` (its
    activations, or the same forward run again when another ran since) from
    the logits' gradient: d_logits (B, T, V), or fill(d) writing it into the
    bridge's buffer."""
    (B, T), V = idx.shape, bridge.width
    if d_logits is not None and d_logits.shape != (B, T, V):
        raise Error(f"GPTModel: the logits' gradient is {tuple(d_logits.shape)}, the logits "
                    f"{(B, T, V)}", "shape")

    def redo():  # another forward ran since: this one's activations again
        _logits_again(bridge, idx, masks, params)

    lease, grads = _acquire(bridge, params, needs)
    with bridge.lock:
        if d_logits is None:
            d_logits = bridge.d_logits_buffer(B * T, V)
            fill(d_logits)
        bridge.backward_logits(d_logits, params, grads, B, T, token, redo)
    lease.gset.state, lease.gset.owner = "handed", threading.get_ident()
    return grads


def _logits_again(bridge, idx, masks, params):
    """The logits forward of idx run again, with the same masks: its logits
    and its token (the activations are this forward's again)."""
    logits = _empty((*idx.shape, bridge.width))
    _, token, _ = bridge.forward(idx, None, masks, params, logits=logits)
    return logits, token


def _c_loss(logits, t32, lse=None):
    """attn's mean cross-entropy of logits (N, V) float32 and t32 (N) int32
    (each row's log-sum-exp into lse when given)."""
    N, V = logits.shape
    if _sdpa.pin(logits, (N, V)) is None:  # its storage resized since the checks
        raise Error(f"GPTModel: the logits ({N}, {V}) are outside their storage", "shape")
    return lib.attn_cross_entropy_forward(logits.data_ptr(), t32.data_ptr(),
                                          lse.data_ptr() if lse is not None else None, N, V)


class _LogitsInfo:
    """Where a _Logits tensor came from: enough to run its model's backward
    from the loss's own gradient."""

    def __init__(self, bridge, masks, idx, params, token, out, ptrs):
        self.bridge, self.masks, self.idx, self.params = bridge, masks, idx, params
        self.token, self.ptrs = token, ptrs
        with torch._C.DisableTorchFunction():  # (inference tensors have no version: never fused)
            self.ptr = out.data_ptr()
            self.version = None if out.is_inference() else out._version


_VIEWS = {torch.Tensor.flatten, torch.flatten, torch.Tensor.view, torch.Tensor.reshape,
          torch.reshape}


class _Logits(torch.Tensor):
    """GPTModel's logits: an ordinary float32 tensor to every operation but
    one. F.cross_entropy(logits.flatten(0, 1), targets) (or a view/reshape to
    (B*T, V)) with its default arguments and targets in [0, V) is computed by
    attn (_LogitsLoss): the loss in C, and at backward the logits' gradient
    written in C straight into the model's C backward, with no logits
    gradient in torch. Changed in place, or any other use, and PyTorch's own
    operations run."""

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is torch.nn.functional.cross_entropy:
            loss = _fused_cross_entropy(*args, **kwargs)
            if loss is not None:
                return loss
        with torch._C.DisableTorchFunction():
            out = func(*args, **kwargs)
        info = getattr(args[0], "_attn_info", None) if args else None
        if func in _VIEWS and info is not None and isinstance(out, torch.Tensor):
            return _as_logits(out, info)
        return out  # plain tensors: only the model's output and its views route

    def _plain(self):
        """The same tensor as a torch.Tensor (an alias on the same graph)."""
        with torch._C.DisableTorchFunction():
            return torch.Tensor.as_subclass(self, torch.Tensor)

    def __reduce_ex__(self, protocol):  # pickle, torch.save, copy: a plain tensor
        return self._plain().__reduce_ex__(protocol)

    def __deepcopy__(self, memo):  # a plain tensor's copy (torch refuses a non-leaf's, as here)
        out = copy.deepcopy(self._plain(), memo)
        memo[id(self)] = out
        return out

    def __repr__(self, *, tensor_contents=None):  # as a plain tensor's: tensor(..., grad_fn=)
        with torch._C.DisableTorchFunction():
            text = torch.Tensor.detach(self).__repr__(tensor_contents=tensor_contents)
        if self.grad_fn is not None:
            text = f"{text[:-1]}, grad_fn=<{type(self.grad_fn).__name__}>)"
        return text


def _as_logits(t, info):
    with torch._C.DisableTorchFunction():
        out = t.as_subclass(_Logits)
    out._attn_info = info
    return out


def _fused_cross_entropy(input, target, weight=None, size_average=None, ignore_index=-100,
                         reduce=None, reduction="mean", label_smoothing=0.0):
    """_LogitsLoss's result, or None where PyTorch's cross_entropy must run."""
    info = getattr(input, "_attn_info", None)
    if (info is None or weight is not None or size_average is not None or reduce is not None
            or reduction != "mean" or label_smoothing != 0.0
            or not isinstance(target, torch.Tensor) or target.requires_grad):
        return None
    idx, V = info.idx, info.bridge.width
    N = idx.numel()
    with torch._C.DisableTorchFunction():
        if (info.version is None or input.is_inference() or input.dtype != torch.float32
                or tuple(input.shape) != (N, V) or not input.is_contiguous()
                or input.data_ptr() != info.ptr or input._version != info.version
                or tuple(target.shape) != (N,) or target.dtype not in (torch.int64, torch.int32)):
            return None
        valid = (target >= 0) & (target < V)
        if ignore_index == _IGNORE:  # chapter 7's padding: attn's masked loss (attn_cross_entropy)
            valid |= target == _IGNORE
        if not bool(valid.all()):
            return None  # another ignore_index, or an error: PyTorch's own
        t32 = target.to(torch.int32, memory_format=torch.contiguous_format, copy=True)
        with torch.no_grad():  # the same memory, plain (its gradient comes from the params)
            logits = input.as_subclass(torch.Tensor)
    if torch.is_grad_enabled() and input.requires_grad:
        return _LogitsLoss.apply(info, logits, t32, *info.params)
    return torch.tensor(_c_loss(logits, t32))


class _LogitsLoss(torch.autograd.Function):
    """F.cross_entropy(logits (B*T, V), targets) of a GPTModel's logits: the
    loss in C; its backward writes the logits' gradient in C into the model's
    buffer and runs the model's backward from it, returning the parameters'
    gradients (none to the logits: their own node is not needed)."""

    @staticmethod
    def forward(ctx, info, logits, t32, *params):
        lse = torch.empty(logits.shape[0], dtype=torch.float32)
        loss = _c_loss(logits, t32, lse)
        ctx.info, ctx.logits, ctx.version = info, logits, logits._version
        ctx.save_for_backward(t32, lse, *params)  # torch checks the weights are not changed
        return torch.tensor(loss, dtype=torch.float32)

    @staticmethod
    def backward(ctx, d_loss):
        _sdpa.no_double_backward("GPTModel")
        t32, lse, *params = ctx.saved_tensors
        info, logits, token = ctx.info, ctx.logits, ctx.info.token
        _unchanged(info.bridge, params, info.ptrs)
        (N, V), bridge = logits.shape, info.bridge
        if logits._version != ctx.version:  # changed in place since (torch's own loss allows
            logits, token = _logits_again(bridge, info.idx, info.masks, params)  # it)
            logits = logits.view(N, V)

        if _sdpa.pin(logits, (N, V)) is None:  # its storage resized since the forward
            raise Error(f"GPTModel: the logits ({N}, {V}) are outside their storage", "shape")

        counted = lib.attn_cross_entropy_count(t32.data_ptr(), N)  # rows not ignored

        def fill(d):  # (every row ignored: zeros, as torch's, and the loss NaN)
            scale = float(d_loss) / counted if counted else 0.0
            lib.attn_cross_entropy_grad(logits.data_ptr(), t32.data_ptr(), lse.data_ptr(), scale,
                                        d.data_ptr(), N, V)

        grads = _backward_logits(bridge, info.masks, info.idx, params,
                                 ctx.needs_input_grad[3:], token, fill=fill)
        return (None, None, None, *grads)


class _TransformerBlock(nn.Module):
    """The book's TransformerBlock(cfg): att (attn.torch.MultiHeadAttention),
    ff, norm1, norm2, drop_shortcut, created in the book's order."""

    def __init__(self, cfg):
        super().__init__()
        self.att = MultiHeadAttention(d_in=cfg["emb_dim"], d_out=cfg["emb_dim"],
                                      context_length=cfg["context_length"],
                                      num_heads=cfg["n_heads"], dropout=cfg["drop_rate"],
                                      qkv_bias=cfg["qkv_bias"])
        self.ff = _FeedForward(cfg)
        self.norm1 = _LayerNorm(cfg["emb_dim"])
        self.norm2 = _LayerNorm(cfg["emb_dim"])
        self.drop_shortcut = nn.Dropout(cfg["drop_rate"])

    def forward(self, x, use_cache=False):
        """x (B, T, C) -> (B, T, C), the book's pre-LayerNorm block (attention
        in C); use_cache as ch04/03's block: passed on to att."""
        h = self.att(self.norm1(x), use_cache=True) if use_cache else self.att(self.norm1(x))
        x = x + self.drop_shortcut(h)
        return x + self.drop_shortcut(self.ff(self.norm2(x)))


class GPTModel(nn.Module):
    """The book's chapter-4 GPTModel(cfg) run by attn: the embeddings, every
    block, the final norm and the output head, forward and backward, in
    attn's C model (one torch.autograd.Function).

    cfg: the book's dict (vocab_size, context_length, emb_dim, n_heads,
    n_layers, drop_rate, qkv_bias). The submodules and parameters are the
    book's, created in its order (tok_emb, pos_emb, drop_emb, trf_blocks.N.
    {att, ff, norm1, norm2, drop_shortcut}, final_norm, out_head), so after
    torch.manual_seed the weights equal the book's and state_dict() has the
    book's keys (the att.mask buffers included) and loads both ways.

    forward(in_idx) with in_idx (B, T) int64, T <= context_length -> logits
    (B, T, vocab_size) float32, a tensor like any other except that the
    book's F.cross_entropy(logits.flatten(0, 1), targets.flatten()) (default
    arguments, targets in [0, V)) runs in attn: the loss in C and, at
    backward, the logits' gradient written in C into the model's backward,
    never a torch tensor; other losses run PyTorch's. forward(in_idx, targets=...) with targets
    (B, T) -> the mean cross-entropy (a 0-dim tensor, as
    F.cross_entropy(logits.flatten(0, 1), targets.flatten())) by attn's fused
    head + loss: no (B, T, V) tensor, and the gradients are computed by that
    same forward (backward only hands them over). Gradients land in each
    parameter's .grad as torch's own backward leaves them, so a
    torch.optim loop works unchanged; in training mode the dropout masks are
    drawn from PyTorch's generator as the book's nn.Dropout modules draw them,
    in the same order (one byte per dropped element), so the losses equal the
    book's model's. eval()/train() and torch.no_grad() behave as the book's.

    ch04/03's KV cache: forward(in_idx, use_cache=True) (or forward(in_idx,
    True)) feeds in_idx (B, T) at positions current_pos.. into attn's C KV
    cache of the whole model and returns every position's logits (B, T,
    vocab_size); reset_kv_cache() empties it; current_pos (read-only) is
    its length. The book's generate_text_simple_cached runs unchanged. In
    eval mode only (dropout in training mode raises), fp32 products at any
    precision, no backward (raises attn.Error); past context_length, or
    another B while the cache holds tokens, raises before anything is fed.

    The C model reads and writes the parameters' own storage (float32,
    contiguous): no weight is copied per call. precision="bf16" runs the
    products in bf16 with fp32 sums (attn's bf16 kernels; weights and
    gradients stay fp32); it raises attn.Error on a CPU without
    AVX512-BF16. Parameters converted to bfloat16 (.to(torch.bfloat16)) run
    those kernels on float32 copies made per call, the gradients cast back;
    float16 and float64 are computed in float32 and cast back (one warning).
    The att submodules are attn.torch.MultiHeadAttention and each submodule
    also runs on its own, as the book's.

    Every forward first checks what it runs (_torch_tree; docs/python.md):
    the module tree must be the book's of this cfg (no module added,
    deleted, replaced by another class or wrapped, no hook on a submodule,
    the causal masks), each parameter a floating point CPU tensor of its
    place's shape; the backward, that the parameters are the tensors its
    forward bound. Anything else raises attn.Error before any C runs."""

    def __init__(self, cfg, precision="fp32"):
        super().__init__()
        cfg = _config(cfg)
        if precision not in _PRECISIONS:
            raise Error(f"GPTModel: precision must be 'fp32' or 'bf16', got {precision!r}")
        self.__dict__["_attn_bridge"] = _Bridge(cfg)  # the C model checks cfg first
        self.tok_emb = nn.Embedding(cfg["vocab_size"], cfg["emb_dim"])
        self.pos_emb = nn.Embedding(cfg["context_length"], cfg["emb_dim"])
        self.drop_emb = nn.Dropout(cfg["drop_rate"])
        self.trf_blocks = nn.Sequential(*[_TransformerBlock(cfg) for _ in range(cfg["n_layers"])])
        self.final_norm = _LayerNorm(cfg["emb_dim"])
        self.out_head = nn.Linear(cfg["emb_dim"], cfg["vocab_size"], bias=False)
        self._setup(cfg, precision)

    def _setup(self, cfg, precision, rules=None):
        self.cfg = cfg
        self.precision = precision
        self.__dict__["_attn_rules"] = rules or _own_rules()
        if precision == "bf16":
            self._bridge().set_precision(1)  # refuses a CPU without AVX512-BF16 now

    def __getstate__(self):  # pickling: the C model is made again on use
        state = self.__dict__.copy()
        state.pop("_attn_bridge", None)
        return state

    def _bridge(self, built=None):
        """The C model of cfg and built (_Bridge; None: the one made last,
        or the language model), made again when either changed: the book's
        chapter 6 replaces out_head, appendix E wraps the Linears."""
        bridge = self.__dict__.get("_attn_bridge")
        if bridge is not None and bridge.cfg == self.cfg and built in (None, bridge.built):
            return bridge
        built = built or (0, 0, ())
        new = _Bridge(self.cfg, built)
        if bridge is not None:
            new.set_precision(bridge.precision)
            # the cached tokens stay the old model's: a cached call raises until reset_kv_cache
            new.stale_kv = bridge.kv_len() or bridge.stale_kv
            if new.stale_kv:
                new.stale_what = _changed(bridge.built, built) if bridge.cfg == self.cfg \
                    else "cfg"
        self.__dict__["_attn_bridge"] = new
        return new

    def _checked(self):
        """(params, training, bridge): the tree checked against cfg and the
        C model made for it (_torch_tree), the parameters in the C model's
        order, one dtype; attn.Error first."""
        rules = self.__dict__.get("_attn_rules")
        if rules is None:  # a model pickled before the rules
            rules = self.__dict__["_attn_rules"] = _own_rules()
        _tree.no_global_hooks()
        bridge = self._bridge(_tree.structure(self, self.cfg, rules))
        params, training = _tree.run_list(self, self.cfg, rules, bridge.table)
        dtype = params[0].dtype
        for i, t in enumerate(params):
            if t.dtype != dtype:
                raise Error(f"GPTModel: parameter {bridge.names[i]} is {t.dtype}, "
                            f"{bridge.names[0]} {dtype}: one dtype for all")
        return params, training, bridge

    def _masks(self, bridge, B, T, training):
        """The dropout masks the book's forward draws, in its order: drop_emb
        (B, T, C); per block att's weights (B, H, T, T), drop_shortcut twice
        (B, T, C). nn.Dropout: torch.empty_like(x).bernoulli_(1 - p) each; a
        byte tensor draws the same values. Where attn's C draw gives this
        build's values (_c_draws_masks), a _Drawn instead: the C forward
        draws them itself from torch's generator, with no mask tensor.
        training: the dropout modules' mode (one for all)."""
        p = self.cfg["drop_rate"]
        if not (training and p > 0):
            return None
        if _c_draws_masks():  # drawn in C as the forward needs them: no mask tensor
            return _Drawn()
        C, H = self.cfg["emb_dim"], self.cfg["n_heads"]
        shapes = [(B, T, C)] + [(B, H, T, T), (B, T, C), (B, T, C)] * self.cfg["n_layers"]
        masks = torch.empty(bridge.mask_numel(B, T), dtype=torch.uint8)
        at = 0
        for s in shapes:
            n = s[0] * s[1] * s[2] * (s[3] if len(s) == 4 else 1)
            masks[at:at + n].view(s).bernoulli_(1 - p)
            at += n
        return masks

    def forward(self, in_idx, targets=None, use_cache=False):
        """in_idx (B, T) -> logits (B, T, vocab_size); with targets (B, T)
        the mean cross-entropy instead; use_cache=True (or True as the second
        argument, as ch04/03's forward(in_idx, use_cache)) the cached forward
        (see the class). The module tree and every parameter are checked
        first (see the class)."""
        if isinstance(targets, bool):  # ch04/03's forward(in_idx, use_cache)
            targets, use_cache = None, targets
        if use_cache:
            if targets is not None:
                raise Error("GPTModel: use_cache=True takes no targets (the cached forward "
                            "gives logits, as the book's)")
            return self._cached(in_idx)
        idx = _ids(in_idx, "in_idx")
        if targets is not None:
            if isinstance(targets, torch.Tensor) and targets.shape != in_idx.shape:
                raise Error(f"GPTModel: targets must be {tuple(in_idx.shape)} as in_idx, got "
                            f"{tuple(targets.shape)}", "shape")
            targets = _ids(targets, "targets")
        params, training, bridge = self._checked()
        dtype = params[0].dtype
        precision = _PRECISIONS[self.precision]
        if dtype != torch.float32:
            if dtype == torch.bfloat16:
                precision = 1
            else:
                _sdpa.warn_fp32("GPTModel", dtype)
            params = [t.float() for t in params]  # the copies' gradients reach t cast back
        bridge.set_precision(precision)
        params = [t.contiguous() for t in params]
        masks = self._masks(bridge, *idx.shape, training)
        out = _GPTFunction.apply(bridge, masks, idx, targets, *params)
        return out if dtype == torch.float32 else out.to(dtype)


    def _cached(self, in_idx):
        """forward(in_idx, use_cache=True): ch04/03's, on attn's C KV cache."""
        idx = _ids(in_idx, "in_idx")
        params, training, bridge = self._checked()
        if training and self.cfg["drop_rate"] > 0:
            raise Error("GPTModel: use_cache=True runs the evaluation forward (attn's KV cache "
                        "applies no dropout) and the dropout modules are in training mode: "
                        "call model.eval() first, as generate_text_simple_cached does", "state")
        if bridge.stale_kv:
            raise Error(f"GPTModel: {bridge.stale_what} changed while the KV cache held "
                        f"{bridge.stale_kv} tokens, cached by the model before the change: "
                        "reset_kv_cache() and feed the tokens again", "state")
        T, S, held = idx.shape[1], self.cfg["context_length"], bridge.kv_len()
        if held + T > S:
            raise Error(f"GPTModel: the KV cache holds {held} tokens (current_pos); {T} more "
                        f"exceed context_length {S} (the book's pos_emb has no position {S}): "
                        "reset_kv_cache() and feed the last tokens again", "state")
        dtype, given = params[0].dtype, params
        if dtype != torch.float32:
            if dtype != torch.bfloat16:
                _sdpa.warn_fp32("GPTModel", dtype)
            params = [t.float() for t in params]
        params = [t.contiguous() for t in params]
        own = [a is b for a, b in zip(params, given)]
        out = _CachedFunction.apply(bridge, idx, own, *params)
        return out if dtype == torch.float32 else out.to(dtype)

    def reset_kv_cache(self):
        """Empty the KV cache of forward(..., use_cache=True): the next
        cached forward starts at position 0 (ch04/03's reset_kv_cache)."""
        self._bridge().kv_reset()

    @property
    def current_pos(self):
        """Tokens in the KV cache (per sequence): the position the next
        cached forward starts at, as ch04/03's current_pos (read-only:
        reset_kv_cache() empties the cache)."""
        bridge = self._bridge()
        return bridge.kv_len() or bridge.stale_kv


def _changed(old, new):
    """What differs between two _Bridge.built, for a message."""
    if old[:2] != new[:2]:
        return "out_head"
    sites = sorted({s[0] for s in old[2]} ^ {s[0] for s in new[2]} or
                   {a[0] for a, b in zip(old[2], new[2]) if a != b})
    return ", ".join(s.rstrip(".") for s in sites) or "the model"


def _ids(t, what):
    """Token ids (B, T), B and T >= 1, as a private contiguous int64 copy
    (the C model reads it, maybe again at backward: nobody else holds it)."""
    _sdpa.check_tensor(t, f"GPTModel: {what}", floating=False)
    if t.dim() != 2 or t.dtype not in (torch.int64, torch.int32):
        raise Error(f"GPTModel: {what} must be (B, T) integer token ids, got "
                    f"{tuple(t.shape)} {t.dtype}", "shape")
    for n, d in zip(("batch size B", "sequence length T"), t.shape):
        if d == 0:
            raise Error(f"GPTModel: {what} is empty: {n} = 0 (shape {tuple(t.shape)}); "
                        "nothing to run", "shape")
    return t.to(torch.int64, memory_format=torch.contiguous_format, copy=True)


def _own_rules():
    """The tree rules taking attn's classes at each place: attn.torch's and
    attn.book's, which compute the book's function (no probe)."""
    from . import book
    classes = {"blocks": {nn.Sequential}, "block": {_TransformerBlock, book.TransformerBlock},
               "att": {MultiHeadAttention, book.MultiHeadAttention},
               "ff": {book.FeedForward}, "gelu": {book.GELU}, "norm": {book.LayerNorm}}
    return _tree.Rules(classes, set().union(*classes.values()))


def swap_model(model, precision="fp32"):
    """An attn.torch.GPTModel on the book's GPTModel `model`'s own modules:
    the same Parameter objects and mask buffers (an in-place change on either
    is seen by both; optimizers made for one train the other), the same
    state_dict keys and training flag; its forward runs in attn's C model
    (precision as GPTModel's; use_cache, reset_kv_cache and current_pos as
    GPTModel's, on a cache of its own). model must have the book's structure
    (tok_emb, pos_emb, drop_emb, trf_blocks (nn.Sequential, or ch04/03's
    nn.ModuleList) of att/ff/norm1/norm2/drop_shortcut, final_norm,
    out_head); PyTorch's generator is not used."""
    if precision not in _PRECISIONS:
        raise Error(f"swap_model: precision must be 'fp32' or 'bf16', got {precision!r}")
    try:
        blocks = list(model.trf_blocks)
        att = blocks[0].att
        w_query = (_tree.lora_parts(att.W_query) or (att.W_query,))[0]  # appendix E's wrapper
        cfg = {"vocab_size": model.tok_emb.num_embeddings,
               "context_length": model.pos_emb.num_embeddings,
               "emb_dim": model.tok_emb.embedding_dim, "n_heads": int(att.num_heads),
               "n_layers": len(blocks), "drop_rate": float(model.drop_emb.p),
               "qkv_bias": w_query.bias is not None}
        parts = {n: getattr(model, n) for n in ("tok_emb", "pos_emb", "drop_emb", "trf_blocks",
                                                 "final_norm", "out_head")}
    except (AttributeError, IndexError, TypeError) as e:
        raise Error(f"swap_model: {type(model).__name__} has not the book's GPTModel structure "
                    f"({e})") from None
    new = GPTModel.__new__(GPTModel)
    nn.Module.__init__(new)
    for name, part in parts.items():
        setattr(new, name, part)
    new._setup(_config(cfg), precision, _tree.admit(new, _own_rules()))
    try:
        new._checked()  # the tree attn runs, its classes of the user's code probed once
    except Error as e:
        raise Error(f"swap_model: {type(model).__name__} has not the book's GPTModel structure "
                    f"({e})") from None
    return new.train(model.training)
