"""libattn.so through ctypes: finding it, the prototypes of its flat API
(include/attn/handles.h), and turning its statuses into attn.Error.

ctypes rather than cffi: it is part of Python (nothing to install, nothing
compiled, the same file for every Python 3), and the flat API passes only
numbers, strings, arrays and opaque pointers (no struct but attn_error), so a
C parser would buy nothing. The library is looked for, in order, at
$ATTN_LIBRARY, where `make install` put it (_installed.py, a path relative to
this package), in the build tree (../../build/libattn.so from here), then by
the dynamic loader's own search. `pip install .` puts the library inside the
package (attn/libattn.so), looked for right after $ATTN_LIBRARY."""
import ctypes
import math
import numbers
import os
import threading

_HERE = os.path.dirname(os.path.abspath(__file__))
_MSG_MAX = 512  # ATTN_ERROR_MSG_MAX (attn/status.h)


class Error(RuntimeError):
    """A failure: the library's message (status: its short name, such as
    "shape" or "invalid argument"), or a bad input caught before the call."""

    def __init__(self, message, status="invalid argument"):
        super().__init__(message)
        self.status = status


Error.__module__ = "attn"


class ArgTypeError(Error, TypeError):
    """A bad argument of the wrong type: both attn.Error and TypeError."""

    def __init__(self, message):
        super().__init__(message, "invalid argument")


class ArgValueError(Error, ValueError):
    """A bad argument value (out of range, not finite): attn.Error and ValueError."""

    def __init__(self, message):
        super().__init__(message, "invalid argument")


ArgTypeError.__module__ = ArgValueError.__module__ = "attn"


def _candidates():
    env = os.environ.get("ATTN_LIBRARY")
    if env:
        return [env]
    found = [os.path.join(_HERE, "libattn.so")]  # pip install (setup.py)
    try:
        from . import _installed  # written by `make install`
        found.append(os.path.normpath(os.path.join(_HERE, _installed.LIBRARY)))
    except ImportError:
        pass
    found.append(os.path.normpath(os.path.join(_HERE, "..", "..", "build", "libattn.so")))
    found.append("libattn.so.0")
    return found


def _short_spin():
    """GOMP_SPINCOUNT=1000 unless the user chose a wait policy: OpenMP threads
    that spin long collapse on a busy machine (the attn program sets the same).
    libgomp reads it once, when it is loaded: it takes effect when attn is
    imported before anything else that uses OpenMP (torch does)."""
    if "OMP_WAIT_POLICY" not in os.environ and "GOMP_SPINCOUNT" not in os.environ:
        os.environ["GOMP_SPINCOUNT"] = "1000"


def _load():
    tried = []
    for path in _candidates():
        if os.sep in path and not os.path.exists(path):
            tried.append(f"{path} (missing)")
            continue
        try:
            return ctypes.CDLL(path), path
        except OSError as e:
            tried.append(f"{path} ({e})")
    raise ImportError("attn: cannot load libattn.so; tried " + "; ".join(tried) +
                      ". Build it with `make`, install it with `make install`, "
                      "or name it in ATTN_LIBRARY")


def _check_blas_kernels(lib):
    """libattn-ompwait.so names OpenBLAS's kernels for an Intel CPU before
    OpenBLAS starts (docs/engines.md). When numpy started OpenBLAS first, it
    runs what it chose itself, which on a CPU newer than its table is the
    generic SSE3 one: 4x slower there, and the last bits differ from the attn
    program's. Say so; nothing can restart it."""
    try:
        corename = lib.openblas_get_corename
        libc_getenv = ctypes.CDLL(None).getenv
    except AttributeError:  # not OpenBLAS, or not a dynamic-arch one
        return
    corename.restype = libc_getenv.restype = ctypes.c_char_p
    libc_getenv.argtypes = [ctypes.c_char_p]
    want, got = libc_getenv(b"OPENBLAS_CORETYPE"), corename()
    if want and got and want.decode().lower() != got.decode().lower():
        import warnings
        warnings.warn(f"attn: OpenBLAS was started (by numpy?) before attn and runs its "
                      f"{got.decode()} kernels, not {want.decode()}: import attn before numpy, "
                      f"or set OPENBLAS_CORETYPE={want.decode()} before starting Python",
                      RuntimeWarning, stacklevel=3)


_short_spin()
lib, library_path = _load()
_check_blas_kernels(lib)

c_int, c_double, c_float, c_size_t = ctypes.c_int, ctypes.c_double, ctypes.c_float, ctypes.c_size_t
c_int64, c_uint64, c_char_p, c_void_p = ctypes.c_int64, ctypes.c_uint64, ctypes.c_char_p, ctypes.c_void_p
P = ctypes.POINTER


class ErrorStruct(ctypes.Structure):
    _fields_ = [("code", c_int), ("msg", ctypes.c_char * _MSG_MAX)]


Err = P(ErrorStruct)


class StKv(ctypes.Structure):  # attn_st_kv (attn/safetensors.h)
    _fields_ = [("key", c_char_p), ("value", c_char_p)]


class StEntry(ctypes.Structure):  # attn_st_entry (attn/safetensors.h)
    _fields_ = [("name", c_char_p), ("dtype", c_char_p), ("ndim", c_int),
                ("shape", P(c_int64)), ("data", c_void_p), ("nbytes", c_size_t)]
class AdamwTensor(ctypes.Structure):  # attn_adamw_tensor (attn/optim.h)
    _fields_ = [("param", c_void_p), ("grad", c_void_p), ("exp_avg", c_void_p),
                ("exp_avg_sq", c_void_p), ("numel", c_size_t)]


class AdamwConfig(ctypes.Structure):  # attn_adamw_config (attn/optim.h)
    _fields_ = [("beta1", c_double), ("beta2", c_double), ("eps", c_double),
                ("weight_decay", c_double)]


TRAIN_CALLBACK = ctypes.CFUNCTYPE(c_int, c_void_p, c_int, c_int64, c_int64, c_double, c_double,
                                  c_double)
FINETUNE_CALLBACK = ctypes.CFUNCTYPE(None, c_void_p, c_int, c_int, c_int64, c_double, c_double,
                                     c_char_p)

# Every C function the package calls, declared here once: name: (restype,
# argtypes); pointers to arrays are passed as c_void_p.
_PROTOS = {
    "attn_version": (c_char_p, []),
    "attn_status_str": (c_char_p, [c_int]),
    "attn_h_free": (None, [c_void_p]),
    "attn_h_rng_create": (c_void_p, [c_uint64]),
    "attn_h_rng_free": (None, [c_void_p]),
    "attn_h_param_count": (c_int, [c_void_p]),
    "attn_h_param_name": (c_char_p, [c_void_p, c_int]),
    "attn_h_param_data": (c_void_p, [c_void_p, c_int]),
    "attn_h_param_grad": (c_void_p, [c_void_p, c_int]),
    "attn_h_param_shape": (c_int, [c_void_p, c_int, P(c_int64)]),
    "attn_h_module_create": (c_int, [c_char_p, c_int, c_int, c_int, c_int, c_double, c_int,
                                     c_void_p, P(c_void_p), Err]),
    "attn_module_free": (None, [c_void_p]),
    "attn_module_params": (c_void_p, [c_void_p]),
    "attn_module_bind": (c_int, [c_void_p, P(c_void_p), P(c_void_p), c_int, Err]),
    "attn_module_out_dim": (c_int, [c_void_p]),
    "attn_h_module_forward": (c_int, [c_void_p, c_void_p, c_int, c_int, c_void_p, c_int, c_void_p,
                                      c_int, c_void_p, c_size_t, Err]),
    "attn_h_module_mask_numel": (c_size_t, [c_void_p, c_int, c_int]),
    "attn_h_module_backward": (c_int, [c_void_p, c_void_p, c_int, c_int, c_void_p, c_void_p,
                                       Err]),
    "attn_h_sdpa_forward": (c_int, [c_int, c_int, c_int, c_int, c_void_p, c_void_p, c_void_p,
                                    c_float, c_double, c_void_p, c_int, c_int, c_void_p, c_void_p,
                                    Err]),
    "attn_h_sdpa_backward": (c_int, [c_int, c_int, c_int, c_int, c_void_p, c_void_p, c_void_p,
                                     c_void_p, c_void_p, c_float, c_double, c_void_p, c_int, c_int,
                                     c_void_p, c_void_p, c_void_p, c_void_p, Err]),
    "attn_h_gpt_load": (c_int, [c_char_p, P(c_void_p), Err]),
    "attn_h_gpt_load_weights": (c_int, [c_char_p, c_int, P(c_void_p), Err]),
    "attn_h_gpt_free": (None, [c_void_p]),
    "attn_h_gpt_info_json": (c_void_p, [c_void_p]),
    "attn_h_gpt_params": (c_void_p, [c_void_p]),
    "attn_h_gpt_write": (c_int, [c_void_p, c_char_p, c_void_p, c_int, Err]),
    "attn_h_gpt_encode": (c_int, [c_void_p, c_char_p, c_size_t, c_int, c_void_p, c_size_t,
                                  P(c_size_t), Err]),
    "attn_h_gpt_decode": (c_int, [c_void_p, c_void_p, c_size_t, c_void_p, c_size_t, P(c_size_t),
                                  Err]),
    "attn_h_gpt_forward": (c_int, [c_void_p, c_void_p, c_void_p, c_int, c_int, c_void_p,
                                   P(c_float), Err]),
    "attn_h_gpt_attention": (c_int, [c_void_p, c_void_p, c_int, c_void_p, Err]),
    "attn_h_generator_create": (c_int, [c_void_p, c_double, c_int, c_double, c_uint64,
                                        c_char_p, c_int, P(c_void_p), Err]),
    "attn_h_generator_create_precision": (c_int, [c_void_p, c_double, c_int, c_double, c_uint64,
                                                  c_char_p, c_int, c_int, P(c_void_p), Err]),
    "attn_generator_prompt": (c_int, [c_void_p, c_char_p, c_size_t, Err]),
    "attn_generator_next": (c_int, [c_void_p, P(ctypes.c_int32), ctypes.c_char_p, P(c_int), Err]),
    "attn_h_generator_stopped": (c_int, [c_void_p]),
    "attn_h_generator_next": (c_int, [c_void_p, P(ctypes.c_int32), c_void_p, c_size_t,
                                      P(c_size_t), Err]),
    "attn_h_generator_free": (None, [c_void_p]),
    "attn_h_viz_html": (c_int, [c_void_p, c_char_p, c_size_t, c_int, c_double, c_int, c_uint64,
                                c_char_p, P(c_void_p), P(c_size_t), Err]),
    "attn_h_train": (c_int, [c_char_p, c_char_p, c_char_p, c_char_p, c_char_p, c_char_p, c_int,
                             c_int, TRAIN_CALLBACK, c_void_p, P(c_int64), P(c_int), c_char_p,
                             P(c_int), Err]),
    "attn_h_finetune": (c_int, [c_char_p, c_char_p, c_char_p, c_char_p, c_char_p, c_char_p,
                                FINETUNE_CALLBACK, c_void_p, P(c_int64), P(c_int), Err]),
    "attn_h_gpt_classify": (c_int, [c_void_p, c_char_p, c_size_t, P(c_int), c_void_p, c_int,
                                    Err]),
    "attn_precision_check": (c_int, [c_int, Err]),
    "attn_output_check": (c_int, [c_char_p, c_void_p, c_int, c_void_p, c_int, Err]),
    "attn_ckpt_output_check": (c_int, [c_char_p, c_char_p, c_void_p, c_int, c_void_p, c_int,
                                       Err]),
    "attn_safetensors_write": (c_int, [c_char_p, c_void_p, c_int, c_void_p, c_int, Err]),
    "attn_safetensors_write_params": (c_int, [c_char_p, c_void_p, c_void_p, c_int, Err]),
    "attn_h_set_threads": (None, [c_int, c_int]),
    "attn_h_get_threads": (c_int, []),
    "attn_file_write_atomic": (c_int, [c_char_p, c_char_p, c_size_t, Err]),
    # GPT-2's tokenizer (attn.tokenizer)
    "attn_tokenizer_gpt2_find": (c_int, [c_char_p, c_char_p, c_size_t, Err]),
    "attn_bpe_load": (c_int, [P(c_void_p), c_char_p, c_char_p, Err]),
    "attn_bpe_free": (None, [c_void_p]),
    "attn_bpe_n_vocab": (c_int, [c_void_p]),
    "attn_bpe_eot": (ctypes.c_int32, [c_void_p]),
    "attn_bpe_encode": (c_int, [c_void_p, c_char_p, c_size_t, c_int, c_void_p, c_size_t,
                                P(c_size_t), Err]),
    "attn_bpe_decode": (c_int, [c_void_p, c_void_p, c_size_t, c_void_p, c_size_t, P(c_size_t),
                                Err]),
    # the whole model under attn.torch (attn/handles.h's borrowed GPT)
    "attn_h_bgpt_create": (c_int, [c_char_p, P(c_void_p), c_void_p]),
    "attn_h_bgpt_create_built": (c_int, [c_char_p, c_int, c_int, c_int, c_void_p, c_void_p,
                                         c_void_p, P(c_void_p), c_void_p]),
    "attn_h_bgpt_set_trainable": (c_int, [c_void_p, c_void_p, c_int, c_void_p]),
    "attn_h_bgpt_free": (None, [c_void_p]),
    "attn_h_bgpt_params": (c_void_p, [c_void_p]),
    "attn_h_bgpt_set_precision": (c_int, [c_void_p, c_int, c_void_p]),
    "attn_h_bgpt_bind": (c_int, [c_void_p, c_void_p, c_void_p, c_int, c_void_p]),
    "attn_h_bgpt_set_lean": (None, [c_void_p, c_int]),
    "attn_h_bgpt_mask_numel": (c_size_t, [c_void_p, c_int, c_int]),
    "attn_h_bgpt_forward": (c_int, [c_void_p, c_void_p, c_void_p, c_int, c_int, c_int, c_void_p,
                                    c_size_t, c_int, c_void_p, P(c_float), c_void_p]),
    "attn_h_bgpt_forward_drawn": (c_int, [c_void_p, c_void_p, c_void_p, c_int, c_int, c_void_p,
                                          c_size_t, c_int, c_void_p, P(c_float), c_void_p]),
    "attn_h_torch_bernoulli": (c_int, [c_void_p, c_size_t, c_double, c_void_p, c_size_t,
                                       c_void_p]),
    "attn_h_bgpt_backward_logits": (c_int, [c_void_p, c_void_p, c_int, c_int, c_void_p]),
    "attn_h_bgpt_kv_forward": (c_int, [c_void_p, c_void_p, c_int, c_int, c_void_p, c_void_p]),
    "attn_h_bgpt_kv_reset": (None, [c_void_p]),
    "attn_h_bgpt_kv_len": (c_int, [c_void_p]),
    "attn_h_alloc_huge": (c_void_p, [c_size_t]),
    "attn_h_collapse_huge": (None, [c_void_p, c_size_t]),
    "attn_cross_entropy_count": (c_size_t, [c_void_p, c_size_t]),
    "attn_cross_entropy_forward": (c_float, [c_void_p, c_void_p, c_void_p, c_size_t, c_size_t]),
    "attn_cross_entropy_grad": (None, [c_void_p, c_void_p, c_void_p, c_float, c_void_p, c_size_t,
                                       c_size_t]),
    # attn.torch.AdamW
    "attn_adamw_step_tensors": (c_int, [P(AdamwTensor), c_int, P(AdamwConfig), c_double,
                                        c_int64, c_void_p]),
}
for _name, (_res, _args) in _PROTOS.items():
    _f = getattr(lib, _name)
    _f.restype = _res
    _f.argtypes = _args


def error():
    """A fresh error record for one call."""
    return ErrorStruct()


# The library's messages name the attn program's option where a choice
# helps (attn_precision_check: "use --precision fp32"); from Python that
# choice is a keyword argument.
_PY_SPELLINGS = (("--precision fp32", 'precision="fp32"'),)


def check(status, err):
    """Raise attn.Error with the library's message when status is not ATTN_OK
    (its options spelled as Python's keywords)."""
    if status != 0:
        msg = err.msg.decode("utf-8", "replace") or "attn: failed"
        for cli, py in _PY_SPELLINGS:
            msg = msg.replace(cli, py)
        raise Error(msg, lib.attn_status_str(status).decode())


def call(fn, *args):
    """fn(*args, &err), raising attn.Error on failure."""
    err = ErrorStruct()
    check(fn(*args, ctypes.byref(err)), err)


def take_string(ptr):
    """A malloc'd C string as str, freed."""
    if not ptr:
        raise Error("out of memory", "out of memory")
    try:
        return ctypes.string_at(ptr).decode("utf-8")
    finally:
        lib.attn_h_free(ptr)


def text(s, what="text"):
    """str -> UTF-8 bytes (None stays None); what names the argument when s
    is not a str or holds a lone surrogate (not UTF-8)."""
    if s is None:
        return None
    if not isinstance(s, str):
        raise ArgTypeError(f"{what} must be a str, got {type(s).__name__}")
    try:
        return s.encode("utf-8")
    except UnicodeEncodeError as e:
        raise ArgValueError(f"{what}: character {s[e.start]!r} at position {e.start} is not "
                            "UTF-8 (a lone surrogate)") from None


INT_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1


def cint(what, value, lo=0, hi=INT_MAX):
    """value as a Python int in [lo, hi] before it crosses into C, where ctypes
    would wrap it to the C type: ints and numpy integers only (a bool, float
    or str is a TypeError); out of range is a ValueError; both name what."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ArgTypeError(f"{what} must be an integer, got {type(value).__name__} {value!r}")
    v = int(value)
    if not lo <= v <= hi:
        raise ArgValueError(f"{what} must be in [{lo}, {hi}], got {v}")
    return v


def cfloat(what, value, lo=-math.inf, hi=math.inf, lo_open=False):
    """value as a finite float in [lo, hi] ((lo, hi] with lo_open); a
    non-number is a TypeError, NaN, infinity or out of range a ValueError."""
    if isinstance(value, (bool, str, bytes)):
        raise ArgTypeError(f"{what} must be a number, got {type(value).__name__} {value!r}")
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ArgTypeError(f"{what} must be a number, got {type(value).__name__} "
                        f"{value!r}") from None
    if not math.isfinite(v) or v < lo or v > hi or (lo_open and v == lo):
        left = "(" if lo_open else "["
        raise ArgValueError(f"{what} must be finite and in {left}{lo}, {hi}], got {v}")
    return v


def available_memory():
    """Bytes of memory available now (physical pages free or reclaimable,
    as /proc/meminfo's MemAvailable; the free pages where it is missing)."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


def check_budget(what, nbytes):
    """Refuse a size from the user's arguments before anything is allocated
    when it is over the memory available now; the error names the size."""
    have = available_memory()
    if nbytes > have:
        raise Error(f"{what} needs {nbytes} bytes ({nbytes / 2**30:.1f} GiB), more than the "
                    f"{have} bytes ({have / 2**30:.1f} GiB) of memory available", "out of memory")


class Handle:
    """A C object's address shared by threads: every call holds it, and
    close() waits for the calls in flight before it frees, so no call ever
    uses freed memory; a call after close() raises attn.Error. `with handle`
    is a shared hold: calls that only read the object (a generator reading a
    model's weights, a tokenizer) run in parallel, as the C calls release the
    GIL. `with handle.exclusive()` also takes the object's own lock, for calls
    that write state the object keeps (a module's saved activations, a GPT's
    activation buffers, which a call of another shape reallocates): those run
    one at a time per object, each on whole. free(address) is called once, by
    close() or when the owner is collected."""

    def __init__(self, address, free, what):
        self.address, self._free, self.what = address, free, what
        self._cond = threading.Condition(threading.Lock())
        self._users = 0
        self._closing = False
        self.lock = threading.Lock()
        self.owner, self.depth = None, 0  # the thread in exclusive(), and how deep

    @property
    def closed(self):
        return self._closing

    def hold(self):
        """Take a shared hold (release() gives it back); the address."""
        with self._cond:
            if self._closing or not self.address:
                raise Error(f"{self.what} is closed", "state")
            self._users += 1
            return self.address

    def release(self):
        with self._cond:
            self._users -= 1
            if self._users == 0:
                self._cond.notify_all()

    def __enter__(self):
        return self.hold()

    def __exit__(self, *exc):
        self.release()
        return False

    def exclusive(self):
        """A shared hold plus the object's lock (see the class)."""
        return _Exclusive(self)

    def close(self):
        """Wait for the calls in flight, then free (once; later closes do nothing)."""
        if self.owner == threading.get_ident():
            raise Error(f"{self.what}: close() inside one of its own calls", "state")
        with self._cond:
            if self._closing:
                # another close() frees it: wait until it has
                self._cond.wait_for(lambda: self.address is None)
                return
            self._closing = True
            self._cond.wait_for(lambda: self._users == 0)
            address, self.address = self.address, None
            try:
                if address:
                    self._free(address)
            finally:
                self._cond.notify_all()


class _Exclusive:
    __slots__ = ("handle",)

    def __init__(self, handle):
        self.handle = handle

    def __enter__(self):
        h, me = self.handle, threading.get_ident()
        if h.owner == me:  # nested in this thread's own exclusive call: already held
            h.depth += 1
            return h.address
        address = h.hold()
        h.lock.acquire()
        h.owner, h.depth = me, 1
        return address

    def __exit__(self, *exc):
        h = self.handle
        h.depth -= 1
        if h.depth == 0:
            h.owner = None
            h.lock.release()
            h.release()
        return False


def path(p, what="path"):
    """A path (str or os.PathLike) -> bytes (None stays None); what names the
    argument when p is not a path or cannot be encoded."""
    if p is None:
        return None
    try:
        return os.fsencode(os.fspath(p))
    except TypeError:
        raise ArgTypeError(f"{what} must be a path (str or os.PathLike), got "
                           f"{type(p).__name__}") from None
    except UnicodeEncodeError as e:
        raise ArgValueError(f"{what}: cannot encode character at position {e.start} for the "
                            "file system") from None


class Param:
    """One parameter of a C parameter list: its state_dict name, shape and the
    addresses of its data and gradient (owned by the C object)."""
    __slots__ = ("name", "shape", "data", "grad", "numel")

    def __init__(self, plist, i):
        dims = (c_int64 * 4)()
        nd = lib.attn_h_param_shape(plist, i, dims)
        self.name = lib.attn_h_param_name(plist, i).decode()
        self.shape = tuple(int(dims[d]) for d in range(nd))
        self.data = lib.attn_h_param_data(plist, i)
        self.grad = lib.attn_h_param_grad(plist, i)
        n = 1
        for d in self.shape:
            n *= d
        self.numel = n


def params(plist):
    """The parameters of a C parameter list, in state_dict order."""
    return [Param(plist, i) for i in range(lib.attn_h_param_count(plist))]
