"""The one torch bridge: attn.torch's modules (the attention classes and
GPTModel) run attn's C code on the torch parameters' own storage. bind
points a C parameter table (attn_module_bind, attn_h_bgpt_bind) at the
tensors, checked right before each C call (pin: float32, contiguous, the
table's shape, on the CPU, inside its storage); unchanged, at backward,
that they are the tensors the forward bound (a .data replaced between the
two raises instead of running C on other memory)."""
import ctypes

from . import _torch_sdpa as _sdpa
from ._lib import Error, call

c_void_p = ctypes.c_void_p


def bind(fn, handle, names, shapes, params, grads, refuse):
    """Point the C table of handle at params (and grads: None, the C
    side's own; else one tensor per parameter) by fn(handle, data, grad,
    n). Returns (addresses, aliases): keep the aliases until the C call
    returns (they hold the storages). A tensor pin refuses raises
    refuse(i, t), an attn.Error naming it."""
    n = len(shapes)
    if len(params) != n:
        raise Error(f"{len(params)} parameters given, the C table has {n}", "shape")
    ptrs, aliases = [], []
    for i, t in enumerate(params):
        held = _sdpa.pin(t, shapes[i])
        if held is None:
            raise refuse(i, t)
        ptrs.append(held[0])
        aliases.append(held[1])
    data = (c_void_p * n)(*ptrs)
    g = None if grads is None else (c_void_p * n)(
        *[t.data_ptr() if t is not None else None for t in grads])
    call(fn, handle, data, g, n)
    return ptrs, aliases


def unchanged(params, ptrs, shapes, refuse):
    """At backward: each parameter is the tensor its forward bound (the
    same address and shape); else raises refuse(i, t)."""
    for i, (t, ptr) in enumerate(zip(params, ptrs)):
        if t.data_ptr() != ptr or t.shape != shapes[i]:
            raise refuse(i, t)
